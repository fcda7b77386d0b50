//! The official MCP Python SDK (`mcp` on PyPI, installed by `scripts/setup`
//! into `.tools/venv`) as a second, independent client of `/mcp`, on both
//! protocol revisions: `mcp_python.py` connects, lists the tools, calls a
//! few and prints what it saw.

use crate::harness::Portcullis;
use serde_json::{json, Value};
use std::path::PathBuf;

fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/venv/bin/python")
}

async fn run(env: &Portcullis, token: &str, mode: &str) -> Value {
    run_in(env, token, mode, ["sim", "shop", "payments"]).await
}

/// Run `mcp_python.py` in `mode` with `token` against `env`'s `/mcp`, on
/// `[cluster, namespace, namespace the agent may not read]`; what it saw.
pub async fn run_in(env: &Portcullis, token: &str, mode: &str, place: [&str; 3]) -> Value {
    let place = place.map(String::from);
    let ca = env.dir.path().join("portcullis-ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp_python.py");
    let url = format!("https://{}/mcp", env.addr);
    let (token, mode) = (token.to_string(), mode.to_string());
    // The server runs on this test's runtime: wait for the child off it.
    let command = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python())
            .arg(script)
            .args([&url, &token])
            .arg(&ca)
            .arg(&mode)
            .args(&place)
            .output()
    });
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), command)
        .await
        .expect("the Python client finishes")
        .unwrap()
        .expect("python runs (scripts/setup installs the mcp SDK into .tools/venv)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("not JSON: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_sees_the_same_tools_redaction_and_errors_on_both_revisions() {
    let env = Portcullis::start().await;
    // The agent may read Secrets (secrets-reader) but, being an agent, never
    // sees their values: redaction is what this client must see.
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[("developer", Some("shop")), ("secrets-reader", Some("shop"))],
        std::time::Duration::from_secs(3600),
    );
    let token = env.agent("ana", &[&grants[0], &grants[1]]);
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let seen = run(&env, &token, mode).await;
        assert_eq!(seen["protocol"], version, "{seen}");
        assert!(
            seen["instructions"].as_str().unwrap().contains("Start with `whoami`"),
            "{seen}"
        );
        assert_eq!(seen["tools"].as_array().unwrap().len(), 13, "{seen}");
        assert_eq!(seen["secret"]["is_error"], false, "{seen}");
        let secret = seen["secret"]["text"].as_str().unwrap();
        assert!(secret.contains("<redacted, "), "{seen}");
        assert!(
            !secret.contains("czNjcjN0") && !secret.contains("s3cr3t"),
            "no value, encoded or not: {seen}"
        );
        assert_eq!(seen["denied"]["is_error"], true);
        assert!(
            seen["denied"]["text"].as_str().unwrap().starts_with("403 Forbidden: "),
            "{seen}"
        );
        assert_eq!(
            seen["denied"]["structured"],
            json!({"code": 403, "reason": "Forbidden", "kind": "pods", "namespace": "payments"})
        );
        assert_eq!(seen["unknown"]["structured"]["code"], "kind.unknown", "{seen}");
    }
    env.stop().await;
}
