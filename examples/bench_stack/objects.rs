//! The objects the benchmark reads: a 1 KiB ConfigMap, 500 pods of about
//! 6 KiB (a LIST of a few MiB), 500 Secrets, and one ConfigMap alone in its
//! namespace for the watches.

use serde_json::{json, Value};

/// Namespace of the read scenarios.
pub const NAMESPACE: &str = "bench";
/// Namespace holding only the watched ConfigMap.
pub const WATCH_NAMESPACE: &str = "bench-watch";
/// Pods and Secrets each.
pub const COUNT: usize = 500;

/// Everything, namespaces first.
pub fn all() -> Vec<Value> {
    let mut objects = vec![namespace(NAMESPACE), namespace(WATCH_NAMESPACE)];
    objects.push(config_map(NAMESPACE, "small", 1024 - 180));
    objects.push(config_map(WATCH_NAMESPACE, "watched", 16));
    objects.extend((0..COUNT).map(pod));
    objects.extend((0..COUNT).map(secret));
    objects
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A ConfigMap whose JSON is about `payload + 180` bytes.
fn config_map(namespace: &str, name: &str, payload: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench"}},
        "data": {"payload": "x".repeat(payload)},
    })
}

fn pod(i: usize) -> Value {
    let env: Vec<Value> = (0..12)
        .map(|e| json!({"name": format!("SETTING_{e}"), "value": format!("value-{i}-{e}-{}", "v".repeat(24))}))
        .collect();
    let container = |name: &str| {
        json!({
            "name": name,
            "image": format!("registry.example.com/bench/{name}:1.{i}.0"),
            "args": ["--listen=:8080", "--log-level=info", "--metrics=:9090"],
            "env": env,
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/bench"}],
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 10},
        })
    };
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("web-{i:04}"),
            "namespace": NAMESPACE,
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "6d4cf56db6"},
            "annotations": {"bench.example.com/notes": "n".repeat(200)},
        },
        "spec": {
            "containers": [container("web"), container("sidecar")],
            "volumes": [{"name": "config", "configMap": {"name": "small"}}],
            "nodeName": format!("node-{}", i % 7),
            "serviceAccountName": "default",
        },
        "status": {
            "phase": "Running",
            "podIP": format!("10.1.{}.{}", i / 250, i % 250 + 2),
            "hostIP": format!("192.168.0.{}", i % 7 + 10),
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": [
                {"name": "web", "ready": true, "restartCount": 0, "image": "web", "imageID": "sha256:".to_string() + &"a".repeat(64), "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                {"name": "sidecar", "ready": true, "restartCount": 0, "image": "sidecar", "imageID": "sha256:".to_string() + &"b".repeat(64), "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
            ],
        },
    })
}

fn secret(i: usize) -> Value {
    use base64::Engine;
    let value = |key: &str| base64::engine::general_purpose::STANDARD.encode(format!("{key}-{i}-{}", "s".repeat(500)));
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("credentials-{i:04}"), "namespace": NAMESPACE, "labels": {"app": "web"}},
        "type": "Opaque",
        "data": {"username": value("user"), "password": value("password"), "token": value("token"), "certificate": value("cert")},
    })
}
