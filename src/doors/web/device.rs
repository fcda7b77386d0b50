//! `portcullis login --no-browser`: the device authorization grant
//! (RFC 8628), served by portcullis. The command asks
//! `POST /login/device/code` for a device code and a short user code, and
//! prints the user code with `/login/device`; the person opens that page on
//! any device, signs in (with the identity provider, as on the web), types
//! the code, is shown the address and time it was asked from, and allows
//! or denies it (under the session's CSRF token); the
//! command polls the token endpoint (`POST /oauth/token`) and receives a credential as
//! `portcullis login` does through the loopback ([`super::cli_login`]).
//!
//! Device codes live ten minutes in the store (so any replica serves
//! them); a user code
//! names one device code, and each is used once. Polling faster than the
//! interval is answered `slow_down`. Every poll is its request's audit
//! row with verb `login`; a denied or unknown device code with its refusal.

use super::cli_login::{blocking, credential_for, json, oauth_error, random, unavailable};
use super::signin::mark;
use super::{encode, field, html, pages, redirect, session, session_form, Session, Web};
use crate::approvals::{seal, Approvals};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::gateway::router::Page;
use crate::identity::credential;
use crate::store::{DeviceDecision as Decision, DevicePoll as Poll, DeviceRequest, Store, StoreError};
use chrono::{DateTime, TimeDelta, Utc};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

/// How long a device code waits for the person.
const DEVICE_LIFETIME: TimeDelta = TimeDelta::minutes(10);
/// How often the command may poll, in seconds.
const INTERVAL: i64 = 3;
/// User codes use letters that are hard to mistake for one another.
const ALPHABET: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

/// The device codes given out, kept in the store by their SHA-256 (their
/// user codes too), so that any replica sharing it serves them.
#[derive(Debug, Clone)]
pub struct Devices(Store);

impl Devices {
    /// The device codes kept in `store`.
    pub fn new(store: Store) -> Devices {
        Devices(store)
    }

    /// A new device code and its user code (another user code when the
    /// one drawn is waiting already).
    async fn give(&self, requester: &str, now: DateTime<Utc>) -> Result<(String, String), StoreError> {
        for _ in 0..3 {
            let (device_code, user_code) = (random(), user_code());
            let (device, user) = (credential::hash(&device_code), credential::hash(&user_code));
            let (store, requester) = (self.0.clone(), requester.to_string());
            let expires_at = now + DEVICE_LIFETIME;
            let asked = move || store.give_device_code(&device, &user, expires_at, INTERVAL, (&requester, now));
            if blocking(asked).await? {
                return Ok((device_code, user_code));
            }
        }
        Err(StoreError::Invalid("no free user code".into()))
    }

    /// Where and when the device waiting with `user_code` was asked for.
    async fn requested(&self, user_code: &str, now: DateTime<Utc>) -> Result<Option<DeviceRequest>, StoreError> {
        let (store, user) = (self.0.clone(), credential::hash(&normalise(user_code)));
        blocking(move || store.device_request(&user, now)).await
    }

    /// Record the person's decision on the waiting `user_code`; false when
    /// no waiting device has it.
    async fn decide(&self, user_code: &str, decision: Decision, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let (store, user) = (self.0.clone(), credential::hash(&normalise(user_code)));
        blocking(move || store.decide_device_code(&user, &decision, now)).await
    }

    async fn poll(&self, device_code: &str, now: DateTime<Utc>) -> Result<Poll, StoreError> {
        let (store, device) = (self.0.clone(), credential::hash(device_code));
        blocking(move || store.poll_device_code(&device, now)).await
    }
}

/// `BCDF-GHJK`: eight letters, 20^8 codes.
fn user_code() -> String {
    let letters: String = rand::random::<[u8; 8]>()
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("{}-{}", &letters[..4], &letters[4..])
}

/// A user code as typed: any case, with or without the dash or spaces.
fn normalise(typed: &str) -> String {
    let letters: String = typed
        .chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if letters.len() == 8 {
        format!("{}-{}", &letters[..4], &letters[4..])
    } else {
        letters
    }
}

