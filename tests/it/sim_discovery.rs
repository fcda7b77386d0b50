//! Discovery, OpenAPI and Tables of the simulated cluster, seen by kubectl
//! 1.37 and kube-rs pointed straight at it.

use crate::support::{kube_client, raw, spawn_sim, Kubectl};
use http::Method;
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};

/// The whitespace-separated fields of the output line starting with `first`.
fn line_fields<'a>(output: &'a str, first: &str) -> Vec<&'a str> {
    output
        .lines()
        .find(|line| line.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no line starting with {first} in:\n{output}"))
        .split_whitespace()
        .collect()
}

/// The header line's column names.
fn header(output: &str) -> Vec<&str> {
    output.lines().next().unwrap_or_default().split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_version_shows_the_simulated_server() {
    let sim = spawn_sim().await;
    let out = Kubectl::admin(&sim).ok(&["version", "-o", "json"]);
    let version: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.37.0");
    assert_eq!(version["serverVersion"]["minor"], "37");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_lists_kinds_with_short_names() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let out = kubectl.ok(&["api-resources"]);
    assert_eq!(header(&out), ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]);
    assert_eq!(line_fields(&out, "pods"), ["pods", "po", "v1", "true", "Pod"]);
    assert_eq!(
        line_fields(&out, "deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        line_fields(&out, "crontabs"),
        ["crontabs", "ct", "stable.example.com/v1", "true", "CronTab"]
    );
    assert_eq!(line_fields(&out, "secrets"), ["secrets", "v1", "true", "Secret"]);
    assert_eq!(
        line_fields(&out, "selfsubjectreviews"),
        [
            "selfsubjectreviews",
            "authentication.k8s.io/v1",
            "false",
            "SelfSubjectReview"
        ]
    );
    // kubectl asked for aggregated discovery and did not fall back to
    // fetching every group version.
    let requests = sim.requests();
    assert!(requests.iter().any(|r| r.path == "/apis"));
    assert!(
        !requests.iter().any(|r| r.path == "/apis/apps/v1"),
        "kubectl fell back to legacy discovery"
    );
    let namespaced = kubectl.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(namespaced.lines().any(|l| l == "nodes"));
    assert!(!namespaced.lines().any(|l| l == "pods"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_versions_lists_every_group_version() {
    let sim = spawn_sim().await;
    let out = Kubectl::admin(&sim).ok(&["api-versions"]);
    let versions: Vec<&str> = out.lines().collect();
    for expected in [
        "v1",
        "apps/v1",
        "batch/v1",
        "rbac.authorization.k8s.io/v1",
        "stable.example.com/v1",
        "events.k8s.io/v1",
    ] {
        assert!(versions.contains(&expected), "{expected} missing from {versions:?}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_prints_the_columns_of_a_real_cluster() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let out = kubectl.ok(&["get", "pods", "-n", "shop"]);
    assert_eq!(header(&out), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(
        line_fields(&out, "web-6d4cf56db6-9hq7m")[..4],
        ["web-6d4cf56db6-9hq7m", "1/1", "Running", "0"]
    );
    let restarted = line_fields(&out, "web-6d4cf56db6-4xk2p");
    assert_eq!(restarted[2..4], ["Running", "1"]);
    // The seed's times are resolved once per process, so a test binary that
    // has run for a few minutes sees the restart a few minutes older.
    let minutes: u32 = restarted[4]
        .trim_start_matches('(')
        .trim_end_matches('m')
        .parse()
        .unwrap();
    assert!((120..=130).contains(&minutes), "{restarted:?}");

    let wide = kubectl.ok(&["get", "pods", "-n", "shop", "-o", "wide"]);
    assert_eq!(
        header(&wide),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    let fields = line_fields(&wide, "web-6d4cf56db6-9hq7m");
    assert_eq!(fields[5..], ["10.244.0.13", "sim-node-1", "<none>", "<none>"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_deployments_and_services_together() {
    let sim = spawn_sim().await;
    let out = Kubectl::admin(&sim).ok(&["get", "deploy,svc", "-n", "shop"]);
    assert_eq!(
        line_fields(&out, "deployment.apps/web")[..4],
        ["deployment.apps/web", "2/2", "2", "2"]
    );
    assert_eq!(
        line_fields(&out, "service/web")[..5],
        ["service/web", "ClusterIP", "10.96.120.15", "<none>", "80/TCP"]
    );
    assert!(out.contains("UP-TO-DATE"));
    assert!(out.contains("CLUSTER-IP"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_all_uses_the_all_category() {
    let sim = spawn_sim().await;
    let out = Kubectl::admin(&sim).ok(&["get", "all", "-n", "shop"]);
    for name in [
        "pod/web-6d4cf56db6-9hq7m",
        "service/web",
        "deployment.apps/web",
        "replicaset.apps/web-6d4cf56db6",
    ] {
        assert!(out.contains(name), "{name} missing from:\n{out}");
    }
    assert!(!out.contains("configmap/"), "configmaps are not in the all category");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_the_custom_kind_by_its_short_name() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let out = kubectl.ok(&["get", "ct", "-n", "shop"]);
    assert_eq!(header(&out), ["NAME", "SPEC", "REPLICAS", "AGE"]);
    assert_eq!(
        line_fields(&out, "nightly-report")[..7],
        ["nightly-report", "0", "3", "*", "*", "*", "1"]
    );
    let crds = kubectl.ok(&["get", "crd"]);
    assert_eq!(header(&crds), ["NAME", "CREATED", "AT"]);
    assert!(crds.contains("crontabs.stable.example.com"));
    sim.shutdown().await;
}

/// The seed's `now-<age>` creation times and stable uids survive seeding,
/// so the demo's Age columns look like a cluster that has been running for
/// a while and ownerReferences point at their owners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_objects_keep_their_age_and_uids() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let rs_uid = kubectl.ok(&[
        "get",
        "rs",
        "web-6d4cf56db6",
        "-n",
        "shop",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let owner = kubectl.ok(&[
        "get",
        "pod",
        "web-6d4cf56db6-9hq7m",
        "-n",
        "shop",
        "-o",
        "jsonpath={.metadata.ownerReferences[0].uid}",
    ]);
    assert_eq!(owner, rs_uid);
    let pods = kubectl.ok(&["get", "pods", "-n", "shop"]);
    assert_eq!(line_fields(&pods, "web-6d4cf56db6-9hq7m")[4], "3d4h");
    let nodes = kubectl.ok(&["get", "nodes"]);
    assert_eq!(line_fields(&nodes, "sim-node-1")[3], "30d");
    let crontabs = kubectl.ok(&["get", "ct", "-n", "shop"]);
    assert_eq!(line_fields(&crontabs, "nightly-report")[7], "9d");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_nodes_events_and_secrets() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let nodes = kubectl.ok(&["get", "nodes"]);
    let node = line_fields(&nodes, "sim-node-1");
    assert_eq!(node[..3], ["sim-node-1", "Ready", "control-plane"]);
    assert_eq!(node[4], "v1.37.0");
    let events = kubectl.ok(&["get", "events", "-n", "shop"]);
    assert_eq!(header(&events), ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    assert!(events.contains("pod/web-6d4cf56db6-4xk2p"));
    let secrets = kubectl.ok(&["get", "secrets", "-n", "shop"]);
    assert_eq!(
        line_fields(&secrets, "web-tls")[..3],
        ["web-tls", "kubernetes.io/tls", "2"]
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_openapi_v3_schemas() {
    let sim = spawn_sim().await;
    let out = Kubectl::admin(&sim).ok(&["explain", "deployments"]);
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("GROUP:      apps"), "{out}");
    assert!(out.contains("Deployment enables declarative updates"), "{out}");
    assert!(out.contains("spec"), "{out}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_and_apply_leave_validation_to_the_server() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let manifest = kubectl.dir().join("cm.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\ndata:\n  a: \"1\"\n",
    )
    .expect("manifest written");
    let path = manifest.to_str().expect("UTF-8 path");
    kubectl.ok(&["create", "-f", path]);
    let requests = sim.requests();
    let create = requests
        .iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/configmaps"))
        .expect("create sent");
    assert!(create
        .query
        .as_deref()
        .is_some_and(|q| q.contains("fieldValidation=Strict")));
    assert!(requests.iter().any(|r| r.path == "/openapi/v3"));
    assert!(
        !requests.iter().any(|r| r.path == "/openapi/v2"),
        "validation fell back to OpenAPI v2"
    );

    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\ndata:\n  a: \"2\"\n",
    )
    .expect("manifest written");
    let applied = kubectl.run(&["apply", "-f", path]);
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success(), "{stderr}");
    assert!(!stderr.contains("error calculating patch"), "{stderr}");
    assert_eq!(
        kubectl.ok(&["get", "cm", "flags", "-n", "shop", "-o", "jsonpath={.data.a}"]),
        "2"
    );
    // The patch was computed from kubectl's compiled-in types (see
    // discovery::openapi) and validated by the server.
    let requests = sim.requests();
    let patch = requests
        .iter()
        .find(|r| r.method == "PATCH" && r.path.ends_with("/configmaps/flags"))
        .expect("patch sent");
    assert_eq!(
        patch.header("content-type"),
        Some("application/strategic-merge-patch+json")
    );
    assert!(patch
        .query
        .as_deref()
        .is_some_and(|q| q.contains("fieldValidation=Strict")));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_validation_reaches_the_server_for_the_custom_kind_too() {
    let sim = spawn_sim().await;
    let kubectl = Kubectl::admin(&sim);
    let manifest = kubectl.dir().join("ct.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: hourly\n  namespace: shop\nspec:\n  cronSpec: \"0 * * * *\"\n  replicas: 2\n",
    )
    .expect("manifest written");
    kubectl.ok(&["create", "-f", manifest.to_str().expect("UTF-8 path")]);
    let requests = sim.requests();
    let create = requests
        .iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/crontabs"))
        .expect("create sent");
    assert!(create
        .query
        .as_deref()
        .is_some_and(|q| q.contains("fieldValidation=Strict")));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_endpoints_answer_ok() {
    let sim = spawn_sim().await;
    for path in ["/healthz", "/livez", "/readyz"] {
        let answer = raw(&sim, Method::GET, path, &[], "").await.expect("answered");
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.body.as_deref().ok(), Some(&b"ok"[..]), "{path}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_discovery_finds_groups_and_resources() {
    let sim = spawn_sim().await;
    let client = kube_client(&sim, sim.admin_token()).await;
    for discovery in [
        Discovery::new(client.clone()).run().await.expect("legacy discovery"),
        Discovery::new(client)
            .run_aggregated()
            .await
            .expect("aggregated discovery"),
    ] {
        for group in ["", "apps", "batch", "rbac.authorization.k8s.io", "stable.example.com"] {
            assert!(discovery.has_group(group), "{group} not discovered");
        }
        let (resource, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
            .expect("deployments resolved");
        assert_eq!(resource.plural, "deployments");
        assert_eq!(caps.scope, Scope::Namespaced);
        assert!(caps
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "deployments/scale" || sub.plural == "scale"));
        let (nodes, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Node"))
            .expect("nodes resolved");
        assert_eq!(nodes.plural, "nodes");
        assert_eq!(caps.scope, Scope::Cluster);
        let (crontabs, _) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"))
            .expect("crontabs resolved");
        assert_eq!(crontabs.plural, "crontabs");
    }
    sim.shutdown().await;
}
