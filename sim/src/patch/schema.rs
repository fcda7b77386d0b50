//! The part of the Kubernetes OpenAPI schema that patches need.
//!
//! Strategic merge patch reads `patchMergeKey`/`patchStrategy` from the Go
//! types; server-side apply reads `listType`/`listMapKey`/`mapType`/
//! `structType`. For the built-in kinds the two agree on which lists merge
//! by key (SMP names one key, apply the full key tuple, e.g. container
//! ports are merged by `containerPort` but owned as
//! `k:{"containerPort":80,"protocol":"TCP"}`), so one table serves both.
//! Anything not listed is [`Node::Untyped`]: maps merge key by key, lists
//! are atomic (apply) or replaced (strategic merge patch).

use serde_json::{Map, Value};

use crate::registry::ResourceType;

/// How a value at some place in an object merges and is owned.
#[derive(Debug)]
pub enum Node {
    /// A map with some known fields; fields not listed are `Untyped`.
    Struct(&'static [(&'static str, &'static Node)]),
    /// Replaced and owned as a whole (`listType=atomic`, `mapType=atomic`,
    /// `structType=atomic`).
    Atomic,
    /// A list of maps identified by key fields (`listType=map`).
    Keyed(&'static KeyedList),
    /// A list of scalars merged as a set (`listType=set`,
    /// `patchStrategy=merge` on a primitive list).
    Set,
    /// No schema: maps granular, lists atomic / replaced.
    Untyped,
}

/// A list merged by key.
#[derive(Debug)]
pub struct KeyedList {
    /// The strategic merge patch `patchMergeKey`.
    pub smp_key: &'static str,
    /// The apply `listMapKey`s, each with its default when omitted (kube
    /// fills `protocol: TCP` into a port's key even if the config leaves it
    /// out).
    pub keys: &'static [(&'static str, Option<&'static str>)],
    /// Schema of each item.
    pub item: &'static Node,
}

impl Node {
    /// The schema of field `name` of a map with this schema.
    pub fn field(&self, name: &str) -> &'static Node {
        match self {
            Node::Struct(fields) => fields
                .iter()
                .find(|(field, _)| *field == name)
                .map(|(_, node)| *node)
                .unwrap_or(&Node::Untyped),
            _ => &Node::Untyped,
        }
    }

    /// The schema of the items of a list with this schema, if it merges.
    pub fn keyed(&self) -> Option<&'static KeyedList> {
        match self {
            Node::Keyed(list) => Some(list),
            _ => None,
        }
    }
}

macro_rules! keyed_list {
    ($name:ident, $smp:expr, [$(($key:expr, $default:expr)),+], $item:expr) => {
        const $name: Node = Node::Keyed(&KeyedList {
            smp_key: $smp,
            keys: &[$(($key, $default)),+],
            item: $item,
        });
    };
}

keyed_list!(BY_NAME, "name", [("name", None)], &Node::Untyped);
keyed_list!(BY_TYPE, "type", [("type", None)], &Node::Untyped);
keyed_list!(BY_IP, "ip", [("ip", None)], &Node::Untyped);
keyed_list!(BY_UID, "uid", [("uid", None)], &Node::Untyped);
keyed_list!(MOUNTS, "mountPath", [("mountPath", None)], &Node::Untyped);
keyed_list!(DEVICES, "devicePath", [("devicePath", None)], &Node::Untyped);
keyed_list!(
    CONTAINER_PORTS,
    "containerPort",
    [("containerPort", None), ("protocol", Some("TCP"))],
    &Node::Untyped
);
keyed_list!(
    SERVICE_PORTS,
    "port",
    [("port", None), ("protocol", Some("TCP"))],
    &Node::Untyped
);
keyed_list!(
    SPREAD,
    "topologyKey",
    [("topologyKey", None), ("whenUnsatisfiable", None)],
    &Node::Untyped
);
keyed_list!(CONTAINERS, "name", [("name", None)], &CONTAINER);

const CONTAINER: Node = Node::Struct(&[
    ("ports", &CONTAINER_PORTS),
    ("env", &BY_NAME),
    ("volumeMounts", &MOUNTS),
    ("volumeDevices", &DEVICES),
]);

const OBJECT_META: Node = Node::Struct(&[("finalizers", &Node::Set), ("ownerReferences", &BY_UID)]);

const POD_SPEC: Node = Node::Struct(&[
    ("containers", &CONTAINERS),
    ("initContainers", &CONTAINERS),
    ("ephemeralContainers", &CONTAINERS),
    ("volumes", &BY_NAME),
    ("imagePullSecrets", &BY_NAME),
    ("hostAliases", &BY_IP),
    ("topologySpreadConstraints", &SPREAD),
    ("resourceClaims", &BY_NAME),
    ("schedulingGates", &BY_NAME),
    ("nodeSelector", &Node::Atomic),
]);

const POD_TEMPLATE: Node = Node::Struct(&[("metadata", &OBJECT_META), ("spec", &POD_SPEC)]);

const CONDITIONS: Node = Node::Struct(&[("conditions", &BY_TYPE)]);

const POD_STATUS: Node = Node::Struct(&[("conditions", &BY_TYPE), ("podIPs", &BY_IP)]);

