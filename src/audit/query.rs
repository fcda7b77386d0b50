//! Audit filters, shared by `portcullis audit`, `GET /audit` and any
//! storage: a [`Filter`] says which rows, [`Filter::conditions`] says it in
//! storage-neutral terms that the SQLite (and later PostgreSQL) store
//! renders.

use super::row::AuditRow;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// Which rows to return. Every field set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Filter {
    /// Rows that started at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Rows that started before this time.
    pub until: Option<DateTime<Utc>>,
    /// Person's login or bot's name.
    pub login: Option<String>,
    /// Credential id, or a presented token's display prefix.
    pub credential: Option<String>,
    /// Cluster name.
    pub cluster: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Kubernetes verb.
    pub verb: Option<String>,
    /// Plural resource (`pods`), optionally with a subresource (`pods/exec`).
    pub resource: Option<String>,
    /// Allowed, denied, refused, error or write.
    pub outcome: Option<Outcome>,
    /// Agent session.
    pub session: Option<String>,
    /// MCP tool.
    pub tool: Option<String>,
    /// Audit id (the same as the API server's audit event id).
    pub id: Option<String>,
    /// What the row records: `alert` for bypass alerts (see
    /// `audit::bypass`); requests have none.
    pub kind: Option<String>,
    /// Include discovery requests (hidden by default: every kubectl command
    /// makes several).
    pub discovery: bool,
    /// At most this many rows: the newest ones, still listed oldest first;
    /// with `after`, the oldest ones after it (a page forward).
    pub limit: Option<usize>,
    /// Rows after this place in the chain (`seq`): to page forward from
    /// the last row read.
    pub after: Option<i64>,
}

/// A coarse outcome to filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Neither refused nor denied, and answered below 400.
    Allowed,
    /// Refused by portcullis, or 401/403 from the cluster.
    Denied,
    /// Refused by portcullis itself (a subset of denied).
    Refused,
    /// Any other failure (4xx, 5xx, or an unknown outcome).
    Error,
    /// create, update, patch, delete, deletecollection.
    Write,
}

