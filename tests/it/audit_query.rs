//! The audit read back: `portcullis audit` filters and table, `GET /audit`
//! for admins, `audit verify`, the export file, and the logs.

use crate::audit::{audit_id, row, rows};
use crate::harness::{Portcullis, CLUSTER};
use http::Method;
use portcullis::audit::query::Filter;
use portcullis::audit::row::ChainedRow;
use portcullis::identity::{credential, Principal};

/// `portcullis --config <env's config> args…`: (success, stdout, stderr).
fn portcullis(env: &Portcullis, args: &[&str]) -> (bool, String, String) {
    let config = env.dir.path().join("portcullis.toml");
    std::fs::write(&config, toml::to_string(&env.config).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--config")
        .arg(&config)
        .args(args)
        .env_remove("PORTCULLIS_CONFIG")
        .output()
        .expect("portcullis runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The ids `portcullis audit --json <filters>` lists, in order.
fn cli_ids(env: &Portcullis, filters: &[&str]) -> Vec<String> {
    let (ok, out, err) = portcullis(env, &[&["admin", "audit", "--json"], filters].concat());
    assert!(ok, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<ChainedRow>(l).unwrap().row.id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_return_exactly_the_matching_rows() {
    let env = Portcullis::start().await;
    let ana = env.person("ana", &[("admin", Some("shop"))]);
    let ben = env.person("ben", &[("viewer", Some("payments"))]);
    let raw = env.raw();
    let at = |p: &str| format!("/clusters/{CLUSTER}{p}");
    let auth = format!("Bearer {ana}");
    let json = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let cm = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"flags"}}"#.to_vec();
    let sent = [
        raw.get(&at("/api/v1/namespaces/shop/pods"), &ana).await,
        raw.send(Method::POST, &at("/api/v1/namespaces/shop/configmaps"), &json, cm)
            .await,
        raw.get(&at("/api/v1/namespaces/payments/secrets"), &ana).await,
        raw.get(&at("/api"), &ana).await,
        raw.get(&at("/api/v1/namespaces/payments/pods"), &ben).await,
        raw.get(&at("/api/v1/namespaces/payments/configmaps/missing"), &ben)
            .await,
    ];
    let codes: Vec<u16> = sent.iter().map(|r| r.status.as_u16()).collect();
    assert_eq!(codes, [200, 201, 403, 200, 200, 404]);
    let id: Vec<String> = sent.iter().map(audit_id).collect();
    let mut committed = Vec::new();
    for i in &id {
        committed.push(row(&env, i).await);
    }
    let ids = |picks: &[usize]| picks.iter().map(|&i| id[i].clone()).collect::<Vec<_>>();
    let since = committed[2]
        .started_at
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let credential = committed[4].credential_id.clone();
    assert_eq!(cli_ids(&env, &[]), ids(&[0, 1, 2, 4, 5]), "discovery hidden by default");
    assert_eq!(cli_ids(&env, &["--discovery"]), ids(&[0, 1, 2, 3, 4, 5]));
    assert_eq!(cli_ids(&env, &["--login", "ana"]), ids(&[0, 1, 2]));
    assert_eq!(cli_ids(&env, &["--outcome", "denied"]), ids(&[2]));
    assert_eq!(cli_ids(&env, &["--outcome", "error"]), ids(&[5]));
    assert_eq!(cli_ids(&env, &["--outcome", "write"]), ids(&[1]));
    assert_eq!(cli_ids(&env, &["--namespace", "payments"]), ids(&[2, 4, 5]));
    assert_eq!(
        cli_ids(&env, &["--namespace", "payments", "--verb", "list"]),
        ids(&[2, 4])
    );
    assert_eq!(
        cli_ids(&env, &["--resource", "configmaps", "--cluster", CLUSTER]),
        ids(&[1, 5])
    );
    assert_eq!(cli_ids(&env, &["--credential", &credential]), ids(&[4, 5]));
    assert_eq!(cli_ids(&env, &["--since", &since]), ids(&[2, 4, 5]));
    assert_eq!(cli_ids(&env, &["--until", &since, "--login", "ana"]), ids(&[0, 1]));
    assert_eq!(
        cli_ids(&env, &["--id", &id[3]]),
        ids(&[3]),
        "a discovery row named by id is shown"
    );
    assert_eq!(cli_ids(&env, &["--session", "s1"]), ids(&[]));
    assert_eq!(cli_ids(&env, &["--limit", "2"]), ids(&[4, 5]));
    let (ok, _, note) = portcullis(&env, &["admin", "audit", "--json", "--limit", "2"]);
    assert!(ok && note.contains("the newest 2 rows"), "{note}");
    let (ok, _, none) = portcullis(&env, &["admin", "audit", "--json"]);
    assert!(ok && !none.contains("newest"), "all rows listed, no note: {none}");

    let (ok, table, _) = portcullis(&env, &["admin", "audit", "--login", "ben"]);
    assert!(ok);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("TIME") && lines[0].contains("OUTCOME"), "{table}");
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[2].contains(&id[5]) && lines[2].contains("person:ben") && lines[2].ends_with("404 NotFound"),
        "{table}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_endpoint_serves_filtered_json_lines_to_admins_only() {
    let env = Portcullis::start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let sec = env.person("sec", &[]);
    env.store.set_admin(&Principal::person("sec"), true).unwrap();
    let denied = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/payments/pods"), &ana)
        .await;
    let denied_row = row(&env, &audit_id(&denied)).await;

    let answer = env.raw().get("/audit?outcome=denied&login=ana", &sec).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["content-type"], "application/jsonl");
    assert_eq!(answer.headers["cache-control"], "no-store");
    assert_eq!(answer.headers["x-content-type-options"], "nosniff");
    let lines: Vec<ChainedRow> = String::from_utf8_lossy(&answer.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].row, denied_row);
    assert!(answer.headers.get("portcullis-more-rows").is_none(), "all of them");

    // A page at its limit says so, and `after` reads on from its last row.
    let all = |answer: &crate::harness::RawResponse| -> Vec<ChainedRow> {
        String::from_utf8_lossy(&answer.body)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    for _ in 0..3 {
        let read = env
            .raw()
            .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &ana)
            .await;
        row(&env, &audit_id(&read)).await;
    }
    let every = all(&env.raw().get("/audit?discovery=1&limit=100000", &sec).await);
    assert!(every.len() >= 3, "{}", every.len());
    let first = env.raw().get("/audit?discovery=1&after=0&limit=2", &sec).await;
    assert_eq!(first.headers["portcullis-more-rows"], "true");
    let first = all(&first);
    let next = format!("/audit?discovery=1&after={}&limit=100000", first[1].seq);
    let rest = all(&env.raw().get(&next, &sec).await);
    let paged: Vec<i64> = first.iter().chain(&rest).map(|r| r.seq).collect();
    let whole: Vec<i64> = every.iter().map(|r| r.seq).collect();
    assert_eq!(paged[..whole.len()], whole[..], "paged forward, nothing skipped");

    let refused = env.raw().get("/audit", &ana).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["reason"], "Forbidden");
    let refused_row = row(&env, &audit_id(&refused)).await;
    assert_eq!(
        (
            refused_row.refused.as_str(),
            refused_row.login.as_str(),
            refused_row.path.as_str()
        ),
        ("not_admin", "ana", "/audit")
    );
    // sec's agent acts for an admin, and still may not read the audit.
    let agent = env.agent("sec", &[]);
    let refused = env.raw().get("/audit", &agent).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert!(
        refused.json()["message"].as_str().unwrap().contains("agent"),
        "{:?}",
        refused.body
    );
    assert_eq!(row(&env, &audit_id(&refused)).await.refused, "not_admin");
    assert_eq!(env.raw().get("/audit?who=ana", &sec).await.status, 400);
    assert_eq!(env.raw().send(Method::GET, "/audit", &[], Vec::new()).await.status, 401);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_names_an_edited_and_a_deleted_row() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(audit_id(
            &env.raw()
                .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &token)
                .await,
        ));
    }
    for id in &ids {
        row(&env, id).await;
    }
    let (ok, out, err) = portcullis(&env, &["admin", "audit", "verify"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "audit chain intact: 5 rows verified");

    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    db.execute("UPDATE audit SET code = 500 WHERE id = ?1", [&ids[3]])
        .unwrap();
    let (ok, _, err) = portcullis(&env, &["admin", "audit", "verify"]);
    assert!(!ok, "an edit is caught");
    assert!(err.contains(&format!("row 4 ({}) was edited", ids[3])), "{err}");
    db.execute("UPDATE audit SET code = 200 WHERE id = ?1", [&ids[3]])
        .unwrap();
    assert!(portcullis(&env, &["admin", "audit", "verify"]).0, "restored");

    db.execute("DELETE FROM audit WHERE id = ?1", [&ids[1]]).unwrap();
    let (ok, _, err) = portcullis(&env, &["admin", "audit", "verify"]);
    assert!(!ok, "a deletion is caught");
    assert!(err.contains("row 2 was removed") && err.contains(&ids[2]), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_file_gets_every_row_with_its_chain_hash() {
    let sink = tempfile::tempdir().unwrap();
    let file = sink.path().join("audit.jsonl");
    let spec = file.to_str().unwrap().to_string();
    let env = Portcullis::start_with(|config| config.audit.export = Some(spec)).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &token)
        .await;
    let id = audit_id(&response);
    row(&env, &id).await;
    let stored = rows(
        &env,
        Filter {
            id: Some(id.clone()),
            ..Filter::default()
        },
    )
    .pop()
    .unwrap();
    let exported: Vec<ChainedRow> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported, [stored]);
    env.stop().await;
}

/// Every log line, from every test in this binary (one global subscriber).
fn captured_logs() -> &'static std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    static LOGS: std::sync::OnceLock<std::sync::Arc<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = logs.clone();
        let installed = tracing_subscriber::fmt()
            .with_env_filter("portcullis=debug")
            .with_ansi(false)
            .with_writer(move || Captured(sink.clone()))
            .event_format(portcullis::logs::Lines::default())
            .try_init();
        assert!(installed.is_ok(), "no other test installs a global subscriber");
        logs
    })
}

struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_about_a_request_carry_its_audit_id_and_never_a_token() {
    let logs = captured_logs();
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let unknown = credential::mint().token;
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    let ok = audit_id(&env.raw().get(&path, &token).await);
    let rejected = audit_id(&env.raw().get(&path, &unknown).await);
    row(&env, &rejected).await;
    env.stop().await;
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    for id in [&ok, &rejected] {
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(id.as_str())).collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("request{audit_id=") && l.contains(" code=")),
            "{id}: {text}"
        );
    }
    assert!(
        !text.contains(&token) && !text.contains(&unknown),
        "a token reached the logs"
    );
}
