use super::*;
use http::HeaderMap;
use http_body_util::BodyExt;

/// The body of a response as JSON.
async fn json_of(response: Response<Body>) -> Value {
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("JSON body")
}

fn accept(value: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT, HeaderValue::from_static(value));
    headers
}

const KUBECTL_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

#[tokio::test]
async fn version_says_1_37() {
    let response = handle("/version", &HeaderMap::new()).expect("served");
    let body = json_of(response).await;
    assert_eq!(body["gitVersion"], "v1.37.0");
    assert_eq!(
        (body["major"].as_str(), body["minor"].as_str()),
        (Some("1"), Some("37"))
    );
    assert!(body["platform"].as_str().is_some_and(|p| p.contains('/')));
}

#[tokio::test]
async fn health_endpoints_answer_ok_as_text() {
    for path in ["/healthz", "/livez", "/readyz"] {
        let response = handle(path, &HeaderMap::new()).expect("served");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/plain; charset=utf-8");
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&bytes[..], b"ok");
    }
}

#[test]
fn unknown_paths_are_not_discovery() {
    for path in [
        "/apis/nope.example.com",
        "/apis/apps/v2",
        "/api/v2",
        "/metrics",
        "/openapi/v3/apis/nope/v1",
    ] {
        assert!(handle(path, &HeaderMap::new()).is_none(), "{path}");
    }
}

