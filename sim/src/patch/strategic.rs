//! Strategic merge patch (`application/strategic-merge-patch+json`), as
//! apimachinery's `strategicpatch.StrategicMergeMapPatch` applies it on the
//! server (parallel deletion lists merged, unmatched nulls ignored).
//!
//! Maps merge recursively and `null` deletes; lists with a merge key merge
//! item by item; primitive lists with `patchStrategy=merge` merge as sets;
//! every other list is replaced. Directives: `$patch: replace|delete` on maps
//! and list items, `$retainKeys`, `$setElementOrder/<list>` and
//! `$deleteFromPrimitiveList/<list>`. No directive is ever stored: values
//! the patch adds are cleaned of directives and nulls.

use serde_json::{Map, Value};

use super::schema::{self, Node};
use super::PatchError;
use crate::registry::ResourceType;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

/// Apply a strategic merge patch to `target`, an object of type `rt`.
/// Custom resources have no strategic merge information: kube answers 415,
/// here [`PatchError::Unsupported`].
pub fn strategic_merge_patch(rt: &ResourceType, target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !schema::is_built_in(rt) {
        return Err(PatchError::Unsupported(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                .into(),
        ));
    }
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            super::go_type_name(patch)
        )));
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    merge_map(original, patch.clone(), schema::root(rt)).map(Value::Object)
}

fn bad_format(what: &str) -> PatchError {
    PatchError::BadRequest(format!("invalid patch format of {what}"))
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    node: &Node,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => Ok(clean_map(patch)),
            Some("delete") => Ok(Map::new()),
            _ => Err(PatchError::Internal(format!(
                "unknown patch type: {directive} in map: {}",
                Value::Object(patch)
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, node)?;
    for (key, patch_value) in patch {
        let (key, is_delete_list) = match key.strip_prefix(DELETE_PRIMITIVE) {
            Some(list) => (list.to_string(), true),
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(current) = original.remove(&key) else {
            if !is_delete_list {
                original.insert(key, clean(patch_value));
            }
            continue;
        };
        let merged = merge_value(current, patch_value, node.field(&key), is_delete_list)?;
        original.insert(key, merged);
    }
    Ok(original)
}

/// A key both sides set: maps merge, lists merge by their strategy, and
/// anything else the patch replaces (a `$deleteFromPrimitiveList` leaves it).
fn merge_value(current: Value, patch_value: Value, node: &Node, is_delete_list: bool) -> Result<Value, PatchError> {
    Ok(match (current, patch_value) {
        (Value::Object(current), Value::Object(patch_value)) => Value::Object(merge_map(current, patch_value, node)?),
        (Value::Array(current), Value::Array(patch_value)) => {
            Value::Array(merge_list(current, patch_value, node, is_delete_list)?)
        }
        (current, patch_value) => {
            if is_delete_list {
                current
            } else {
                clean(patch_value)
            }
        }
    })
}

/// `$retainKeys`: keys of `original` not listed are cleared; every key the
/// patch sets must be listed.
fn apply_retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad_format("retainKeys"));
    };
    let listed = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    for (key, value) in patch.iter() {
        let directive = key.starts_with(DELETE_PRIMITIVE) || key.starts_with(SET_ORDER);
        if !value.is_null() && !directive && !listed(key) {
            return Err(bad_format("retainKeys"));
        }
    }
    original.retain(|key, _| listed(key));
    Ok(())
}

/// `$setElementOrder/<list>`: merge that list now and order it as listed.
fn apply_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    node: &Node,
) -> Result<(), PatchError> {
    let keys: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ORDER)).cloned().collect();
    for key in keys {
        let Some(Value::Array(order)) = patch.remove(&key) else {
            return Err(bad_format("setElementOrder list"));
        };
        let list = &key[SET_ORDER.len()..];
        let as_list = |value: Option<Value>| match value {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(_) => Err(bad_format("setElementOrder list")),
        };
        let current = as_list(original.remove(list))?;
        let patch_list = as_list(patch.remove(list))?;
        let child = node.field(list);
        let server_order = current.clone().unwrap_or_default();
        let merged = match (current, patch_list) {
            (Some(current), None) => current,
            (None, Some(patch_list)) => clean_list(patch_list),
            (Some(current), Some(patch_list)) => merge_list(current, patch_list, child, false)?,
            (None, None) => continue,
        };
        let merge_key = merge_key(child);
        let (in_order, server_only) = partition(merged, &order, merge_key);
        let ordered = normalize_order(in_order, server_only, &order, &server_order, merge_key);
        original.insert(list.to_string(), Value::Array(ordered));
    }
    Ok(())
}

/// The strategic merge key of a list schema; `Some("")` for a set of
/// scalars; `None` for a list that is replaced.
fn merge_key(node: &Node) -> Option<&'static str> {
    match node {
        Node::Keyed(list) => Some(list.smp_key),
        Node::Set => Some(""),
        _ => None,
    }
}

fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    node: &Node,
    is_delete_list: bool,
) -> Result<Vec<Value>, PatchError> {
    let Some(key) = merge_key(node) else {
        // patchStrategy replace: the patch list is the new value.
        return Ok(clean_list(patch));
    };
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let maps = element_kind(&original, &patch)?;
    if !maps {
        return Ok(merge_scalars(original, patch, is_delete_list));
    }
    if key.is_empty() {
        return Err(PatchError::Internal(
            "cannot merge lists without merge key for type map".into(),
        ));
    }
    merge_keyed(original, patch, node, key)
}

