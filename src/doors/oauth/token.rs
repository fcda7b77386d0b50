//! `POST /oauth/token`: the one token endpoint. By `grant_type`:
//! `authorization_code` (an agent's client after its person's consent; or,
//! with `client_id=portcullis-cli`, `portcullis login`'s loopback code),
//! the device code (`portcullis login --no-browser`, RFC 8628),
//! `refresh_token` (rotated at every use), and RFC 8693 token exchange
//! (a CI job's OIDC token, `crate::ci`). Errors are RFC 6749 §5.2 JSON.

use super::{error, json, OAuth, Shared};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::doors::web;
use crate::identity::authenticate::Authenticator;
use crate::oauth::error::OAuthError;
use crate::oauth::tokens::{self, CodeExchange, Issued};
use http::{header, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::collections::HashMap;

/// The largest token request read.
const FORM_LIMIT: usize = 64 * 1024;
/// RFC 8693's grant type.
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8628's grant type (`portcullis login --no-browser`).
const DEVICE_CODE: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// The client id `portcullis login` sends with its loopback code.
pub const CLI_CLIENT: &str = "portcullis-cli";

/// Answer one token request.
pub async fn serve(oauth: &OAuth, doors: Shared<'_>, request: Request<Incoming>, row: &mut AuditRow) -> Response<Body> {
    row.verb = "create".into();
    row.resource = "tokens".into();
    let form = match read(request).await {
        Ok(form) => form,
        Err(e) => return refused(row, e),
    };
    let field = |name: &str| form.get(name).map(String::as_str);
    // `portcullis login`'s own grants: its loopback code, its device code.
    match (field("grant_type"), field("client_id")) {
        (Some("authorization_code"), Some(CLI_CLIENT) | None) => {
            return web::cli_login::exchange(doors.approvals, doors.web, &form, row).await
        }
        (Some(DEVICE_CODE), _) => return web::device::token(doors.approvals, doors.web, &form, row).await,
        _ => {}
    }
    let result = grant(oauth, doors.authenticator, &form, row).await;
    match result {
        Ok(body) => json(StatusCode::OK, body),
        Err(e) => refused(row, e),
    }
}

/// A refused token request: its reason in the row, its RFC 6749 error.
fn refused(row: &mut AuditRow, e: OAuthError) -> Response<Body> {
    if row.refused.is_empty() {
        row.refuse(if e.status == 429 {
            Refusal::RateLimited
        } else {
            Refusal::OAuthToken
        });
    }
    row.reason = e.description.chars().take(200).collect();
    error(&e)
}

async fn grant(
    oauth: &OAuth,
    authenticator: &Authenticator,
    form: &HashMap<String, String>,
    row: &mut AuditRow,
) -> Result<String, OAuthError> {
    let field = |name: &str| form.get(name).map(String::as_str);
    let grant_type = field("grant_type").ok_or_else(|| OAuthError::invalid_request("grant_type is missing"))?;
    match grant_type {
        "authorization_code" => {
            let ask = CodeExchange {
                code: required(form, "code")?,
                client_id: required(form, "client_id")?,
                redirect_uri: required(form, "redirect_uri")?,
                code_verifier: required(form, "code_verifier")?,
                resource: field("resource"),
            };
            let (store, ask) = (oauth.store.clone(), owned(ask));
            let code = ask.0[0].clone();
            let issued = blocking(move || tokens::exchange_code(&store, ask.borrow()));
            let issued = forgetting(oauth, authenticator, code, issued.await).await?;
            bind(oauth, &issued).await;
            Ok(noted(row, &issued))
        }
        "refresh_token" => {
            let token = required(form, "refresh_token")?.to_string();
            let client = required(form, "client_id")?.to_string();
            // Per client instance: the agent session the token is of. Not
            // the client_id the form names, which anyone may name: a budget
            // spent by naming it would let one address stop every user of a
            // public client from refreshing.
            let (store, presented) = (oauth.store.clone(), token.clone());
            if let Some(session) = blocking(move || Ok(tokens::session_of(&store, &presented))).await? {
                oauth.limit("token", &format!("session:{session}"))?;
            }
            if field("resource").is_some_and(|r| r.trim_end_matches('/') != oauth.issuer.resource()) {
                return Err(OAuthError::invalid_target(
                    "the only resource here is this server's /mcp",
                ));
            }
            let (store, presented) = (oauth.store.clone(), token.clone());
            let issued = blocking(move || tokens::refresh(&store, &token, &client)).await;
            let issued = forgetting(oauth, authenticator, presented, issued).await?;
            authenticator.forget_agent(&issued.agent.id);
            Ok(noted(row, &issued))
        }
        // issue 20: token exchange
        TOKEN_EXCHANGE => oauth.ci.exchange(form, row).await.map(|answer| answer.to_string()),
        other => Err(OAuthError::unsupported_grant_type(other)),
    }
}

/// A refused code or refresh token may have ended its session (a reuse):
/// its credentials leave the cache now, not at the cache's next refresh.
async fn forgetting(
    oauth: &OAuth,
    authenticator: &Authenticator,
    presented: String,
    result: Result<Issued, OAuthError>,
) -> Result<Issued, OAuthError> {
    if result.is_err() {
        let store = oauth.store.clone();
        let session = tokio::task::spawn_blocking(move || tokens::session_of(&store, &presented)).await;
        if let Ok(Some(session)) = session {
            authenticator.forget_agent(&session);
        }
    }
    result
}

/// The issued session in the audit row (never a token).
fn noted(row: &mut AuditRow, issued: &Issued) -> String {
    row.principal_kind = issued.agent.principal.kind.as_str().into();
    row.login = issued.agent.principal.name.clone();
    row.session = issued.agent.id.clone();
    issued.body()
}

/// Narrowed grants are bound before the first token works with them.
async fn bind(oauth: &OAuth, issued: &Issued) {
    let Some(reconciler) = oauth.reconciler.get() else {
        return;
    };
    for cluster in &issued.clusters {
        if let Err(error) = reconciler.pass_now(cluster).await {
            tracing::warn!(%error, cluster, "binding an agent session's grants is left to the reconciler");
        }
    }
}

fn required<'f>(form: &'f HashMap<String, String>, name: &str) -> Result<&'f str, OAuthError> {
    form.get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| OAuthError::invalid_request(format!("{name} is missing")))
}

