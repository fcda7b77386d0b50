//! The MCP Python SDK on 2026-07-28 with URL elicitation against a held
//! write (`approvals_python.py`): it is shown the approval URL, retries with
//! the request state, and gets the result once ana approves.

use crate::approvals_mcp::{apply_flags, careful_agent};
use crate::harness::Portcullis;
use crate::support::eventually;
use portcullis::approvals::{decide, HeldState};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_is_shown_the_approval_url_and_its_retry_returns_the_result_once_approved() {
    let env = Portcullis::start().await;
    let token = careful_agent(&env);
    let ca = env.dir.path().join("portcullis-ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (url, args) = (format!("https://{}/mcp", env.addr), apply_flags(None).to_string());
    let child = tokio::task::spawn_blocking(move || {
        std::process::Command::new(root.join(".tools/venv/bin/python"))
            .arg(root.join("tests/it/approvals_python.py"))
            .args([&url, &token])
            .arg(&ca)
            .arg(&args)
            .output()
    });
    // ana approves once the write is held (as she would, following the link).
    let held = eventually("the write to be held", async || {
        let held = env.store.list_held().unwrap();
        held.into_iter().find(|h| h.state == HeldState::Pending)
    })
    .await;
    decide::approve(&env.store, &held.id, "ana", None, None).unwrap();
    let output = tokio::time::timeout(Duration::from_secs(90), child)
        .await
        .expect("the Python client finishes")
        .unwrap()
        .expect("python runs (scripts/setup installs the mcp SDK)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(seen["elicited"][0]["mode"], "url", "{seen}");
    assert!(
        seen["elicited"][0]["url"].as_str().unwrap().contains("/approvals/"),
        "{seen}"
    );
    assert_eq!(seen["is_error"], false, "{seen}");
    assert!(
        seen["text"].as_str().unwrap().starts_with("approved by ana at "),
        "{seen}"
    );
    env.stop().await;
}
