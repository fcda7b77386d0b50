//! The component schemas of the OpenAPI v3 documents: enough for
//! `kubectl explain <kind>` (the kind's description and top-level fields)
//! and for clients that look a kind up by `x-kubernetes-group-version-kind`.
//!
//! Nested types (`PodSpec`, …) are plain `object`s without fields: the
//! simulator does not carry Kubernetes' full schema.

use crate::registry::ResourceType;
use serde_json::{json, Map, Value};

/// `#/components/schemas/` name of ObjectMeta.
pub(super) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// `#/components/schemas/` name of the PATCH body.
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
/// `#/components/schemas/` name of autoscaling/v1 Scale.
pub(super) const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// The schema name kube-apiserver gives a kind: the Go package path for
/// built-in groups, the reversed group for custom resources.
pub(super) fn schema_name(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        return format!("io.k8s.api.core.{version}.{kind}");
    }
    if group == "apiextensions.k8s.io" {
        return format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{version}.{kind}");
    }
    if group.ends_with(".k8s.io") || !group.contains('.') {
        let package = group.split('.').next().unwrap_or(group);
        return format!("io.k8s.api.{package}.{version}.{kind}");
    }
    let reversed: Vec<&str> = group.rsplit('.').collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// `{"$ref": "#/components/schemas/<name>"}`.
pub(super) fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The schema of `r`'s kind, tagged with its group/version/kind.
pub(super) fn kind_schema(r: &ResourceType) -> Value {
    let mut properties = Map::new();
    properties.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}),
    );
    properties.insert(
        "kind".into(),
        json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}),
    );
    properties.insert(
        "metadata".into(),
        json!({"allOf": [reference(OBJECT_META)], "default": {}, "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
    );
    let fields = if r.group == "events.k8s.io" {
        EVENTS_V1_FIELDS
    } else {
        fields(r.kind)
    };
    for (name, kind, description) in fields {
        properties.insert((*name).into(), json!({"type": kind, "description": description}));
    }
    json!({
        "type": "object",
        "description": description(r.kind),
        "properties": properties,
        "x-kubernetes-group-version-kind": [{"group": r.group, "kind": r.kind, "version": r.version}],
    })
}

/// Schemas every group version document carries.
pub(super) fn common() -> Vec<(String, Value)> {
    let string = |d: &str| json!({"type": "string", "description": d});
    let object = |d: &str| json!({"type": "object", "description": d, "additionalProperties": {"type": "string"}});
    let meta = json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "annotations": object("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
            "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry."},
            "generateName": string("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "labels": object("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "managedFields": {"type": "array", "items": {"type": "object"}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."},
            "name": string("Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically."),
            "namespace": string("Namespace defines the space within which each name must be unique."),
            "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "List of objects depended by this object."},
            "resourceVersion": string("An opaque value that represents the internal version of this object that can be used by clients to determine when objects have changed."),
            "uid": string("UID is the unique in time and space value for this object."),
        },
    });
    vec![
        (OBJECT_META.to_string(), meta),
        (
            PATCH.to_string(),
            json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
        ),
    ]
}

/// autoscaling/v1 Scale, for the `scale` subresources.
pub(super) fn scale() -> Value {
    json!({
        "type": "object",
        "description": "Scale represents a scaling request for a resource.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [reference(OBJECT_META)], "default": {}},
            "spec": {"type": "object", "description": "spec defines the behavior of the scale."},
            "status": {"type": "object", "description": "status is the current status of the scale."},
        },
        "x-kubernetes-group-version-kind": [{"group": "autoscaling", "kind": "Scale", "version": "v1"}],
    })
}

/// A kind's description, as `kubectl explain` prints it.
fn description(kind: &str) -> &'static str {
    match kind {
        "ConfigMap" => "ConfigMap holds configuration data for pods to consume.",
        "Endpoints" => "Endpoints is a collection of endpoints that implement the actual service.",
        "Event" => "Event is a report of an event somewhere in the cluster.",
        "LimitRange" => "LimitRange sets resource usage limits for each kind of resource in a Namespace.",
        "Namespace" => "Namespace provides a scope for Names. Use of multiple namespaces is optional.",
        "Node" => "Node is a worker node in Kubernetes. Each node will have a unique identifier in the cache (i.e. in etcd).",
        "PersistentVolumeClaim" => "PersistentVolumeClaim is a user's request for and claim to a persistent volume",
        "Pod" => "Pod is a collection of containers that can run on a host. This resource is created by clients and scheduled onto hosts.",
        "ResourceQuota" => "ResourceQuota sets aggregate quota restrictions enforced per namespace",
        "Secret" => "Secret holds secret data of a certain type. The total bytes of the values in the Data field must be less than MaxSecretSize bytes.",
        "ServiceAccount" => "ServiceAccount binds together: * a name, understood by users, and perhaps by peripheral systems, for an identity * a principal that can be authenticated and authorized * a set of secrets",
        "Service" => "Service is a named abstraction of software service (for example, mysql) consisting of local port (for example 3306) that the proxy listens on, and the selector that determines which pods will answer requests sent through the proxy.",
        "ControllerRevision" => "ControllerRevision implements an immutable snapshot of state data.",
        "DaemonSet" => "DaemonSet represents the configuration of a daemon set.",
        "Deployment" => "Deployment enables declarative updates for Pods and ReplicaSets.",
        "ReplicaSet" => "ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
        "StatefulSet" => "StatefulSet represents a set of pods with consistent identities.",
        "SelfSubjectReview" => "SelfSubjectReview contains the user information that the kube-apiserver has about the user making this request.",
        "TokenReview" => "TokenReview attempts to authenticate a token to a known user.",
        "LocalSubjectAccessReview" => "LocalSubjectAccessReview checks whether or not a user or group can perform an action in a given namespace.",
        "SelfSubjectAccessReview" => "SelfSubjectAccessReview checks whether or the current user can perform an action.",
        "SelfSubjectRulesReview" => "SelfSubjectRulesReview enumerates the set of actions the current user can perform within a namespace.",
        "SubjectAccessReview" => "SubjectAccessReview checks whether or not a user or group can perform an action.",
        "CronJob" => "CronJob represents the configuration of a single cron job.",
        "Job" => "Job represents the configuration of a single job.",
        "Ingress" => "Ingress is a collection of rules that allow inbound connections to reach the endpoints defined by a backend.",
        "NetworkPolicy" => "NetworkPolicy describes what network traffic is allowed for a set of Pods",
        "PodDisruptionBudget" => "PodDisruptionBudget is an object to define the max disruption that can be caused to a collection of pods",
        "ClusterRoleBinding" => "ClusterRoleBinding references a ClusterRole, but not contain it.",
        "ClusterRole" => "ClusterRole is a cluster level, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding or ClusterRoleBinding.",
        "RoleBinding" => "RoleBinding references a role, but does not contain it.",
        "Role" => "Role is a namespaced, logical grouping of PolicyRules that can be referenced as a unit by a RoleBinding.",
        "CustomResourceDefinition" => "CustomResourceDefinition represents a resource that should be exposed on the API server.",
        "Lease" => "Lease defines a lease concept.",
        "CronTab" => "CronTab runs a container image on a schedule (example custom resource).",
        _ => "",
    }
}

