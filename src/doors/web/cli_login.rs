//! `portcullis login` through the browser: the command line listens on a
//! loopback port and opens `GET /login/cli` with a PKCE challenge (S256),
//! its loopback `redirect_uri` and a `state`. The signed-in person (signing
//! in first if need be) confirms with a button (`POST /login/cli`, under the
//! session's CSRF token); the browser is then sent to the loopback address
//! with a one-time code, which the command line exchanges, with its PKCE
//! verifier, at the token endpoint (`POST /oauth/token`, `client_id=portcullis-cli`) for a credential of the person's
//! that ends within 12 hours and never after the sign-in session.
//!
//! Codes live two minutes, in the store (so any replica exchanges them),
//! and are used once (taken at the first exchange, whether it succeeds or
//! not). Each
//! exchange is its request's audit row (verb `login` on `sessions`), with
//! the refusal when refused.

use super::signin::mark;
use super::{encode, field, html, pages, query_param, redirect, session, session_form, Session, Web};
use crate::approvals::{seal, Approvals};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::{self, Body};
use crate::gateway::router::Page;
use crate::identity::{credential, Principal};
use crate::store::{CliCode, Store, StoreError};
use base64::Engine;
use chrono::{TimeDelta, Utc};
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// How long the command line's credential lasts at most.
const CLI_LIFETIME: TimeDelta = TimeDelta::hours(12);
/// How long a code waits for its exchange.
const CODE_LIFETIME: TimeDelta = TimeDelta::minutes(2);

/// The codes given out and not yet exchanged, kept in the store by their
/// SHA-256, so that any replica sharing it exchanges them.
#[derive(Debug, Clone)]
pub struct Codes(Store);

impl Codes {
    /// The codes kept in `store`.
    pub fn new(store: Store) -> Codes {
        Codes(store)
    }

    async fn give(&self, pending: CliCode) -> Result<String, StoreError> {
        let (store, code) = (self.0.clone(), random());
        let sha256 = credential::hash(&code);
        blocking(move || store.give_cli_code(&sha256, &pending)).await?;
        Ok(code)
    }

    async fn take(&self, code: &str) -> Result<Option<CliCode>, StoreError> {
        let (store, sha256) = (self.0.clone(), credential::hash(code));
        blocking(move || store.take_cli_code(&sha256, Utc::now())).await
    }
}

/// Run `f` (on the store) off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Invalid(e.to_string()))?
}

/// What the command line asks for.
struct Ask {
    redirect_uri: String,
    challenge: String,
    state: String,
}

impl Ask {
    fn from(get: impl Fn(&str) -> Option<String>) -> Result<Ask, &'static str> {
        let redirect_uri = get("redirect_uri").unwrap_or_default();
        if !loopback(&redirect_uri) {
            return Err("The command line's address must be http://127.0.0.1 or http://[::1] with a port.");
        }
        if get("code_challenge_method").as_deref() != Some("S256") {
            return Err("Only the S256 PKCE challenge is accepted.");
        }
        let challenge = get("code_challenge").unwrap_or_default();
        let state = get("state").unwrap_or_default();
        let b64url = |t: &str| t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if challenge.len() != 43 || !b64url(&challenge) || state.is_empty() || state.len() > 128 || !b64url(&state) {
            return Err("The command line's PKCE challenge or state is malformed.");
        }
        Ok(Ask {
            redirect_uri,
            challenge,
            state,
        })
    }
}

/// A loopback redirect URI (RFC 8252 §7.3): plain HTTP to this machine,
/// with a port and a path, nothing else.
pub fn loopback(uri: &str) -> bool {
    let Some(rest) = uri.strip_prefix("http://") else {
        return false;
    };
    let (host_port, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let port = host_port
        .strip_prefix("127.0.0.1:")
        .or_else(|| host_port.strip_prefix("[::1]:"));
    port.is_some_and(|p| p.parse::<u16>().is_ok_and(|p| p != 0))
        && path.starts_with('/')
        && path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b))
}

/// `/login/cli` (its code is exchanged at `/oauth/token`).
pub async fn serve(
    web: &Web,
    key: &seal::Key,
    page: Page<'_>,
    session: Option<Session>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    match (page, request.method().clone(), session) {
        (Page::CliLogin, Method::GET, session) => {
            let query = request.uri().query().map(str::to_string);
            let ask = match Ask::from(|name| query_param(query.as_deref(), name)) {
                Ok(ask) => ask,
                Err(why) => return html(StatusCode::BAD_REQUEST, pages::message("Not signed in", why)),
            };
            match session {
                Some(s) => html(StatusCode::OK, confirm_page(&s, &session::csrf(key, &s), &ask)),
                None => {
                    let here = format!("/login/cli?{}", query.unwrap_or_default());
                    redirect(&format!("/login?next={}", encode(&here)), None)
                }
            }
        }
        (Page::CliLogin, Method::POST, Some(s)) => allow(web, key, &s, request, row).await,
        (Page::CliLogin, Method::POST, None) => super::signin::sign_in_first(),
        _ => html(
            StatusCode::METHOD_NOT_ALLOWED,
            pages::message("Not allowed", "Use the page's own links and buttons."),
        ),
    }
}

