//! Matching one PolicyRule, one Subject, as kube-apiserver's RBAC does
//! (`rbac/v1/evaluation_helpers.go`, `rbac.appliesToUser`).
//!
//! Rules are evaluated on the stored `serde_json::Value` itself, borrowing
//! every string: nothing is parsed or allocated per request.

use crate::request_info::RequestInfo;
use crate::UserInfo;
use serde_json::Value;

/// The strings of the array `value[key]` (non-strings and a missing key give
/// nothing, as a Go nil slice would).
pub(crate) fn strs<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a str> + 'a {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `value[key]` as a string, empty when missing.
pub(crate) fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Does `rule` allow the request `info` (`RuleAllows`)?
pub(crate) fn rule_allows(info: &RequestInfo, rule: &Value) -> bool {
    if !verb_matches(rule, &info.verb) {
        return false;
    }
    if !info.is_resource_request {
        return non_resource_url_matches(rule, &info.path);
    }
    api_group_matches(rule, &info.api_group)
        && resource_matches(rule, &info.resource, &info.subresource)
        && resource_name_matches(rule, &info.name)
}

fn verb_matches(rule: &Value, verb: &str) -> bool {
    strs(rule, "verbs").any(|v| v == "*" || v == verb)
}

fn api_group_matches(rule: &Value, group: &str) -> bool {
    strs(rule, "apiGroups").any(|g| g == "*" || g == group)
}

/// `*`, the exact `resource[/subresource]`, or `*/subresource`. Note that
/// kube-apiserver has no `pods/*` form: such a rule matches only a
/// subresource literally called `*`.
fn resource_matches(rule: &Value, resource: &str, subresource: &str) -> bool {
    strs(rule, "resources").any(|r| {
        if r == "*" {
            return true;
        }
        let exact = if subresource.is_empty() {
            r == resource
        } else {
            r.len() == resource.len() + 1 + subresource.len()
                && r.starts_with(resource)
                && r[resource.len()..].starts_with('/')
                && r.ends_with(subresource)
        };
        exact || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

/// No resourceNames matches every request; otherwise the request must name
/// one of them, so a create, list, watch or deletecollection never matches.
fn resource_name_matches(rule: &Value, name: &str) -> bool {
    let mut names = strs(rule, "resourceNames").peekable();
    names.peek().is_none() || names.any(|n| n == name)
}

/// `*`, the exact path, or a prefix ending in `*`.
fn non_resource_url_matches(rule: &Value, path: &str) -> bool {
    strs(rule, "nonResourceURLs").any(|url| {
        url == "*"
            || url == path
            || url
                .strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
    })
}

/// The first subject of `binding` that is `user` (`appliesTo`), with the
/// binding's namespace (empty for a ClusterRoleBinding) defaulting a
/// ServiceAccount subject's namespace.
pub(crate) fn applies_to<'a>(user: &UserInfo, binding: &'a Value, binding_namespace: &str) -> Option<&'a Value> {
    binding
        .get("subjects")
        .and_then(Value::as_array)?
        .iter()
        .find(|subject| subject_is(user, subject, binding_namespace))
}

fn subject_is(user: &UserInfo, subject: &Value, binding_namespace: &str) -> bool {
    let name = str_of(subject, "name");
    match str_of(subject, "kind") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let namespace = match str_of(subject, "namespace") {
                "" => binding_namespace,
                ns => ns,
            };
            !namespace.is_empty() && is_service_account(&user.name, namespace, name)
        }
        _ => false,
    }
}

/// `system:serviceaccount:<namespace>:<name>` without allocating.
fn is_service_account(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

/// How kube-apiserver names a subject in an "allowed by" reason.
pub(crate) fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let kind = str_of(subject, "kind");
    let name = str_of(subject, "name");
    if kind == "ServiceAccount" {
        let namespace = match str_of(subject, "namespace") {
            "" => binding_namespace,
            ns => ns,
        };
        return format!("{kind} {}", go_quote(&format!("{name}/{namespace}")));
    }
    format!("{kind} {}", go_quote(name))
}

/// Go's `%q` (`strconv.Quote`): how kube-apiserver quotes names in messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
