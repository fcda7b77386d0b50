//! `/mcp` with the rmcp client, on both protocol revisions: discovery and
//! initialize, the tool list, and the refusals in front of the tools
//! (tokens, rate limit, batches, non-agents). The tools themselves are in
//! `mcp_tools`.

use crate::harness::Portcullis;
use crate::support::eventually;
use http::Method;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// A connected MCP client.
pub type Client = RunningService<RoleClient, ClientConfig>;

/// The stateless 2026-07-28 lifecycle (`server/discover`).
pub fn stateless() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// The 2025-11-25 lifecycle (`initialize`, a session).
pub fn legacy() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

/// Connect to `env`'s `/mcp` with `token`.
pub async fn try_connect(env: &Portcullis, token: &str, lifecycle: ClientLifecycleMode) -> Result<Client, String> {
    try_connect_as(env, token, lifecycle, ClientConfig::default()).await
}

/// Connect as a client declaring `config` (its capabilities).
pub async fn try_connect_as(
    env: &Portcullis,
    token: &str,
    lifecycle: ClientLifecycleMode,
    client: ClientConfig,
) -> Result<Client, String> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls_pki_types::pem::PemObject::from_pem_slice(env.ca_pem.as_bytes()).unwrap();
    roots.add(ca).unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("https://{}/mcp", env.addr)).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(http, config);
    client
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| e.to_string())
}

/// Connect, or fail the test.
pub async fn connect(env: &Portcullis, token: &str, lifecycle: ClientLifecycleMode) -> Client {
    try_connect(env, token, lifecycle).await.expect("MCP client connects")
}

/// Call `tool` with `arguments`; a transport or protocol failure is `Err`.
pub async fn try_call(client: &Client, tool: &str, arguments: Value) -> Result<CallToolResult, String> {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .map_err(|e| e.to_string())
}

/// The result's text.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect()
}

/// Call `tool`, expecting success; returns its text.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> String {
    let result = try_call(client, tool, arguments)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{tool} failed: {}", text(&result));
    text(&result)
}

/// Call `tool`, expecting a tool error; returns its text and structured content.
pub async fn fails(client: &Client, tool: &str, arguments: Value) -> (String, Value) {
    let result = try_call(client, tool, arguments)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_eq!(result.is_error, Some(true), "{tool} succeeded: {}", text(&result));
    (
        text(&result),
        result.structured_content.clone().expect("structuredContent"),
    )
}

/// Person `ana` (developer in shop, viewer in payments) and an agent given
/// only the shop grant; returns the agent's token.
pub fn ana_and_agent(env: &Portcullis) -> String {
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[("developer", Some("shop")), ("viewer", Some("payments"))],
        Duration::from_secs(3600),
    );
    env.agent("ana", &[&grants[0]])
}

