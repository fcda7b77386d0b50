//! Authentication, impersonation, RBAC and access reviews of the simulated
//! cluster, seen through kubectl 1.37 and kube-rs talking to it directly.

use crate::support::{self, Kubectl};
use http::Method;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, ListParams, PostParams};

const PORTCULLIS: &str = "system:serviceaccount:portcullis:portcullis";

/// The Status of a failed kube-rs call.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Create `value` (a typed object in JSON form) through `api` as it is.
async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).expect("object");
    api.create(&PostParams::default(), &object).await.expect("create")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_whoami_shows_the_impersonated_user() {
    let sim = support::spawn_sim().await;
    let kubectl = Kubectl::new(&sim, sim.admin_token());
    let me = kubectl.ok(&["auth", "whoami"]);
    assert!(me.contains("kubernetes-admin"), "{me}");
    assert!(me.contains("[system:masters system:authenticated]"), "{me}");

    let ana = kubectl.ok(&[
        "auth",
        "whoami",
        "--as",
        "user:ana",
        "--as-group",
        "Domain Admins",
        "--as-uid",
        "u-1",
    ]);
    assert!(ana.contains("user:ana"), "{ana}");
    assert!(ana.contains("u-1"), "{ana}");
    // The group arrives verbatim, and system:authenticated is appended.
    assert!(ana.contains("[Domain Admins system:authenticated]"), "{ana}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_follows_role_bindings() {
    let sim = support::spawn_sim().await;
    let kubectl = Kubectl::new(&sim, sim.admin_token());
    let can_i = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--as", "user:ana"]);
        let out = kubectl.run(&all);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    };
    assert_eq!(can_i(&["list", "pods", "-n", "default"]), (false, "no".to_string()));

    let bindings: Api<RoleBinding> = Api::namespaced(support::kube_client(&sim, sim.admin_token()).await, "default");
    create(
        &bindings,
        serde_json::json!({
            "metadata": {"name": "ana-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "user:ana"}],
        }),
    )
    .await;

    assert_eq!(can_i(&["list", "pods", "-n", "default"]), (true, "yes".to_string()));
    assert_eq!(
        can_i(&["get", "pods", "--subresource", "log", "-n", "default"]),
        (true, "yes".to_string())
    );
    assert_eq!(can_i(&["get", "secrets", "-n", "default"]), (false, "no".to_string()));
    assert_eq!(can_i(&["list", "pods", "-n", "kube-system"]), (false, "no".to_string()));
    assert_eq!(can_i(&["get", "/version"]), (true, "yes".to_string()));
    assert_eq!(can_i(&["get", "/metrics"]), (false, "no".to_string()));

    let (ok, list) = can_i(&["--list", "-n", "default"]);
    assert!(ok, "{list}");
    assert!(
        list.contains("Resources") && list.contains("Non-Resource URLs"),
        "{list}"
    );
    assert!(list.contains("deployments.apps"), "{list}");
    assert!(list.contains("selfsubjectaccessreviews.authorization.k8s.io"), "{list}");
    assert!(list.contains("/version"), "{list}");
    assert!(!list.lines().any(|l| l.starts_with("secrets ")), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_rights_gets_the_api_servers_exact_403() {
    let sim = support::spawn_sim().await;
    let kubectl = Kubectl::new(&sim, sim.portcullis_token());
    let refused = |args: &[&str]| kubectl.fails(args).trim().to_string();
    let user = format!("User \"{PORTCULLIS}\"");
    assert_eq!(
        refused(&["get", "pods", "-n", "default"]),
        format!("Error from server (Forbidden): pods is forbidden: {user} cannot list resource \"pods\" in API group \"\" in the namespace \"default\"")
    );
    assert_eq!(
        refused(&["get", "configmap", "x", "-n", "default"]),
        format!("Error from server (Forbidden): configmaps \"x\" is forbidden: {user} cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\"")
    );
    assert_eq!(
        refused(&["get", "nodes"]),
        format!("Error from server (Forbidden): nodes is forbidden: {user} cannot list resource \"nodes\" in API group \"\" at the cluster scope")
    );
    assert_eq!(
        refused(&["get", "--raw", "/metrics"]),
        format!("Error from server (Forbidden): forbidden: {user} cannot get path \"/metrics\"")
    );

    let client = support::kube_client(&sim, sim.portcullis_token()).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let status = api_error(deployments.get_scale("web").await);
    assert_eq!(
        status.message,
        format!("deployments.apps \"web\" is forbidden: {user} cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"default\"")
    );
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.group.as_str(), details.kind.as_str()),
        ("web", "apps", "deployments")
    );
    let pods: Api<Pod> = Api::all(client);
    let status = api_error(pods.list(&ListParams::default()).await);
    assert!(
        status
            .message
            .ends_with("cannot list resource \"pods\" in API group \"\" at the cluster scope"),
        "{}",
        status.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_token_is_401_unauthorized() {
    let sim = support::spawn_sim().await;
    let out = Kubectl::new(&sim, "not-a-token").run(&["get", "pods"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // kubectl's own wording for a 401 on discovery, as against a real cluster.
    assert!(
        stderr.ends_with(
            "error: You must be logged in to the server (the server has asked for the client to provide credentials)\n"
        ),
        "{stderr}"
    );

    let pods: Api<Pod> = Api::namespaced(support::kube_client(&sim, "not-a-token").await, "default");
    let status = api_error(pods.list(&ListParams::default()).await);
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portcullis_may_impersonate_only_once_a_cluster_role_grants_it() {
    // The demo cluster grants portcullis impersonation from the start: drop
    // that grant to watch it being made.
    let sim = support::spawn_sim_with(|config| {
        config
            .objects
            .retain(|o| o["metadata"]["name"] != "portcullis-impersonator");
    })
    .await;
    let kubectl = Kubectl::new(&sim, sim.portcullis_token());
    // The last line kubectl prints when a request fails.
    let refusal = |args: &[&str]| kubectl.fails(args).trim_end().lines().last().unwrap_or("").to_string();
    assert_eq!(
        refusal(&["get", "--raw", "/api", "--as", "user:ana"]),
        format!("Error from server (Forbidden): users \"user:ana\" is forbidden: User \"{PORTCULLIS}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope")
    );
    // `auth whoami` words any refusal its own way.
    assert!(kubectl
        .fails(&["auth", "whoami", "--as", "user:ana"])
        .contains("do not have permission"));

    let admin = support::kube_client(&sim, sim.admin_token()).await;
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        serde_json::json!({
            "metadata": {"name": "portcullis-impersonator"},
            "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}],
        }),
    )
    .await;
    create(&Api::<ClusterRoleBinding>::all(admin), serde_json::json!({
        "metadata": {"name": "portcullis-impersonator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "portcullis-impersonator"},
        "subjects": [{"kind": "ServiceAccount", "name": "portcullis", "namespace": "portcullis"}],
    }))
    .await;

    let ana = kubectl.ok(&["auth", "whoami", "--as", "user:ana", "--as-group", "portcullis:grant:1"]);
    assert!(
        ana.contains("user:ana") && ana.contains("[portcullis:grant:1 system:authenticated]"),
        "{ana}"
    );
    // A uid was not granted.
    assert_eq!(
        refusal(&["get", "--raw", "/api", "--as", "user:ana", "--as-uid", "u-1"]),
        format!("Error from server (Forbidden): uids.authentication.k8s.io \"u-1\" is forbidden: User \"{PORTCULLIS}\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope")
    );
    // The impersonated user has no rights of its own.
    assert_eq!(
        refusal(&["get", "pods", "-n", "default", "--as", "user:ana"]),
        "Error from server (Forbidden): pods is forbidden: User \"user:ana\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonating_a_group_without_a_user_is_400() {
    let sim = support::spawn_sim().await;
    let answer = support::raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces",
        &[("Impersonate-Group", "devs")],
        "",
    )
    .await
    .expect("an answer");
    assert_eq!(answer.status, 400);
    let status = answer.json();
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "requested [{Group  devs    }] without impersonating a user"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_headers_arrive_verbatim_and_extra_keys_are_percent_decoded() {
    let sim = support::spawn_sim().await;
    let headers = [
        ("IMPERSONATE-USER", "user:ana"),
        ("Impersonate-Group", "Domain Admins"),
        ("impersonate-group", "portcullis:grant:7"),
        ("Impersonate-Extra-Example.com%2Fteam", "a%41b"),
        ("Content-Type", "application/json"),
    ];
    let body = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let answer = support::raw(
        &sim,
        Method::POST,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &headers,
        body,
    )
    .await
    .expect("an answer");
    assert_eq!(answer.status, 201);
    assert_eq!(
        answer.json()["status"]["userInfo"],
        serde_json::json!({
            "username": "user:ana",
            "groups": ["Domain Admins", "portcullis:grant:7", "system:authenticated"],
            "extra": {"example.com/team": ["a%41b"]},
        })
    );
}
