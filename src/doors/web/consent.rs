//! `/oauth/authorize`: an agent's OAuth client asks a person for access
//! (issue 19, item 4), and the person chooses on this page which of their
//! own grants the agent gets (each with its role or a narrower one), for
//! how long, and whether its writes wait for their approval.
//!
//! `GET` checks the request in order — `response_type=code`, the client
//! (`crate::oauth::client`), its redirect URI, the PKCE S256 challenge,
//! `state`, `resource` (RFC 8707: this server's `/mcp`) — and answers any
//! failure with a plain-text 400: never a redirect carrying an error, so a
//! redirect URI that is not the client's receives nothing. Then, signed
//! out, the browser goes to sign in and comes back; signed in, the consent
//! page ([`super::consent_page`]).
//!
//! `POST` (under the session's CSRF token) checks everything again from
//! the form's hidden fields. Deny sends the browser to the redirect URI
//! with `error=access_denied`; approve checks the choice
//! (`crate::oauth::consent`), keeps it behind a one-use code
//! (`crate::oauth::tokens::issue_code`) and sends the browser on with it.
//! Both carry `state` and `iss` (RFC 9207), and go by a page of ours, as
//! the command-line sign-in does (the pages' CSP has `form-action 'self'`).
//!
//! Each request is its audit row on `portcullis.dev` `oauthconsents`:
//! `get` for the page, `authorize` for a decision, named by the client.

use super::form::session_form_fields;
use super::{consent_page, encode, html, redirect, session, Session, Web};
use crate::approvals::{seal, Approvals};
use crate::audit::refusal::Refusal;
use crate::audit::row::{bounded, AuditRow};
use crate::body::{self, Body};
use crate::identity::Principal;
use crate::oauth::client::{ClientError, ClientMetadata};
use crate::oauth::consent::{self, Choice, ConsentError};
use crate::oauth::metadata::Issuer;
use crate::oauth::redirect;
use crate::oauth::tokens::{self, Consent};
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;

/// The longest `state` accepted.
const MAX_STATE: usize = 500;
/// The parameters of an authorization request that may appear once only.
const SINGLE: &[&str] = &[
    "response_type",
    "client_id",
    "redirect_uri",
    "code_challenge",
    "code_challenge_method",
    "state",
    "resource",
];

/// An authorization request found acceptable.
#[derive(Debug, Clone)]
pub(super) struct Ask {
    /// The client, resolved.
    pub client: ClientMetadata,
    /// One of the client's redirect URIs.
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// The client's `state`, if it sent one.
    pub state: Option<String>,
    /// The `resource` as sent, if sent.
    pub resource: Option<String>,
}

