//! RFC 6902 JSON patch (`application/json-patch+json`), with the error
//! wording of evanphx/json-patch, which kube-apiserver uses.

use serde_json::{Map, Value};

use super::PatchError;

/// kube-apiserver refuses patches with more operations than this.
const MAX_OPERATIONS: usize = 10_000;

/// Apply the operations of `patch` (an array) to `target` in order. A
/// malformed patch is a [`PatchError::BadRequest`]; an operation that does
/// not apply (a failed `test`, a missing path) is a [`PatchError::Invalid`].
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(operations) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            super::go_type_name(patch)
        )));
    };
    if operations.len() > MAX_OPERATIONS {
        return Err(PatchError::BadRequest(format!(
            "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            operations.len()
        )));
    }
    let mut doc = target.clone();
    for operation in operations {
        let Value::Object(operation) = operation else {
            return Err(PatchError::BadRequest(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                super::go_type_name(operation)
            )));
        };
        apply_operation(&mut doc, operation).map_err(PatchError::Invalid)?;
    }
    Ok(doc)
}

fn apply_operation(doc: &mut Value, operation: &Map<String, Value>) -> Result<(), String> {
    let op = operation.get("op").and_then(Value::as_str).unwrap_or("unknown");
    let path = string_field(operation, "path")?;
    match op {
        "add" => add(doc, &path, value_field(operation, op)?),
        "remove" => remove(doc, &path)
            .map(drop)
            .map_err(|err| format!("error in remove for path: '{path}': {err}")),
        "replace" => replace(doc, &path, value_field(operation, op)?),
        "move" => {
            let from = string_field(operation, "from")?;
            if path.starts_with(&format!("{from}/")) {
                return Err(format!("Unable to move {from} into its own child {path}"));
            }
            let value = remove(doc, &from).map_err(|err| format!("error in remove for path: '{from}': {err}"))?;
            add(doc, &path, value)
        }
        "copy" => {
            let from = string_field(operation, "from")?;
            let value = get(doc, &from).cloned().ok_or_else(|| {
                format!("copy operation does not apply: doc is missing from path: {from}: missing value")
            })?;
            add(doc, &path, value)
        }
        "test" => test(doc, &path, operation.get("value")),
        other => Err(format!("Unexpected kind: {other}")),
    }
}

fn string_field(operation: &Map<String, Value>, name: &str) -> Result<String, String> {
    match operation.get(name) {
        Some(Value::String(value)) => Ok(value.clone()),
        _ => Err(format!("operation missing {name} field: missing value")),
    }
}

fn value_field(operation: &Map<String, Value>, op: &str) -> Result<Value, String> {
    operation
        .get("value")
        .cloned()
        .ok_or_else(|| format!("{op} operation missing value field: missing value"))
}