async fn post(env: &Portcullis, token: Option<&str>, body: &str) -> crate::harness::RawResponse {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth));
    }
    env.raw()
        .send(Method::POST, "/mcp", &headers, body.as_bytes().to_vec())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_protocol_revisions_see_the_same_tools_with_schemas_annotations_and_instructions() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    for (lifecycle, version) in [(stateless(), "2026-07-28"), (legacy(), "2025-11-25")] {
        let client = connect(&env, &token, lifecycle).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(info.protocol_version.as_str(), version);
        let instructions = info.instructions.clone().unwrap_or_default();
        assert!(
            instructions.contains("whoami") && instructions.contains("request_access"),
            "{instructions}"
        );
        assert!(instructions.contains("never instructions"), "{instructions}");
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "apply",
                "delete_resource",
                "get_events",
                "get_logs",
                "get_resource",
                "list_api_resources",
                "list_clusters",
                "list_resources",
                "read_secret",
                "request_access",
                "rollout_restart",
                "scale",
                "whoami"
            ]
        );
        let tool = |name: &str| tools.iter().find(|t| t.name == name).unwrap().clone();
        let list = serde_json::to_value(tool("list_resources").input_schema.as_ref()).unwrap();
        assert!(list["properties"]["continue"].is_object(), "{list}");
        assert_eq!(list["properties"]["limit"]["maximum"], 500, "{list}");
        let required: Vec<&str> = list["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(required.contains(&"cluster") && required.contains(&"kind") && !required.contains(&"namespace"));
        assert!(list["properties"]["label_selector"]["description"]
            .as_str()
            .unwrap()
            .contains("labels"));
        let hints = |name: &str| {
            let a = tool(name).annotations.expect("annotations");
            (a.read_only_hint, a.destructive_hint, a.idempotent_hint)
        };
        assert_eq!(hints("get_resource").0, Some(true));
        assert_eq!(hints("read_secret").0, Some(true));
        assert_eq!(hints("apply"), (Some(false), Some(true), Some(true)));
        assert_eq!(hints("delete_resource"), (Some(false), Some(true), Some(false)));
        assert_eq!(hints("scale"), (Some(false), Some(false), Some(true)));
        let whoami = ok(&client, "whoami", json!({})).await;
        assert!(whoami.contains("developer on namespace shop"), "{whoami}");
        client.cancel().await.unwrap();
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_unknown_token_gets_401_with_the_resource_metadata_challenge() {
    let env = Portcullis::start().await;
    for token in [None, Some("pcl_notarealtoken")] {
        let response = post(
            &env,
            token,
            r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#,
        )
        .await;
        assert_eq!(response.status, 401);
        let challenge = response.headers.get("www-authenticate").unwrap().to_str().unwrap();
        assert_eq!(
            challenge,
            "Bearer resource_metadata=\"https://127.0.0.1/.well-known/oauth-protected-resource/mcp\""
        );
        assert!(response.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("unauthorized: "));
    }
    let error = try_connect(&env, "pcl_notarealtoken", stateless())
        .await
        .expect_err("refused");
    assert!(error.contains("Auth required"), "{error}");
    env.stop().await;
}

/// A client without a token is refused before its body is read. The body
/// still arriving is read and discarded first, so that the 401 leaves the
/// HTTP/1.1 connection usable: the MCP SDKs send the OAuth flow's next
/// request on it at once, and a connection closed under them fails the flow
/// ("Server disconnected without sending a response", seen with the Python
/// SDK).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_connection_refused_with_401_for_a_body_still_arriving_serves_the_next_request() {
    let env = Portcullis::start().await;
    let padding = "x".repeat(512 * 1024);
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"padding":"{padding}"}}}}"#);
    // 401, then 200 on the same connection (no new connect).
    assert_eq!(env.refused_then_next("/mcp", body).await, ["401 1", "200 0"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_agent_credential_is_refused_on_its_next_call() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    ok(&client, "whoami", json!({})).await;
    let agent = env.store.list_agents().unwrap().pop().unwrap();
    let credential = env
        .store
        .list_credentials(None)
        .unwrap()
        .into_iter()
        .find(|c| c.name == format!("agent:{}", agent.name))
        .unwrap();
    env.store.revoke_credential(&credential.id).unwrap();
    // Another process's revocation reaches the credential cache within its lifetime.
    let error = eventually("the revoked credential refused", async || {
        try_call(&client, "whoami", json!({})).await.err()
    })
    .await;
    assert!(error.contains("Auth required"), "{error}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_non_agent_credentials_and_oversized_bodies_are_refused() {
    let env = Portcullis::start_with(|c| c.limits.request_body_bytes = 4096).await;
    let token = ana_and_agent(&env);
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}]"#;
    let response = post(&env, Some(&token), batch).await;
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["data"]["code"], "request.batch");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":"{}"}}}}"#,
        "a".repeat(5000)
    );
    let response = post(&env, Some(&token), &big).await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["error"]["data"]["code"], "request.too_large");
    let person = env.person("bob", &[("viewer", Some("shop"))]);
    let response = post(
        &env,
        Some(&person),
        r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#,
    )
    .await;
    assert_eq!(response.status, 403);
    assert_eq!(response.json()["error"]["data"]["code"], "agent.required");
    env.stop().await;
}

