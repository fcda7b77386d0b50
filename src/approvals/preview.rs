//! The preview a person decides on: the current object and the dry run's
//! result, without the fields the server manages, Secret values hidden —
//! the ones the write changes marked `<redacted, N bytes, changed>`, so a
//! change that keeps a value's size still shows — and a diff of the two.
//!
//! Secret values are hidden by the same redactor as the responses
//! (`redact_document`), so a preview hides whatever a response would, in
//! every shape the redactor knows (a Secret, a list of them, …); a shape it
//! refuses is refused here too, and the write is not held.

use super::diff::diff;
use crate::secrets::{self, redact_document, RedactError, Target, LAST_APPLIED};
use base64::Engine;
use serde_json::{Map, Value};

/// The largest preview held; a larger one is refused instead.
pub const PREVIEW_LIMIT: usize = 256 * 1024;

/// A preview is kept with its held write.
pub use crate::store::Preview;

/// Fields the server sets: left out of the preview and the diff.
const SERVER_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
];

/// Why a write cannot be held with a preview.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The preview would be too large to hold.
    #[error("the preview of this write is {0} bytes, over portcullis's limit of {PREVIEW_LIMIT}: it cannot be held for approval")]
    TooLarge(usize),
    /// The Secret values in the dry run's answer (or the current object)
    /// could not be hidden, so nothing of it may be stored or shown.
    #[error("the dry run of this Secret write answered in a shape whose values portcullis cannot hide ({0}): it cannot be held for approval, and nothing was changed")]
    Unredactable(RedactError),
    /// A value or the last-applied annotation was still there after hiding.
    #[error("the preview of this Secret write would still show a value: it cannot be held for approval, and nothing was changed")]
    Leaked,
}

/// What kind of write a preview shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Write {
    /// The objects are core/v1 Secrets: values hidden.
    pub secret: bool,
    /// The write removes the object (or, for a deletecollection, the
    /// objects listed in the result).
    pub deleting: bool,
    /// The write goes through a subresource (`status`, `approval`, …),
    /// whose change may be all in `status`.
    pub subresource: bool,
}

/// Build the preview of a `write`.
pub fn build(
    current: Option<Value>,
    current_note: String,
    result: Value,
    write: Write,
) -> Result<Preview, PreviewError> {
    let Write { secret, deleting, .. } = write;
    let mut current = current;
    let mut result = result;
    if secret {
        hide_values(current.as_mut(), &mut result, deleting)?;
    }
    // `status` is the server's, and left out, unless the write changes
    // it: a `status` or `approval` write (a CSR's Approved condition), or
    // a custom resource without a status subresource, where a write sets
    // it like any field. A new object's is the server's defaults.
    let keeps_status = match &current {
        Some(current) => current.get("status") != result.get("status"),
        None => write.subresource,
    };
    let strip = |object: &mut Value| strip_server_fields(object, !keeps_status);
    current.iter_mut().for_each(strip);
    strip(&mut result);
    if let Some(Value::Array(items)) = result.get_mut("items") {
        items.iter_mut().for_each(strip);
    }
    // The preview holds each document whole (as shown: its server fields
    // gone): one past the limit alone is
    // refused before the YAML and the diff (quadratic in lines) are made.
    for document in current.iter().chain([&result]) {
        let len = serde_json::to_vec(document).map_or(usize::MAX, |text| text.len());
        if len > PREVIEW_LIMIT {
            return Err(PreviewError::TooLarge(len));
        }
    }
    // A deletecollection has no one current object: what it removes is the
    // dry run's list.
    let before = match &current {
        Some(current) => yaml(current),
        None if deleting => yaml(&result),
        None => String::new(),
    };
    let after = if deleting { String::new() } else { yaml(&result) };
    let preview = Preview {
        current,
        current_note,
        result,
        diff: diff(&before, &after),
    };
    let text = serde_json::to_string(&preview).map_err(|_| PreviewError::TooLarge(usize::MAX))?;
    if secret && text.contains(LAST_APPLIED) {
        return Err(PreviewError::Leaked);
    }
    if text.len() > PREVIEW_LIMIT {
        return Err(PreviewError::TooLarge(text.len()));
    }
    Ok(preview)
}

