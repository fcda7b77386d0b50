//! Resource types for the unit tests of this module, independent of what
//! the registry serves.

use crate::registry::{ResourceType, Subresource, ALL_VERBS};

const STATUS: Subresource = Subresource {
    name: "status",
    kind: "",
    group: "",
    version: "",
    verbs: &["get", "patch", "update"],
};

const fn rt(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    subresources: &'static [Subresource],
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        kind,
        plural,
        singular: "",
        namespaced: true,
        verbs: ALL_VERBS,
        short_names: &[],
        categories: &[],
        subresources,
        stored: true,
    }
}

pub const DEPLOYMENT: ResourceType = rt("apps", "Deployment", "deployments", &[STATUS]);
pub const POD: ResourceType = rt("", "Pod", "pods", &[STATUS]);
pub const SERVICE: ResourceType = rt("", "Service", "services", &[STATUS]);
pub const CONFIGMAP: ResourceType = rt("", "ConfigMap", "configmaps", &[]);
pub const WIDGET: ResourceType = rt("example.com", "Widget", "widgets", &[]);
pub const ROLE_BINDING: ResourceType = rt("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", &[]);
