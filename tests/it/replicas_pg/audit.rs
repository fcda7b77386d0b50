//! One audit for every replica: under concurrent load the replicas append
//! to one chain that verifies, with exactly one row for every answer a
//! client got; a replica killed with SIGKILL ships its spool when it starts
//! again, and nothing of the others' is lost or doubled.

use super::{audit_rows, on_postgres, verify_audit, Replica};
use crate::audit::audit_id;
use crate::harness::{Portcullis, Raw, CLUSTER};
use crate::serve::load;
use crate::support::eventually;
use http::Method;
use portcullis::approvals::HeldState;
use portcullis::audit::query::Filter;
use portcullis::audit::row::AuditRow;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Answered = Arc<Mutex<Vec<String>>>;

/// Create ConfigMaps `<prefix>-<n>` in shop until `stop`, keeping the
/// audit id of every 2xx answer.
async fn write_load(raw: Arc<Raw>, token: String, prefix: String, answered: Answered, stop: Arc<AtomicBool>) {
    let auth = format!("Bearer {token}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{prefix}-{n}")}});
        let answer = raw
            .send(Method::POST, &path, &headers, body.to_string().into_bytes())
            .await;
        if answer.status.is_success() {
            answered.lock().unwrap().push(audit_id(&answer));
        }
    }
}

/// Every row of the audit.
fn all_rows(env: &Portcullis) -> Vec<AuditRow> {
    let filter = Filter {
        discovery: true,
        ..Filter::default()
    };
    audit_rows(env, filter)
}

/// The answered ids that do not have exactly one row among `rows`, with
/// how many they have.
fn not_once<'a>(rows: &[AuditRow], answered: &'a [String]) -> Vec<(&'a str, usize)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for row in rows {
        *counts.entry(row.id.as_str()).or_default() += 1;
    }
    answered
        .iter()
        .map(|id| (id.as_str(), counts.get(id.as_str()).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 1)
        .collect()
}

/// Clients calling replicas until stopped, each keeping the audit ids of
/// the 2xx answers it got in its group's list.
#[derive(Default)]
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `clients` reading ConfigMaps from `replica` with `token`.
    fn reads(&mut self, replica: &Replica, token: &str, clients: usize, answered: &Answered) {
        for _ in 0..clients {
            let (raw, token) = (replica.serve.raw.clone(), token.to_string());
            let task = load(raw, token, answered.clone(), self.stop.clone());
            self.tasks.push(tokio::spawn(task));
        }
    }

    /// One client creating ConfigMaps `<prefix>-<n>` through `replica`.
    fn writes(&mut self, replica: &Replica, token: &str, prefix: &str, answered: &Answered) {
        let raw = replica.serve.raw.clone();
        let task = write_load(raw, token.into(), prefix.into(), answered.clone(), self.stop.clone());
        self.tasks.push(tokio::spawn(task));
    }

    /// Stop every client and wait for it.
    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            task.await.unwrap();
        }
    }
}

fn taken(answered: &Answered) -> Vec<String> {
    answered.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_under_concurrent_reads_and_writes_append_one_intact_chain_with_one_row_per_answer() {
    let mut env = on_postgres(|_| {}).await;
    let reader = env.person("reader", &[("viewer", Some("shop"))]);
    let writer = env.person("writer", &[("developer", Some("shop"))]);
    env.halt().await;
    let (a, b, c) = tokio::join!(
        Replica::start(&env, "a", &reader),
        Replica::start(&env, "b", &reader),
        Replica::start(&env, "c", &reader)
    );
    let (reads, writes): (Answered, Answered) = Default::default();
    let mut load = Load::default();
    for (name, replica) in [("a", &a), ("b", &b), ("c", &c)] {
        load.reads(replica, &reader, 2, &reads);
        load.writes(replica, &writer, &format!("w-{name}"), &writes);
    }
    eventually("300 reads and 30 writes answered", async || {
        reads.lock().unwrap().len() >= 300 && writes.lock().unwrap().len() >= 30
    })
    .await;
    load.stop().await;
    // A clean stop commits what each replica holds.
    tokio::join!(a.serve.terminate(), b.serve.terminate(), c.serve.terminate());

    let said = verify_audit(&env);
    let rows = all_rows(&env);
    assert!(said.contains(&format!("{} rows verified", rows.len())), "{said}");
    let answered = [taken(&reads), taken(&writes)].concat();
    assert_eq!(not_once(&rows, &answered), [], "of {} answers", answered.len());
    env.stop().await;
}

/// Wait until every one of `answered` has exactly one row.
async fn every_row_of(env: &Portcullis, answered: &[String]) {
    eventually("every answer has its row", async || {
        let missing = not_once(&all_rows(env), answered).len();
        (missing == 0)
            .then_some(())
            .ok_or(format!("{missing} of {}", answered.len()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_with_sigkill_under_load_ships_every_answered_row_when_restarted_and_the_others_lose_nothing()
{
    let mut env = on_postgres(|_| {}).await;
    let readers: Vec<String> = ["ra", "rb", "rc"]
        .iter()
        .map(|login| env.person(login, &[("viewer", Some("shop"))]))
        .collect();
    let (bot, ana) = crate::approvals::careful_bot_in(&env, "shop", "developer");
    env.halt().await;
    let (mut a, b, c) = tokio::join!(
        Replica::start(&env, "a", &readers[0]),
        Replica::start(&env, "b", &readers[1]),
        Replica::start(&env, "c", &readers[2])
    );
    let (code, held, _) = super::held::create_flags(b.serve.raw.clone(), bot).await;
    assert_eq!(code, 403, "{held}");
    let id = held["details"]["name"].as_str().unwrap().to_string();
    let before = env.store.held(&id).unwrap().unwrap();

    let answered: [Answered; 3] = Default::default();
    let mut load = Load::default();
    for (i, (replica, clients)) in [(&a, 4), (&b, 1), (&c, 1)].into_iter().enumerate() {
        load.reads(replica, &readers[i], clients, &answered[i]);
    }
    eventually("300 answers from a", async || answered[0].lock().unwrap().len() >= 300).await;
    a.serve.kill();
    load.stop().await;

    // Started again on its data folder, it ships what its spool kept.
    let a = Replica::start_with(&env, a.config.clone(), "a-again", &readers[0]).await;
    every_row_of(&env, &taken(&answered[0])).await;
    let held_now = a.api(Method::GET, &format!("held-writes/{id}"), &ana, json!({})).await;
    assert_eq!(
        (held_now.0, &held_now.1["held_write"]["state"]),
        (200, &json!("pending"))
    );
    tokio::join!(a.serve.terminate(), b.serve.terminate(), c.serve.terminate());

    let rows = all_rows(&env);
    for (name, answers) in ["a", "b", "c"].iter().zip(&answered) {
        let answers = taken(answers);
        assert_eq!(not_once(&rows, &answers), [], "{name}: of {} answers", answers.len());
    }
    let after = env.store.held(&id).unwrap().unwrap();
    assert_eq!((after.state, &after.digest), (HeldState::Pending, &before.digest));
    assert!(env.store.held_body(&id).unwrap().is_some(), "its sealed body is kept");
    verify_audit(&env);
    env.stop().await;
}
