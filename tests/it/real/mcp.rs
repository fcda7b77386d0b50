//! The MCP tools through portcullis against the real kube-apiserver, with
//! the rmcp client and the official Python SDK: reads, writes (there is no
//! scheduler or kubelet, so a Deployment's spec changes and no pod ever
//! runs), the API server's own errors with their Status fields in
//! `structuredContent`, and a held write run once after approval.

use crate::approvals_mcp::careful_agent_in;
use crate::harness::Portcullis;
use crate::mcp::{connect, fails, ok, stateless};
use portcullis::approvals::decide;
use serde_json::{json, Value};
use std::time::Duration;

const C: &str = "real";

/// A Deployment `web` (one replica) and an Event about it, made by the
/// admin in `ns`.
fn deployment_and_event(ns: &str) {
    let cluster = super::shared();
    cluster
        .admin_apply(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: registry.example/web:1\n"
        ))
        .unwrap();
    cluster
        .admin_apply(&format!(
            "apiVersion: v1\nkind: Event\nmetadata:\n  name: web.probed\n  namespace: {ns}\ninvolvedObject:\n  apiVersion: apps/v1\n  kind: Deployment\n  name: web\n  namespace: {ns}\nreason: Probed\nmessage: made by the real-cluster test\ntype: Normal\nsource:\n  component: real-cluster-test\n"
        ))
        .unwrap();
}

/// portcullis in front of the real cluster, a namespace with `web` and its
/// Event, and an agent of ana given her `developer` grant there. Returns
/// the agent's token.
async fn agent_beside_a_deployment(prefix: &str) -> (Portcullis, String, String) {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace(prefix).unwrap();
    deployment_and_event(&ns);
    let (_, grants) = env.person_with_ttl("ana", &[("developer", Some(&ns))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    (env, ns, agent)
}

/// The admin's view of an object, straight from the API server.
fn admin_get(kind: &str, name: &str, ns: &str) -> Value {
    serde_json::from_str(
        &super::shared()
            .admin(&["get", kind, name, "-n", ns, "-o", "json"])
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_tools_list_get_and_show_events_from_the_real_api_server() {
    let (env, ns, agent) = agent_beside_a_deployment("mcp-reads").await;
    let client = connect(&env, &agent, stateless()).await;
    let listed = ok(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "deploy", "namespace": ns}),
    )
    .await;
    // The columns are the real API server's Table for Deployments.
    let header = listed.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("NAME") && header.contains("UP-TO-DATE") && header.contains("AVAILABLE"),
        "{listed}"
    );
    assert!(listed.lines().any(|l| l.starts_with("web ")), "{listed}");
    let got = ok(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "deployment", "name": "web", "namespace": ns}),
    )
    .await;
    assert!(got.contains("kind: Deployment") && got.contains("replicas: 1"), "{got}");
    assert!(!got.contains("managedFields"), "{got}");
    // Defaults only the real API server fills in.
    assert!(got.contains("terminationMessagePath: /dev/termination-log"), "{got}");
    let events = ok(
        &client,
        "get_events",
        json!({"cluster": C, "namespace": ns, "kind": "Deployment", "name": "web"}),
    )
    .await;
    assert!(
        events.contains("Probed") && events.contains("made by the real-cluster test"),
        "{events}"
    );
    let none = ok(
        &client,
        "get_events",
        json!({"cluster": C, "namespace": ns, "kind": "Deployment", "name": "other"}),
    )
    .await;
    assert!(
        !none.contains("Probed"),
        "the field selector reached the API server: {none}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_tools_apply_scale_restart_and_delete_on_the_real_api_server_as_the_person() {
    let (env, ns, agent) = agent_beside_a_deployment("mcp-writes").await;
    let client = connect(&env, &agent, stateless()).await;
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: {ns}\ndata:\n  dark: \"true\"\n"
    );
    let applied = ok(&client, "apply", json!({"cluster": C, "manifest": manifest})).await;
    assert!(
        applied.starts_with(&format!("applied configmaps/flags in {ns}\n")),
        "{applied}"
    );
    assert_eq!(admin_get("configmap", "flags", &ns)["data"]["dark"], "true");
    let listed = ok(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "cm", "namespace": ns}),
    )
    .await;
    assert!(listed.lines().any(|l| l.starts_with("flags ")), "{listed}");

    let scale = json!({"cluster": C, "kind": "deployment", "name": "web", "namespace": ns, "replicas": 3});
    assert_eq!(
        ok(&client, "scale", scale).await,
        format!("scaled deployments.apps/web in {ns} to 3 replicas\n")
    );
    assert_eq!(admin_get("deployment", "web", &ns)["spec"]["replicas"], 3);
    let restart = json!({"cluster": C, "kind": "deploy", "name": "web", "namespace": ns});
    let restarted = ok(&client, "rollout_restart", restart).await;
    assert!(
        restarted.starts_with(&format!("restarted deployments.apps/web in {ns}")),
        "{restarted}"
    );
    let template = &admin_get("deployment", "web", &ns)["spec"]["template"]["metadata"];
    assert!(
        template["annotations"]["kubectl.kubernetes.io/restartedAt"].is_string(),
        "{template}"
    );

    let delete = json!({"cluster": C, "kind": "cm", "name": "flags", "namespace": ns});
    assert_eq!(
        ok(&client, "delete_resource", delete).await,
        format!("deleted configmaps/flags in {ns}\n")
    );
    assert!(super::shared()
        .admin(&["get", "configmap", "flags", "-n", &ns])
        .is_err());

    assert_written_by_ana_for_her_agent(&env, &ns, 4).await;
    env.stop().await;
}

