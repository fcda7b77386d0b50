//! The demo cluster's objects. (Stub: owned by the discovery work.)

use serde_json::Value;

/// Objects of the demo cluster: namespaces, workloads, Secrets, events, a
/// node.
pub fn demo_objects() -> Vec<Value> {
    Vec::new()
}
