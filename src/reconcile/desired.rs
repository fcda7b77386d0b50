//! What a cluster should hold, and what a pass must do to get there: pure
//! functions over portcullis's roles and grants and the objects listed from
//! the cluster, so the rules are unit-tested without a cluster.
//!
//! - a ClusterRole `portcullis:<role>` per built-in and custom role, shared
//!   with any other installation in front of the cluster and marked with
//!   this installation's own label (see [`super::instance`]);
//! - per grant in effect, a RoleBinding `portcullis-grant-<id>` in its
//!   namespace (a ClusterRoleBinding for a cluster-wide grant) binding the
//!   group `portcullis:grant:<id>` to the role's ClusterRole, labelled with
//!   this installation's id;
//! - every one labelled [`MANAGED_BY`]; an unlabelled object is never looked
//!   at. A binding of this installation nothing explains is removed; a
//!   ClusterRole it no longer uses loses its mark, and is removed only when
//!   no other installation's mark is left on it.
//! - Two installations defining one role with different rules do not fight:
//!   the first one's rules stay, and the other reports a [`RoleConflict`].

use super::instance::{Instance, INSTANCE_LABEL, MARK_VALUE};
use crate::identity::roles::Role;
use crate::identity::Grant;
use chrono::{DateTime, Utc};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The label every object portcullis owns carries (key, value).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "portcullis");
/// The label selector for [`MANAGED_BY`]: only these objects are listed, so
/// only these can ever be deleted.
pub const SELECTOR: &str = "app.kubernetes.io/managed-by=portcullis";
/// Names the role a ClusterRole is for.
pub const ROLE_LABEL: &str = "portcullis.dev/role";
/// Names the grant a binding is for.
pub const GRANT_LABEL: &str = "portcullis.dev/grant";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The name of a grant's RoleBinding or ClusterRoleBinding.
pub fn binding_name(grant_id: &str) -> String {
    format!("{BINDING_PREFIX}{grant_id}")
}

/// How every ClusterRole portcullis writes is named (`portcullis:<role>`).
const ROLE_PREFIX: &str = "portcullis:";
/// How every binding portcullis writes is named.
const BINDING_PREFIX: &str = "portcullis-grant-";

/// Is `key` named as portcullis names what it writes?
fn named_ours(key: &ObjectKey) -> bool {
    match key {
        ObjectKey::ClusterRole(name) => name.starts_with(ROLE_PREFIX),
        ObjectKey::ClusterRoleBinding(name) | ObjectKey::RoleBinding(_, name) => name.starts_with(BINDING_PREFIX),
    }
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
    /// A grant (stored before namespaces were checked) names something that
    /// is not a namespace: its binding's path and name would carry it.
    #[error("grant {grant}: {namespace:?} is not a namespace name; it binds nothing")]
    InvalidNamespace {
        /// Grant id.
        grant: String,
        /// The namespace it names.
        namespace: String,
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

fn meta(name: String, namespace: Option<String>, label: (&str, &str), own: (String, &str)) -> ObjectMeta {
    let mut labels = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (own.0, own.1.to_string()),
    ]);
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

/// The ClusterRole of `role`, marked as used by `instance`.
pub fn cluster_role(role: &Role, instance: &Instance) -> Result<ClusterRole, DesiredError> {
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
        metadata: meta(
            role.cluster_role_name(),
            None,
            (ROLE_LABEL, &role.name),
            (instance.mark(), MARK_VALUE),
        ),
        rules: Some(rules),
        aggregation_rule: None,
    })
}

