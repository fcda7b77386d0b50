//! Schema-aware walks over objects, after structured-merge-diff's `typed`
//! package: the field set of an object, the comparison of two objects, the
//! apply merge, and removing a set of fields from an object.

use serde_json::{Map, Value};

use super::fieldset::{field, FieldSet, Path};
use super::schema::{KeyedList, Node};

/// The path element of a keyed list item: `k:{"name":"web"}` with defaults
/// filled in for omitted key fields; `None` if a key field is missing.
pub fn item_element(list: &KeyedList, item: &Value) -> Option<String> {
    let Value::Object(map) = item else {
        return None;
    };
    let mut key = Map::new();
    for (name, default) in list.keys {
        let value = match (map.get(*name), default) {
            (Some(value), _) if !value.is_null() => value.clone(),
            (_, Some(default)) => Value::String((*default).to_string()),
            _ => return None,
        };
        key.insert((*name).to_string(), value);
    }
    Some(format!("k:{}", Value::Object(key)))
}

/// The path element of a set item: `v:<json>`.
pub fn value_element(item: &Value) -> String {
    format!("v:{item}")
}

/// The path elements of a list's items, or `None` if the list cannot be
/// treated by key (an item without its key): it is then atomic.
fn elements(node: &Node, items: &[Value]) -> Option<Vec<String>> {
    match node {
        Node::Keyed(list) => items.iter().map(|item| item_element(list, item)).collect(),
        Node::Set => Some(items.iter().map(value_element).collect()),
        _ => None,
    }
}

