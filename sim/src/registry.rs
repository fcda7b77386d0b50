//! The resource types the simulated cluster serves.
//!
//! One table drives discovery, storage, RBAC resource names and Tables, so
//! kubectl's discovery and the handlers can never disagree about a kind.

/// One servable resource (a plural name in a group/version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for core.
    pub group: &'static str,
    /// Version, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `Deployment`.
    pub kind: &'static str,
    /// Plural resource name, e.g. `deployments`.
    pub plural: &'static str,
    /// Singular name, e.g. `deployment`.
    pub singular: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Verbs discovery advertises.
    pub verbs: &'static [&'static str],
    /// Short names (`deploy`, `svc`, …).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Subresources served: (name, kind, verbs).
    pub subresources: &'static [Subresource],
    /// Objects of this type are stored (false for review resources, which
    /// answer a create and store nothing).
    pub stored: bool,
}

/// A subresource such as `pods/log` or `deployments/scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subresource {
    /// e.g. `log`.
    pub name: &'static str,
    /// Kind of the subresource's object, e.g. `Scale`; empty for streams.
    pub kind: &'static str,
    /// Group of that kind, e.g. `autoscaling` for `Scale`.
    pub group: &'static str,
    /// Version of that kind.
    pub version: &'static str,
    /// Verbs discovery advertises for it.
    pub verbs: &'static [&'static str],
}

impl ResourceType {
    /// `apps/v1`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The subresource called `name`, if served.
    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }
}

/// Verbs of an ordinary stored resource.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Look up a resource type by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Whether any resource of `group` is served (the core group, `""`, is).
pub fn group_served(group: &str) -> bool {
    RESOURCES.iter().any(|r| r.group == group)
}

/// Look up a resource type by group and kind (any served version).
pub fn find_kind(group: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.group == group && r.kind == kind)
}

/// Every resource type served. Filled in by the discovery work; see
/// `registry_table.rs`.
pub static RESOURCES: &[ResourceType] = super::registry_table::RESOURCES;
