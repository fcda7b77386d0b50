//! The audit while PostgreSQL is away (issue 22 item 6): a `portcullis
//! serve` on a database of its own keeps the rows of what it answers in its
//! spool, refuses writes, and reads past the spool's bound, with a 503
//! naming the audit store (never forwarding a request unrecorded), and once
//! PostgreSQL is back reconnects on its own and ships what waited: every
//! answered request has exactly one row and the chain verifies.

use crate::audit::audit_id;
use crate::harness::{Portcullis, RawResponse};
use crate::pg_fixture::PgServer;
use crate::serve::{configmaps, Serve};
use crate::support::eventually;
use http::Method;
use portcullis::audit::query::Filter;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A PostgreSQL server of the test's own (it is stopped under load) and a
/// harness whose store is a database on it; the harness's own server is
/// halted, so only the `portcullis serve` the test starts answers.
async fn on_own_postgres(adjust: impl FnOnce(&mut portcullis::config::Config)) -> (PgServer, Portcullis) {
    let pg = tokio::task::spawn_blocking(PgServer::start).await.unwrap().unwrap();
    let url = pg.create_database("audit_outage").unwrap();
    let env = Portcullis::start_with(|c| {
        c.store.url = Some(url);
        adjust(c);
    })
    .await;
    (pg, env)
}

fn stop(pg: &PgServer) {
    tokio::task::block_in_place(|| pg.stop().unwrap());
}

fn start_again(pg: &PgServer) {
    tokio::task::block_in_place(|| pg.start_again().unwrap());
}

