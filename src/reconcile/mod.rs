//! The reconciler: keeps each cluster's RBAC objects in step with
//! portcullis's roles and grants, with kube-rs and server-side apply.
//!
//! A grant is only real when the cluster's RBAC honours it: each role is a
//! ClusterRole `portcullis:<role>`, each grant in effect a binding of its
//! group `portcullis:grant:<id>` to that ClusterRole (see [`desired`]).
//! Access still ends the moment a grant expires or is revoked, because the
//! gateway stops sending its group; the reconciler then removes the binding.
//!
//! - [`instance`]: which installation this is, so that two in front of one
//!   cluster never touch each other's objects.
//! - [`desired`]: what a cluster should hold and what a pass must do (pure).
//! - [`cluster`]: one cluster's RBAC API (list owned, apply, release,
//!   delete).
//! - [`pass`]: one pass, recording the cluster's [`status`].
//! - [`lease`]: the Lease that lets one replica at a time reconcile a
//!   cluster.
//! - `portcullis cluster status`, and the pass the CLI runs itself after
//!   changing a grant, are `crate::cli::cluster`.
//!
//! Each cluster has its own loop: a pass at start, then one every `resync`
//! (20 s), one as soon as [`Reconciler::trigger`] is called (a grant changed
//! in this process), one just after the next bound grant expires, and after
//! a failed pass, retries with exponential backoff (1 s doubling to 30 s).
//! A cluster that is down at start is simply retried.
//!
//! That loop runs only on the replica holding the cluster's [`lease`], so
//! several replicas do not each resync and expire the same objects; the
//! others try for the Lease every third of its duration, and one takes over
//! when the holder stops (at once when it releases the Lease on shutdown).
//! [`Reconciler::pass_now`] is a pass asked for by a request in this
//! process (a grant just made, to be bound before the answer): it runs on
//! any replica, like the CLI's own pass, since passes are safe to overlap.

pub mod cluster;
pub mod desired;
pub mod instance;
pub mod lease;
pub mod pass;
pub mod status;

use crate::audit::forwarded::Recorder;
use crate::config::Config;
use crate::identity::clock::GrantClock;
use crate::identity::roles::Role;
use crate::store::Store;
use chrono::Utc;
use cluster::{ClientError, ClusterClient};
use instance::Instance;
use lease::ClusterLease;
use pass::PassReport;
use status::ClusterStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The longest wait between retries of a failing cluster.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A pass was asked of a cluster portcullis does not serve.
#[derive(Debug, thiserror::Error)]
#[error("unknown cluster {0:?}")]
pub struct UnknownCluster(pub String);

/// One cluster's reconcile state.
struct Cluster {
    client: ClusterClient,
    /// A pass is wanted now.
    wake: Notify,
    /// A pass ran outside the loop: recompute when the next one is due.
    rescheduled: Notify,
    /// One pass at a time per cluster in this process.
    running: tokio::sync::Mutex<()>,
    /// The last pass's report (its status, its next expiry).
    last: Mutex<PassReport>,
    /// Whether this replica is the one to reconcile it.
    lease: ClusterLease,
}

/// The reconcilers of every configured cluster.
pub struct Reconciler {
    clusters: Vec<Arc<Cluster>>,
    store: Store,
    roles: Arc<Vec<Role>>,
    /// `protected_namespaces`: no grant is bound there.
    protected: Arc<Vec<String>>,
    resync: Duration,
    instance: Instance,
    /// This replica's name in the clusters' Leases.
    identity: String,
    /// The time grants are judged by: the policy stage's, so a grant's
    /// binding goes when its group stops being sent.
    clock: GrantClock,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.clusters.iter().map(|c| c.client.name.as_str()).collect();
        f.debug_struct("Reconciler")
            .field("clusters", &names)
            .field("instance", &self.instance)
            .finish()
    }
}

