//! MCP tools are bounded in time: a cluster request from a tool has at most
//! the tool timeout (30 s, or the request timeout if shorter), and get_logs
//! never follows.

use crate::harness::{Portcullis, CLUSTER};
use crate::mcp::{connect, fails, ok, stateless};
use portcullis_sim::faults::{FaultAction, FaultRule};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cluster_answer_is_a_timeout_tool_error() {
    // Long enough for the first call (and its discovery) on a loaded machine.
    let env = Portcullis::start_with(|c| c.limits.request_timeout = Duration::from_secs(3)).await;
    let (_, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let client = connect(&env, &agent, stateless()).await;
    let args = json!({"cluster": CLUSTER, "kind": "ConfigMap", "namespace": "shop", "name": "web-config"});
    ok(&client, "get_resource", args.clone()).await;
    env.sim().faults().add(FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/configmaps".into(),
        times: None,
        action: FaultAction::Delay(Duration::from_secs(10)),
    });
    let (text, structured) = fails(&client, "get_resource", args).await;
    assert_eq!(structured["code"], "cluster.timeout", "{text} {structured}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_logs_returns_at_once_and_never_asks_to_follow() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let client = connect(&env, &agent, stateless()).await;
    let pod = env
        .sim()
        .store()
        .list(portcullis_sim::registry::find("", "v1", "pods").unwrap(), Some("shop"))[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let logs = tokio::time::timeout(
        Duration::from_secs(20),
        ok(
            &client,
            "get_logs",
            json!({"cluster": CLUSTER, "namespace": "shop", "pod": pod, "tail_lines": 5}),
        ),
    )
    .await
    .expect("get_logs returns without following");
    assert!(logs.lines().count() >= 5, "{logs}");
    let asked: Vec<_> = env
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/log"))
        .collect();
    assert!(!asked.is_empty());
    assert!(asked
        .iter()
        .all(|r| !r.query.as_deref().unwrap_or("").contains("follow=true")));
    env.stop().await;
}

/// A `/mcp` body that stops short of its length is answered 408 once the
/// request timeout passes, not held open with its buffer for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_body_that_never_arrives_whole_is_answered_408_at_the_request_timeout() {
    // Long enough for the first call (and its discovery) on a loaded machine.
    let env = Portcullis::start_with(|c| c.limits.request_timeout = Duration::from_secs(3)).await;
    let (_, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {agent}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 1000\r\n\r\n{{\"jsonrpc\":"
    );
    let answer = crate::proxy_upgrades::http1(env.addr, &env.ca_pem, &request).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request.timed_out"), "{answer}");
    let rows = crate::approvals::audit_rows(&env).await;
    assert!(
        rows.iter()
            .any(|r| r.path == "/mcp" && r.code == 408 && r.refused == "body_timed_out"),
        "{rows:?}"
    );
    env.stop().await;
}
