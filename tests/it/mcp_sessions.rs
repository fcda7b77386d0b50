//! 2025-11-25 sessions (`Mcp-Session-Id`) kept in the store: they survive a
//! restart without a new `initialize`, a session id never issued or ended
//! with `DELETE` is not found, and a session id grants nothing by itself.
//! Raw HTTP: the session id must outlive the client's connection.

use crate::harness::{Portcullis, RawResponse};
use crate::mcp::ana_and_agent;
use http::Method;
use serde_json::{json, Value};
use std::time::Duration;

const VERSION: &str = "2025-11-25";

/// POST `message` to `/mcp` as `token`, in `session` if given.
async fn post(env: &Portcullis, token: &str, session: Option<&str>, message: Value) -> RawResponse {
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", VERSION),
    ];
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
    }
    let body = message.to_string().into_bytes();
    tokio::time::timeout(
        Duration::from_secs(30),
        env.raw().send(Method::POST, "/mcp", &headers, body),
    )
    .await
    .expect("/mcp answers")
}

/// The JSON-RPC message of an answer (plain JSON, or the `data:` of an SSE
/// event).
fn message(response: &RawResponse) -> Value {
    let text = String::from_utf8_lossy(&response.body);
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(text.as_ref()))
        .find_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .filter(|m| m["jsonrpc"] == "2.0")
        .unwrap_or_else(|| panic!("no JSON-RPC message in {}: {text}", response.status))
}

/// `initialize` and `notifications/initialized` as `token`; the session id.
async fn initialize(env: &Portcullis, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "session-test", "version": "1.0"},
    }});
    let response = post(env, token, None, init).await;
    assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
    assert_eq!(message(&response)["result"]["protocolVersion"], VERSION);
    let session = response.headers["mcp-session-id"].to_str().unwrap().to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(env, token, Some(&session), initialized).await.status, 202);
    session
}

/// Call `whoami` in `session`: the HTTP answer.
async fn whoami(env: &Portcullis, token: &str, session: &str) -> RawResponse {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}});
    post(env, token, Some(session), call).await
}

/// `whoami`'s text, which must succeed.
async fn whoami_text(env: &Portcullis, token: &str, session: &str) -> String {
    let response = whoami(env, token, session).await;
    assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
    let answer = message(&response);
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    answer["result"]["content"][0]["text"].as_str().unwrap().to_string()
}

/// The `state` column of every stored session.
/// The refusal of each 404 row in the audit.
async fn refused_404s(env: &Portcullis) -> Vec<String> {
    let rows = crate::approvals::audit_rows(env).await;
    rows.into_iter().filter(|r| r.code == 404).map(|r| r.refused).collect()
}

fn stored_states(env: &Portcullis) -> Vec<String> {
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    let mut stmt = db.prepare("SELECT state FROM mcp_sessions").unwrap();
    let rows = stmt.query_map([], |r| r.get(0)).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_a_restart_and_calls_tools_without_a_new_initialize() {
    let mut env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let session = initialize(&env, &token).await;
    assert!(whoami_text(&env, &token, &session).await.contains("agent \"helper\""));
    let states = stored_states(&env);
    assert_eq!(states.len(), 1);
    assert!(states[0].contains("session-test"), "{}", states[0]);
    assert!(
        !states[0].contains(&token) && !states[0].contains(&session),
        "{}",
        states[0]
    );
    env.restart().await;
    let text = whoami_text(&env, &token, &session).await;
    assert!(text.contains("agent \"helper\""), "{text}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_that_was_never_issued_gets_404() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    initialize(&env, &token).await;
    let response = whoami(&env, &token, "f0f0f0f0-0000-4000-8000-000000000000").await;
    assert_eq!(response.status, 404, "{}", String::from_utf8_lossy(&response.body));
    // Unknown, not another agent's: the audit keeps the word for a
    // hijack attempt for hijack attempts.
    assert_eq!(refused_404s(&env).await, ["mcp_session_unknown"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_with_delete_cannot_be_restored_after_a_restart() {
    let mut env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let session = initialize(&env, &token).await;
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let response = env.raw().send(Method::DELETE, "/mcp", &headers, Vec::new()).await;
    assert_eq!(response.status, 202, "{}", String::from_utf8_lossy(&response.body));
    assert!(stored_states(&env).is_empty());
    env.restart().await;
    assert_eq!(whoami(&env, &token, &session).await.status, 404);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agent_naming_a_session_finds_none_and_cannot_end_it_before_or_after_a_restart() {
    let mut env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let other = env.agent_named("ana", "other", &[]);
    let session = initialize(&env, &token).await;
    for restarted in [false, true] {
        // Not its session: as if it did not exist (it could otherwise
        // resume the session's stream, or end it).
        let refused = whoami(&env, &other, &session).await;
        assert_eq!(refused.status, 404, "restarted: {restarted}");
        assert_eq!(message(&refused)["error"]["data"]["code"], "session.not_found");
        let auth = format!("Bearer {other}");
        let headers = [("authorization", auth.as_str()), ("mcp-session-id", session.as_str())];
        let ended = env.raw().send(Method::DELETE, "/mcp", &headers, Vec::new()).await;
        assert_eq!(ended.status, 404, "restarted: {restarted}");
        let text = whoami_text(&env, &token, &session).await;
        assert!(text.contains("agent \"helper\""), "{text}");
        let refused = refused_404s(&env).await;
        assert!(
            !refused.is_empty() && refused.iter().all(|r| *r == "mcp_session_foreign"),
            "{refused:?}"
        );
        env.restart().await;
    }
    env.stop().await;
}

/// A request refused before its body is read (here, naming a session that
/// is not kept) has the rest of its body read through: over HTTP/1.1 the
/// connection stays usable, and the client's next request on it (an SDK
/// initializes again at once) is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_mcp_request_leaves_its_http1_connection_usable() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    // A megabyte: more than hyper reads through on its own.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":"{}"}}}}"#,
        "a".repeat(1 << 20)
    );
    let refused = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Mcp-Session-Id: f0f0f0f0-0000-4000-8000-000000000000\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let tls = crate::proxy_upgrades::connected(env.addr, &env.ca_pem, b"http/1.1")
        .await
        .unwrap();
    let (mut reading, mut writing) = tokio::io::split(tls);
    let sending = tokio::spawn(async move {
        // A write refused by a closed connection is what the test finds.
        let _ = writing.write_all(refused.as_bytes()).await;
        let _ = writing
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await;
        writing
    });
    let mut received = Vec::new();
    let mut buf = [0u8; 8192];
    let answered = async {
        while String::from_utf8_lossy(&received).matches("HTTP/1.1 ").count() < 2 {
            match reading.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(crate::support::EVENTUALLY, answered)
        .await
        .expect("answers");
    drop(sending.await);
    let text = String::from_utf8_lossy(&received);
    let statuses: Vec<&str> = text
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|answer| answer.get(..3).unwrap_or_default())
        .collect();
    assert_eq!(statuses, ["404", "200"], "{text}");
    env.stop().await;
}