impl Ask {
    /// The request's parameters, as the page's hidden fields carry them.
    pub fn fields(&self) -> Vec<(&'static str, &str)> {
        let mut fields = vec![
            ("response_type", "code"),
            ("client_id", self.client.client_id.as_str()),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("code_challenge", self.code_challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        fields.extend(self.state.as_deref().map(|s| ("state", s)));
        fields.extend(self.resource.as_deref().map(|r| ("resource", r)));
        fields
    }

    /// This request's own URL, to come back to after signing in. Encoded
    /// so that `safe_next` keeps it (no `*`, which form encoding leaves).
    fn here(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in self.fields() {
            query.append_pair(name, value);
        }
        format!("/oauth/authorize?{}", query.finish().replace('*', "%2A"))
    }

    /// The name the page shows: the client's own, or its id's host.
    pub fn client_name(&self) -> String {
        let name = self.client.client_name.trim();
        if !name.is_empty() {
            return name.to_string();
        }
        let id = &self.client.client_id;
        id.strip_prefix("https://")
            .and_then(|rest| rest.split(['/', '?', ':']).next())
            .unwrap_or(id)
            .to_string()
    }
}

/// A refusal: a plain-text page, and the audit's word.
#[derive(Debug)]
struct Refused {
    status: StatusCode,
    why: String,
    refusal: Option<Refusal>,
}

impl Refused {
    fn bad(why: impl Into<String>, refusal: Refusal) -> Refused {
        Refused {
            status: StatusCode::BAD_REQUEST,
            why: why.into(),
            refusal: Some(refusal),
        }
    }

    fn rate_limited(seconds: u64) -> Refused {
        Refused {
            status: StatusCode::TOO_MANY_REQUESTS,
            why: format!("Too many authorization requests: wait {seconds} s and try again."),
            refusal: Some(Refusal::RateLimited),
        }
    }

    fn unavailable() -> Refused {
        Refused {
            status: StatusCode::SERVICE_UNAVAILABLE,
            why: "portcullis cannot read its store now; try again.".into(),
            refusal: None,
        }
    }

    fn answer(self, row: &mut AuditRow) -> Response<Body> {
        if let Some(refusal) = self.refusal {
            row.refuse(refusal);
        }
        row.reason = self.why.chars().take(200).collect();
        text(
            self.status,
            format!(
                "Authorization refused\n\n{}\n\nNothing was sent to the application. \
                 Start again from the application.\n",
                self.why
            ),
        )
    }
}

/// `GET` and `POST /oauth/authorize`.
pub async fn serve(
    approvals: &Approvals,
    web: &Web,
    key: &seal::Key,
    session: Option<Session>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    if let Err(seconds) = web.authorize_allowed(&format!("addr:{}", row.client)) {
        mark(row, "authorize");
        return Refused::rate_limited(seconds).answer(row);
    }
    match (request.method().clone(), session) {
        (Method::GET, session) => show(approvals, web, key, session, request, row).await,
        (Method::POST, Some(s)) => decide(approvals, web, key, &s, request, row).await,
        (Method::POST, None) => {
            mark(row, "authorize");
            let why = "You are not signed in (any more): start again from the application.";
            Refused::bad(why, Refusal::OAuthConsentRefused).answer(row)
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "Use GET or POST.\n".into()),
    }
}

/// Mark `row` as a consent act.
fn mark(row: &mut AuditRow, verb: &str) {
    row.verb = verb.into();
    row.api_group = "portcullis.dev".into();
    row.api_version = "v1".into();
    row.resource = "oauthconsents".into();
}

async fn show(
    approvals: &Approvals,
    web: &Web,
    key: &seal::Key,
    session: Option<Session>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    mark(row, "get");
    let query = request.uri().query().unwrap_or_default().to_string();
    let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let ask = match check(web, &params).await {
        Ok(ask) => ask,
        Err(refused) => return refused.answer(row),
    };
    row.name = bounded(&ask.client.client_id);
    let Some(s) = session else {
        return redirect(&format!("/login?next={}", encode(&ask.here())), None);
    };
    let (store, config, person) = (
        approvals.store.clone(),
        web.config().clone(),
        Principal::person(&s.login),
    );
    let client_id = ask.client.client_id.clone();
    let offered = tokio::task::spawn_blocking(move || {
        // Shown to a signed-in person: the client is in use, not one of a
        // flood of registrations no one signs in for, so the bound on
        // unused clients does not sweep it mid-consent. (Naming a client,
        // which anyone may, does not count.)
        if let Err(error) = store.touch_oauth_client(&client_id, chrono::Utc::now()) {
            tracing::warn!(%error, "cannot note an OAuth client's use");
        }
        consent::offers(&store, &config, &person)
    });
    match offered.await {
        Ok(Ok(offers)) => {
            let page = consent_page::View {
                login: &s.login,
                csrf: &session::csrf(key, &s),
                ask: &ask,
                offers: &offers,
            };
            html(StatusCode::OK, consent_page::consent(&page))
        }
        _ => Refused::unavailable().answer(row),
    }
}

/// The value of parameter `name`, refusing one given twice (RFC 6749
/// §3.1).
fn one<'p>(params: &'p [(String, String)], name: &str) -> Result<Option<&'p str>, Refused> {
    let mut found = params.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let first = found.next();
    if found.next().is_some() {
        let why = format!("The parameter {name} is given more than once.");
        return Err(Refused::bad(why, Refusal::OAuthAuthorizeInvalid));
    }
    Ok(first)
}

/// The authorization request in `params`, checked in order; the first
/// failure is the refusal.
async fn check(web: &Web, params: &[(String, String)]) -> Result<Ask, Refused> {
    let invalid = |why: &str| Refused::bad(why, Refusal::OAuthAuthorizeInvalid);
    for name in SINGLE {
        one(params, name)?;
    }
    let get = |name: &str| one(params, name).ok().flatten().unwrap_or_default();
    if get("response_type") != "code" {
        return Err(invalid(
            "response_type must be \"code\": portcullis gives authorization codes (with PKCE) only.",
        ));
    }
    let client_id = get("client_id");
    // A client's own budget is spent only by fetching its metadata
    // document: a client_id is anyone's to name, and a budget spent by
    // naming it would let one address lock every user of a public client
    // (whose URL is the same at every install) out of signing in.
    if web.clients().would_fetch(client_id) {
        web.authorize_allowed(&format!("client:{client_id}"))
            .map_err(Refused::rate_limited)?;
    }
    let client = resolve(web, client_id).await?;
    let redirect_uri = get("redirect_uri");
    if redirect_uri.is_empty() || !redirect::matches(&client.redirect_uris, redirect_uri) {
        let why = "redirect_uri is missing or is not one of the redirect URIs the client declared.";
        return Err(Refused::bad(why, Refusal::OAuthRedirectRefused));
    }
    if get("code_challenge_method") != "S256" {
        return Err(invalid(
            "code_challenge_method must be S256: PKCE with S256 is required.",
        ));
    }
    let challenge = get("code_challenge");
    let base64url = challenge
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if challenge.len() != 43 || !base64url {
        return Err(invalid(
            "code_challenge must be the S256 challenge: 43 base64url characters.",
        ));
    }
    let state = one(params, "state")?;
    if state.is_some_and(|s| s.len() > MAX_STATE) {
        return Err(invalid("state is longer than 500 characters."));
    }
    let resource = one(params, "resource")?;
    let ours = Issuer::new(&web.config().public_url).resource();
    if resource.is_some_and(|r| r.trim_end_matches('/') != ours) {
        return Err(invalid(&format!(
            "resource must be {ours}, this server's MCP endpoint."
        )));
    }
    Ok(Ask {
        client,
        redirect_uri: redirect_uri.to_string(),
        code_challenge: challenge.to_string(),
        state: state.map(str::to_string),
        resource: resource.map(str::to_string),
    })
}

