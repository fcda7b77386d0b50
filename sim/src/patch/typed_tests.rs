use serde_json::json;

use super::*;
use crate::patch::schema::root;
use crate::patch::test_types::{DEPLOYMENT, POD, WIDGET};

fn paths(set: &FieldSet) -> Vec<String> {
    set.paths()
        .iter()
        .map(|p| crate::patch::fieldset::path_string(p))
        .collect()
}

#[test]
fn field_set_uses_keys_and_defaults_the_port_protocol() {
    let pod = json!({"spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}});
    let set = field_set(root(&POD), &pod);
    assert_eq!(
        set.to_fields_v1(),
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
            ".": {}, "f:image": {}, "f:name": {},
            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
        }}}})
    );
}

#[test]
fn field_set_owns_atomic_values_whole_and_sets_by_value() {
    let deploy = json!({"metadata": {"finalizers": ["a"], "labels": {"app": "x"}},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"spec": {"tolerations": [{"key": "k"}]}}}});
    let set = field_set(root(&DEPLOYMENT), &deploy);
    assert_eq!(
        paths(&set),
        [
            ".metadata.finalizers[=\"a\"]",
            ".metadata.labels.app",
            ".spec.selector",
            ".spec.template.spec.tolerations"
        ]
    );
}

#[test]
fn compare_reports_added_modified_and_removed() {
    let old = json!({"data": {"a": "1", "b": "2"}});
    let new = json!({"data": {"a": "9", "c": "3"}, "binaryData": {"x": "eA=="}});
    let cmp = compare(root(&WIDGET), &old, &new);
    assert_eq!(paths(&cmp.modified), [".data.a"]);
    assert_eq!(paths(&cmp.added), [".binaryData", ".binaryData.x", ".data.c"]);
    assert_eq!(paths(&cmp.removed), [".data.b"]);
}

#[test]
fn merge_keeps_live_items_and_config_order() {
    let live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}});
    let config = json!({"spec": {"containers": [{"name": "c", "image": "2"}, {"name": "a", "image": "2"}]}});
    let merged = merge(root(&POD), Some(&live), &config).unwrap();
    let names: Vec<&str> = merged["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "a", "b"]);
    assert_eq!(merged["spec"]["containers"][1]["image"], "2");
}

#[test]
fn merge_replaces_atomic_lists_and_null_removes() {
    let live = json!({"spec": {"template": {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}, "replicas": 2}});
    let config = json!({"spec": {"template": {"spec": {"tolerations": [{"key": "c"}]}}, "replicas": null}});
    let merged = merge(root(&DEPLOYMENT), Some(&live), &config).unwrap();
    assert_eq!(
        merged,
        json!({"spec": {"template": {"spec": {"tolerations": [{"key": "c"}]}}}})
    );
}

#[test]
fn remove_spares_what_someone_else_still_owns() {
    let mut object = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"containers": [{"name": "x", "image": "i", "args": ["1"]}]}});
    let mut gone = FieldSet::new();
    gone.insert(&["f:metadata".into(), "f:labels".into(), "f:a".into()]);
    gone.insert(&["f:spec".into(), "f:containers".into(), "k:{\"name\":\"x\"}".into()]);
    let mut keep = FieldSet::new();
    keep.insert(&[
        "f:spec".into(),
        "f:containers".into(),
        "k:{\"name\":\"x\"}".into(),
        "f:args".into(),
    ]);
    remove(root(&POD), &mut object, &gone, Some(&keep));
    assert_eq!(
        object,
        json!({"metadata": {"labels": {"b": "2"}}, "spec": {"containers": [{"name": "x", "image": "i", "args": ["1"]}]}})
    );
    remove(root(&POD), &mut object, &gone, None);
    assert_eq!(object, json!({"metadata": {"labels": {"b": "2"}}}));
}

#[test]
fn validate_refuses_missing_and_duplicate_keys() {
    let mut path = Vec::new();
    let missing = json!({"spec": {"containers": [{"image": "x"}]}});
    let err = validate(root(&POD), &missing, &mut path).unwrap_err();
    assert!(err.contains(".spec.containers: element 0"), "{err}");
    let dup = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
    let err = validate(root(&POD), &dup, &mut Vec::new()).unwrap_err();
    assert_eq!(err, ".spec.containers: duplicate entries for key [name=\"a\"]");
}
