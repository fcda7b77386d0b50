//! Validation of the fields themselves, kind by kind, as kube-apiserver's
//! `ValidateObjectMeta` and the `Validate<Kind>` functions check them:
//! label keys and values, RBAC rules' verbs, the keys a Secret type
//! requires and its immutable type, Service port numbers, a Pod's
//! containers and which of its spec fields an update may change, and that
//! a workload's selector selects its pod template.

use super::{quote, ErrorType, FieldError};
use serde_json::Value;

const QUALIFIED_NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const POD_UPDATE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Errors in a new object's fields.
pub(super) fn create_errors(group: &str, kind: &str, obj: &Value) -> Vec<FieldError> {
    let mut errors = label_errors(obj);
    match (group, kind) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => errors.extend(rule_errors(obj)),
        ("", "Secret") => errors.extend(secret_key_errors(obj)),
        ("", "Service") => errors.extend(port_errors(obj)),
        ("", "Pod") if obj["spec"]["containers"].as_array().is_none_or(Vec::is_empty) => {
            errors.push(required("spec.containers"));
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            if obj["spec"].get("selector").is_none_or(Value::is_null) {
                errors.push(required("spec.selector"));
            }
            errors.extend(template_label_errors(obj));
        }
        _ => {}
    }
    errors
}

/// Errors in an update's new fields (immutable fields are checked apart).
pub(super) fn update_errors(group: &str, kind: &str, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = label_errors(new);
    match (group, kind) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => errors.extend(rule_errors(new)),
        // A binding's role never changes: the value is the internal
        // rbac.RoleRef as JSON, with Go's field names.
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") if old["roleRef"] != new["roleRef"] => {
            let field = |f: &str| new["roleRef"][f].as_str().unwrap_or_default().to_string();
            let value =
                serde_json::json!({"APIGroup": field("apiGroup"), "Kind": field("kind"), "Name": field("name")});
            errors.push(FieldError::new(
                ErrorType::Invalid,
                "roleRef",
                value.to_string(),
                "field is immutable",
            ));
        }
        ("", "Secret") => {
            let (old_type, new_type) = (secret_type(old), secret_type(new));
            if old_type != new_type {
                let detail = "field is immutable";
                errors.push(FieldError::new(ErrorType::Invalid, "type", quote(new_type), detail));
            }
            errors.extend(secret_key_errors(new));
        }
        ("", "Service") => errors.extend(port_errors(new)),
        ("", "Pod") if !only_mutable_pod_fields_changed(&old["spec"], &new["spec"]) => {
            errors.push(FieldError::new(ErrorType::Forbidden, "spec", String::new(), POD_UPDATE));
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            errors.extend(template_label_errors(new));
        }
        _ => {}
    }
    errors
}

/// A workload's selector must select its own pod template.
fn template_label_errors(obj: &Value) -> Option<FieldError> {
    let labels = &obj["spec"]["template"]["metadata"]["labels"];
    if selects(&obj["spec"]["selector"], labels) {
        return None;
    }
    let shown = if labels.is_null() {
        "null".to_string()
    } else {
        labels.to_string()
    };
    let detail = "`selector` does not match template `labels`";
    Some(FieldError::new(
        ErrorType::Invalid,
        "spec.template.metadata.labels",
        shown,
        detail,
    ))
}

/// Whether a `LabelSelector` matches `labels` (no selector matches nothing).
fn selects(selector: &Value, labels: &Value) -> bool {
    if selector.is_null() {
        return false;
    }
    let has = |key: &str| labels.get(key).and_then(Value::as_str);
    let match_labels = selector["matchLabels"].as_object().into_iter().flatten();
    let labels_match = match_labels.into_iter().all(|(k, v)| has(k) == v.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    labels_match
        && expressions.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match (e["operator"].as_str().unwrap_or_default(), has(key)) {
                ("In", Some(v)) => values.contains(&v),
                ("NotIn", v) => v.is_none_or(|v| !values.contains(&v)),
                ("Exists", v) => v.is_some(),
                ("DoesNotExist", v) => v.is_none(),
                _ => false,
            }
        })
}

fn required(field: &str) -> FieldError {
    FieldError::new(ErrorType::Required, field, String::new(), "")
}

