//! Several replicas of one installation (one store) in front of one
//! cluster: the one holding the cluster's Lease reconciles it, and another
//! takes over when it stops.

use crate::harness::{Portcullis, CLUSTER};
use crate::rbac::bound;
use crate::support::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use portcullis::config::Config;
use portcullis::identity::Principal;
use std::time::Duration;

/// Short, so that the test sees a takeover soon; long enough that a
/// loaded machine does not miss renewals (a stall of a third of it let the
/// follower take the Lease from a holder still running).
const LEASE_DURATION: Duration = Duration::from_secs(6);

fn short_lease(config: &mut Config) {
    config.reconcile.lease_duration = LEASE_DURATION;
}

/// A second replica of `first`: the same store (so the same instance id)
/// and approvals key, in front of the same cluster.
async fn replica_of(first: &Portcullis) -> Portcullis {
    Portcullis::start_beside(first, |c| {
        short_lease(c);
        c.data_dir = first.config.data_dir.clone();
        c.approvals.key_file = first.config.approvals.key_file.clone();
    })
    .await
}

/// The reconciler's Lease as the cluster's admin sees it: its holder.
async fn lease_holder(env: &Portcullis) -> Option<String> {
    let client = crate::support::kube_client(env.sim(), env.sim().admin_token()).await;
    let name = portcullis::reconcile::lease::lease_name(env.reconciler.instance().id());
    let lease = Api::<Lease>::namespaced(client, "portcullis")
        .get_opt(&name)
        .await
        .unwrap()?;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// When `env` last passed, as its own reconcile status says.
fn last_pass(env: &Portcullis) -> Option<chrono::DateTime<chrono::Utc>> {
    env.reconciler
        .status()
        .into_iter()
        .find(|s| s.cluster == CLUSTER)?
        .last_reconcile
}

/// Grant `ana` viewer in shop for an hour, without a pass; its id.
fn stored_grant(env: &Portcullis) -> String {
    let ana = Principal::person("ana");
    let _ = env.store.add_principal(&ana, false);
    let hour = Duration::from_secs(3600);
    let grant =
        portcullis::cli::new_grant(&env.config, ana, CLUSTER, "viewer", Some("shop".into()), hour, "t").unwrap();
    env.store.add_grant(&grant).unwrap();
    grant.id
}

/// Store a grant and ask both replicas to pass: it is bound, by `leader`'s
/// loop only. The grant's id, and when `follower` last passed.
async fn bound_by_the_leader_alone(
    sim: &Portcullis,
    leader: &Portcullis,
    follower: &Portcullis,
) -> (String, Option<chrono::DateTime<chrono::Utc>>) {
    let (follower_last, leader_last) = (last_pass(follower), last_pass(leader));
    let id = stored_grant(leader);
    follower.reconciler.trigger(CLUSTER);
    leader.reconciler.trigger(CLUSTER);
    eventually("the grant is bound", || async { bound(sim, "shop", &id).await }).await;
    eventually("the leader's pass is recorded", || async {
        last_pass(leader) > leader_last
    })
    .await;
    assert_eq!(last_pass(follower), follower_last, "the follower passed too");
    (id, follower_last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_holds_the_lease_and_alone_reconciles_and_another_takes_over_when_it_stops() {
    let mut first = Portcullis::start_with(short_lease).await;
    let mut second = replica_of(&first).await;
    assert_eq!(first.reconciler.instance(), second.reconciler.instance());
    assert_ne!(first.reconciler.identity(), second.reconciler.identity());

    // Exactly one leads, and the Lease names it.
    let leads = |env: &Portcullis| env.reconciler.leads(CLUSTER);
    eventually("one replica leads", || async { leads(&first) || leads(&second) }).await;
    let first_leads = leads(&first);
    let (leader, follower) = if first_leads {
        (&first, &second)
    } else {
        (&second, &first)
    };
    assert!(!leads(follower), "both replicas lead");
    let holder = lease_holder(&first).await;
    assert_eq!(holder.as_deref(), Some(leader.reconciler.identity()));

    let (id, follower_last) = bound_by_the_leader_alone(&first, leader, follower).await;

    // The leader stops (releasing the Lease): the follower takes over
    // (a released Lease is taken at once: reconcile::lease::tests) and reconciles from then on.
    let (leader, follower) = if first_leads {
        (&mut first, &second)
    } else {
        (&mut second, &first)
    };
    leader.halt().await;
    let sim = if first_leads { &*leader } else { follower };
    eventually("the follower holds the Lease", || async {
        lease_holder(sim).await.as_deref() == Some(follower.reconciler.identity())
    })
    .await;
    eventually("the follower leads", || async { leads(follower) }).await;
    follower.store.revoke_grant(&id).unwrap();
    follower.reconciler.trigger(CLUSTER);
    eventually("the revoked grant's binding is removed", || async {
        !bound(sim, "shop", &id).await
    })
    .await;
    // A pass records itself when it ends, after the bindings it removed:
    // the binding can be gone before the pass is recorded.
    eventually("the new leader's pass is recorded", || async {
        last_pass(follower) > follower_last
    })
    .await;
    second.stop().await;
    first.stop().await;
}
