//! The audit across failures (issue 22 item 6): a `portcullis serve`
//! killed with SIGKILL under load loses no row of a request whose answer a
//! client received, and while the store cannot commit, the spool's bound
//! refuses requests rather than forwarding them unrecorded.

use crate::audit::{audit_id, row, rows};
use crate::harness::Portcullis;
use crate::serve::{configmaps, load, Serve};
use crate::support::eventually;
use portcullis::audit::query::Filter;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The spool's segment files under the data folder.
fn spool_segments(env: &Portcullis) -> Vec<std::path::PathBuf> {
    let spool = env.config.data_dir.join("audit-spool");
    let mut found = Vec::new();
    for slot in std::fs::read_dir(spool).unwrap() {
        for file in std::fs::read_dir(slot.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "spool") {
                found.push(path);
            }
        }
    }
    found
}

/// The audit ids of `login`'s rows, once every one of `answered` has its
/// row (or the test fails saying how many have none).
async fn every_row_of(env: &Portcullis, login: &str, answered: &[String]) -> Vec<String> {
    let filter = Filter {
        login: Some(login.into()),
        ..Filter::default()
    };
    eventually("every answered request's row", async || {
        let stored: Vec<String> = rows(env, filter.clone()).into_iter().map(|r| r.row.id).collect();
        let ids: HashSet<&String> = stored.iter().collect();
        let missing = answered.iter().filter(|id| !ids.contains(id)).count();
        match missing {
            0 => Ok(stored),
            _ => Err(format!("{missing} of {} answered requests have no row", answered.len())),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_process_killed_with_sigkill_under_a_load_of_small_gets_loses_no_row_of_an_answered_request() {
    let mut env = Portcullis::start().await;
    let token = env.person("loader", &[("viewer", Some("shop"))]);
    env.halt().await;
    let mut serve = Serve::start(&env, &token, "killed").await;
    let answered = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..8)
        .map(|_| tokio::spawn(load(serve.raw.clone(), token.clone(), answered.clone(), stop.clone())))
        .collect();
    eventually("600 answers under load", async || answered.lock().unwrap().len() >= 600).await;
    serve.kill();
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    let answered: Vec<String> = answered.lock().unwrap().clone();

    let restarted = Serve::start(&env, &token, "restarted").await;
    let stored = every_row_of(&env, "loader", &answered).await;
    let distinct: HashSet<&String> = stored.iter().collect();
    assert_eq!(distinct.len(), stored.len(), "no row shipped twice");
    let verified = env.cli(&["admin", "audit", "verify"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );

    restarted.terminate().await;
    assert_eq!(
        spool_segments(&env),
        Vec::<std::path::PathBuf>::new(),
        "shipped before exit"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_refused_with_a_503_naming_the_audit_and_never_forwarded_while_the_spool_is_past_its_bound() {
    let env = Portcullis::start_with(|c| c.audit.spool_max_bytes = 1).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    assert_eq!(env.raw().get(&configmaps(), &token).await.status, 200);
    env.gateway.audit().writer().flush().await;
    // Another process holds the database's write lock: the writer's
    // commits wait, then fail, and rows pile up in the spool.
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    db.execute_batch("BEGIN IMMEDIATE").unwrap();
    let first = env.raw().get(&configmaps(), &token).await;

    let never = format!("{}/never-sent", configmaps());
    let refused = env.raw().get(&never, &token).await;
    assert_eq!(refused.status, 503, "{}", String::from_utf8_lossy(&refused.body));
    let status = refused.json();
    assert_eq!(status["reason"], "ServiceUnavailable");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("cannot record this request in its audit") && message.contains("spool_max_bytes"),
        "{message}"
    );
    let id = audit_id(&refused);
    assert!(
        !env.sim()
            .requests()
            .iter()
            .any(|r| r.audit_id == id || r.path.ends_with("/never-sent")),
        "the refused request never reached the cluster"
    );

    db.execute_batch("ROLLBACK").unwrap();
    let served = async || env.raw().get(&configmaps(), &token).await.status == 200;
    eventually("served again once the store commits, without a restart", served).await;
    let refused_row = row(&env, &id).await;
    assert_eq!(
        (refused_row.code, refused_row.refused.as_str()),
        (503, "audit_unavailable")
    );
    row(&env, &audit_id(&first)).await;
    env.stop().await;
}