/// Check an apply configuration the way structured-merge-diff does when it
/// builds a typed object: every keyed list item has its key, no key twice.
pub fn validate(node: &Node, value: &Value, path: &mut Path) -> Result<(), String> {
    match (node, value) {
        (Node::Atomic, _) => Ok(()),
        (Node::Keyed(list), Value::Array(items)) => {
            let mut seen = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let at = super::fieldset::path_string(path);
                let Some(element) = item_element(list, item) else {
                    let missing = list.keys.iter().find(|(k, d)| d.is_none() && item.get(*k).is_none());
                    let name = missing.map(|(k, _)| *k).unwrap_or(list.smp_key);
                    return Err(format!(
                        "{at}: element {i}: associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"
                    ));
                };
                if seen.contains(&element) {
                    let key = super::fieldset::path_string(std::slice::from_ref(&element));
                    return Err(format!("{at}: duplicate entries for key {key}"));
                }
                path.push(element.clone());
                validate(list.item, item, path)?;
                path.pop();
                seen.push(element);
            }
            Ok(())
        }
        (Node::Set, Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    let at = super::fieldset::path_string(path);
                    return Err(format!("{at}: duplicate entries for key [={item}]"));
                }
            }
            Ok(())
        }
        (_, Value::Object(map)) => {
            for (key, child) in map {
                path.push(field(key));
                validate(node.field(key), child, path)?;
                path.pop();
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The fields `value` sets, as structured-merge-diff's `ToFieldSet`: leaves
/// and list items are members; a map field is a member only when it is
/// null or empty.
pub fn field_set(node: &Node, value: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    collect(node, value, &mut out);
    out.prune();
    out
}

fn collect(node: &Node, value: &Value, out: &mut FieldSet) {
    match (node, value) {
        (Node::Atomic, _) => out.set_member(),
        (_, Value::Object(map)) => {
            for (key, child_value) in map {
                let child = out.child_mut(&field(key));
                let empty_map = child_value.as_object().is_some_and(Map::is_empty);
                if child_value.is_null() || empty_map {
                    child.set_member();
                } else {
                    collect(node.field(key), child_value, child);
                }
            }
        }
        (_, Value::Array(items)) => match elements(node, items) {
            Some(elements) => {
                let item_node = node.keyed().map(|list| list.item).unwrap_or(&Node::Untyped);
                for (element, item) in elements.iter().zip(items) {
                    let child = out.child_mut(element);
                    child.set_member();
                    if matches!(node, Node::Keyed(_)) {
                        collect(item_node, item, child);
                    }
                }
            }
            None => out.set_member(),
        },
        _ => out.set_member(),
    }
}

/// What changed between two objects, path by path.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Paths only in the new object (containers included).
    pub added: FieldSet,
    /// Leaves (or atomic values) whose value changed.
    pub modified: FieldSet,
    /// Paths only in the old object.
    pub removed: FieldSet,
}

/// Compare `old` with `new` under `node`.
pub fn compare(node: &Node, old: &Value, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    compare_at(node, Some(old), Some(new), &mut Vec::new(), &mut out);
    out.added.prune();
    out.modified.prune();
    out.removed.prune();
    out
}

fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

fn compare_at(node: &Node, old: Option<&Value>, new: Option<&Value>, path: &mut Path, out: &mut Comparison) {
    // A list that was null (a Go slice without `omitempty`, as a zero
    // pod's `containers`) is there already: only its items are added.
    if let (Some(Value::Null), Some(new @ Value::Array(_))) = (old, new) {
        return compare_both(node, &Value::Array(Vec::new()), new, path, out);
    }
    match (present(old), present(new)) {
        (None, None) => {}
        (None, Some(new)) => {
            out.added.insert_all_under(path, &field_set(node, new));
            out.added.insert(path);
        }
        (Some(old), None) => {
            out.removed.insert_all_under(path, &field_set(node, old));
            out.removed.insert(path);
        }
        (Some(old), Some(new)) => compare_both(node, old, new, path, out),
    }
}

fn compare_both(node: &Node, old: &Value, new: &Value, path: &mut Path, out: &mut Comparison) {
    match (node, old, new) {
        (Node::Atomic, _, _) => {}
        (_, Value::Object(old_map), Value::Object(new_map)) => {
            let keys = old_map
                .keys()
                .chain(new_map.keys().filter(|k| !old_map.contains_key(*k)));
            for key in keys.cloned().collect::<Vec<_>>() {
                path.push(field(&key));
                compare_at(node.field(&key), old_map.get(&key), new_map.get(&key), path, out);
                path.pop();
            }
            return;
        }
        (_, Value::Array(old_items), Value::Array(new_items)) => {
            if let (Some(old_elements), Some(new_elements)) = (elements(node, old_items), elements(node, new_items)) {
                let item_node = node.keyed().map(|list| list.item).unwrap_or(&Node::Atomic);
                let find = |elements: &[String], items: &'_ [Value], e: &String| {
                    elements.iter().position(|x| x == e).map(|i| items[i].clone())
                };
                let mut all = old_elements.clone();
                all.extend(new_elements.iter().filter(|e| !old_elements.contains(e)).cloned());
                for element in all {
                    let old_item = find(&old_elements, old_items, &element);
                    let new_item = find(&new_elements, new_items, &element);
                    path.push(element);
                    compare_at(item_node, old_item.as_ref(), new_item.as_ref(), path, out);
                    path.pop();
                }
                return;
            }
        }
        _ => {}
    }
    if old != new {
        out.modified.insert(path);
    }
}

/// The apply merge: `config` over `live`, config values winning, keyed
/// lists merged by key in structured-merge-diff's order, atomic values
/// replaced; a `null` in the config removes the field. `None` if the
/// result is absent.
pub fn merge(node: &Node, live: Option<&Value>, config: &Value) -> Option<Value> {
    if config.is_null() {
        return None;
    }
    let live = present(live);
    match (node, live, config) {
        (Node::Atomic, _, _) => Some(strip_nulls(config)),
        (Node::Keyed(_) | Node::Set, Some(Value::Array(l)), Value::Array(c)) => {
            match (elements(node, l), elements(node, c)) {
                (Some(le), Some(ce)) => {
                    let item = node.keyed().map(|list| list.item).unwrap_or(&Node::Atomic);
                    Some(Value::Array(merge_items(item, l, &le, c, &ce)))
                }
                _ => Some(strip_nulls(config)),
            }
        }
        (_, Some(Value::Object(l)), Value::Object(c)) => {
            let mut out = l.clone();
            for (key, value) in c {
                match merge(node.field(key), l.get(key), value) {
                    Some(merged) => out.insert(key.clone(), merged),
                    None => out.remove(key),
                };
            }
            Some(Value::Object(out))
        }
        _ => Some(strip_nulls(config)),
    }
}

