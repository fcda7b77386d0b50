//! RBAC evaluation from stored Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding objects (`rbac.authorization.k8s.io/v1`), as
//! kube-apiserver's `RBACAuthorizer` does it.
//!
//! Order of evaluation, as in kube-apiserver: members of `system:masters`
//! are allowed everything (the API server's privileged-group authorizer,
//! which runs before RBAC, so they keep access even without the
//! `cluster-admin` binding); then every ClusterRoleBinding naming the user
//! (its ClusterRole applies cluster-wide); then, for a namespaced request,
//! every RoleBinding in that namespace naming the user (its Role or
//! ClusterRole applies in that namespace only). The first rule that allows
//! wins; there are no deny rules. A binding whose role is missing adds
//! `RBAC: clusterrole.rbac.authorization.k8s.io "x" not found` to the 403
//! (use [`check`] to get it; [`forbidden`] alone cannot know it).
//!
//! Rules are matched on the stored JSON directly (borrowed strings, no
//! per-request parsing), which keeps a check in the low microseconds.
//!
//! # Known differences from kube-apiserver
//!
//! - `aggregationRule` is ignored: a ClusterRole's own `rules` are used. The
//!   bootstrap `admin`, `edit` and `view` roles therefore carry their
//!   aggregated rules themselves, as the stored objects in a real cluster do
//!   after the aggregation controller ran, but a new ClusterRole labelled
//!   `rbac.authorization.k8s.io/aggregate-to-view` does not extend `view`.
//! - No escalation check: anyone allowed to create a Role or binding may
//!   grant rights they do not hold themselves.
//! - No Node or webhook authorizers.

// The interfaces return `Status` by value, as the server expects; the
// error path is cold, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

mod bootstrap;
mod messages;
mod rules;

pub use bootstrap::bootstrap_objects;
pub use messages::forbidden_with_reason;
pub use rules::go_quote;

use super::UserInfo;
use crate::request_info::RequestInfo;
use crate::status::Status;
use rules::{applies_to, describe_subject, rule_allows, str_of, strs};
use serde_json::{json, Value};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Where RBAC objects come from (the store implements it).
pub trait RbacObjects: Send + Sync {
    /// All ClusterRoles.
    fn cluster_roles(&self) -> Vec<Arc<Value>>;
    /// All ClusterRoleBindings.
    fn cluster_role_bindings(&self) -> Vec<Arc<Value>>;
    /// Roles in `namespace`.
    fn roles(&self, namespace: &str) -> Vec<Arc<Value>>;
    /// RoleBindings in `namespace`.
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<Value>>;
}

/// A fixed set of RBAC objects, sorted by kind: for tests and for callers
/// without a store.
#[derive(Debug, Clone, Default)]
pub struct StaticObjects {
    cluster_roles: Vec<Arc<Value>>,
    cluster_role_bindings: Vec<Arc<Value>>,
    roles: HashMap<String, Vec<Arc<Value>>>,
    role_bindings: HashMap<String, Vec<Arc<Value>>>,
}

impl StaticObjects {
    /// Sort `objects` by `kind`; objects of other kinds are ignored.
    pub fn new(objects: impl IntoIterator<Item = Value>) -> Self {
        let mut all = StaticObjects::default();
        for object in objects {
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or("").to_string();
            match object["kind"].as_str() {
                Some("ClusterRole") => all.cluster_roles.push(Arc::new(object)),
                Some("ClusterRoleBinding") => all.cluster_role_bindings.push(Arc::new(object)),
                Some("Role") => all.roles.entry(namespace).or_default().push(Arc::new(object)),
                Some("RoleBinding") => all.role_bindings.entry(namespace).or_default().push(Arc::new(object)),
                _ => {}
            }
        }
        all
    }
}

impl RbacObjects for StaticObjects {
    fn cluster_roles(&self) -> Vec<Arc<Value>> {
        self.cluster_roles.clone()
    }
    fn cluster_role_bindings(&self) -> Vec<Arc<Value>> {
        self.cluster_role_bindings.clone()
    }
    fn roles(&self, namespace: &str) -> Vec<Arc<Value>> {
        self.roles.get(namespace).cloned().unwrap_or_default()
    }
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<Value>> {
        self.role_bindings.get(namespace).cloned().unwrap_or_default()
    }
}