/// A set of scalars: the union of both, ordered as [`normalize_order`]
/// does; a `$deleteFromPrimitiveList` removes its elements instead.
fn merge_scalars(original: Vec<Value>, patch: Vec<Value>, is_delete_list: bool) -> Vec<Value> {
    if is_delete_list {
        return original.into_iter().filter(|v| !patch.contains(v)).collect();
    }
    let mut merged: Vec<Value> = Vec::new();
    for value in original.iter().chain(patch.iter()) {
        if !merged.contains(value) {
            merged.push(value.clone());
        }
    }
    let (in_patch, server_only) = partition(merged, &patch, Some(""));
    normalize_order(in_patch, server_only, &patch, &original, Some(""))
}

/// A list of maps keyed by `key`: a patch element merges into the element
/// with its key, or is added.
fn merge_keyed(original: Vec<Value>, patch: Vec<Value>, node: &Node, key: &str) -> Result<Vec<Value>, PatchError> {
    let item = node.keyed().map(|list| list.item).unwrap_or(&Node::Untyped);
    let (original, patch) = apply_special_items(original, patch, key)?;
    let mut merged = original.clone();
    for patch_item in &patch {
        let key_value = key_of(patch_item, key)?;
        let found = merged.iter().position(|item| item.get(key) == Some(key_value));
        match (found, patch_item) {
            (Some(i), Value::Object(patch_item)) => {
                let current = match std::mem::take(&mut merged[i]) {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(current, patch_item.clone(), item)?);
            }
            _ => merged.push(clean(patch_item.clone())),
        }
    }
    let (in_patch, server_only) = partition(merged, &patch, Some(key));
    Ok(normalize_order(in_patch, server_only, &patch, &original, Some(key)))
}

/// Whether the elements are maps (true) or scalars (false); lists of lists
/// and mixed lists are refused as apimachinery refuses them.
fn element_kind(original: &[Value], patch: &[Value]) -> Result<bool, PatchError> {
    let mut kind = None;
    for value in original.iter().chain(patch) {
        let this = match value {
            Value::Array(_) => return Err(PatchError::Invalid("lists of lists are not supported".into())),
            Value::Object(_) => "map",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::Null => "null",
        };
        match kind {
            None => kind = Some(this),
            Some(seen) if seen != this => {
                return Err(PatchError::Internal(format!(
                    "list element types are not identical: {}",
                    Value::Array(original.iter().chain(patch).cloned().collect())
                )))
            }
            Some(_) => {}
        }
    }
    Ok(kind == Some("map"))
}

fn key_of<'a>(item: &'a Value, key: &str) -> Result<&'a Value, PatchError> {
    item.get(key)
        .ok_or_else(|| PatchError::Internal(format!("map: {item} does not contain declared merge key: {key}")))
}

/// Handle list items carrying `$patch`: `delete` removes the matching items,
/// `replace` makes the rest of the patch the whole list.
fn apply_special_items(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut plain = Vec::new();
    let mut replace = false;
    for item in patch {
        match item.get(DIRECTIVE) {
            None => plain.push(item),
            Some(directive) => match directive.as_str() {
                Some("delete") => {
                    let value = key_of(&item, key)?.clone();
                    original.retain(|o| o.get(key) != Some(&value));
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(PatchError::Internal(
                        "merging lists cannot yet be specified in the patch".into(),
                    ))
                }
                _ => {
                    return Err(PatchError::Internal(format!(
                        "unknown patch type: {directive} in map: {item}"
                    )))
                }
            },
        }
    }
    if replace {
        return Ok((clean_list(plain), Vec::new()));
    }
    Ok((original, plain))
}

/// Identity of a list element: its merge key value, or itself for scalars.
fn identity<'a>(item: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        Some(key) if !key.is_empty() => item.get(key),
        _ => Some(item),
    }
}

fn position(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    let id = identity(item, key)?;
    list.iter().position(|other| identity(other, key) == Some(id))
}

/// Split `items` into those present in `by` and the rest (server-only).
fn partition(items: Vec<Value>, by: &[Value], key: Option<&str>) -> (Vec<Value>, Vec<Value>) {
    items.into_iter().partition(|item| position(by, item, key).is_some())
}

/// apimachinery's `normalizeElementOrder`: patch items in patch order,
/// server-only items in server order, the two interleaved by server order.
fn normalize_order(
    mut in_patch: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    in_patch.sort_by_key(|item| position(patch_order, item, key).unwrap_or(usize::MAX));
    server_only.sort_by_key(|item| position(server_order, item, key).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(in_patch.len() + server_only.len());
    let (mut left, mut right) = (in_patch.into_iter().peekable(), server_only.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(server_order, l, key), position(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// A value the patch adds: drop directives and nulls so they are never
/// stored.
fn clean(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(clean_map(map)),
        Value::Array(items) => Value::Array(clean_list(items)),
        other => other,
    }
}

fn clean_map(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(key, value)| !value.is_null() && !is_directive(key))
        .map(|(key, value)| (key, clean(value)))
        .collect()
}

fn clean_list(items: Vec<Value>) -> Vec<Value> {
    items
        .into_iter()
        .filter(|item| item.get(DIRECTIVE).is_none())
        .map(clean)
        .collect()
}

fn is_directive(key: &str) -> bool {
    key == DIRECTIVE || key == RETAIN_KEYS || key.starts_with(SET_ORDER) || key.starts_with(DELETE_PRIMITIVE)
}

#[cfg(test)]
#[path = "strategic_tests.rs"]
mod tests;
