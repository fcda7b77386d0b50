//! The approval pages, on the same listener as everything else:
//!
//! - With `[oidc]` ([`signin`]): `GET /login` sends the browser to the
//!   identity provider, which sends it back to `GET /login/callback`; a
//!   session cookie follows, the session kept in the store ([`session`]).
//!   Attempts are rate-limited per address.
//! - Without it (the demo): `GET /login`, `POST /login`: sign in with a
//!   person's portcullis token (the one in their kubeconfig), under the
//!   sign-in form's CSRF token.
//! - `POST /logout`: sign out (the session ends in the store).
//! - `GET /approvals`: the held writes waiting on the signed-in person.
//! - `GET /approvals/<id>`: who asked, what, where, the diff and the dry
//!   run; `POST /approvals/<id>`: approve or deny, with an optional reason
//!   and a confirmation, under the session's CSRF token.
//!
//! Every page carries a CSP without scripts, `X-Frame-Options: DENY`,
//! `nosniff`, no referrer and no caching. Decisions go through
//! [`crate::approvals::decide`], so they are checked and audited like the CLI's.

pub mod cli_login;
mod consent;
mod consent_page;
pub mod console;
pub mod device;
mod form;
pub mod pages;
pub mod session;
pub mod signin;

use crate::approvals::decide::{self, DecideError};
use crate::approvals::{seal, wait, Approvals, HeldWrite};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::{self, Body};
use crate::gateway::router::Page;
use crate::identity::authenticate::Authenticator;
use crate::identity::{Identity, Principal, PrincipalKind};
pub(crate) use form::session_form;
use form::{field, read_form, Form};
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use session::Session;
pub use signin::Web;

/// Serve `page`; `row` is the request's audit row, `audit` the audit the
/// console's audit page reads.
pub async fn serve(
    approvals: &Approvals,
    audit: &crate::audit::Audit,
    authenticator: &Authenticator,
    web: &Web,
    page: Page<'_>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    row.verb = request.method().as_str().to_ascii_lowercase();
    if page == Page::NotFound {
        return html(
            StatusCode::NOT_FOUND,
            pages::message("No such page", "Use the links on portcullis's own pages."),
        );
    }
    let Some(key) = approvals.key.as_ref() else {
        let why = "this portcullis has no web pages: its [approvals] key_file is not set";
        // `portcullis login --no-browser` reads an OAuth error (RFC 8628).
        if page == Page::DeviceCode {
            let body = cli_login::oauth_error("invalid_request", why);
            return cli_login::json(StatusCode::NOT_FOUND, &body);
        }
        return html(
            StatusCode::NOT_FOUND,
            pages::message(
                "Not available",
                "This portcullis has no web pages: its [approvals] key_file is not set.",
            ),
        );
    };
    let session = signed_in(approvals, request.headers(), row).await;
    let method = request.method().clone();
    if let Page::CliLogin = page {
        return cli_login::serve(web, key, page, session, request, row).await;
    }
    if let Page::DeviceLogin | Page::DeviceCode | Page::DeviceCheck = page {
        return device::serve(web, key, page, session, request, row).await;
    }
    if let Page::Authorize = page {
        return consent::serve(approvals, web, key, session, request, row).await;
    }
    if let Page::Console | Page::ConsoleAction(_) = page {
        return match session {
            Some(s) if page == Page::ConsoleAction("audit") => {
                let csrf = session::csrf(key, &s);
                console::audit::serve(audit, &s, &csrf, request, row).await
            }
            Some(s) => console::serve(approvals, authenticator, web, &s, page, request, row).await,
            None if method == Method::GET => redirect("/login?next=/console", None),
            None => signin::sign_in_first(),
        };
    }
    if let Some(signin) = web.provider() {
        match (page, &method, &session) {
            // Signed in already: on to where the link goes. A sign-in begun
            // here would end the session this browser has (and what was
            // opened under it), and any page can link to `/login`, which a
            // provider with single sign-on finishes without a click.
            (Page::Login, &Method::GET, Some(_)) => {
                let next = query_param(request.uri().query(), "next").unwrap_or_default();
                return redirect(&safe_next(&next), None);
            }
            (Page::Login | Page::LoginCallback, _, _) => {
                return signin::serve(web, signin, approvals, key, page, request, row).await
            }
            (Page::Logout, &Method::POST, Some(_)) | (Page::List | Page::Held(_), &Method::GET, _) => {}
            (_, _, None) => return signin::sign_in_first(),
            _ => {}
        }
    }
    match (page, method, session) {
        (Page::Login, Method::GET, _) => {
            let next = query_param(request.uri().query(), "next").unwrap_or_default();
            login_page(key, StatusCode::OK, request.headers(), &safe_next(&next), None)
        }
        (Page::Login, Method::POST, _) => login(approvals, key, authenticator, web, request, row).await,
        (Page::Logout, Method::POST, Some(s)) => logout_form(approvals, web, key, s, request, row).await,
        (Page::List, Method::GET, Some(s)) => list(approvals, &s).await,
        (Page::Held(id), Method::GET, Some(s)) => show(approvals, &s, id).await,
        (Page::Held(id), Method::POST, Some(s)) => decide_form(approvals, &s, id, request, row).await,
        (Page::List | Page::Held(_), Method::GET, None) => {
            let next = request.uri().path().to_string();
            redirect(&format!("/login?next={}", encode(&next)), None)
        }
        (_, _, None) => login_page(
            key,
            StatusCode::UNAUTHORIZED,
            request.headers(),
            "/approvals",
            Some("Sign in first."),
        ),
        _ => html(
            StatusCode::METHOD_NOT_ALLOWED,
            pages::message("Not allowed", "Use the page's own links and buttons."),
        ),
    }
}