/// One storage-neutral condition of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `column = value`.
    Equals(&'static str, String),
    /// `column >= time`.
    AtOrAfter(&'static str, DateTime<Utc>),
    /// `column < time`.
    Before(&'static str, DateTime<Utc>),
    /// `credential_id = value OR credential_prefix = value`.
    Credential(String),
    /// The outcome.
    Outcome(Outcome),
    /// Not a discovery request.
    NotDiscovery,
    /// `seq > value`: after a place in the chain.
    After(i64),
    /// A row of a kind (`kind <> ''`: not a request's): what the index by
    /// kind holds, said beside a kind's `Equals` so that the stores use it.
    OfAKind,
}

/// A filter that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// An unknown parameter name.
    #[error("unknown filter {0:?}: use since, until, login, credential, cluster, namespace, verb, resource, outcome, session, tool, id, kind, discovery, limit, after")]
    Unknown(String),
    /// A value that does not parse.
    #[error("filter {name}: {message}")]
    Value {
        /// The parameter.
        name: String,
        /// What is wrong.
        message: String,
    },
}

impl Filter {
    /// Parse URL query parameters (`?login=ana&outcome=denied&since=1h`).
    pub fn from_query(query: &str, now: DateTime<Utc>) -> Result<Filter, FilterError> {
        let mut filter = Filter::default();
        let mut seen = std::collections::HashSet::new();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let bad = |message: String| FilterError::Value {
                name: name.to_string(),
                message,
            };
            // Which one would count is a guess the reader of the answer
            // cannot see: `?id=A&id=` would list every row as A's.
            if !seen.insert(name.clone()) {
                return Err(bad("is given twice".into()));
            }
            let text = Some(value.to_string()).filter(|v| !v.is_empty());
            match &*name {
                "since" => filter.since = Some(parse_time(&value, now).map_err(bad)?),
                "until" => filter.until = Some(parse_time(&value, now).map_err(bad)?),
                "login" => filter.login = text,
                "credential" => filter.credential = text,
                "cluster" => filter.cluster = text,
                "namespace" => filter.namespace = text,
                "verb" => filter.verb = text,
                "resource" => filter.resource = text,
                "session" => filter.session = text,
                "tool" => filter.tool = text,
                "id" => filter.id = text,
                "kind" => filter.kind = text,
                "outcome" => {
                    let outcome = <Outcome as clap::ValueEnum>::from_str(&value, true);
                    filter.outcome =
                        Some(outcome.map_err(|_| bad("use allowed, denied, refused, error or write".into()))?);
                }
                "discovery" => filter.discovery = matches!(&*value, "" | "1" | "true"),
                "limit" => filter.limit = Some(value.parse().map_err(|_| bad("not a number".into()))?),
                "after" => filter.after = Some(value.parse().map_err(|_| bad("not a row's seq".into()))?),
                other => return Err(FilterError::Unknown(other.to_string())),
            }
        }
        Ok(filter)
    }

    /// The filter as conditions, all of which must hold.
    pub fn conditions(&self) -> Vec<Condition> {
        let mut out = Vec::new();
        let equals = [
            ("login", &self.login),
            ("cluster", &self.cluster),
            ("namespace", &self.namespace),
            ("verb", &self.verb),
            ("session", &self.session),
            ("tool", &self.tool),
            ("id", &self.id),
            ("kind", &self.kind),
        ];
        for (column, value) in equals {
            if let Some(value) = value {
                out.push(Condition::Equals(column, value.clone()));
            }
        }
        if self.kind.as_ref().is_some_and(|kind| !kind.is_empty()) {
            out.push(Condition::OfAKind);
        }
        if let Some(resource) = &self.resource {
            let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
            out.push(Condition::Equals("resource", resource.to_string()));
            if !subresource.is_empty() {
                out.push(Condition::Equals("subresource", subresource.to_string()));
            }
        }
        out.extend(self.credential.clone().map(Condition::Credential));
        out.extend(self.since.map(|t| Condition::AtOrAfter("started_at", t)));
        out.extend(self.until.map(|t| Condition::Before("started_at", t)));
        out.extend(self.outcome.map(Condition::Outcome));
        if !self.discovery && self.id.is_none() {
            out.push(Condition::NotDiscovery);
        }
        out.extend(self.after.map(Condition::After));
        out
    }

    /// Does `row` match? (The same rules as the stores' queries, for tests
    /// and in-memory use.)
    pub fn matches(&self, row: &AuditRow) -> bool {
        self.conditions().iter().all(|condition| match condition {
            Condition::Equals(column, value) => field(row, column) == value,
            Condition::AtOrAfter(_, t) => row.started_at >= *t,
            Condition::Before(_, t) => row.started_at < *t,
            Condition::Credential(c) => &row.credential_id == c || &row.credential_prefix == c,
            Condition::Outcome(Outcome::Allowed) => !row.denied() && (1..400).contains(&row.code),
            Condition::Outcome(Outcome::Denied) => row.denied(),
            Condition::Outcome(Outcome::Refused) => !row.refused.is_empty(),
            Condition::Outcome(Outcome::Error) => !row.denied() && (row.code >= 400 || row.code == 0),
            Condition::Outcome(Outcome::Write) => row.write,
            Condition::NotDiscovery => !row.discovery,
            // A place in the chain is the store's, not the row's.
            Condition::After(_) => true,
            Condition::OfAKind => !row.kind.is_empty(),
        })
    }
}

fn field<'a>(row: &'a AuditRow, column: &str) -> &'a str {
    match column {
        "login" => &row.login,
        "cluster" => &row.cluster,
        "namespace" => &row.namespace,
        "verb" => &row.verb,
        "session" => &row.session,
        "tool" => &row.tool,
        "id" => &row.id,
        "kind" => &row.kind,
        "resource" => &row.resource,
        "subresource" => &row.subresource,
        _ => "",
    }
}