/// Merge two keyed lists keeping the config's relative order and placing
/// live-only items where they were (structured-merge-diff v4's
/// `visitListItems`).
fn merge_items(item: &Node, lhs: &[Value], lpe: &[String], rhs: &[Value], rpe: &[String]) -> Vec<Value> {
    let in_rhs = |pe: &String| rpe.iter().position(|x| x == pe);
    let in_lhs = |pe: &String| lpe.iter().position(|x| x == pe);
    let mut shared = rpe.iter().filter(|pe| in_lhs(pe).is_some());
    let mut next_shared = shared.next();
    let mut merged_rhs: Vec<&String> = Vec::new();
    let mut out = Vec::new();
    let (mut li, mut ri) = (0, 0);
    let push = |out: &mut Vec<Value>, l: Option<&Value>, r: Option<&Value>| match r {
        Some(r) => out.extend(merge(item, l, r)),
        None => out.extend(l.cloned()),
    };
    while li < lpe.len() || ri < rpe.len() {
        if li < lpe.len() && ri < rpe.len() {
            if lpe[li] == rpe[ri] {
                merged_rhs.push(&rpe[ri]);
                push(&mut out, Some(&lhs[li]), Some(&rhs[ri]));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_rhs(&lpe[li]).is_some() && next_shared.is_some_and(|s| *s != lpe[li]) {
                li += 1;
                continue;
            }
        }
        if li < lpe.len() {
            if in_rhs(&lpe[li]).is_none() {
                push(&mut out, Some(&lhs[li]), None);
                li += 1;
                continue;
            } else if merged_rhs.contains(&&lpe[li]) {
                li += 1;
                continue;
            }
        }
        if ri < rpe.len() {
            let pe = &rpe[ri];
            merged_rhs.push(pe);
            push(&mut out, in_lhs(pe).map(|i| &lhs[i]), Some(&rhs[ri]));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// A config value as stored: nulls inside maps removed (kube's typed
/// decoding drops them).
pub fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Remove the member paths of `set` from `value`, except where `keep` still
/// owns something beneath a path (then only the unowned parts go). Maps and
/// lists emptied by the removal are removed too.
pub fn remove(node: &Node, value: &mut Value, set: &FieldSet, keep: Option<&FieldSet>) {
    let kept_below = |pe: &str| {
        keep.and_then(|k| k.child(pe))
            .is_some_and(|k| k.children().next().is_some())
    };
    match value {
        Value::Object(map) => {
            for (pe, sub) in set.children() {
                let Some(key) = pe.strip_prefix("f:") else { continue };
                if sub.is_member() && !kept_below(pe) {
                    map.remove(key);
                } else if let Some(child) = map.get_mut(key) {
                    let was_empty = is_empty_container(child);
                    remove(node.field(key), child, sub, keep.and_then(|k| k.child(pe)));
                    if !was_empty && is_empty_container(child) {
                        map.remove(key);
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(elements) = elements(node, items) else { return };
            let item_node = node.keyed().map(|list| list.item).unwrap_or(&Node::Atomic);
            let mut drop = vec![false; items.len()];
            for (i, element) in elements.iter().enumerate() {
                let Some(sub) = set.child(element) else { continue };
                if sub.is_member() && !kept_below(element) {
                    drop[i] = true;
                } else {
                    remove(item_node, &mut items[i], sub, keep.and_then(|k| k.child(element)));
                }
            }
            let mut flags = drop.into_iter();
            items.retain(|_| !flags.next().unwrap_or(false));
        }
        _ => {}
    }
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
#[path = "typed_tests.rs"]
mod tests;
