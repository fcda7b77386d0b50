//! When one role is narrower than another: every rule of the narrower one
//! is covered by a single rule of the other, read as RBAC reads rules
//! (`*` covers anything; `*/<subresource>` covers that subresource of any
//! resource; an empty `resourceNames` covers every name; a
//! `nonResourceURLs` entry ending in `*` covers what starts with it). A
//! role that reveals Secret values is never narrower than one that does
//! not, whatever its rules: revealing is a property of the role, not of a
//! rule. The consent page offers these roles in place of a grant's own.
//!
//! Covering rule by rule is stricter than covering the union (two rules of
//! the parent that together cover one of the candidate's are not enough),
//! so a role is sometimes not offered where it could be, never the
//! reverse.

use super::Role;
use serde_json::Value;

impl Role {
    /// Does `parent` allow everything this role allows (and reveal Secret
    /// values if this one does)?
    pub fn is_within(&self, parent: &Role) -> bool {
        if self.reveals_secrets && !parent.reveals_secrets {
            return false;
        }
        self.rules
            .iter()
            .all(|rule| parent.rules.iter().any(|p| rule_within(rule, p)))
    }
}

/// The roles of `catalogue` narrower than `role` (itself left out), in the
/// catalogue's order.
pub fn narrower(role: &Role, catalogue: &[Role]) -> Vec<String> {
    catalogue
        .iter()
        .filter(|candidate| candidate.name != role.name && candidate.is_within(role))
        .map(|candidate| candidate.name.clone())
        .collect()
}

/// Is everything `rule` allows allowed by `parent` alone?
fn rule_within(rule: &Value, parent: &Value) -> bool {
    let verbs = covered(&strings(rule, "verbs"), &strings(parent, "verbs"), plain);
    let resources = strings(rule, "resources");
    let urls = strings(rule, "nonResourceURLs");
    let resource_part = resources.is_empty() || {
        let groups = covered(&strings(rule, "apiGroups"), &strings(parent, "apiGroups"), plain);
        let names = names_within(&strings(rule, "resourceNames"), &strings(parent, "resourceNames"));
        groups && names && covered(&resources, &strings(parent, "resources"), resource)
    };
    let url_part = urls.is_empty() || covered(&urls, &strings(parent, "nonResourceURLs"), url);
    // A rule that names nothing allows nothing, and is covered by anything.
    (resources.is_empty() && urls.is_empty()) || (verbs && resource_part && url_part)
}

