//! The preview a person decides on: the current object and the dry run's
//! result, without the fields the server manages, Secret values hidden —
//! the ones the write changes marked `<redacted, N bytes, changed>`, so a
//! change that keeps a value's size still shows — and a diff of the two.

use super::diff::diff;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The largest preview held; a larger one is refused instead.
pub const PREVIEW_LIMIT: usize = 256 * 1024;

/// Fields the server sets: left out of the preview and the diff.
const SERVER_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
];

/// What a person sees before deciding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    /// The object now (`None`: it does not exist, or could not be read).
    pub current: Option<Value>,
    /// Why there is no current object, when there is none.
    #[serde(default)]
    pub current_note: String,
    /// What the dry run answered.
    pub result: Value,
    /// The change, line by line (YAML).
    pub diff: String,
}

/// The preview would be too large to hold.
#[derive(Debug, thiserror::Error)]
#[error("the preview of this write is {0} bytes, over portcullis's limit of {PREVIEW_LIMIT}: it cannot be held for approval")]
pub struct PreviewTooLarge(pub usize);

/// Build the preview. `secret`: the objects are core/v1 Secrets (values
/// hidden); `deleting`: the write removes the object.
pub fn build(
    current: Option<Value>,
    current_note: String,
    result: Value,
    secret: bool,
    deleting: bool,
) -> Result<Preview, PreviewTooLarge> {
    let mut current = current;
    let mut result = result;
    if secret {
        hide_values(&mut result, Side::Result(current.as_ref()));
        if let Some(current) = current.as_mut() {
            hide_values(current, Side::Current);
        }
    }
    current.iter_mut().for_each(strip_server_fields);
    strip_server_fields(&mut result);
    let before = current.as_ref().map(yaml).unwrap_or_default();
    let after = if deleting { String::new() } else { yaml(&result) };
    let preview = Preview {
        current,
        current_note,
        result,
        diff: diff(&before, &after),
    };
    let size = serde_json::to_vec(&preview).map_or(usize::MAX, |v| v.len());
    if size > PREVIEW_LIMIT {
        return Err(PreviewTooLarge(size));
    }
    Ok(preview)
}

/// The object as YAML (empty when it cannot be written).
pub fn yaml(value: &Value) -> String {
    serde_yaml::to_string(value).unwrap_or_default()
}

/// Which object is hidden: the current one (nothing marked), or the dry
/// run's result against the current object (`None`: it is being created, so
/// every value is new).
#[derive(Clone, Copy)]
enum Side<'a> {
    Current,
    Result(Option<&'a Value>),
}

/// Replace every `data` and `stringData` value by its marker, `changed`
/// where the write changes it; drop the last-applied annotation, which
/// holds the values in clear.
fn hide_values(object: &mut Value, side: Side<'_>) {
    for field in ["data", "stringData"] {
        let Some(Value::Object(values)) = object.get_mut(field) else {
            continue;
        };
        for (key, value) in values.iter_mut() {
            let text = value.as_str().unwrap_or_default();
            let len = if field == "data" {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_or(text.len(), |b| b.len())
            } else {
                text.len()
            };
            let changed = match side {
                Side::Current => false,
                // stringData is only ever what the write sends.
                Side::Result(Some(current)) => {
                    field == "stringData" || current.get(field).and_then(|d| d.get(key)) != Some(&*value)
                }
                Side::Result(None) => true,
            };
            *value = Value::String(marker(len, changed));
        }
    }
    if let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") {
        annotations.remove(crate::gateway::redact::object::LAST_APPLIED);
    }
}

/// `<redacted, N bytes>`, or `<redacted, N bytes, changed>`.
pub fn marker(len: usize, changed: bool) -> String {
    if changed {
        format!("<redacted, {len} bytes, changed>")
    } else {
        crate::gateway::redact::object::marker(len)
    }
}

fn strip_server_fields(object: &mut Value) {
    let Value::Object(fields) = object else {
        return;
    };
    fields.remove("status");
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

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "resourceVersion": "7", "uid": "u1",
            "managedFields": [{}], "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":1}"}},
            "data": data})
    }

    #[test]
    fn a_changed_secret_value_of_the_same_size_is_marked_changed_without_its_value() {
        let before = secret(json!({"password": "aHVudGVyMg==", "user": "YWRtaW4="}));
        let after = secret(json!({"password": "aHVudGVyMw==", "user": "YWRtaW4="}));
        let preview = build(Some(before), String::new(), after, true, false).unwrap();
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

    #[test]
    fn a_preview_over_256_kib_is_refused() {
        let big = json!({"kind": "ConfigMap", "data": {"x": "y".repeat(PREVIEW_LIMIT)}});
        assert!(build(None, "absent".into(), big, false, false).is_err());
    }

    #[test]
    fn a_delete_diff_removes_every_line_and_server_fields_never_show() {
        let object =
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u", "generation": 3}, "status": {"x": 1}});
        let preview = build(Some(object.clone()), String::new(), object, false, true).unwrap();
        assert!(preview.diff.lines().all(|l| l.starts_with("- ")), "{}", preview.diff);
        assert!(!preview.diff.contains("uid") && !preview.diff.contains("status"));
    }
}