#[tokio::test]
async fn kubectl_gets_aggregated_discovery_with_the_type_in_content_type() {
    let response = handle("/apis", &accept(KUBECTL_ACCEPT)).expect("served");
    assert_eq!(response.headers()[header::CONTENT_TYPE], AGGREGATED_CONTENT_TYPE);
    let body = json_of(response).await;
    assert_eq!(body["kind"], "APIGroupDiscoveryList");
    assert_eq!(body["apiVersion"], "apidiscovery.k8s.io/v2");
    let apps = body["items"]
        .as_array()
        .and_then(|items| items.iter().find(|g| g["metadata"]["name"] == "apps"))
        .expect("apps listed");
    let deployments = apps["versions"][0]["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["resource"] == "deployments"))
        .expect("deployments listed");
    assert_eq!(deployments["scope"], "Namespaced");
    assert_eq!(deployments["shortNames"], json!(["deploy"]));
    let scale = deployments["subresources"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["subresource"] == "scale"))
        .expect("scale listed");
    assert_eq!(
        scale["responseKind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
}

#[tokio::test]
async fn aggregated_api_holds_only_the_core_group() {
    let body = json_of(handle("/api", &accept(KUBECTL_ACCEPT)).expect("served")).await;
    let items = body["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert!(items[0]["metadata"].get("name").is_none());
    let pods = items[0]["versions"][0]["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["resource"] == "pods"))
        .expect("pods");
    assert_eq!(pods["responseKind"]["kind"], "Pod");
    assert_eq!(pods["categories"], json!(["all"]));
}

#[tokio::test]
async fn plain_json_clients_get_legacy_discovery() {
    let response = handle("/api", &accept("application/json")).expect("served");
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let body = json_of(response).await;
    assert_eq!(body["kind"], "APIVersions");
    assert_eq!(body["versions"], json!(["v1"]));
    assert!(body["serverAddressByClientCIDRs"][0]["clientCIDR"].is_string());

    let body = json_of(handle("/apis", &HeaderMap::new()).expect("served")).await;
    assert_eq!(body["kind"], "APIGroupList");
    let groups = body["groups"].as_array().expect("groups");
    assert_eq!(groups[0]["name"], "apps", "priority order starts with apps");
    let rbac = groups
        .iter()
        .find(|g| g["name"] == "rbac.authorization.k8s.io")
        .expect("rbac");
    assert_eq!(
        rbac["preferredVersion"],
        json!({"groupVersion": "rbac.authorization.k8s.io/v1", "version": "v1"})
    );
}

#[test]
fn protobuf_only_clients_are_refused_with_406() {
    let response = handle("/apis", &accept("application/vnd.kubernetes.protobuf")).expect("served");
    assert_eq!(response.status(), 406);
    let response = handle(
        "/apis",
        &accept("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
    )
    .expect("served");
    assert_eq!(response.status(), 406);
}

#[tokio::test]
async fn core_resource_list_names_subresources_like_kube_apiserver() {
    let body = json_of(handle("/api/v1", &HeaderMap::new()).expect("served")).await;
    assert_eq!(body["groupVersion"], "v1");
    let resources = body["resources"].as_array().expect("resources");
    let find = |name: &str| {
        resources
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    let log = find("pods/log");
    assert_eq!(
        (log["kind"].as_str(), log["verbs"].clone()),
        (Some("Pod"), json!(["get"]))
    );
    assert!(log.get("group").is_none());
    let eviction = find("pods/eviction");
    assert_eq!(
        (eviction["group"].as_str(), eviction["kind"].as_str()),
        (Some("policy"), Some("Eviction"))
    );
    let pods = find("pods");
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["singularName"], "pod");
    assert_eq!(
        pods["storageVersionHash"], "xPOwRZ+Yhw8=",
        "kube-apiserver's hash for pods"
    );
    let names: Vec<&str> = resources.iter().filter_map(|r| r["name"].as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[tokio::test]
async fn group_and_group_version_documents() {
    let body = json_of(handle("/apis/batch", &HeaderMap::new()).expect("served")).await;
    assert_eq!(body["kind"], "APIGroup");
    assert_eq!(body["versions"][0]["groupVersion"], "batch/v1");
    let body = json_of(handle("/apis/authorization.k8s.io/v1/", &HeaderMap::new()).expect("served")).await;
    let reviews = body["resources"].as_array().expect("resources");
    assert!(reviews
        .iter()
        .all(|r| r["verbs"] == json!(["create"]) && r.get("storageVersionHash").is_none()));
    let local = reviews
        .iter()
        .find(|r| r["name"] == "localsubjectaccessreviews")
        .expect("listed");
    assert_eq!(local["namespaced"], true);
}

#[tokio::test]
async fn openapi_root_lists_every_group_version_with_its_hash() {
    let body = json_of(handle("/openapi/v3", &HeaderMap::new()).expect("served")).await;
    let url = body["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1");
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="));
    assert!(body["paths"]["api/v1"].is_object());
    assert!(body["paths"]["apis/stable.example.com/v1"].is_object());

    let response = handle(url, &HeaderMap::new()).expect("served");
    assert_eq!(response.headers()[header::CACHE_CONTROL], "public, immutable");
    let stale = handle("/openapi/v3/apis/apps/v1?hash=ABC", &HeaderMap::new()).expect("served");
    assert_eq!(stale.status(), 301);
    assert_eq!(stale.headers()[header::LOCATION], url);
}

/// What kubectl's QueryParamVerifierV3 checks: a PATCH operation tagged with
/// the GVK that has a `fieldValidation` parameter.
fn patch_supports(doc: &Value, gvk: Value, param: &str) -> bool {
    doc["paths"].as_object().expect("paths").values().any(|path| {
        let patch = &path["patch"];
        patch["x-kubernetes-group-version-kind"] == gvk
            && patch["parameters"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["name"] == param))
    })
}

#[test]
fn openapi_patch_operations_advertise_field_validation_and_dry_run() {
    let doc = openapi::group_version_document("apps", "v1");
    let gvk = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    assert!(patch_supports(&doc, gvk.clone(), "fieldValidation"));
    assert!(patch_supports(&doc, gvk, "dryRun"));
    let scale = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
    assert!(patch_supports(&doc, scale, "fieldValidation"));
    let doc = openapi::group_version_document("", "v1");
    let pod = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
    assert_eq!(pod["patch"]["operationId"], "patchCoreV1NamespacedPod");
    assert!(pod["patch"]["requestBody"]["content"]["application/apply-patch+yaml"].is_object());
    assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"].is_array());
}

#[test]
fn openapi_schema_names_follow_kube_apiserver() {
    let doc = openapi::group_version_document("rbac.authorization.k8s.io", "v1");
    assert!(doc["components"]["schemas"]["io.k8s.api.rbac.v1.ClusterRole"].is_object());
    let doc = openapi::group_version_document("stable.example.com", "v1");
    assert!(doc["components"]["schemas"]["com.example.stable.v1.CronTab"].is_object());
    assert!(doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"].is_object());
}

#[tokio::test]
async fn a_path_outside_the_api_or_in_an_unknown_group_is_go_s_plain_text_404() {
    for path in [
        "/nope",
        "/healthz/nope",
        "/apis/nope.example.com",
        "/apis/nope.example.com/v1/foos",
    ] {
        let response = not_found(path);
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8",
            "{path}"
        );
        assert_eq!(response.headers()["x-content-type-options"], "nosniff", "{path}");
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&bytes[..], b"404 page not found\n", "{path}");
    }
}

#[tokio::test]
async fn a_missing_path_under_the_api_a_served_group_or_version_is_a_not_found_status() {
    for path in ["/api/v2", "/api/v1/nopes", "/apis/apps/v9", "/version/x"] {
        let response = not_found(path);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json", "{path}");
        let body = json_of(response).await;
        assert_eq!(
            (&body["code"], &body["reason"]),
            (&json!(404), &json!("NotFound")),
            "{path}"
        );
    }
}

#[tokio::test]
async fn only_the_core_resource_list_leaves_out_api_version_and_aggregated_groups_have_no_null_timestamp() {
    let core = json_of(handle("/api/v1", &HeaderMap::new()).expect("served")).await;
    assert_eq!(core["kind"], "APIResourceList");
    assert!(core.get("apiVersion").is_none());
    let apps = json_of(handle("/apis/apps/v1", &HeaderMap::new()).expect("served")).await;
    assert_eq!(apps["apiVersion"], "v1");
    let aggregated = json_of(handle("/apis", &accept(KUBECTL_ACCEPT)).expect("served")).await;
    let metadata = aggregated["items"][0]["metadata"].as_object().expect("metadata");
    assert!(!metadata.contains_key("creationTimestamp"), "{metadata:?}");
}