/// The object as YAML (empty when it cannot be written).
pub fn yaml(value: &Value) -> String {
    serde_yaml::to_string(value).unwrap_or_default()
}

/// One Secret value in a document, found before it is hidden.
struct Found {
    /// JSON pointer to it.
    pointer: String,
    /// Its size in bytes (decoded, for `data`).
    len: usize,
    /// The write changes it.
    changed: bool,
}

/// Hide every Secret value (and the last-applied annotation) of both
/// documents with the response redactor, then mark the result's values the
/// write changes. Which ones change is worked out first, on the values, by
/// comparing the result's objects with the current object; a value of a
/// new object, and any `stringData` (only ever what the write sends), is
/// changed; nothing is, in a delete.
fn hide_values(current: Option<&mut Value>, result: &mut Value, deleting: bool) -> Result<(), PreviewError> {
    let found = values(result, current.as_deref(), deleting);
    redact_document(result, Target::Secrets).map_err(PreviewError::Unredactable)?;
    if let Some(current) = current {
        redact_document(current, Target::Secrets).map_err(PreviewError::Unredactable)?;
    }
    for value in found {
        let Some(slot) = result.pointer_mut(&value.pointer) else {
            return Err(PreviewError::Leaked);
        };
        // The redactor replaced every value it hid; one it left is refused.
        if !slot.as_str().is_some_and(|s| s.starts_with("<redacted, ")) {
            return Err(PreviewError::Leaked);
        }
        if value.changed {
            *slot = Value::String(marker(value.len, true));
        }
    }
    Ok(())
}

/// The `data` and `stringData` values, and the hidden annotations' values,
/// of `result`'s objects (the object itself, or each of its `items`), each
/// marked changed or not.
fn values(result: &Value, current: Option<&Value>, deleting: bool) -> Vec<Found> {
    let objects: Vec<(String, &Value)> = match result.get("items") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("/items/{i}"), item))
            .collect(),
        _ => vec![(String::new(), result)],
    };
    let mut found = Vec::new();
    for (prefix, object) in objects {
        // The annotations whose values the redactor hides: a change to
        // one is still shown as a change.
        if let Some(Value::Object(annotations)) = object.pointer("/metadata/annotations") {
            for (key, value) in annotations {
                if key == LAST_APPLIED || secrets::names_only(key.as_bytes()) {
                    continue;
                }
                let changed = !deleting
                    && current.is_none_or(|current| {
                        current.pointer("/metadata/annotations").and_then(|a| a.get(key)) != Some(value)
                    });
                found.push(Found {
                    pointer: format!(
                        "{prefix}/metadata/annotations/{}",
                        key.replace('~', "~0").replace('/', "~1")
                    ),
                    len: value.as_str().map_or(0, str::len),
                    changed,
                });
            }
        }
        for field in ["data", "stringData"] {
            let Some(Value::Object(entries)) = object.get(field) else {
                continue;
            };
            for (key, value) in entries {
                let text = value.as_str().unwrap_or_default();
                let len = if field == "data" {
                    base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .map_or(text.len(), |b| b.len())
                } else {
                    text.len()
                };
                let changed = !deleting
                    && match current {
                        None => true,
                        Some(current) => {
                            field == "stringData" || current.get(field).and_then(|d| d.get(key)) != Some(value)
                        }
                    };
                let key = key.replace('~', "~0").replace('/', "~1");
                found.push(Found {
                    pointer: format!("{prefix}/{field}/{key}"),
                    len,
                    changed,
                });
            }
        }
    }
    found
}

/// `<redacted, N bytes>`, or `<redacted, N bytes, changed>`.
pub fn marker(len: usize, changed: bool) -> String {
    if changed {
        format!("<redacted, {len} bytes, changed>")
    } else {
        secrets::marker(len)
    }
}

