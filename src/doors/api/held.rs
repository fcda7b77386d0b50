//! Held writes through the person API: the same list, view and decisions
//! as the approval pages (`crate::doors::web`), as the authenticated
//! person and their credential ([`crate::approvals::decide`]).

use super::{decision_reason, query_param, Api, ApiError, Call};
use crate::approvals::decide::{self, DecideError};
use crate::approvals::{rfc3339, text, wait, HeldState, HeldWrite};
use crate::audit::refusal::Refusal;
use crate::identity::{Identity, Principal};
use crate::store::Store;
use http::{Method, StatusCode};
use serde_json::{json, Value};

/// `held-writes…`.
pub(super) async fn serve(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    let (person, credential) = (identity.principal.clone(), identity.credential_id.clone());
    match (&call.method, call.segments.as_slice()) {
        (&Method::GET, [_]) => {
            let pending = query_param(call, "pending").is_some_and(|p| p == "true");
            api.blocking(move |store, _| list(store, &person, pending)).await
        }
        (&Method::GET, [_, id]) => {
            let id = id.to_string();
            api.blocking(move |store, _| show(store, &person, &credential, &id))
                .await
        }
        (&Method::POST, [_, id, verb @ ("approve" | "deny")]) => {
            let (id, approve) = (id.to_string(), *verb == "approve");
            let reason = decision_reason(&call.body)?;
            api.blocking(move |store, _| {
                let (by, credential, reason) = (&person.name, Some(credential.as_str()), reason.as_deref());
                let held = if approve {
                    decide::approve(store, &id, by, credential, reason)
                } else {
                    decide::deny(store, &id, by, credential, reason)
                };
                Ok(json!({"held_write": summary(&held.map_err(refused)?)}))
            })
            .await
        }
        _ => Err(ApiError::not_found()),
    }
}

/// The most of a person's own held writes listed: the newest.
const OWN_SHOWN: usize = 200;

/// The held writes waiting on `person`, and the newest they asked for
/// themselves, newest first.
fn list(store: &Store, person: &Principal, pending: bool) -> Result<Value, ApiError> {
    let mut shown: Vec<HeldWrite> = decide::waiting_on(store, person).map_err(refused)?;
    let asker = person.to_string();
    let own = store.held_of(&asker, OWN_SHOWN).map_err(ApiError::unavailable)?;
    for held in own {
        if !shown.iter().any(|s| s.id == held.id) && (!pending || held.state == HeldState::Pending) {
            shown.push(held);
        }
    }
    shown.sort_by_key(|h| std::cmp::Reverse(h.created_at));
    Ok(json!({"held_writes": shown.iter().map(summary).collect::<Vec<_>>()}))
}

/// One held write: seen by those who may decide it and by whoever asked,
/// as on its page.
fn show(store: &Store, person: &Principal, credential: &str, id: &str) -> Result<Value, ApiError> {
    let held = wait::current(store, id)
        .map_err(refused)?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("held write {id} not found")))?;
    let may = decide::may_decide(store, &held, person, Some(credential));
    if may.is_err() && held.request.requester != person.to_string() {
        let why = may.err().unwrap_or_default();
        return Err(ApiError::new(StatusCode::FORBIDDEN, format!("not yours to see: {why}")));
    }
    let mut value = summary(&held);
    value["may_decide"] = json!(may.is_ok());
    value["why_not"] = json!(may.err());
    value["text"] = json!(text::describe(&held));
    Ok(json!({"held_write": value}))
}

/// What a list line shows of a held write.
fn summary(held: &HeldWrite) -> Value {
    json!({
        "id": held.id,
        "state": held.state.as_str(),
        "requester": held.request.requester,
        "agent_id": held.request.agent_id,
        "cluster": held.request.cluster,
        "namespace": held.request.namespace,
        "write": held.request.summary(),
        "created_at": rfc3339(held.created_at),
        "expires_at": rfc3339(held.expires_at),
        "decided_by": held.decided_by,
        "decision_reason": held.decision_reason,
    })
}

/// A decision refused, with the status the approval pages answer it with.
fn refused(error: DecideError) -> ApiError {
    match error {
        DecideError::NotAllowed(_) => ApiError::refused(StatusCode::FORBIDDEN, error.to_string(), Refusal::NotApprover),
        DecideError::NotPending { .. } => ApiError::new(StatusCode::CONFLICT, error.to_string()),
        DecideError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, error.to_string()),
        DecideError::Invalid(_) => ApiError::new(StatusCode::BAD_REQUEST, error.to_string()),
        DecideError::Store(_) | DecideError::Audit(_) => ApiError::unavailable(error),
    }
}
