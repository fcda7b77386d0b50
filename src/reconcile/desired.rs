//! What a cluster should hold, and what a pass must do to get there: pure
//! functions over portcullis's roles and grants and the objects listed from
//! the cluster, so the rules are unit-tested without a cluster.
//!
//! - a ClusterRole `portcullis:<role>` per built-in and custom role;
//! - per grant in effect, a RoleBinding `portcullis-grant-<id>` in its
//!   namespace (a ClusterRoleBinding for a cluster-wide grant) binding the
//!   group `portcullis:grant:<id>` to the role's ClusterRole;
//! - every one labelled [`MANAGED_BY`]; a labelled object nothing explains is
//!   removed, an unlabelled one is never looked at.

use crate::identity::roles::Role;
use crate::identity::Grant;
use chrono::{DateTime, Utc};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, HashMap};

/// The label every object portcullis owns carries (key, value).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "portcullis");
/// The label selector for [`MANAGED_BY`]: only these objects are listed, so
/// only these can ever be deleted.
pub const SELECTOR: &str = "app.kubernetes.io/managed-by=portcullis";
/// Names the role a ClusterRole is for.
pub const ROLE_LABEL: &str = "portcullis.dev/role";
/// Names the grant a binding is for.
pub const GRANT_LABEL: &str = "portcullis.dev/grant";
/// The server-side apply field manager.
pub const FIELD_MANAGER: &str = "portcullis";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The name of a grant's RoleBinding or ClusterRoleBinding.
pub fn binding_name(grant_id: &str) -> String {
    format!("portcullis-grant-{grant_id}")
}

/// Which object, without its contents.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKey {
    /// A ClusterRole by name.
    ClusterRole(String),
    /// A ClusterRoleBinding by name.
    ClusterRoleBinding(String),
    /// A RoleBinding by namespace and name.
    RoleBinding(String, String),
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectKey::ClusterRole(name) => write!(f, "clusterrole/{name}"),
            ObjectKey::ClusterRoleBinding(name) => write!(f, "clusterrolebinding/{name}"),
            ObjectKey::RoleBinding(ns, name) => write!(f, "rolebinding/{name} in {ns}"),
        }
    }
}

/// An object portcullis wants in a cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// A role's ClusterRole.
    ClusterRole(ClusterRole),
    /// A cluster-wide grant's binding.
    ClusterRoleBinding(ClusterRoleBinding),
    /// A namespaced grant's binding.
    RoleBinding(RoleBinding),
}

impl Object {
    /// Its key.
    pub fn key(&self) -> ObjectKey {
        let name = |meta: &ObjectMeta| meta.name.clone().unwrap_or_default();
        match self {
            Object::ClusterRole(o) => ObjectKey::ClusterRole(name(&o.metadata)),
            Object::ClusterRoleBinding(o) => ObjectKey::ClusterRoleBinding(name(&o.metadata)),
            Object::RoleBinding(o) => {
                ObjectKey::RoleBinding(o.metadata.namespace.clone().unwrap_or_default(), name(&o.metadata))
            }
        }
    }

    /// Is `actual` (as listed from the cluster) already what this wants?
    /// Labels the cluster has beyond ours are left alone.
    fn in_step_with(&self, actual: &Object) -> bool {
        let labels_kept = |want: &ObjectMeta, have: &ObjectMeta| {
            let have = have.labels.clone().unwrap_or_default();
            want.labels.iter().flatten().all(|(k, v)| have.get(k) == Some(v))
        };
        match (self, actual) {
            (Object::ClusterRole(w), Object::ClusterRole(h)) => {
                labels_kept(&w.metadata, &h.metadata)
                    && w.rules.clone().unwrap_or_default() == h.rules.clone().unwrap_or_default()
                    && h.aggregation_rule.is_none()
            }
            (Object::ClusterRoleBinding(w), Object::ClusterRoleBinding(h)) => {
                labels_kept(&w.metadata, &h.metadata) && w.role_ref == h.role_ref && w.subjects == h.subjects
            }
            (Object::RoleBinding(w), Object::RoleBinding(h)) => {
                labels_kept(&w.metadata, &h.metadata) && w.role_ref == h.role_ref && w.subjects == h.subjects
            }
            _ => false,
        }
    }
}

/// Why something portcullis wants cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DesiredError {
    /// A (custom) role's rules are not RBAC PolicyRules.
    #[error("role {role}: its rules are not RBAC PolicyRules: {message}")]
    InvalidRules {
        /// Role name.
        role: String,
        /// The parser's message.
        message: String,
    },
    /// A grant names a role that no longer exists.
    #[error("grant {grant}: role {role:?} does not exist (any more); it binds nothing")]
    UnknownRole {
        /// Grant id.
        grant: String,
        /// Role name.
        role: String,
    },
}

/// Everything a cluster should hold, and what could not be expressed.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    /// The objects, ClusterRoles first (a binding's role should exist
    /// before the binding).
    pub objects: Vec<Object>,
    /// Roles and grants left out, with why.
    pub errors: Vec<DesiredError>,
    /// ClusterRoles wanted.
    pub roles: usize,
    /// Bindings wanted.
    pub bindings: usize,
    /// When the next of these grants expires (a pass is due then).
    pub next_expiry: Option<DateTime<Utc>>,
}

