//! Who decides a held write, and the decisions themselves. Every decision,
//! and every refused attempt, is a row in the audit (resource
//! `portcullis.dev/heldwrites`, verb `approve`, `deny` or `expire`), in the
//! same hash chain and export as requests, whichever process (server or
//! CLI) decides ([`crate::audit::commit_event`]).
//!
//! - A delegated agent's write: only the agent's own person.
//! - A bot's write (or its agent's): a person who administers the object's
//!   scope (`admin` of its namespace, or `cluster-admin`), as for access
//!   requests (`crate::access::decide::administers`).
//! - Never a bot, never the requester itself, never the credential that asked.

use super::{HeldState, HeldWrite};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::identity::{Principal, PrincipalKind};
use crate::store::{Store, StoreError};
use chrono::Utc;

/// Why a decision was refused.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such held write.
    #[error("held write {0} not found")]
    NotFound(String),
    /// It was decided, ran or expired already.
    #[error("held write {id} is {state}, not pending")]
    NotPending {
        /// Its id.
        id: String,
        /// Its state.
        state: &'static str,
    },
    /// This person may not decide it.
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// The decision is malformed (its reason).
    #[error("{0}")]
    Invalid(String),
    /// The decision could not be written to the audit.
    #[error("the audit could not record this decision: {0}")]
    Audit(#[from] crate::audit::AuditError),
}

/// May person `by`, signed in with `credential_id` (if known), decide
/// `held`? The error says why not.
pub fn may_decide(store: &Store, held: &HeldWrite, by: &Principal, credential_id: Option<&str>) -> Result<(), String> {
    if by.kind != PrincipalKind::Person {
        return Err("only a person decides held writes".into());
    }
    match store.principal_disabled(by) {
        Ok(Some(false)) => {}
        Ok(_) => return Err(format!("{by} does not exist or is disabled")),
        Err(e) => return Err(e.to_string()),
    }
    let request = &held.request;
    if credential_id == Some(request.credential_id.as_str()) {
        return Err("the credential that asked for this write cannot decide it".into());
    }
    let requester = request.principal();
    if request.delegated {
        return if requester.as_ref() == Some(by) {
            Ok(())
        } else {
            Err(format!(
                "only {}, whose agent asked, decides this write",
                request.requester
            ))
        };
    }
    if requester.as_ref() == Some(by) {
        return Err(format!("{by} asked for this write and cannot decide it"));
    }
    let grants = store.grants_of(by, &request.cluster).map_err(|e| e.to_string())?;
    // A Namespace object (its status, its finalizers) is the cluster's, not
    // its own namespace's: Kubernetes' admin of `shop` cannot write it
    // either, and its labels set the namespace's pod security.
    let namespace_object = request.api_group.is_empty()
        && (request.resource == "namespaces" || request.resource.starts_with("namespaces/"));
    let namespace = Some(request.namespace.as_str()).filter(|ns| !ns.is_empty() && !namespace_object);
    if crate::access::decide::administers(by, &grants, &request.cluster, namespace, Utc::now()) {
        Ok(())
    } else {
        let scope = namespace.map_or("the whole cluster".to_string(), |ns| format!("namespace {ns}"));
        Err(format!("{by} is not admin of {scope} on cluster {}", request.cluster))
    }
}

/// Approve held write `id` as person `by`.
pub fn approve(
    store: &Store,
    id: &str,
    by: &str,
    credential_id: Option<&str>,
    reason: Option<&str>,
) -> Result<HeldWrite, DecideError> {
    decide(store, id, by, credential_id, reason, HeldState::Approved)
}

/// Deny held write `id` as person `by`, with an optional reason.
pub fn deny(
    store: &Store,
    id: &str,
    by: &str,
    credential_id: Option<&str>,
    reason: Option<&str>,
) -> Result<HeldWrite, DecideError> {
    decide(store, id, by, credential_id, reason, HeldState::Denied)
}