/// The Status message of an answer (empty if it has none).
fn message(response: &RawResponse) -> String {
    serde_json::from_slice::<serde_json::Value>(&response.body)
        .ok()
        .and_then(|status| status["message"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// What the load's clients received.
#[derive(Default)]
struct Seen {
    /// The audit ids of the 2xx answers received whole.
    answered: Vec<String>,
    /// Answers of any status.
    total: usize,
}

/// GET until `stop`, noting what comes back; a refusal is followed by a
/// short pause, as a client backs off, so refusals do not flood the spool.
async fn load(raw: Arc<crate::harness::Raw>, token: String, seen: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let Some(response) = raw.try_get(&configmaps(), &token).await else {
            continue;
        };
        let success = response.status.is_success();
        {
            let mut seen = seen.lock().unwrap();
            seen.total += 1;
            if success {
                seen.answered.push(audit_id(&response));
            }
        }
        if !success {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How many rows each audit id of `login` has in the store.
fn rows_by_id(env: &Portcullis, login: &str) -> HashMap<String, usize> {
    rows_matching(
        env,
        Filter {
            login: Some(login.into()),
            ..Filter::default()
        },
    )
}

/// How many rows audit id `id` has in the store (a request refused before
/// it was authenticated has no login).
fn copies(env: &Portcullis, id: &str) -> usize {
    let filter = Filter {
        id: Some(id.into()),
        ..Filter::default()
    };
    rows_matching(env, filter).get(id).copied().unwrap_or(0)
}

fn rows_matching(env: &Portcullis, filter: Filter) -> HashMap<String, usize> {
    let rows = tokio::task::block_in_place(|| portcullis::audit::open(&env.store).unwrap().query(&filter).unwrap());
    let mut counts = HashMap::new();
    for row in rows {
        *counts.entry(row.row.id).or_insert(0) += 1;
    }
    counts
}

fn verify(env: &Portcullis) {
    let verified = env.cli(&["admin", "audit", "verify"]);
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_process_whose_postgresql_stops_under_load_ships_each_answered_requests_row_once_when_it_is_back() {
    let (pg, mut env) = on_own_postgres(|_| {}).await;
    let token = env.person("loader", &[("viewer", Some("shop"))]);
    env.halt().await;
    let serve = Serve::start(&env, &token, "outage").await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let halt = Arc::new(AtomicBool::new(false));
    let loaders: Vec<_> = (0..8)
        .map(|_| tokio::spawn(load(serve.raw.clone(), token.clone(), seen.clone(), halt.clone())))
        .collect();
    eventually("300 answers under load", async || {
        seen.lock().unwrap().answered.len() >= 300
    })
    .await;

    stop(&pg);
    let before = |seen: &Seen| (seen.answered.len(), seen.total);
    let (answered_before, total_before) = before(&seen.lock().unwrap());
    // Reads whose credential and grants are still cached are answered, and
    // spooled; once the caches run out (2 s), they are refused, since the
    // store cannot be asked: PostgreSQL is down longer than that.
    eventually("refusals while PostgreSQL is down", async || {
        let seen = seen.lock().unwrap();
        let refused = (seen.total - total_before) - (seen.answered.len() - answered_before);
        refused >= 50
    })
    .await;
    let answered_while_down = seen.lock().unwrap().answered.len() - answered_before;

    start_again(&pg);
    let answered_at_restart = seen.lock().unwrap().answered.len();
    eventually("served again without a restart", async || {
        seen.lock().unwrap().answered.len() >= answered_at_restart + 300
    })
    .await;
    halt.store(true, Ordering::SeqCst);
    for loader in loaders {
        loader.await.unwrap();
    }
    let answered = seen.lock().unwrap().answered.clone();

    let stored = eventually("every answered request's row", async || {
        let stored = rows_by_id(&env, "loader");
        let missing = answered.iter().filter(|id| !stored.contains_key(*id)).count();
        match missing {
            0 => Ok(stored),
            _ => Err(format!(
                "{missing} of {} answered requests have no row ({answered_while_down} answered while PostgreSQL was down)",
                answered.len()
            )),
        }
    })
    .await;
    let twice: Vec<_> = stored.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "rows committed twice: {twice:?}");
    verify(&env);
    serve.terminate().await;
    assert_eq!(spooled(&env), Vec::<String>::new(), "shipped before exit");
    env.stop().await;
}

/// The audit ids of the rows in the spool's segments.
fn spooled(env: &Portcullis) -> Vec<String> {
    let mut ids = Vec::new();
    for slot in std::fs::read_dir(env.config.data_dir.join("audit-spool")).unwrap() {
        for file in std::fs::read_dir(slot.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "spool") {
                let rows = portcullis::audit::spool::read_rows(&std::fs::read(&path).unwrap());
                ids.extend(rows.into_iter().map(|row| row.id));
            }
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_process_stopped_while_postgresql_is_down_ships_its_spool_before_exit_if_it_is_back_in_time_else_at_the_next_start(
) {
    let (pg, mut env) = on_own_postgres(|_| {}).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    env.halt().await;
    let cms = configmaps();
    let first = Serve::start(&env, &token, "first").await;
    stop(&pg);
    // Answered from the caches, or refused: a row either way.
    let kept = audit_id(&first.raw.get(&cms, &token).await);
    first.terminate().await;
    assert!(spooled(&env).contains(&kept), "left in the spool");

    start_again(&pg);
    let second = Serve::start(&env, &token, "second").await;
    eventually("the row shipped at the next start", async || copies(&env, &kept) == 1).await;
    stop(&pg);
    let shipped = audit_id(&second.raw.get(&cms, &token).await);
    // SIGTERM first (sent at the first poll), then PostgreSQL back.
    tokio::join!(second.terminate(), async { start_again(&pg) });
    assert_eq!(spooled(&env), Vec::<String>::new(), "shipped before exit");
    assert_eq!((copies(&env, &kept), copies(&env, &shipped)), (1, 1));
    verify(&env);
    env.stop().await;
}

/// Send `request` until its answer names the audit store as the reason, or
/// says the credential or grant caches ran out while PostgreSQL is down
/// (`None`: the caller tries again with PostgreSQL back).
async fn refused_naming_the_store(what: &str, mut request: impl AsyncFnMut() -> RawResponse) -> Option<RawResponse> {
    eventually(what, async || {
        let response = request().await;
        let said = message(&response);
        if said.contains("cannot check credentials") || said.contains("cannot read grants") {
            return Ok(None);
        }
        match said.contains("the audit store cannot be reached") {
            true => Ok(Some(response)),
            false => Err(format!("{}: {said}", response.status)),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgresql_is_down_a_write_and_a_read_past_the_spool_bound_are_refused_with_a_503_naming_the_audit_store(
) {
    let (pg, mut env) = on_own_postgres(|c| c.audit.spool_max_bytes = 1).await;
    let starter = env.person("starter", &[("viewer", Some("shop"))]);
    env.halt().await;
    let serve = Serve::start(&env, &starter, "bounded").await;
    let cms = configmaps();
    let never = format!("{cms}/never-sent");
    let mut refused = None;
    // The credential and grant caches last 2 s: a person's first request
    // fills them just before PostgreSQL stops, and if they run out before
    // the refusals are seen, another person tries again.
    for attempt in 0..5 {
        let login = format!("writer{attempt}");
        let token = env.person(&login, &[("developer", Some("shop"))]);
        let auth = format!("Bearer {token}");
        eventually("a first read", async || serve.raw.get(&cms, &token).await.status == 200).await;
        stop(&pg);
        let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "while-down"}});
        let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
        let write = async || {
            let body = serde_json::to_vec(&body).unwrap();
            serve.raw.send(Method::POST, &cms, &headers, body).await
        };
        let Some(write) = refused_naming_the_store("a refused write", write).await else {
            start_again(&pg);
            continue;
        };
        let read = async || serve.raw.get(&never, &token).await;
        let Some(read) = refused_naming_the_store("a refused read", read).await else {
            start_again(&pg);
            continue;
        };
        refused = Some((login, token, write, read));
        break;
    }
    let (login, token, write, read) = refused.expect("refusals seen within the caches' life");
    for refused in [&write, &read] {
        assert_eq!(refused.status, 503, "{}", message(refused));
        assert_eq!(refused.json()["reason"], "ServiceUnavailable");
        assert!(message(refused).contains("cannot record this request in its audit"));
    }
    assert!(message(&read).contains("spool_max_bytes"), "{}", message(&read));
    let sent = env.sim().requests();
    assert!(
        !sent
            .iter()
            .any(|r| (r.method == "POST" && r.path.ends_with("/configmaps")) || r.path.ends_with("/never-sent")),
        "nothing refused reached the cluster"
    );

    start_again(&pg);
    eventually("served again without a restart", async || {
        serve.raw.get(&cms, &token).await.status == 200
    })
    .await;
    let ids = [audit_id(&write), audit_id(&read)];
    let stored = eventually("the refusals' rows", async || {
        let stored = rows_by_id(&env, &login);
        ids.iter().all(|id| stored.contains_key(id)).then_some(stored)
    })
    .await;
    assert!(ids.iter().all(|id| stored[id] == 1), "each once: {stored:?}");
    verify(&env);
    serve.terminate().await;
    env.stop().await;
}
