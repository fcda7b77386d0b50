//! The simulator's writes that kubectl and portcullis's approvals rely on:
//! dry run on every write verb, deletecollection, and the preconditions an
//! approved write runs with (an apply body's resourceVersion, delete's uid).

use crate::support::{raw, spawn_sim};
use http::Method;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn put(sim: &portcullis_sim::Sim, name: &str, labels: serde_json::Value) -> serde_json::Value {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}});
    let answer = raw(
        sim,
        Method::POST,
        CMS,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    answer.json()
}

async fn get(sim: &portcullis_sim::Sim, name: &str) -> u16 {
    raw(sim, Method::GET, &format!("{CMS}/{name}"), &[], "")
        .await
        .unwrap()
        .status
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_update_patch_and_delete_answer_like_the_write_and_change_nothing() {
    let sim = spawn_sim().await;
    let created = put(&sim, "dry", json!({})).await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let json_type = [("content-type", "application/json")];

    let mut changed = created.clone();
    changed["data"]["k"] = json!("updated");
    let update = raw(
        &sim,
        Method::PUT,
        &format!("{CMS}/dry?dryRun=All"),
        &json_type,
        &changed.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(update.status, 200);
    assert_eq!(
        update.json()["data"]["k"],
        "updated",
        "the answer is the object as it would be stored"
    );

    let merge = [("content-type", "application/merge-patch+json")];
    let patch = raw(
        &sim,
        Method::PATCH,
        &format!("{CMS}/dry?dryRun=All"),
        &merge,
        r#"{"data":{"k":"patched"}}"#,
    )
    .await
    .unwrap();
    assert_eq!(
        (patch.status.as_u16(), patch.json()["data"]["k"].clone()),
        (200, json!("patched"))
    );

    let delete = raw(&sim, Method::DELETE, &format!("{CMS}/dry?dryRun=All"), &[], "")
        .await
        .unwrap();
    assert_eq!(delete.status, 200);

    let now = raw(&sim, Method::GET, &format!("{CMS}/dry"), &[], "")
        .await
        .unwrap()
        .json();
    assert_eq!(now["data"]["k"], "v", "nothing was stored");
    assert_eq!(now["metadata"]["resourceVersion"], rv.as_str());
    let bad = raw(&sim, Method::DELETE, &format!("{CMS}/dry?dryRun=Maybe"), &[], "")
        .await
        .unwrap();
    assert_eq!(bad.status, 422, "only All is a dry run");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletecollection_deletes_what_the_selector_matches_and_nothing_else() {
    let sim = spawn_sim().await;
    put(&sim, "a", json!({"tier": "web"})).await;
    put(&sim, "b", json!({"tier": "web"})).await;
    put(&sim, "c", json!({"tier": "db"})).await;
    let dry = raw(
        &sim,
        Method::DELETE,
        &format!("{CMS}?labelSelector=tier%3Dweb&dryRun=All"),
        &[],
        "",
    )
    .await
    .unwrap();
    assert_eq!(dry.status, 200);
    assert_eq!(get(&sim, "a").await, 200, "a dry run deletes nothing");
    let answer = raw(
        &sim,
        Method::DELETE,
        &format!("{CMS}?labelSelector=tier%3Dweb"),
        &[],
        "",
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    let names: Vec<String> = answer.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        (get(&sim, "a").await, get(&sim, "b").await, get(&sim, "c").await),
        (404, 404, 200)
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_with_a_stale_resource_version_and_a_delete_with_a_wrong_uid_are_409() {
    let sim = spawn_sim().await;
    let created = put(&sim, "guarded", json!({})).await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let merge = [("content-type", "application/merge-patch+json")];
    raw(
        &sim,
        Method::PATCH,
        &format!("{CMS}/guarded"),
        &merge,
        r#"{"data":{"k":"moved on"}}"#,
    )
    .await
    .unwrap();

    let apply = [("content-type", "application/apply-patch+yaml")];
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "guarded", "resourceVersion": rv}, "data": {"k": "mine"}});
    let answer = raw(
        &sim,
        Method::PATCH,
        &format!("{CMS}/guarded?fieldManager=approver"),
        &apply,
        &stale.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 409);
    assert_eq!(answer.json()["reason"], "Conflict");

    let wrong_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-it"}});
    let json_type = [("content-type", "application/json")];
    let answer = raw(
        &sim,
        Method::DELETE,
        &format!("{CMS}/guarded"),
        &json_type,
        &wrong_uid.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 409);
    assert!(answer.json()["message"]
        .as_str()
        .unwrap()
        .contains("the UID in the precondition (not-it) does not match the UID in record ("));
    assert_eq!(get(&sim, "guarded").await, 200);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_version_ends_with_a_410_error_event() {
    let sim = spawn_sim().await;
    let created = put(&sim, "old", json!({})).await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    put(&sim, "newer", json!({})).await;
    sim.store().compact();
    let answer = raw(
        &sim,
        Method::GET,
        &format!("{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=2"),
        &[],
        "",
    )
    .await
    .unwrap();
    let body = String::from_utf8_lossy(answer.body.as_ref().unwrap()).into_owned();
    if answer.status == 410 {
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).unwrap()["reason"],
            "Expired"
        );
    } else {
        let event: serde_json::Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
        assert_eq!(event["type"], "ERROR");
        assert_eq!(
            (event["object"]["code"].clone(), event["object"]["reason"].clone()),
            (json!(410), json!("Expired"))
        );
    }
    sim.shutdown().await;
}
