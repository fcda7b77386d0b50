//! apimachinery's `fields.ParseSelector(s).RequiresExactMatch(field)`, the
//! only part of field selectors request info needs.

/// The selector does not parse: the list options do not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed;

/// The value `field` must equal under `selector`, `None` when the selector
/// parses but does not pin `field`.
///
/// Go splits the selector into terms at commas not escaped by `\`, sorts
/// the terms, and parses each as `lhs op rhs` at the first operator (`!=`,
/// `==` or `=`, tried in that order at each position). The right side is
/// unescaped (`\\`, `\,`, `\=`; any other escape, a bare `,` or `=`, or a
/// trailing `\` fails the parse). The first `=` or `==` term on `field`, in
/// sorted order, gives the value.
pub fn exact_match(selector: &str, field: &str) -> Result<Option<String>, Malformed> {
    let mut terms = terms(selector);
    terms.sort_unstable();
    let mut found = None;
    for term in terms.into_iter().filter(|term| !term.is_empty()) {
        let (lhs, op, rhs) = split_term(term).ok_or(Malformed)?;
        let value = unescape_value(rhs)?;
        if found.is_none() && op != "!=" && lhs == field {
            found = Some(value);
        }
    }
    Ok(found)
}

/// Terms separated by unescaped commas, escapes kept.
fn terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (at, c) in selector.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&selector[start..at]);
            start = at + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    term.char_indices().find_map(|(at, _)| {
        let rest = &term[at..];
        ["!=", "==", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .map(|op| (&term[..at], op, &rest[op.len()..]))
    })
}

fn unescape_value(raw: &str) -> Result<String, Malformed> {
    let mut value = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => value.push(escaped),
                _ => return Err(Malformed),
            },
            ',' | '=' => return Err(Malformed),
            other => value.push(other),
        }
    }
    Ok(value)
}
