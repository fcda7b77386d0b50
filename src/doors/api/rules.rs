//! Group rules through the person API: list, add, remove, for admins
//! only, as the authenticated admin ([`crate::signin::groups`] audits each
//! change). Anyone else is refused (403, `not_admin` in the audit).

use super::{text_field, Api, ApiError, Call};
use crate::audit::refusal::Refusal;
use crate::identity::{Identity, Principal};
use crate::signin::groups::{self, Actor, RuleAsk, RuleError};
use crate::store::{Store, StoreError};
use http::{Method, StatusCode};
use serde_json::{json, Value};

/// `group-rules…`.
pub(super) async fn serve(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    let admin = identity.principal.clone();
    match (&call.method, call.segments.as_slice()) {
        (&Method::GET, [_]) => {
            api.blocking(move |store, _| {
                must_be_admin(store, &admin)?;
                let rules = store.group_rules().map_err(ApiError::unavailable)?;
                Ok(json!({"rules": rules}))
            })
            .await
        }
        (&Method::POST, [_]) => {
            let ask = ask(&call.body)?;
            api.blocking(move |store, config| {
                must_be_admin(store, &admin)?;
                let rule = groups::add_rule(config, store, ask, &Actor::Person(admin)).map_err(refused)?;
                Ok(json!({"rule": rule}))
            })
            .await
        }
        (&Method::POST, [_, id, "remove"]) => {
            let id = id.to_string();
            api.blocking(move |store, _| {
                must_be_admin(store, &admin)?;
                let (rule, revoked) = groups::remove_rule(store, &id, &Actor::Person(admin)).map_err(refused)?;
                Ok(json!({"rule": rule, "revoked_grants": revoked.len()}))
            })
            .await
        }
        _ => Err(ApiError::not_found()),
    }
}

/// Rules change who may do what: only an enabled admin reads or makes them.
fn must_be_admin(store: &Store, person: &Principal) -> Result<(), ApiError> {
    if store.is_admin(person).map_err(ApiError::unavailable)? {
        return Ok(());
    }
    Err(ApiError::refused(
        StatusCode::FORBIDDEN,
        format!("{person} is not an admin: group rules are managed by admins"),
        Refusal::NotAdmin,
    ))
}

fn ask(body: &Value) -> Result<RuleAsk, ApiError> {
    let field = |name| {
        text_field(body, name)
            .map(str::to_string)
            .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, format!("give `{name}`")))
    };
    Ok(RuleAsk {
        group: field("group")?,
        cluster: field("cluster")?,
        role: field("role")?,
        namespace: text_field(body, "namespace").map(str::to_string),
    })
}

fn refused(error: RuleError) -> ApiError {
    match error {
        RuleError::Store(StoreError::NotFound(what)) => ApiError::new(StatusCode::NOT_FOUND, format!("no {what}")),
        RuleError::InvalidGroup(_) | RuleError::Grant(_) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string())
        }
        RuleError::Store(_) | RuleError::Audit(_) => ApiError::unavailable(error),
    }
}
