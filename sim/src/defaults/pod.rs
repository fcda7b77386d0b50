//! Pod and pod template defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`,
//! `SetDefaults_Volume`, …), and what admission adds to a new Pod.

use serde_json::{json, Map, Value};

/// Defaults of a pod spec, a Pod's or a template's.
pub(super) fn spec(spec: &mut Map<String, Value>) {
    for (key, value) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
    ] {
        spec.entry(key).or_insert(value);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(spec, list) {
            self::container(container);
        }
    }
    for volume in items(spec, "volumes") {
        self::volume(volume);
    }
}

/// The maps of the list `spec[key]`.
fn items<'a>(map: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn container(container: &mut Map<String, Value>) {
    let image = container.get("image").and_then(Value::as_str).unwrap_or_default();
    let policy = pull_policy(image);
    for (key, value) in [
        ("resources", json!({})),
        ("terminationMessagePath", json!("/dev/termination-log")),
        ("terminationMessagePolicy", json!("File")),
        ("imagePullPolicy", json!(policy)),
    ] {
        container.entry(key).or_insert(value);
    }
    for port in items(container, "ports") {
        port.entry("protocol").or_insert(json!("TCP"));
    }
    for env in items(container, "env") {
        let field_ref = env
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut);
        if let Some(field_ref) = field_ref {
            field_ref.entry("apiVersion").or_insert(json!("v1"));
        }
    }
}

/// `Always` for an untagged or `:latest` image (not pinned by digest),
/// else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

/// A volume without a source is an `emptyDir`; file-projecting sources
/// get mode 0644.
fn volume(volume: &mut Map<String, Value>) {
    const SOURCES: &[&str] = &[
        "emptyDir",
        "hostPath",
        "secret",
        "configMap",
        "projected",
        "downwardAPI",
        "persistentVolumeClaim",
        "csi",
        "ephemeral",
        "nfs",
        "iscsi",
        "image",
    ];
    if !SOURCES.iter().any(|s| volume.contains_key(*s)) && volume.len() == 1 {
        volume.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "projected", "downwardAPI"] {
        if let Some(source) = volume.get_mut(source).and_then(Value::as_object_mut) {
            source.entry("defaultMode").or_insert(json!(420));
        }
    }
}

/// What admission adds to a new Pod after the fields above were recorded
/// (so no one owns them): its ServiceAccount, the default tolerations for
/// unready and unreachable nodes, and its priority.
pub(super) fn admit(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let account = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(list) = tolerations.as_array_mut() {
        for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
            let covered = list
                .iter()
                .any(|t| t["key"] == key || (t["operator"] == "Exists" && t.get("key").is_none()));
            if !covered {
                list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
    spec.entry("priority").or_insert(json!(0));
    spec.entry("preemptionPolicy").or_insert(json!("PreemptLowerPriority"));
}