/// A code exchange's parameters, owned, to cross onto a blocking thread.
struct Owned([String; 4], Option<String>);

fn owned(ask: CodeExchange<'_>) -> Owned {
    let fields = [ask.code, ask.client_id, ask.redirect_uri, ask.code_verifier].map(str::to_string);
    Owned(fields, ask.resource.map(str::to_string))
}

impl Owned {
    fn borrow(&self) -> CodeExchange<'_> {
        let [code, client_id, redirect_uri, code_verifier] = &self.0;
        CodeExchange {
            code,
            client_id,
            redirect_uri,
            code_verifier,
            resource: self.1.as_deref(),
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OAuthError> + Send + 'static,
) -> Result<T, OAuthError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| OAuthError::unavailable())?
}

/// The form, under its limit; POST with `application/x-www-form-urlencoded`
/// only, and no parameter twice (RFC 6749 §3.2).
async fn read(request: Request<Incoming>) -> Result<HashMap<String, String>, OAuthError> {
    if request.method() != Method::POST {
        return Err(OAuthError::invalid_request("the token endpoint takes POST"));
    }
    let form_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(OAuthError::invalid_request(
            "send the parameters as application/x-www-form-urlencoded",
        ));
    }
    let bytes = crate::body::read_whole(request.into_body(), FORM_LIMIT, crate::body::SMALL_BODY_WITHIN)
        .await
        .map_err(|_| OAuthError::invalid_request("the request is too large, too slow or was cut short"))?;
    let mut form = HashMap::new();
    for (name, value) in form_urlencoded::parse(&bytes) {
        if form.insert(name.to_string(), value.into_owned()).is_some() {
            return Err(OAuthError::invalid_request(format!("{name} is sent twice")));
        }
    }
    Ok(form)
}