async fn resolve(web: &Web, client_id: &str) -> Result<ClientMetadata, Refused> {
    if client_id.is_empty() {
        return Err(Refused::bad("client_id is missing.", Refusal::OAuthClientRefused));
    }
    web.clients().resolve(client_id).await.map_err(|error| match error {
        ClientError::Unavailable => Refused::unavailable(),
        other => Refused::bad(format!("{}.", other.to_string().trim_end_matches('.')), other.refusal()),
    })
}

/// The person's decision.
async fn decide(
    approvals: &Approvals,
    web: &Web,
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    mark(row, "authorize");
    let fields = match session_form_fields(key, s, request, row).await {
        Ok(fields) => fields,
        Err(refused) => return refused,
    };
    let ask = match check(web, &fields).await {
        Ok(ask) => ask,
        Err(refused) => return refused.answer(row),
    };
    row.name = bounded(&ask.client.client_id);
    let issuer = Issuer::new(&web.config().public_url).issuer;
    match one(&fields, "decision").ok().flatten() {
        Some("deny") => {
            row.reason = "access_denied".into();
            let to = back_to(&ask, &[("error", "access_denied")], &issuer);
            html(
                StatusCode::OK,
                consent_page::handoff(&to, &ask.client_name(), false, &ask.redirect_uri),
            )
        }
        Some("approve") => match approve(approvals, web, s, &ask, &fields).await {
            Ok(code) => {
                row.write = true;
                let to = back_to(&ask, &[("code", &code)], &issuer);
                html(
                    StatusCode::OK,
                    consent_page::handoff(&to, &ask.client_name(), true, &ask.redirect_uri),
                )
            }
            Err(refused) => refused.answer(row),
        },
        _ => Refused::bad("Choose Allow or Deny.", Refusal::OAuthConsentRefused).answer(row),
    }
}

/// Check the person's choice and keep it behind a new code.
async fn approve(
    approvals: &Approvals,
    web: &Web,
    s: &Session,
    ask: &Ask,
    fields: &[(String, String)],
) -> Result<String, Refused> {
    let chosen = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let grants = fields
        .iter()
        .filter(|(name, _)| name == "grant")
        .map(|(_, id)| (id.clone(), chosen(&format!("role-{id}")).unwrap_or_default()))
        .collect();
    let choice = Choice {
        grants,
        duration_secs: chosen("duration").and_then(|d| d.parse().ok()).unwrap_or(0),
    };
    let writes_need_approval = chosen("writes_need_approval").is_some();
    let (store, config, login) = (approvals.store.clone(), web.config().clone(), s.login.clone());
    let signed_in_with = s.credential_id.clone();
    let (client_id, client_name) = (ask.client.client_id.clone(), ask.client_name());
    let (redirect_uri, code_challenge) = (ask.redirect_uri.clone(), ask.code_challenge.clone());
    let issued = tokio::task::spawn_blocking(move || {
        let settled = consent::settle(&store, &config, &Principal::person(&login), &choice)?;
        let consent = Consent {
            login,
            client_id,
            client_name,
            grants: settled.grants,
            until: settled.until,
            writes_need_approval,
            redirect_uri,
            code_challenge,
            resource: Issuer::new(&config.public_url).resource(),
            signed_in_with,
        };
        Ok::<_, ConsentError>(tokens::issue_code(&store, &consent).ok())
    })
    .await;
    match issued {
        Ok(Ok(Some(code))) => Ok(code),
        Ok(Err(ConsentError::Refused(why))) => Err(Refused::bad(why, Refusal::OAuthConsentRefused)),
        _ => Err(Refused::unavailable()),
    }
}

/// The client's redirect URI with `answer`, its `state` and our `iss`.
fn back_to(ask: &Ask, answer: &[(&str, &str)], issuer: &str) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in answer {
        query.append_pair(name, value);
    }
    if let Some(state) = &ask.state {
        query.append_pair("state", state);
    }
    query.append_pair("iss", issuer);
    let joiner = if ask.redirect_uri.contains('?') { '&' } else { '?' };
    format!("{}{joiner}{}", ask.redirect_uri, query.finish())
}

/// A plain-text answer, locked down like the pages.
fn text(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(body::full(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
