//! Validation of objects and request options, with kube-apiserver's
//! messages.
//!
//! - Names: required (`name or generateName is required`), RFC 1123
//!   subdomain for most kinds, RFC 1123 label for namespaces, RFC 1035 label
//!   for services, path segment for RBAC objects.
//! - Immutable fields on update: a Job's `spec.template` and `spec.selector`,
//!   a Service's `spec.clusterIP`, a Deployment's `spec.selector`, an
//!   immutable ConfigMap's or Secret's `data`.
//! - Options: `dryRun` (only `All`), `fieldManager` (required for apply, at
//!   most 128 printable characters), `force` (apply only),
//!   `fieldValidation`.
//! - Strict field validation from the small schema in [`schema`].
//! - Fields (`kinds`): label keys and values, RBAC rules' verbs, the keys a
//!   Secret's type requires and its immutable type, base64 Secret data,
//!   Service port numbers, a Pod's containers and the spec fields a Pod
//!   update may change, a workload's selector and template labels.
//!
//! # Known differences from kube-apiserver
//!
//! - Only the fields above are validated; a Deployment without containers,
//!   say, is accepted. Several invalid labels are reported in key order
//!   (kube iterates a Go map).
//! - A forbidden Pod update's message leaves out the diff of kube's
//!   internal Pod struct that kube-apiserver appends.
//! - Unknown fields deeper than `spec.<field>` (say in a pod template) are
//!   not detected, nor are duplicate fields.
//! - `field is immutable` errors show the value as JSON where the API server
//!   prints a Go struct dump.

// Errors are `Status` by value, the contract between the simulator's
// parts; the error path is cold, so boxing would buy nothing.
#![allow(clippy::result_large_err)]

mod kinds;
pub mod schema;

use crate::status::{Status, StatusCause, StatusDetails};
use serde_json::Value;

/// The type of a field error, as `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `Required value`.
    Required,
    /// `Invalid value`.
    Invalid,
    /// `Forbidden`.
    Forbidden,
    /// `Duplicate value`.
    Duplicate,
    /// `Unsupported value`.
    NotSupported,
    /// `Too long`.
    TooLong,
}

/// One field error (`field.Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// The offending value, already rendered as Go would (`"x"`,
    /// `[]string{"x"}`); empty where the type shows none.
    pub value: String,
    /// The detail message.
    pub detail: String,
}

impl FieldError {
    /// A field error.
    pub fn new(kind: ErrorType, field: &str, value: String, detail: impl Into<String>) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
        }
    }

    /// The message without the field, as a cause's `message`.
    pub fn message(&self) -> String {
        let (value, detail) = (&self.value, &self.detail);
        match self.kind {
            ErrorType::Required if detail.is_empty() => "Required value".to_string(),
            ErrorType::Required => format!("Required value: {detail}"),
            ErrorType::Invalid => format!("Invalid value: {value}: {detail}"),
            ErrorType::Forbidden => format!("Forbidden: {detail}"),
            ErrorType::Duplicate => format!("Duplicate value: {value}"),
            ErrorType::NotSupported => format!("Unsupported value: {value}: supported values: {detail}"),
            ErrorType::TooLong => format!("Too long: {detail}"),
        }
    }

    fn cause(&self) -> StatusCause {
        let reason = match self.kind {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::TooLong => "FieldValueTooLong",
        };
        StatusCause {
            reason: reason.into(),
            message: self.message(),
            field: self.field.clone(),
        }
    }
}

/// Go's `%q` of a string (close enough: JSON escaping).
pub fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// 422 Invalid: `<Kind>[.<group>] "<name>" is invalid: <errors>`.
pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let rendered: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.field, e.message())).collect();
    let list = match rendered.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Status::failure(422, "Invalid", format!("{qualified} \"{name}\" is invalid: {list}")).with_details(StatusDetails {
        name: name.into(),
        group: group.into(),
        kind: kind.into(),
        causes: errors.iter().map(FieldError::cause).collect(),
        ..Default::default()
    })
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| alnum(c) || *c == b'-')
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