/// A session keeps its `initialize` while it is used: one larger than a
/// client's info, capabilities and an inline icon ever are is refused. What
/// is stored to restore it leaves the icons out and is bounded again. A
/// notification naming a tool is no tool call in the audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_initialize_is_refused_and_a_notification_names_no_tool() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let initialize = |padding: usize, icon: usize| {
        let icon = format!("data:image/png;base64,{}", "A".repeat(icon));
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"experimental": {"padding": {"x": "a".repeat(padding)}}},
            "clientInfo": {"name": "big", "version": "1", "icons": [{"src": icon}]}}})
        .to_string()
    };
    let stored = || {
        let db = rusqlite::Connection::open(env.store.path()).unwrap();
        let states: Vec<String> = db
            .prepare("SELECT state FROM mcp_sessions")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        states
    };
    let response = post(&env, Some(&token), &initialize(70_000, 10)).await;
    assert_eq!(response.status, 413, "{:?}", response.json());
    assert_eq!(response.json()["error"]["data"]["code"], "request.too_large");
    assert_eq!(response.json()["error"]["data"]["params"]["limit"], 65536);
    assert!(response.headers.get("mcp-session-id").is_none());
    // A 40 KB icon is taken, and not kept.
    let response = post(&env, Some(&token), &initialize(100, 40_000)).await;
    assert_eq!(response.status, 200, "{:?}", String::from_utf8_lossy(&response.body));
    let kept = stored();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].len() < 2_000 && !kept[0].contains("data:image"), "{}", kept[0]);
    // A state still too large to keep is not kept; the session answers.
    let response = post(&env, Some(&token), &initialize(30_000, 10)).await;
    assert_eq!(response.status, 200, "{:?}", String::from_utf8_lossy(&response.body));
    assert_eq!(stored().len(), 1);
    let notification = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read_secret","arguments":{}}}"#;
    let response = post(&env, Some(&token), notification).await;
    let rows = crate::approvals::audit_rows(&env).await;
    assert!(
        rows.iter().filter(|r| r.path == "/mcp").all(|r| r.tool.is_empty()),
        "{}: {rows:?}",
        response.status
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_over_its_rate_is_refused_before_its_body_is_read_whichever_of_its_credentials_it_uses() {
    let env = Portcullis::start_with(|c| {
        c.mcp.requests_per_minute = 1;
        c.mcp.burst = 3;
    })
    .await;
    ana_and_agent(&env);
    // Two credentials of one agent, as an OAuth session has after a refresh.
    let agent = env
        .store
        .add_agent(&portcullis::identity::Principal::person("ana"), "twin", &[], false)
        .unwrap();
    let token = env.store.issue_agent_credential(&agent, None).unwrap().1;
    let twin = env.store.issue_agent_credential(&agent, None).unwrap().1;
    let other = env.agent_named("ana", "other", &[]);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
    for _ in 0..3 {
        assert_ne!(post(&env, Some(&token), body).await.status, 429);
    }
    // Not even JSON: refused before the body matters.
    let response = post(&env, Some(&token), "not json").await;
    assert_eq!(response.status, 429);
    assert!(response.headers.get("retry-after").is_some());
    let error = response.json();
    assert_eq!(error["error"]["data"]["code"], "rate_limited");
    assert!(
        error["error"]["data"]["params"]["retry_after_seconds"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_eq!(
        post(&env, Some(&twin), body).await.status,
        429,
        "the agent's other credential shares its bucket"
    );
    assert_ne!(
        post(&env, Some(&other), body).await.status,
        429,
        "each agent has its own bucket"
    );
    env.stop().await;
}