/// What the authorizer decided and its reason, as a SubjectAccessReview
/// reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed (RBAC never denies: not allowed means "no opinion").
    pub allowed: bool,
    /// `RBAC: allowed by ClusterRoleBinding "…" of ClusterRole "…" to Group
    /// "…"` when allowed; when refused, empty unless a binding that applies
    /// names a missing role.
    pub reason: String,
}

/// The group kube-apiserver's privileged-group authorizer allows everything.
const PRIVILEGED_GROUP: &str = "system:masters";

/// Evaluate RBAC for `user` doing what `info` describes.
pub fn authorize(objects: &dyn RbacObjects, user: &UserInfo, info: &RequestInfo) -> Decision {
    if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut errors = Vec::new();
    let mut allowed_by = None;
    visit_rules(objects, user, &info.namespace, &mut errors, |source, rule| {
        if rule_allows(info, rule) {
            allowed_by = Some(source.describe());
            return false;
        }
        true
    });
    match allowed_by {
        Some(source) => Decision {
            allowed: true,
            reason: format!("RBAC: allowed by {source}"),
        },
        None if errors.is_empty() => Decision {
            allowed: false,
            reason: String::new(),
        },
        None => Decision {
            allowed: false,
            reason: format!("RBAC: {}", aggregate(&errors)),
        },
    }
}

/// Is `user` allowed to do what `info` describes?
pub fn allowed(objects: &dyn RbacObjects, user: &UserInfo, info: &RequestInfo) -> bool {
    authorize(objects, user, info).allowed
}

/// `Ok` when allowed, otherwise the exact 403 kube-apiserver answers,
/// including the authorizer's reason. Prefer it to `allowed` + `forbidden`.
pub fn check(objects: &dyn RbacObjects, user: &UserInfo, info: &RequestInfo) -> Result<(), Status> {
    let decision = authorize(objects, user, info);
    if decision.allowed {
        return Ok(());
    }
    Err(forbidden_with_reason(user, info, &decision.reason))
}

/// The 403 Status kube-apiserver returns for this denial (without the RBAC
/// reason, which only [`check`] can know).
pub fn forbidden(user: &UserInfo, info: &RequestInfo) -> Status {
    forbidden_with_reason(user, info, "")
}

/// Every rule that applies to `user` in `namespace`, as a
/// SelfSubjectRulesReview lists them: (resourceRules, nonResourceRules).
pub fn rules_for(objects: &dyn RbacObjects, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<Value>) {
    let review = rules_review(objects, user, namespace);
    (review.resource_rules, review.non_resource_rules)
}

/// The rules that apply to `user` in `namespace`, plus the evaluation error
/// (missing roles) a SelfSubjectRulesReview reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RulesReview {
    /// `{verbs, apiGroups, resources, resourceNames}` objects.
    pub resource_rules: Vec<Value>,
    /// `{verbs, nonResourceURLs}` objects.
    pub non_resource_rules: Vec<Value>,
    /// Empty, or why some rules could not be read.
    pub evaluation_error: String,
}

/// Collect the rules for a SelfSubjectRulesReview or SubjectRulesReview.
pub fn rules_review(objects: &dyn RbacObjects, user: &UserInfo, namespace: &str) -> RulesReview {
    let mut review = RulesReview::default();
    let mut errors = Vec::new();
    visit_rules(objects, user, namespace, &mut errors, |_, rule| {
        if strs(rule, "resources").next().is_some() {
            let mut out = json!({"verbs": list(rule, "verbs")});
            for key in ["apiGroups", "resources", "resourceNames"] {
                if strs(rule, key).next().is_some() {
                    out[key] = list(rule, key);
                }
            }
            review.resource_rules.push(out);
        }
        if strs(rule, "nonResourceURLs").next().is_some() {
            review.non_resource_rules.push(json!({
                "verbs": list(rule, "verbs"),
                "nonResourceURLs": list(rule, "nonResourceURLs"),
            }));
        }
        true
    });
    review.evaluation_error = aggregate(&errors);
    review
}

