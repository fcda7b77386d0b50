//! The reconciler's Lease among replicas on PostgreSQL: one holds it, and
//! when it stops (SIGTERM) another takes it and reconciles what the first
//! left undone.

use super::{on_postgres, Replica};
use crate::harness::{Portcullis, CLUSTER};
use crate::rbac::bound;
use crate::support::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use portcullis::identity::Principal;
use std::time::Duration;

/// Short, so that the follower tries for a released Lease soon (every
/// third of it); long enough that a loaded machine does not miss renewals.
const LEASE_DURATION: Duration = Duration::from_secs(6);

/// When any replica last passed, as the store records it.
fn last_pass(env: &Portcullis) -> Option<chrono::DateTime<chrono::Utc>> {
    env.store.cluster_status(CLUSTER).unwrap()?.last_reconcile
}

/// The Lease's holder, as the cluster's admin reads it.
async fn lease_holder(env: &Portcullis) -> Option<String> {
    let client = crate::support::kube_client(env.sim(), env.sim().admin_token()).await;
    let name = portcullis::reconcile::lease::lease_name(env.reconciler.instance().id());
    let lease = Api::<Lease>::namespaced(client, "portcullis")
        .get_opt(&name)
        .await
        .unwrap()?;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Which of `names` logged taking the Lease as `holder` (a replica's
/// identity is its host name and a random part, known only from its log).
fn holder_among<'a>(env: &Portcullis, names: &[&'a str], holder: &str) -> Option<&'a str> {
    let said = format!("holding the reconciler's Lease cluster={CLUSTER} identity={holder}");
    names
        .iter()
        .copied()
        .find(|name| Replica::log(env, name).contains(&said))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_moves_to_another_replica_when_its_holder_stops_and_the_new_holder_reconciles() {
    let mut env = on_postgres(|c| c.reconcile.lease_duration = LEASE_DURATION).await;
    let watcher = env.person("watcher", &[("viewer", Some("shop"))]);
    // The harness's own server releases the Lease as it stops.
    env.halt().await;
    let started = chrono::Utc::now();
    let (a, b) = tokio::join!(Replica::start(&env, "a", &watcher), Replica::start(&env, "b", &watcher));
    let names = ["a", "b"];
    let first = eventually("a replica holds the Lease", async || {
        let holder = lease_holder(&env).await?;
        holder_among(&env, &names, &holder).map(|name| (name, holder))
    })
    .await;
    eventually("the holder's first pass", async || last_pass(&env) > Some(started)).await;

    // A grant stored without a pass: the holder's loop waits for its
    // hourly resync, so it stays unbound while the first holder leads.
    let hour = Duration::from_secs(3600);
    let grant = portcullis::cli::new_grant(
        &env.config,
        Principal::person("watcher"),
        CLUSTER,
        "developer",
        Some("shop".into()),
        hour,
        "t",
    )
    .unwrap();
    env.store.add_grant(&grant).unwrap();
    assert!(!bound(&env, "shop", &grant.id).await);

    let (stopped, follower) = if first.0 == "a" { (a, b) } else { (b, a) };
    stopped.serve.terminate().await;
    let second = eventually("the other replica holds the Lease", async || {
        let holder = lease_holder(&env).await?;
        holder_among(&env, &names, &holder).filter(|name| *name != first.0)
    })
    .await;
    assert_ne!(second, first.0);
    eventually("the new holder's first pass binds the grant", async || {
        bound(&env, "shop", &grant.id).await
    })
    .await;
    follower.serve.terminate().await;
    env.stop().await;
}