fn confirm_page(s: &Session, csrf: &str, ask: &Ask) -> String {
    let e = pages::attr;
    pages::page(
        "Sign in the command line",
        Some((&s.login, csrf)),
        &format!(
            "<h1>Sign in the command line?</h1><p>The <code>portcullis</code> command on this computer asks \
             to act as you for up to 12 hours. Allow it only if you just ran <code>portcullis login</code>.</p>\
             <form method=\"post\" action=\"/login/cli\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <input type=\"hidden\" name=\"redirect_uri\" value=\"{}\">\
             <input type=\"hidden\" name=\"code_challenge\" value=\"{}\">\
             <input type=\"hidden\" name=\"code_challenge_method\" value=\"S256\">\
             <input type=\"hidden\" name=\"state\" value=\"{}\">\
             <button type=\"submit\" id=\"allow\">Allow</button></form>",
            e(csrf),
            e(&ask.redirect_uri),
            e(&ask.challenge),
            e(&ask.state)
        ),
    )
}

/// The person allowed it: a code, and the browser on to the command line
/// by a page of ours (a redirect answering a form would meet the pages'
/// `form-action 'self'`).
async fn allow(
    web: &Web,
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    mark(row, "authorize");
    let form = match session_form(key, s, request, row).await {
        Ok(form) => form,
        Err(refused) => return refused,
    };
    let ask = match Ask::from(|name| form.get(name).cloned()) {
        Ok(ask) => ask,
        Err(why) => return html(StatusCode::BAD_REQUEST, pages::message("Not signed in", why)),
    };
    let given = web.cli_codes().give(CliCode {
        login: s.login.clone(),
        session: credential::hash(&s.cookie),
        challenge: ask.challenge,
        redirect_uri: ask.redirect_uri.clone(),
        expires_at: Utc::now() + CODE_LIFETIME,
    });
    let code = match given.await {
        Ok(code) => code,
        Err(error) => {
            tracing::warn!(%error, "no command line code given");
            let why = "portcullis cannot reach its store now: try again.";
            return html(StatusCode::SERVICE_UNAVAILABLE, pages::message("Not available", why));
        }
    };
    let to = format!(
        "{}?code={}&state={}",
        ask.redirect_uri,
        encode(&code),
        encode(&ask.state)
    );
    html(StatusCode::OK, pages::signed_in(&to))
}

/// The command line's exchange at the token endpoint (`/oauth/token`,
/// `client_id=portcullis-cli`): the code, its PKCE verifier and the same
/// redirect URI, for a credential.
pub(crate) async fn exchange(
    approvals: &Approvals,
    web: &Web,
    form: &HashMap<String, String>,
    row: &mut AuditRow,
) -> Response<Body> {
    mark(row, "login");
    let pending = match web.cli_codes().take(field(form, "code")).await {
        Ok(pending) => pending,
        Err(error) => return unavailable(&error),
    };
    let verifier = field(form, "code_verifier");
    let Some(pending) =
        pending.filter(|p| p.redirect_uri == field(form, "redirect_uri") && p.challenge == challenge_of(verifier))
    else {
        row.refuse(Refusal::SignInCodeRefused);
        let why = "the code is unknown, used, expired, or not for this verifier and redirect URI";
        return json(StatusCode::BAD_REQUEST, &oauth_error("invalid_grant", why));
    };
    credential_for(approvals, web, pending.login, pending.session, row).await
}

/// The answer giving `login` (signed in on the web with the session whose
/// id hashes to `session`) a credential for the command line, their group
/// rules re-applied from that sign-in first; the row names them.
pub(super) async fn credential_for(
    approvals: &Approvals,
    web: &Web,
    login: String,
    session: String,
    row: &mut AuditRow,
) -> Response<Body> {
    row.principal_kind = "person".into();
    row.login = login.clone();
    let (store, config) = (approvals.store.clone(), web.config().clone());
    let issued = tokio::task::spawn_blocking(move || issue(&store, &config, &login, &session)).await;
    match issued {
        Ok(Ok(Some((answer, credential_id, changes)))) => {
            row.credential_id = credential_id;
            web.bind(&changes).await;
            json(StatusCode::OK, &answer)
        }
        Ok(Ok(None)) => {
            row.refuse(Refusal::PersonDisabled);
            let why = "your sign-in session has ended or you are disabled: sign in again";
            json(StatusCode::BAD_REQUEST, &oauth_error("invalid_grant", why))
        }
        failed => {
            if let Ok(Err(error)) = failed {
                tracing::warn!(%error, "no command line credential issued");
            }
            unavailable_answer()
        }
    }
}

