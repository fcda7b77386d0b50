//! `whoami` and the person's own credentials.

use super::{Api, ApiError, Call};
use crate::identity::{Credential, Identity};
use crate::signin::revoke::RevokeError;
use crate::store::Store;
use chrono::Utc;
use http::{Method, StatusCode};
use serde_json::{json, Value};

/// `GET whoami`: who the credential is, whether they are an admin, their
/// grants in effect on every cluster, and their agent sessions in effect
/// (those their consents to OAuth clients made).
pub(super) async fn whoami(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    if call.method != Method::GET {
        return Err(ApiError::not_found());
    }
    let (person, credential) = (identity.principal.clone(), identity.credential_id.clone());
    api.blocking(move |store, config| {
        let admin = store.is_admin(&person).map_err(ApiError::unavailable)?;
        let now = Utc::now();
        // The person's own grants: those narrowed for their agent sessions
        // are listed with the sessions.
        let known = |g: &crate::identity::Grant| config.clusters.iter().any(|c| c.name == g.cluster);
        let grants: Vec<_> = store
            .own_grants_in_effect(&person)
            .map_err(ApiError::unavailable)?
            .into_iter()
            .filter(|g| known(g) && g.in_effect(now))
            .collect();
        let expires = own(store, &person, &credential)?.and_then(|c| c.expires_at);
        let sessions = agent_sessions(store, &person, now)?;
        Ok(json!({
            "login": person.name,
            "user": person.kube_user(),
            "credential": {"id": credential, "expires_at": expires},
            "admin": admin,
            "grants": grants,
            "agent_sessions": sessions,
        }))
    })
    .await
}

/// `GET credentials` and `POST credentials/<id>/revoke`: only the caller's
/// own; another person's id is not found, as if it did not exist.
pub(super) async fn credentials(api: &Api, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
    let person = identity.principal.clone();
    match (&call.method, call.segments.as_slice()) {
        (&Method::GET, [_]) => {
            api.blocking(move |store, _| {
                let mine = store.list_credentials(Some(&person)).map_err(ApiError::unavailable)?;
                Ok(json!({"credentials": mine}))
            })
            .await
        }
        (&Method::POST, [_, id, "revoke"]) => {
            let id = id.to_string();
            let revoked = api
                .blocking(
                    move |store, _| match crate::signin::revoke::own_credential(store, &person, &id) {
                        Ok(()) => Ok(id),
                        Err(error @ RevokeError::NotYours { .. }) => {
                            Err(ApiError::new(StatusCode::NOT_FOUND, error.to_string()))
                        }
                        Err(error) => Err(ApiError::unavailable(error)),
                    },
                )
                .await?;
            // Refused at once by this process; by others within the cache's life.
            call.authenticator.forget(&revoked);
            Ok(json!({"revoked": revoked}))
        }
        _ => Err(ApiError::not_found()),
    }
}

/// `person`'s agent sessions in effect: each one's client, last use, end,
/// approval switch and grants (a narrowed grant is not among the person's
/// own, so it is named here).
fn agent_sessions(
    store: &Store,
    person: &crate::identity::Principal,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<Value>, ApiError> {
    let sessions = store.agent_sessions_of(person).map_err(ApiError::unavailable)?;
    let grants = store.list_grants().map_err(ApiError::unavailable)?;
    let live = sessions
        .into_iter()
        .filter(|s| s.client_id.is_some() && !s.agent.disabled && s.expires_at.is_none_or(|e| e > now));
    Ok(live
        .map(|s| {
            let ids = s.agent.grant_ids.unwrap_or_default();
            let chosen: Vec<Value> = grants
                .iter()
                .filter(|g| ids.contains(&g.id))
                .map(|g| json!({"cluster": g.cluster, "namespace": g.namespace, "role": g.role}))
                .collect();
            json!({
                "id": s.agent.id,
                "client_id": s.client_id,
                "client_name": s.client_name,
                "created_at": s.created_at,
                "last_used_at": s.last_used_at,
                "expires_at": s.expires_at,
                "writes_need_approval": s.agent.writes_need_approval,
                "grants": chosen,
            })
        })
        .collect())
}

/// `person`'s credential `id`, if it is theirs.
fn own(store: &Store, person: &crate::identity::Principal, id: &str) -> Result<Option<Credential>, ApiError> {
    store.credential_of(person, id).map_err(ApiError::unavailable)
}