fn meta(name: String, namespace: Option<String>, label: (&str, &str)) -> ObjectMeta {
    let mut labels = BTreeMap::from([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())]);
    // A label value is at most 63 characters of a restricted set; a custom
    // role's name might not fit, and the label is only informative.
    let fits = label.1.len() <= 63
        && label
            .1
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && label.1.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && label.1.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if fits {
        labels.insert(label.0.to_string(), label.1.to_string());
    }
    ObjectMeta {
        name: Some(name),
        namespace,
        labels: Some(labels),
        ..Default::default()
    }
}

/// The ClusterRole of `role`.
pub fn cluster_role(role: &Role) -> Result<ClusterRole, DesiredError> {
    let rules = role
        .rules
        .iter()
        .map(|rule| serde_json::from_value::<PolicyRule>(rule.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| DesiredError::InvalidRules {
            role: role.name.clone(),
            message: e.to_string(),
        })?;
    Ok(ClusterRole {
        metadata: meta(role.cluster_role_name(), None, (ROLE_LABEL, &role.name)),
        rules: Some(rules),
        aggregation_rule: None,
    })
}

/// The binding of `grant` (which must name one of `roles`).
pub fn binding(grant: &Grant) -> Object {
    let subjects = Some(vec![Subject {
        api_group: Some(RBAC_GROUP.into()),
        kind: "Group".into(),
        name: grant.group(),
        namespace: None,
    }]);
    let role_ref = RoleRef {
        api_group: Some(RBAC_GROUP.into()),
        kind: "ClusterRole".into(),
        name: format!("portcullis:{}", grant.role),
    };
    let meta = meta(
        binding_name(&grant.id),
        grant.namespace.clone(),
        (GRANT_LABEL, &grant.id),
    );
    match grant.namespace {
        Some(_) => Object::RoleBinding(RoleBinding {
            metadata: meta,
            role_ref,
            subjects,
        }),
        None => Object::ClusterRoleBinding(ClusterRoleBinding {
            metadata: meta,
            role_ref,
            subjects,
        }),
    }
}

/// What `cluster` should hold at `now`, given every role and the grants
/// (of any cluster, in effect or not: this picks).
pub fn desired(roles: &[Role], grants: &[Grant], cluster: &str, now: DateTime<Utc>) -> Desired {
    let mut out = Desired::default();
    let mut known = HashMap::new();
    for role in roles {
        match cluster_role(role) {
            Ok(object) => {
                out.objects.push(Object::ClusterRole(object));
                out.roles += 1;
                known.insert(role.name.as_str(), ());
            }
            Err(e) => out.errors.push(e),
        }
    }
    for grant in grants.iter().filter(|g| g.cluster == cluster && g.in_effect(now)) {
        if !known.contains_key(grant.role.as_str()) {
            out.errors.push(DesiredError::UnknownRole {
                grant: grant.id.clone(),
                role: grant.role.clone(),
            });
            continue;
        }
        out.objects.push(binding(grant));
        out.bindings += 1;
        out.next_expiry = Some(out.next_expiry.map_or(grant.expires_at, |t| t.min(grant.expires_at)));
    }
    out
}

/// What one pass must do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Objects missing or out of step: applied.
    pub apply: Vec<Object>,
    /// Labelled objects nothing explains: deleted.
    pub delete: Vec<ObjectKey>,
}

/// Compare `desired` with `actual` (the labelled objects listed from the
/// cluster). An object in `actual` without our label is never deleted, even
/// if a caller passes one.
pub fn plan(desired: &Desired, actual: &[Object]) -> Plan {
    let have: HashMap<ObjectKey, &Object> = actual.iter().map(|o| (o.key(), o)).collect();
    let apply = desired
        .objects
        .iter()
        .filter(|want| have.get(&want.key()).is_none_or(|h| !want.in_step_with(h)))
        .cloned()
        .collect();
    let wanted: HashMap<ObjectKey, ()> = desired.objects.iter().map(|o| (o.key(), ())).collect();
    let mut delete: Vec<ObjectKey> = actual
        .iter()
        .filter(|o| labelled(o))
        .map(Object::key)
        .filter(|key| !wanted.contains_key(key))
        .collect();
    // Bindings first: a ClusterRole is removed after what binds it.
    delete.sort_by_key(|k| matches!(k, ObjectKey::ClusterRole(_)));
    Plan { apply, delete }
}

fn labelled(object: &Object) -> bool {
    let meta = match object {
        Object::ClusterRole(o) => &o.metadata,
        Object::ClusterRoleBinding(o) => &o.metadata,
        Object::RoleBinding(o) => &o.metadata,
    };
    meta.labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY.0))
        .is_some_and(|v| v == MANAGED_BY.1)
}

#[cfg(test)]
#[path = "desired_tests.rs"]
mod tests;