/// A time: RFC 3339 (`2025-01-31T12:00:00Z`), or a duration ago (`90m`,
/// `24h`, `7d`).
pub fn parse_time(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let ago = humantime::parse_duration(text)
        .map_err(|_| format!("{text:?} is neither an RFC 3339 time nor a duration like 1h or 7d"))?;
    let too_far = || format!("{text:?} is further back than a time can be");
    let ago = chrono::TimeDelta::from_std(ago).map_err(|_| too_far())?;
    now.checked_sub_signed(ago).ok_or_else(too_far)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_given_twice_or_a_time_too_far_back_is_refused_by_name() {
        let now = Utc::now();
        for query in ["id=a&id=", "login=ana&login=ben", "since=1h&since=2h"] {
            let refused = Filter::from_query(query, now).unwrap_err();
            assert!(refused.to_string().contains("given twice"), "{query}: {refused}");
        }
        for query in ["since=300000y", "until=9999999999999d"] {
            let refused = Filter::from_query(query, now).unwrap_err();
            assert!(refused.to_string().contains("further back"), "{query}: {refused}");
        }
    }

    #[test]
    fn query_parameters_become_a_filter() {
        let now = Utc::now();
        let filter = Filter::from_query("login=ana&outcome=denied&since=1h&resource=pods/exec&limit=5", now).unwrap();
        assert_eq!(filter.login.as_deref(), Some("ana"));
        assert_eq!(filter.outcome, Some(Outcome::Denied));
        assert_eq!(filter.since, Some(now - chrono::TimeDelta::hours(1)));
        assert_eq!(filter.limit, Some(5));
        assert!(filter
            .conditions()
            .contains(&Condition::Equals("subresource", "exec".into())));
    }

    #[test]
    fn unknown_or_bad_parameters_are_refused_by_name() {
        let now = Utc::now();
        assert_eq!(
            Filter::from_query("user=ana", now),
            Err(FilterError::Unknown("user".into()))
        );
        let err = Filter::from_query("since=yesterday", now).unwrap_err();
        assert!(err.to_string().starts_with("filter since:"), "{err}");
        assert!(Filter::from_query("outcome=maybe", now).is_err());
    }

    #[test]
    fn discovery_is_hidden_unless_asked_for_or_named_by_id() {
        let mut row = AuditRow {
            discovery: true,
            id: "x".into(),
            ..AuditRow::default()
        };
        assert!(!Filter::default().matches(&row));
        assert!(Filter {
            discovery: true,
            ..Filter::default()
        }
        .matches(&row));
        assert!(Filter {
            id: Some("x".into()),
            ..Filter::default()
        }
        .matches(&row));
        row.discovery = false;
        assert!(Filter::default().matches(&row));
    }

    #[test]
    fn outcomes_partition_failures() {
        let denied = AuditRow {
            code: 403,
            ..AuditRow::default()
        };
        let refused = AuditRow {
            code: 400,
            refused: "path".into(),
            ..AuditRow::default()
        };
        let error = AuditRow {
            code: 409,
            ..AuditRow::default()
        };
        let ok = AuditRow {
            code: 200,
            write: true,
            ..AuditRow::default()
        };
        let only = |o| Filter {
            outcome: Some(o),
            ..Filter::default()
        };
        assert!(only(Outcome::Denied).matches(&denied) && only(Outcome::Denied).matches(&refused));
        assert!(!only(Outcome::Error).matches(&denied) && only(Outcome::Error).matches(&error));
        assert!(!only(Outcome::Error).matches(&ok) && only(Outcome::Write).matches(&ok));
        assert!(only(Outcome::Allowed).matches(&ok) && !only(Outcome::Allowed).matches(&denied));
        assert!(!only(Outcome::Allowed).matches(&error) && !only(Outcome::Refused).matches(&denied));
        assert!(only(Outcome::Refused).matches(&refused));
    }
}
