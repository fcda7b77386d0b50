//! What the cluster's controllers would have done by the time a client
//! looks: workloads report every replica ready, pods run, services get a
//! cluster IP, namespaces are Active. Enough for `kubectl get` and
//! `kubectl rollout status` to see a healthy cluster.

use crate::registry::ResourceType;
use crate::store::{next_generation, now_timestamp};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU32, Ordering};

/// Fill in everything the API server and the controllers would have set on
/// `obj` (about to replace `old`, if any): for objects that are not
/// written through the API (seeding).
pub fn settle(rt: &ResourceType, old: Option<&Value>, obj: &mut Value) {
    crate::defaults::decode(rt.group, rt.kind, old, obj);
    settle_decoded(rt, obj);
    settle_written(rt, old, obj);
}

/// What decoding a write does beyond defaulting, before the field manager
/// records it (so the writer owns the result).
pub(super) fn settle_decoded(rt: &ResourceType, obj: &mut Value) {
    if (rt.group, rt.kind) == ("", "Secret") {
        settle_secret(obj);
    }
}

/// What the registries, admission and the controllers add once the write
/// was recorded: no one owns these fields.
pub(super) fn settle_written(rt: &ResourceType, old: Option<&Value>, obj: &mut Value) {
    if old.is_none() {
        crate::defaults::admit(rt.group, rt.kind, obj);
    }
    match (rt.group, rt.kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => settle_workload(old, obj),
        ("", "Pod") => settle_pod(obj),
        ("", "Service") => settle_service(old, obj),
        ("", "Namespace") => settle_namespace(obj),
        _ => {}
    }
}

/// As kube-apiserver: an empty Secret `type` becomes `Opaque` (kubectl's
/// protobuf bodies leave it empty), and `stringData` is write-only: merged
/// into `data` (base64) and never stored.
fn settle_secret(obj: &mut Value) {
    use base64::Engine;
    let Some(map) = obj.as_object_mut() else { return };
    if map.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        map.insert("type".into(), json!("Opaque"));
    }
    let Some(Value::Object(string_data)) = map.remove("stringData") else {
        return;
    };
    let data = map.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            data.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
}

fn object_mut<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let entry = map.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

fn settle_workload(old: Option<&Value>, obj: &mut Value) {
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let generation = next_generation(old, obj).unwrap_or(1);
    if let Some(status) = object_mut(obj, "status") {
        status.insert("observedGeneration".into(), json!(generation));
        status.insert("replicas".into(), json!(replicas));
        for key in [
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
            "currentReplicas",
        ] {
            if replicas > 0 {
                status.insert(key.into(), json!(replicas));
            } else {
                status.remove(key);
            }
        }
    }
}

fn settle_pod(obj: &mut Value) {
    if obj["status"]["phase"].is_string() {
        return;
    }
    let now = now_timestamp();
    let containers: Vec<Value> = obj["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    json!({
                        "name": c["name"], "image": c["image"], "imageID": "", "ready": true,
                        "started": true, "restartCount": 0,
                        "state": {"running": {"startedAt": now}}
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let conditions: Vec<Value> = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": now}))
        .collect();
    if let Some(status) = object_mut(obj, "status") {
        status.insert("phase".into(), json!("Running"));
        status.insert("conditions".into(), json!(conditions));
        status.insert("containerStatuses".into(), json!(containers));
        status.insert("hostIP".into(), json!("10.0.0.10"));
        status.insert("podIP".into(), json!(pod_ip()));
        status.insert("startTime".into(), json!(now));
        status.insert("qosClass".into(), json!("BestEffort"));
    }
}

static NEXT_IP: AtomicU32 = AtomicU32::new(10);

fn pod_ip() -> String {
    let n = NEXT_IP.fetch_add(1, Ordering::Relaxed);
    format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 2)
}

fn cluster_ip() -> String {
    let n = NEXT_IP.fetch_add(1, Ordering::Relaxed);
    format!("10.96.{}.{}", (n / 250) % 250, n % 250 + 2)
}

/// The Service registry allocates the cluster IP and its family; the
/// status carries an empty `loadBalancer`.
fn settle_service(old: Option<&Value>, obj: &mut Value) {
    let kept = old.and_then(|o| o["spec"]["clusterIP"].as_str()).map(str::to_string);
    let external_name = obj["spec"]["type"] == "ExternalName";
    if let Some(status) = object_mut(obj, "status") {
        status.entry("loadBalancer").or_insert_with(|| json!({}));
    }
    let Some(spec) = object_mut(obj, "spec") else { return };
    if !spec.contains_key("type") {
        spec.insert("type".into(), json!("ClusterIP"));
    }
    if external_name {
        return;
    }
    spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
    spec.entry("ipFamilyPolicy").or_insert_with(|| json!("SingleStack"));
    if spec.get("clusterIP").is_some_and(Value::is_string) {
        return;
    }
    // An update without a clusterIP keeps the allocated one, as the API
    // server does; a create allocates one.
    let ip = kept.unwrap_or_else(cluster_ip);
    spec.insert("clusterIP".into(), json!(ip));
    spec.insert("clusterIPs".into(), json!([ip]));
}

/// The namespace registry adds the `kubernetes` finalizer; the name label
/// is a default (`sim::defaults`).
fn settle_namespace(obj: &mut Value) {
    if let Some(spec) = object_mut(obj, "spec") {
        spec.entry("finalizers").or_insert_with(|| json!(["kubernetes"]));
    }
    if let Some(status) = object_mut(obj, "status") {
        status.insert("phase".into(), json!("Active"));
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    #[test]
    fn string_data_is_merged_into_data_and_the_type_defaults_to_opaque() {
        let mut secret = json!({"data": {"a": "YQ=="}, "stringData": {"b": "bee", "a": "ay"}});
        settle_secret(&mut secret);
        assert_eq!(secret, json!({"type": "Opaque", "data": {"a": "YXk=", "b": "YmVl"}}));
        let mut typed = json!({"type": "kubernetes.io/tls"});
        settle_secret(&mut typed);
        assert_eq!(typed["type"], "kubernetes.io/tls");
    }
}
