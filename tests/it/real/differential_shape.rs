//! How two answers to the same request are compared: status code, content
//! type, warnings, and the body: a Status by its reason, code and message,
//! another JSON body by its shape (keys present, absent or null, the JSON
//! type of each value) and, in the caller's own namespace, by its values and
//! list lengths too.
//!
//! Only what must differ between two servers is ignored; see [`IGNORED`].

use serde_json::{Map, Value};

/// Keys whose values differ between any two API servers, so only their
/// type is compared: identities (`uid`), etcd revisions (`resourceVersion`),
/// clocks (`creationTimestamp`, managedFields' `time`), the opaque
/// `continue` token (it encodes a revision), and the Service IPs the
/// allocator picks at random (`clusterIP`, `clusterIPs`).
pub const IGNORED: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "time",
    "continue",
    "clusterIP",
    "clusterIPs",
];

/// How closely a body is compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Depth {
    /// The caller's own namespace: values, keys, types and list lengths.
    Values,
    /// Cluster-wide reads, whose content differs by design (another set of
    /// objects, resources or versions): keys and types only, each list's
    /// elements merged into one shape.
    Shape,
}

/// One difference: where (`code`, `content-type`, `.metadata.name`, …) and
/// what each side had there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub location: String,
    pub real: String,
    pub sim: String,
}

impl Difference {
    pub fn new(location: impl Into<String>, real: impl Into<String>, sim: impl Into<String>) -> Self {
        Difference {
            location: location.into(),
            real: real.into(),
            sim: sim.into(),
        }
    }
}

/// Compare two JSON documents, appending what differs to `out`.
pub fn compare(depth: Depth, real: &Value, sim: &Value, out: &mut Vec<Difference>) {
    match depth {
        Depth::Values => walk("", real, sim, true, out),
        Depth::Shape => walk("", &merged(real), &merged(sim), false, out),
    }
}

fn walk(path: &str, real: &Value, sim: &Value, values: bool, out: &mut Vec<Difference>) {
    if type_name(real) != type_name(sim) {
        out.push(Difference::new(or_root(path), describe(real), describe(sim)));
        return;
    }
    match (real, sim) {
        (Value::Object(a), Value::Object(b)) => walk_object(path, a, b, values, out),
        (Value::Array(a), Value::Array(b)) => {
            if values && a.len() != b.len() {
                let location = format!("{path}[]");
                out.push(Difference::new(
                    location,
                    format!("{} items", a.len()),
                    format!("{} items", b.len()),
                ));
            }
            for (x, y) in a.iter().zip(b) {
                walk(&format!("{path}[]"), x, y, values, out);
            }
        }
        _ if values && normalise_value(real) != normalise_value(sim) => {
            out.push(Difference::new(or_root(path), describe(real), describe(sim)));
        }
        _ => {}
    }
}

fn walk_object(path: &str, a: &Map<String, Value>, b: &Map<String, Value>, values: bool, out: &mut Vec<Difference>) {
    let generated_name = a.contains_key("generateName");
    for (key, x) in a {
        let here = format!("{path}.{key}");
        match b.get(key) {
            None => out.push(Difference::new(here, describe(x), "absent")),
            Some(y) => {
                let ignored = IGNORED.contains(&key.as_str()) || (generated_name && key == "name");
                walk(&here, x, y, values && !ignored, out);
            }
        }
    }
    for (key, y) in b {
        if !a.contains_key(key) {
            out.push(Difference::new(format!("{path}.{key}"), "absent", describe(y)));
        }
    }
}

/// A document whose arrays hold one element: the union of their
/// elements' shapes (keys of every element; the first type seen per key).
fn merged(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), merged(v))).collect()),
        Value::Array(items) => {
            let mut union = None::<Value>;
            for item in items {
                union = Some(match union {
                    None => merged(item),
                    Some(acc) => union_of(acc, merged(item)),
                });
            }
            Value::Array(union.into_iter().collect())
        }
        other => other.clone(),
    }
}

fn union_of(acc: Value, next: Value) -> Value {
    match (acc, next) {
        (Value::Object(mut a), Value::Object(b)) => {
            for (k, v) in b {
                let joined = match a.remove(&k) {
                    Some(old) => union_of(old, v),
                    None => v,
                };
                a.insert(k, joined);
            }
            Value::Object(a)
        }
        (Value::Array(a), Value::Array(b)) => {
            let items: Vec<Value> = a.into_iter().chain(b).collect();
            merged(&Value::Array(items))
        }
        (Value::Null, other) => other,
        (acc, _) => acc,
    }
}