fn strip_server_fields(object: &mut Value, status: bool) {
    let Value::Object(fields) = object else {
        return;
    };
    if status {
        fields.remove("status");
    }
    if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
        for field in SERVER_METADATA {
            metadata.remove(*field);
        }
        if metadata
            .get("annotations")
            .is_some_and(|a| a.as_object().is_some_and(Map::is_empty))
        {
            metadata.remove("annotations");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: Write = Write {
        secret: true,
        deleting: false,
        subresource: false,
    };
    const DELETE: Write = Write {
        secret: false,
        deleting: true,
        subresource: false,
    };

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "resourceVersion": "7", "uid": "u1",
            "managedFields": [{}], "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":1}"}},
            "data": data})
    }

    fn lines_of(object: &Value) -> Value {
        object["data"].clone()
    }

    /// A ConfigMap of 4,000 lines: its diff against the current object
    /// would be made (quadratic in lines) only to be refused for its size.
    #[test]
    fn a_document_past_the_limit_is_refused_before_its_yaml_and_diff_are_made() {
        let lines: serde_json::Map<String, Value> =
            (0..4000).map(|i| (format!("key-{i}"), json!("x".repeat(64)))).collect();
        let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": lines});
        let len = serde_json::to_vec(&big).unwrap().len();
        assert!(len > PREVIEW_LIMIT);
        let write = Write {
            secret: false,
            deleting: false,
            subresource: false,
        };
        let small = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}});
        for (current, result) in [(Some(small.clone()), big.clone()), (Some(big.clone()), small.clone())] {
            let refused = build(current, String::new(), result, write).unwrap_err();
            // The document's own size, not the whole preview's (larger).
            assert!(matches!(refused, PreviewError::TooLarge(n) if n == len), "{refused:?}");
        }
        // What the preview does not show does not count: an object whose
        // managedFields alone are past the limit is held.
        let mut managed = small.clone();
        managed["metadata"]["managedFields"] = json!([{"fieldsV1": lines_of(&big)}]);
        assert!(serde_json::to_vec(&managed).unwrap().len() > PREVIEW_LIMIT);
        assert!(build(Some(managed.clone()), String::new(), managed, write).is_ok());
    }

    #[test]
    fn a_changed_secret_value_of_the_same_size_is_marked_changed_without_its_value() {
        let before = secret(json!({"password": "aHVudGVyMg==", "user": "YWRtaW4="}));
        let after = secret(json!({"password": "aHVudGVyMw==", "user": "YWRtaW4="}));
        let preview = build(Some(before), String::new(), after, SECRET).unwrap();
        assert_eq!(preview.result["data"]["password"], "<redacted, 7 bytes, changed>");
        assert_eq!(preview.result["data"]["user"], "<redacted, 5 bytes>");
        assert_eq!(
            preview.current.as_ref().unwrap()["data"]["password"],
            "<redacted, 7 bytes>"
        );
        let text = serde_json::to_string(&preview).unwrap();
        for hidden in [
            "aHVudGVyMg",
            "aHVudGVyMw",
            "YWRtaW4",
            "last-applied",
            "managedFields",
            "resourceVersion",
        ] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        assert!(
            preview
                .diff
                .contains("-   password: <redacted, 7 bytes>\n+   password: <redacted, 7 bytes, changed>"),
            "{}",
            preview.diff
        );
    }

    /// A Secret's annotations are hidden as its values are (tools keep
    /// values in them), and a change to one is shown as a change.
    #[test]
    fn a_changed_secret_annotation_of_the_same_size_is_marked_changed_without_its_value() {
        let annotated = |allowed: &str| {
            let mut secret = secret(json!({"password": "aHVudGVyMg=="}));
            secret["metadata"]["annotations"]["reflector/allowed-namespaces"] = json!(allowed);
            secret["metadata"]["annotations"]["meta.helm.sh/release-name"] = json!("shop");
            secret
        };
        let preview = build(Some(annotated("team-a")), String::new(), annotated("agent1"), SECRET).unwrap();
        let annotations = &preview.result["metadata"]["annotations"];
        assert_eq!(
            annotations["reflector/allowed-namespaces"],
            "<redacted, 6 bytes, changed>"
        );
        assert_eq!(annotations["meta.helm.sh/release-name"], "shop", "a name is kept");
        assert_eq!(preview.result["data"]["password"], "<redacted, 7 bytes>");
        let text = serde_json::to_string(&preview).unwrap();
        assert!(!text.contains("team-a") && !text.contains("agent1"), "{text}");
        assert!(
            preview.diff.contains("<redacted, 6 bytes, changed>"),
            "{}",
            preview.diff
        );
    }

    #[test]
    fn every_item_of_a_deleted_secret_list_is_hidden_and_the_diff_removes_them() {
        let list = json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "9"},
            "items": [secret(json!({"password": "aHVudGVyMg=="})), secret(json!({"tls.key": "c2VjcmV0LWtleQ=="}))]});
        let preview = build(
            None,
            String::new(),
            list,
            Write {
                secret: true,
                deleting: true,
                subresource: false,
            },
        )
        .unwrap();
        assert_eq!(preview.result["items"][0]["data"]["password"], "<redacted, 7 bytes>");
        assert_eq!(preview.result["items"][1]["data"]["tls.key"], "<redacted, 10 bytes>");
        let text = serde_json::to_string(&preview).unwrap();
        for hidden in ["aHVudGVyMg", "c2VjcmV0LWtleQ", "last-applied", "managedFields"] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        assert!(
            preview.diff.contains("-     password: <redacted, 7 bytes>"),
            "{}",
            preview.diff
        );
    }

    #[test]
    fn a_secret_answer_the_redactor_refuses_is_not_previewed() {
        let odd = json!({"apiVersion": "v1", "kind": "Secret", "data": ["aHVudGVyMg=="]});
        let refused = build(None, String::new(), odd, SECRET).unwrap_err();
        assert!(matches!(refused, PreviewError::Unredactable(_)), "{refused}");
        assert!(build(None, String::new(), Value::Null, SECRET).is_err());
    }

    #[test]
    fn a_preview_over_256_kib_is_refused() {
        let big = json!({"kind": "ConfigMap", "data": {"x": "y".repeat(PREVIEW_LIMIT)}});
        assert!(build(None, "absent".into(), big, Write::default()).is_err());
    }

    #[test]
    fn a_delete_diff_removes_every_line_and_server_fields_never_show() {
        let object =
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u", "generation": 3}, "status": {"x": 1}});
        let preview = build(Some(object.clone()), String::new(), object, DELETE).unwrap();
        assert!(preview.diff.lines().all(|l| l.starts_with("- ")), "{}", preview.diff);
        assert!(!preview.diff.contains("uid") && !preview.diff.contains("status"));
    }

    #[test]
    fn a_write_that_changes_status_shows_it_and_one_that_does_not_leaves_it_out() {
        let csr = |conditions: Value| {
            json!({"kind": "CertificateSigningRequest", "metadata": {"name": "x", "resourceVersion": "4"},
                "spec": {"signerName": "s"}, "status": {"conditions": conditions}})
        };
        let approval = Write {
            subresource: true,
            ..Write::default()
        };
        let approved = csr(json!([{"type": "Approved", "status": "True"}]));
        let preview = build(Some(csr(json!([]))), String::new(), approved, approval).unwrap();
        assert!(preview.diff.contains("+     type: Approved"), "{}", preview.diff);
        let same = csr(json!([]));
        let relabelled = json!({"kind": "CertificateSigningRequest", "metadata": {"name": "x", "labels": {"a": "b"}},
            "spec": {"signerName": "s"}, "status": {"conditions": []}});
        let preview = build(Some(same), String::new(), relabelled, Write::default()).unwrap();
        assert!(!preview.diff.contains("status"), "{}", preview.diff);
        let created = build(None, String::new(), csr(json!([])), Write::default()).unwrap();
        assert!(
            created.result.get("status").is_none(),
            "a new object's status is the server's"
        );
    }
}