/// Errors in `metadata.name` for an object of `group`/`kind`.
pub fn name_errors(group: &str, kind: &str, name: &str) -> Vec<FieldError> {
    let field = "metadata.name";
    if name.is_empty() {
        return vec![FieldError::new(
            ErrorType::Required,
            field,
            String::new(),
            "name or generateName is required",
        )];
    }
    let invalid = |detail: &str| vec![FieldError::new(ErrorType::Invalid, field, quote(name), detail)];
    match (group, kind) {
        ("rbac.authorization.k8s.io", _) => {
            if matches!(name, "." | "..") {
                invalid(&format!("may not be '{name}'"))
            } else if let Some(bad) = ["/", "%"].iter().find(|c| name.contains(**c)) {
                invalid(&format!("may not contain '{bad}'"))
            } else {
                Vec::new()
            }
        }
        ("", "Namespace") if !is_label(name) => {
            let detail = if name.len() > 63 {
                "must be no more than 63 characters"
            } else {
                LABEL_MSG
            };
            invalid(detail)
        }
        ("", "Service") if !(is_label(name) && name.starts_with(|c: char| c.is_ascii_lowercase())) => {
            let detail = if name.len() > 63 {
                "must be no more than 63 characters"
            } else {
                DNS1035_MSG
            };
            invalid(detail)
        }
        ("", "Namespace" | "Service") => Vec::new(),
        _ if name.len() > 253 => invalid("must be no more than 253 characters"),
        _ if !is_subdomain(name) => invalid(SUBDOMAIN_MSG),
        _ => Vec::new(),
    }
}

/// Validate an object about to be created: 422 on a bad name or field.
pub fn create(group: &str, kind: &str, obj: &Value) -> Result<(), Status> {
    let name = crate::store::meta_str(obj, "name");
    let mut errors = name_errors(group, kind, name);
    errors.extend(kinds::create_errors(group, kind, obj));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid(group, kind, name, &errors))
    }
}

/// A body that fails to decode as its kind (400), as the API server's
/// decoder words it: so far a Secret's `data` that is not base64.
pub fn decode(group: &str, kind: &str, obj: &Value) -> Result<(), Status> {
    match (group, kind) {
        ("", "Secret") => match kinds::secret_data_error(obj) {
            Some(error) => Err(Status::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: {error}"
            ))),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Validate an update of `old` to `new`: its fields and the immutable ones.
pub fn update(group: &str, kind: &str, old: &Value, new: &Value) -> Result<(), Status> {
    let name = crate::store::meta_str(new, "name");
    let mut errors = kinds::update_errors(group, kind, old, new);
    errors.extend(update_errors(group, kind, old, new));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid(group, kind, name, &errors))
    }
}

/// The fields of `kind` an update may not change that this one changes.
fn update_errors(group: &str, kind: &str, old: &Value, new: &Value) -> Vec<FieldError> {
    let immutable = |path: &[&str]| changed_immutable(old, new, path);
    match (group, kind) {
        ("batch", "Job") => [immutable(&["spec", "selector"]), immutable(&["spec", "template"])]
            .into_iter()
            .flatten()
            .collect(),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => {
            immutable(&["spec", "selector"]).into_iter().collect()
        }
        ("", "ConfigMap" | "Secret")
            if old["immutable"] == Value::Bool(true)
                && (old.get("data") != new.get("data") || old.get("binaryData") != new.get("binaryData")) =>
        {
            vec![FieldError::new(
                ErrorType::Forbidden,
                "data",
                String::new(),
                "field is immutable when `immutable` is set",
            )]
        }
        ("", "Service") => cluster_ip_change(old, new).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The field at `path` differs between `old` and `new`, and may not.
fn changed_immutable(old: &Value, new: &Value, path: &[&str]) -> Option<FieldError> {
    let (a, b) = (pointer(old, path), pointer(new, path));
    if a == b {
        return None;
    }
    let value = b.map_or("null".to_string(), Value::to_string);
    Some(FieldError::new(
        ErrorType::Invalid,
        &path.join("."),
        value,
        "field is immutable",
    ))
}

/// A Service's clusterIP, once set, stays.
fn cluster_ip_change(old: &Value, new: &Value) -> Option<FieldError> {
    let (a, b) = (&old["spec"]["clusterIP"], &new["spec"]["clusterIP"]);
    if !(a.is_string() && b.is_string() && a != b) {
        return None;
    }
    let ip = b.as_str().unwrap_or_default();
    Some(FieldError::new(
        ErrorType::Invalid,
        "spec.clusterIPs[0]",
        format!("[]string{{{}}}", quote(ip)),
        "may not change once set",
    ))
}

fn pointer<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(key))
}

/// Unknown fields of `obj` (`spec.foo`, `metadata.bar`, `foo`), for strict
/// field validation; empty for kinds without a known schema.
pub fn unknown_fields(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    let Some(schema) = schema::kind_schema(group, kind) else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    let Some(top) = obj.as_object() else { return unknown };
    for key in top.keys() {
        let known = matches!(key.as_str(), "apiVersion" | "kind" | "metadata") || schema.top.contains(&key.as_str());
        if !known {
            unknown.push(key.clone());
        }
    }
    if let Some(meta) = obj["metadata"].as_object() {
        unknown.extend(
            meta.keys()
                .filter(|k| !schema::OBJECT_META.contains(&k.as_str()))
                .map(|k| format!("metadata.{k}")),
        );
    }
    if let (Some(spec_fields), Some(spec)) = (schema.spec, obj["spec"].as_object()) {
        unknown.extend(
            spec.keys()
                .filter(|k| !spec_fields.contains(&k.as_str()))
                .map(|k| format!("spec.{k}")),
        );
    }
    unknown
}

