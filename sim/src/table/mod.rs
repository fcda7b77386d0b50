//! `meta.k8s.io/v1` Tables and PartialObjectMetadata, as kube-apiserver's
//! printers build them for `kubectl get`.
//!
//! Each kind has the columns and cells of kube-apiserver's printer for it
//! (`pkg/printers/internalversion`); the server always prints the wide
//! form, and kubectl hides priority-1 columns unless `-o wide`. Custom
//! resources take their columns from their CustomResourceDefinition's
//! `additionalPrinterColumns`; kinds without a printer get `Name` and
//! `Created At`.
//!
//! # Differences from kube-apiserver
//!
//! - Custom resource columns come from the CRDs in the seed (see
//!   [`crate::seed`]), not from CRDs created at run time, and support
//!   only simple `.a.b.c` JSON paths.
//! - Pod status ignores sidecar (restartable init) containers and
//!   scheduling gates; Job completions ignore `completionMode: Indexed`.

mod age;
mod apis;
mod cluster;
mod columns;
mod custom;
mod events;
mod workloads;

pub use age::human_duration;

use super::registry::ResourceType;
use chrono::{DateTime, Utc};
use columns::{printer, Column};
use serde_json::{json, Map, Value};
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

impl IncludeObject {
    /// The `includeObject` query parameter (`None`, `Metadata`, `Object`);
    /// kube-apiserver's default, Metadata, when absent or unknown.
    pub fn from_query(value: Option<&str>) -> IncludeObject {
        match value {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// A Table of `objects`, with `list_metadata` (resourceVersion, continue).
pub fn table(resource: &ResourceType, objects: &[Arc<Value>], include: IncludeObject, list_metadata: Value) -> Value {
    table_at(resource, objects, include, list_metadata, Utc::now())
}

/// [`table`] with ages measured from `now`.
pub fn table_at(
    resource: &ResourceType,
    objects: &[Arc<Value>],
    include: IncludeObject,
    list_metadata: Value,
    now: DateTime<Utc>,
) -> Value {
    let printer = printer(resource);
    let definitions: Vec<Value> = printer.columns.iter().map(Column::definition).collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(printer.cells(object, now)));
            match include {
                IncludeObject::None => {
                    row.insert("object".into(), Value::Null);
                }
                IncludeObject::Metadata => {
                    row.insert("object".into(), partial_object_metadata(object));
                }
                IncludeObject::Object => {
                    row.insert("object".into(), Value::clone(object));
                }
            }
            Value::Object(row)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// The object's PartialObjectMetadata (`meta.k8s.io/v1`): the whole
/// metadata, annotations included, as kube-apiserver returns it.
pub fn partial_object_metadata(object: &Value) -> Value {
    let metadata = match object.get("metadata") {
        Some(Value::Object(metadata)) => Value::Object(metadata.clone()),
        _ => json!({}),
    };
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
}

#[cfg(test)]
mod tests;