/// The API server logged `count` writes (patch, delete) to ConfigMaps and
/// Deployments in `ns`, each as ana with her agent's session.
async fn assert_written_by_ana_for_her_agent(env: &Portcullis, ns: &str, count: usize) {
    let session = env.store.list_agents().unwrap().pop().unwrap().id;
    let writes = crate::support::eventually("the writes in the API server's audit log", async || {
        let writes: Vec<Value> = super::shared()
            .audit_events()
            .into_iter()
            .filter(|e| e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == ns)
            .filter(|e| matches!(e["verb"].as_str(), Some("patch" | "delete")))
            .filter(|e| matches!(e["objectRef"]["resource"].as_str(), Some("configmaps" | "deployments")))
            .collect();
        (writes.len() >= count).then_some(writes)
    })
    .await;
    assert_eq!(writes.len(), count);
    for write in &writes {
        let user = &write["impersonatedUser"];
        assert_eq!(user["username"], "user:ana", "{write}");
        assert_eq!(
            user["extra"]["portcullis.dev/agent-session"],
            json!([session]),
            "{write}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_422_from_the_real_api_server_comes_back_with_its_status_fields_in_structured_content() {
    let (env, ns, agent) = agent_beside_a_deployment("mcp-errors").await;
    let client = connect(&env, &agent, stateless()).await;
    let invalid = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: {ns}\ndata:\n  \"bad key!\": x\n"
    );
    let (text, structured) = fails(&client, "apply", json!({"cluster": C, "manifest": invalid})).await;
    assert!(
        text.starts_with("422 Invalid: ConfigMap \"bad\" is invalid: data[bad key!]: Invalid value"),
        "{text}"
    );
    assert_eq!(
        structured,
        json!({"code": 422, "reason": "Invalid", "kind": "ConfigMap", "name": "bad", "namespace": ns,
            "field": "data[bad key!]", "fieldReason": "FieldValueInvalid"})
    );
    // A Deployment's selector is immutable; force takes the field over first.
    let selector = format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec: {{selector: {{matchLabels: {{app: other}}}}}}\n");
    let (text, structured) = fails(
        &client,
        "apply",
        json!({"cluster": C, "manifest": selector, "force": true}),
    )
    .await;
    assert!(
        text.starts_with("422 Invalid: Deployment.apps \"web\" is invalid"),
        "{text}"
    );
    assert_eq!(
        (&structured["code"], &structured["kind"]),
        (&json!(422), &json!("Deployment")),
        "{structured}"
    );
    assert_eq!(structured["name"], "web");
    assert!(
        structured["field"].as_str().unwrap_or_default().starts_with("spec."),
        "{structured}"
    );

    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_api_servers_refusals_come_back_with_their_status_fields_in_structured_content() {
    let (env, ns, agent) = agent_beside_a_deployment("mcp-refusals").await;
    let client = connect(&env, &agent, stateless()).await;
    let other = super::shared().namespace("mcp-elsewhere").unwrap();
    let (text, structured) = fails(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "pods", "namespace": other}),
    )
    .await;
    let refusal = format!("403 Forbidden: pods is forbidden: User \"user:ana\" cannot list resource \"pods\" in API group \"\" in the namespace \"{other}\"");
    assert!(text.starts_with(&refusal), "{text}");
    assert_eq!(
        structured,
        json!({"code": 403, "reason": "Forbidden", "kind": "pods", "namespace": other})
    );
    let (text, structured) = fails(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "cm", "name": "nope", "namespace": ns}),
    )
    .await;
    assert!(
        text.starts_with("404 NotFound: configmaps \"nope\" not found"),
        "{text}"
    );
    assert_eq!(
        structured,
        json!({"code": 404, "reason": "NotFound", "kind": "configmaps", "name": "nope", "namespace": ns})
    );
    env.stop().await;
}

