//! Sign-in with the identity provider, on the web: `GET /login` starts an
//! attempt (its id in the SameSite=Lax sign-in cookie) and sends the
//! browser to the provider; `GET /login/callback` finishes it through
//! [`crate::signin`] and opens a session whose credential is its own.
//!
//! Every sign-in, refused or not, is its request's audit row with verb
//! `signin` (and every sign-out `signout`), on `portcullis.dev` `sessions`,
//! with the refusal's word when refused. Attempts are counted per client
//! address ([`Web`]): more than `[sessions] sign_in_per_minute` get 429.

use super::{html, pages, query_param, redirect, safe_next, session};
use crate::approvals::{seal, Approvals};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::config::Config;
use crate::gateway::router::Page;
use crate::ratelimit::RateLimiter;
use crate::signin::{Callback, SetupError, SignIn, SignInError};
use chrono::Utc;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::time::Duration;

/// How people sign in to the web pages: the identity provider (when
/// `[oidc]` is set), the sessions' lifetime, and the attempts per address.
#[derive(Debug)]
pub struct Web {
    signin: Option<SignIn>,
    limiter: RateLimiter,
    /// Device codes given per address, apart from the sign-ins: asking
    /// for one needs no session, so any web page can make its visitors'
    /// browsers ask, and must not spend a whole office's sign-ins.
    device_limiter: RateLimiter,
    lifetime: Duration,
    /// For the group rules' grants (roles, clusters) at each sign-in.
    config: std::sync::Arc<Config>,
    /// `portcullis login`'s codes waiting for their exchange (in the store).
    cli_codes: super::cli_login::Codes,
    /// `portcullis login --no-browser`'s device codes.
    devices: super::device::Devices,
    /// Binds a grant the console approves before the answer (set once
    /// the server has built it, as for the person API).
    reconciler: std::sync::OnceLock<std::sync::Arc<crate::reconcile::Reconciler>>,
    /// Who an OAuth client is, for the consent page (shared with the token
    /// endpoint).
    clients: std::sync::Arc<crate::oauth::client::Clients>,
    /// `/oauth/authorize` requests per address and per client
    /// (`[oauth] requests_per_minute`).
    authorize_limiter: RateLimiter,
}

impl Web {
    /// From the configuration: reads `[oidc]`'s secret, fetches nothing.
    /// `store` keeps `portcullis login`'s codes; `clients` resolves the OAuth clients the consent page names.
    pub fn new(
        config: &Config,
        store: crate::store::Store,
        clients: std::sync::Arc<crate::oauth::client::Clients>,
    ) -> Result<Web, SetupError> {
        let signin = match &config.oidc {
            Some(oidc) => Some(SignIn::new(oidc, &config.public_url)?),
            None => None,
        };
        let rate = config.sessions.sign_in_per_minute;
        Ok(Web {
            signin,
            limiter: RateLimiter::new(rate, rate),
            device_limiter: RateLimiter::new(rate, rate),
            lifetime: config.sessions.lifetime,
            config: std::sync::Arc::new(config.clone()),
            cli_codes: super::cli_login::Codes::new(store.clone()),
            devices: super::device::Devices::new(store),
            reconciler: Default::default(),
            clients,
            authorize_limiter: RateLimiter::new(
                config.oauth.requests_per_minute.max(1),
                config.oauth.requests_per_minute.max(1),
            ),
        })
    }

    /// May `client` (an address) make another sign-in attempt now (a
    /// sign-in, or trying a device code)?
    pub(super) fn sign_in_allowed(&self, client: &str) -> bool {
        self.limiter.check(client).is_ok()
    }

    /// May `client` (an address) be given another device code now?
    pub(super) fn device_code_allowed(&self, client: &str) -> bool {
        self.device_limiter.check(client).is_ok()
    }

    /// May `key` (an address or a client) ask `/oauth/authorize` again
    /// now? Else how many seconds to wait.
    pub fn authorize_allowed(&self, key: &str) -> Result<(), u64> {
        self.authorize_limiter.check(key).map_err(|wait| wait.as_secs().max(1))
    }

    /// Bind approved grants through `reconciler` before answering.
    pub fn set_reconciler(&self, reconciler: std::sync::Arc<crate::reconcile::Reconciler>) {
        let _ = self.reconciler.set(reconciler);
    }

    /// The reconciler, once the server has one.
    pub fn reconciler(&self) -> Option<&std::sync::Arc<crate::reconcile::Reconciler>> {
        self.reconciler.get()
    }

