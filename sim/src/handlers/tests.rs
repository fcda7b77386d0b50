use super::*;
use crate::request_info::classify;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

struct Answer {
    code: StatusCode,
    headers: HeaderMap,
    body: Value,
}

fn cluster() -> Arc<Store> {
    let store = Arc::new(Store::new());
    store
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    store
}

async fn call(store: &Arc<Store>, method: Method, uri: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let (code, headers, bytes) = call_raw(store, method, uri, headers, body).await;
    Answer {
        code,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

async fn call_raw(
    store: &Arc<Store>,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, HeaderMap, Bytes) {
    let (path, query) = uri.split_once('?').map_or((uri, None), |(p, q)| (p, Some(q)));
    let info = classify(&method, path, query).expect("the path classifies");
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let response = handle(store, &Settings::default(), request, &info).await;
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, bytes)
}

const CMS: &str = "/api/v1/namespaces/shop/configmaps";

fn configmap(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": name}}, "data": {"k": "v"}}).to_string()
}

#[tokio::test]
async fn create_get_and_a_second_create_answer_201_200_and_409() {
    let store = cluster();
    let created = call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    assert_eq!(created.code, StatusCode::CREATED);
    assert_eq!(created.body["metadata"]["namespace"], "shop");
    assert!(created.body["metadata"]["uid"].is_string());
    assert_eq!(created.body["metadata"]["managedFields"][0]["operation"], "Update");
    let got = call(&store, Method::GET, &format!("{CMS}/a"), &[], "").await;
    assert_eq!((got.code, &got.body["data"]["k"]), (StatusCode::OK, &json!("v")));
    let again = call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    assert_eq!(again.code, StatusCode::CONFLICT);
    assert_eq!(again.body["reason"], "AlreadyExists");
    assert_eq!(again.body["message"], "configmaps \"a\" already exists");
}

#[tokio::test]
async fn an_update_with_a_stale_resource_version_is_a_conflict() {
    let store = cluster();
    let created = call(&store, Method::POST, CMS, &[], &configmap("a")).await.body;
    let mut changed = created.clone();
    changed["data"]["k"] = json!("w");
    let updated = call(&store, Method::PUT, &format!("{CMS}/a"), &[], &changed.to_string()).await;
    assert_eq!(updated.code, StatusCode::OK);
    let stale = call(&store, Method::PUT, &format!("{CMS}/a"), &[], &changed.to_string()).await;
    assert_eq!(stale.code, StatusCode::CONFLICT);
    assert_eq!(
        stale.body["message"],
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let missing = call(&store, Method::PUT, &format!("{CMS}/b"), &[], &configmap("b")).await;
    assert_eq!(missing.code, StatusCode::NOT_FOUND);
    let mismatch = call(&store, Method::PUT, &format!("{CMS}/b"), &[], &configmap("a")).await;
    assert_eq!(
        mismatch.body["message"],
        "the name of the object (a) does not match the name on the URL (b)"
    );
}

#[tokio::test]
async fn an_unchanged_update_keeps_the_resource_version() {
    let store = cluster();
    let created = call(&store, Method::POST, CMS, &[], &configmap("a")).await.body;
    let same = call(&store, Method::PUT, &format!("{CMS}/a"), &[], &created.to_string())
        .await
        .body;
    assert_eq!(
        same["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn dry_run_answers_like_a_write_and_stores_nothing() {
    let store = cluster();
    let before = store.current_revision();
    let dry = call(&store, Method::POST, &format!("{CMS}?dryRun=All"), &[], &configmap("a")).await;
    assert_eq!(dry.code, StatusCode::CREATED);
    assert!(dry.body["metadata"]["uid"].is_string());
    assert!(store
        .list(registry::find("", "v1", "configmaps").unwrap(), None)
        .is_empty());
    assert_eq!(store.current_revision(), before);
    let bad = call(&store, Method::POST, &format!("{CMS}?dryRun=Yes"), &[], &configmap("a")).await;
    assert_eq!(bad.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        bad.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Yes\"]: supported values: \"All\""
    );
}

#[tokio::test]
async fn lists_filter_by_labels_and_page_with_continue() {
    let store = cluster();
    for name in ["a", "b", "c"] {
        call(&store, Method::POST, CMS, &[], &configmap(name)).await;
    }
    let first = call(&store, Method::GET, &format!("{CMS}?limit=2"), &[], "").await.body;
    assert_eq!(first["kind"], "ConfigMapList");
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"].as_str().unwrap();
    let second = call(&store, Method::GET, &format!("{CMS}?limit=2&continue={token}"), &[], "")
        .await
        .body;
    assert_eq!(second["items"][0]["metadata"]["name"], "c");
    assert!(second["metadata"].get("continue").is_none());
    let selected = call(
        &store,
        Method::GET,
        &format!("{CMS}?labelSelector=app%20in%20(a,c)"),
        &[],
        "",
    )
    .await
    .body;
    assert_eq!(selected["items"].as_array().unwrap().len(), 2);
    let by_field = call(
        &store,
        Method::GET,
        "/api/v1/configmaps?fieldSelector=metadata.name!%3Da",
        &[],
        "",
    )
    .await
    .body;
    assert_eq!(by_field["items"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let store = cluster();
    call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    let uid = store
        .get(registry::find("", "v1", "configmaps").unwrap(), "shop", "a")
        .unwrap()["metadata"]["uid"]
        .clone();
    let wrong = call(
        &store,
        Method::DELETE,
        &format!("{CMS}/a"),
        &[],
        r#"{"preconditions":{"uid":"nope"}}"#,
    )
    .await;
    assert_eq!(wrong.code, StatusCode::CONFLICT);
    assert_eq!(
        wrong.body["message"],
        format!("Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition (nope) does not match the UID in record ({}). The object might have been deleted and then recreated", uid.as_str().unwrap())
    );
    assert_eq!(wrong.body["details"], json!({"name": "a", "kind": "ConfigMap"}));
    let stale = json!({"preconditions": {"resourceVersion": "1"}}).to_string();
    let stale = call(&store, Method::DELETE, &format!("{CMS}/a"), &[], &stale).await;
    let rv = store
        .get(registry::find("", "v1", "configmaps").unwrap(), "shop", "a")
        .unwrap()["metadata"]["resourceVersion"]
        .clone();
    assert_eq!(
        stale.body["message"],
        format!("Operation cannot be fulfilled on ConfigMap \"a\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({}). The object might have been modified", rv.as_str().unwrap())
    );
    let body = json!({"preconditions": {"uid": uid}}).to_string();
    let deleted = call(&store, Method::DELETE, &format!("{CMS}/a"), &[], &body).await;
    assert_eq!(
        (deleted.code, &deleted.body["status"]),
        (StatusCode::OK, &json!("Success"))
    );
    assert_eq!(deleted.body["details"]["uid"], uid);
    let gone = call(&store, Method::DELETE, &format!("{CMS}/a"), &[], "").await;
    assert_eq!(gone.code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn invalid_names_and_unknown_fields_are_refused_as_the_api_server_does() {
    let store = cluster();
    let bad = json!({"metadata": {"name": "Bad_Name"}}).to_string();
    let invalid = call(&store, Method::POST, CMS, &[], &bad).await;
    assert_eq!(
        (invalid.code, &invalid.body["reason"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &json!("Invalid"))
    );
    let typo = json!({"metadata": {"name": "t"}, "dta": {}}).to_string();
    let strict = call(
        &store,
        Method::POST,
        &format!("{CMS}?fieldValidation=Strict"),
        &[],
        &typo,
    )
    .await;
    assert_eq!(strict.code, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"dta\""
    );
    let warn = call(&store, Method::POST, &format!("{CMS}?fieldValidation=Warn"), &[], &typo).await;
    assert_eq!(warn.code, StatusCode::CREATED);
    assert_eq!(warn.headers["warning"], "299 - \"unknown field \\\"dta\\\"\"");
}

#[tokio::test]
async fn unknown_resources_wrong_methods_and_protobuf_only_clients_get_their_status() {
    let store = cluster();
    let unknown = call(&store, Method::GET, "/api/v1/namespaces/shop/widgets", &[], "").await;
    assert_eq!(
        (unknown.code, &unknown.body["message"]),
        (
            StatusCode::NOT_FOUND,
            &json!("the server could not find the requested resource")
        )
    );
    let cluster_wide_post = call(&store, Method::POST, "/api/v1/configmaps", &[], &configmap("a")).await;
    assert_eq!(cluster_wide_post.code, StatusCode::METHOD_NOT_ALLOWED);
    let protobuf = call(
        &store,
        Method::GET,
        CMS,
        &[("accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    assert_eq!(
        (protobuf.code, &protobuf.body["reason"]),
        (StatusCode::NOT_ACCEPTABLE, &json!("NotAcceptable"))
    );
    // A protobuf body that is not a Kubernetes envelope is a bad request, as
    // kube-apiserver answers; a media type nobody serves is 415.
    let malformed = call(
        &store,
        Method::POST,
        CMS,
        &[("content-type", "application/vnd.kubernetes.protobuf")],
        "x",
    )
    .await;
    assert_eq!(malformed.code, StatusCode::BAD_REQUEST);
    let unknown = call(&store, Method::POST, CMS, &[("content-type", "text/csv")], "x").await;
    assert_eq!(unknown.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn a_body_over_three_mebibytes_is_too_large() {
    let store = cluster();
    let huge = "x".repeat(MAX_BODY + 1);
    let answer = call(&store, Method::POST, CMS, &[], &huge).await;
    assert_eq!(
        (answer.code, &answer.body["reason"]),
        (StatusCode::PAYLOAD_TOO_LARGE, &json!("RequestEntityTooLarge"))
    );
}

#[tokio::test]
async fn merge_patches_change_and_apply_creates_then_conflicts() {
    let store = cluster();
    call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    let merge = [("content-type", "application/merge-patch+json")];
    let patched = call(
        &store,
        Method::PATCH,
        &format!("{CMS}/a"),
        &merge,
        r#"{"data":{"k":"x"}}"#,
    )
    .await;
    assert_eq!(
        (patched.code, &patched.body["data"]["k"]),
        (StatusCode::OK, &json!("x"))
    );
    let forced = call(&store, Method::PATCH, &format!("{CMS}/a?force=true"), &merge, "{}").await;
    assert_eq!(forced.code, StatusCode::UNPROCESSABLE_ENTITY);
    let apply = [("content-type", "application/apply-patch+yaml")];
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: one\n";
    let no_manager = call(&store, Method::PATCH, &format!("{CMS}/b"), &apply, config).await;
    assert_eq!(
        no_manager.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let created = call(
        &store,
        Method::PATCH,
        &format!("{CMS}/b?fieldManager=alice"),
        &apply,
        config,
    )
    .await;
    assert_eq!(created.code, StatusCode::CREATED);
    let other = config.replace("one", "two");
    let conflict = call(
        &store,
        Method::PATCH,
        &format!("{CMS}/b?fieldManager=bob"),
        &apply,
        &other,
    )
    .await;
    assert_eq!(conflict.code, StatusCode::CONFLICT);
    assert_eq!(conflict.body["details"]["causes"][0]["reason"], "FieldManagerConflict");
    assert!(conflict.body["message"]
        .as_str()
        .unwrap()
        .starts_with("Apply failed with 1 conflict: conflict with \"alice\""));
    let unsupported = call(
        &store,
        Method::PATCH,
        &format!("{CMS}/b"),
        &[("content-type", "text/plain")],
        "{}",
    )
    .await;
    assert_eq!(unsupported.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // go-restful's generic text, as kube-apiserver answers.
    assert_eq!(unsupported.body["message"], "415: Unsupported Media Type");
    assert_eq!(unsupported.body["details"], json!({}));
}

#[tokio::test]
async fn a_post_to_a_name_and_an_update_or_patch_of_a_collection_are_not_allowed() {
    let store = cluster();
    let merge = [("content-type", "application/merge-patch+json")];
    for (method, uri, headers) in [
        (Method::POST, format!("{CMS}/a"), &[][..]),
        (Method::PUT, CMS.to_string(), &[][..]),
        (Method::PATCH, CMS.to_string(), &merge[..]),
    ] {
        let answer = call(&store, method.clone(), &uri, headers, &configmap("a")).await;
        assert_eq!(answer.code, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert_eq!(answer.body["reason"], "MethodNotAllowed");
        assert_eq!(answer.body["details"], json!({}), "kube sends empty details");
    }
}

#[tokio::test]
async fn a_limit_that_is_not_a_number_is_a_bad_request() {
    let answer = call(&cluster(), Method::GET, &format!("{CMS}?limit=abc"), &[], "").await;
    assert_eq!(answer.code, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.body["message"],
        "strconv.ParseInt: parsing \"abc\": invalid syntax"
    );
}

#[tokio::test]
async fn a_delete_answers_success_without_code_and_refuses_an_unknown_propagation_policy() {
    let store = cluster();
    call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    let sideways = call(
        &store,
        Method::DELETE,
        &format!("{CMS}/a?propagationPolicy=Sideways"),
        &[],
        "",
    )
    .await;
    assert_eq!(sideways.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(sideways.body["details"]["kind"], "DeleteOptions");
    let deleted = call(&store, Method::DELETE, &format!("{CMS}/a"), &[], "").await;
    assert_eq!(deleted.code, StatusCode::OK);
    assert_eq!(deleted.body["status"], "Success");
    assert!(deleted.body.get("code").is_none(), "{}", deleted.body);
}

#[tokio::test]
async fn a_write_without_user_agent_or_field_manager_is_managed_by_unknown() {
    let created = call(&cluster(), Method::POST, CMS, &[], &configmap("a")).await;
    assert_eq!(created.body["metadata"]["managedFields"][0]["manager"], "unknown");
}

#[tokio::test]
async fn typed_list_items_carry_no_kind_or_api_version_but_custom_resource_items_do() {
    let store = cluster();
    call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    let listed = call(&store, Method::GET, CMS, &[], "").await.body;
    assert_eq!(
        (&listed["kind"], &listed["apiVersion"]),
        (&json!("ConfigMapList"), &json!("v1"))
    );
    let item = listed["items"][0].as_object().expect("an item");
    assert_eq!(item["metadata"]["name"], "a");
    assert!(
        !item.contains_key("kind") && !item.contains_key("apiVersion"),
        "{item:?}"
    );
    let deleted = call(&store, Method::DELETE, CMS, &[], "").await.body;
    assert_eq!(deleted["items"][0]["metadata"]["name"], "a");
    assert!(deleted["items"][0].get("kind").is_none());
    let crontabs = "/apis/stable.example.com/v1/namespaces/shop/crontabs";
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c"}});
    call(&store, Method::POST, crontabs, &[], &crontab.to_string()).await;
    let custom = call(&store, Method::GET, crontabs, &[], "").await.body;
    assert_eq!(custom["items"][0]["kind"], "CronTab");
    assert_eq!(custom["items"][0]["apiVersion"], "stable.example.com/v1");
}

#[tokio::test]
async fn send_initial_events_needs_not_older_than_but_no_longer_bookmarks() {
    let store = cluster();
    call(&store, Method::POST, CMS, &[], &configmap("a")).await;
    let watch = format!("{CMS}?watch=1&sendInitialEvents=true&timeoutSeconds=1");
    let refused = call(&store, Method::GET, &watch, &[], "").await;
    assert_eq!(refused.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused.body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    let types = |bytes: &Bytes| -> Vec<String> {
        let text = String::from_utf8_lossy(bytes);
        let events = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
        events.map(|e| e["type"].as_str().unwrap().to_string()).collect()
    };
    let plain = call_raw(
        &store,
        Method::GET,
        &format!("{watch}&resourceVersionMatch=NotOlderThan"),
        &[],
        "",
    )
    .await;
    assert_eq!((plain.0, types(&plain.2)), (StatusCode::OK, vec!["ADDED".to_string()]));
    let marked = format!("{watch}&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
    let marked = call_raw(&store, Method::GET, &marked, &[], "").await;
    assert_eq!(types(&marked.2)[..2], ["ADDED", "BOOKMARK"]);
    let text = String::from_utf8_lossy(&marked.2).into_owned();
    let bookmark: Value = serde_json::from_str(text.lines().nth(1).expect("a bookmark")).unwrap();
    let metadata = bookmark["object"]["metadata"].as_object().expect("metadata");
    assert!(metadata.contains_key("resourceVersion") && !metadata.contains_key("creationTimestamp"));
}

#[tokio::test]
async fn a_table_of_one_object_carries_its_resource_version() {
    let store = cluster();
    let created = call(&store, Method::POST, CMS, &[], &configmap("a")).await.body;
    let accept = [("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    let table = call(&store, Method::GET, &format!("{CMS}/a"), &accept, "").await.body;
    assert_eq!(table["kind"], "Table");
    assert_eq!(
        table["metadata"],
        json!({"resourceVersion": created["metadata"]["resourceVersion"]})
    );
}