/// Call write `tool` held for approval: its approval id.
async fn pending(client: &crate::mcp::Client, tool: &str, args: Value) -> String {
    let (text, structured) = fails(client, tool, args).await;
    assert_eq!(structured["code"], "agent.approval_pending", "{text}");
    structured["params"]["approval_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_scale_and_delete_tools_run_once_on_the_real_api_server_after_approval() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("mcp-held").unwrap();
    deployment_and_event(&ns);
    super::shared()
        .admin(&["create", "configmap", "flags", "-n", &ns])
        .unwrap();
    let client = connect(&env, &careful_agent_in(&env, &ns), stateless()).await;
    let scale = json!({"cluster": C, "kind": "deployment", "name": "web", "namespace": ns, "replicas": 2});
    let delete = json!({"cluster": C, "kind": "cm", "name": "flags", "namespace": ns});
    let scaling = pending(&client, "scale", scale.clone()).await;
    let deleting = pending(&client, "delete_resource", delete.clone()).await;
    assert_eq!(
        admin_get("deployment", "web", &ns)["spec"]["replicas"],
        1,
        "only the dry run ran"
    );
    assert!(super::shared().admin(&["get", "configmap", "flags", "-n", &ns]).is_ok());
    for id in [&scaling, &deleting] {
        decide::approve(&env.store, id, "ana", None, None).unwrap();
    }
    let with_id = |mut args: Value, id: &str| {
        args["approval_id"] = json!(id);
        args
    };
    let scaled = ok(&client, "scale", with_id(scale.clone(), &scaling)).await;
    assert!(
        scaled.contains(&format!("scaled deployments.apps/web in {ns} to 2 replicas")),
        "{scaled}"
    );
    assert_eq!(admin_get("deployment", "web", &ns)["spec"]["replicas"], 2);
    let deleted = ok(&client, "delete_resource", with_id(delete.clone(), &deleting)).await;
    assert!(
        deleted.contains(&format!("deleted configmaps/flags in {ns}")),
        "{deleted}"
    );
    assert!(super::shared()
        .admin(&["get", "configmap", "flags", "-n", &ns])
        .is_err());
    let (_, again) = fails(&client, "scale", with_id(scale, &scaling)).await;
    assert_eq!(again["code"], "agent.approval_executed", "ran once: {again}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_reads_through_portcullis_from_the_real_api_server_on_both_revisions() {
    let env = Portcullis::start_real().await;
    let cluster = super::shared();
    let (ns, other) = (
        cluster.namespace("mcp-python").unwrap(),
        cluster.namespace("mcp-python-other").unwrap(),
    );
    let value = super::secrets::distinctive();
    super::secrets::plant(&ns, "db-credentials", &value);
    let grants = [("developer", Some(ns.as_str())), ("secrets-reader", Some(ns.as_str()))];
    let (_, grants) = env.person_with_ttl("ana", &grants, Duration::from_secs(3600));
    let token = env.agent("ana", &[&grants[0], &grants[1]]);
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let seen = crate::mcp_python::run_in(&env, &token, mode, [C, &ns, &other]).await;
        assert_eq!(seen["protocol"], version, "{seen}");
        assert_eq!(seen["tools"].as_array().unwrap().len(), 13, "{seen}");
        assert_eq!(seen["secret"]["is_error"], false, "{seen}");
        let secret = seen["secret"]["text"].as_str().unwrap();
        assert!(secret.contains("password: <redacted, 24 bytes>"), "{seen}");
        super::secrets::assert_hidden("the Python SDK's get_resource", secret.as_bytes(), &[&value]);
        assert_eq!(seen["denied"]["is_error"], true);
        assert_eq!(
            seen["denied"]["structured"],
            json!({"code": 403, "reason": "Forbidden", "kind": "pods", "namespace": other})
        );
        assert_eq!(seen["unknown"]["structured"]["code"], "kind.unknown", "{seen}");
    }
    env.stop().await;
}
