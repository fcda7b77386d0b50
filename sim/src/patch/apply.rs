//! Server-side apply and the field ownership of ordinary writes, after
//! structured-merge-diff's `merge.Updater` and apimachinery's field manager.
//!
//! - [`apply`] merges a configuration into the live object. Fields the
//!   configuration sets that another manager owns with another value are
//!   conflicts unless forced (then they change hands). Fields the applier
//!   set last time and leaves out now are removed unless someone else owns
//!   them.
//! - [`record_update`] gives the fields a create, update or patch changed to
//!   its manager (an `Update` entry), taking them from everyone else.
//!
//! Both strip what kube never tracks (`apiVersion`, `kind`, `metadata.name`,
//! `uid`, `resourceVersion`, …) and what the write resets (`status` on the
//! main resource of a kind with a status subresource).

use serde_json::{Map, Value};

use super::fieldset::{field, path_string, FieldSet};
use super::managed::{self, Entry, APPLY, UPDATE};
use super::schema::{self, Node};
use super::typed;
use super::PatchError;
use crate::registry::ResourceType;
use crate::status::StatusCause;

/// The manager kube invents for the fields of an object that had no
/// managedFields when first applied to.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The annotation client-side apply keeps; `kubectl apply --server-side`
/// keeps it in step when the object has it.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Metadata the server owns: never taken from an apply configuration.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Metadata fields kube's field manager never records as owned.
const STRIPPED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// Server-side apply of `config` (already decoded) by `manager` onto `live`
/// (`None` creates). Returns the object to store, with managedFields; a
/// no-op apply returns `live` unchanged so the caller can skip the write.
/// `now` is the RFC 3339 time for the applier's entry.
pub fn apply(
    rt: &ResourceType,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    apply_subresource(rt, live, config, manager, force, now, None)
}

/// [`apply`] to a subresource (`status`, `scale`): only that part of the
/// object is taken and owned, and the entry names the subresource.
pub fn apply_subresource(
    rt: &ResourceType,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
    subresource: Option<&str>,
) -> Result<Value, PatchError> {
    check_config(rt, config)?;
    let root = schema::root(rt);
    let config_clean = clean_config(rt, config, subresource);
    let config_set = owned_fields(rt, subresource, &typed::field_set(root, &config_clean));
    let live_clean = live.map(managed::without_managed_fields);
    let mut entries = live_entries(rt, live, live_clean.as_ref(), now);
    let api_version = rt.api_version();
    let sub = subresource.unwrap_or_default();
    let mine = entries.iter().position(|e| e.is(manager, APPLY, &api_version, sub));
    let last_set = mine.map(|i| entries.remove(i).set).unwrap_or_default();

    let mut merged =
        typed::merge(root, live_clean.as_ref(), &config_clean).unwrap_or_else(|| Value::Object(Map::new()));
    let others = entries.iter().fold(FieldSet::new(), |acc, e| acc.union(&e.set));
    let keep = config_set.union(&others);
    typed::remove(root, &mut merged, &last_set.difference(&keep), Some(&keep));

    if let Some(live_clean) = &live_clean {
        take_changed(rt, subresource, live_clean, &merged, &mut entries, force)?;
    }
    entries.retain(|e| !e.set.is_empty());
    entries.push(entry(manager, APPLY, rt, now, subresource, config_set));
    if manager == "kubectl" {
        sync_last_applied(&mut merged, config);
    }
    if let (Some(live), Some(live_clean)) = (live, &live_clean) {
        let before = managed::decode(live).unwrap_or_default();
        if merged == *live_clean && managed::same_ignoring_time(&before, &entries) {
            return Ok(live.clone());
        }
    }
    managed::store(&mut merged, entries);
    Ok(merged)
}

/// The live object's managers. An object nobody manages yet gets a
/// `before-first-apply` entry owning all it has, as kube gives it.
fn live_entries(rt: &ResourceType, live: Option<&Value>, live_clean: Option<&Value>, now: &str) -> Vec<Entry> {
    let mut entries = live.map(|l| managed::decode(l).unwrap_or_default()).unwrap_or_default();
    if let (Some(live_clean), true) = (live_clean, entries.is_empty()) {
        let all = changed_fields(rt, None, &schema::zero_object(rt), live_clean);
        entries.push(entry(BEFORE_FIRST_APPLY, UPDATE, rt, now, None, strip_meta(&all)));
    }
    entries
}

