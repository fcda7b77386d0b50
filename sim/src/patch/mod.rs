//! Merge patch, JSON patch, strategic merge patch and server-side apply.
//!
//! Pure functions over `serde_json::Value`; the handlers decode bodies, call
//! these and store what they return. Everything follows kube-apiserver
//! (apimachinery's `strategicpatch`, evanphx/json-patch, and the
//! structured-merge-diff field manager) for the built-in kinds.
//!
//! # Layout
//!
//! - [`merge`]: RFC 7386 JSON merge patch.
//! - [`json_patch`]: RFC 6902 JSON patch.
//! - [`schema`]: the little of the OpenAPI schema patches need: which lists
//!   merge by which keys, which lists are sets, which fields are atomic.
//! - [`strategic`]: strategic merge patch with its `$` directives.
//! - [`fieldset`]: field sets and their `FieldsV1` encoding.
//! - `typed`: schema-aware walks (field set of an object, comparison, the
//!   apply merge, removal of fields).
//! - `managed`: `metadata.managedFields` entries.
//! - [`apply`]: server-side apply and the ownership bookkeeping of ordinary
//!   writes.
//!
//! # Known differences from kube-apiserver
//!
//! - The schema is hand-written and covers the lists that matter in
//!   practice (containers, env, ports, volumes, volumeMounts,
//!   imagePullSecrets, conditions, ownerReferences, finalizers, …). Any list
//!   it does not know is atomic for apply and replaced by a strategic merge
//!   patch (kube does the same for lists without `patchStrategy`, e.g.
//!   `tolerations`). Struct-typed maps are treated as declared fields, so an
//!   apply of a custom resource never shows `.` for nested maps.
//! - Custom resources: strategic merge patch is refused with 415, as kube
//!   does; apply treats every map as granular and every list as atomic (the
//!   default of a structural schema without `x-kubernetes-list-type`).
//! - `status` is reset for main-resource writes of kinds with a status
//!   subresource: an apply's `status` is dropped before merging and is never
//!   owned; an update's status changes are not recorded. On the `status`
//!   subresource only `.status` is recorded. On `scale`, only
//!   `.spec.replicas`.
//! - Field managers are not capped at 10 Update entries (kube merges the
//!   oldest into `ancient-changes`); managedFields of other API versions are
//!   not converted (the simulator serves one version a kind).
//! - Apply YAML is parsed as YAML 1.2 (serde_yaml): `yes`/`no` stay
//!   strings, where kube's YAML 1.1 parser reads booleans.
//! - JSON patch does not accept negative array indices.

pub mod apply;
pub mod fieldset;
pub mod json_patch;
mod managed;
pub mod merge;
pub mod schema;
pub mod strategic;
mod typed;

use serde_json::Value;

use crate::status::{Status, StatusCause, StatusDetails};

pub use apply::{apply, apply_subresource, record_update, record_update_subresource};
pub use json_patch::json_patch;
pub use merge::merge_patch;
pub use strategic::strategic_merge_patch;

/// Why a patch or an apply was refused. [`PatchError::to_status`] gives the
/// Status kube-apiserver answers with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The patch is well-formed but cannot be applied (a failed JSON patch
    /// `test`, a missing path): 422 Invalid.
    #[error("{0}")]
    Invalid(String),
    /// Server-side apply found fields owned by other managers with other
    /// values: 409 Conflict with one `FieldManagerConflict` cause a field.
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<StatusCause>),
    /// The body is malformed (bad YAML, a directive of the wrong shape, wrong
    /// apiVersion or kind in an apply): 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// The patch type is not served for this kind (strategic merge patch on
    /// a custom resource): 415 UnsupportedMediaType.
    #[error("{0}")]
    Unsupported(String),
    /// An error kube-apiserver does not turn into a Status of its own (a
    /// strategic merge list item without its merge key): 500 with an empty
    /// reason, as kube answers for errors that are not a Status.
    #[error("{0}")]
    Internal(String),
}

impl PatchError {
    /// The `metav1.Status` kube-apiserver answers with for this error.
    pub fn to_status(&self) -> Status {
        match self {
            // kube-apiserver's generic answer: the reason stays in its log.
            PatchError::Invalid(_) => Status::failure(
                422,
                "Invalid",
                "the server rejected our request due to an error in our request",
            )
            .with_details(StatusDetails::default()),
            PatchError::Conflicts(causes) => {
                Status::failure(409, "Conflict", conflict_message(causes)).with_details(StatusDetails {
                    causes: causes.clone(),
                    ..Default::default()
                })
            }
            PatchError::BadRequest(message) => Status::bad_request(message.clone()),
            PatchError::Unsupported(message) => Status::failure(415, "UnsupportedMediaType", message.clone()),
            PatchError::Internal(message) => Status::failure(500, "", message.clone()),
        }
    }
}

