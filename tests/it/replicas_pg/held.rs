//! A held write across replicas: held through one, listed alike on both,
//! approved on the other with the CLI; the agent's calls waiting on both
//! replicas at once end with the write run exactly once.

use super::{audit_rows, on_postgres, Replica};
use crate::audit::audit_id;
use crate::harness::{Portcullis, CLUSTER};
use crate::support::{eventually, kube_client};
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use portcullis::identity::Principal;
use serde_json::{json, Value};
use std::sync::Arc;

const CONFIGMAPS: &str = "/api/v1/namespaces/shop/configmaps";

/// A create of ConfigMap `flags` in shop with `token` through `raw`: the
/// status, the answer's JSON and its audit id.
pub(super) async fn create_flags(raw: Arc<crate::harness::Raw>, token: String) -> (u16, Value, String) {
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "flags", "namespace": "shop"},
        "data": {"checkout": "on"},
    });
    let auth = format!("Bearer {token}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let path = format!("/clusters/{CLUSTER}{CONFIGMAPS}");
    let answer = raw
        .send(Method::POST, &path, &headers, body.to_string().into_bytes())
        .await;
    (answer.status.as_u16(), answer.json(), audit_id(&answer))
}

/// The held writes `replica` lists to ana.
async fn listed(replica: &Replica, ana: &str) -> Value {
    let (code, answer) = replica.api(Method::GET, "held-writes", ana, json!({})).await;
    assert_eq!(code, 200, "{answer}");
    answer["held_writes"].clone()
}

/// Creates of ConfigMaps in shop that reached the cluster for real.
fn real_creates(env: &Portcullis) -> usize {
    let requests = env.sim().requests().into_iter();
    requests
        .filter(|r| r.method == "POST" && r.path == CONFIGMAPS)
        .filter(|r| !r.query.as_deref().unwrap_or_default().contains("dryRun"))
        .count()
}

type Call = (u16, Value, String);

/// The agent's first call, through `a`: held, and listed alike by `a` and
/// `b`. The held write's id and the list.
async fn held_through(a: &Replica, b: &Replica, agent: &str, ana: &str) -> (String, Value) {
    let (code, held, _) = create_flags(a.serve.raw.clone(), agent.to_string()).await;
    assert_eq!(code, 403, "{held}");
    let message = held["message"].as_str().unwrap();
    assert!(message.contains("waits for a person's approval"), "{held}");
    let id = held["details"]["name"].as_str().unwrap().to_string();
    let pending = listed(a, ana).await;
    let shown: Vec<_> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (&h["id"], &h["state"]))
        .collect();
    assert_eq!(shown, [(&json!(id), &json!("pending"))]);
    assert_eq!(listed(b, ana).await, pending, "B lists what A does");
    (id, pending)
}

/// `portcullis_held_writes_waiting` as `replica`'s /metrics says it.
async fn waiting(replica: &Replica) -> String {
    let metrics = replica.serve.raw.get("/metrics", "").await;
    let text = String::from_utf8_lossy(&metrics.body);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("portcullis_held_writes_waiting "));
    line.expect("the gauge is exposed").to_string()
}

/// Of two calls for one approved write, one ran it and the other was told
/// it ran; the cluster saw one create, whose object is the one answered.
async fn ran_once(env: &Portcullis, at_a: &Call, at_b: &Call) {
    let mut codes = [at_a.0, at_b.0];
    codes.sort();
    assert_eq!(codes, [201, 409], "one call ran it: {at_a:?} {at_b:?}");
    let (ran, told) = if at_a.0 == 201 { (at_a, at_b) } else { (at_b, at_a) };
    let message = told.1["message"].as_str().unwrap();
    assert!(message.contains("already ran after approval by ana"), "{message}");
    assert_eq!(real_creates(env), 1, "the write reached the cluster once");
    let admin = kube_client(env.sim(), env.sim().admin_token()).await;
    let flags = Api::<ConfigMap>::namespaced(admin, "shop").get("flags").await.unwrap();
    assert_eq!(
        flags.metadata.resource_version.as_deref(),
        ran.1["metadata"]["resourceVersion"].as_str(),
        "the object is the one run's"
    );
    let logs = Replica::log(env, "a") + &Replica::log(env, "b");
    assert_eq!(logs.matches("approved write ran").count(), 1, "{logs}");
}

/// Both calls began before held write `id` was decided: they were
/// waiting, and the decision on the other replica woke them.
fn waited_for_the_decision(env: &Portcullis, id: &str, calls: [&Call; 2]) {
    let decided = env.store.held(id).unwrap().unwrap().decided_at.unwrap();
    for call in calls {
        let filter = portcullis::audit::query::Filter {
            id: Some(call.2.clone()),
            ..Default::default()
        };
        let row = audit_rows(env, filter).pop().expect("the call's row");
        assert!(row.started_at < decided, "{} began after the decision", row.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_held_on_one_replica_and_approved_on_another_runs_once_for_calls_waiting_on_both() {
    let mut env = on_postgres(|_| {}).await;
    let agent = crate::approvals_mcp::careful_agent(&env);
    let person = Principal::person("ana");
    let ana = env.store.issue_credential(&person, "cli", None).unwrap().1;
    env.halt().await;
    let (a, b) = tokio::join!(Replica::start(&env, "a", &ana), Replica::start(&env, "b", &ana));
    let (id, pending) = held_through(&a, &b, &agent, &ana).await;
    assert_eq!(real_creates(&env), 0, "only the dry run reached the cluster");

    // The agent calls again on both replicas at once; both wait.
    let at_a = tokio::spawn(create_flags(a.serve.raw.clone(), agent.clone()));
    let at_b = tokio::spawn(create_flags(b.serve.raw.clone(), agent.clone()));
    assert_eq!(listed(&a, &ana).await, pending);
    for replica in [&a, &b] {
        eventually("the call waits for the decision", async || {
            (waiting(replica).await == "1").then_some(())
        })
        .await;
    }
    let approved = tokio::task::block_in_place(|| b.person_cli(&env, &ana, &["approvals", "approve", &id]));
    let said = String::from_utf8_lossy(&approved.stdout);
    assert!(
        approved.status.success() && said.contains("approved"),
        "{said}{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let (at_a, at_b) = (at_a.await.unwrap(), at_b.await.unwrap());
    ran_once(&env, &at_a, &at_b).await;
    for replica in [&a, &b] {
        assert_eq!(waiting(replica).await, "0", "no call waits once both answered");
    }

    let executed = listed(&a, &ana).await;
    assert_eq!(executed[0]["state"], "executed", "{executed}");
    assert_eq!(listed(&b, &ana).await, executed, "B lists what A does");
    // Stopped cleanly, so that every row is committed.
    tokio::join!(a.serve.terminate(), b.serve.terminate());
    waited_for_the_decision(&env, &id, [&at_a, &at_b]);
    env.stop().await;
}
