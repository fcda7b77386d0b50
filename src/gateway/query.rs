//! Query parameters decoded exactly as kube-apiserver decodes them.
//!
//! portcullis and the API server must agree on what a request is: a `?watch`
//! that the server streams but portcullis reads as a list would reach the
//! caller unredacted. So the rules here are Go's and apimachinery's, not
//! `application/x-www-form-urlencoded`'s:
//!
//! - [`Query::parse`] is Go's `url.ParseQuery` (what `req.URL.Query()`
//!   gives the server): pairs split on `&`; a pair containing `;` anywhere
//!   is dropped; a pair whose key or value has a bad `%` escape is dropped;
//!   `+` is a space; a key without `=` has the empty value.
//! - A boolean parameter (`watch`, `follow`, `sendInitialEvents`,
//!   `allowWatchBookmarks`) is apimachinery's `Convert_Slice_string_To_bool`:
//!   only its first value counts, and anything but `0` or `false` (any
//!   case) is true, the empty string included. So `?watch`, `?watch=` and
//!   `?watch=yes` are watches.
//! - `dryRun` is a list: the server runs a dry run when it is present and
//!   every value is `All` (any other value is refused with 400).
//! - A list or watch whose `fieldSelector` requires `metadata.name=<n>` is
//!   about the object `n` (RequestInfoFactory), when the list options
//!   decode at all and `n` is a valid path segment.

use std::borrow::Cow;

/// A request's query, as the API server sees it. It borrows the raw
/// query and decodes pairs as they are read: classification reads it on
/// every request, and most queries (`limit=500`, `fieldManager=kubectl`)
/// need no copy at all.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Query<'q> {
    raw: &'q str,
}

/// Go's `strings.EqualFold(text, ascii)` for a lower-case ASCII `ascii`:
/// besides ASCII case, Unicode's simple folding takes the long s (`ſ`) as
/// `s` and the Kelvin sign as `k`, so `falſe` is `false` to the API server.
fn go_equal_fold(text: &str, ascii: &str) -> bool {
    let folded = text.chars().map(|c| match c {
        '\u{17F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    });
    folded.eq(ascii.chars())
}

impl<'q> Query<'q> {
    /// A raw query string (without `?`), read as Go's `url.ParseQuery`.
    pub fn parse(raw: Option<&'q str>) -> Query<'q> {
        Query {
            raw: raw.unwrap_or_default(),
        }
    }

    /// The pairs Go keeps, decoded, in order.
    fn pairs(self) -> impl Iterator<Item = (Cow<'q, str>, Cow<'q, str>)> {
        self.raw
            .split('&')
            .filter(|pair| !pair.is_empty() && !pair.contains(';'))
            .filter_map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                Some((unescape(key)?, unescape(value)?))
            })
    }

    /// Every value of `name`, in order.
    pub fn values<'n>(self, name: &'n str) -> impl Iterator<Item = Cow<'q, str>> + 'n
    where
        'q: 'n,
    {
        self.pairs().filter(move |(k, _)| k == name).map(|(_, v)| v)
    }

    /// The first value of `name`: the one the server decodes.
    pub fn first(self, name: &str) -> Option<Cow<'q, str>> {
        self.values(name).next()
    }

    /// A boolean option: absent is false; `0` and `false` (in any case, as
    /// Go's `strings.EqualFold` reads it) are false; anything else, the
    /// empty string included, is true.
    pub fn flag(self, name: &str) -> bool {
        self.first(name)
            .is_some_and(|v| v != "0" && !go_equal_fold(&v, "false"))
    }

    /// `?watch` in any spelling the server takes as a watch.
    pub fn watch(self) -> bool {
        self.flag("watch")
    }

    /// `dryRun=All` (and no other value): the server stores nothing.
    pub fn dry_run(self) -> bool {
        let mut values = self.values("dryRun").peekable();
        values.peek().is_some() && values.all(|v| v == "All")
    }

    /// The object a list or watch names through `fieldSelector`
    /// (`metadata.name=<n>`), as RequestInfoFactory takes it: only when the
    /// list options decode, and only a valid path segment name.
    pub fn selected_name(self) -> Option<String> {
        if !self.list_options_decode() {
            return None;
        }
        let name = exact_name(&self.first("fieldSelector")?).ok()??;
        valid_path_segment(&name).then_some(name)
    }

    /// Would `metav1.ListOptions` decode from this query? Only the integer
    /// options and the field selector can fail here. (A malformed
    /// `labelSelector` also fails on the server; portcullis does not parse
    /// label selectors, and the server refuses such a list with 400 anyway.)
    fn list_options_decode(self) -> bool {
        let integer = |name: &str| self.first(name).is_none_or(|v| v.parse::<i64>().is_ok());
        integer("limit")
            && integer("timeoutSeconds")
            && self.first("fieldSelector").is_none_or(|s| exact_name(&s).is_ok())
    }
}