/// The session the request's cookie names, if it is still open; whose it
/// is goes into the audit row.
async fn signed_in(approvals: &Approvals, headers: &http::HeaderMap, row: &mut AuditRow) -> Option<Session> {
    let (store, headers) = (approvals.store.clone(), headers.clone());
    let session = tokio::task::spawn_blocking(move || session::from_headers(&store, &headers))
        .await
        .ok()
        .flatten();
    if let Some(s) = &session {
        row.principal_kind = "person".into();
        row.login = s.login.clone();
        row.credential_id = s.credential_id.clone();
    }
    session
}

/// The sign-in form, with its CSRF token, setting the pre-session cookie
/// the token is bound to when the browser has none yet.
fn login_page(
    key: &seal::Key,
    code: StatusCode,
    headers: &http::HeaderMap,
    next: &str,
    error: Option<&str>,
) -> Response<Body> {
    let (nonce, set) = session::login_nonce(headers);
    let mut response = html(code, pages::login(next, &session::login_csrf(key, &nonce), error));
    if let Some(value) = set.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

async fn login(
    approvals: &Approvals,
    key: &seal::Key,
    authenticator: &Authenticator,
    web: &Web,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    signin::mark(row, "signin");
    let sent = request.headers().clone();
    let Some(form) = read_form(request).await else {
        return login_page(
            key,
            StatusCode::BAD_REQUEST,
            &sent,
            "/approvals",
            Some("The form could not be read."),
        );
    };
    let next = safe_next(field(&form, "next"));
    // Before the token is even looked at: a sign-in form that is not this
    // site's own could sign the browser in as someone else (login CSRF).
    if !session::login_csrf_ok(key, &sent, field(&form, "csrf")) {
        row.refuse(Refusal::Csrf);
        return login_page(
            key,
            StatusCode::FORBIDDEN,
            &sent,
            &next,
            Some("Refused: the sign-in form expired or did not come from this site. Sign in again with this form."),
        );
    }
    let identity = match person_behind(authenticator, field(&form, "token").trim(), row).await {
        Ok(identity) => identity,
        Err((code, why)) => return login_page(key, code, &sent, &next, Some(why)),
    };
    row.identify(&identity);
    let previous = session::cookie_id(&sent);
    start_session(approvals, web, &identity, &next, (previous, &row.client)).await
}

/// Who `token` belongs to, if it is a person's own (not an agent's, not a
/// bot's); otherwise the refusal, noted in the audit row, and what the
/// sign-in page says.
async fn person_behind(
    authenticator: &Authenticator,
    token: &str,
    row: &mut AuditRow,
) -> Result<Identity, (StatusCode, &'static str)> {
    let mut headers = http::HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) {
        headers.insert(header::AUTHORIZATION, value);
    }
    match authenticator.authenticate(&headers, &row.client).await {
        Ok(identity) if identity.principal.kind == PrincipalKind::Person && !identity.is_agent() => Ok(identity),
        Ok(_) => {
            row.refuse(Refusal::NotPerson);
            Err((StatusCode::FORBIDDEN, "Only a person's own token signs in here."))
        }
        Err(error @ crate::identity::authenticate::AuthError::TooManyFailures { .. }) => {
            row.refuse(Refusal::from(&error));
            Err((
                StatusCode::TOO_MANY_REQUESTS,
                "Too many tokens portcullis does not know came from your address: wait a minute, then try again.",
            ))
        }
        Err(error) => {
            row.refuse(Refusal::from(&error));
            Err((StatusCode::UNAUTHORIZED, "That token is not valid."))
        }
    }
}

