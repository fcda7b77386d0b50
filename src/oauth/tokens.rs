//! Codes, access tokens and refresh tokens of agent sessions.
//!
//! A consent becomes a one-use code (ten minutes). Its exchange (PKCE
//! verified, same client, same redirect URI, same resource) makes the agent
//! session and its first tokens: an access token — a portcullis credential
//! of the session's agent, for `/mcp` only, valid an hour and never past
//! the consent — and a refresh token that lasts as long as the consent and
//! is replaced at every use. A code or refresh token presented a second
//! time ends the whole session (OAuth 2.1 §4.3.1 and §6.1: its first use
//! may have been an attacker's).

use super::error::OAuthError;
use crate::identity::{credential, Agent, Audience, Credential, Origin, Principal};
use crate::store::{NewTokens, Refreshed, SessionPlan, Store, StoreError, Taken};
use base64::Engine;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

/// How long a code waits for its exchange.
pub const CODE_LIFETIME: TimeDelta = TimeDelta::minutes(10);
/// How long an access token works, at most.
pub const ACCESS_LIFETIME: TimeDelta = TimeDelta::hours(1);
/// The clock skew allowed between portcullis and a client.
pub const SKEW: TimeDelta = TimeDelta::seconds(60);

/// What the person chose on the consent page, kept with the code until its
/// exchange (no secret in it: the PKCE challenge is a hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consent {
    /// The person.
    pub login: String,
    /// The client's id.
    pub client_id: String,
    /// The client's name, as the page showed it.
    pub client_name: String,
    /// The person's grants handed over, each with the role chosen.
    pub grants: Vec<(String, String)>,
    /// When the consent ends (within the grants' own expiry).
    pub until: DateTime<Utc>,
    /// Writes wait for the person's approval.
    pub writes_need_approval: bool,
    /// Where the code went.
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// The resource the token is for (RFC 8707): portcullis's `/mcp`.
    pub resource: String,
    /// The credential the person's web session signed in with (none in a
    /// code from a release before this field).
    #[serde(default)]
    pub signed_in_with: String,
}

/// A token endpoint's answer.
#[derive(Debug)]
pub struct Issued {
    /// The access token (shown to the client once).
    pub access_token: String,
    /// Its lifetime in seconds.
    pub expires_in: i64,
    /// The next refresh token.
    pub refresh_token: String,
    /// The agent session.
    pub agent: Agent,
    /// Clusters whose bindings the session changed (bind before answering).
    pub clusters: Vec<String>,
}

impl Issued {
    /// The RFC 6749 §5.1 JSON.
    pub fn body(&self) -> String {
        json!({
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": self.refresh_token,
        })
        .to_string()
    }
}

/// A code exchange request's parameters.
#[derive(Debug, Clone, Copy)]
pub struct CodeExchange<'a> {
    /// The code.
    pub code: &'a str,
    /// The client presenting it.
    pub client_id: &'a str,
    /// The redirect URI of the authorization request.
    pub redirect_uri: &'a str,
    /// The PKCE verifier.
    pub code_verifier: &'a str,
    /// The resource asked for, if the client says (RFC 8707).
    pub resource: Option<&'a str>,
}

fn store_error(error: StoreError) -> OAuthError {
    tracing::error!(%error, "oauth store call failed");
    OAuthError::unavailable()
}

/// Keep `consent` behind a new one-use code; returns the code.
pub fn issue_code(store: &Store, consent: &Consent) -> Result<String, OAuthError> {
    let code = credential::mint().token;
    let kept = serde_json::to_string(consent).map_err(|_| OAuthError::unavailable())?;
    store
        .put_code(&credential::hash(&code), &kept, Utc::now() + CODE_LIFETIME)
        .map_err(store_error)?;
    Ok(code)
}

/// Exchange a code for the session's first tokens. Its checks run before
/// the code is spent (a wrong verifier does not burn it), and its use, the
/// session it makes and the tokens are one write (a second exchange,
/// however close, sees the session and ends it; a failure spends nothing).
pub fn exchange_code(store: &Store, ask: CodeExchange<'_>) -> Result<Issued, OAuthError> {
    let hash = credential::hash(ask.code);
    let (tokens, refresh_token) = new_tokens(ask.client_id);
    // Judged with the skew allowed: another replica's clock may run ahead.
    let taken = store.exchange_code(&hash, Utc::now() - SKEW, &tokens, |kept| {
        let kept = serde_json::from_str::<Consent>(kept).map_err(|_| OAuthError::unavailable())?;
        check_exchange(&kept, &ask)?;
        Ok(SessionPlan {
            person: Principal::person(&kept.login),
            client_id: kept.client_id,
            client_name: kept.client_name,
            grants: kept.grants,
            until: kept.until,
            writes_need_approval: kept.writes_need_approval,
            consented_with: Some(kept.signed_in_with).filter(|c| !c.is_empty()),
        })
    });
    let (agent, clusters, access) = match taken {
        Ok(Taken::Fresh(made)) => made?,
        Ok(Taken::Reused(session)) => {
            if let Some(session) = session {
                store.end_agent_session(&session).map_err(store_error)?;
            }
            return Err(OAuthError::invalid_grant(
                "this code was already used: the agent session it made has been ended",
            ));
        }
        Ok(Taken::Unknown) => return Err(OAuthError::invalid_grant("unknown or expired code")),
        Err(StoreError::Invalid(why)) => return Err(OAuthError::invalid_grant(why)),
        Err(other) => return Err(store_error(other)),
    };
    let mut issued = issued(store, agent, &access, &tokens.access, refresh_token, ask.client_id);
    issued.clusters = clusters;
    Ok(issued)
}