fn decide(
    store: &Store,
    id: &str,
    by: &str,
    credential_id: Option<&str>,
    reason: Option<&str>,
    state: HeldState,
) -> Result<HeldWrite, DecideError> {
    let reason = crate::text::checked_reason(reason).map_err(DecideError::Invalid)?;
    super::wait::expire_overdue(store)?;
    let held = store.held(id)?.ok_or_else(|| DecideError::NotFound(id.into()))?;
    let verb = if state == HeldState::Approved {
        "approve"
    } else {
        "deny"
    };
    let decider = Principal::person(by);
    if let Err(why) = may_decide(store, &held, &decider, credential_id) {
        record(store, verb, &decider, &held, Some(Refusal::NotApprover))?;
        return Err(DecideError::NotAllowed(why));
    }
    if held.state != HeldState::Pending {
        return Err(DecideError::NotPending {
            id: id.into(),
            state: held.state.as_str(),
        });
    }
    // The decision's row is on record before the decision is (see
    // `crate::audit::Recorded`).
    let recorded = crate::audit::begin_event(store, row(verb, &decider, &held, None))?;
    match store.decide_held(id, state, by, reason, Utc::now()) {
        Ok(true) => {}
        Ok(false) => {
            let _ = recorded.not_made(409, "decided already or expired");
            return Err(DecideError::NotPending {
                id: id.into(),
                state: "decided or expired",
            });
        }
        Err(error) => return Err(recorded.store_failed(error).into()),
    }
    recorded.done(row(verb, &decider, &held, None), Vec::new())?;
    let decided = store.held(id)?.ok_or_else(|| DecideError::NotFound(id.into()))?;
    Ok(decided)
}

/// The pending held writes `person` may decide, newest first.
pub fn waiting_on(store: &Store, person: &Principal) -> Result<Vec<HeldWrite>, DecideError> {
    super::wait::expire_overdue(store)?;
    Ok(store
        .list_open_held()?
        .into_iter()
        .filter(|h| h.state == HeldState::Pending && may_decide(store, h, person, None).is_ok())
        .collect())
}

/// `change` to `held`, by `actor`, on record before it is made: its row's
/// intent committed first, the row after; a change another process made
/// first (`Ok(false)`) leaves the intent's row as not made.
pub fn recorded_change(
    store: &Store,
    verb: &str,
    actor: &Principal,
    held: &HeldWrite,
    change: impl FnOnce() -> Result<bool, crate::store::StoreError>,
) -> Result<bool, DecideError> {
    let recorded = crate::audit::begin_event(store, row(verb, actor, held, None))?;
    match change() {
        Ok(true) => {
            recorded.done(row(verb, actor, held, None), Vec::new())?;
            Ok(true)
        }
        Ok(false) => {
            let _ = recorded.not_made(409, "another call recorded it first");
            Ok(false)
        }
        Err(error) => Err(recorded.store_failed(error).into()),
    }
}

/// Commit the audit row of `verb` by `actor` on `held`; `refused` when the
/// actor was not allowed (code 403).
pub fn record(
    store: &Store,
    verb: &str,
    actor: &Principal,
    held: &HeldWrite,
    refused: Option<Refusal>,
) -> Result<(), DecideError> {
    Ok(crate::audit::commit_event(store, row(verb, actor, held, refused))?)
}

/// The audit row of `verb` by `actor` on `held`.
fn row(verb: &str, actor: &Principal, held: &HeldWrite, refused: Option<Refusal>) -> AuditRow {
    let now = Utc::now();
    let mut row = AuditRow::new(crate::audit::id::new(), now);
    row.cluster = held.request.cluster.clone();
    row.principal_kind = actor.kind.as_str().into();
    row.login = actor.name.clone();
    row.path = format!("/approvals/{}", held.id);
    row.query = form_urlencoded::Serializer::new(String::new())
        .append_pair("write", &held.request.summary())
        .finish();
    row.verb = verb.into();
    row.api_group = "portcullis.dev".into();
    row.api_version = "v1".into();
    row.resource = "heldwrites".into();
    row.namespace = held.request.namespace.clone();
    row.name = held.id.clone();
    row.code = if refused.is_none() { 200 } else { 403 };
    if let Some(why) = refused {
        row.reason = "Forbidden".into();
        row.refuse(why);
    }
    // An approval lets a write through: on record as a write.
    row.write = verb == "approve" && refused.is_none();
    row.held = true;
    row.finish(now);
    row
}
