//! One reconcile pass of one cluster: list what this installation owns or
//! shares there, read the grants, apply what is missing or changed, delete
//! what nothing explains, give up the shared ClusterRoles it no longer uses,
//! and record the status.

use super::cluster::{is_unreachable, ClusterClient};
use super::desired::{binding_name, desired, plan, Apply, Deletion, Listed, Object, ObjectKey};
use super::instance::Instance;
use super::status::{ClusterStatus, PassOutcome};
use crate::identity::clock::GrantClock;
use crate::identity::roles::Role;
use crate::identity::Grant;
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::collections::HashSet;
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

/// Run one pass of `client`'s cluster as `instance` and record its status
/// in `store`; grants are judged by `clock`.
pub async fn run_pass(
    client: &ClusterClient,
    store: &Store,
    (roles, protected): (&[Role], &[String]),
    instance: &Instance,
    clock: &GrantClock,
) -> PassReport {
    let pass = reconcile(client, store, (roles, protected), instance, clock);
    let (outcome, next_expiry) = match tokio::time::timeout(PASS_TIMEOUT, pass).await {
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

async fn reconcile(
    client: &ClusterClient,
    store: &Store,
    (roles, protected): (&[Role], &[String]),
    instance: &Instance,
    clock: &GrantClock,
) -> (PassOutcome, Option<DateTime<Utc>>) {
    let mut outcome = PassOutcome::default();
    // List the cluster before reading the grants: a binding another process
    // created for a new grant is then always explained by what is read next,
    // so it is never mistaken for a stray.
    let (mut listed, unmarked) = match list(client, instance).await {
        Ok(listed) => listed,
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
    match adopted(store, &client.name, unmarked).await {
        Ok(mut ours) => listed.bindings.append(&mut ours),
        Err(e) => return (failed(outcome, e), None),
    }
    let want = desired(roles, protected, &grants, &client.name, clock.now(), instance);
    outcome.errors.extend(want.errors.iter().map(ToString::to_string));
    let plan = plan(&want, &listed, instance);
    outcome.roles_wanted = want.roles;
    outcome.bindings_wanted = want.bindings;
    let (roles_failed, bindings_failed) = apply_missing(client, instance, &plan.apply, &mut outcome).await;
    delete_strays(client, &plan.delete, &mut outcome).await;
    release_unused(client, instance, &plan.release, &mut outcome).await;
    outcome.errors.extend(plan.conflicts.iter().map(ToString::to_string));
    let mut out_of_step = roles_failed;
    out_of_step.extend(plan.conflicts.iter().map(|c| c.name.clone()));
    outcome.roles_in_step = want.roles.saturating_sub(out_of_step.len());
    outcome.bindings_in_step = want.bindings.saturating_sub(bindings_failed + plan.unbound);
    (outcome, want.next_expiry)
}

/// What the pass lists: the shared ClusterRoles and this installation's
/// bindings, and apart, the bindings from before instance ids.
async fn list(client: &ClusterClient, instance: &Instance) -> Result<(Listed, Vec<Object>), kube::Error> {
    let (roles, bindings) = client.list_owned(instance).await?;
    let unmarked = client.list_unmarked_bindings().await?;
    Ok((Listed { roles, bindings }, unmarked))
}

/// The bindings from before instance ids that this installation wrote: those
/// of a grant in its own store for this cluster (grant ids are UUIDs, so no
/// other installation's store has them). Another installation's are left
/// for it to adopt.
async fn adopted(store: &Store, cluster: &str, unmarked: Vec<Object>) -> Result<Vec<Object>, String> {
    if unmarked.is_empty() {
        return Ok(unmarked);
    }
    let (store, cluster) = (store.clone(), cluster.to_string());
    let task = tokio::task::spawn_blocking(move || {
        let mut ours = Vec::new();
        for object in unmarked {
            let name = match object.key() {
                ObjectKey::ClusterRoleBinding(name) | ObjectKey::RoleBinding(_, name) => name,
                ObjectKey::ClusterRole(_) => continue,
            };
            let Some(id) = name.strip_prefix(&binding_name("")) else {
                continue;
            };
            match store.grant(id) {
                Ok(grant) if grant.cluster == cluster => ours.push(object),
                Ok(_) | Err(crate::store::StoreError::NotFound(_)) => {}
                Err(e) => return Err(format!("reading grant {id}: {e}")),
            }
        }
        Ok(ours)
    });
    task.await.map_err(|e| format!("reading grants: {e}"))?
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

/// Apply the missing or changed objects; returns the ClusterRoles and how
/// many bindings failed, which are then out of step.
async fn apply_missing(
    client: &ClusterClient,
    instance: &Instance,
    applies: &[Apply],
    outcome: &mut PassOutcome,
) -> (HashSet<String>, usize) {
    let (mut roles_failed, mut bindings_failed) = (HashSet::new(), 0);
    for apply in applies {
        let mut applied = client.apply(apply, instance).await;
        // A binding of a grant's name made again bound to another role (a
        // namespace's admin may; labelled as ours or not): its roleRef
        // cannot change, so it is deleted and made again.
        if let Err(kube::Error::Api(status)) = &applied {
            let binding = !matches!(apply.object.key(), ObjectKey::ClusterRole(_));
            if binding && status.code == 422 && status.message.contains("roleRef") {
                let deletion = Deletion {
                    key: apply.object.key(),
                    resource_version: None,
                };
                if client.delete(&deletion).await.is_ok() {
                    applied = client.apply(apply, instance).await;
                }
            }
        }
        match applied {
            Ok(()) => outcome.applied += 1,
            Err(e) => {
                if let ObjectKey::ClusterRole(name) = apply.object.key() {
                    roles_failed.insert(name);
                } else {
                    bindings_failed += 1;
                }
                outcome
                    .errors
                    .push(format!("applying {}: {}", apply.object.key(), brief(&e)));
            }
        }
    }
    (roles_failed, bindings_failed)
}

/// Delete this installation's stray bindings and the ClusterRoles no
/// installation uses any more.
async fn delete_strays(client: &ClusterClient, deletions: &[Deletion], outcome: &mut PassOutcome) {
    for deletion in deletions {
        match client.delete(deletion).await {
            Ok(true) => outcome.removed += 1,
            Ok(false) => {
                tracing::debug!(cluster = %client.name, object = %deletion.key, "changed since listed: kept until the next pass")
            }
            Err(e) => outcome.errors.push(format!("deleting {}: {}", deletion.key, brief(&e))),
        }
    }
}

/// Give up this installation's mark on the ClusterRoles only others use now.
async fn release_unused(client: &ClusterClient, instance: &Instance, names: &[String], outcome: &mut PassOutcome) {
    for name in names {
        match client.release(name, instance).await {
            // An apply: counted as one.
            Ok(()) => outcome.applied += 1,
            Err(e) => outcome
                .errors
                .push(format!("releasing clusterrole/{name}: {}", brief(&e))),
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