/// The code's exchange must come from the client it was issued to, with
/// its redirect URI, the verifier of its challenge and its resource.
fn check_exchange(consent: &Consent, ask: &CodeExchange<'_>) -> Result<(), OAuthError> {
    if ask.client_id != consent.client_id {
        return Err(OAuthError::invalid_grant("the code was issued to another client"));
    }
    if ask.redirect_uri != consent.redirect_uri {
        return Err(OAuthError::invalid_grant(
            "redirect_uri differs from the authorization request's",
        ));
    }
    if !pkce_matches(ask.code_verifier, &consent.code_challenge) {
        return Err(OAuthError::invalid_grant(
            "code_verifier does not match the code_challenge",
        ));
    }
    if ask
        .resource
        .is_some_and(|r| r.trim_end_matches('/') != consent.resource)
    {
        return Err(OAuthError::invalid_target(
            "resource differs from the authorization request's",
        ));
    }
    Ok(())
}

/// RFC 7636 §4.6 with S256: the verifier is 43–128 unreserved characters
/// whose SHA-256, base64url without padding, is the challenge.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let unreserved = verifier
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    if !(43..=128).contains(&verifier.len()) || !unreserved {
        return false;
    }
    let digest = Sha256::digest(verifier.as_bytes());
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
    // Both are public-length strings; compare without an early exit anyway.
    computed.len() == challenge.len()
        && computed
            .bytes()
            .zip(challenge.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Use a refresh token: new tokens, the old one spent, in one write. A
/// spent one, or one another client sends, ends the session.
pub fn refresh(store: &Store, refresh_token: &str, client_id: &str) -> Result<Issued, OAuthError> {
    let hash = credential::hash(refresh_token);
    let (tokens, next) = new_tokens(client_id);
    let refreshed = store
        .refresh_tokens(&hash, Utc::now() - SKEW, client_id, &tokens)
        .map_err(|error| match error {
            StoreError::Invalid(why) => OAuthError::invalid_grant(why),
            // Disabled since it was read: its session was revoked.
            StoreError::NotFound(_) => OAuthError::invalid_grant("the agent session was revoked"),
            error => store_error(error),
        })?;
    match refreshed {
        Refreshed::Fresh(fresh) => {
            let (agent, access) = *fresh;
            Ok(issued(store, agent, &access, &tokens.access, next, client_id))
        }
        Refreshed::Reused(_) => Err(OAuthError::invalid_grant(
            "this refresh token was already used: the agent session has been ended",
        )),
        // Not the session's client: a stolen token; the session is ended.
        Refreshed::OtherClient => Err(OAuthError::invalid_grant(
            "the refresh token was issued to another client",
        )),
        Refreshed::Revoked => Err(OAuthError::invalid_grant("the agent session was revoked")),
        Refreshed::Unknown => Err(OAuthError::invalid_grant("unknown or expired refresh token")),
    }
}

/// A new access token (for `/mcp` only, naming its client) and refresh
/// token, to keep with the exchange or refresh; and the refresh token.
fn new_tokens(client_id: &str) -> (NewTokens, String) {
    let refresh = credential::mint();
    let tokens = NewTokens {
        access: credential::mint(),
        access_lifetime: ACCESS_LIFETIME,
        origin: Origin {
            audience: Some(Audience::Mcp),
            via: format!("oauth client={}", crate::text::escape_control(client_id)),
        },
        refresh_sha256: refresh.hash,
    };
    (tokens, refresh.token)
}

/// The token endpoint's answer for tokens kept.
fn issued(
    store: &Store,
    agent: Agent,
    access: &Credential,
    minted: &credential::NewToken,
    refresh_token: String,
    client_id: &str,
) -> Issued {
    let now = Utc::now();
    // A registered client in use is not swept as unused (a metadata
    // document's client has no row: nothing changes). Its tokens are
    // issued: a failure to note it costs no more than a log line.
    if let Err(error) = store.touch_oauth_client(client_id, now) {
        tracing::warn!(%error, "cannot note an OAuth client's use");
    }
    let expires_in = access.expires_at.map_or(0, |end| (end - now).num_seconds().max(0));
    Issued {
        access_token: minted.token.clone(),
        expires_in,
        refresh_token,
        agent,
        clusters: Vec::new(),
    }
}

/// The agent session a code or refresh token belongs to, if any: after a
/// refused grant (a reuse ends the session), its cached credentials must
/// be dropped at once.
pub fn session_of(store: &Store, code_or_refresh_token: &str) -> Option<String> {
    let hash = credential::hash(code_or_refresh_token);
    let refresh = store.refresh_token_session(&hash).ok().flatten();
    refresh.or_else(|| store.code_session(&hash).ok().flatten())
}

/// What a revocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revoked {
    /// A refresh token's whole agent session (its id).
    Session(String),
    /// An access token, alone.
    Credential,
    /// Nothing: the token is unknown here, or not one of OAuth's.
    Nothing,
}

/// Revoke a token (RFC 7009): a refresh token ends its session; an access
/// token is revoked alone. Unknown tokens are not an error (§2.2).
pub fn revoke(store: &Store, token: &str) -> Result<Revoked, OAuthError> {
    let hash = credential::hash(token);
    if let Some(session) = store.refresh_token_session(&hash).map_err(store_error)? {
        store.end_agent_session(&session).map_err(store_error)?;
        return Ok(Revoked::Session(session));
    }
    if let Some(found) = store.lookup_credential(&hash).map_err(store_error)? {
        let bound = found.origin.as_ref().and_then(|o| o.audience) == Some(Audience::Mcp);
        if bound {
            store.revoke_credential(&found.credential.id).map_err(store_error)?;
            return Ok(Revoked::Credential);
        }
    }
    Ok(Revoked::Nothing)
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;