/// Open a session in the store for `identity` and send the browser on to
/// `next` with its cookie; the session the browser had (`previous`) ends.
async fn start_session(
    approvals: &Approvals,
    web: &Web,
    identity: &Identity,
    next: &str,
    (previous, client): (Option<String>, &str),
) -> Response<Body> {
    let (store, login, credential) = (
        approvals.store.clone(),
        identity.principal.name.clone(),
        identity.credential_id.clone(),
    );
    let (config, lifetime) = (web.config().clone(), web.lifetime());
    let client = client.to_string();
    let opened = tokio::task::spawn_blocking(move || {
        let cookie = session::start(&store, &login, &credential, lifetime)?;
        session::replace(&store, &config, previous.as_deref(), &cookie, &client);
        Ok::<_, crate::store::StoreError>(cookie)
    });
    match opened.await {
        Ok(Ok(cookie)) => redirect(next, Some(&session::set_cookie(&cookie, lifetime))),
        _ => unavailable(),
    }
}

/// The sign-out button: only under the session's own CSRF token.
async fn logout_form(
    approvals: &Approvals,
    web: &Web,
    key: &seal::Key,
    s: Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    signin::mark(row, "signout");
    match read_form(request).await {
        Some(form) if session::csrf_ok(key, &s, field(&form, "csrf")) => logout(approvals, web, s).await,
        _ => html(
            StatusCode::FORBIDDEN,
            pages::message("Refused", "The form expired; reload the page."),
        ),
    }
}

/// Sign out: the session ends in the store, so its cookie is refused even
/// if the browser (or someone who copied it) keeps it.
async fn logout(approvals: &Approvals, web: &Web, s: Session) -> Response<Body> {
    let (store, config) = (approvals.store.clone(), web.config().clone());
    match tokio::task::spawn_blocking(move || session::sign_out(&store, &config, &s)).await {
        Ok(Ok(())) => redirect(
            "/login?signed_out=1",
            Some(&session::set_cookie("", std::time::Duration::ZERO)),
        ),
        _ => unavailable(),
    }
}

async fn list(approvals: &Approvals, s: &Session) -> Response<Body> {
    let (store, login) = (approvals.store.clone(), s.login.clone());
    let found = tokio::task::spawn_blocking(move || {
        let waiting = decide::waiting_on(&store, &Principal::person(login))?;
        Ok::<_, DecideError>((waiting, agent_names(&store)))
    })
    .await;
    let csrf = approvals.key.as_ref().map(|k| session::csrf(k, s)).unwrap_or_default();
    match found {
        Ok(Ok((waiting, agents))) => html(StatusCode::OK, pages::list(&s.login, &csrf, &waiting, &agents)),
        _ => unavailable(),
    }
}

/// Agents' names by id (empty if the store cannot say: the pages then
/// say the agent was removed rather than fail). Blocking (the store).
fn agent_names(store: &crate::store::Store) -> pages::AgentNames {
    store.agent_names().unwrap_or_default().into_iter().collect()
}

async fn show(approvals: &Approvals, s: &Session, id: &str) -> Response<Body> {
    let (store, id, login, credential) = (
        approvals.store.clone(),
        id.to_string(),
        s.login.clone(),
        s.credential_id.clone(),
    );
    let found = tokio::task::spawn_blocking(move || {
        let held = wait::current(&store, &id)?;
        let agents = agent_names(&store);
        Ok::<_, DecideError>(held.map(|h| {
            let may = decide::may_decide(&store, &h, &Principal::person(&login), Some(&credential));
            (h, may, agents)
        }))
    })
    .await;
    let csrf = approvals.key.as_ref().map(|k| session::csrf(k, s)).unwrap_or_default();
    match found {
        Ok(Ok(Some((held, may, agents)))) => {
            // Seen by those who may decide it, and by the person who asked.
            let asker = held.request.requester == Principal::person(&s.login).to_string();
            if may.is_err() && !asker {
                let why = may.err().unwrap_or_default();
                return html(StatusCode::FORBIDDEN, pages::message("Not yours to see", &why));
            }
            html(StatusCode::OK, pages::held(&s.login, &csrf, &held, may, &agents))
        }
        Ok(Ok(None)) => html(
            StatusCode::NOT_FOUND,
            pages::message("Not found", "No held write has this id."),
        ),
        _ => unavailable(),
    }
}

