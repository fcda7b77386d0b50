//! The YAML and JSON a client sends, held to portcullis's limits before
//! anything is built from it: an MCP `apply` manifest (the alias bomb), a
//! JSON-RPC message, a held write's body.

use crate::harness::{Portcullis, CLUSTER};
use crate::mcp::{ana_and_agent, connect, fails, stateless};
use http::Method;
use portcullis::document::MAX_DEPTH;
use portcullis::identity::Principal;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The resident memory of this process (the tests run portcullis in-process).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Samples the resident memory until dropped, keeping the highest seen: a
/// bomb's expansion is freed again by the time its call returns.
struct PeakResident {
    stop: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<u64>>,
}

impl PeakResident {
    fn start() -> PeakResident {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak = resident_bytes();
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(resident_bytes());
                std::thread::sleep(Duration::from_millis(2));
            }
            peak.max(resident_bytes())
        });
        PeakResident {
            stop,
            sampler: Some(sampler),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.take().unwrap().join().unwrap()
    }
}

/// The issue's bomb: an anchor of 6,000 scalars referenced 6,000 times
/// (about 30 KB that serde_yaml would turn into 36 million values).
fn alias_bomb() -> String {
    let scalars = vec!["x"; 6000].join(",");
    let aliases = vec!["*a"; 6000].join(",");
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n  namespace: shop\ndata:\n  k: v\nx: &a [{scalars}]\ny: [{aliases}]\n"
    )
}

/// Requests that reached the simulated cluster as `user` (impersonated).
fn reached_cluster_as(env: &Portcullis, user: &str) -> usize {
    env.sim()
        .requests()
        .into_iter()
        .filter(|r| r.impersonated.as_ref().is_some_and(|u| u.name == user))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_bomb_given_to_apply_is_refused_with_a_tool_error_before_it_expands() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    let bomb = alias_bomb();
    assert!(bomb.len() < 32 * 1024, "{} bytes", bomb.len());

    let before = resident_bytes();
    let peak = PeakResident::start();
    let (text, structured) = fails(&client, "apply", json!({"cluster": CLUSTER, "manifest": bomb})).await;
    let grown = peak.finish().saturating_sub(before);

    assert!(
        text.starts_with(
            "tool.invalid_argument: the manifest uses YAML anchors or aliases, which portcullis refuses: \
             write the object out in full"
        ),
        "{text}"
    );
    assert_eq!(structured["code"], "tool.invalid_argument");
    assert_eq!(structured["params"]["argument"], "manifest");
    // Expanded, it took the demo from 42 MB to 1.79 GB.
    assert!(
        grown < 100 * 1024 * 1024,
        "resident memory grew by {} MiB during the call",
        grown / (1024 * 1024)
    );
    assert_eq!(reached_cluster_as(&env, "user:ana"), 0, "nothing reached the cluster");
    env.stop().await;
}

/// POST `body` to `/mcp` with `token`.
async fn post_mcp(env: &Portcullis, token: &str, body: String) -> crate::harness::RawResponse {
    let auth = format!("Bearer {token}");
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    env.raw().send(Method::POST, "/mcp", &headers, body.into_bytes()).await
}

/// A `server/discover` message nesting `depth` levels in all (the message
/// and its params are two).
fn nested_message(depth: usize) -> String {
    let arrays = depth - 2;
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"x":{}{}}}}}"#,
        "[".repeat(arrays),
        "]".repeat(arrays)
    )
}

/// The refusal code of an HTTP-level refusal, if the answer is one.
fn refusal_code(response: &crate::harness::RawResponse) -> Option<String> {
    let body: Value = serde_json::from_slice(&response.body).ok()?;
    body["error"]["data"]["code"].as_str().map(String::from)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_rpc_message_nested_past_the_depth_limit_is_refused_before_it_is_read() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);

    let response = post_mcp(&env, &token, nested_message(MAX_DEPTH + 1)).await;
    assert_eq!(response.status, 400, "{:?}", response.body);
    let body = response.json();
    assert_eq!(body["error"]["data"]["code"], "request.too_deep", "{body}");
    assert_eq!(body["error"]["data"]["params"]["limit"], MAX_DEPTH);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("request.too_deep: the request body nests mappings or sequences deeper than"),
        "{body}"
    );

    let at_limit = post_mcp(&env, &token, nested_message(MAX_DEPTH)).await;
    assert_ne!(
        refusal_code(&at_limit).as_deref(),
        Some("request.too_deep"),
        "{:?}",
        at_limit.body
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_whose_yaml_body_uses_aliases_is_refused_before_its_dry_run() {
    let env = Portcullis::start().await;
    let bot = Principal::bot("deployer");
    env.store.add_principal(&bot, true).unwrap();
    let grant = portcullis::cli::new_grant(
        &env.config,
        bot.clone(),
        CLUSTER,
        "developer",
        Some("shop".into()),
        Duration::from_secs(3600),
        "test",
    )
    .unwrap();
    env.store.add_grant(&grant).unwrap();
    let (_, token) = env.store.issue_credential(&bot, "ci", None).unwrap();
    let auth = format!("Bearer {token}");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\n\
                data: &d\n  a: \"1\"\nbinaryData: *d\n";

    let response = env
        .raw()
        .send(
            Method::POST,
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps"),
            &[("authorization", &auth), ("content-type", "application/yaml")],
            yaml.as_bytes().to_vec(),
        )
        .await;

    assert_eq!(response.status, 400, "{:?}", response.body);
    let status = response.json();
    assert_eq!(status["reason"], "BadRequest", "{status}");
    assert!(
        status["message"].as_str().unwrap().contains(
            "the request body uses YAML anchors or aliases, which portcullis refuses: write the object out in full"
        ),
        "{status}"
    );
    assert_eq!(reached_cluster_as(&env, "bot:deployer"), 0, "not even a dry run");
    assert!(env.store.list_held().unwrap().is_empty(), "nothing held");
    env.stop().await;
}