const POD: Node = Node::Struct(&[("metadata", &OBJECT_META), ("spec", &POD_SPEC), ("status", &POD_STATUS)]);

const WORKLOAD_SPEC: Node = Node::Struct(&[("selector", &Node::Atomic), ("template", &POD_TEMPLATE)]);

const WORKLOAD: Node = Node::Struct(&[
    ("metadata", &OBJECT_META),
    ("spec", &WORKLOAD_SPEC),
    ("status", &CONDITIONS),
]);

const JOB_TEMPLATE: Node = Node::Struct(&[("metadata", &OBJECT_META), ("spec", &WORKLOAD_SPEC)]);

const CRON_JOB: Node = Node::Struct(&[
    ("metadata", &OBJECT_META),
    ("spec", &Node::Struct(&[("jobTemplate", &JOB_TEMPLATE)])),
]);

const POD_TEMPLATE_KIND: Node = Node::Struct(&[("metadata", &OBJECT_META), ("template", &POD_TEMPLATE)]);

const SERVICE: Node = Node::Struct(&[
    ("metadata", &OBJECT_META),
    (
        "spec",
        &Node::Struct(&[("ports", &SERVICE_PORTS), ("selector", &Node::Atomic)]),
    ),
    ("status", &CONDITIONS),
]);

const SELECTOR_SPEC: Node = Node::Struct(&[
    ("metadata", &OBJECT_META),
    (
        "spec",
        &Node::Struct(&[("podSelector", &Node::Atomic), ("selector", &Node::Atomic)]),
    ),
    ("status", &CONDITIONS),
]);

/// `roleRef` is `structType=atomic` (a binding's role cannot change field
/// by field); `subjects` is an atomic list, as any list not listed.
const BINDING: Node = Node::Struct(&[("metadata", &OBJECT_META), ("roleRef", &Node::Atomic)]);

const WITH_CONDITIONS: Node = Node::Struct(&[("metadata", &OBJECT_META), ("status", &CONDITIONS)]);

/// Any other object: only `metadata` is known.
const OBJECT: Node = Node::Struct(&[("metadata", &OBJECT_META)]);

/// API groups served by kube-apiserver itself: their kinds have strategic
/// merge information. Any other group is a custom resource (or aggregated).
const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// Whether kube-apiserver serves this type itself (and so knows its
/// strategic merge patch metadata).
pub fn is_built_in(rt: &ResourceType) -> bool {
    BUILT_IN_GROUPS.contains(&rt.group)
}

/// The schema of a whole object of this type.
pub fn root(rt: &ResourceType) -> &'static Node {
    if !is_built_in(rt) {
        return &OBJECT;
    }
    match rt.kind {
        "Pod" => &POD,
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" | "ReplicationController" => &WORKLOAD,
        "CronJob" => &CRON_JOB,
        "PodTemplate" => &POD_TEMPLATE_KIND,
        "Service" => &SERVICE,
        "NetworkPolicy" | "PodDisruptionBudget" => &SELECTOR_SPEC,
        "RoleBinding" | "ClusterRoleBinding" => &BINDING,
        "Node"
        | "Namespace"
        | "PersistentVolumeClaim"
        | "PersistentVolume"
        | "CustomResourceDefinition"
        | "CertificateSigningRequest" => &WITH_CONDITIONS,
        _ => &OBJECT,
    }
}

/// The object kube compares a create against: a Go zero value serialized,
/// where non-pointer structs (`spec`, `status`, a pod template) are `{}`
/// rather than absent. It decides where an Update entry shows `.`.
pub fn zero_object(rt: &ResourceType) -> Value {
    let empty = || Value::Object(Map::new());
    let mut zero = Map::new();
    zero.insert("metadata".into(), empty());
    if !is_built_in(rt) {
        return Value::Object(zero);
    }
    // `containers` has no `omitempty`: a zero pod spec carries it as null,
    // so a create's entry shows no `.` for it (unlike `volumes`, say).
    let pod_spec = || serde_json::json!({"containers": null});
    let pod_template = || serde_json::json!({"metadata": {}, "spec": pod_spec()});
    let spec = match rt.kind {
        "Pod" => Some(pod_spec()),
        "Service"
        | "Namespace"
        | "Node"
        | "PersistentVolumeClaim"
        | "PersistentVolume"
        | "ResourceQuota"
        | "LimitRange"
        | "ReplicationController"
        | "Ingress"
        | "NetworkPolicy"
        | "PodDisruptionBudget"
        | "HorizontalPodAutoscaler"
        | "Lease"
        | "CustomResourceDefinition"
        | "CertificateSigningRequest" => Some(empty()),
        "Deployment" => Some(serde_json::json!({"strategy": {}, "template": pod_template()})),
        "StatefulSet" | "DaemonSet" => Some(serde_json::json!({"updateStrategy": {}, "template": pod_template()})),
        "ReplicaSet" | "Job" => Some(serde_json::json!({"template": pod_template()})),
        "CronJob" => Some(serde_json::json!({
            "jobTemplate": {"metadata": {}, "spec": {"template": pod_template()}}
        })),
        _ => None,
    };
    if let Some(spec) = spec {
        zero.insert("spec".into(), spec);
        if !matches!(rt.kind, "Lease" | "NetworkPolicy") {
            zero.insert("status".into(), empty());
        }
    }
    Value::Object(zero)
}