fn label_errors(obj: &Value) -> Vec<FieldError> {
    let Some(labels) = obj["metadata"]["labels"].as_object() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for (key, value) in labels {
        if let Some(detail) = qualified_name_error(key) {
            errors.push(FieldError::new(
                ErrorType::Invalid,
                "metadata.labels",
                quote(key),
                detail,
            ));
        }
        let value = value.as_str().unwrap_or_default();
        if let Some(detail) = label_value_error(value) {
            errors.push(FieldError::new(
                ErrorType::Invalid,
                "metadata.labels",
                quote(value),
                detail,
            ));
        }
    }
    errors
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a
/// name of at most 63 characters.
fn qualified_name_error(key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Some("prefix part must be non-empty".into());
            }
            if !super::is_subdomain(prefix) {
                return Some(format!("prefix part {}", super::SUBDOMAIN_MSG));
            }
            name
        }
        _ => {
            return Some(format!(
                "a qualified name {QUALIFIED_NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ))
        }
    };
    if name.is_empty() {
        Some("name part must be non-empty".into())
    } else if name.len() > 63 {
        Some("name part must be no more than 63 characters".into())
    } else if !is_qualified_part(name) {
        Some(format!("name part {QUALIFIED_NAME}"))
    } else {
        None
    }
}

fn label_value_error(value: &str) -> Option<String> {
    if value.len() > 63 {
        Some("must be no more than 63 characters".into())
    } else if !value.is_empty() && !is_qualified_part(value) {
        Some(LABEL_VALUE.into())
    } else {
        None
    }
}

/// Each rule needs verbs.
fn rule_errors(obj: &Value) -> Vec<FieldError> {
    let rules = obj["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
    rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule["verbs"].as_array().is_none_or(Vec::is_empty))
        .map(|(i, _)| required(&format!("rules[{i}].verbs")))
        .collect()
}

fn secret_type(secret: &Value) -> &str {
    secret["type"].as_str().filter(|t| !t.is_empty()).unwrap_or("Opaque")
}

/// The data keys a Secret's type requires.
fn secret_key_errors(secret: &Value) -> Vec<FieldError> {
    let needed: &[&str] = match secret_type(secret) {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        _ => &[],
    };
    needed
        .iter()
        .filter(|key| secret["data"].get(**key).is_none())
        .map(|key| required(&format!("data[{key}]")))
        .collect()
}

/// Port numbers (and numeric target ports) are 1–65535.
fn port_errors(service: &Value) -> Vec<FieldError> {
    let ports = service["spec"]["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut errors = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        for field in ["port", "targetPort"] {
            let Some(number) = port[field].as_i64() else { continue };
            if !(1..=65535).contains(&number) {
                errors.push(FieldError::new(
                    ErrorType::Invalid,
                    &format!("spec.ports[{i}].{field}"),
                    number.to_string(),
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
    errors
}

/// Whether `new` differs from `old` only where a running pod may change:
/// container images, `activeDeadlineSeconds`, added tolerations and
/// `terminationGracePeriodSeconds`.
fn only_mutable_pod_fields_changed(old: &Value, new: &Value) -> bool {
    let mut allowed = old.clone();
    let Some(spec) = allowed.as_object_mut() else {
        return old == new;
    };
    for list in ["containers", "initContainers"] {
        let (Some(mine), Some(theirs)) = (spec.get_mut(list).and_then(Value::as_array_mut), new[list].as_array())
        else {
            continue;
        };
        if mine.len() == theirs.len() {
            for (container, changed) in mine.iter_mut().zip(theirs) {
                container["image"] = changed["image"].clone();
            }
        }
    }
    let old_tolerations = old["tolerations"].as_array().cloned().unwrap_or_default();
    let kept = new["tolerations"]
        .as_array()
        .is_some_and(|t| old_tolerations.iter().all(|o| t.contains(o)));
    for field in ["activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations"] {
        if field == "tolerations" && !kept {
            continue;
        }
        match new.get(field) {
            Some(value) => spec.insert(field.into(), value.clone()),
            None => spec.remove(field),
        };
    }
    allowed == *new
}

/// Go's base64 decoding error for a Secret's `data` values, as the decoder
/// reports it: `illegal base64 data at input byte <n>`.
pub(super) fn secret_data_error(secret: &Value) -> Option<String> {
    let data = secret["data"].as_object()?;
    data.values().filter_map(Value::as_str).find_map(|encoded| {
        let bad = encoded
            .bytes()
            .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')));
        let at = bad.or_else(|| (encoded.len() % 4 != 0).then(|| encoded.len() / 4 * 4))?;
        Some(format!("illegal base64 data at input byte {at}"))
    })
}