/// `/login/device/code` and `/login/device` (the device code is exchanged at `/oauth/token`).
pub async fn serve(
    web: &Web,
    key: &seal::Key,
    page: Page<'_>,
    session: Option<Session>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    match (page, request.method().clone(), session) {
        (Page::DeviceCode, Method::POST, _) => authorization(web, row).await,
        // A code in the link is never filled in: the person types the one
        // their own terminal shows, so a link someone sent them (RFC 8628
        // §5.4, remote phishing) cannot sign its sender in as them in one
        // click.
        (Page::DeviceLogin, Method::GET, Some(s)) => {
            html(StatusCode::OK, device_page(&s, &session::csrf(key, &s), None))
        }
        (Page::DeviceLogin, Method::GET, None) => redirect(&format!("/login?next={}", encode("/login/device")), None),
        (Page::DeviceCheck, Method::POST, Some(s)) => check(web, key, &s, request, row).await,
        (Page::DeviceLogin, Method::POST, Some(s)) => decide(web, key, &s, request, row).await,
        (Page::DeviceLogin | Page::DeviceCheck, Method::POST, None) => super::signin::sign_in_first(),
        _ => html(
            StatusCode::METHOD_NOT_ALLOWED,
            pages::message("Not allowed", "Use the page's own links and buttons."),
        ),
    }
}

/// The device authorization response (RFC 8628 §3.2).
async fn authorization(web: &Web, row: &mut AuditRow) -> Response<Body> {
    mark(row, "device-authorization");
    // Each code is a row in the store for ten minutes: within a limit per
    // address as sign-ins are, but not theirs (see `device_code_allowed`).
    if !web.device_code_allowed(&row.client) {
        row.refuse(Refusal::RateLimited);
        return json(
            StatusCode::TOO_MANY_REQUESTS,
            &serde_json::json!({
                "error": "slow_down",
                "error_description": "too many sign-in attempts from your address: wait a minute and try again",
            }),
        );
    }
    let (device_code, user_code) = match web.devices().give(&row.client, Utc::now()).await {
        Ok(codes) => codes,
        Err(error) => return unavailable(&error),
    };
    let page = format!("{}/login/device", web.config().public_url.trim_end_matches('/'));
    json(
        StatusCode::OK,
        &serde_json::json!({
            "device_code": device_code,
            "user_code": user_code,
            "verification_uri": page,
            "expires_in": DEVICE_LIFETIME.num_seconds(),
            "interval": INTERVAL,
        }),
    )
}

/// The first step: the person types the code their terminal shows.
fn device_page(s: &Session, csrf: &str, said: Option<&str>) -> String {
    let e = pages::escape;
    let said = said
        .map(|t| format!("<p id=\"said\" role=\"alert\">{}</p>", e(t)))
        .unwrap_or_default();
    pages::page(
        "Sign in a device",
        Some((&s.login, csrf)),
        &format!(
            "<h1>Sign in the command line on another device</h1>{said}<p>Type the code your own \
             <code>portcullis login</code> shows. Never use a code someone sent you: it would sign them in \
             as you.</p>\
             <form method=\"post\" action=\"/login/device/check\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <label for=\"user_code\">Code</label>\
             <input id=\"user_code\" name=\"user_code\" autocomplete=\"off\" autocapitalize=\"characters\" \
             spellcheck=\"false\" required aria-describedby=\"said\">\
             <button type=\"submit\" id=\"continue\">Continue</button></form>",
            pages::attr(csrf)
        ),
    )
}

/// The second step: where and when the code was asked for, beside where
/// the person is now, then allow or deny. A code someone else asked for
/// shows their address, not the person's own. (`here` is this request's
/// client address.)
fn confirm_page(s: &Session, csrf: &str, user_code: &str, asked: &DeviceRequest, here: &str) -> String {
    let e = pages::escape;
    let from = if asked.from.is_empty() {
        "an unknown address"
    } else {
        &asked.from
    };
    let when = match asked.at {
        Some(at) => {
            let minutes = (Utc::now() - at).num_minutes().max(0);
            let ago = match minutes {
                0 => "less than a minute ago".to_string(),
                1 => "a minute ago".to_string(),
                n => format!("{n} minutes ago"),
            };
            format!(
                "{ago} (<time datetime=\"{}\">{} UTC</time>)",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                at.format("%H:%M")
            )
        }
        None => "within the last ten minutes".to_string(),
    };
    let code = normalise(user_code);
    pages::page(
        "Allow this sign-in?",
        Some((&s.login, csrf)),
        &format!(
            "<h1>Allow this sign-in?</h1><p id=\"asked\">The code <code>{}</code> was asked for {when} from \
             <strong>{}</strong>; this page is open from <strong>{}</strong>.</p><p>Allow it only if that was \
             your own <code>portcullis login</code>: allowed, it acts as you for up to 12 hours.</p>\
             <form method=\"post\" action=\"/login/device\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <input type=\"hidden\" name=\"user_code\" value=\"{}\">\
             <button type=\"submit\" name=\"decision\" value=\"allow\" id=\"allow\">Allow</button> \
             <button type=\"submit\" name=\"decision\" value=\"deny\" id=\"deny\">Deny</button></form>",
            e(&code),
            e(from),
            e(here),
            pages::attr(csrf),
            pages::attr(&code)
        ),
    )
}

