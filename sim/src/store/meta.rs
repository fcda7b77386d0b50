//! The metadata the API server owns: what a write stamps on an object
//! (`uid`, `creationTimestamp`, `resourceVersion`, `generation`) and the
//! accessors the handlers share.

use serde_json::{Map, Value};

/// The API server's timestamp format (RFC 3339, seconds, UTC).
pub fn now_timestamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metadata.<field>` as a string, empty if absent.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The object's `metadata.resourceVersion` as a number.
pub fn resource_version(obj: &Value) -> Option<u64> {
    meta_str(obj, "resourceVersion").parse().ok()
}

/// Set `metadata.<field>`, creating `metadata` if needed.
pub fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Some(map) = obj.as_object_mut() else { return };
    let meta = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(field.to_string(), value);
    }
}

/// Stamp the server-owned metadata on an object about to be stored.
pub(super) fn stamp(obj: &mut Value, old: Option<&Value>, revision: Option<u64>, keep_identity: bool) {
    match old {
        Some(old) => {
            for field in ["uid", "creationTimestamp"] {
                set_meta(obj, field, old["metadata"][field].clone());
            }
        }
        None => {
            if !(keep_identity && obj["metadata"]["uid"].is_string()) {
                set_meta(obj, "uid", Value::String(uuid::Uuid::new_v4().to_string()));
            }
            if !(keep_identity && obj["metadata"]["creationTimestamp"].is_string()) {
                set_meta(obj, "creationTimestamp", Value::String(now_timestamp()));
            }
        }
    }
    match (revision, old) {
        (Some(rv), _) => set_meta(obj, "resourceVersion", Value::String(rv.to_string())),
        (None, Some(old)) => set_meta(obj, "resourceVersion", old["metadata"]["resourceVersion"].clone()),
        (None, None) => {
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
        }
    }
    if let Some(generation) = next_generation(old, obj) {
        set_meta(obj, "generation", Value::from(generation));
    }
}

/// The `metadata.generation` an object gets when `new` replaces `old`: 1 on
/// create, bumped when `spec` changes, none for objects without `spec`.
pub fn next_generation(old: Option<&Value>, new: &Value) -> Option<i64> {
    new.get("spec")?;
    if !sets_generation(new) {
        return None;
    }
    let old_generation = old.and_then(|o| o["metadata"]["generation"].as_i64());
    Some(match (old, old_generation) {
        (Some(old), Some(g)) if old.get("spec") == new.get("spec") => g,
        (Some(_), Some(g)) => g + 1,
        _ => 1,
    })
}

/// Whether kube-apiserver's strategy for the object's kind keeps a
/// `generation`: not for these kinds, whose spec changes are not tracked.
fn sets_generation(obj: &Value) -> bool {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let untracked = match obj["apiVersion"].as_str().unwrap_or_default() {
        "v1" => matches!(
            kind,
            "Namespace"
                | "Service"
                | "PersistentVolumeClaim"
                | "PersistentVolume"
                | "ResourceQuota"
                | "LimitRange"
                | "Node"
        ),
        "coordination.k8s.io/v1" => kind == "Lease",
        _ => false,
    };
    !untracked
}
