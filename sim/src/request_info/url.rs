//! The two pieces of Go's `net/url` that kube-apiserver's request info
//! sees: `URL.Path` (the decoded path) and `url.ParseQuery` (what
//! `req.URL.Query()` returns).

/// Go's `unescape(s, encodePath)`: every `%XX` becomes its byte, `+` stays
/// a plus; `None` when a `%` is not followed by two hex digits. Bytes that
/// are not UTF-8 become U+FFFD.
pub fn unescape_path(raw: &str) -> Option<String> {
    unescape(raw, false)
}

/// Go's limit on a query's parameters (`net/url` since Go 1.24.12 and
/// 1.25.6; kube-apiserver 1.37 is built with Go 1.26).
const MAX_PARAMS: usize = 10_000;

/// Go's `url.ParseQuery`, keeping the order: pairs split on `&`; a pair
/// with a `;` anywhere is dropped, as is one whose key or value has a
/// malformed escape; `+` is a space; a key without `=` has the empty value.
/// A query of more than 10,000 parameters (`&`s plus one) is an error,
/// which `URL.Query()` answers with no parameters at all.
pub fn parse_query(raw: &str) -> Vec<(String, String)> {
    if raw.matches('&').count() + 1 > MAX_PARAMS {
        return Vec::new();
    }
    raw.split('&')
        .filter(|pair| !pair.contains(';') && !pair.is_empty())
        .filter_map(|pair| {
            let (key, value) = match pair.find('=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, ""),
            };
            Some((unescape(key, true)?, unescape(value, true)?))
        })
        .collect()
}

/// Percent-decoding as Go does it; in a query component `+` is a space.
fn unescape(text: &str, query_component: bool) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        rest = tail;
        bytes.push(match byte {
            b'%' => {
                let [high, low, ..] = *rest else { return None };
                rest = &rest[2..];
                hex(high)? << 4 | hex(low)?
            }
            b'+' if query_component => b' ',
            other => other,
        });
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|d| d as u8)
}
