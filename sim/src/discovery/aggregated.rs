//! Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`):
//! every group, version and resource in one document, as kubectl 1.37 and
//! client-go prefer it.

use super::{groups, resources_of};
use crate::registry::{ResourceType, Subresource};
use serde_json::{json, Map, Value};

/// The list for `/api` (`core`: the core group only) or `/apis` (every
/// named group, in priority order).
pub(super) fn list(core: bool) -> Value {
    let items: Vec<Value> = groups()
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, versions)| group_discovery(group, &versions))
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// One `APIGroupDiscovery`; the core group's name is empty and omitted.
fn group_discovery(group: &str, versions: &[&str]) -> Value {
    let mut metadata = Map::new();
    if !group.is_empty() {
        metadata.insert("name".into(), json!(group));
    }
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = resources_of(group, version)
                .into_iter()
                .map(resource_discovery)
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": metadata, "versions": versions})
}

/// One `APIResourceDiscovery` with its subresources nested.
fn resource_discovery(r: &ResourceType) -> Value {
    let mut entry = Map::new();
    entry.insert("resource".into(), json!(r.plural));
    entry.insert(
        "responseKind".into(),
        json!({"group": r.group, "version": r.version, "kind": r.kind}),
    );
    entry.insert(
        "scope".into(),
        json!(if r.namespaced { "Namespaced" } else { "Cluster" }),
    );
    entry.insert("singularResource".into(), json!(r.singular));
    entry.insert("verbs".into(), json!(r.verbs));
    if !r.short_names.is_empty() {
        entry.insert("shortNames".into(), json!(r.short_names));
    }
    if !r.categories.is_empty() {
        entry.insert("categories".into(), json!(r.categories));
    }
    if !r.subresources.is_empty() {
        let mut subresources: Vec<&Subresource> = r.subresources.iter().collect();
        subresources.sort_by_key(|s| s.name);
        let subresources: Vec<Value> = subresources
            .into_iter()
            .map(|s| {
                json!({
                    "subresource": s.name,
                    "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                    "verbs": s.verbs,
                })
            })
            .collect();
        entry.insert("subresources".into(), json!(subresources));
    }
    Value::Object(entry)
}
