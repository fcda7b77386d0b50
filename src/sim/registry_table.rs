//! The table of served resource types. (Stub: filled by the discovery work.)

use super::registry::{ResourceType, ALL_VERBS};

/// Every resource type served.
pub static RESOURCES: &[ResourceType] = &[ResourceType {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    singular: "configmap",
    namespaced: true,
    verbs: ALL_VERBS,
    short_names: &["cm"],
    categories: &[],
    subresources: &[],
    stored: true,
}];
