//! Access requests: a person, bot or agent asks for a role on a cluster (a
//! namespace or all of it) for a duration, with a reason; a person who may
//! decide ([`decide`]) approves or denies it. Approval creates the grant
//! (which the reconciler binds); a request nobody decides expires
//! (`[access] request_ttl`, 1 h). Every step is a row in the audit
//! ([`record`]).
//!
//! `portcullis access …` (`crate::cli::access`) and the MCP `request_access`
//! tool call the same functions.

pub mod decide;
mod record;

use crate::audit::refusal::Refusal;
use crate::config::Config;
use crate::identity::{Agent, Grant, Identity, Principal};
use crate::store::{Store, StoreError};
use chrono::Utc;
use std::time::Duration;

/// A request and its state are what the store keeps of it.
pub use crate::store::{AccessRequest, AccessState};

/// Who asks: a person or bot, possibly through one of its agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    /// The person or bot (an agent's person or bot).
    pub principal: Principal,
    /// The agent asking, if any.
    pub agent_id: Option<String>,
}

impl From<&Identity> for Requester {
    fn from(identity: &Identity) -> Self {
        Requester {
            principal: identity.principal.clone(),
            agent_id: identity.agent.as_ref().map(|a| a.id.clone()),
        }
    }
}

/// What is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessAsk {
    /// Cluster name.
    pub cluster: String,
    /// Role name.
    pub role: String,
    /// `None` for the whole cluster.
    pub namespace: Option<String>,
    /// How long.
    pub duration: Duration,
    /// Why.
    pub reason: String,
}

/// Why an access request step was refused.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The request itself cannot be granted as asked (unknown role or
    /// cluster, protected namespace, too long, no reason, unknown requester).
    #[error("{0}")]
    Invalid(String),
    /// No such request.
    #[error("access request {0} not found")]
    NotFound(String),
    /// It was decided or expired already.
    #[error("access request {id} is {state}, not pending")]
    NotPending {
        /// Request id.
        id: String,
        /// Its state.
        state: &'static str,
    },
    /// This person may not decide it.
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// The step happened but could not be written to the audit.
    #[error("the audit could not record this step: {0}")]
    Audit(#[from] crate::audit::AuditError),
}

/// The most access requests one requester (with its agents) has pending.
pub const MAX_PENDING: usize = 20;

/// Ask for access. Checked like a grant would be (the role and cluster
/// exist, the namespace is not protected, the duration is within the role's
/// maximum); the requester must exist and be enabled, an agent must be the
/// requester's and enabled; at most [`MAX_PENDING`] wait at once. The
/// request expires after `[access] request_ttl` unless decided.
pub fn request_access(
    store: &Store,
    config: &Config,
    requester: &Requester,
    ask: &AccessAsk,
) -> Result<AccessRequest, AccessError> {
    // The same bound as a decision's reason, and required.
    let reason = crate::text::checked_reason(Some(&ask.reason))
        .map_err(AccessError::Invalid)?
        .ok_or_else(|| AccessError::Invalid("give a reason (1 to 1000 characters)".into()))?;
    check_requester(store, requester)?;
    crate::identity::grant::new_grant(
        config,
        requester.principal.clone(),
        &ask.cluster,
        &ask.role,
        ask.namespace.clone(),
        ask.duration,
        "-",
    )
    .map_err(|e| AccessError::Invalid(e.to_string()))?;
    // Every console view and agent write reads the pending requests: one
    // requester has only so many waiting at once (counted with the insert).
    let request = pending_request(config, requester, ask, reason)?;
    // On record before it can be decided (see `crate::audit::Recorded`).
    let recorded = record::begin(store, record::Step::Request, &requester.principal, &request)?;
    match store.insert_access_request_within(&request, MAX_PENDING) {
        Ok(true) => {}
        Ok(false) => {
            let why = format!(
                "you have {MAX_PENDING} access requests waiting for a decision: wait for those, or until they expire"
            );
            let _ = recorded.not_made(403, &why);
            return Err(AccessError::Invalid(why));
        }
        Err(error) => return Err(recorded.store_failed(error).into()),
    }
    let row = record::row(record::Step::Request, &requester.principal, &request, None, None);
    recorded.done(row, Vec::new())?;
    Ok(request)
}

/// The requester exists and is enabled; an agent is the requester's own
/// and enabled.
fn check_requester(store: &Store, requester: &Requester) -> Result<(), AccessError> {
    enabled(store, &requester.principal)?;
    if let Some(id) = &requester.agent_id {
        let agent = agent(store, id)?;
        if agent.disabled || agent.principal != requester.principal {
            return Err(AccessError::Invalid(format!(
                "agent {id} is disabled or not {}'s",
                requester.principal
            )));
        }
    }
    Ok(())
}

