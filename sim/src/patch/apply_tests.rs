use serde_json::json;

use super::*;
use crate::patch::test_types::{CONFIGMAP, DEPLOYMENT, ROLE_BINDING};

const T1: &str = "2026-01-01T00:00:00Z";
const T2: &str = "2026-01-01T00:05:00Z";

fn deployment(replicas: u64, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": labels},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
    })
}

fn entries(object: &Value) -> Vec<Value> {
    object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry_of<'a>(object: &'a Value, manager: &str) -> Option<&'a Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager)
}

fn conflicts(result: Result<Value, PatchError>) -> Vec<StatusCause> {
    match result {
        Err(PatchError::Conflicts(causes)) => causes,
        other => panic!("expected conflicts, got {other:?}"),
    }
}

#[test]
fn apply_creates_the_object_with_one_apply_entry() {
    let config = deployment(2, json!({"app": "web"}));
    let out = apply(&DEPLOYMENT, None, &config, "kubectl", false, T1).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    assert_eq!(out["metadata"]["name"], "web");
    assert_eq!(
        entries(&out),
        vec![json!({
            "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}}}
            }
        })]
    );
}

#[test]
fn apply_never_takes_server_metadata_or_status_from_the_config() {
    let live = apply(&DEPLOYMENT, None, &deployment(1, json!({})), "a", false, T1).unwrap();
    let mut live = live;
    live["metadata"]["uid"] = json!("live-uid");
    live["metadata"]["resourceVersion"] = json!("7");
    live["status"] = json!({"replicas": 1});
    let mut config = deployment(1, json!({}));
    config["metadata"]["uid"] = json!("other");
    config["metadata"]["resourceVersion"] = json!("7");
    config["status"] = json!({"replicas": 5});
    let out = apply(&DEPLOYMENT, Some(&live), &config, "a", false, T2).unwrap();
    assert_eq!(out["metadata"]["uid"], "live-uid");
    assert_eq!(out["status"]["replicas"], 1);
    assert!(entry_of(&out, "a").unwrap()["fieldsV1"].get("f:status").is_none());
}

#[test]
fn applying_the_same_config_again_changes_nothing() {
    let config = deployment(2, json!({"app": "web"}));
    let live = apply(&DEPLOYMENT, None, &config, "kubectl", false, T1).unwrap();
    let again = apply(&DEPLOYMENT, Some(&live), &config, "kubectl", false, T2).unwrap();
    assert_eq!(again, live);
}

#[test]
fn a_field_owned_by_another_applier_with_another_value_conflicts() {
    let live = apply(&DEPLOYMENT, None, &deployment(1, json!({})), "alice", false, T1).unwrap();
    let causes = conflicts(apply(
        &DEPLOYMENT,
        Some(&live),
        &deployment(3, json!({})),
        "bob",
        false,
        T2,
    ));
    assert_eq!(
        causes,
        vec![StatusCause {
            reason: "FieldManagerConflict".into(),
            message: "conflict with \"alice\"".into(),
            field: ".spec.replicas".into(),
        }]
    );
    let status = PatchError::Conflicts(causes).to_status();
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
    );
}

#[test]
fn a_conflict_with_an_update_manager_names_its_api_version() {
    let live = apply(&DEPLOYMENT, None, &deployment(1, json!({})), "alice", false, T1).unwrap();
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(4);
    record_update(&DEPLOYMENT, Some(&live), &mut edited, "kubectl-edit", T2);
    let causes = conflicts(apply(
        &DEPLOYMENT,
        Some(&edited),
        &deployment(1, json!({})),
        "alice",
        false,
        T2,
    ));
    assert_eq!(causes[0].message, "conflict with \"kubectl-edit\" using apps/v1");
    assert_eq!(causes[0].field, ".spec.replicas");
}

#[test]
fn force_moves_ownership_and_drops_emptied_entries() {
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1"}});
    let live = apply(&CONFIGMAP, None, &first, "alice", false, T1).unwrap();
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "2"}});
    assert!(apply(&CONFIGMAP, Some(&live), &second, "bob", false, T2).is_err());
    let out = apply(&CONFIGMAP, Some(&live), &second, "bob", true, T2).unwrap();
    assert_eq!(out["data"]["k"], "2");
    assert!(entry_of(&out, "alice").is_none(), "alice owned nothing else: {out}");
    assert_eq!(
        entry_of(&out, "bob").unwrap()["fieldsV1"],
        json!({"f:data": {"f:k": {}}})
    );
}

