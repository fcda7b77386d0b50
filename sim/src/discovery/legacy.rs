//! Legacy (unaggregated) discovery: `APIVersions`, `APIGroupList`,
//! `APIGroup` and `APIResourceList`, as kube-rs and older clients read them.

use super::{groups, resources_of};
use crate::registry::{ResourceType, Subresource};
use base64::Engine;
use http::{header, HeaderMap};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// `/api`: the core group's versions and the address clients should use.
pub(super) fn api_versions(headers: &HeaderMap) -> Value {
    let address = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or("127.0.0.1:6443");
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

/// `/apis`: every named group with its versions and preferred version.
pub(super) fn group_list() -> Value {
    let groups: Vec<Value> = groups()
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, versions)| group_value(group, &versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, or `None` if the group is not served.
pub(super) fn group(group: &str) -> Option<Value> {
    let (name, versions) = groups().into_iter().find(|(g, _)| !g.is_empty() && *g == group)?;
    let mut value = group_value(name, &versions);
    let object = value.as_object_mut()?;
    object.insert("kind".into(), json!("APIGroup"));
    object.insert("apiVersion".into(), json!("v1"));
    Some(value)
}

/// `{name, versions, preferredVersion}` of one group.
fn group_value(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "preferredVersion": versions[0].clone(), "versions": versions})
}

/// `/api/v1` or `/apis/<group>/<version>`, or `None` if not served.
pub(super) fn resource_list(group: &str, version: &str) -> Option<Value> {
    let resources = resources_of(group, version);
    if resources.is_empty() {
        return None;
    }
    let mut entries = Vec::new();
    for r in resources {
        entries.push(resource_entry(r));
        let mut subresources: Vec<&Subresource> = r.subresources.iter().collect();
        subresources.sort_by_key(|s| s.name);
        entries.extend(subresources.into_iter().map(|s| subresource_entry(r, s)));
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut list = json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    });
    // kube-apiserver's core `/api/v1` list is the one without `apiVersion`.
    if group.is_empty() {
        if let Some(map) = list.as_object_mut() {
            map.remove("apiVersion");
        }
    }
    Some(list)
}

/// One `APIResource` for the resource itself.
fn resource_entry(r: &ResourceType) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), json!(r.plural));
    entry.insert("singularName".into(), json!(r.singular));
    entry.insert("namespaced".into(), json!(r.namespaced));
    entry.insert("kind".into(), json!(r.kind));
    entry.insert("verbs".into(), json!(r.verbs));
    if !r.short_names.is_empty() {
        entry.insert("shortNames".into(), json!(r.short_names));
    }
    if !r.categories.is_empty() {
        entry.insert("categories".into(), json!(r.categories));
    }
    if r.stored {
        entry.insert(
            "storageVersionHash".into(),
            json!(storage_version_hash(r.group, r.version, r.kind)),
        );
    }
    Value::Object(entry)
}

/// One `APIResource` for `pods/log` and the like; group and version appear
/// only where they differ from the parent's, as kube-apiserver writes them.
fn subresource_entry(r: &ResourceType, s: &Subresource) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), json!(format!("{}/{}", r.plural, s.name)));
    entry.insert("singularName".into(), json!(""));
    entry.insert("namespaced".into(), json!(r.namespaced));
    if (s.group, s.version) != (r.group, r.version) {
        entry.insert("group".into(), json!(s.group));
        entry.insert("version".into(), json!(s.version));
    }
    entry.insert("kind".into(), json!(s.kind));
    entry.insert("verbs".into(), json!(s.verbs));
    Value::Object(entry)
}

/// kube-apiserver's `storageVersionHash`: the first 8 bytes of the SHA-256
/// of `group/version/kind`, base64.
pub(crate) fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}"));
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}