/// The code typed: where and when it was asked for, before anything is
/// decided; a code that waits nowhere is a refusal in the audit.
async fn check(
    web: &Web,
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    let (form, csrf) = match code_form(web, key, s, request, row, "device-check").await {
        Ok(tried) => tried,
        Err(refused) => return refused,
    };
    let typed = field(&form, "user_code");
    match web.devices().requested(typed, Utc::now()).await {
        Ok(Some(asked)) => html(StatusCode::OK, confirm_page(s, &csrf, typed, &asked, &row.client)),
        Ok(None) => {
            row.refuse(Refusal::SignInCodeRefused);
            html(StatusCode::NOT_FOUND, device_page(s, &csrf, Some(NOT_WAITING)))
        }
        Err(error) => {
            tracing::warn!(%error, "a device code could not be looked up");
            store_unavailable()
        }
    }
}

/// The form of a code tried (looked at or decided), its row marked
/// `verb`, read under the session's CSRF token, and the token for the next
/// page; or the refusal. Each try takes from the per-address sign-in
/// limit, so codes cannot be tried one after another (RFC 8628 section
/// 5.1).
async fn code_form(
    web: &Web,
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
    verb: &str,
) -> Result<(super::form::Form, String), Response<Body>> {
    mark(row, verb);
    let form = session_form(key, s, request, row).await?;
    let csrf = session::csrf(key, s);
    if !web.sign_in_allowed(&row.client) {
        row.refuse(Refusal::RateLimited);
        let why = "Too many codes tried from your address: wait a minute and try again.";
        return Err(html(StatusCode::TOO_MANY_REQUESTS, device_page(s, &csrf, Some(why))));
    }
    Ok((form, csrf))
}

/// What the person is told when no device waits with the code typed.
const NOT_WAITING: &str = "No command line waits with this code: check it, or run portcullis login again.";

fn store_unavailable() -> Response<Body> {
    let why = "portcullis cannot reach its store now: try again.";
    html(StatusCode::SERVICE_UNAVAILABLE, pages::message("Not available", why))
}

async fn decide(
    web: &Web,
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    let (form, csrf) = match code_form(web, key, s, request, row, "device-decision").await {
        Ok(tried) => tried,
        Err(refused) => return refused,
    };
    let typed = field(&form, "user_code");
    let (decision, done) = match field(&form, "decision") {
        "allow" => (
            Decision::Allowed {
                login: s.login.clone(),
                session: credential::hash(&s.cookie),
            },
            "Allowed: the command line on your other device is signed in as you.",
        ),
        _ => (
            Decision::Denied,
            "Denied: the command line on the other device is not signed in.",
        ),
    };
    let decided = web.devices().decide(typed, decision, Utc::now()).await;
    if let Err(error) = &decided {
        tracing::warn!(%error, "a device decision could not be recorded");
        return store_unavailable();
    }
    if decided.is_ok_and(|d| d) {
        html(StatusCode::OK, pages::message("Done", done))
    } else {
        row.refuse(Refusal::SignInCodeRefused);
        html(StatusCode::NOT_FOUND, device_page(s, &csrf, Some(NOT_WAITING)))
    }
}