async fn decide_form(
    approvals: &Approvals,
    s: &Session,
    id: &str,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    let Some(key) = approvals.key.as_ref() else {
        return unavailable();
    };
    let form = match session_form(key, s, request, row).await {
        Ok(form) => form,
        Err(refused) => return refused,
    };
    let approve = match chosen(&form) {
        Ok(approve) => approve,
        Err(why) => return html(StatusCode::BAD_REQUEST, pages::message("Not decided", why)),
    };
    let reason = field(&form, "reason").to_string();
    let decided = record_decision(approvals, s, id, approve, reason).await;
    decided_page(id, decided, row)
}

/// Approve (true) or deny (false), as the form says, once its confirmation
/// is ticked; otherwise what the page asks for.
fn chosen(form: &Form) -> Result<bool, &'static str> {
    if field(form, "confirm") != "yes" {
        return Err("Tick the confirmation first.");
    }
    match field(form, "decision") {
        "approve" => Ok(true),
        "deny" => Ok(false),
        _ => Err("Choose Approve or Deny."),
    }
}

/// Decide held write `id` as the session's person, through
/// [`crate::approvals::decide`] (checked and audited like the CLI's); a blank reason
/// is none.
async fn record_decision(
    approvals: &Approvals,
    s: &Session,
    id: &str,
    approve: bool,
    reason: String,
) -> Result<Result<HeldWrite, DecideError>, tokio::task::JoinError> {
    let (store, id, login, credential) = (
        approvals.store.clone(),
        id.to_string(),
        s.login.clone(),
        s.credential_id.clone(),
    );
    tokio::task::spawn_blocking(move || {
        let reason = Some(reason.as_str()).filter(|r| !r.trim().is_empty());
        if approve {
            decide::approve(&store, &id, &login, Some(&credential), reason)
        } else {
            decide::deny(&store, &id, &login, Some(&credential), reason)
        }
    })
    .await
}

/// What the browser sees after deciding: back to the held write, or why not.
fn decided_page(
    id: &str,
    decided: Result<Result<HeldWrite, DecideError>, tokio::task::JoinError>,
    row: &mut AuditRow,
) -> Response<Body> {
    match decided {
        Ok(Ok(_)) => redirect(&format!("/approvals/{id}"), None),
        Ok(Err(DecideError::NotAllowed(why))) => {
            row.refuse(Refusal::NotApprover);
            html(StatusCode::FORBIDDEN, pages::message("Not allowed", &why))
        }
        Ok(Err(error @ (DecideError::NotPending { .. } | DecideError::NotFound(_)))) => {
            html(StatusCode::CONFLICT, pages::message("Not decided", &error.to_string()))
        }
        Ok(Err(DecideError::Invalid(why))) => html(StatusCode::BAD_REQUEST, pages::message("Not decided", &why)),
        _ => unavailable(),
    }
}

pub(crate) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Only our own approval pages (and the command line's sign-in pages and
/// the OAuth consent page, with a plain query) are places to go after
/// signing in.
pub fn safe_next(next: &str) -> String {
    let ok = next == "/approvals"
        || next == "/console"
        || next == "/login/device"
        || ["/login/cli?", "/oauth/authorize?"].iter().any(|p| {
            next.strip_prefix(p).is_some_and(|query| {
                query
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.~%&=+".contains(&b))
            })
        })
        || next
            .strip_prefix("/approvals/")
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
    if ok {
        next.to_string()
    } else {
        "/approvals".into()
    }
}

pub(crate) fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn unavailable() -> Response<Body> {
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        pages::message("Unavailable", "portcullis cannot read its store now; try again."),
    )
}

pub(crate) fn redirect(to: &str, cookie: Option<&str>) -> Response<Body> {
    let mut response = html(StatusCode::SEE_OTHER, String::new());
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

pub(crate) fn html(code: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(body::full(text));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(&pages::csp()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_portcullis_own_pages_are_places_to_go_after_signing_in() {
        for ok in [
            "/approvals",
            "/console",
            "/login/device",
            "/login/cli?port=4000&state=abc",
            "/approvals/0190a1b2-c3d4",
        ] {
            assert_eq!(safe_next(ok), ok);
        }
        // Never a device code carried along: the person types their own.
        for bad in [
            "https://evil.test/",
            "//evil.test",
            "/login/device?user_code=BCDF-GHJK",
            "/approvals/../console",
            "/login/cli?a=<b>",
        ] {
            assert_eq!(safe_next(bad), "/approvals", "{bad}");
        }
    }
}
