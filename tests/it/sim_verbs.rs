//! The simulated cluster's verbs, seen by kube-rs, kubectl 1.37 and raw
//! HTTPS, with no portcullis in between.

use crate::support::{kube_client, negotiated_alpn, raw, spawn_sim, spawn_sim_with, Kubectl};
use futures_util::{StreamExt, TryStreamExt};
use http::{Method, StatusCode};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use portcullis_sim::faults::{FaultAction, FaultRule};
use portcullis_sim::status::Status;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}

/// Write `yaml` into the kubectl's directory; returns the path. kubectl
/// sends objects read from files as JSON (its generators such as
/// `kubectl create configmap` send protobuf, which the simulator does not
/// decode yet).
fn manifest(kubectl: &Kubectl, name: &str, yaml: &str) -> String {
    let path = kubectl.dir().join(name);
    std::fs::write(&path, yaml).expect("the manifest is written");
    path.to_string_lossy().into_owned()
}

const DEPLOYMENT_YAML: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers: [{name: c, image: nginx}]\n";

fn api_code(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_gets_replaces_lists_and_deletes() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let created = api
        .create(&PostParams::default(), &configmap("a", &[("app", "web")]))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    let mut got = api.get("a").await.unwrap();
    assert_eq!(got.metadata.resource_version, created.metadata.resource_version);
    got.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let replaced = api.replace("a", &PostParams::default(), &got).await.unwrap();
    assert_ne!(replaced.metadata.resource_version, created.metadata.resource_version);
    let (code, message) = api_code(api.replace("a", &PostParams::default(), &got).await.unwrap_err());
    assert_eq!(code, 409);
    assert!(message.contains("the object has been modified"), "{message}");
    let (code, message) = api_code(
        api.create(&PostParams::default(), &configmap("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, message.as_str()), (409, "configmaps \"a\" already exists"));
    assert_eq!(
        api.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let (code, message) = api_code(api.get("a").await.unwrap_err());
    assert_eq!((code, message.as_str()), (404, "configmaps \"a\" not found"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_with_limit_and_continue_and_honour_selectors() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    for (name, tier) in [("a", "front"), ("b", "back"), ("c", "front")] {
        api.create(&PostParams::default(), &configmap(name, &[("tier", tier)]))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    let names: Vec<_> = second.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    assert_eq!(names, ["c"]);
    let selected = api
        .list(
            &ListParams::default()
                .labels("tier in (front),tier!=back")
                .fields("metadata.name!=a"),
        )
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 1);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_from_a_version_sends_bookmarks_and_expires_with_410() {
    let sim = spawn_sim_with(|c| c.bookmark_interval = Duration::from_millis(200)).await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let first = api.create(&PostParams::default(), &configmap("a", &[])).await.unwrap();
    let from = first.metadata.resource_version.clone().unwrap();
    api.create(&PostParams::default(), &configmap("b", &[])).await.unwrap();
    let mut events = api
        .watch(&WatchParams::default().timeout(10), &from)
        .await
        .unwrap()
        .boxed();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.metadata.name.as_deref(), Some("b")),
        _ => panic!("expected b to be ADDED"),
    }
    api.delete("a", &DeleteParams::default()).await.unwrap();
    // A bookmark may come first when the delete takes longer than its
    // interval.
    loop {
        match events.try_next().await.unwrap() {
            Some(WatchEvent::Bookmark(_)) => continue,
            Some(WatchEvent::Deleted(cm)) => break assert_eq!(cm.metadata.name.as_deref(), Some("a")),
            other => panic!("expected a to be DELETED: {other:?}"),
        }
    }
    let bookmark = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(bookmark, Some(WatchEvent::Bookmark(_))));
    sim.store().compact();
    let (code, message) = match api.watch(&WatchParams::default(), &from).await {
        Err(err) => api_code(err),
        Ok(_) => panic!("a watch from a compacted version must fail"),
    };
    assert_eq!(code, 410);
    assert!(
        message.starts_with(&format!("too old resource version: {from} (")),
        "{message}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_ends_its_initial_events_with_the_annotated_bookmark() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    api.create(&PostParams::default(), &configmap("a", &[])).await.unwrap();
    let mut events = api
        .watch(&WatchParams::streaming_lists().timeout(5), "")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(events.try_next().await.unwrap(), Some(WatchEvent::Added(_))));
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(b.metadata.annotations["k8s.io/initial-events-end"], "true"),
        _ => panic!("expected the initial-events-end bookmark"),
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_answers_like_a_write_and_stores_nothing() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let answer = api.create(&params, &configmap("dry", &[])).await.unwrap();
    assert!(answer.metadata.uid.is_some());
    assert_eq!(api_code(api.get("dry").await.unwrap_err()).0, 404);
    let kubectl = Kubectl::admin(&sim);
    let cm = manifest(
        &kubectl,
        "dry2.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry2\n",
    );
    kubectl.ok(&["create", "-f", &cm, "--dry-run=server"]);
    assert!(kubectl.fails(&["get", "configmap", "dry2"]).contains("NotFound"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_creates_conflicts_and_forces() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "one"}});
    api.patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&config))
        .await
        .unwrap();
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "two"}});
    let (code, message) = api_code(
        api.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&other))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 409);
    assert!(
        message.starts_with("Apply failed with 1 conflict: conflict with \"alice\""),
        "{message}"
    );
    let forced = api
        .patch("ssa", &PatchParams::apply("bob").force(), &Patch::Apply(&other))
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["k"], "two");
    let managers: Vec<_> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"bob".to_string()), "{managers:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_every_verb_against_the_simulator() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let ns = manifest(
        &kubectl,
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: verbs\n",
    );
    kubectl.ok(&["create", "-f", &ns]);
    let deployment = manifest(&kubectl, "web.yaml", DEPLOYMENT_YAML);
    kubectl.ok(&["-n", "verbs", "apply", "-f", &deployment]);
    let table = kubectl.ok(&["-n", "verbs", "get", "deployments"]);
    assert!(table.contains("NAME") && table.contains("web"), "{table}");
    kubectl.ok(&["-n", "verbs", "scale", "deployment", "web", "--replicas=3"]);
    let replicas = kubectl.ok(&[
        "-n",
        "verbs",
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.replicas}/{.status.readyReplicas}",
    ]);
    assert_eq!(replicas, "3/3");
    kubectl.ok(&["-n", "verbs", "rollout", "status", "deployment/web", "--timeout=10s"]);
    kubectl.ok(&["-n", "verbs", "label", "deployment", "web", "tier=front"]);
    kubectl.ok(&["-n", "verbs", "annotate", "deployment", "web", "note=x"]);
    let manifest = kubectl.dir().join("cm.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  a: \"1\"\n",
    )
    .unwrap();
    let path = manifest.to_str().unwrap();
    kubectl.ok(&["-n", "verbs", "apply", "-f", path]);
    kubectl.ok(&["-n", "verbs", "apply", "-f", path]);
    kubectl.ok(&["-n", "verbs", "apply", "--server-side", "-f", path]);
    let data = kubectl.ok(&["-n", "verbs", "get", "configmap", "conf", "-o", "jsonpath={.data.a}"]);
    assert_eq!(data, "1");
    kubectl.ok(&["-n", "verbs", "delete", "configmap", "conf"]);
    kubectl.ok(&["delete", "namespace", "verbs"]);
    assert!(kubectl
        .fails(&["-n", "verbs", "get", "deployment", "web"])
        .contains("NotFound"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_api_servers_status_messages() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let missing = kubectl.fails(&["get", "configmap", "missing"]);
    assert!(
        missing.contains("Error from server (NotFound): configmaps \"missing\" not found"),
        "{missing}"
    );
    let cm = manifest(
        &kubectl,
        "twice.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\n",
    );
    kubectl.ok(&["create", "-f", &cm]);
    let twice = kubectl.fails(&["create", "-f", &cm]);
    assert!(
        twice.starts_with("Error from server (AlreadyExists): error when creating"),
        "{twice}"
    );
    assert!(twice.contains(": configmaps \"twice\" already exists"), "{twice}");
    let bad = manifest(
        &kubectl,
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
    );
    let invalid = kubectl.fails(&["create", "-f", &bad]);
    assert!(
        invalid.contains("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""),
        "{invalid}"
    );
    let manifest = kubectl.dir().join("typo.yaml");
    std::fs::write(&manifest, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: typo\nspec:\n  foo: 1\n  selector:\n    matchLabels: {app: t}\n  template:\n    metadata:\n      labels: {app: t}\n    spec:\n      containers: [{name: c, image: nginx}]\n").unwrap();
    let strict = kubectl.fails(&["create", "-f", manifest.to_str().unwrap()]);
    assert!(
        strict.contains("strict decoding error: unknown field \"spec.foo\""),
        "{strict}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_answers_are_gzipped_and_protobuf_only_clients_get_406() {
    let sim = spawn_sim().await;
    let api: Api<ConfigMap> = Api::namespaced(kube_client(&sim, sim.admin_token()).await, "default");
    let big = "x".repeat(100 * 1024);
    for name in ["big1", "big2"] {
        let mut cm = configmap(name, &[]);
        cm.data = Some(BTreeMap::from([("big".to_string(), big.clone())]));
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let path = "/api/v1/namespaces/default/configmaps";
    let zipped = raw(&sim, Method::GET, path, &[("accept-encoding", "gzip")], "")
        .await
        .unwrap();
    assert_eq!(zipped.headers["content-encoding"], "gzip");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&zipped.body.unwrap()[..])
        .read_to_string(&mut text)
        .unwrap();
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let plain = raw(&sim, Method::GET, path, &[], "").await.unwrap();
    assert!(plain.headers.get("content-encoding").is_none());
    let protobuf = raw(
        &sim,
        Method::GET,
        path,
        &[("accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await
    .unwrap();
    assert_eq!(protobuf.status, StatusCode::NOT_ACCEPTABLE);
    let status: Status = serde_json::from_value(protobuf.json()).unwrap();
    assert_eq!((status.code, status.reason.as_str()), (406, "NotAcceptable"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_id_is_echoed_and_every_request_is_recorded() {
    let sim = spawn_sim().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let given = raw(&sim, Method::GET, path, &[("audit-id", "abc-123")], "")
        .await
        .unwrap();
    assert_eq!(given.headers["audit-id"], "abc-123");
    let minted = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/configmaps?limit=1",
        &[],
        "",
    )
    .await
    .unwrap();
    let minted_id = minted.headers["audit-id"].to_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&minted_id).is_ok(), "{minted_id}");
    let refused = raw(&sim, Method::GET, path, &[("authorization", "Bearer wrong")], "")
        .await
        .unwrap();
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let requests = sim.requests();
    let first = requests
        .iter()
        .find(|r| r.audit_id == "abc-123")
        .expect("the request is recorded");
    assert_eq!(
        (
            first.method.as_str(),
            first.path.as_str(),
            first.verb.as_str(),
            first.code
        ),
        ("GET", path, "list", 200)
    );
    assert_eq!(first.user.as_ref().map(|u| u.name.as_str()), Some("kubernetes-admin"));
    assert_eq!(first.header("audit-id"), Some("abc-123"));
    let second = requests.iter().find(|r| r.audit_id == minted_id).unwrap();
    assert_eq!(second.query.as_deref(), Some("limit=1"));
    let third = requests.last().unwrap();
    assert_eq!((third.code, third.user.is_none()), (401, true));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_is_recorded_with_the_authenticated_user() {
    let sim = spawn_sim().await;
    let answer = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/configmaps",
        &[("impersonate-user", "user:ana"), ("impersonate-group", "devs")],
        "",
    )
    .await
    .unwrap();
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let status: Status = serde_json::from_value(answer.json()).unwrap();
    assert!(
        status
            .message
            .contains("User \"user:ana\" cannot list resource \"configmaps\""),
        "{}",
        status.message
    );
    let recorded = sim.requests().pop().unwrap();
    assert_eq!(recorded.user.unwrap().name, "kubernetes-admin");
    let impersonated = recorded.impersonated.unwrap();
    assert_eq!(impersonated.name, "user:ana");
    assert!(impersonated.groups.contains(&"devs".to_string()));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_answer_statuses_bytes_broken_bodies_and_closed_connections() {
    let sim = spawn_sim().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let mut once = FaultRule::new(path, FaultAction::Status(Status::unavailable("try later")));
    once.times = Some(1);
    sim.faults().add(once);
    let failed = raw(&sim, Method::GET, path, &[], "").await.unwrap();
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(failed.json()["message"], "try later");
    assert_eq!(
        raw(&sim, Method::GET, path, &[], "").await.unwrap().status,
        StatusCode::OK
    );

    let id = sim.faults().add(FaultRule::new(
        path,
        FaultAction::Body {
            content_type: "application/json".into(),
            body: "{not json".into(),
            code: 200,
        },
    ));
    assert_eq!(
        raw(&sim, Method::GET, path, &[], "").await.unwrap().body.unwrap(),
        "{not json"
    );
    sim.faults().remove(id);

    sim.faults()
        .add(FaultRule::new(path, FaultAction::CutBody { after_bytes: 10 }));
    let cut = raw(&sim, Method::GET, path, &[], "").await;
    assert!(cut.map(|a| a.body.is_err()).unwrap_or(true), "the body should break");
    sim.faults().clear();

    sim.faults().add(FaultRule::new(path, FaultAction::CloseConnection));
    assert!(raw(&sim, Method::GET, path, &[], "").await.is_err());
    sim.faults().clear();

    sim.faults()
        .add(FaultRule::new(path, FaultAction::Delay(Duration::from_millis(300))));
    let started = std::time::Instant::now();
    assert_eq!(
        raw(&sim, Method::GET, path, &[], "").await.unwrap().status,
        StatusCode::OK
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_report_ready_replicas_and_scale_through_the_subresource() {
    let sim = spawn_sim().await;
    let client = kube_client(&sim, sim.admin_token()).await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    })).unwrap();
    let created = api.create(&PostParams::default(), &deployment).await.unwrap();
    assert_eq!(created.status.unwrap().ready_replicas, Some(2));
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    let scaled = api.get("web").await.unwrap();
    assert_eq!(scaled.spec.replicas, Some(4));
    assert_eq!(scaled.status.unwrap().available_replicas, Some(4));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_negotiates_h2_and_stops_listening_on_shutdown() {
    let sim = spawn_sim().await;
    let addr = sim.addr();
    let answer = raw(&sim, Method::GET, "/api/v1/namespaces", &[], "").await.unwrap();
    assert_eq!(answer.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(
        negotiated_alpn(&sim, &[b"h2", b"http/1.1"]).await.as_deref(),
        Some(&b"h2"[..])
    );
    let client = kube_client(&sim, sim.admin_token()).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let names: Vec<_> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(
        names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()),
        "{names:?}"
    );
    sim.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