/// The device access token request (RFC 8628 §3.4, §3.5), at the token
/// endpoint (`/oauth/token`).
pub(crate) async fn token(
    approvals: &Approvals,
    web: &Web,
    form: &std::collections::HashMap<String, String>,
    row: &mut AuditRow,
) -> Response<Body> {
    mark(row, "login");
    let refused = |error: &str, why: &str| json(StatusCode::BAD_REQUEST, &oauth_error(error, why));
    let polled = match web.devices().poll(field(form, "device_code"), Utc::now()).await {
        Ok(polled) => polled,
        Err(error) => return unavailable(&error),
    };
    match polled {
        Poll::Pending => refused("authorization_pending", "the person has not allowed it yet"),
        Poll::SlowDown => refused("slow_down", "polled faster than the interval"),
        Poll::Unknown => {
            row.refuse(Refusal::SignInCodeRefused);
            refused(
                "expired_token",
                "the device code is unknown, used or expired: run portcullis login again",
            )
        }
        Poll::Denied => {
            row.refuse(Refusal::SignInCodeRefused);
            refused("access_denied", "the person denied this sign-in")
        }
        Poll::Allowed { login, session } => credential_for(approvals, web, login, session, row).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices() -> (tempfile::TempDir, Devices) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        (dir, Devices::new(store))
    }

    #[test]
    fn the_confirmation_names_where_and_when_and_says_so_when_an_older_release_kept_neither() {
        let s = Session {
            login: "ana".into(),
            credential_id: "c".into(),
            cookie: "k".into(),
        };
        let at = Utc::now() - TimeDelta::minutes(3);
        let asked = DeviceRequest {
            from: "198.51.100.4".into(),
            at: Some(at),
        };
        let page = confirm_page(&s, "t", "bcdf ghjk", &asked, "203.0.113.9");
        assert!(
            page.contains("<code>BCDF-GHJK</code> was asked for 3 minutes ago"),
            "{page}"
        );
        assert!(page.contains(&format!(
            "{} UTC</time>) from <strong>198.51.100.4</strong>",
            at.format("%H:%M")
        )));
        assert!(
            page.contains("this page is open from <strong>203.0.113.9</strong>"),
            "{page}"
        );
        let older = DeviceRequest {
            from: String::new(),
            at: None,
        };
        let page = confirm_page(&s, "t", "BCDF-GHJK", &older, "203.0.113.9");
        assert!(
            page.contains("was asked for within the last ten minutes from <strong>an unknown address</strong>"),
            "{page}"
        );
    }

    #[tokio::test]
    async fn a_device_is_pending_until_allowed_then_gives_its_person_once() {
        let (_dir, devices) = devices();
        let now = Utc::now();
        let (code, user) = devices.give("198.51.100.4", now).await.unwrap();
        let poll = async |at| devices.poll(&code, at).await.unwrap();
        assert_eq!(poll(now).await, Poll::Pending);
        assert_eq!(poll(now + TimeDelta::seconds(1)).await, Poll::SlowDown);
        let allowed = Decision::Allowed {
            login: "ana".into(),
            session: "s".into(),
        };
        let typed = user.to_lowercase().replace('-', " ");
        let asked = devices.requested(&typed, now).await.unwrap();
        let expected = DeviceRequest {
            from: "198.51.100.4".into(),
            at: Some(now),
        };
        assert_eq!(asked, Some(expected), "where and when, as typed");
        assert!(devices.decide(&typed, allowed.clone(), now).await.unwrap());
        let again = devices.decide(&user, Decision::Denied, now).await.unwrap();
        assert!(!again, "decided once");
        let later = now + TimeDelta::seconds(60);
        assert_eq!(
            poll(later).await,
            Poll::Allowed {
                login: "ana".into(),
                session: "s".into()
            }
        );
        assert_eq!(poll(later + TimeDelta::seconds(60)).await, Poll::Unknown);
    }

    #[tokio::test]
    async fn a_denied_or_expired_device_gives_nothing() {
        let (_dir, devices) = devices();
        let now = Utc::now();
        let (code, user) = devices.give("198.51.100.4", now).await.unwrap();
        assert!(devices.decide(&user, Decision::Denied, now).await.unwrap());
        assert_eq!(devices.poll(&code, now).await.unwrap(), Poll::Denied);
        let (code, user) = devices.give("198.51.100.4", now).await.unwrap();
        let late = now + DEVICE_LIFETIME + TimeDelta::seconds(1);
        assert!(!devices.decide(&user, Decision::Denied, late).await.unwrap());
        assert_eq!(devices.poll(&code, late).await.unwrap(), Poll::Unknown);
        assert_eq!(devices.poll("made-up", now).await.unwrap(), Poll::Unknown);
    }

    #[test]
    fn user_codes_are_eight_unambiguous_letters_read_in_any_case() {
        let code = user_code();
        assert_eq!(code.len(), 9);
        assert!(code
            .chars()
            .filter(|c| *c != '-')
            .all(|c| ALPHABET.contains(&(c as u8))));
        assert_eq!(normalise("bcdf ghjk"), "BCDF-GHJK");
        assert_eq!(normalise(&code), code);
    }
}
