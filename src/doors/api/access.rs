//! Access requests through the person API: ask, list, approve, deny, as
//! the authenticated person ([`crate::access`] decides who may).

use super::{decision_reason, only_fields, optional_field, required_field, Api, ApiError, Call};
use crate::access::{self, decide, AccessAsk, AccessError, AccessRequest, AccessState, Requester};
use crate::identity::{Identity, Principal};
use crate::store::Store;
use chrono::Utc;
use http::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// `access-requests…`.
pub(super) async fn serve(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    let person = identity.principal.clone();
    match (&call.method, call.segments.as_slice()) {
        (&Method::GET, [_]) => api.blocking(move |store, _| list(store, &person)).await,
        (&Method::POST, [_]) => {
            let ask = ask(&call.body)?;
            let requester = Requester::from(identity);
            api.blocking(move |store, config| {
                let request = access::request_access(store, config, &requester, &ask).map_err(refused)?;
                Ok(json!({"request": request}))
            })
            .await
        }
        (&Method::POST, [_, id, "approve"]) => {
            let reason = decision_reason(&call.body)?;
            approve(api, person, id.to_string(), reason).await
        }
        (&Method::POST, [_, id, "deny"]) => {
            let (id, reason) = (id.to_string(), decision_reason(&call.body)?);
            api.blocking(move |store, _| {
                let request = access::deny(store, &id, &person.name, reason.as_deref()).map_err(refused)?;
                Ok(json!({"request": request}))
            })
            .await
        }
        _ => Err(ApiError::not_found()),
    }
}

/// Approve as `person`; the grant is bound in its cluster before the
/// answer where the server can, or the answer says it is pending.
async fn approve(api: &Api, person: Principal, id: String, reason: Option<String>) -> Result<Value, ApiError> {
    let (request, grant) = api
        .blocking(move |store, config| {
            access::approve(store, config, &id, &person.name, reason.as_deref()).map_err(refused)
        })
        .await?;
    // What the pass met (other people's grants, the cluster's address) is
    // the operator's to read in the log, not the approver's.
    let pending = || {
        format!(
            "binding pending on cluster {}: the server's reconciler retries",
            grant.cluster
        )
    };
    let binding = match api.reconciler.get() {
        Some(reconciler) => match reconciler.pass_now(&grant.cluster).await {
            Ok(report) if report.outcome.ok() => format!("cluster {} in step: the grant is bound", grant.cluster),
            Ok(report) => {
                let errors = report.outcome.errors.join("; ");
                tracing::warn!(cluster = %grant.cluster, %errors, "a pass after an approval did not bind everything");
                pending()
            }
            Err(error) => {
                tracing::warn!(cluster = %grant.cluster, %error, "a pass after an approval failed");
                pending()
            }
        },
        None => "binding pending: the server's reconciler binds it".into(),
    };
    Ok(json!({"request": request, "grant": grant, "binding": binding}))
}

/// The request's fields from a JSON body.
fn ask(body: &serde_json::Value) -> Result<AccessAsk, ApiError> {
    only_fields(body, &["cluster", "role", "namespace", "duration_seconds", "reason"])?;
    let field = |name| required_field(body, name);
    let seconds = body
        .get("duration_seconds")
        .and_then(serde_json::Value::as_u64)
        .filter(|s| *s > 0)
        .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "give `duration_seconds`, a positive number"))?;
    Ok(AccessAsk {
        cluster: field("cluster")?,
        role: field("role")?,
        namespace: optional_field(body, "namespace")?,
        duration: Duration::from_secs(seconds),
        reason: field("reason")?,
    })
}

/// The requests `person` asked for, and those they may decide (pending)
/// or decided, oldest first.
fn list(store: &Store, person: &Principal) -> Result<Value, ApiError> {
    let all = access::list(store).map_err(refused)?;
    let now = Utc::now();
    let mut shown = Vec::new();
    for request in all {
        let mine = request.requester == *person || request.decided_by.as_deref() == Some(person.name.as_str());
        if mine || (request.state == AccessState::Pending && may_decide(store, &request, person, now)?) {
            shown.push(request);
        }
    }
    Ok(json!({"requests": shown}))
}

fn may_decide(
    store: &Store,
    request: &AccessRequest,
    person: &Principal,
    now: chrono::DateTime<Utc>,
) -> Result<bool, ApiError> {
    let grants = store
        .grants_of(person, &request.cluster)
        .map_err(ApiError::unavailable)?;
    let agent = match &request.agent_id {
        Some(id) => store.agent(id).map_err(ApiError::unavailable)?,
        None => None,
    };
    Ok(decide::authority(request, person, &grants, agent.as_ref(), now).is_ok())
}

/// An access step refused, in the person's words, with the status the web
/// pages use for it.
fn refused(error: AccessError) -> ApiError {
    let code = match &error {
        AccessError::NotAllowed(_) => {
            return ApiError::refused(
                StatusCode::FORBIDDEN,
                error.to_string(),
                crate::audit::refusal::Refusal::NotApprover,
            )
        }
        AccessError::NotFound(_) => StatusCode::NOT_FOUND,
        AccessError::NotPending { .. } => StatusCode::CONFLICT,
        AccessError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        AccessError::Store(_) | AccessError::Audit(_) => return ApiError::unavailable(error),
    };
    ApiError::new(code, error.to_string())
}