#[test]
fn the_same_value_is_shared_without_conflict() {
    let live = apply(
        &DEPLOYMENT,
        None,
        &deployment(2, json!({"app": "web"})),
        "alice",
        false,
        T1,
    )
    .unwrap();
    let bob =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let out = apply(&DEPLOYMENT, Some(&live), &bob, "bob", false, T2).unwrap();
    assert_eq!(
        entry_of(&out, "bob").unwrap()["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(entry_of(&out, "alice").unwrap()["fieldsV1"]["f:spec"]
        .get("f:replicas")
        .is_some());
    assert_eq!(entries(&out).len(), 2);
}

#[test]
fn a_field_dropped_from_the_config_is_removed_unless_someone_else_owns_it() {
    let live = apply(
        &DEPLOYMENT,
        None,
        &deployment(1, json!({"app": "web", "tier": "front"})),
        "alice",
        false,
        T1,
    )
    .unwrap();
    let out = apply(
        &DEPLOYMENT,
        Some(&live),
        &deployment(1, json!({"app": "web"})),
        "alice",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));

    // bob shares the label: alice dropping it leaves it in place.
    let bob = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"tier": "front"}}});
    let shared = apply(&DEPLOYMENT, Some(&live), &bob, "bob", false, T2).unwrap();
    let out = apply(
        &DEPLOYMENT,
        Some(&shared),
        &deployment(1, json!({"app": "web"})),
        "alice",
        false,
        T2,
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web", "tier": "front"}));
}

#[test]
fn a_container_dropped_from_the_config_is_removed() {
    let mut two = deployment(1, json!({}));
    two["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "web", "image": "nginx"}, {"name": "log", "image": "busybox"}]);
    let live = apply(&DEPLOYMENT, None, &two, "alice", false, T1).unwrap();
    let out = apply(&DEPLOYMENT, Some(&live), &deployment(1, json!({})), "alice", false, T2).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web", "image": "nginx"}])
    );
}

#[test]
fn apply_refuses_a_wrong_kind_and_managed_fields_in_the_config() {
    let mut config = deployment(1, json!({}));
    config["kind"] = json!("Pod");
    let err = apply(&DEPLOYMENT, None, &config, "a", false, T1).unwrap_err();
    assert_eq!(
        err,
        PatchError::BadRequest("invalid object type: apps/v1, Kind=Pod".into())
    );
    let mut config = deployment(1, json!({}));
    config["metadata"]["managedFields"] = json!([]);
    let err = apply(&DEPLOYMENT, None, &config, "a", false, T1).unwrap_err();
    assert_eq!(err, PatchError::BadRequest("metadata.managedFields must be nil".into()));
}

#[test]
fn an_object_without_managed_fields_is_owned_by_before_first_apply() {
    let live =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1}});
    let causes = conflicts(apply(
        &DEPLOYMENT,
        Some(&live),
        &deployment(2, json!({})),
        "alice",
        false,
        T1,
    ));
    assert_eq!(causes[0].message, "conflict with \"before-first-apply\" using apps/v1");
}

#[test]
fn record_update_on_create_owns_every_field_set() {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "uid": "u", "labels": {"a": "1"}}, "data": {"k": "v"}});
    record_update(&CONFIGMAP, None, &mut cm, "kubectl-create", T1);
    assert_eq!(
        entries(&cm),
        vec![json!({
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
        })]
    );
}

#[test]
fn record_update_takes_changed_fields_from_an_applier() {
    let config =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1", "y": "1"}});
    let live = apply(&CONFIGMAP, None, &config, "alice", false, T1).unwrap();
    let mut new = live.clone();
    new["data"]["x"] = json!("2");
    record_update(&CONFIGMAP, Some(&live), &mut new, "kubectl-edit", T2);
    assert_eq!(
        entry_of(&new, "alice").unwrap()["fieldsV1"],
        json!({"f:data": {"f:y": {}}})
    );
    let edit = entry_of(&new, "kubectl-edit").unwrap();
    assert_eq!(edit["fieldsV1"], json!({"f:data": {"f:x": {}}}));
    assert_eq!(edit["operation"], "Update");
    assert_eq!(edit["time"], T2);
}

#[test]
fn record_update_without_a_change_adds_no_entry() {
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}});
    let live = apply(&CONFIGMAP, None, &config, "alice", false, T1).unwrap();
    let mut new = live.clone();
    record_update(&CONFIGMAP, Some(&live), &mut new, "kubectl-edit", T2);
    assert_eq!(new, live);
}

#[test]
fn managed_fields_of_one_empty_entry_reset_them() {
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}});
    let live = apply(&CONFIGMAP, None, &config, "alice", false, T1).unwrap();
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{}]);
    record_update(&CONFIGMAP, Some(&live), &mut new, "kubectl-patch", T2);
    assert!(new["metadata"].get("managedFields").is_none(), "{new}");
    // An empty list is ignored: the live entries stay.
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([]);
    record_update(&CONFIGMAP, Some(&live), &mut new, "kubectl-patch", T2);
    assert_eq!(entries(&new), entries(&live));
}