fn or_root(path: &str) -> String {
    if path.is_empty() {
        "body".into()
    } else {
        path.into()
    }
}

pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as a difference shows it: scalars in full (normalised),
/// containers by their type.
pub fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{:?}", normalise(s)),
        Value::Array(a) => format!("array of {}", a.len()),
        Value::Object(_) => "object".into(),
        other => other.to_string(),
    }
}

fn normalise_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(normalise(s)),
        other => other.clone(),
    }
}

/// What must differ inside a text: UUIDs become `<uid>`, the numbers of
/// resource versions (`resource version: 1 (4711)`) become `<rv>`, and a
/// Table's age cells (`3s`, `2m`) become `<age>`, and a Table's cluster
/// IP cell (the allocator picks it at random) becomes `<ip>`.
pub fn normalise(text: &str) -> String {
    if is_age(text) {
        return "<age>".into();
    }
    if text.parse::<std::net::Ipv4Addr>().is_ok() {
        return "<ip>".into();
    }
    let words: Vec<String> = split_keep(text).into_iter().map(|w| normalise_word(&w)).collect();
    let mut out = words.concat();
    for marker in ["resource version: ", "resourceVersion: ", "ResourceVersion: "] {
        out = numbers_after(&out, marker);
    }
    out
}

fn is_age(text: &str) -> bool {
    let Some(unit) = text.chars().last() else { return false };
    let digits = &text[..text.len() - unit.len_utf8()];
    matches!(unit, 's' | 'm' | 'h' | 'd') && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// Split into runs of UUID characters (hex and `-`) and the rest.
fn split_keep(text: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut last_kind = None;
    for c in text.chars() {
        let kind = c.is_ascii_hexdigit() || c == '-';
        if last_kind == Some(kind) {
            parts.last_mut().expect("a part").push(c);
        } else {
            parts.push(c.to_string());
        }
        last_kind = Some(kind);
    }
    parts
}

fn normalise_word(word: &str) -> String {
    let groups: Vec<&str> = word.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths == [8, 4, 4, 4, 12] {
        "<uid>".into()
    } else {
        word.into()
    }
}

/// Replace the number after each `marker`, and a number in parentheses
/// right after it (`too old resource version: 1 (4711)`), with `<rv>`.
fn numbers_after(text: &str, marker: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at + marker.len()]);
        rest = &rest[at + marker.len()..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("<rv>");
            rest = &rest[digits..];
            if let Some(inner) = rest.strip_prefix(" (") {
                let n = inner.chars().take_while(char::is_ascii_digit).count();
                if n > 0 && inner[n..].starts_with(')') {
                    out.push_str(" (<rv>)");
                    rest = &inner[n + 1..];
                }
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uids_and_resource_versions_in_messages_compare_equal() {
        let a = normalise("too old resource version: 1 (4711) for 123e4567-e89b-12d3-a456-426614174000");
        let b = normalise("too old resource version: 1 (12) for 00000000-0000-0000-0000-000000000001");
        assert_eq!(a, b);
        assert_eq!(a, "too old resource version: <rv> (<rv>) for <uid>");
    }

    #[test]
    fn a_missing_key_and_a_null_value_are_differences_but_an_ignored_value_is_not() {
        let mut out = Vec::new();
        compare(
            Depth::Values,
            &json!({"metadata": {"uid": "a", "labels": null}, "n": 1}),
            &json!({"metadata": {"uid": "b"}, "n": 2}),
            &mut out,
        );
        let locations: Vec<&str> = out.iter().map(|d| d.location.as_str()).collect();
        assert_eq!(locations, [".metadata.labels", ".n"]);
    }

    #[test]
    fn shape_depth_merges_list_elements_and_ignores_values_and_lengths() {
        let mut out = Vec::new();
        let real = json!({"items": [{"a": 1}, {"b": "x"}]});
        compare(Depth::Shape, &real, &json!({"items": [{"a": 2, "b": "y"}]}), &mut out);
        assert!(out.is_empty(), "{out:?}");
        compare(Depth::Shape, &real, &json!({"items": [{"a": 2}]}), &mut out);
        assert_eq!(out[0].location, ".items[].b");
    }
}