    /// Bind the grants a sign-in's group rules gave before answering, as an
    /// approved access request's are: the person's first request would
    /// otherwise wait for the next resync. The clusters' passes run side by
    /// side, for five seconds at most (a cluster down does not hold the
    /// sign-in up; the resync binds later). An extended grant, which every
    /// sign-in makes and is bound already unless it had lapsed, only asks
    /// for a pass; a revoked one needs none (its group is no longer sent).
    pub(crate) async fn bind(&self, changes: &[crate::store::RuleGrantChange]) {
        use crate::store::RuleGrantChange as Change;
        let Some(reconciler) = self.reconciler() else {
            return;
        };
        let mut granted: Vec<&str> = Vec::new();
        for change in changes {
            match change {
                Change::Granted(grant) => granted.push(&grant.cluster),
                Change::Extended(grant) => reconciler.trigger(&grant.cluster),
                Change::Revoked(_) => {}
            }
        }
        granted.sort_unstable();
        granted.dedup();
        let passes = granted.iter().map(|cluster| async move {
            match reconciler.pass_now(cluster).await {
                Ok(report) if report.outcome.ok() => {}
                Ok(report) => {
                    tracing::warn!(%cluster, errors = ?report.outcome.errors, "a sign-in's grant not bound yet")
                }
                Err(error) => tracing::warn!(%cluster, %error, "a sign-in's grant not bound yet"),
            }
        });
        let all = futures_util::future::join_all(passes);
        if tokio::time::timeout(std::time::Duration::from_secs(5), all)
            .await
            .is_err()
        {
            tracing::warn!("a sign-in's grants not bound within 5 s: the resync binds them");
        }
    }

    /// The identity provider, when people sign in with one.
    pub fn provider(&self) -> Option<&SignIn> {
        self.signin.as_ref()
    }

    /// How long a session lasts.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// The codes given to `portcullis login`, not yet exchanged.
    pub fn cli_codes(&self) -> &super::cli_login::Codes {
        &self.cli_codes
    }

    /// The device codes given to `portcullis login --no-browser`.
    pub fn devices(&self) -> &super::device::Devices {
        &self.devices
    }

    /// Who an OAuth client is.
    pub fn clients(&self) -> &crate::oauth::client::Clients {
        &self.clients
    }

    /// The configuration (the console's clusters, roles, public URL).
    pub fn config(&self) -> &std::sync::Arc<Config> {
        &self.config
    }
}

/// Mark `row` as a sign-in act (`signin`, `signout`).
pub fn mark(row: &mut AuditRow, verb: &str) {
    row.verb = verb.into();
    row.api_group = "portcullis.dev".into();
    row.api_version = "v1".into();
    row.resource = "sessions".into();
}

/// `/login` and `/login/callback` when people sign in with the provider.
pub async fn serve(
    web: &Web,
    signin: &SignIn,
    approvals: &Approvals,
    key: &seal::Key,
    page: Page<'_>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    if request.method() != http::Method::GET {
        return html(
            StatusCode::METHOD_NOT_ALLOWED,
            pages::message("Not allowed", "Sign in with the link on the sign-in page."),
        );
    }
    let query = request.uri().query().map(str::to_string);
    let query = query.as_deref();
    let attempt = session::signin_attempt(request.headers());
    let previous = session::cookie_id(request.headers());
    drop(request);
    if page == Page::Login && query_param(query, "signed_out").is_some() {
        return html(StatusCode::OK, pages::signed_out());
    }
    if page == Page::LoginCallback {
        mark(row, "signin");
    }
    // Only a callback from a browser that began a sign-in costs anything (a
    // code exchanged at the provider), so only it takes from the address's
    // budget: `/login`, and a callback without the sign-in cookie (refused
    // at once), are what any web page can make its visitors' browsers ask
    // for, and would spend the budget of a whole office behind one address.
    if page == Page::LoginCallback && attempt.is_some() && !web.sign_in_allowed(&row.client) {
        row.refuse(Refusal::RateLimited);
        return html(
            StatusCode::TOO_MANY_REQUESTS,
            pages::message(
                "Too many sign-in attempts",
                "Too many sign-in attempts from your address: wait a minute and try again.",
            ),
        );
    }
    match page {
        Page::LoginCallback => callback(web, signin, approvals, key, (attempt, previous), query, row).await,
        _ => {
            begin(
                signin,
                key,
                &safe_next(&query_param(query, "next").unwrap_or_default()),
                row,
            )
            .await
        }
    }
}