impl Reconciler {
    /// Build a client per cluster of `config` (no connection yet), as the
    /// installation [`Instance::resolve`] names, judging grants by `clock`.
    /// Its requests are recorded through `recorder` (see
    /// [`ClusterClient::new`]).
    pub fn new(
        config: &Config,
        store: Store,
        clock: GrantClock,
        recorder: Recorder,
    ) -> Result<Reconciler, ClientError> {
        let instance = Instance::resolve(config, &store)?;
        let identity = lease::replica_identity();
        let settings = &config.reconcile;
        let clusters = config
            .clusters
            .iter()
            .map(|c| {
                let client = ClusterClient::new(c, recorder.clone())?;
                let lease = ClusterLease::new(
                    client.clone(),
                    &settings.lease_namespace,
                    lease::lease_name(instance.id()),
                    identity.clone(),
                    settings.lease_duration,
                );
                Ok(Arc::new(Cluster {
                    client,
                    lease,
                    wake: Notify::new(),
                    rescheduled: Notify::new(),
                    running: tokio::sync::Mutex::new(()),
                    last: Mutex::new(PassReport {
                        status: ClusterStatus {
                            cluster: c.name.clone(),
                            ..Default::default()
                        },
                        ..Default::default()
                    }),
                }))
            })
            .collect::<Result<_, ClientError>>()?;
        Ok(Reconciler {
            clusters,
            store,
            roles: Arc::new(crate::identity::roles::all(config)),
            protected: Arc::new(config.protected_namespaces.clone()),
            resync: config.reconcile.resync,
            instance,
            identity,
            clock,
        })
    }

    /// This installation's id in the clusters' RBAC objects.
    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// This replica's name in the clusters' Leases (`holderIdentity`).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Does this replica hold `cluster`'s Lease, and so reconcile it?
    pub fn leads(&self, cluster: &str) -> bool {
        self.find(cluster).is_ok_and(|c| c.lease.leads())
    }

    /// Give up every Lease this replica holds (graceful shutdown, after
    /// [`Self::run`] was stopped), so another replica takes over at once.
    pub async fn release(&self) {
        let all = self.clusters.iter().map(|c| c.lease.release());
        futures_util::future::join_all(all).await;
    }

    /// Run one pass of `cluster` now and wait for it (the CLI, the demo
    /// and tests use this to know a grant is bound).
    pub async fn pass_now(&self, cluster: &str) -> Result<PassReport, UnknownCluster> {
        let found = self.find(cluster)?;
        let report = self.pass(&found).await;
        // Its grants may expire before the loop's next pass.
        found.rescheduled.notify_one();
        Ok(report)
    }

    /// Ask for a pass of `cluster` as soon as possible (a grant changed).
    pub fn trigger(&self, cluster: &str) {
        if let Ok(found) = self.find(cluster) {
            found.wake.notify_one();
        }
    }

    /// The clusters' statuses as this process last saw them.
    pub fn status(&self) -> Vec<ClusterStatus> {
        self.clusters
            .iter()
            .map(|c| c.last.lock().unwrap_or_else(|p| p.into_inner()).status.clone())
            .collect()
    }

    /// Keep every cluster whose Lease this replica holds in step until the
    /// returned future is dropped (or its task aborted).
    pub async fn run(self: Arc<Self>) {
        let loops: Vec<_> = self
            .clusters
            .iter()
            .map(|c| tokio::spawn(self.clone().lead(c.clone())))
            .collect();
        // Aborts the loops when this future is dropped.
        let _guard = AbortOnDrop(loops.iter().map(|l| l.abort_handle()).collect());
        for one in loops {
            let _ = one.await;
        }
    }

    fn find(&self, cluster: &str) -> Result<Arc<Cluster>, UnknownCluster> {
        self.clusters
            .iter()
            .find(|c| c.client.name == cluster)
            .cloned()
            .ok_or_else(|| UnknownCluster(cluster.to_string()))
    }

    async fn pass(&self, cluster: &Cluster) -> PassReport {
        let _one_at_a_time = cluster.running.lock().await;
        self.pass_locked(cluster).await
    }