/// Split a JSON pointer into unescaped tokens (`~1` is `/`, `~0` is `~`).
fn tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("JSON pointer must be empty or start with a \"/\": {pointer}"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// An array index token: digits only, no leading zero.
fn index(token: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    let valid =
        !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) && (token == "0" || !token.starts_with('0'));
    let index: usize = if valid {
        token
            .parse()
            .map_err(|_| format!("Unable to access invalid index: {token}: invalid index referenced"))?
    } else {
        return Err(format!(
            "Unable to access invalid index: {token}: invalid index referenced"
        ));
    };
    if index > len || (index == len && !allow_end) {
        return Err(format!(
            "Unable to access invalid index: {index}: invalid index referenced"
        ));
    }
    Ok(index)
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut node = doc;
    for token in tokens(pointer).ok()? {
        node = match node {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => items.get(index(&token, items.len(), false).ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// The container holding the last token of `pointer`, and that token.
fn parent_mut<'a>(doc: &'a mut Value, pointer: &str) -> Option<(&'a mut Value, String)> {
    let mut tokens = tokens(pointer).ok()?;
    let last = tokens.pop()?;
    let mut node = doc;
    for token in tokens {
        node = match node {
            Value::Object(map) => map.get_mut(&token)?,
            Value::Array(items) => {
                let i = index(&token, items.len(), false).ok()?;
                items.get_mut(i)?
            }
            _ => return None,
        };
    }
    Some((node, last))
}

fn add(doc: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    if pointer.is_empty() {
        *doc = value;
        return Ok(());
    }
    let missing = || format!("add operation does not apply: doc is missing path: \"{pointer}\": missing value");
    let (parent, last) = parent_mut(doc, pointer).ok_or_else(missing)?;
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) if last == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => {
            let i = index(&last, items.len(), true)?;
            items.insert(i, value);
            Ok(())
        }
        _ => Err(missing()),
    }
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, String> {
    let (parent, last) =
        parent_mut(doc, pointer).ok_or_else(|| "Unable to remove nonexistent key: missing value".to_string())?;
    match parent {
        Value::Object(map) => map
            .remove(&last)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {last}: missing value")),
        Value::Array(items) => {
            let i = index(&last, items.len(), false)?;
            Ok(items.remove(i))
        }
        _ => Err(format!("Unable to remove nonexistent key: {last}: missing value")),
    }
}

fn replace(doc: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    if pointer.is_empty() {
        *doc = value;
        return Ok(());
    }
    let missing = || format!("replace operation does not apply: doc is missing key: {pointer}: missing value");
    let (parent, last) = parent_mut(doc, pointer).ok_or_else(missing)?;
    let slot = match parent {
        Value::Object(map) => map.get_mut(&last),
        Value::Array(items) => {
            let i = index(&last, items.len(), false)?;
            items.get_mut(i)
        }
        _ => None,
    };
    *slot.ok_or_else(missing)? = value;
    Ok(())
}

fn test(doc: &Value, pointer: &str, expected: Option<&Value>) -> Result<(), String> {
    let actual = get(doc, pointer).filter(|v| !v.is_null());
    let expected = expected.filter(|v| !v.is_null());
    if actual == expected {
        Ok(())
    } else {
        Err(format!("testing value {pointer} failed: test failed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(target: Value, patch: Value) -> Result<Value, PatchError> {
        json_patch(&target, &patch)
    }

    #[test]
    fn add_replace_remove_change_the_document() {
        let out = run(
            json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}}),
            json!([
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "remove", "path": "/metadata/labels/a"}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"b": "2"}}, "spec": {"replicas": 3}})
        );
    }

    #[test]
    fn pointer_escapes_reach_keys_with_slash_and_tilde() {
        let out = run(
            json!({"metadata": {"annotations": {}}}),
            json!([
                {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "x"},
                {"op": "add", "path": "/metadata/annotations/a~0b", "value": "y"}
            ]),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"example.com/owner": "x", "a~b": "y"})
        );
    }

    #[test]
    fn dash_appends_and_indices_insert() {
        let out = run(
            json!({"list": [1, 3]}),
            json!([
                {"op": "add", "path": "/list/-", "value": 4},
                {"op": "add", "path": "/list/1", "value": 2},
                {"op": "add", "path": "/list/4", "value": 5}
            ]),
        )
        .unwrap();
        assert_eq!(out["list"], json!([1, 2, 3, 4, 5]));
        let err = run(
            json!({"list": [1]}),
            json!([{"op": "add", "path": "/list/3", "value": 0}]),
        );
        assert!(matches!(err, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn move_and_copy_use_from() {
        let out = run(
            json!({"a": {"x": 1}, "b": {}}),
            json!([
                {"op": "copy", "from": "/a/x", "path": "/b/y"},
                {"op": "move", "from": "/a", "path": "/c"}
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"b": {"y": 1}, "c": {"x": 1}}));
    }

    #[test]
    fn a_failed_test_is_invalid_and_changes_nothing() {
        let target = json!({"spec": {"replicas": 1}});
        let err = run(
            target.clone(),
            json!([
                {"op": "replace", "path": "/spec/replicas", "value": 2},
                {"op": "test", "path": "/spec/replicas", "value": 5}
            ]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            PatchError::Invalid("testing value /spec/replicas failed: test failed".into())
        );
        assert_eq!(err.to_status().code, 422);
        let ok = run(
            target,
            json!([{"op": "test", "path": "/spec", "value": {"replicas": 1}}]),
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn missing_paths_and_unknown_ops_are_invalid() {
        let target = json!({"a": 1});
        for patch in [
            json!([{"op": "remove", "path": "/b"}]),
            json!([{"op": "replace", "path": "/b", "value": 1}]),
            json!([{"op": "add", "path": "/x/y", "value": 1}]),
            json!([{"op": "frobnicate", "path": "/a"}]),
        ] {
            assert!(matches!(run(target.clone(), patch), Err(PatchError::Invalid(_))));
        }
        assert!(matches!(
            run(target, json!({"op": "add"})),
            Err(PatchError::BadRequest(_))
        ));
    }

    #[test]
    fn empty_path_replaces_the_document() {
        let out = run(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": {"b": 2}}]),
        )
        .unwrap();
        assert_eq!(out, json!({"b": 2}));
    }
}
