//! Bots' trust rules for CI tokens through the person API: list, add,
//! remove (revoking the credentials a rule gave), for admins only, as the authenticated admin
//! ([`crate::ci::rules`] audits each change). Anyone else is refused (403,
//! `not_admin` in the audit).

use super::{must_be_admin, only_fields, required_field, Api, ApiError, Call};
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
    let fields = [
        "bot",
        "issuer",
        "audience",
        "claims",
        "duration_seconds",
        "max_token_age_seconds",
    ];
    only_fields(body, &fields)?;
    let field = |name| required_field(body, name);
    // A field given in another shape is refused, never dropped: a claim
    // condition left out would widen the rule, a duration left out would
    // make it the default.
    let bad = |what: &str| ApiError::new(StatusCode::BAD_REQUEST, what.to_string());
    let claims = match body.get("claims") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|c| c.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("`claims` must be a list of \"name=value\" texts"))?,
        Some(_) => return Err(bad("`claims` must be a list of \"name=value\" texts")),
    };
    let seconds = |name: &str| match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(|n| Some(Duration::from_secs(n)))
            .ok_or_else(|| bad(&format!("`{name}` must be a whole number of seconds"))),
    };
    Ok(TrustAsk {
        bot: field("bot")?,
        issuer: field("issuer")?,
        audience: field("audience")?,
        claims,
        duration: seconds("duration_seconds")?,
        max_token_age: seconds("max_token_age_seconds")?,
    })
}

fn refused(error: TrustError) -> ApiError {
    match error {
        TrustError::Store(StoreError::NotFound(what)) => ApiError::new(StatusCode::NOT_FOUND, format!("no {what}")),
        TrustError::Invalid(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()),
        TrustError::Store(_) | TrustError::Audit(_) => ApiError::unavailable(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claim_or_a_duration_in_another_shape_is_refused_not_dropped() {
        let base = json!({"bot": "deployer", "issuer": "https://i.example", "audience": "https://p.example"});
        let with = |key: &str, value: Value| {
            let mut body = base.clone();
            body[key] = value;
            ask(&body)
        };
        let asked = with("claims", json!(["repository=acme/*", "ref=refs/heads/main"])).unwrap();
        assert_eq!(asked.claims, ["repository=acme/*", "ref=refs/heads/main"]);
        assert!(with("duration_seconds", json!(600)).unwrap().duration == Some(Duration::from_secs(600)));
        for (key, value) in [
            ("claims", json!(["repository=acme/*", {"ref": "refs/heads/main"}])),
            ("claims", json!("repository=acme/*")),
            ("duration_seconds", json!("600")),
            ("duration_seconds", json!(-1)),
            ("max_token_age_seconds", json!(1.5)),
        ] {
            let refused = with(key, value.clone()).map(|_| ()).unwrap_err();
            assert_eq!(refused.code, StatusCode::BAD_REQUEST, "{key}: {value}");
        }
    }
}