    async fn pass_locked(&self, cluster: &Cluster) -> PassReport {
        let wanted = (self.roles.as_slice(), self.protected.as_slice());
        let report = pass::run_pass(&cluster.client, &self.store, wanted, &self.instance, &self.clock).await;
        *cluster.last.lock().unwrap_or_else(|p| p.into_inner()) = report.clone();
        report
    }

    /// The loop's first pass, unless [`Self::pass_now`] just ran one (the
    /// demo and tests do at start): a second one would only repeat it.
    async fn first_pass(&self, cluster: &Cluster) -> PassReport {
        let _one_at_a_time = cluster.running.lock().await;
        let last = cluster.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let recent = last
            .status
            .last_reconcile
            .is_some_and(|t| (Utc::now() - t).to_std().is_ok_and(|d| d < self.resync));
        if recent && last.outcome.ok() {
            return last;
        }
        self.pass_locked(cluster).await
    }

    /// Wait for the Lease, keep the cluster in step while holding it, and
    /// wait again when it is lost.
    async fn lead(self: Arc<Self>, cluster: Arc<Cluster>) {
        loop {
            cluster.lease.acquire().await;
            tracing::info!(cluster = %cluster.client.name, identity = %self.identity, "holding the reconciler's Lease");
            tokio::select! {
                () = self.clone().keep_in_step(cluster.clone()) => {}
                () = cluster.lease.hold() => {}
            }
            tracing::warn!(cluster = %cluster.client.name, "lost the reconciler's Lease: another replica reconciles");
        }
    }

    async fn keep_in_step(self: Arc<Self>, cluster: Arc<Cluster>) {
        let mut failures = 0;
        let mut report = self.first_pass(&cluster).await;
        loop {
            failures = if report.outcome.ok() { 0 } else { failures + 1 };
            loop {
                // Taken before the clock is read, so that no move of the
                // clock between the two is missed.
                let moved = self.clock.moved();
                // The latest pass, the loop's or another's, says when the
                // next grant expires.
                let next_expiry = cluster.last.lock().unwrap_or_else(|p| p.into_inner()).next_expiry;
                let wait = next_wait(self.resync, failures, next_expiry.map(|t| t - self.clock.now()));
                tokio::select! {
                    () = tokio::time::sleep(wait) => break,
                    () = cluster.wake.notified() => break,
                    () = cluster.rescheduled.notified() => continue,
                    // Grants may have expired sooner than the wait said.
                    () = moved => continue,
                }
            }
            report = self.pass(&cluster).await;
        }
    }
}

/// How long to wait before the next pass: the resync period, or the backoff
/// after `failures` failed passes in a row, but no later than just after the
/// next expiry.
fn next_wait(resync: Duration, failures: u32, until_expiry: Option<chrono::TimeDelta>) -> Duration {
    let wait = match failures {
        0 => resync,
        n => Duration::from_secs(1u64 << (n - 1).min(5))
            .min(MAX_BACKOFF)
            .min(resync.max(Duration::from_secs(1))),
    };
    match until_expiry {
        // A second after the expiry, so the grant is no longer in effect.
        Some(left) => wait.min(left.to_std().unwrap_or_default() + Duration::from_secs(1)),
        None => wait,
    }
}

struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_passes_back_off_exponentially_up_to_a_cap() {
        let resync = Duration::from_secs(20);
        let waits: Vec<u64> = (0..8).map(|n| next_wait(resync, n, None).as_secs()).collect();
        assert_eq!(waits, [20, 1, 2, 4, 8, 16, 20, 20]);
        let long = Duration::from_secs(300);
        assert_eq!(next_wait(long, 7, None), MAX_BACKOFF);
    }

    #[test]
    fn a_pass_is_due_just_after_the_next_expiry() {
        let resync = Duration::from_secs(20);
        assert_eq!(
            next_wait(resync, 0, Some(chrono::TimeDelta::seconds(3))),
            Duration::from_secs(4)
        );
        assert_eq!(
            next_wait(resync, 0, Some(chrono::TimeDelta::seconds(-5))),
            Duration::from_secs(1)
        );
        assert_eq!(next_wait(resync, 0, Some(chrono::TimeDelta::seconds(600))), resync);
    }
}
