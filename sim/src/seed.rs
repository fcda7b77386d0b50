//! The demo cluster's objects, from `seed.yaml`: namespaces `shop`,
//! `payments` and `portcullis` beside the system ones, a node, workloads
//! with their ReplicaSets, Pods, Services and Events, ConfigMaps, Secrets
//! (one with a `last-applied-configuration` that holds its values in clear
//! text, as client-side apply leaves it), a CustomResourceDefinition with
//! one custom object, and portcullis's own ServiceAccount and RBAC.
//!
//! Timestamps written `now-<age>` in the YAML are resolved against the time
//! the seed is first loaded, so ages look real whenever the demo runs. Each
//! object gets a stable uid derived from its kind, namespace and name, and
//! `ownerReferences` and event `involvedObject`s get their target's uid, so
//! the references hold (as long as the store keeps the seed's uids).
//!
//! portcullis's ClusterRole may impersonate users, groups, uids and exactly
//! the extras `portcullis.dev/credential` and `portcullis.dev/agent-session`:
//! RBAC has no wildcard for `userextras/<key>` (`userextras/*` would match
//! only a key named `*`).

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// The YAML, compiled in.
const SEED_YAML: &str = include_str!("seed.yaml");
/// portcullis's own ServiceAccount permissions, exactly as shipped: the
/// tests then prove the deploy manifest is enough for what portcullis does.
const DEPLOY_RBAC_YAML: &str = include_str!("../../deploy/rbac.yaml");

/// Objects of the demo cluster: namespaces, workloads, Secrets, events, a
/// node.
pub fn demo_objects() -> Vec<Value> {
    loaded().to_vec()
}

/// The seed's CustomResourceDefinition serving `plural` in `group`, which
/// Tables use for the custom kind's printer columns.
pub fn custom_resource_definition(group: &str, plural: &str) -> Option<&'static Value> {
    loaded().iter().find(|o| {
        o["kind"] == "CustomResourceDefinition" && o["spec"]["group"] == group && o["spec"]["names"]["plural"] == plural
    })
}

/// The seed, parsed and resolved once.
fn loaded() -> &'static [Value] {
    static LOADED: OnceLock<Vec<Value>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let mut objects = parse(SEED_YAML);
        // Installed with portcullis, days ago, like the rest of the seed.
        objects.extend(parse(DEPLOY_RBAC_YAML).into_iter().map(|mut object| {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata
                    .entry("creationTimestamp")
                    .or_insert_with(|| Value::String("now-5d".into()));
            }
            object
        }));
        resolve(objects, Utc::now())
    })
}

/// Every YAML document as JSON; a document that does not parse is logged
/// and skipped (the unit tests make sure none is).
fn parse(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .filter_map(|document| match Value::deserialize(document) {
            Ok(Value::Null) => None,
            Ok(value) => Some(value),
            Err(error) => {
                tracing::error!(%error, "skipping a seed.yaml document that does not parse");
                None
            }
        })
        .collect()
}

/// Resolve `now-…` timestamps against `now`, give each object its uid and
/// point references at their targets' uids.
fn resolve(mut objects: Vec<Value>, now: DateTime<Utc>) -> Vec<Value> {
    for object in &mut objects {
        resolve_times(object, None, now);
        let uid = stable_uid(kind(object), namespace(object), name(object));
        if let Some(metadata) = object["metadata"].as_object_mut() {
            metadata.insert("uid".into(), Value::String(uid));
        }
    }
    let targets: Vec<(String, String, String)> = objects
        .iter()
        .map(|o| (kind(o).to_string(), namespace(o).to_string(), name(o).to_string()))
        .collect();
    for object in &mut objects {
        let ns = namespace(object).to_string();
        let Some(map) = object.as_object_mut() else { continue };
        let mut references: Vec<&mut Value> = Vec::new();
        for (key, value) in map.iter_mut() {
            match key.as_str() {
                "metadata" => {
                    if let Some(owners) = value["ownerReferences"].as_array_mut() {
                        references.extend(owners.iter_mut());
                    }
                }
                "involvedObject" => references.push(value),
                _ => {}
            }
        }
        for reference in references {
            let (kind, name) = (
                reference["kind"].as_str().unwrap_or_default(),
                reference["name"].as_str().unwrap_or_default(),
            );
            let ns = reference["namespace"].as_str().unwrap_or(&ns);
            // Cluster-scoped owners (a Node owning a Lease) have no namespace.
            let target = targets
                .iter()
                .find(|(k, n, m)| k == kind && m == name && (n == ns || n.is_empty()));
            if let Some((k, n, m)) = target {
                reference["uid"] = Value::String(stable_uid(k, n, m));
            }
        }
    }
    objects
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

fn namespace(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// A UUID-shaped id (version 4 layout) from the SHA-256 of the object's
/// identity, the same on every run.
fn stable_uid(kind: &str, namespace: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("{kind}/{namespace}/{name}"));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).to_string()
}

/// Replace every `now-<age>` string with the RFC 3339 time `age` before
/// `now` (`eventTime` with microseconds, as MicroTime is written).
fn resolve_times(value: &mut Value, key: Option<&str>, now: DateTime<Utc>) {
    match value {
        Value::String(text) => {
            if let Some(age) = text.strip_prefix("now-").and_then(parse_age) {
                let at = now - age;
                let format = if key == Some("eventTime") {
                    SecondsFormat::Micros
                } else {
                    SecondsFormat::Secs
                };
                *text = at.to_rfc3339_opts(format, true);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| resolve_times(item, key, now)),
        Value::Object(map) => map.iter_mut().for_each(|(k, v)| resolve_times(v, Some(k), now)),
        _ => {}
    }
}

/// `3d4h`, `45m`, `20s` as a duration.
fn parse_age(text: &str) -> Option<Duration> {
    let mut total = Duration::zero();
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: i64 = number.parse().ok()?;
        number.clear();
        total += match c {
            'd' => Duration::days(n),
            'h' => Duration::hours(n),
            'm' => Duration::minutes(n),
            's' => Duration::seconds(n),
            _ => return None,
        };
    }
    number.is_empty().then_some(total)
}

#[cfg(test)]
mod tests;