/// A new request for `ask`, pending until `[access] request_ttl` from now.
fn pending_request(
    config: &Config,
    requester: &Requester,
    ask: &AccessAsk,
    reason: &str,
) -> Result<AccessRequest, AccessError> {
    let now = Utc::now();
    Ok(AccessRequest {
        id: uuid::Uuid::now_v7().to_string(),
        requester: requester.principal.clone(),
        agent_id: requester.agent_id.clone(),
        cluster: ask.cluster.clone(),
        namespace: ask.namespace.clone(),
        role: ask.role.clone(),
        duration: ask.duration,
        reason: reason.to_string(),
        state: AccessState::Pending,
        created_at: now,
        expires_at: now + delta(config.access.request_ttl)?,
        decided_by: None,
        decided_at: None,
        decision_reason: None,
        grant_id: None,
    })
}

/// Approve request `id` as person `by`: creates the grant (bound by the
/// reconciler) and, for a delegated agent's request, gives it to the agent.
pub fn approve(
    store: &Store,
    config: &Config,
    id: &str,
    by: &str,
    reason: Option<&str>,
) -> Result<(AccessRequest, Grant), AccessError> {
    let reason = crate::text::checked_reason(reason).map_err(AccessError::Invalid)?;
    let (request, decider, authority) = authorize(store, id, by, record::Step::Approve)?;
    // Disabled since it asked: no grant for it (a bot re-enabled later
    // would find it waiting).
    let requester = Requester {
        principal: request.requester.clone(),
        agent_id: request.agent_id.clone(),
    };
    match check_requester(store, &requester) {
        Ok(()) => {}
        // The store could not say: no refusal to record, the error.
        Err(error @ AccessError::Store(_)) => return Err(error),
        Err(error) => {
            let refused = Some(Refusal::RequesterDisabled);
            record::step(store, record::Step::Approve, &decider, &request, refused)?;
            return Err(error);
        }
    }
    let mut grant = crate::identity::grant::new_grant(
        config,
        request.requester.clone(),
        &request.cluster,
        &request.role,
        request.namespace.clone(),
        request.duration,
        by,
    )
    .map_err(|e| AccessError::Invalid(e.to_string()))?;
    // Approved by the agent's own person on the strength of a grant of
    // theirs: it ends no later than that grant, and when it is revoked.
    let under = match authority {
        decide::Authority::AgentOwner { until, under } => {
            grant.expires_at = grant.expires_at.min(until);
            Some(under)
        }
        decide::Authority::Admin { until } => {
            grant.expires_at = grant.expires_at.min(until);
            None
        }
    };
    // A delegated agent is sent only the grants it was given.
    let delegated = match &request.agent_id {
        Some(agent_id) => agent(store, agent_id)?.grant_ids.is_some().then_some(agent_id.as_str()),
        None => None,
    };
    let given = crate::store::Given {
        parent: under.as_deref(),
        agent_id: delegated,
    };
    let recorded = record::begin(store, record::Step::Approve, &decider, &request)?;
    // Invalid (a 409 in the row): decided or expired since it was read, or
    // its requester disabled since: the caller's error, not an outage.
    if let Err(error) = store.approve_access_request(&request.id, &grant, given, by, reason, Utc::now()) {
        return Err(match recorded.store_failed(error) {
            StoreError::Invalid(why) => AccessError::Invalid(why),
            other => other.into(),
        });
    }
    let row = record::row(record::Step::Approve, &decider, &request, Some(&grant.id), None);
    recorded.done(row, Vec::new())?;
    let approved = store
        .access_request(id)?
        .ok_or_else(|| AccessError::NotFound(id.into()))?;
    Ok((approved, grant))
}

/// Deny request `id` as person `by`, with an optional reason.
pub fn deny(store: &Store, id: &str, by: &str, reason: Option<&str>) -> Result<AccessRequest, AccessError> {
    let reason = crate::text::checked_reason(reason).map_err(AccessError::Invalid)?;
    let (request, decider, _) = authorize(store, id, by, record::Step::Deny)?;
    let recorded = record::begin(store, record::Step::Deny, &decider, &request)?;
    match store.close_access_request(&request.id, AccessState::Denied, Some(by), reason, Utc::now()) {
        Ok(true) => {}
        Ok(false) => {
            let _ = recorded.not_made(409, "decided already");
            return Err(AccessError::NotPending {
                id: id.into(),
                state: "decided",
            });
        }
        Err(error) => return Err(recorded.store_failed(error).into()),
    }
    recorded.done(
        record::row(record::Step::Deny, &decider, &request, None, None),
        Vec::new(),
    )?;
    let denied = store
        .access_request(id)?
        .ok_or_else(|| AccessError::NotFound(id.into()))?;
    Ok(denied)
}

