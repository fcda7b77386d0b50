//! Each MCP tool against the simulated cluster, through the same request
//! path as kubectl: impersonated as the agent's person with only the
//! agent's grants, Secret values redacted except by read_secret, cluster
//! errors relayed with their Status, every request audited with the tool
//! and the session. Errors at the edges are in `mcp_errors`.

use crate::audit::rows;
use crate::harness::Portcullis;
use crate::mcp::{ana_and_agent, connect, fails, legacy, ok, stateless};
use crate::support::eventually;
use portcullis::audit::query::Filter;
use portcullis::audit::row::ChainedRow;
use serde_json::json;
use std::time::Duration;

const C: &str = "sim";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_says_plainly_when_a_grant_can_read_secrets_through_pods() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[
            ("developer", Some("shop")),
            ("debugger", Some("payments")),
            ("viewer", Some("default")),
        ],
        Duration::from_secs(3600),
    );
    let client = connect(&env, &env.agent("ana", &[&grants[0], &grants[1]]), stateless()).await;
    let whoami = ok(&client, "whoami", json!({})).await;
    assert!(
        whoami.contains("Redaction does not keep Secret values from these grants"),
        "{whoami}"
    );
    assert!(
        whoami.contains(&format!(
            "- developer on cluster {C} lets you create pods and read their logs: you can read the values of any Secret in namespace shop (grant {})",
            grants[0].id
        )),
        "{whoami}"
    );
    assert!(
        whoami.contains(&format!(
            "- debugger on cluster {C} lets you exec or attach into pods: you can read the values of every Secret that pods in namespace payments mount or carry in their environment (grant {})",
            grants[1].id
        )),
        "{whoami}"
    );

    let viewer_only = connect(&env, &env.agent_named("ana", "reader", &[&grants[2]]), stateless()).await;
    let whoami = ok(&viewer_only, "whoami", json!({})).await;
    assert!(whoami.contains("viewer on namespace default"), "{whoami}");
    assert!(
        !whoami.contains("Secret"),
        "a viewer cannot reach Secret values: {whoami}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_show_only_what_the_agents_grants_allow() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;

    let whoami = ok(&client, "whoami", json!({})).await;
    assert!(
        whoami.contains("acting for person:ana") && whoami.contains("developer on namespace shop"),
        "{whoami}"
    );
    assert!(
        !whoami.contains("payments"),
        "the agent was not given the payments grant: {whoami}"
    );
    assert_eq!(
        ok(&client, "list_clusters", json!({})).await,
        "sim  (developer in shop)\n"
    );

    let pods = ok(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "po", "namespace": "shop"}),
    )
    .await;
    assert!(
        pods.starts_with("NAME") && pods.contains("READY") && pods.contains("web-6d4cf56db6-4xk2p"),
        "{pods}"
    );
    let deployment = ok(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "deploy", "name": "web", "namespace": "shop"}),
    )
    .await;
    assert!(
        deployment.contains("kind: Deployment") && !deployment.contains("managedFields"),
        "{deployment}"
    );
    let resources = ok(&client, "list_api_resources", json!({"cluster": C})).await;
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("deployments  deploy  apps/v1  true  Deployment")),
        "{resources}"
    );
    let events = ok(
        &client,
        "get_events",
        json!({"cluster": C, "namespace": "shop", "kind": "Pod", "name": "web-6d4cf56db6-4xk2p"}),
    )
    .await;
    assert!(
        events.lines().count() >= 2 && events.contains("web-6d4cf56db6-4xk2p"),
        "{events}"
    );
    let logs = ok(
        &client,
        "get_logs",
        json!({"cluster": C, "namespace": "shop", "pod": "web-6d4cf56db6-4xk2p", "tail_lines": 2}),
    )
    .await;
    assert!(logs.lines().count() <= 3 && !logs.is_empty(), "{logs}");
    let (text, _) = fails(
        &client,
        "get_logs",
        json!({"cluster": C, "namespace": "shop", "pod": "x", "tail_lines": 2001}),
    )
    .await;
    assert!(
        text.starts_with("tool.invalid_argument: tail_lines must be 1 to 2000"),
        "{text}"
    );

    // The person is viewer in payments, but the agent was not given that grant.
    let (text, structured) = fails(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "pods", "namespace": "payments"}),
    )
    .await;
    assert!(
        text.starts_with("403 Forbidden: pods is forbidden: User \"user:ana\" cannot list"),
        "{text}"
    );
    assert!(text.contains("request_access") && text.contains("(audit id "), "{text}");
    assert_eq!(
        structured,
        json!({"code": 403, "reason": "Forbidden", "kind": "pods", "namespace": "payments"})
    );

    let (text, structured) = fails(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "cm", "name": "nope", "namespace": "shop"}),
    )
    .await;
    assert!(
        text.starts_with("404 NotFound: configmaps \"nope\" not found"),
        "{text}"
    );
    assert_eq!(
        structured,
        json!({"code": 404, "reason": "NotFound", "kind": "configmaps", "name": "nope", "namespace": "shop"})
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_resolve_from_discovery_and_ambiguity_or_unknowns_are_tool_errors() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, legacy()).await;
    let (text, structured) = fails(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "events", "namespace": "shop"}),
    )
    .await;
    assert!(text.starts_with("kind.ambiguous: "), "{text}");
    assert_eq!(structured["code"], "kind.ambiguous");
    assert_eq!(
        structured["params"]["candidates"],
        json!(["v1 Event", "events.k8s.io/v1 Event"])
    );
    let events = ok(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "events", "api_version": "v1", "namespace": "shop"}),
    )
    .await;
    assert!(events.contains("web-6d4cf56db6-4xk2p"), "{events}");
    let (text, structured) = fails(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "deploymentz", "namespace": "shop"}),
    )
    .await;
    assert!(
        text.starts_with("kind.unknown: ") && text.contains("apps/v1 Deployment"),
        "{text}"
    );
    assert_eq!(structured["params"]["kind"], "deploymentz");
    let (text, structured) = fails(
        &client,
        "list_resources",
        json!({"cluster": "elsewhere", "kind": "pods"}),
    )
    .await;
    assert!(text.starts_with("cluster.unknown: "), "{text}");
    assert_eq!(
        structured,
        json!({"code": "cluster.unknown", "params": {"cluster": "elsewhere"}, "error": text["cluster.unknown: ".len()..]})
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_are_hidden_in_get_and_list_and_read_secret_reveals_them_on_record() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("admin", Some("shop"))], Duration::from_secs(3600));
    let token = env.agent("ana", &[&grants[0]]);
    let client = connect(&env, &token, stateless()).await;
    let secret = ok(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "secret", "name": "db-credentials", "namespace": "shop"}),
    )
    .await;
    assert!(
        secret.contains("<redacted, 15 bytes>") && !secret.contains("czNjcjN0") && !secret.contains("s3cr3t"),
        "{secret}"
    );
    let list = ok(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "secrets", "namespace": "shop"}),
    )
    .await;
    assert!(
        list.contains("db-credentials") && !list.contains("s3cr3t") && !list.contains("czNjcjN0"),
        "{list}"
    );
    assert_eq!(
        ok(
            &client,
            "read_secret",
            json!({"cluster": C, "namespace": "shop", "name": "db-credentials", "key": "password"})
        )
        .await,
        "s3cr3t-Pa55w0rd"
    );
    let all = ok(
        &client,
        "read_secret",
        json!({"cluster": C, "namespace": "shop", "name": "db-credentials"}),
    )
    .await;
    assert!(all.contains("username: shop\n"), "{all}");
    let (text, _) = fails(
        &client,
        "read_secret",
        json!({"cluster": C, "namespace": "shop", "name": "db-credentials", "key": "nope"}),
    )
    .await;
    assert!(text.contains("its keys: password, url, username"), "{text}");

    let agent = env.store.list_agents().unwrap().pop().unwrap();
    let session = Filter {
        session: Some(agent.id.clone()),
        discovery: true,
        ..Filter::default()
    };
    let count = |rows: &[ChainedRow], tool: &str| {
        rows.iter()
            .filter(|r| r.row.tool == tool && r.row.resource == "secrets")
            .count()
    };
    // One Secret read by get_resource, three by read_secret.
    let rows = eventually("the rows of every Secret read", async || {
        let found = rows(&env, session.clone());
        (count(&found, "get_resource") >= 1 && count(&found, "read_secret") >= 3).then_some(found)
    })
    .await;
    assert_eq!((count(&rows, "get_resource"), count(&rows, "read_secret")), (1, 3));
    let of = |tool: &str| {
        rows.iter()
            .filter(|r| r.row.tool == tool && r.row.resource == "secrets")
            .collect::<Vec<_>>()
    };
    assert!(of("get_resource")
        .iter()
        .all(|r| r.row.redacted && !r.row.secret_revealed));
    assert!(of("read_secret")
        .iter()
        .all(|r| r.row.secret_revealed && !r.row.redacted));
    assert!(
        rows.iter().any(|r| r.row.tool == "get_resource" && r.row.discovery),
        "discovery lookups are audited with the tool"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_reach_the_cluster_as_the_person_with_the_agents_session() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    let manifest =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\ndata:\n  dark: \"true\"\n";
    let applied = ok(&client, "apply", json!({"cluster": C, "manifest": manifest})).await;
    assert!(
        applied.starts_with("applied configmaps/flags in shop\n") && applied.contains("dark: 'true'"),
        "{applied}"
    );
    let agent_id = env.store.list_agents().unwrap().pop().unwrap().id;
    let scaled = ok(
        &client,
        "scale",
        json!({"cluster": C, "kind": "deployment", "name": "web", "namespace": "shop", "replicas": 3}),
    )
    .await;
    assert_eq!(scaled, "scaled deployments.apps/web in shop to 3 replicas\n");
    let (text, structured) = fails(
        &client,
        "scale",
        json!({"cluster": C, "kind": "deployment", "name": "web", "namespace": "shop", "replicas": 51}),
    )
    .await;
    assert!(
        text.starts_with("tool.invalid_argument: replicas must be 0 to 50"),
        "{text}"
    );
    assert_eq!(structured["params"]["argument"], "replicas");
    let restarted = ok(
        &client,
        "rollout_restart",
        json!({"cluster": C, "kind": "deploy", "name": "web", "namespace": "shop"}),
    )
    .await;
    assert!(
        restarted.starts_with("restarted deployments.apps/web in shop"),
        "{restarted}"
    );
    let deleted = ok(
        &client,
        "delete_resource",
        json!({"cluster": C, "kind": "cm", "name": "flags", "namespace": "shop"}),
    )
    .await;
    assert_eq!(deleted, "deleted configmaps/flags in shop\n");
    let asked = ok(&client, "request_access", json!({"cluster": C, "role": "admin", "namespace": "shop", "duration": "1h", "reason": "debug the web rollout"})).await;
    assert!(
        asked.starts_with("access request ")
            && asked.contains(" is pending: admin on namespace shop of cluster sim for 1h."),
        "{asked}"
    );
    let id = asked.split_whitespace().nth(2).unwrap();
    let stored = env.store.access_request(id).unwrap().expect("stored");
    assert_eq!(
        (stored.agent_id.as_deref(), stored.reason.as_str()),
        (Some(agent_id.as_str()), "debug the web rollout")
    );
    let (text, structured) = fails(
        &client,
        "request_access",
        json!({"cluster": C, "role": "nope", "duration": "1h", "reason": "x"}),
    )
    .await;
    assert!(text.starts_with("access.invalid: "), "{text}");
    assert_eq!(structured["code"], "access.invalid");
    let (text, _) = fails(
        &client,
        "request_access",
        json!({"cluster": C, "role": "admin", "duration": "soon", "reason": "x"}),
    )
    .await;
    assert!(text.starts_with("tool.invalid_argument: duration \"soon\""), "{text}");

    let agent = env.store.list_agents().unwrap().pop().unwrap();
    let writes: Vec<_> = env
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.impersonated.is_some() && matches!(r.verb.as_str(), "patch" | "delete"))
        .collect();
    assert_eq!(writes.len(), 4, "apply, scale, restart, delete");
    for request in &writes {
        let user = request.impersonated.as_ref().expect("impersonated");
        assert_eq!(user.name, "user:ana");
        assert_eq!(
            user.extra.get("portcullis.dev/agent-session"),
            Some(&vec![agent.id.clone()]),
            "{user:?}"
        );
    }
    assert_eq!(writes[0].query.as_deref(), Some("fieldManager=portcullis-mcp"));
    let restart = writes[2]
        .headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str());
    assert_eq!(restart, Some("application/strategic-merge-patch+json"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_secret_of_one_key_is_bounded_like_every_tool_result() {
    use base64::Engine;
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("admin", Some("shop"))], Duration::from_secs(3600));
    let token = env.agent("ana", &[&grants[0]]);
    let value = "v".repeat(400 * 1024);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&value);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "large", "namespace": "shop"}, "data": {"blob": encoded}});
    env.sim().store().put(secret).unwrap();
    let client = connect(&env, &token, stateless()).await;
    let text = ok(
        &client,
        "read_secret",
        json!({"cluster": C, "namespace": "shop", "name": "large", "key": "blob"}),
    )
    .await;
    assert!(text.len() < 300 * 1024, "{} bytes", text.len());
    assert!(text.starts_with("vvvv"), "the value's start");
    assert!(
        text.contains(&format!("the result was {} bytes, more than the 256 KiB", value.len())),
        "says it was cut: {}",
        &text[text.len() - 200..]
    );
    env.stop().await;
}