/// The binding of `grant` (which must name one of `roles`), labelled as
/// `instance`'s.
pub fn binding(grant: &Grant, instance: &Instance) -> Object {
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
        (INSTANCE_LABEL.to_string(), instance.id()),
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

/// What `cluster` should hold at `now` for `instance`, given every role and
/// the grants (of any cluster, in effect or not: this picks); a grant in one
/// of the `protected` namespaces binds nothing.
pub fn desired(
    roles: &[Role],
    protected: &[String],
    grants: &[Grant],
    cluster: &str,
    now: DateTime<Utc>,
    instance: &Instance,
) -> Desired {
    let mut out = Desired::default();
    let mut known = HashMap::new();
    for role in roles {
        match cluster_role(role, instance) {
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
        if let Some(ns) = grant
            .namespace
            .as_deref()
            .filter(|ns| !crate::config::reconcile::valid_namespace(ns))
        {
            out.errors.push(DesiredError::InvalidNamespace {
                grant: grant.id.clone(),
                namespace: ns.to_string(),
            });
            continue;
        }
        // Made before the namespace became protected: no group is sent
        // there, and no binding is left there either. Not an error: making
        // a namespace protected is a routine step, and a pass that failed
        // on it would leave every new grant "binding pending".
        if grant
            .namespace
            .as_deref()
            .is_some_and(|ns| protected.iter().any(|p| p == ns))
        {
            continue;
        }
        out.objects.push(binding(grant, instance));
        out.bindings += 1;
        out.next_expiry = Some(out.next_expiry.map_or(grant.expires_at, |t| t.min(grant.expires_at)));
    }
    out
}

/// What a pass listed from the cluster.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// Every ClusterRole labelled as portcullis's, whichever installations
    /// use it.
    pub roles: Vec<ClusterRole>,
    /// This installation's bindings, and the bindings from before instance
    /// ids whose grants are this installation's (they are adopted: labelled
    /// when still wanted, deleted when not).
    pub bindings: Vec<Object>,
}

/// Another installation defines a role under the same name with other
/// rules. Neither forces its own: the rules in the cluster stay, and this
/// installation's grants of the role get them until the definitions agree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("clusterrole/{name}: installation {} defines it with other rules; they are left as they are, and this installation's grants of it get them until the roles agree", .others.join(", "))]
pub struct RoleConflict {
    /// The ClusterRole.
    pub name: String,
    /// The ids of the installations that own its rules.
    pub others: Vec<String>,
}

/// One server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Apply {
    /// What to apply.
    pub object: Object,
    /// Take the fields it changes from their owners: a hand edit, or
    /// portcullis from before instance ids; never another installation.
    pub force: bool,
}

/// One deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// What to delete.
    pub key: ObjectKey,
    /// Only if it is still this version: a shared ClusterRole another
    /// installation marked since it was listed is kept.
    pub resource_version: Option<String>,
}

/// What one pass must do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Objects missing or out of step: applied.
    pub apply: Vec<Apply>,
    /// This installation's bindings nothing explains, and ClusterRoles no
    /// installation uses any more: deleted, bindings first.
    pub delete: Vec<Deletion>,
    /// ClusterRoles this installation stopped using that others still use:
    /// it gives up its mark and its fields (an empty apply).
    pub release: Vec<String>,
    /// Roles another installation defines otherwise: reported.
    pub conflicts: Vec<RoleConflict>,
    /// Bindings wanted but left unbound, as their role is in conflict.
    pub unbound: usize,
}

/// Compare `desired` with what was `listed` from the cluster. An object
/// without our label is never deleted, even if a caller passes one.
pub fn plan(desired: &Desired, listed: &Listed, instance: &Instance) -> Plan {
    let mut out = Plan::default();
    plan_roles(desired, &listed.roles, instance, &mut out);
    // A role whose ClusterRole another installation owns with other rules
    // binds no grant of this one's: its grants would get that
    // installation's rules, not the ones configured here. They are bound
    // (and their bindings kept) once the definitions agree.
    let conflicted: HashSet<&str> = out.conflicts.iter().map(|c| c.name.as_str()).collect();
    let bindable = |o: &&Object| match o {
        Object::ClusterRole(_) => true,
        Object::ClusterRoleBinding(b) => !conflicted.contains(b.role_ref.name.as_str()),
        Object::RoleBinding(b) => !conflicted.contains(b.role_ref.name.as_str()),
    };
    let bound = Desired {
        objects: desired.objects.iter().filter(bindable).cloned().collect(),
        ..Desired::default()
    };
    out.unbound = desired.objects.len() - bound.objects.len();
    plan_bindings(&bound, &listed.bindings, &mut out);
    // Only names portcullis gives are ever deleted or released: a label
    // anyone can set must not bring a cluster's own RBAC (`system:node`)
    // into a pass, whose ServiceAccount may patch and delete any.
    out.delete.retain(|d| named_ours(&d.key));
    out.release.retain(|name| name.starts_with(ROLE_PREFIX));
    // Bindings first: a ClusterRole is removed after what binds it.
    out.delete.sort_by_key(|d| matches!(d.key, ObjectKey::ClusterRole(_)));
    out
}

fn plan_bindings(desired: &Desired, actual: &[Object], out: &mut Plan) {
    let is_binding = |o: &&Object| !matches!(o, Object::ClusterRole(_));
    let have: HashMap<ObjectKey, &Object> = actual.iter().filter(is_binding).map(|o| (o.key(), o)).collect();
    for want in desired.objects.iter().filter(is_binding) {
        if have.get(&want.key()).is_none_or(|h| !want.in_step_with(h)) {
            out.apply.push(Apply {
                object: want.clone(),
                force: true,
            });
        }
    }
    let wanted: HashSet<ObjectKey> = desired.objects.iter().map(Object::key).collect();
    let strays = actual
        .iter()
        .filter(is_binding)
        .filter(|o| labelled(meta_of(o)))
        .map(Object::key)
        .filter(|key| !wanted.contains(key));
    out.delete.extend(strays.map(|key| Deletion {
        key,
        resource_version: None,
    }));
}