/// How `fieldValidation` asks unknown fields to be treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them with a `Warning` header each (also when the parameter is
    /// absent).
    #[default]
    Warn,
    /// Refuse the request: 400 `strict decoding error: …`.
    Strict,
}

/// Apply `mode` to the unknown fields of `obj`: `Err(400)` for Strict, the
/// warnings to send for Warn. Unknown fields are then dropped, as
/// kube-apiserver's decoder drops them: they are never stored.
pub fn check_fields(mode: FieldValidation, group: &str, kind: &str, obj: &mut Value) -> Result<Vec<String>, Status> {
    let unknown = unknown_fields(group, kind, obj);
    let messages: Vec<String> = unknown.iter().map(|f| format!("unknown field {}", quote(f))).collect();
    if mode == FieldValidation::Strict && !messages.is_empty() {
        return Err(Status::bad_request(format!(
            "strict decoding error: {}",
            messages.join(", ")
        )));
    }
    for path in &unknown {
        let (parent, key) = match path.split_once('.') {
            Some((parent, key)) => (obj.get_mut(parent), key),
            None => (Some(&mut *obj), path.as_str()),
        };
        if let Some(map) = parent.and_then(Value::as_object_mut) {
            map.remove(key);
        }
    }
    Ok(if mode == FieldValidation::Warn {
        messages
    } else {
        Vec::new()
    })
}

/// Validate the request options (`CreateOptions`, `UpdateOptions`,
/// `PatchOptions`, `DeleteOptions`): 422 Invalid naming the options kind.
pub fn options(options_kind: &str, errors: &[FieldError]) -> Result<(), Status> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid("meta.k8s.io", options_kind, "", errors))
    }
}

/// Errors in a `dryRun` parameter: only `All` is supported.
pub fn dry_run_errors(values: &[String]) -> Vec<FieldError> {
    if values.iter().all(|v| v == "All") {
        return Vec::new();
    }
    // kube-apiserver 1.37 prints a rejected list as JSON: `["Maybe"]`.
    let rendered = serde_json::to_string(values).unwrap_or_default();
    vec![FieldError::new(ErrorType::NotSupported, "dryRun", rendered, "\"All\"")]
}

/// Errors in a delete's `propagationPolicy` (from the query or the body).
pub fn propagation_policy_errors(policy: Option<&str>) -> Vec<FieldError> {
    match policy {
        None | Some("Foreground" | "Background" | "Orphan") => Vec::new(),
        Some(other) => vec![FieldError::new(
            ErrorType::NotSupported,
            "propagationPolicy",
            quote(other),
            "\"Foreground\", \"Background\", \"Orphan\", \"nil\"",
        )],
    }
}

/// Errors in a `fieldManager` parameter (at most 128 printable characters).
pub fn field_manager_errors(manager: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if manager.len() > 128 {
        errors.push(FieldError::new(
            ErrorType::TooLong,
            "fieldManager",
            String::new(),
            "may not be more than 128 bytes",
        ));
    }
    if let Some((i, c)) = manager.char_indices().find(|(_, c)| c.is_control()) {
        errors.push(FieldError::new(
            ErrorType::Invalid,
            "fieldManager",
            quote(manager),
            format!("invalid character U+{:04X} (at position {i})", c as u32),
        ));
    }
    errors
}

/// Parse `fieldValidation`; 422 for an unknown value.
pub fn field_validation(options_kind: &str, value: Option<&str>) -> Result<FieldValidation, Status> {
    match value.unwrap_or("") {
        "Ignore" => Ok(FieldValidation::Ignore),
        // Unset means Warn, as kube-apiserver defaults it.
        "" | "Warn" => Ok(FieldValidation::Warn),
        "Strict" => Ok(FieldValidation::Strict),
        other => Err(invalid(
            "meta.k8s.io",
            options_kind,
            "",
            &[FieldError::new(
                ErrorType::NotSupported,
                "fieldValidation",
                quote(other),
                "\"\", \"Ignore\", \"Strict\", \"Warn\"",
            )],
        )),
    }
}

#[cfg(test)]
mod kinds_tests;
#[cfg(test)]
mod tests;