/// The message of an apply conflict, worded as apimachinery's
/// `getConflictMessage`: one conflict on one line, several grouped by
/// manager.
fn conflict_message(causes: &[StatusCause]) -> String {
    if let [only] = causes {
        return format!("Apply failed with 1 conflict: {}: {}", only.message, only.field);
    }
    let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for cause in causes {
        let manager = cause.message.strip_prefix("conflict with ").unwrap_or(&cause.message);
        by_manager.entry(manager).or_default().push(&cause.field);
    }
    let mut lines = Vec::new();
    for (manager, fields) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(fields.iter().map(|field| format!("- {field}")));
    }
    format!("Apply failed with {} conflicts: {}", causes.len(), lines.join("\n"))
}

/// Decode an `application/apply-patch+yaml` body (YAML or JSON, one
/// document) into the object to apply. Malformed YAML or anything but a map
/// is a 400, as kube's `error decoding YAML`.
pub fn decode_apply_body(bytes: &[u8]) -> Result<Value, PatchError> {
    let value: Value =
        serde_yaml::from_slice(bytes).map_err(|err| PatchError::BadRequest(format!("error decoding YAML: {err}")))?;
    match value {
        Value::Object(_) => Ok(value),
        // An empty document decodes as an empty object in kube; the apply
        // then fails on its missing kind.
        Value::Null => Ok(Value::Object(Default::default())),
        other => Err(PatchError::BadRequest(format!(
            "error decoding YAML: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_type_name(&other)
        ))),
    }
}

/// The JSON type name Go's decoder uses in its errors.
fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn apply_body_decodes_yaml_and_json() {
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"1\"\n";
        let decoded = decode_apply_body(yaml).unwrap();
        assert_eq!(decoded["metadata"]["name"], "a");
        assert_eq!(decoded["data"]["k"], "1");
        let decoded = decode_apply_body(br#"{"kind":"ConfigMap","data":{"k":"v"}}"#).unwrap();
        assert_eq!(decoded["data"]["k"], "v");
    }

    #[test]
    fn bad_apply_yaml_is_a_bad_request() {
        let err = decode_apply_body(b"a: [1, 2\n").unwrap_err();
        assert!(matches!(err, PatchError::BadRequest(ref m) if m.starts_with("error decoding YAML")));
        assert_eq!(err.to_status().code, 400);
        let err = decode_apply_body(b"- 1\n- 2\n").unwrap_err();
        assert_eq!(err.to_status().reason, "BadRequest");
    }

    #[test]
    fn one_conflict_reads_like_apimachinery() {
        let causes = vec![StatusCause {
            reason: "FieldManagerConflict".into(),
            message: "conflict with \"kubectl-edit\" using apps/v1".into(),
            field: ".spec.replicas".into(),
        }];
        let status = PatchError::Conflicts(causes).to_status();
        assert_eq!(status.code, 409);
        assert_eq!(status.reason, "Conflict");
        assert_eq!(
            status.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas"
        );
        assert_eq!(status.details.unwrap().causes.len(), 1);
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let cause = |manager: &str, field: &str| StatusCause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with \"{manager}\""),
            field: field.into(),
        };
        let err = PatchError::Conflicts(vec![
            cause("b", ".spec.replicas"),
            cause("a", ".data.x"),
            cause("b", ".data.y"),
        ]);
        assert_eq!(
            err.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .data.x\nconflicts with \"b\":\n- .spec.replicas\n- .data.y"
        );
    }

    #[test]
    fn each_error_maps_to_its_code() {
        assert_eq!(PatchError::Invalid("x".into()).to_status().code, 422);
        let status = PatchError::Unsupported("x".into()).to_status();
        assert_eq!((status.code, status.reason.as_str()), (415, "UnsupportedMediaType"));
        let status = PatchError::Internal("x".into()).to_status();
        assert_eq!((status.code, status.reason.as_str()), (500, ""));
        let json = serde_json::to_value(PatchError::Invalid("boom".into()).to_status()).unwrap();
        assert_eq!(json["details"], json!({}), "kube names no cause");
    }
}

#[cfg(test)]
mod test_types;
