//! Query parameters of a request, decoded once.

/// The decoded query string.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decode a raw query string as `req.URL.Query()` does, so a handler
    /// reads the parameters the request's classification read.
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = crate::request_info::parse_query(raw.unwrap_or_default());
        Query { pairs }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Every value of `key`.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Is `key` present at all?
    pub fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    /// `key` read as Go's `strconv.ParseBool` does (absent or unparsable:
    /// false).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
    }

    /// `key` as an unsigned number, `None` if absent or not a number.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|v| v.parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_percent_decoded_and_repeatable() {
        let q = Query::parse(Some("labelSelector=app%3Dweb&dryRun=All&dryRun=x&watch=1"));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert_eq!(q.all("dryRun"), ["All", "x"]);
        assert!(q.flag("watch") && !q.flag("missing"));
    }
}