/// Mark pending requests past their expiry as expired (each recorded by
/// whichever process closes it; one that loses a race in the moment
/// between its read and its close records that as a 409 row); returns
/// them.
pub fn expire_pending(store: &Store) -> Result<Vec<AccessRequest>, AccessError> {
    let now = Utc::now();
    let mut expired = Vec::new();
    let overdue = store.list_access_requests()?.into_iter();
    for request in overdue.filter(|r| r.state == AccessState::Pending && r.expires_at <= now) {
        // Read again: another process may have closed it since the list
        // (each such loss of a race would be a 409 row of its own).
        if store
            .access_request(&request.id)?
            .is_none_or(|r| r.state != AccessState::Pending)
        {
            continue;
        }
        // Its row's intent first: a store that fails after the close
        // leaves the row on record as an unknown outcome, not missing.
        let recorded = record::begin(store, record::Step::Expire, &request.requester, &request)?;
        match store.close_access_request(&request.id, AccessState::Expired, None, None, now) {
            // Another process (or a decision) closed it first: its row is
            // theirs, this one says so.
            Ok(false) => recorded.not_made(409, "closed already")?,
            Ok(true) => {
                let closed = AccessRequest {
                    state: AccessState::Expired,
                    decided_at: Some(now),
                    ..request
                };
                let row = record::row(record::Step::Expire, &closed.requester, &closed, None, None);
                recorded.done(row, Vec::new())?;
                expired.push(closed);
            }
            Err(error) => return Err(recorded.store_failed(error).into()),
        }
    }
    Ok(expired)
}

/// Every request, oldest first (expiring the overdue ones first).
pub fn list(store: &Store) -> Result<Vec<AccessRequest>, AccessError> {
    expire_pending(store)?;
    Ok(store.list_access_requests()?)
}

/// Load a pending request and check that `by` may decide it; a refusal is
/// recorded in the audit too.
fn authorize(
    store: &Store,
    id: &str,
    by: &str,
    step: record::Step,
) -> Result<(AccessRequest, Principal, decide::Authority), AccessError> {
    expire_pending(store)?;
    let request = store
        .access_request(id)?
        .ok_or_else(|| AccessError::NotFound(id.into()))?;
    if request.state != AccessState::Pending {
        return Err(AccessError::NotPending {
            id: id.into(),
            state: request.state.as_str(),
        });
    }
    let decider = Principal::person(by);
    let agent = request.agent_id.as_deref().map(|a| agent(store, a)).transpose()?;
    let checked = match enabled(store, &decider) {
        Ok(()) => {
            let grants = store.grants_of(&decider, &request.cluster)?;
            decide::authority(&request, &decider, &grants, agent.as_ref(), Utc::now())
        }
        Err(e) => Err(e.to_string()),
    };
    match checked {
        Ok(authority) => Ok((request, decider, authority)),
        Err(why) => {
            record::step(store, step, &decider, &request, Some(Refusal::NotApprover))?;
            Err(AccessError::NotAllowed(why))
        }
    }
}

fn enabled(store: &Store, principal: &Principal) -> Result<(), AccessError> {
    match store.principal_disabled(principal)? {
        Some(false) => Ok(()),
        Some(true) => Err(AccessError::Invalid(format!("{principal} is disabled"))),
        None => Err(AccessError::Invalid(format!("{principal} does not exist"))),
    }
}

fn agent(store: &Store, id: &str) -> Result<Agent, AccessError> {
    store
        .agent(id)?
        .ok_or_else(|| AccessError::Invalid(format!("agent {id} does not exist")))
}

fn delta(d: Duration) -> Result<chrono::TimeDelta, AccessError> {
    chrono::TimeDelta::from_std(d).map_err(|e| AccessError::Invalid(e.to_string()))
}

/// Expire overdue requests every 30 seconds (run by the server), on one
/// replica at a time.
pub async fn expire_periodically(store: Store) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let store2 = store.clone();
        // Begun only once the lock is held.
        let expiry = async move { tokio::task::spawn_blocking(move || expire_pending(&store2)).await };
        match store.exclusive("access requests expiry", expiry).await {
            Ok(Some(Ok(Ok(expired)))) if !expired.is_empty() => {
                tracing::info!(count = expired.len(), "access requests expired")
            }
            Ok(Some(Ok(Err(error)))) => tracing::warn!(%error, "cannot expire access requests"),
            Err(error) => tracing::warn!(%error, "cannot expire access requests"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
