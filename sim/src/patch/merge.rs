//! RFC 7386 JSON merge patch (`application/merge-patch+json`).

use serde_json::{Map, Value};

/// Apply `patch` to `target` as RFC 7386 says: an object patch merges key by
/// key, `null` deletes a key, anything else (arrays included) replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut out = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch {
        if value.is_null() {
            out.remove(key);
        } else {
            let merged = merge_patch(out.get(key).unwrap_or(&Value::Null), value);
            out.insert(key.clone(), merged);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_merge_and_null_deletes() {
        let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
        let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "data": null});
        assert_eq!(
            merge_patch(&target, &patch),
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}})
        );
    }

    #[test]
    fn arrays_and_scalars_replace() {
        let target = json!({"list": [1, 2, 3], "n": {"deep": true}});
        let patch = json!({"list": [4], "n": 5});
        assert_eq!(merge_patch(&target, &patch), json!({"list": [4], "n": 5}));
    }

    #[test]
    fn nulls_inside_a_new_object_are_dropped() {
        // RFC 7386: a patch object merged into a missing value starts from {}.
        let patch = json!({"a": {"b": null, "c": 1}});
        assert_eq!(merge_patch(&json!({}), &patch), json!({"a": {"c": 1}}));
    }

    #[test]
    fn a_non_object_patch_replaces_the_whole_document() {
        assert_eq!(merge_patch(&json!({"a": 1}), &json!([1])), json!([1]));
        assert_eq!(merge_patch(&json!([1]), &json!({"a": 1})), json!({"a": 1}));
    }
}
