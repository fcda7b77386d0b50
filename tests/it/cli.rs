//! The administration commands, run as the binary an operator runs, against
//! the store of a running portcullis.

use crate::harness::{Portcullis, CLUSTER};
use crate::support::eventually;
use std::process::Output;
use std::time::Duration;

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_bots_credentials_and_grants_are_managed_from_the_command_line() {
    let env = Portcullis::start().await;
    assert!(stdout(&env.cli(&["admin", "person", "add", "bea"])).contains("added person bea"));
    // Holding a person's own writes is not a thing: refused, not listed as
    // held while holding nothing.
    let held_person = env.cli(&["admin", "person", "add", "cy", "--writes-need-approval"]);
    assert!(!held_person.status.success());
    let said = String::from_utf8_lossy(&held_person.stderr);
    assert!(said.contains("only bots' writes wait for approval"), "{said}");
    assert!(stdout(&env.cli(&["admin", "bot", "add", "ci", "--writes-need-approval"])).contains("added bot ci"));
    let people = stdout(&env.cli(&["admin", "person", "list"]));
    assert!(people.lines().any(|l| l.starts_with("bea ")), "{people}");
    assert!(!people.lines().any(|l| l.starts_with("cy ")), "{people}");
    let bots = stdout(&env.cli(&["admin", "bot", "list"]));
    assert!(
        bots.lines().any(|l| l.starts_with("ci ") && l.contains("true")),
        "{bots}"
    );

    let granted = stdout(&env.cli(&[
        "admin",
        "grant",
        "add",
        "--person",
        "bea",
        "--cluster",
        CLUSTER,
        "--role",
        "viewer",
        "--namespace",
        "shop",
        "--duration",
        "1h",
    ]));
    assert!(granted.contains("bea") && granted.contains("viewer"), "{granted}");
    let issued = env.cli(&[
        "admin",
        "credential",
        "issue",
        "--person",
        "bea",
        "--name",
        "laptop",
        "--expires-in",
        "1d",
    ]);
    let token = stdout(&issued).trim().to_string();
    assert!(token.starts_with("pcl_"), "only the token goes to stdout: {token}");
    let listed = stdout(&env.cli(&["admin", "credential", "list"]));
    assert!(
        listed.contains("laptop") && !listed.contains(&token),
        "a list never shows a token: {listed}"
    );

    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    assert_eq!(env.raw().get(&path, &token).await.status, 200);
    let id = listed
        .lines()
        .find(|l| l.contains("laptop"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert!(stdout(&env.cli(&["admin", "credential", "revoke", &id])).contains("revoked"));
    // Another process revoked it: the credential cache learns it within its lifetime.
    eventually("a revoked credential refused", async || {
        env.raw().get(&path, &token).await.status == 401
    })
    .await;

    let (_, second) = env
        .store
        .issue_credential(&portcullis::identity::Principal::person("bea"), "other", None)
        .unwrap();
    assert_eq!(env.raw().get(&path, &second).await.status, 200);
    assert!(stdout(&env.cli(&["admin", "person", "disable", "bea"])).contains("disabled"));
    eventually("a disabled person's credentials refused", async || {
        env.raw().get(&path, &second).await.status == 401
    })
    .await;

    let refused = env.cli(&[
        "admin",
        "grant",
        "add",
        "--person",
        "bea",
        "--cluster",
        CLUSTER,
        "--role",
        "cluster-admin",
        "--duration",
        "24h",
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("at most"),
        "cluster-admin has a short maximum"
    );
    let protected = env.cli(&[
        "admin",
        "grant",
        "add",
        "--person",
        "bea",
        "--cluster",
        CLUSTER,
        "--role",
        "viewer",
        "--namespace",
        "kube-system",
    ]);
    assert!(String::from_utf8_lossy(&protected.stderr).contains("protected"));
    let grant = crate::rbac::id_after(&granted, "grant ");
    assert!(stdout(&env.cli(&["admin", "grant", "revoke", &grant])).contains("revoked"));

    // Each change is on record as the operator's, named by what it made;
    // the refused grants changed nothing and have no row.
    let rows = crate::approvals::audit_rows(&env).await;
    let changes: Vec<(&str, &str, bool)> = rows
        .iter()
        .filter(|r| r.principal_kind == "operator" && r.login == "cli")
        .map(|r| (r.verb.as_str(), r.resource.as_str(), !r.name.is_empty()))
        .collect();
    assert_eq!(
        changes,
        [
            ("create", "people", true),
            ("create", "bots", true),
            ("grant", "grants", true),
            ("create", "credentials", true),
            ("revoke", "credentials", true),
            ("disable", "people", true),
            ("revoke", "grants", true),
        ]
    );
    let issued = rows
        .iter()
        .find(|r| r.resource == "credentials" && r.verb == "create")
        .unwrap();
    assert_eq!(
        (issued.name.as_str(), issued.query.as_str()),
        (id.as_str(), "owner=person%3Abea")
    );
    env.stop().await;
}

#[test]
fn a_bad_configuration_is_refused_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("portcullis.toml");
    std::fs::write(&path, "listen = \"nowhere\"\npublic_url = \"https://x\"\ndata_dir = \"/tmp/x\"\n[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--config")
        .arg(&path)
        .args(["admin", "person", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`listen`"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--config")
        .arg(&path)
        .args(["admin", "person", "list"])
        .env("PORTCULLIS_LISTEN", "127.0.0.1:9443")
        .env("PORTCULLIS_LIMITS__RESPONSE_BYTES", "lots")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("limits.response_bytes"),
        "an override is checked like the file: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_added_for_a_person_with_their_grants_or_for_a_bot() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let delegated = stdout(&env.cli(&[
        "admin",
        "agent",
        "add",
        "helper",
        "--person",
        "ana",
        "--grant",
        &grants[0].id,
    ]));
    let delegated = delegated.trim().to_string();
    assert!(delegated.starts_with("pcl_"), "{delegated}");
    let other = env.cli(&[
        "admin", "agent", "add", "greedy", "--person", "ana", "--grant", "not-hers",
    ]);
    assert!(!other.status.success(), "an agent gets only its person's grants");

    stdout(&env.cli(&["admin", "bot", "add", "ci"]));
    stdout(&env.cli(&[
        "admin",
        "grant",
        "add",
        "--bot",
        "ci",
        "--cluster",
        CLUSTER,
        "--role",
        "viewer",
        "--namespace",
        "payments",
        "--duration",
        "1h",
    ]));
    let bot_agent = stdout(&env.cli(&["admin", "agent", "add", "runner", "--bot", "ci"]))
        .trim()
        .to_string();
    let listed = stdout(&env.cli(&["admin", "agent", "list"]));
    assert!(
        listed.contains("helper") && listed.contains("runner") && listed.contains("bot:ci"),
        "{listed}"
    );
    assert!(
        !listed.contains(&bot_agent) && !listed.contains(&delegated),
        "a list never shows a token"
    );

    let pods = |ns: &str| format!("/clusters/{CLUSTER}/api/v1/namespaces/{ns}/pods");
    assert_eq!(env.raw().get(&pods("shop"), &delegated).await.status, 200);
    assert_eq!(
        env.raw().get(&pods("payments"), &bot_agent).await.status,
        200,
        "a bot's agent has the bot's grants"
    );
    assert_eq!(env.raw().get(&pods("shop"), &bot_agent).await.status, 403);
    let seen = env
        .sim()
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/payments/pods"))
        .unwrap();
    assert_eq!(
        seen.impersonated.unwrap().name,
        "bot:ci",
        "a bot's agent is impersonated as the bot"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_a_request_show_escaped_in_the_audit_table() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let forged = "x%0a2026-01-01T00:00:00Z%20forged%20line%0d%1b%5b2K";
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps/{forged}");
    let response = env.raw().get(&path, &token).await;
    let id = crate::audit::audit_id(&response);
    let row = crate::audit::row(&env, &id).await;
    assert!(
        row.name.contains('\n'),
        "the row keeps the name as sent: {:?}",
        row.name
    );

    let table = stdout(&env.cli(&["admin", "audit", "--id", &id]));
    assert_eq!(table.lines().count(), 2, "a header and one line for the row: {table:?}");
    assert!(!table.contains(['\r', '\x1b']), "{table:?}");
    assert!(
        table.contains(r"x\n2026-01-01T00:00:00Z forged line\r\u{1b}[2K"),
        "{table:?}"
    );
    env.stop().await;
}