/// The answer when the store failed with `error` (logged, not told).
pub(super) fn unavailable(error: &StoreError) -> Response<Body> {
    tracing::warn!(%error, "a command line code could not be read");
    unavailable_answer()
}

fn unavailable_answer() -> Response<Body> {
    json(
        StatusCode::SERVICE_UNAVAILABLE,
        &oauth_error("temporarily_unavailable", "portcullis cannot read its store now"),
    )
}

/// The answer with a new credential, its id, and the grant changes its
/// group rules made.
type Issued = (serde_json::Value, String, Vec<crate::store::RuleGrantChange>);

/// A credential for `login`, ending with their session at the latest;
/// `None` when the session has ended or the person is disabled. A provider
/// session's groups are matched against the rules as they are now, so a
/// rule added or removed since the web sign-in counts. Blocking (the store).
fn issue(
    store: &crate::store::Store,
    config: &crate::config::Config,
    login: &str,
    session: &str,
) -> Result<Option<Issued>, crate::signin::groups::RuleError> {
    let person = Principal::person(login);
    let session_sha256 = session;
    let Some(session) = store.web_session(session)? else {
        return Ok(None);
    };
    if store.principal_disabled(&person)? != Some(false) {
        return Ok(None);
    }
    let changes = if session.oidc {
        crate::signin::groups::apply(config, store, login, &session.groups, session.expires_at)?
    } else {
        Vec::new()
    };
    let ends = (Utc::now() + CLI_LIFETIME).min(session.expires_at);
    // Ends with the sign-in too: signing out on the web revokes it (and a
    // sign-out just before it leaves none).
    let (credential, token) = match store.issue_session_credential(&person, "command line", ends, session_sha256) {
        Err(crate::store::StoreError::NotFound(_)) => return Ok(None),
        issued => issued?,
    };
    let answer = serde_json::json!({
        "login": login,
        "token": token,
        "credential_id": credential.id,
        "expires_at": ends,
    });
    Ok(Some((answer, credential.id, changes)))
}

/// The S256 challenge of `verifier` (RFC 7636).
pub fn challenge_of(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

pub(super) fn oauth_error(error: &str, description: &str) -> serde_json::Value {
    serde_json::json!({"error": error, "error_description": description})
}

pub(super) fn json(code: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(body::full(value.to_string()));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub(super) fn random() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_address_with_a_port_receives_the_code() {
        assert!(loopback("http://127.0.0.1:53682/callback"));
        assert!(loopback("http://[::1]:8080/"));
        for bad in [
            "https://127.0.0.1:1/callback",
            "http://127.0.0.1/callback",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:80@evil.example/",
            "http://127.0.0.1.evil.example:80/",
            "http://localhost:80/",
            "http://127.0.0.1:80/a?b",
            "http://127.0.0.1:80",
        ] {
            assert!(!loopback(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_code_is_used_once_and_not_after_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let codes = Codes::new(Store::open(&dir.path().join("p.db")).unwrap());
        let pending = CliCode {
            login: "ana".into(),
            session: "s".into(),
            challenge: challenge_of("v"),
            redirect_uri: "http://127.0.0.1:1/".into(),
            expires_at: Utc::now() + CODE_LIFETIME,
        };
        let code = codes.give(pending.clone()).await.unwrap();
        assert_eq!(codes.take(&code).await.unwrap().unwrap().login, "ana");
        assert!(codes.take(&code).await.unwrap().is_none());
        let old = codes
            .give(CliCode {
                expires_at: Utc::now() - TimeDelta::seconds(1),
                ..pending
            })
            .await
            .unwrap();
        assert!(codes.take(&old).await.unwrap().is_none());
    }

    #[test]
    fn the_s256_challenge_is_the_unpadded_base64url_sha256_of_the_verifier() {
        // As `openssl dgst -sha256 -binary | base64` gives it, made URL-safe.
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mJ0kZRVQHvEEGGmwHgfovF8GvGQ_0k"),
            "QQM94ICB7inpwy7M3SaOhrxleHwrXdhVZiO3sH-OzxY"
        );
    }
}