/// A field's strings (absent is none).
fn strings<'r>(rule: &'r Value, key: &str) -> Vec<&'r str> {
    rule[key]
        .as_array()
        .map(|values| values.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Is each of `wanted` covered by one of `held`, as `covers` judges?
fn covered(wanted: &[&str], held: &[&str], covers: fn(&str, &str) -> bool) -> bool {
    wanted.iter().all(|w| held.iter().any(|h| covers(h, w)))
}

/// An apiGroup or verb: `*`, or the same word.
fn plain(held: &str, wanted: &str) -> bool {
    held == "*" || held == wanted
}

/// A resource, with its subresource (`pods/log`): `*` covers every
/// resource and subresource, `*/log` every `log` subresource.
fn resource(held: &str, wanted: &str) -> bool {
    if held == "*" || held == wanted {
        return true;
    }
    match (held.strip_prefix("*/"), wanted.split_once('/')) {
        (Some(sub), Some((_, wanted_sub))) => sub == wanted_sub,
        _ => false,
    }
}

/// A non-resource URL: `*` at the end of the held one covers what starts
/// with the part before it.
fn url(held: &str, wanted: &str) -> bool {
    match held.strip_suffix('*') {
        Some(prefix) => wanted.starts_with(prefix),
        None => held == wanted,
    }
}

/// resourceNames: the parent's empty list covers every name; otherwise the
/// candidate must name only names the parent names.
fn names_within(wanted: &[&str], held: &[&str]) -> bool {
    held.is_empty() || (!wanted.is_empty() && wanted.iter().all(|w| held.contains(w)))
}

#[cfg(test)]
mod tests {
    use super::super::builtin;
    use super::*;
    use serde_json::json;

    fn role(name: &str) -> Role {
        builtin().into_iter().find(|r| r.name == name).unwrap()
    }

    fn custom(name: &str, rules: Vec<Value>, reveals: bool) -> Role {
        Role {
            name: name.into(),
            rules,
            reveals_secrets: reveals,
            namespaced: false,
            max_duration: None,
        }
    }

    #[test]
    fn viewer_is_narrower_than_developer_and_developer_is_not_narrower_than_viewer() {
        assert!(role("viewer").is_within(&role("developer")));
        assert!(!role("developer").is_within(&role("viewer")));
        assert!(role("viewer").is_within(&role("debugger")));
        assert!(
            !role("debugger").is_within(&role("developer")),
            "exec is not a developer's"
        );
    }

    #[test]
    fn the_narrower_roles_of_each_builtin_role_are_computed_from_the_rules() {
        let catalogue = builtin();
        let of = |name: &str| narrower(&role(name), &catalogue);
        assert_eq!(of("viewer"), Vec::<String>::new());
        assert_eq!(of("developer"), ["viewer"]);
        assert_eq!(of("debugger"), ["viewer"]);
        assert_eq!(of("secrets-reader"), Vec::<String>::new());
        assert_eq!(of("admin"), ["viewer", "developer", "debugger", "secrets-reader"]);
        assert_eq!(
            of("cluster-admin"),
            ["viewer", "developer", "debugger", "secrets-reader", "admin"]
        );
    }

    #[test]
    fn a_role_that_reveals_secrets_is_never_narrower_than_one_that_does_not() {
        let reads_configmaps = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
        let revealing = custom("config-peek", vec![reads_configmaps.clone()], true);
        assert!(
            !revealing.is_within(&role("viewer")),
            "its rules alone would be covered"
        );
        assert!(custom("config-peek", vec![reads_configmaps], false).is_within(&role("viewer")));
        assert!(!role("secrets-reader").is_within(&role("developer")));
        assert!(role("secrets-reader").is_within(&role("admin")));
    }

    #[test]
    fn a_custom_role_is_narrower_when_one_rule_covers_each_of_its_rules() {
        let logs = custom(
            "log-reader",
            vec![json!({"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]})],
            false,
        );
        let mut catalogue = builtin();
        catalogue.push(logs.clone());
        assert_eq!(narrower(&role("viewer"), &catalogue), ["log-reader"]);
        assert!(!role("viewer").is_within(&logs));
        let named = custom(
            "one-deployment",
            vec![
                json!({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"], "verbs": ["get"]}),
            ],
            false,
        );
        assert!(named.is_within(&role("viewer")), "names narrow a rule");
        assert!(!role("viewer").is_within(&named));
        let other_name = custom(
            "other",
            vec![
                json!({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["db"], "verbs": ["get"]}),
            ],
            false,
        );
        assert!(!other_name.is_within(&named));
        let healthz = custom(
            "healthz",
            vec![json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]})],
            false,
        );
        assert!(!healthz.is_within(&role("admin")), "admin has no non-resource URLs");
        assert!(healthz.is_within(&role("cluster-admin")));
    }

    #[test]
    fn a_wildcard_covers_anything_but_is_covered_only_by_a_wildcard() {
        let apps_reader = custom(
            "apps-reader",
            vec![json!({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get"]})],
            false,
        );
        assert!(!apps_reader.is_within(&role("viewer")), "* is more than viewer's list");
        assert!(apps_reader.is_within(&role("admin")));
        let any_verb = custom(
            "pods-all",
            vec![json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]})],
            false,
        );
        assert!(!any_verb.is_within(&role("developer")));
        let scale = custom(
            "scaler",
            vec![json!({"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["update"]})],
            false,
        );
        let any_scale = custom(
            "any-scale",
            vec![json!({"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["update"]})],
            false,
        );
        assert!(scale.is_within(&any_scale), "*/scale covers deployments/scale");
        assert!(!any_scale.is_within(&scale));
        assert!(scale.is_within(&role("developer")));
        let metrics = custom(
            "metrics",
            vec![json!({"nonResourceURLs": ["/metrics/cadvisor"], "verbs": ["get"]})],
            false,
        );
        let all_metrics = custom(
            "all-metrics",
            vec![json!({"nonResourceURLs": ["/metrics*"], "verbs": ["get"]})],
            false,
        );
        assert!(metrics.is_within(&all_metrics));
        assert!(!all_metrics.is_within(&metrics));
    }
}
