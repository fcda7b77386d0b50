//! Bots' trust rules for CI tokens through the person API: list, add,
//! remove (revoking the credentials a rule gave), for admins only, as the authenticated admin
//! ([`crate::ci::rules`] audits each change). Anyone else is refused (403,
//! `not_admin` in the audit).

use super::{must_be_admin, required_field, Api, ApiError, Call};
use crate::ci::rules::{self, TrustAsk, TrustError};
use crate::identity::Identity;
use crate::signin::groups::Actor;
use crate::store::StoreError;
use http::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// `trust-rules…`.
pub(super) async fn serve(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    let admin = identity.principal.clone();
    match (&call.method, call.segments.as_slice()) {
        (&Method::GET, [_]) => {
            let bot = super::query_param(call, "bot");
            api.blocking(move |store, _| {
                must_be_admin(store, &admin, "bots' trust rules")?;
                let rules = store.trust_rules(bot.as_deref()).map_err(ApiError::unavailable)?;
                Ok(json!({"rules": rules}))
            })
            .await
        }
        (&Method::POST, [_]) => {
            let ask = ask(&call.body)?;
            api.blocking(move |store, config| {
                must_be_admin(store, &admin, "bots' trust rules")?;
                let rule = rules::add_rule(config, store, ask, &Actor::Person(admin)).map_err(refused)?;
                Ok(json!({"rule": rule}))
            })
            .await
        }
        (&Method::POST, [_, id, "remove"]) => {
            let id = id.to_string();
            api.blocking(move |store, _| {
                must_be_admin(store, &admin, "bots' trust rules")?;
                let (rule, revoked) = rules::remove_rule(store, &id, &Actor::Person(admin)).map_err(refused)?;
                Ok(json!({"rule": rule, "revoked_credentials": revoked}))
            })
            .await
        }
        _ => Err(ApiError::not_found()),
    }
}

/// `{bot, issuer, audience, claims: ["name=value", …], duration_seconds?,
/// max_token_age_seconds?}`.
fn ask(body: &Value) -> Result<TrustAsk, ApiError> {
    let field = |name| required_field(body, name);
    let claims = body["claims"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let seconds = |name: &str| body[name].as_u64().map(Duration::from_secs);
    Ok(TrustAsk {
        bot: field("bot")?,
        issuer: field("issuer")?,
        audience: field("audience")?,
        claims,
        duration: seconds("duration_seconds"),
        max_token_age: seconds("max_token_age_seconds"),
    })
}

fn refused(error: TrustError) -> ApiError {
    match error {
        TrustError::Store(StoreError::NotFound(what)) => ApiError::new(StatusCode::NOT_FOUND, format!("no {what}")),
        TrustError::Invalid(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()),
        TrustError::Store(_) | TrustError::Audit(_) => ApiError::unavailable(error),
    }
}
