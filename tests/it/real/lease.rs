//! Two replicas of one installation (one store) in front of the real
//! cluster, as portcullis's ServiceAccount with exactly `deploy/rbac.yaml`:
//! kube-apiserver accepts the Lease that picks the one reconciling, and
//! another replica takes it over when its holder stops.

use super::grants::{admin_kube, binding};
use crate::harness::{Portcullis, REAL_CLUSTER};
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

/// The reconciler's Lease's holder, as the cluster's admin sees it.
async fn lease_holder(env: &Portcullis) -> Option<String> {
    let name = portcullis::reconcile::lease::lease_name(env.reconciler.instance().id());
    let leases = Api::<Lease>::namespaced(admin_kube().await, "portcullis");
    let lease = leases.get_opt(&name).await.unwrap()?;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

fn last_pass(env: &Portcullis) -> Option<chrono::DateTime<chrono::Utc>> {
    let status = env.reconciler.status().into_iter().find(|s| s.cluster == REAL_CLUSTER);
    status?.last_reconcile
}

/// Store a grant and ask both replicas to pass: it is bound, by `leader`'s
/// loop only.
async fn bound_by_the_leader_alone(leader: &Portcullis, follower: &Portcullis) {
    let ns = super::shared().namespace("lease").unwrap();
    let (follower_last, leader_last) = (last_pass(follower), last_pass(leader));
    let ana = Principal::person("ana");
    leader.store.add_principal(&ana, false).unwrap();
    let hour = Duration::from_secs(3600);
    let grant = portcullis::cli::new_grant(&leader.config, ana, REAL_CLUSTER, "viewer", Some(ns.clone()), hour, "t");
    let grant = grant.unwrap();
    leader.store.add_grant(&grant).unwrap();
    let id = grant.id;
    follower.reconciler.trigger(REAL_CLUSTER);
    leader.reconciler.trigger(REAL_CLUSTER);
    eventually("the grant is bound", || async { binding(&ns, &id).await.is_some() }).await;
    eventually("the leader's pass is recorded", || async {
        last_pass(leader) > leader_last
    })
    .await;
    assert_eq!(last_pass(follower), follower_last, "the follower passed too");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_replica_holding_the_lease_alone_binds_a_grant_and_another_takes_the_lease_when_it_stops() {
    let mut first = Portcullis::start_real_with(short_lease).await;
    let mut second = Portcullis::start_real_with(|c| {
        short_lease(c);
        c.data_dir = first.config.data_dir.clone();
        c.approvals.key_file = first.config.approvals.key_file.clone();
    })
    .await;
    assert_eq!(first.reconciler.instance(), second.reconciler.instance());
    let leads = |env: &Portcullis| env.reconciler.leads(REAL_CLUSTER);
    eventually("one replica leads", || async { leads(&first) || leads(&second) }).await;
    let first_leads = leads(&first);
    let (leader, follower) = if first_leads {
        (&mut first, &second)
    } else {
        (&mut second, &first)
    };
    assert!(!leads(follower), "both replicas lead");
    assert_eq!(
        lease_holder(leader).await.as_deref(),
        Some(leader.reconciler.identity())
    );

    bound_by_the_leader_alone(leader, follower).await;

    leader.halt().await;
    eventually("the follower holds the Lease", || async {
        lease_holder(follower).await.as_deref() == Some(follower.reconciler.identity())
    })
    .await;
    eventually("the follower leads", || async { leads(follower) }).await;
    second.stop().await;
    first.stop().await;
}
