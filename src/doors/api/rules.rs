//! Group rules through the person API: list, add, remove, for admins
//! only, as the authenticated admin ([`crate::signin::groups`] audits each
//! change). Anyone else is refused (403, `not_admin` in the audit).

use super::{must_be_admin, only_fields, optional_field, required_field, Api, ApiError, Call};
use crate::identity::Identity;
use crate::signin::groups::{self, Actor, RuleAsk, RuleError};
use crate::store::StoreError;
use http::{Method, StatusCode};
use serde_json::{json, Value};

/// `group-rules…`.
pub(super) async fn serve(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    let admin = identity.principal.clone();
    match (&call.method, call.segments.as_slice()) {
        (&Method::GET, [_]) => {
            api.blocking(move |store, _| {
                must_be_admin(store, &admin, "group rules")?;
                let rules = store.group_rules().map_err(ApiError::unavailable)?;
                Ok(json!({"rules": rules}))
            })
            .await
        }
        (&Method::POST, [_]) => {
            let ask = ask(&call.body)?;
            api.blocking(move |store, config| {
                must_be_admin(store, &admin, "group rules")?;
                let rule = groups::add_rule(config, store, ask, &Actor::Person(admin)).map_err(refused)?;
                Ok(json!({"rule": rule}))
            })
            .await
        }
        (&Method::POST, [_, id, "remove"]) => {
            let id = id.to_string();
            api.blocking(move |store, _| {
                must_be_admin(store, &admin, "group rules")?;
                let (rule, revoked) = groups::remove_rule(store, &id, &Actor::Person(admin)).map_err(refused)?;
                Ok(json!({"rule": rule, "revoked_grants": revoked.len()}))
            })
            .await
        }
        _ => Err(ApiError::not_found()),
    }
}

fn ask(body: &Value) -> Result<RuleAsk, ApiError> {
    only_fields(body, &["group", "cluster", "role", "namespace"])?;
    let field = |name| required_field(body, name);
    Ok(RuleAsk {
        group: field("group")?,
        cluster: field("cluster")?,
        role: field("role")?,
        namespace: optional_field(body, "namespace")?,
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
