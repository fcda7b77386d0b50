//! The system ClusterRoles and ClusterRoleBindings every cluster starts with
//! (`bootstrap.yaml`, kube-apiserver's bootstrap policy trimmed to what the
//! simulator serves).

use serde::Deserialize;
use serde_json::Value;
use std::sync::LazyLock;

/// Parsed once: the YAML is compiled in, and a unit test proves it parses.
static OBJECTS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    serde_yaml::Deserializer::from_str(include_str!("bootstrap.yaml"))
        .map(|document| Value::deserialize(document).expect("bootstrap.yaml is valid"))
        .collect()
});

/// System ClusterRoles and bindings every cluster starts with:
/// `cluster-admin` (bound to `system:masters`), `admin`, `edit`, `view`,
/// `system:discovery`, `system:public-info-viewer` and `system:basic-user`
/// (bound to `system:authenticated`).
pub fn bootstrap_objects() -> Vec<Value> {
    OBJECTS.clone()
}
