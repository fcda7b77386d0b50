use super::*;
use crate::registry::{Subresource, ALL_VERBS};
use serde_json::json;

const NS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    singular: "namespace",
    namespaced: false,
    verbs: ALL_VERBS,
    short_names: &[],
    categories: &[],
    subresources: &[] as &[Subresource],
    stored: true,
};

const CM: ResourceType = ResourceType {
    kind: "ConfigMap",
    plural: "configmaps",
    singular: "configmap",
    namespaced: true,
    ..NS
};

fn put(store: &Store, rt: &ResourceType, ns: &str, name: &str, body: Value) -> Result<Written, Status> {
    store.write(rt, ns, name, false, |_| Ok(Change::Put(body)))
}

fn store_with_namespace(ns: &str) -> Store {
    let store = Store::new();
    put(&store, &NS, "", ns, json!({"metadata": {"name": ns}})).unwrap();
    store
}

#[test]
fn writes_get_increasing_resource_versions_and_a_stable_uid() {
    let store = store_with_namespace("a");
    let first = put(&store, &CM, "a", "x", json!({"metadata": {"name": "x"}})).unwrap();
    let second = put(
        &store,
        &CM,
        "a",
        "x",
        json!({"metadata": {"name": "x"}, "data": {"k": "v"}}),
    )
    .unwrap();
    assert!(first.created && !second.created);
    assert!(resource_version(&second.object) > resource_version(&first.object));
    assert_eq!(second.object["metadata"]["uid"], first.object["metadata"]["uid"]);
    assert_eq!(store.get(&CM, "a", "x").unwrap()["data"]["k"], "v");
}

#[test]
fn a_namespaced_object_needs_its_namespace() {
    let store = Store::new();
    let err = put(&store, &CM, "nope", "x", json!({})).unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (404, "namespaces \"nope\" not found"));
}

#[test]
fn generation_moves_only_when_spec_changes() {
    let store = Store::new();
    let spec = |r: i64| json!({"metadata": {"name": "n"}, "spec": {"r": r}});
    let g = |w: Written| w.object["metadata"]["generation"].as_i64();
    assert_eq!(g(put(&store, &NS, "", "n", spec(1)).unwrap()), Some(1));
    assert_eq!(g(put(&store, &NS, "", "n", spec(1)).unwrap()), Some(1));
    assert_eq!(g(put(&store, &NS, "", "n", spec(2)).unwrap()), Some(2));
}

#[test]
fn dry_run_stores_nothing_and_sends_no_event() {
    let store = store_with_namespace("a");
    let before = store.current_revision();
    let mut sub = store.watch(&CM, Some(before)).unwrap();
    let w = store
        .write(&CM, "a", "x", true, |_| {
            Ok(Change::Put(json!({"metadata": {"name": "x"}})))
        })
        .unwrap();
    assert!(w.object["metadata"]["uid"].is_string());
    assert!(w.object["metadata"].get("resourceVersion").is_none());
    assert!(store.get(&CM, "a", "x").is_none());
    assert_eq!(store.current_revision(), before);
    assert!(sub.events.try_recv().is_err());
}

#[test]
fn lists_are_sorted_by_namespace_then_name() {
    let store = store_with_namespace("b");
    put(&store, &NS, "", "a", json!({"metadata": {"name": "a"}})).unwrap();
    for (ns, name) in [("b", "y"), ("a", "z"), ("b", "x")] {
        put(
            &store,
            &CM,
            ns,
            name,
            json!({"metadata": {"name": name, "namespace": ns}}),
        )
        .unwrap();
    }
    let names: Vec<String> = store
        .list(&CM, None)
        .iter()
        .map(|o| format!("{}/{}", meta_str(o, "namespace"), meta_str(o, "name")))
        .collect();
    assert_eq!(names, ["a/z", "b/x", "b/y"]);
    assert_eq!(store.list(&CM, Some("b")).len(), 2);
}

#[test]
fn deleting_a_namespace_deletes_its_objects_with_events() {
    let store = store_with_namespace("a");
    put(&store, &CM, "a", "x", json!({"metadata": {"name": "x"}})).unwrap();
    let mut sub = store.watch(&CM, Some(store.current_revision())).unwrap();
    store.delete(&NS, "", "a").unwrap();
    assert!(store.list(&CM, None).is_empty());
    let event = sub.events.try_recv().unwrap();
    assert_eq!(event.kind, EventType::Deleted);
    assert_eq!(resource_version(&event.object), Some(event.revision));
}

#[test]
fn watch_resumes_from_a_version_and_expires_after_compaction() {
    let store = store_with_namespace("a");
    let start = store.current_revision();
    put(&store, &CM, "a", "x", json!({"metadata": {"name": "x"}})).unwrap();
    put(&store, &CM, "a", "y", json!({"metadata": {"name": "y"}})).unwrap();
    let sub = store.watch(&CM, Some(start + 1)).unwrap();
    assert_eq!(sub.replay.len(), 1);
    assert_eq!(meta_str(&sub.replay[0].object, "name"), "y");
    store.compact();
    let err = store.watch(&CM, Some(start)).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
    assert_eq!(
        err.message,
        format!("too old resource version: {start} ({})", start + 2)
    );
}

#[test]
fn a_watch_without_a_version_starts_from_every_object() {
    let store = store_with_namespace("a");
    put(&store, &CM, "a", "x", json!({"metadata": {"name": "x"}})).unwrap();
    let sub = store.watch(&CM, None).unwrap();
    assert_eq!(sub.initial.len(), 1);
    assert_eq!(sub.revision, store.current_revision());
}

#[test]
fn a_new_namespace_has_a_default_service_account_as_old_as_itself() {
    let store = Store::new();
    let created = put(&store, &NS, "", "a", json!({"metadata": {"name": "a"}}))
        .unwrap()
        .object;
    let accounts = store.list_key(SERVICE_ACCOUNTS, Some("a")).0;
    assert_eq!(accounts.len(), 1);
    let account = &accounts[0];
    assert_eq!(
        (account["kind"].as_str(), account["apiVersion"].as_str()),
        (Some("ServiceAccount"), Some("v1"))
    );
    assert_eq!(
        (meta_str(account, "name"), meta_str(account, "namespace")),
        ("default", "a")
    );
    assert_eq!(
        account["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );
    assert!(account["metadata"]["uid"].is_string() && account["metadata"].get("managedFields").is_none());
    let dry = store.write(&NS, "", "b", true, |_| {
        Ok(Change::Put(json!({"metadata": {"name": "b"}})))
    });
    assert!(
        dry.is_ok() && store.list_key(SERVICE_ACCOUNTS, Some("b")).0.is_empty(),
        "a dry run creates nothing"
    );
}