/// `raw` with `terms` required by its field selector as well: joined to
/// the first `fieldSelector` (the one the server reads) with a comma, or
/// added as one. Every other pair stays as sent.
pub fn with_field_selector(raw: Option<&str>, terms: &str) -> String {
    let raw = raw.unwrap_or_default();
    let encoded = |selector: &str| form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>();
    let mut out = String::with_capacity(raw.len() + terms.len() * 2 + 16);
    let mut joined = false;
    for pair in raw.split('&').filter(|pair| !pair.is_empty()) {
        if !out.is_empty() {
            out.push('&');
        }
        let read = (!joined && !pair.contains(';'))
            .then(|| pair.split_once('=').unwrap_or((pair, "")))
            .and_then(|(key, value)| Some((unescape(key)?, unescape(value)?)));
        match read {
            Some((key, value)) if key == "fieldSelector" => {
                let selector = if value.is_empty() {
                    terms.to_string()
                } else {
                    format!("{value},{terms}")
                };
                out.push_str("fieldSelector=");
                out.push_str(&encoded(&selector));
                joined = true;
            }
            _ => out.push_str(pair),
        }
    }
    if !joined {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str("fieldSelector=");
        out.push_str(&encoded(terms));
    }
    out
}

/// Go's `url.QueryUnescape`: `+` is a space, `%XX` a byte; a malformed
/// escape is `None` (Go drops the pair). Bytes that are not UTF-8 become
/// U+FFFD: Go keeps them, and neither side can read them as `0`, `false`,
/// `All` or a parameter name. Text with nothing to decode is borrowed.
fn unescape(text: &str) -> Option<Cow<'_, str>> {
    if !text.contains(['%', '+']) {
        return Some(Cow::Borrowed(text));
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    Some(Cow::Owned(String::from_utf8_lossy(&out).into_owned()))
}

/// The selector could not be parsed (apimachinery's `fields.ParseSelector`).
#[derive(Debug, PartialEq, Eq)]
struct BadSelector;

/// The value `metadata.name` must equal under a field selector, as
/// `fields.ParseSelector(s).RequiresExactMatch("metadata.name")`: terms are
/// split on unescaped commas and sorted; the first `=` or `==` term on
/// `metadata.name` wins.
fn exact_name(selector: &str) -> Result<Option<String>, BadSelector> {
    let mut terms = split_terms(selector);
    terms.sort_unstable();
    let mut found = None;
    for term in terms.into_iter().filter(|t| !t.is_empty()) {
        let (field, op, value) = split_term(term).ok_or(BadSelector)?;
        let value = unescape_selector_value(value)?;
        if found.is_none() && op != "!=" && field == "metadata.name" {
            found = Some(value);
        }
    }
    Ok(found)
}

fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in selector.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// The first operator found, trying `!=`, `==`, `=` at each position.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    (0..term.len()).filter(|i| term.is_char_boundary(*i)).find_map(|i| {
        ["!=", "==", "="]
            .into_iter()
            .find(|op| term[i..].starts_with(op))
            .map(|op| (&term[..i], op, &term[i + op.len()..]))
    })
}

/// `fields.UnescapeValue`: `\\`, `\,` and `\=` are the only escapes, and an
/// unescaped `,` or `=` is an error.
fn unescape_selector_value(value: &str) -> Result<String, BadSelector> {
    let mut out = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        match c {
            '\\' | ',' | '=' if escaped => {
                out.push(c);
                escaped = false;
            }
            _ if escaped => return Err(BadSelector),
            '\\' => escaped = true,
            ',' | '=' => return Err(BadSelector),
            _ => out.push(c),
        }
    }
    if escaped {
        return Err(BadSelector);
    }
    Ok(out)
}