/// The fields the apply changes or removes in `live` leave the other
/// managers' entries; a changed field another manager owns is a conflict
/// unless forced (or the apply takes over from client-side apply).
fn take_changed(
    rt: &ResourceType,
    subresource: Option<&str>,
    live: &Value,
    merged: &Value,
    entries: &mut [Entry],
    force: bool,
) -> Result<(), PatchError> {
    let root = schema::root(rt);
    let cmp = typed::compare(root, live, merged);
    let changed = reset(rt, subresource, &cmp.added.union(&cmp.modified));
    let removed = reset(rt, subresource, &cmp.removed);
    let conflicts: Vec<(usize, FieldSet)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (i, e.set.intersection(&changed)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !conflicts.is_empty() && !force && !upgrades_client_side_apply(root, live, &conflicts) {
        return Err(PatchError::Conflicts(causes(entries, &conflicts)));
    }
    for e in entries {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    Ok(())
}

/// Record the fields an ordinary write (create, update, any non-apply
/// patch) changed as owned by `manager` with operation `Update`, in
/// `new.metadata.managedFields`. `old` is `None` for a create.
///
/// As in kube: managedFields the client sent in `new` are the starting point
/// when they decode and are not empty (so clients can edit them); `[{}]`
/// resets them; otherwise `old`'s are kept.
pub fn record_update(rt: &ResourceType, old: Option<&Value>, new: &mut Value, manager: &str, now: &str) {
    record_update_subresource(rt, old, new, manager, now, None);
}

/// [`record_update`] for a write to a subresource (`status`, `scale`): only
/// that part is recorded, the entry names the subresource, and managedFields
/// in the request are ignored.
pub fn record_update_subresource(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    subresource: Option<&str>,
) {
    let from_old = || old.map(|o| managed::decode(o).unwrap_or_default()).unwrap_or_default();
    let mut entries = if subresource.is_some() {
        from_old()
    } else if managed::is_reset(new) {
        Vec::new()
    } else {
        match managed::decode(new) {
            Ok(entries) if !entries.is_empty() => entries,
            _ => from_old(),
        }
    };
    let old_clean = old
        .map(managed::without_managed_fields)
        .unwrap_or_else(|| schema::zero_object(rt));
    let new_clean = managed::without_managed_fields(new);
    let root = schema::root(rt);
    let cmp = typed::compare(root, &old_clean, &new_clean);
    let changed = reset(rt, subresource, &cmp.added.union(&cmp.modified));
    let removed = reset(rt, subresource, &cmp.removed);
    for e in &mut entries {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    let own = strip_meta(&changed);
    if !own.is_empty() {
        let api_version = rt.api_version();
        let sub = subresource.unwrap_or_default();
        // kube's scale handler maps a Scale's entries onto the workload
        // without their time: the entry has none, and so sorts first.
        let time = (sub != "scale").then(|| now.to_string());
        match entries.iter_mut().find(|e| e.is(manager, UPDATE, &api_version, sub)) {
            Some(e) => {
                e.set = e.set.union(&own);
                e.time = time;
            }
            None => entries.push(Entry {
                time,
                ..entry(manager, UPDATE, rt, now, subresource, own)
            }),
        }
    }
    entries.retain(|e| !e.set.is_empty());
    managed::store(new, entries);
}

fn entry(manager: &str, operation: &str, rt: &ResourceType, now: &str, sub: Option<&str>, set: FieldSet) -> Entry {
    Entry {
        manager: manager.to_string(),
        operation: operation.to_string(),
        api_version: rt.api_version(),
        time: Some(now.to_string()),
        subresource: sub.unwrap_or_default().to_string(),
        set,
    }
}

/// The checks kube's field manager makes before applying.
fn check_config(rt: &ResourceType, config: &Value) -> Result<(), PatchError> {
    let Value::Object(map) = config else {
        return Err(PatchError::BadRequest(
            "error decoding YAML: the apply body must be an object".into(),
        ));
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version != rt.api_version() || kind != rt.kind {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(PatchError::BadRequest(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    let metadata = map.get("metadata");
    if metadata
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|m| !m.is_null())
    {
        return Err(PatchError::BadRequest("metadata.managedFields must be nil".into()));
    }
    typed::validate(schema::root(rt), config, &mut Vec::new()).map_err(|err| {
        let name = |key: &str| {
            metadata
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        PatchError::BadRequest(format!(
            "failed to create typed patch object ({}/{}; {}, Kind={}): {err}",
            name("namespace"),
            name("name"),
            api_version,
            kind
        ))
    })
}

/// The configuration as it is merged: server metadata dropped, and the parts
/// the write resets dropped too.
fn clean_config(rt: &ResourceType, config: &Value, subresource: Option<&str>) -> Value {
    let mut out = config.clone();
    let Value::Object(map) = &mut out else { return out };
    if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
        metadata.retain(|key, _| !SERVER_METADATA.contains(&key.as_str()));
    }
    match subresource {
        None if rt.subresource("status").is_some() => {
            map.remove("status");
        }
        Some("status") => map.retain(|key, _| matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status")),
        _ => {}
    }
    out
}

/// Drop what the write resets: `status` for the main resource of a kind
/// with a status subresource; all but `status` (or `spec.replicas` for
/// `scale`) for a subresource.
fn reset(rt: &ResourceType, subresource: Option<&str>, set: &FieldSet) -> FieldSet {
    let only = |path: &[&str]| {
        let path: Vec<String> = path.iter().map(|p| field(p)).collect();
        let mut out = FieldSet::new();
        if let Some(node) = set.node(&path) {
            out.insert_all_under(&path, node);
        }
        out.prune();
        out
    };
    match subresource {
        None if rt.subresource("status").is_some() => {
            let mut status = FieldSet::new();
            status.insert(&[field("status")]);
            let mut out = set.difference(&only(&["status"]));
            out = out.difference(&status);
            out
        }
        None => set.clone(),
        Some("status") => only(&["status"]),
        Some("scale") => only(&["spec", "replicas"]),
        Some(_) => set.clone(),
    }
}

/// The set with everything kube never tracks removed.
fn strip_meta(set: &FieldSet) -> FieldSet {
    let mut strip = FieldSet::new();
    strip.insert(&[field("apiVersion")]);
    strip.insert(&[field("kind")]);
    strip.insert(&[field("metadata")]);
    for name in STRIPPED_METADATA {
        strip.insert(&[field("metadata"), field(name)]);
    }
    let mut out = set.difference(&strip);
    out.prune();
    out
}

/// The fields a change from `old` to `new` sets, filtered as the write
/// resets them.
fn changed_fields(rt: &ResourceType, sub: Option<&str>, old: &Value, new: &Value) -> FieldSet {
    let cmp = typed::compare(schema::root(rt), old, new);
    reset(rt, sub, &cmp.added.union(&cmp.modified))
}

/// The applier's field set: what the configuration sets, minus untracked
/// and reset fields.
fn owned_fields(rt: &ResourceType, sub: Option<&str>, set: &FieldSet) -> FieldSet {
    strip_meta(&reset(rt, sub, set))
}

/// One `FieldManagerConflict` cause a conflicting field, managers in a
/// stable order.
fn causes(entries: &[Entry], conflicts: &[(usize, FieldSet)]) -> Vec<StatusCause> {
    let mut sorted: Vec<&(usize, FieldSet)> = conflicts.iter().collect();
    sorted.sort_by_key(|(i, _)| (&entries[*i].manager, &entries[*i].operation));
    sorted
        .into_iter()
        .flat_map(|(i, set)| {
            let who = entries[*i].printable();
            set.paths().into_iter().map(move |path| StatusCause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {who}"),
                field: path_string(&path),
            })
        })
        .collect()
}

/// kube lets a first server-side apply take over fields from client-side
/// apply without `--force-conflicts` when every conflicting field is in the
/// last-applied-configuration annotation.
fn upgrades_client_side_apply(root: &Node, live: &Value, conflicts: &[(usize, FieldSet)]) -> bool {
    let Some(annotation) = live.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED)) else {
        return false;
    };
    let Some(last) = annotation.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok()) else {
        return false;
    };
    let last_set = typed::field_set(root, &last);
    conflicts.iter().all(|(_, set)| set.difference(&last_set).is_empty())
}

/// `kubectl apply --server-side` keeps an existing last-applied annotation
/// equal to what it applied (the config without that annotation, as JSON
/// with a trailing newline).
fn sync_last_applied(merged: &mut Value, config: &Value) {
    let Some(Value::Object(annotations)) = merged.pointer_mut("/metadata/annotations") else {
        return;
    };
    if !annotations.contains_key(LAST_APPLIED) {
        return;
    }
    let mut applied = config.clone();
    if let Some(Value::Object(metadata)) = applied.get_mut("metadata") {
        if let Some(Value::Object(own)) = metadata.get_mut("annotations") {
            own.remove(LAST_APPLIED);
            if own.is_empty() {
                metadata.remove("annotations");
            }
        }
    }
    annotations.insert(LAST_APPLIED.into(), Value::String(format!("{applied}\n")));
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