#[test]
fn status_writes_are_recorded_only_on_the_status_subresource() {
    let live = apply(&DEPLOYMENT, None, &deployment(1, json!({})), "alice", false, T1).unwrap();
    let mut new = live.clone();
    new["status"] = json!({"replicas": 1});
    record_update(&DEPLOYMENT, Some(&live), &mut new, "main", T2);
    assert!(entry_of(&new, "main").is_none());
    let mut new = live.clone();
    new["status"] = json!({"replicas": 1});
    record_update_subresource(&DEPLOYMENT, Some(&live), &mut new, "controller", T2, Some("status"));
    let entry = entry_of(&new, "controller").unwrap();
    assert_eq!(entry["subresource"], "status");
    assert_eq!(entry["fieldsV1"], json!({"f:status": {".": {}, "f:replicas": {}}}));
}

#[test]
fn kubectl_server_side_apply_keeps_last_applied_in_step_and_upgrades_client_side_apply() {
    let old_config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}});
    let mut live = old_config.clone();
    live["metadata"]["annotations"] = json!({LAST_APPLIED: format!("{old_config}\n")});
    record_update(&CONFIGMAP, None, &mut live, "kubectl-client-side-apply", T1);
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "2"}});
    let out = apply(&CONFIGMAP, Some(&live), &config, "kubectl", false, T2).unwrap();
    assert_eq!(out["data"]["x"], "2");
    let annotation = out["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(annotation).unwrap(), config);
}

/// A ClusterRole as two installations of one tool apply it: each with its
/// own label and field manager, both with the shared label and `rules`.
fn cluster_role(mark: &str, verbs: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "tool:viewer", "labels": {"managed-by": "tool", mark: "true"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]
    })
}

#[test]
fn two_appliers_labels_merge_their_atomic_rules_conflict_and_an_empty_apply_releases_only_its_own() {
    let rt = crate::registry::find_kind("rbac.authorization.k8s.io", "ClusterRole").unwrap();
    let a = apply(rt, None, &cluster_role("a", json!(["get"])), "tool-a", false, T1).unwrap();
    let both = apply(rt, Some(&a), &cluster_role("b", json!(["get"])), "tool-b", false, T2).unwrap();
    assert_eq!(
        both["metadata"]["labels"],
        json!({"managed-by": "tool", "a": "true", "b": "true"})
    );
    let other_rules = cluster_role("b", json!(["get", "list"]));
    let causes = conflicts(apply(rt, Some(&both), &other_rules, "tool-b", false, T2));
    assert_eq!(
        causes
            .iter()
            .map(|c| (c.message.as_str(), c.field.as_str()))
            .collect::<Vec<_>>(),
        [("conflict with \"tool-a\"", ".rules")],
        "rules are an atomic list: shared while equal, a conflict once they differ"
    );

    let release = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "tool:viewer"}});
    let out = apply(rt, Some(&both), &release, "tool-a", false, T2).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"managed-by": "tool", "b": "true"}));
    assert_eq!(out["rules"], both["rules"], "tool-b still owns them");
    assert!(entry_of(&out, "tool-a").is_none(), "an emptied entry is dropped");
}

#[test]
fn a_bindings_role_ref_and_subjects_are_owned_whole_by_apply_and_update() {
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "readers", "namespace": "shop"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ann"}]
    });
    let applied = apply(&ROLE_BINDING, None, &binding, "me", false, T1).unwrap();
    let owned = json!({"f:roleRef": {}, "f:subjects": {}});
    assert_eq!(entry_of(&applied, "me").unwrap()["fieldsV1"], owned);
    let mut created = binding.clone();
    record_update(&ROLE_BINDING, None, &mut created, "curl", T1);
    assert_eq!(entry_of(&created, "curl").unwrap()["fieldsV1"], owned);
}

#[test]
fn a_scale_write_takes_the_replicas_in_an_entry_without_time_that_sorts_first() {
    let mut created = deployment(2, json!({"app": "web"}));
    record_update(&DEPLOYMENT, None, &mut created, "curl", T1);
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(3);
    record_update_subresource(&DEPLOYMENT, Some(&created), &mut scaled, "curl", T2, Some("scale"));
    let entries = entries(&scaled);
    assert_eq!(
        entries[0],
        json!({"manager": "curl", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"})
    );
    assert_eq!(entries[1]["time"], T1);
    assert!(entries[1]["fieldsV1"]["f:spec"].get("f:replicas").is_none());
}
