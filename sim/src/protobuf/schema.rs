//! A table-driven schema: for each (apiVersion, kind) the simulator decodes,
//! the message's fields by number, with their JSON names and types, taken
//! from the `generated.proto` files of k8s.io/api and k8s.io/apimachinery.
//!
//! Only the fields that clients are known to send are described; the others
//! are skipped as unknown fields, exactly as a protobuf reader skips fields
//! of a newer schema.

mod apis;
mod core_v1;
mod meta;
mod pod;
mod reviews;

/// What a field holds, which decides how its wire value becomes JSON.
#[derive(Debug, Clone, Copy)]
pub enum Type {
    /// `string`: JSON string.
    String,
    /// `bool`: JSON boolean.
    Bool,
    /// `int32` (negative values are sign-extended varints).
    Int32,
    /// `int64`.
    Int64,
    /// `bytes`: base64 JSON string, as Go's `encoding/json` writes `[]byte`.
    Bytes,
    /// A nested message: JSON object.
    Message(&'static Message),
    /// `intstr.IntOrString` {1 type, 2 intVal, 3 strVal}: number or string.
    IntOrString,
    /// `resource.Quantity` {1 string}: JSON string.
    Quantity,
    /// `metav1.Time` {1 seconds, 2 nanos}: RFC 3339 string, absent if zero.
    Time,
    /// `ExtraValue` {1 repeated string items}: JSON array of strings.
    StringList,
    /// `runtime.RawExtension` {1 raw}: the embedded JSON document.
    RawExtension,
}

/// How many values a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One value; a later occurrence replaces (or, for messages, merges into)
    /// an earlier one.
    Single,
    /// `repeated`: a JSON array.
    Repeated,
    /// `map<string, T>`: a JSON object; each occurrence is an entry message
    /// {1 key, 2 value}.
    Map,
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The protobuf field number.
    pub number: u32,
    /// The JSON name.
    pub name: &'static str,
    /// What it holds.
    pub ty: Type,
    /// One value, a list or a map.
    pub shape: Shape,
    /// Keep a zero value (`""`, `0`, `false`). Kubernetes' generated code
    /// writes every non-pointer scalar, zero or not, and only non-nil
    /// pointers; so a zero is dropped (as Go's `omitempty` would) unless the
    /// Go field is a pointer or has no `omitempty`, where it is meaningful
    /// (`replicas: 0`).
    pub keep_zero: bool,
    /// The Go field is embedded: its JSON fields sit in the parent object
    /// (`Volume.volumeSource`, `ConfigMapVolumeSource.localObjectReference`).
    pub inline: bool,
}

impl Field {
    const fn new(number: u32, name: &'static str, ty: Type) -> Field {
        Field {
            number,
            name,
            ty,
            shape: Shape::Single,
            keep_zero: false,
            inline: false,
        }
    }

    /// This field as a `repeated` one.
    pub const fn repeated(self) -> Field {
        Field {
            shape: Shape::Repeated,
            ..self
        }
    }

    /// This field as a `map<string, T>`.
    pub const fn map(self) -> Field {
        Field {
            shape: Shape::Map,
            ..self
        }
    }

    /// Keep this field when it holds a zero value (a Go pointer, or a field
    /// without `omitempty`).
    pub const fn keep(self) -> Field {
        Field {
            keep_zero: true,
            ..self
        }
    }

    /// Merge this (message) field's JSON into its parent (an embedded Go
    /// struct).
    pub const fn inline(self) -> Field {
        Field { inline: true, ..self }
    }
}

/// A `string` field.
pub const fn string(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::String)
}
/// A `bool` field.
pub const fn boolean(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::Bool)
}
/// An `int32` field.
pub const fn int32(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::Int32)
}
/// An `int64` field.
pub const fn int64(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::Int64)
}
/// A `bytes` field.
pub const fn bytes(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::Bytes)
}
/// A nested message field.
pub const fn message(number: u32, name: &'static str, of: &'static Message) -> Field {
    Field::new(number, name, Type::Message(of))
}
/// An `IntOrString` field.
pub const fn int_or_string(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::IntOrString)
}
/// A `Quantity` field.
pub const fn quantity(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::Quantity)
}
/// A `Time` field.
pub const fn time(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::Time)
}
/// An `ExtraValue` (list of strings) field.
pub const fn string_list(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::StringList)
}
/// A `RawExtension` field.
pub const fn raw_extension(number: u32, name: &'static str) -> Field {
    Field::new(number, name, Type::RawExtension)
}