fn plan_roles(desired: &Desired, live: &[ClusterRole], instance: &Instance, out: &mut Plan) {
    let have: HashMap<&str, &ClusterRole> = live
        .iter()
        .filter(|r| labelled(&r.metadata))
        .map(|r| (r.metadata.name.as_deref().unwrap_or_default(), r))
        .collect();
    let wanted: Vec<&ClusterRole> = desired
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::ClusterRole(r) => Some(r),
            _ => None,
        })
        .collect();
    for want in &wanted {
        let name = want.metadata.name.as_deref().unwrap_or_default();
        plan_wanted_role(want, have.get(name).copied(), instance, out);
    }
    let wanted: HashSet<&str> = wanted.iter().filter_map(|r| r.metadata.name.as_deref()).collect();
    for (name, role) in have.into_iter().filter(|(name, _)| !wanted.contains(name)) {
        if others_using(role, instance).is_empty() {
            out.delete.push(Deletion {
                key: ObjectKey::ClusterRole(name.to_string()),
                resource_version: role.metadata.resource_version.clone(),
            });
        } else if uses(role, instance) {
            out.release.push(name.to_string());
        }
    }
}

/// A role this installation wants: applied unless in step; when another
/// installation owns other rules under its name, only marked, and reported.
fn plan_wanted_role(want: &ClusterRole, have: Option<&ClusterRole>, instance: &Instance, out: &mut Plan) {
    let object = Object::ClusterRole(want.clone());
    let Some(have) = have else {
        out.apply.push(Apply { object, force: true });
        return;
    };
    if object.in_step_with(&Object::ClusterRole(have.clone())) {
        return;
    }
    let (others, mine) = rule_owners(have, instance);
    if others.is_empty() || want.rules == have.rules {
        // Equal rules are shared, not taken: no force while others own them.
        out.apply.push(Apply {
            object,
            force: others.is_empty(),
        });
        return;
    }
    let marked = have
        .metadata
        .labels
        .iter()
        .flatten()
        .any(|(k, _)| *k == instance.mark());
    if !marked || mine {
        let mut mark_only = want.clone();
        mark_only.rules = None;
        out.apply.push(Apply {
            object: Object::ClusterRole(mark_only),
            force: false,
        });
    }
    out.conflicts.push(RoleConflict {
        name: want.metadata.name.clone().unwrap_or_default(),
        others,
    });
}

/// The other installations that own `role`'s rules, and whether this one
/// does, from its managedFields.
fn rule_owners(role: &ClusterRole, instance: &Instance) -> (Vec<String>, bool) {
    let mine = instance.field_manager();
    let owners: Vec<&str> = role
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| e.fields_v1.as_ref().is_some_and(|f| f.0.get("f:rules").is_some()))
        .filter_map(|e| e.manager.as_deref())
        .collect();
    let others = owners
        .iter()
        .filter_map(|m| instance.other_by_manager(m))
        .map(str::to_string)
        .collect();
    (others, owners.contains(&mine.as_str()))
}

/// The other installations that mark `role` or hold fields of it.
fn others_using(role: &ClusterRole, instance: &Instance) -> Vec<String> {
    let mut others = instance.others_marking(role.metadata.labels.iter().flatten());
    let managers = role.metadata.managed_fields.iter().flatten();
    others.extend(
        managers
            .filter_map(|e| instance.other_by_manager(e.manager.as_deref().unwrap_or_default()))
            .map(str::to_string),
    );
    others
}

/// Does this installation mark `role` or hold fields of it?
fn uses(role: &ClusterRole, instance: &Instance) -> bool {
    let manager = instance.field_manager();
    role.metadata
        .labels
        .iter()
        .flatten()
        .any(|(k, _)| *k == instance.mark())
        || role
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|e| e.manager.as_deref() == Some(manager.as_str()))
}

fn meta_of(object: &Object) -> &ObjectMeta {
    match object {
        Object::ClusterRole(o) => &o.metadata,
        Object::ClusterRoleBinding(o) => &o.metadata,
        Object::RoleBinding(o) => &o.metadata,
    }
}

fn labelled(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY.0))
        .is_some_and(|v| v == MANAGED_BY.1)
}

#[cfg(test)]
#[path = "desired_tests.rs"]
mod tests;
