//! kubectl 1.37's typed clients send protobuf request bodies
//! (`application/vnd.kubernetes.protobuf`): the simulated cluster decodes
//! them and stores what kubectl meant, as kube-apiserver does.

use crate::support::{raw, spawn_sim, Kubectl};
use base64::Engine;
use http::{Method, StatusCode};
use portcullis_sim::Sim;
use serde_json::{json, Value};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// `kubectl get <what> -o json`, parsed.
fn get(kubectl: &Kubectl, what: &[&str]) -> Value {
    let out = kubectl.ok(&[&["get"], what, &["-o", "json"]].concat());
    serde_json::from_str(&out).expect("kubectl prints JSON")
}

/// Did a request with a protobuf body reach `path` with `method`?
fn sent_as_protobuf(sim: &Sim, method: &str, path: &str) -> bool {
    sim.requests().iter().any(|r| {
        r.method == method
            && r.path == path
            && r.headers
                .iter()
                .any(|(name, value)| name == "content-type" && value == PROTOBUF)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_configmaps_secrets_namespaces_and_service_accounts_over_protobuf() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    kubectl.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
        "--from-literal=level=3",
    ]);
    kubectl.ok(&["create", "secret", "generic", "creds", "--from-literal=password=s3cret"]);
    kubectl.ok(&["create", "namespace", "staging"]);
    kubectl.ok(&["create", "serviceaccount", "robot", "-n", "staging"]);

    assert!(sent_as_protobuf(&sim, "POST", "/api/v1/namespaces/default/configmaps"));
    let configmap = get(&kubectl, &["configmap", "settings"]);
    assert_eq!(configmap["data"], json!({"mode": "fast", "level": "3"}));
    let secret = get(&kubectl, &["secret", "creds"]);
    assert_eq!(secret["data"], json!({"password": "czNjcmV0"}));
    assert_eq!(
        get(&kubectl, &["namespace", "staging"])["status"]["phase"],
        json!("Active")
    );
    assert_eq!(
        get(&kubectl, &["serviceaccount", "robot", "-n", "staging"])["metadata"]["namespace"],
        json!("staging")
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_deployment_a_service_and_a_job_with_their_specs() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    kubectl.ok(&[
        "create",
        "deployment",
        "shop",
        "--image=nginx:1.27",
        "--port=80",
        "--replicas=2",
    ]);
    kubectl.ok(&["create", "service", "clusterip", "shop", "--tcp=80:8080"]);
    kubectl.ok(&["create", "job", "once", "--image=busybox", "--", "echo", "hi"]);

    assert!(sent_as_protobuf(
        &sim,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments"
    ));
    let deployment = get(&kubectl, &["deployment", "shop"]);
    assert_eq!(deployment["spec"]["replicas"], json!(2));
    assert_eq!(deployment["spec"]["selector"], json!({"matchLabels": {"app": "shop"}}));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        (&container["name"], &container["image"], &container["ports"]),
        // kube-apiserver defaults a container port's protocol.
        (
            &json!("nginx"),
            &json!("nginx:1.27"),
            &json!([{"containerPort": 80, "protocol": "TCP"}])
        )
    );
    let service = get(&kubectl, &["service", "shop"]);
    assert_eq!(service["spec"]["type"], json!("ClusterIP"));
    assert_eq!(service["spec"]["selector"], json!({"app": "shop"}));
    assert_eq!(service["spec"]["ports"][0]["port"], json!(80));
    assert_eq!(service["spec"]["ports"][0]["targetPort"], json!(8080));
    let job = get(&kubectl, &["job", "once"]);
    let pod_spec = &job["spec"]["template"]["spec"];
    assert_eq!(pod_spec["containers"][0]["command"], json!(["echo", "hi"]));
    assert_eq!(pod_spec["restartPolicy"], json!("Never"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_role_and_a_binding_that_grant_access() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    kubectl.ok(&["create", "role", "pod-reader", "--verb=get,list", "--resource=pods"]);
    kubectl.ok(&["create", "rolebinding", "ana-reads", "--role=pod-reader", "--user=ana"]);

    assert_eq!(
        get(&kubectl, &["role", "pod-reader"])["rules"],
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    );
    let binding = get(&kubectl, &["rolebinding", "ana-reads"]);
    assert_eq!(
        binding["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ana"}])
    );
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"})
    );
    let can = kubectl.run(&["auth", "can-i", "list", "pods", "--as=ana"]);
    assert_eq!(String::from_utf8_lossy(&can.stdout).trim(), "yes");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_gets_a_token_for_the_audience_and_duration_asked() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let token = kubectl.ok(&["create", "token", "default", "--audience=shop", "--duration=20m"]);
    assert!(sent_as_protobuf(
        &sim,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/default/token"
    ));
    let payload = token.trim().split('.').nth(1).expect("a JWT");
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("base64url claims"),
    )
    .expect("JSON claims");
    assert_eq!(claims["aud"], json!(["shop"]));
    assert_eq!(
        claims["exp"].as_i64().zip(claims["iat"].as_i64()).map(|(e, i)| e - i),
        Some(1200)
    );
    assert_eq!(claims["sub"], json!("system:serviceaccount:default:default"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run_creates_the_pod_it_describes() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    kubectl.ok(&[
        "run",
        "probe",
        "--image=busybox",
        "--env=MODE=test",
        "--labels=app=probe",
        "--",
        "sleep",
        "60",
    ]);
    let pod = get(&kubectl, &["pod", "probe"]);
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], json!("busybox"));
    assert_eq!(container["args"], json!(["sleep", "60"]));
    assert_eq!(container["env"], json!([{"name": "MODE", "value": "test"}]));
    assert_eq!(pod["metadata"]["labels"], json!({"app": "probe"}));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_whoami_and_can_i_are_answered_from_protobuf_reviews() {
    let sim = spawn_sim().await;
    let admin = Kubectl::admin(&sim);
    let whoami = admin.ok(&["auth", "whoami", "-o", "json"]);
    let review: Value = serde_json::from_str(&whoami).expect("a SelfSubjectReview");
    assert_eq!(review["status"]["userInfo"]["username"], json!("kubernetes-admin"));
    assert!(sent_as_protobuf(
        &sim,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    ));

    assert_eq!(admin.ok(&["auth", "can-i", "delete", "nodes"]).trim(), "yes");
    let restricted = Kubectl::new(&sim, sim.portcullis_token());
    let refused = restricted.run(&["auth", "can-i", "delete", "nodes"]);
    assert!(!refused.status.success());
    assert_eq!(String::from_utf8_lossy(&refused.stdout).trim(), "no");
    assert!(sent_as_protobuf(
        &sim,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    ));

    let rules = admin.ok(&["auth", "can-i", "--list", "-n", "default"]);
    assert!(rules.lines().any(|l| l.starts_with("*.* ")), "{rules}");
    assert!(sent_as_protobuf(
        &sim,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    ));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_delete_options_carry_preconditions() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    kubectl.ok(&["create", "configmap", "guarded"]);
    // DeleteOptions{preconditions{uid: "not-the-uid"}} in apps/v1, as a typed
    // client-go client would send it (every byte is ASCII).
    let body = "k8s\0\n\x18\n\x07apps/v1\x12\rDeleteOptions\x12\x0f\x12\r\n\x0bnot-the-uid";
    let answer = raw(
        &sim,
        Method::DELETE,
        "/api/v1/namespaces/default/configmaps/guarded",
        &[("content-type", PROTOBUF)],
        body,
    )
    .await
    .expect("an answer");
    assert_eq!(answer.status, StatusCode::CONFLICT);
    assert!(
        answer.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("the UID in the precondition (not-the-uid) does not match the UID in record (")),
        "{}",
        answer.json()
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_protobuf_body_is_a_bad_request_and_custom_resources_refuse_protobuf() {
    let sim = spawn_sim().await;
    let post = |path: &'static str| raw(&sim, Method::POST, path, &[("content-type", PROTOBUF)], "k8s\0garbage");
    let malformed = post("/api/v1/namespaces/default/configmaps").await.expect("an answer");
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        malformed.json()["message"],
        json!(
            "the object provided is unrecognized (must be of type ConfigMap): proto: wrong wireType = 7 for field 12"
        )
    );
    let custom = post("/apis/stable.example.com/v1/namespaces/default/crontabs")
        .await
        .expect("an answer");
    assert_eq!(custom.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    sim.shutdown().await;
}