/// A message: its name (for errors) and the fields described.
#[derive(Debug)]
pub struct Message {
    /// The protobuf message name, e.g. `PodSpec`.
    pub name: &'static str,
    /// The fields described, in any order.
    pub fields: &'static [Field],
}

impl Message {
    /// The field with protobuf number `number`, if described.
    pub fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

/// A top-level kind: the `apiVersion` and `kind` a client puts in the
/// envelope's TypeMeta, and the message of its `raw` bytes.
#[derive(Debug)]
pub struct Kind {
    /// `v1`, `apps/v1`, …
    pub api_version: &'static str,
    /// `ConfigMap`, …
    pub kind: &'static str,
    /// The object's message.
    pub message: &'static Message,
}

const fn kind(api_version: &'static str, kind: &'static str, message: &'static Message) -> Kind {
    Kind {
        api_version,
        kind,
        message,
    }
}

/// Every kind the simulator decodes.
pub static KINDS: &[Kind] = &[
    kind("v1", "ConfigMap", &core_v1::CONFIG_MAP),
    kind("v1", "Secret", &core_v1::SECRET),
    kind("v1", "Namespace", &core_v1::NAMESPACE),
    kind("v1", "ServiceAccount", &core_v1::SERVICE_ACCOUNT),
    kind("v1", "Pod", &core_v1::POD),
    kind("v1", "Service", &core_v1::SERVICE),
    kind("v1", "ResourceQuota", &core_v1::RESOURCE_QUOTA),
    kind("apps/v1", "Deployment", &apis::DEPLOYMENT),
    kind("apps/v1", "ReplicaSet", &apis::REPLICA_SET),
    kind("batch/v1", "Job", &apis::JOB),
    kind("batch/v1", "CronJob", &apis::CRON_JOB),
    kind("rbac.authorization.k8s.io/v1", "Role", &apis::ROLE),
    kind("rbac.authorization.k8s.io/v1", "ClusterRole", &apis::CLUSTER_ROLE),
    kind("rbac.authorization.k8s.io/v1", "RoleBinding", &apis::ROLE_BINDING),
    kind(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &apis::ROLE_BINDING,
    ),
    kind("policy/v1", "PodDisruptionBudget", &apis::POD_DISRUPTION_BUDGET),
    kind("scheduling.k8s.io/v1", "PriorityClass", &apis::PRIORITY_CLASS),
    kind("networking.k8s.io/v1", "Ingress", &apis::INGRESS),
    kind("autoscaling/v1", "Scale", &apis::SCALE),
    kind("authentication.k8s.io/v1", "TokenRequest", &reviews::TOKEN_REQUEST),
    kind("authentication.k8s.io/v1", "TokenReview", &reviews::TOKEN_REVIEW),
    kind(
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
        &reviews::SELF_SUBJECT_REVIEW,
    ),
    kind(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &reviews::SELF_SUBJECT_ACCESS_REVIEW,
    ),
    kind(
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        &reviews::SELF_SUBJECT_RULES_REVIEW,
    ),
    kind(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &reviews::SUBJECT_ACCESS_REVIEW,
    ),
    kind(
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        &reviews::SUBJECT_ACCESS_REVIEW,
    ),
];

/// The message of `kind` in `api_version`. `DeleteOptions` is registered
/// in every group version (apimachinery's `AddToGroupVersion`), and typed
/// clients send it in their own, so it matches any version.
pub fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    if kind == "DeleteOptions" && !api_version.is_empty() {
        return Some(&meta::DELETE_OPTIONS);
    }
    KINDS
        .iter()
        .find(|k| k.api_version == api_version && k.kind == kind)
        .map(|k| k.message)
}
