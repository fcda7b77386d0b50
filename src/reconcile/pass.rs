//! One reconcile pass of one cluster: list what portcullis owns there, read
//! the grants, apply what is missing or changed, delete what nothing
//! explains, and record the status.

use super::cluster::{is_unreachable, ClusterClient};
use super::desired::{desired, plan, Object, ObjectKey};
use super::status::{ClusterStatus, PassOutcome};
use crate::identity::roles::Role;
use crate::identity::Grant;
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// The longest one pass may take before it counts as failed.
const PASS_TIMEOUT: Duration = Duration::from_secs(60);

/// What a pass did, and when the next one is due because a grant expires.
#[derive(Debug, Clone, Default)]
pub struct PassReport {
    /// Counts and errors.
    pub outcome: PassOutcome,
    /// The soonest expiry among the grants now bound.
    pub next_expiry: Option<DateTime<Utc>>,
    /// The status recorded.
    pub status: ClusterStatus,
}

/// Run one pass of `client`'s cluster and record its status in `store`.
pub async fn run_pass(client: &ClusterClient, store: &Store, roles: &[Role]) -> PassReport {
    let (outcome, next_expiry) = match tokio::time::timeout(PASS_TIMEOUT, reconcile(client, store, roles)).await {
        Ok(done) => done,
        Err(_) => (
            PassOutcome {
                errors: vec!["the pass timed out".into()],
                ..Default::default()
            },
            None,
        ),
    };
    let status = record(store, &client.name, &outcome).await;
    if outcome.ok() {
        tracing::debug!(cluster = %client.name, applied = outcome.applied, removed = outcome.removed, "reconciled");
    } else {
        tracing::warn!(cluster = %client.name, reachable = outcome.reachable, errors = ?outcome.errors, "reconcile pass failed");
    }
    PassReport {
        outcome,
        next_expiry,
        status,
    }
}

async fn reconcile(client: &ClusterClient, store: &Store, roles: &[Role]) -> (PassOutcome, Option<DateTime<Utc>>) {
    let mut outcome = PassOutcome::default();
    // List the cluster before reading the grants: a binding another process
    // created for a new grant is then always explained by what is read next,
    // so it is never mistaken for a stray.
    let actual = match client.list_owned().await {
        Ok(actual) => actual,
        Err(e) => {
            outcome.reachable = !is_unreachable(&e);
            outcome.errors.push(format!("listing portcullis's RBAC objects: {e}"));
            return (outcome, None);
        }
    };
    outcome.reachable = true;
    let grants = match read_grants(store, &client.name).await {
        Ok(grants) => grants,
        Err(e) => return (failed(outcome, e), None),
    };
    let want = desired(roles, &grants, &client.name, Utc::now());
    outcome.errors.extend(want.errors.iter().map(ToString::to_string));
    let plan = plan(&want, &actual);
    outcome.roles_wanted = want.roles;
    outcome.bindings_wanted = want.bindings;
    let (roles_failed, bindings_failed) = apply_missing(client, &plan.apply, &mut outcome).await;
    delete_strays(client, &plan.delete, &mut outcome).await;
    outcome.roles_in_step = want.roles - roles_failed;
    outcome.bindings_in_step = want.bindings - bindings_failed;
    (outcome, want.next_expiry)
}

/// The grants not revoked on `cluster`, read off the async threads: the
/// store blocks.
async fn read_grants(store: &Store, cluster: &str) -> Result<Vec<Grant>, String> {
    let store = store.clone();
    let cluster = cluster.to_string();
    match tokio::task::spawn_blocking(move || store.unrevoked_grants_on(&cluster)).await {
        Ok(Ok(grants)) => Ok(grants),
        Ok(Err(e)) => Err(format!("reading grants: {e}")),
        Err(e) => Err(format!("reading grants: {e}")),
    }
}

/// Apply the missing or changed objects; returns how many ClusterRoles and
/// how many bindings failed, which are then out of step.
async fn apply_missing(client: &ClusterClient, objects: &[Object], outcome: &mut PassOutcome) -> (usize, usize) {
    let (mut roles_failed, mut bindings_failed) = (0, 0);
    for object in objects {
        match client.apply(object).await {
            Ok(()) => outcome.applied += 1,
            Err(e) => {
                if matches!(object, Object::ClusterRole(_)) {
                    roles_failed += 1;
                } else {
                    bindings_failed += 1;
                }
                outcome.errors.push(format!("applying {}: {}", object.key(), brief(&e)));
            }
        }
    }
    (roles_failed, bindings_failed)
}

/// Delete the labelled objects nothing explains.
async fn delete_strays(client: &ClusterClient, keys: &[ObjectKey], outcome: &mut PassOutcome) {
    for key in keys {
        match client.delete(key).await {
            Ok(()) => outcome.removed += 1,
            Err(e) => outcome.errors.push(format!("deleting {key}: {}", brief(&e))),
        }
    }
}

fn failed(mut outcome: PassOutcome, error: String) -> PassOutcome {
    outcome.errors.push(error);
    outcome
}

/// The cluster's own message when it answered, else kube-rs's.
fn brief(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

/// Save the status after `outcome` (reading the previous one for "since").
async fn record(store: &Store, cluster: &str, outcome: &PassOutcome) -> ClusterStatus {
    let (store, cluster, outcome) = (store.clone(), cluster.to_string(), outcome.clone());
    let saved = tokio::task::spawn_blocking(move || {
        let previous = store.cluster_status(&cluster).ok().flatten().unwrap_or_default();
        let status = previous.after(&cluster, &outcome, Utc::now());
        if let Err(error) = store.save_cluster_status(&status) {
            tracing::error!(%cluster, %error, "cannot record the cluster's reconcile status");
        }
        status
    })
    .await;
    saved.unwrap_or_default()
}