/// A page that is not the sign-in's, asked for without a session.
pub fn sign_in_first() -> Response<Body> {
    html(
        StatusCode::UNAUTHORIZED,
        pages::sign_in_link("/approvals", Some("Sign in first.")),
    )
}

/// Start an attempt: to the provider, with the sign-in cookie.
async fn begin(signin: &SignIn, key: &seal::Key, next: &str, row: &mut AuditRow) -> Response<Body> {
    let attempt = SignIn::new_attempt();
    match signin.start(key, &attempt).await {
        Ok(url) => redirect(&url, Some(&session::signin_cookie(&attempt, next))),
        Err(error) => refused(&error, row),
    }
}

async fn callback(
    web: &Web,
    signin: &SignIn,
    approvals: &Approvals,
    key: &seal::Key,
    (attempt, previous): (Option<(String, String)>, Option<String>),
    query: Option<&str>,
    row: &mut AuditRow,
) -> Response<Body> {
    let next = safe_next(attempt.as_ref().map_or("", |(_, next)| next.as_str()));
    let answer = callback_of(query);
    let seen = match signin
        .finish(key, attempt.as_ref().map(|(a, _)| a.as_str()), &answer)
        .await
    {
        Ok(seen) => seen,
        Err(error) => return forget_attempt(refused(&error, row)),
    };
    let (store, create, lifetime) = (approvals.store.clone(), signin.create_people(), web.lifetime);
    let client = row.client.clone();
    let config = web.config.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let login = crate::signin::admit(&store, &seen, create).map_err(|e| (seen.login.clone(), e))?;
        // Before the session opens: a person who left a group must not
        // keep its grant through a session that failed to end it.
        let ends = Utc::now() + chrono::TimeDelta::from_std(lifetime).unwrap_or(chrono::TimeDelta::hours(12));
        let changes = crate::signin::groups::apply(&config, &store, &login, &seen.groups, ends)
            .map_err(|e| (login.clone(), SignInError::Groups(e.to_string())))?;
        let (cookie, credential) =
            session::start_signed_in(&store, &login, lifetime, &seen.groups).map_err(|e| (login.clone(), e.into()))?;
        session::replace(&store, &config, previous.as_deref(), &cookie, &client);
        Ok::<_, (String, SignInError)>((login, cookie, credential, changes))
    })
    .await;
    let response = match opened {
        Ok(Ok((login, cookie, credential, changes))) => {
            web.bind(&changes).await;
            row.principal_kind = "person".into();
            row.login = login;
            row.credential_id = credential;
            signed_in(&next, &session::set_cookie(&cookie, lifetime))
        }
        Ok(Err((login, error))) => {
            row.login = login;
            refused(&error, row)
        }
        Err(_) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            pages::message("Unavailable", "portcullis could not finish signing you in; try again."),
        ),
    };
    forget_attempt(response)
}

/// What the provider sent back, from `/login/callback`'s query.
fn callback_of(query: Option<&str>) -> Callback {
    let param = |name| query_param(query, name);
    Callback {
        code: param("code"),
        state: param("state"),
        error: param("error"),
        error_description: param("error_description"),
        iss: param("iss"),
    }
}

/// Signed in: the session's cookie, and on to `next`.
fn signed_in(next: &str, cookie: &str) -> Response<Body> {
    let mut page = html(StatusCode::OK, pages::signed_in(next));
    if let Ok(value) = HeaderValue::from_str(cookie) {
        page.headers_mut().append(header::SET_COOKIE, value);
    }
    page
}

/// An attempt is used once: its cookie goes with the answer.
fn forget_attempt(mut response: Response<Body>) -> Response<Body> {
    if let Ok(value) = HeaderValue::from_str(&session::signin_cookie("", "")) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// The page saying why signing in failed; the refusal in the row.
fn refused(error: &SignInError, row: &mut AuditRow) -> Response<Body> {
    if let Some(why) = error.refusal() {
        row.refuse(why);
    }
    let code = match error {
        SignInError::ProviderUnavailable(_) | SignInError::Store(_) | SignInError::Groups(_) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        SignInError::StateMissing | SignInError::StateWrong | SignInError::CodeRefused(_) => StatusCode::BAD_REQUEST,
        SignInError::ProviderError(_) | SignInError::IdToken(..) => StatusCode::UNAUTHORIZED,
        _ => StatusCode::FORBIDDEN,
    };
    tracing::info!(refused = ?error.refusal(), %error, "sign-in refused");
    html(code, pages::sign_in_refused(&error.to_string()))
}