/// The string array `rule[key]`, or null as Go encodes a nil slice.
fn list(rule: &Value, key: &str) -> Value {
    match rule.get(key) {
        Some(Value::Array(items)) => Value::Array(items.clone()),
        _ => Value::Null,
    }
}

/// The binding (and matching subject) a rule came from.
struct Source<'a> {
    binding: &'a Value,
    subject: &'a Value,
    /// Empty for a ClusterRoleBinding.
    namespace: &'a str,
}

impl Source<'_> {
    /// `ClusterRoleBinding "b" of ClusterRole "r" to Group "g"`; a
    /// RoleBinding is named `"b/ns"`.
    fn describe(&self) -> String {
        let name = str_of(&self.binding["metadata"], "name");
        let role_ref = &self.binding["roleRef"];
        let (kind, binding_name) = if self.namespace.is_empty() {
            ("ClusterRoleBinding", name.to_string())
        } else {
            ("RoleBinding", format!("{name}/{}", self.namespace))
        };
        format!(
            "{kind} {} of {} {} to {}",
            go_quote(&binding_name),
            str_of(role_ref, "kind"),
            go_quote(str_of(role_ref, "name")),
            describe_subject(self.subject, self.namespace)
        )
    }
}

/// Call `visit` with each rule that applies to `user` in `namespace`
/// (cluster bindings first), until it returns false (`VisitRulesFor`).
/// Bindings whose role is missing add an error to `errors`.
fn visit_rules(
    objects: &dyn RbacObjects,
    user: &UserInfo,
    namespace: &str,
    errors: &mut Vec<String>,
    mut visit: impl FnMut(&Source<'_>, &Value) -> bool,
) {
    let cluster_roles_cell = OnceCell::new();
    let cluster_roles = || cluster_roles_cell.get_or_init(|| objects.cluster_roles());
    for binding in objects.cluster_role_bindings() {
        let Some(subject) = applies_to(user, &binding, "") else {
            continue;
        };
        let source = Source {
            binding: &binding,
            subject,
            namespace: "",
        };
        match find_role(&binding, "", cluster_roles(), &[]) {
            Ok(role) if !visit_role(role, &source, &mut visit) => return,
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    if namespace.is_empty() {
        return;
    }
    let roles = OnceCell::new();
    for binding in objects.role_bindings(namespace) {
        let Some(subject) = applies_to(user, &binding, namespace) else {
            continue;
        };
        let source = Source {
            binding: &binding,
            subject,
            namespace,
        };
        let roles = roles.get_or_init(|| objects.roles(namespace));
        match find_role(&binding, namespace, cluster_roles(), roles) {
            Ok(role) if !visit_role(role, &source, &mut visit) => return,
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
}

/// Visit `role`'s rules; false when `visit` asked to stop.
fn visit_role(role: &Value, source: &Source<'_>, visit: &mut impl FnMut(&Source<'_>, &Value) -> bool) -> bool {
    let rules = role.get("rules").and_then(Value::as_array);
    rules.into_iter().flatten().all(|rule| visit(source, rule))
}

/// The role `binding.roleRef` names (`GetRoleReferenceRules`).
fn find_role<'r>(
    binding: &Value,
    binding_namespace: &str,
    cluster_roles: &'r [Arc<Value>],
    roles: &'r [Arc<Value>],
) -> Result<&'r Value, String> {
    let role_ref = &binding["roleRef"];
    let name = str_of(role_ref, "name");
    let (candidates, resource) = match str_of(role_ref, "kind") {
        "ClusterRole" => (cluster_roles, "clusterrole"),
        // A ClusterRoleBinding cannot reach a Role: kube-apiserver looks it
        // up in namespace "" and finds nothing.
        "Role" if binding_namespace.is_empty() => (&[][..], "role"),
        "Role" => (roles, "role"),
        other => return Err(format!("unsupported role reference kind: {}", go_quote(other))),
    };
    candidates
        .iter()
        .find(|role| str_of(&role["metadata"], "name") == name)
        .map(|role| &**role)
        .ok_or_else(|| format!("{resource}.rbac.authorization.k8s.io {} not found", go_quote(name)))
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as it is, several
/// de-duplicated in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 | 1 => seen.concat(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

#[cfg(test)]
mod tests;
