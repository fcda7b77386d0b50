//! `meta.k8s.io/v1` Tables and PartialObjectMetadata. (Interface stub.)

use super::registry::ResourceType;
use serde_json::Value;
use std::sync::Arc;

/// What a Table row's `object` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

/// A Table of `objects`, with `list_metadata` (resourceVersion, continue).
pub fn table(
    resource: &ResourceType,
    objects: &[Arc<Value>],
    include: IncludeObject,
    list_metadata: Value,
) -> Value {
    let _ = (resource, objects, include);
    serde_json::json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata, "columnDefinitions": [], "rows": []})
}

/// The object's PartialObjectMetadata (`meta.k8s.io/v1`).
pub fn partial_object_metadata(object: &Value) -> Value {
    serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"].clone()})
}
