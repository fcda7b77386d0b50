use serde_json::json;

use super::*;
use crate::patch::test_types::{CONFIGMAP, DEPLOYMENT, POD, SERVICE, WIDGET};

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn containers_merge_by_name_and_null_deletes() {
    let target = pod(json!([
        {"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
        {"name": "side", "image": "busybox"}
    ]));
    let patch = json!({"spec": {"containers": [
        {"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]}
    ]}, "metadata": {"labels": {"x": "y"}}});
    let out = strategic_merge_patch(&POD, &target, &patch).unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([
            {"name": "web", "image": "nginx:2", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "busybox"}
        ])
    );
    assert_eq!(out["metadata"]["labels"], json!({"x": "y"}));
    let out = strategic_merge_patch(&POD, &out, &json!({"metadata": {"labels": {"x": null}}})).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({}));
}

#[test]
fn a_new_item_is_appended_after_the_server_items() {
    let target = pod(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"containers": [{"name": "c", "image": "x"}]}});
    let out = strategic_merge_patch(&POD, &target, &patch).unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[test]
fn patch_delete_removes_an_item_by_key() {
    let target = pod(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}});
    let out = strategic_merge_patch(&POD, &target, &patch).unwrap();
    assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
}

#[test]
fn patch_replace_replaces_a_list_and_a_map() {
    let target = pod(json!([{"name": "a", "image": "1"}, {"name": "b"}]));
    let patch = json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "2"}]}});
    let out = strategic_merge_patch(&POD, &target, &patch).unwrap();
    assert_eq!(out["spec"]["containers"], json!([{"name": "z", "image": "2"}]));

    let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
    let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}});
    let out = strategic_merge_patch(&CONFIGMAP, &target, &patch).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
}

#[test]
fn patch_delete_on_a_map_empties_it() {
    let target = json!({"data": {"a": "1"}, "metadata": {"name": "x"}});
    let out = strategic_merge_patch(&CONFIGMAP, &target, &json!({"data": {"$patch": "delete"}})).unwrap();
    assert_eq!(out["data"], json!({}));
}

#[test]
fn ports_merge_by_container_port_and_service_port() {
    let target = pod(json!([{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 443}]}]));
    let patch = json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}});
    let out = strategic_merge_patch(&POD, &target, &patch).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "name": "http"}, {"containerPort": 443}])
    );

    let target = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 81}]}});
    let out = strategic_merge_patch(&SERVICE, &target, &patch).unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port": 80, "targetPort": 9090}, {"port": 81}])
    );
}

#[test]
fn lists_without_strategy_are_replaced() {
    let target = json!({"spec": {"template": {"spec": {"tolerations": [{"key": "a"}], "containers": [{"name": "c", "args": ["1", "2"]}]}}}});
    let patch = json!({"spec": {"template": {"spec": {"tolerations": [{"key": "b"}], "containers": [{"name": "c", "args": ["3"]}]}}}});
    let out = strategic_merge_patch(&DEPLOYMENT, &target, &patch).unwrap();
    assert_eq!(out["spec"]["template"]["spec"]["tolerations"], json!([{"key": "b"}]));
    assert_eq!(out["spec"]["template"]["spec"]["containers"][0]["args"], json!(["3"]));
}

#[test]
fn finalizers_merge_as_a_set_and_delete_from_primitive_list_removes() {
    let target = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = strategic_merge_patch(&CONFIGMAP, &target, &json!({"metadata": {"finalizers": ["b", "c"]}})).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
    let out = strategic_merge_patch(&CONFIGMAP, &out, &patch).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
    assert!(out["metadata"].get("$deleteFromPrimitiveList/finalizers").is_none());
}

#[test]
fn set_element_order_orders_the_list_and_is_never_stored() {
    let target = pod(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
        "containers": [{"name": "a", "image": "new"}]
    }});
    let out = strategic_merge_patch(&POD, &target, &patch).unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "a", "b"]);
    assert_eq!(out["spec"]["containers"][1]["image"], "new");
    assert!(!out.to_string().contains("$setElementOrder"));
}

#[test]
fn retain_keys_clears_unlisted_fields() {
    let target = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
    let out = strategic_merge_patch(&DEPLOYMENT, &target, &patch).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let bad = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}});
    assert!(matches!(
        strategic_merge_patch(&DEPLOYMENT, &target, &bad),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn directives_inside_new_values_are_not_stored() {
    let target = json!({"metadata": {"name": "x"}});
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "x", "$patch": "delete"}], "image": null}]}}}});
    let out = strategic_merge_patch(&DEPLOYMENT, &target, &patch).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "env": []}])
    );
}

#[test]
fn owner_references_merge_by_uid() {
    let target = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}});
    let patch = json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}});
    let out = strategic_merge_patch(&CONFIGMAP, &target, &patch).unwrap();
    assert_eq!(out["metadata"]["ownerReferences"].as_array().unwrap().len(), 2);
}

#[test]
fn custom_resources_are_unsupported_with_415() {
    let err = strategic_merge_patch(&WIDGET, &json!({}), &json!({})).unwrap_err();
    let status = err.to_status();
    assert_eq!((status.code, status.reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(status.message.contains("application/merge-patch+json"));
}

#[test]
fn malformed_patches_are_refused() {
    assert!(matches!(
        strategic_merge_patch(&POD, &json!({}), &json!([1])),
        Err(PatchError::BadRequest(_))
    ));
    let no_key = json!({"spec": {"containers": [{"image": "x"}]}});
    let target = pod(json!([{"name": "a"}]));
    assert!(matches!(
        strategic_merge_patch(&POD, &target, &no_key),
        Err(PatchError::Internal(_))
    ));
    let bad_directive = json!({"metadata": {"$patch": "explode"}});
    assert!(strategic_merge_patch(&POD, &target, &bad_directive).is_err());
}
