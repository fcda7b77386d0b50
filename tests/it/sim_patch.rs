//! Patches and server-side apply through the running simulated cluster,
//! driven by kube-rs, kubectl 1.37 and raw HTTPS.

use crate::support::{kube_client, raw, spawn_sim, Kubectl};
use http::Method;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

const JSON_PATCH: [(&str, &str); 1] = [("content-type", "application/json-patch+json")];

fn deployment(name: &str, replicas: u32, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]}]}
            }
        }
    })
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": value}})
}

fn api_error(err: kube::Error) -> (u16, String, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.reason, status.message),
        other => panic!("expected an API error, got {other}"),
    }
}

fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").into(),
                        e["operation"].as_str().unwrap_or("").into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_merge_json_and_strategic_patches_change_a_deployment() {
    let sim = spawn_sim().await;
    let api: Api<Deployment> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let created: Deployment = serde_json::from_value(deployment("web", 1, json!({"app": "web"}))).unwrap();
    api.create(&PostParams::default(), &created).await.unwrap();

    let merge = json!({"metadata": {"labels": {"tier": "front", "app": null}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    let labels = patched.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    assert!(!labels.contains_key("app"));

    let ops = json!([
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 2},
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "ana"}
    ]);
    let answer = raw(
        &sim,
        Method::PATCH,
        "/apis/apps/v1/namespaces/default/deployments/web",
        &JSON_PATCH,
        &ops.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["spec"]["replicas"], 2);
    assert_eq!(
        answer.json()["metadata"]["annotations"],
        json!({"example.com/owner": "ana"})
    );

    let strategic = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "web", "env": [{"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "busybox"}
    ]}}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(&strategic))
        .await
        .unwrap();
    let patched = serde_json::to_value(&patched).unwrap();
    let containers = &patched["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["name"], "web");
    assert_eq!(containers[1]["name"], "sidecar");
    assert_eq!(containers.as_array().map(Vec::len), Some(2));
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
        "env merges by name"
    );
    assert_eq!(containers[0]["image"], "nginx:1.27");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_patch_whose_test_fails_is_422_and_stores_nothing() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(configmap("c", "1")).unwrap(),
    )
    .await
    .unwrap();
    let ops = json!([
        {"op": "replace", "path": "/data/k", "value": "2"},
        {"op": "test", "path": "/data/k", "value": "3"}
    ]);
    let answer = raw(
        &sim,
        Method::PATCH,
        "/api/v1/namespaces/default/configmaps/c",
        &JSON_PATCH,
        &ops.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 422);
    let status = answer.json();
    assert_eq!(
        (status["code"].as_u64(), status["reason"].as_str()),
        (Some(422), Some("Invalid"))
    );
    // As kube-apiserver: a generic message and empty details.
    assert_eq!(
        status["message"],
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(status["details"], serde_json::json!({}));
    assert_eq!(api.get("c").await.unwrap().data.unwrap()["k"], "1");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_apply_creates_conflicts_and_force_takes_ownership() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let created = api
        .patch("c", &PatchParams::apply("alice"), &Patch::Apply(configmap("c", "1")))
        .await
        .unwrap();
    let created = serde_json::to_value(&created).unwrap();
    assert_eq!(managers(&created), [("alice".to_string(), "Apply".to_string())]);
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:k": {}}})
    );

    let again = api
        .patch("c", &PatchParams::apply("alice"), &Patch::Apply(configmap("c", "1")))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version.as_deref(),
        created["metadata"]["resourceVersion"].as_str(),
        "a no-op apply keeps the resourceVersion"
    );

    let err = api
        .patch("c", &PatchParams::apply("bob"), &Patch::Apply(configmap("c", "2")))
        .await
        .unwrap_err();
    let (code, reason, message) = api_error(err);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.k"
    );

    let forced = api
        .patch(
            "c",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(configmap("c", "2")),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["k"], "2");
    let forced = serde_json::to_value(&forced).unwrap();
    assert_eq!(
        managers(&forced),
        [("bob".to_string(), "Apply".to_string())],
        "alice owned nothing else"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_an_update_manager_names_it_and_its_api_version() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    api.patch("c", &PatchParams::apply("alice"), &Patch::Apply(configmap("c", "1")))
        .await
        .unwrap();
    let merge = json!({"data": {"k": "edited"}});
    let patched = api
        .patch(
            "c",
            &PatchParams {
                field_manager: Some("editor".into()),
                ..Default::default()
            },
            &Patch::Merge(&merge),
        )
        .await
        .unwrap();
    let patched = serde_json::to_value(&patched).unwrap();
    assert!(managers(&patched).contains(&("editor".to_string(), "Update".to_string())));
    assert!(
        !managers(&patched).contains(&("alice".to_string(), "Apply".to_string())),
        "the edit took alice's only field"
    );
    api.patch(
        "c",
        &PatchParams::apply("carol"),
        &Patch::Apply(configmap("c", "edited")),
    )
    .await
    .unwrap();
    let err = api
        .patch("c", &PatchParams::apply("dave"), &Patch::Apply(configmap("c", "1")))
        .await
        .unwrap_err();
    let (code, _, message) = api_error(err);
    assert_eq!(code, 409);
    assert!(message.starts_with("Apply failed with 2 conflicts: "), "{message}");
    assert!(message.contains("conflicts with \"carol\":\n- .data.k"), "{message}");
    assert!(
        message.contains("conflicts with \"editor\" using v1:\n- .data.k"),
        "{message}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_patch_of_a_custom_resource_is_415_and_merge_patch_works() {
    let sim = spawn_sim().await;
    let path = "/apis/stable.example.com/v1/namespaces/shop/crontabs/nightly-report";
    let body = r#"{"spec":{"replicas":3}}"#;
    let strategic = [("content-type", "application/strategic-merge-patch+json")];
    let answer = raw(&sim, Method::PATCH, path, &strategic, body).await.unwrap();
    assert_eq!(answer.status, 415);
    assert_eq!(answer.json()["reason"], "UnsupportedMediaType");
    let merge = [("content-type", "application/merge-patch+json")];
    let answer = raw(&sim, Method::PATCH, path, &merge, body).await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["spec"]["replicas"], 3);
    assert_eq!(answer.json()["spec"]["cronSpec"], "0 3 * * *");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_supports_merge_json_and_strategic() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let manifest = kubectl.dir().join("web.json");
    std::fs::write(&manifest, deployment("web", 1, json!({"app": "web"})).to_string()).unwrap();
    kubectl.ok(&["create", "-n", "default", "-f", manifest.to_str().unwrap()]);
    kubectl.ok(&[
        "patch",
        "-n",
        "default",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    kubectl.ok(&[
        "patch",
        "-n",
        "default",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/tier","value":"front"}]"#,
    ]);
    kubectl.ok(&[
        "patch",
        "-n",
        "default",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}"#,
    ]);
    let object: Value = serde_json::from_str(&kubectl.ok(&[
        "get",
        "-n",
        "default",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(object["spec"]["replicas"], 3);
    assert_eq!(object["metadata"]["labels"]["tier"], "front");
    let container = &object["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.28");
    assert_eq!(
        container["env"][0]["name"], "A",
        "a strategic patch keeps the rest of the container"
    );
    assert!(managers(&object).contains(&("kubectl-patch".to_string(), "Update".to_string())));
    let stderr = kubectl.fails(&[
        "patch",
        "-n",
        "default",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
    ]);
    assert!(stderr.contains("The request is invalid"), "{stderr}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_server_side_twice_removes_a_dropped_label() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let manifest = kubectl.dir().join("web.json");
    let path = manifest.to_str().unwrap().to_string();
    std::fs::write(
        &manifest,
        deployment("web", 1, json!({"app": "web", "tier": "front"})).to_string(),
    )
    .unwrap();
    let out = kubectl.ok(&["apply", "--server-side", "-n", "default", "-f", &path]);
    assert!(out.contains("deployment.apps/web serverside-applied"), "{out}");
    std::fs::write(&manifest, deployment("web", 1, json!({"app": "web"})).to_string()).unwrap();
    kubectl.ok(&["apply", "--server-side", "-n", "default", "-f", &path]);
    let object: Value = serde_json::from_str(&kubectl.ok(&[
        "get",
        "-n",
        "default",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(object["metadata"]["labels"], json!({"app": "web"}));
    let entry = &object["metadata"]["managedFields"][0];
    assert_eq!(
        (entry["manager"].as_str(), entry["operation"].as_str()),
        (Some("kubectl"), Some("Apply"))
    );
    assert_eq!(entry["fieldsV1"]["f:metadata"], json!({"f:labels": {"f:app": {}}}));
    let container = &entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"];
    assert!(
        container.get(".").is_some() && container.get("f:image").is_some(),
        "{entry}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_conflict_between_two_managers_needs_force_conflicts() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let manifest = kubectl.dir().join("web.json");
    let path = manifest.to_str().unwrap().to_string();
    std::fs::write(&manifest, deployment("web", 1, json!({"app": "web"})).to_string()).unwrap();
    kubectl.ok(&[
        "apply",
        "--server-side",
        "--field-manager=alice",
        "-n",
        "default",
        "-f",
        &path,
    ]);
    std::fs::write(&manifest, deployment("web", 3, json!({"app": "web"})).to_string()).unwrap();
    let stderr = kubectl.fails(&[
        "apply",
        "--server-side",
        "--field-manager=bob",
        "-n",
        "default",
        "-f",
        &path,
    ]);
    assert!(
        stderr.contains("Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"),
        "{stderr}"
    );
    kubectl.ok(&[
        "apply",
        "--server-side",
        "--field-manager=bob",
        "--force-conflicts",
        "-n",
        "default",
        "-f",
        &path,
    ]);
    let object: Value = serde_json::from_str(&kubectl.ok(&[
        "get",
        "-n",
        "default",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(object["spec"]["replicas"], 3);
    let owner_of_replicas: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(owner_of_replicas, ["bob"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_patches_store_no_directives_and_upgrade_to_server_side() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let manifest = kubectl.dir().join("web.json");
    let path = manifest.to_str().unwrap().to_string();
    let mut web = deployment("web", 1, json!({"app": "web"}));
    web["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]);
    std::fs::write(&manifest, web.to_string()).unwrap();
    kubectl.ok(&["apply", "-n", "default", "-f", &path]);
    web["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "log", "image": "busybox:1.37"}, {"name": "web", "image": "nginx:1.27"}]);
    std::fs::write(&manifest, web.to_string()).unwrap();
    kubectl.ok(&["apply", "-n", "default", "-f", &path]);
    let get = [
        "get",
        "-n",
        "default",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ];
    let object: Value = serde_json::from_str(&kubectl.ok(&get)).unwrap();
    assert!(!object.to_string().contains("$setElementOrder"), "{object}");
    let containers = &object["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        (containers[0]["name"].as_str(), containers[1]["name"].as_str()),
        (Some("log"), Some("web"))
    );
    assert_eq!(containers[0]["image"], "busybox:1.37");
    assert!(managers(&object).contains(&("kubectl-client-side-apply".to_string(), "Update".to_string())));

    web["spec"]["replicas"] = json!(2);
    std::fs::write(&manifest, web.to_string()).unwrap();
    kubectl.ok(&["apply", "--server-side", "-n", "default", "-f", &path]);
    let object: Value = serde_json::from_str(&kubectl.ok(&get)).unwrap();
    assert_eq!(object["spec"]["replicas"], 2);
    let last_applied: Value = serde_json::from_str(
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        last_applied["spec"]["replicas"], 2,
        "server-side apply keeps last-applied in step"
    );
    sim.shutdown().await;
}