/// core/v1 Event's top-level fields.
const EVENT_FIELDS: &[(&str, &str, &str)] = &[
    ("involvedObject", "object", "The object that this event is about."),
    ("reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
    ("message", "string", "A human-readable description of the status of this operation."),
    ("type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
    ("count", "integer", "The number of times this event has occurred."),
    ("firstTimestamp", "string", "The time at which the event was first recorded."),
    ("lastTimestamp", "string", "The time at which the most recent occurrence of this event was recorded."),
    ("source", "object", "The component reporting this event."),
];

/// events.k8s.io/v1 Event's top-level fields, which differ from core's.
const EVENTS_V1_FIELDS: &[(&str, &str, &str)] = &[
    (
        "action",
        "string",
        "action is what action was taken/failed regarding to the regarding object.",
    ),
    (
        "eventTime",
        "string",
        "eventTime is the time when this Event was first observed. It is required.",
    ),
    (
        "note",
        "string",
        "note is a human-readable description of the status of this operation.",
    ),
    (
        "reason",
        "string",
        "reason is why the action was taken. It is human-readable.",
    ),
    (
        "regarding",
        "object",
        "regarding contains the object this Event is about.",
    ),
    (
        "reportingController",
        "string",
        "reportingController is the name of the controller that emitted this Event.",
    ),
    (
        "reportingInstance",
        "string",
        "reportingInstance is the ID of the controller instance.",
    ),
    (
        "type",
        "string",
        "type is the type of this event (Normal, Warning), new types could be added in the future.",
    ),
];

/// Top-level fields besides apiVersion, kind and metadata: (name, type,
/// description).
fn fields(kind: &str) -> &'static [(&'static str, &'static str, &'static str)] {
    const SPEC_STATUS: &[(&str, &str, &str)] = &[
        ("spec", "object", "Spec defines the desired behavior of the object."),
        (
            "status",
            "object",
            "Status is the most recently observed status of the object. Populated by the system. Read-only.",
        ),
    ];
    match kind {
        "ConfigMap" => &[
            ("binaryData", "object", "BinaryData contains the binary data."),
            ("data", "object", "Data contains the configuration data."),
            ("immutable", "boolean", "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated."),
        ],
        "Secret" => &[
            ("data", "object", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string."),
            ("immutable", "boolean", "Immutable, if set to true, ensures that data stored in the Secret cannot be updated."),
            ("stringData", "object", "stringData allows specifying non-binary secret data in string form. It is provided as a write-only input field for convenience."),
            ("type", "string", "Used to facilitate programmatic handling of secret data."),
        ],
        "ServiceAccount" => &[
            ("automountServiceAccountToken", "boolean", "AutomountServiceAccountToken indicates whether pods running as this service account should have an API token automatically mounted."),
            ("imagePullSecrets", "array", "ImagePullSecrets is a list of references to secrets in the same namespace to use for pulling any images in pods that reference this ServiceAccount."),
            ("secrets", "array", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."),
        ],
        "Endpoints" => &[("subsets", "array", "The set of all endpoints is the union of all subsets.")],
        "Event" => EVENT_FIELDS,
        "Role" => &[("rules", "array", "Rules holds all the PolicyRules for this Role")],
        "ClusterRole" => &[
            ("aggregationRule", "object", "AggregationRule is an optional field that describes how to build the Rules for this ClusterRole."),
            ("rules", "array", "Rules holds all the PolicyRules for this ClusterRole"),
        ],
        "RoleBinding" | "ClusterRoleBinding" => &[
            ("roleRef", "object", "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace."),
            ("subjects", "array", "Subjects holds references to the objects the role applies to."),
        ],
        "ControllerRevision" => &[
            ("data", "object", "Data is the serialized representation of the state."),
            ("revision", "integer", "Revision indicates the revision of the state represented by Data."),
        ],
        "SelfSubjectReview" => &[("status", "object", "Status is filled in by the server with the user attributes.")],
        "Lease" | "LimitRange" | "NetworkPolicy" => &[("spec", "object", "Spec defines the desired behavior of the object.")],
        _ => SPEC_STATUS,
    }
}