/// apimachinery's `path.IsValidPathSegmentName`.
fn valid_path_segment(name: &str) -> bool {
    !matches!(name, "." | "..") && !name.contains('/') && !name.contains('%')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_join_the_field_selector_the_server_reads_or_become_one() {
        let terms = "metadata.namespace!=portcullis";
        let read = |raw: &str| Query::parse(Some(raw)).first("fieldSelector").map(|v| v.into_owned());
        let joined = with_field_selector(Some("limit=5&fieldSelector=metadata.namespace%3Dportcullis"), terms);
        assert_eq!(
            read(&joined).as_deref(),
            Some("metadata.namespace=portcullis,metadata.namespace!=portcullis")
        );
        assert!(joined.starts_with("limit=5&"), "{joined}");
        let added = with_field_selector(Some("watch=1"), terms);
        assert_eq!(read(&added).as_deref(), Some(terms));
        assert!(Query::parse(Some(&added)).watch());
        assert_eq!(read(&with_field_selector(None, terms)).as_deref(), Some(terms));
        assert_eq!(
            read(&with_field_selector(Some("fieldSelector="), terms)).as_deref(),
            Some(terms)
        );
        // A pair Go drops is not the one read: the terms come as one of their own.
        let dropped = with_field_selector(Some("fieldSelector=a%zz&fieldSelector;x=1"), terms);
        assert_eq!(read(&dropped).as_deref(), Some(terms), "{dropped}");
    }

    fn query(raw: &str) -> Query<'_> {
        Query::parse(Some(raw))
    }

    #[test]
    fn watch_is_true_for_anything_but_0_or_false_in_the_first_value() {
        for raw in [
            "watch",
            "watch=",
            "watch=1",
            "watch=t",
            "watch=true",
            "watch=TRUE",
            "watch=yes",
            "watch=no",
            "watch=%30%30",
            "watch=+",
            "watch=1&watch=0",
            "limit=5&watch",
            "wat%63h=1",
            "watch=%ff",
            "watch=fal%C5%BF",
            "watch=fal%C5%BFe%C5%BF",
        ] {
            assert!(query(raw).watch(), "{raw} is a watch");
        }
        for raw in [
            "",
            "watch=0",
            "watch=false",
            "watch=FALSE",
            "watch=fAlSe",
            "watch=fal%C5%BFe",
            "watch=FAL%C5%BFE",
            "watch=0&watch=1",
            "watch=%30",
            "watching=1",
            "Watch=1",
            "watch=1;",
            "watch;x=1",
            "watch=%zz",
            "watch=%3",
            "watch=%+1",
        ] {
            assert!(!query(raw).watch(), "{raw} is not a watch");
        }
    }

    #[test]
    fn parsing_follows_gos_parse_query() {
        let q = query("a=1&&b&c=x+y&d=%41%2b&e=1;2&f=%&g==h");
        assert_eq!(q.first("a").as_deref(), Some("1"));
        assert_eq!(q.first("b").as_deref(), Some(""));
        assert_eq!(q.first("c").as_deref(), Some("x y"));
        assert_eq!(q.first("d").as_deref(), Some("A+"));
        assert_eq!(q.first("e").as_deref(), None, "a pair with a semicolon is dropped");
        assert_eq!(q.first("f").as_deref(), None, "a bad escape drops the pair");
        assert_eq!(
            q.first("g").as_deref(),
            Some("=h"),
            "the value starts after the first ="
        );
        assert_eq!(Query::parse(None), Query::default());
    }

    #[test]
    fn dry_run_is_all_values_being_all() {
        assert!(query("dryRun=All").dry_run());
        assert!(query("dryRun=All&dryRun=All").dry_run());
        assert!(query("fieldManager=x&dryRun=%41ll").dry_run());
        for raw in [
            "",
            "dryRun",
            "dryRun=",
            "dryRun=all",
            "dryRun=All&dryRun=x",
            "dryRun=All;",
        ] {
            assert!(!query(raw).dry_run(), "{raw}");
        }
    }

    #[test]
    fn a_field_selector_on_metadata_name_names_the_object() {
        let name = |raw: &str| query(raw).selected_name();
        assert_eq!(name("fieldSelector=metadata.name%3Ddb").as_deref(), Some("db"));
        assert_eq!(name("fieldSelector=metadata.name%3D%3Ddb").as_deref(), Some("db"));
        assert_eq!(name("fieldSelector=type%3Dx,metadata.name%3Ddb").as_deref(), Some("db"));
        // Terms are sorted before the first match is taken.
        assert_eq!(
            name("fieldSelector=metadata.name%3Db,metadata.name%3Da").as_deref(),
            Some("a")
        );
        assert_eq!(name("fieldSelector=metadata.name!%3Ddb"), None);
        assert_eq!(name("fieldSelector=metadata.namespace%3Ddb"), None);
        // Not a valid path segment, or the options do not decode.
        assert_eq!(name("fieldSelector=metadata.name%3D.."), None);
        assert_eq!(name("fieldSelector=metadata.name%3Da%2Fb"), None);
        assert_eq!(name("fieldSelector=metadata.name%3Ddb&limit=x"), None);
        assert_eq!(name("fieldSelector=metadata.name%3Ddb&timeoutSeconds=1.5"), None);
        assert_eq!(name("fieldSelector=metadata.name%3Dd%5Cb"), None, "bad escape");
        assert_eq!(name("fieldSelector=metadata.name%3Da%3Db"), None, "unescaped =");
        assert_eq!(name("fieldSelector=nonsense"), None);
        // Escapes that are allowed.
        assert_eq!(name("fieldSelector=metadata.name%3Da%5C%2Cb").as_deref(), Some("a,b"));
        // Only the first fieldSelector counts.
        assert_eq!(
            name("fieldSelector=metadata.name%3Da&fieldSelector=metadata.name%3Db").as_deref(),
            Some("a")
        );
    }

    #[test]
    fn a_flag_reads_like_apimachinery() {
        assert!(query("follow").flag("follow"));
        assert!(query("follow=yes").flag("follow"));
        assert!(!query("follow=0").flag("follow"));
        assert!(!query("").flag("follow"));
    }
}
