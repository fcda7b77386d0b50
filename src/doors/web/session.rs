//! Sign-in sessions for the approval pages, kept in the store, and the CSRF
//! tokens of the forms.
//!
//! The session cookie is `__Host-portcullis` (Secure, `Path=/`, no Domain),
//! HttpOnly and SameSite=Lax: a link followed from chat or mail must arrive
//! signed in, or the person signs in again and leaves a second session
//! (and its group grants) behind the first. Lax still keeps the cookie off
//! another site's POSTs, images and frames; no GET changes anything, and
//! every form carries a CSRF token as well. Its value is a random id; the store keeps
//! only the id's SHA-256 with the login, the credential and the expiry, so
//! signing out (the row deleted) or disabling the person (all their rows
//! deleted) ends a session at once, on every replica. The credential is
//! checked again on every request, so revoking it ends the session too.
//!
//! Signed in through the identity provider (`crate::signin`), a session has
//! a credential of its own ([`start_signed_in`]), expiring with it and
//! revoked when it ends; `portcullis login` will hang the command line's
//! credential on the same session. The provider's round trip is carried by
//! a short-lived cookie, `__Host-portcullis-signin` (the attempt's id and
//! where to go afterwards), also SameSite=Lax: it must come back with the
//! provider's redirect to `/login/callback`.
//!
//! The sign-in form is protected against login CSRF (a site signing a
//! victim in as the attacker) by a pre-session cookie, `__Host-portcullis-
//! login`, a random nonce: the form carries a MAC of it under the approvals
//! key, and a sign-in without both is refused. Forms of a session carry a
//! MAC of the session id.

use crate::approvals::seal::Key;
use crate::identity::{credential, Principal};
use crate::store::{Store, StoreError, WebSession};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::Utc;
use std::time::Duration;

/// The session cookie's name.
pub const COOKIE: &str = "__Host-portcullis";
/// The sign-in page's pre-session cookie.
pub const LOGIN_COOKIE: &str = "__Host-portcullis-login";
/// The sign-in attempt's cookie, across the provider's redirects.
pub const SIGNIN_COOKIE: &str = "__Host-portcullis-signin";
/// How long a sign-in at the provider may take.
const SIGNIN_SECS: u64 = 600;
/// How long a sign-in form stays usable.
const LOGIN_FORM_SECS: i64 = 3600;

/// A signed-in person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The person's login.
    pub login: String,
    /// The credential they signed in with (it can never decide its own
    /// held writes).
    pub credential_id: String,
    /// The session id from the cookie (the CSRF token is derived from it).
    pub cookie: String,
}

/// Start a session of `lifetime` for `login` signed in with
/// `credential_id`; returns the cookie value (the session id), which is not
/// kept anywhere else. Blocking (the store).
pub fn start(store: &Store, login: &str, credential_id: &str, lifetime: Duration) -> Result<String, StoreError> {
    insert(store, login, credential_id, lifetime, None)
}

/// Start a session for `login`, signed in through the identity provider,
/// with a credential of its own that ends with it, and the `groups` it came
/// with (for the group rules at a command line login and at sign-out);
/// returns the cookie value and the credential's id. Blocking (the store).
pub fn start_signed_in(
    store: &Store,
    login: &str,
    lifetime: Duration,
    groups: &[String],
) -> Result<(String, String), StoreError> {
    let person = Principal::person(login);
    let ends = Utc::now() + chrono::TimeDelta::from_std(lifetime).unwrap_or(chrono::TimeDelta::hours(12));
    // The token is dropped here: the session is the only way to use it.
    let (credential, _) = store.issue_credential(&person, "web sign-in", Some(ends))?;
    let id = insert(store, login, &credential.id, lifetime, Some(groups))?;
    Ok((id, credential.id))
}

fn insert(
    store: &Store,
    login: &str,
    credential_id: &str,
    lifetime: Duration,
    provider_groups: Option<&[String]>,
) -> Result<String, StoreError> {
    let id = random_id();
    let session = WebSession {
        login: login.to_string(),
        credential_id: credential_id.to_string(),
        expires_at: Utc::now() + chrono::TimeDelta::from_std(lifetime).unwrap_or(chrono::TimeDelta::hours(12)),
        oidc: provider_groups.is_some(),
        groups: provider_groups.unwrap_or_default().to_vec(),
    };
    store.insert_web_session(&credential::hash(&id), &session)?;
    Ok(id)
}

/// End `session` (signing out): its cookie is refused from now on.
/// Blocking (the store).
pub fn end(store: &Store, session: &Session) -> Result<(), StoreError> {
    store.delete_web_session(&credential::hash(&session.cookie))
}

/// Sign `session` out ([`end`]), then bring the person's group rule grants
/// in step with the sessions left ([`regroup_after_sign_out`]). Blocking
/// (the store).
pub fn sign_out(store: &Store, config: &crate::config::Config, session: &Session) -> Result<(), StoreError> {
    end(store, session)?;
    // The session has ended either way; a rule grant left behind still ends
    // with the session it was last extended for.
    if let Err(error) = regroup_after_sign_out(store, config, &session.login) {
        tracing::warn!(login = %session.login, %error, "group grants not brought in step at sign-out");
    }
    Ok(())
}

/// The session id in `headers`' cookie, as sent (the store not asked).
pub fn cookie_id(headers: &http::HeaderMap) -> Option<String> {
    cookie(headers, COOKIE)
}

/// A new session's cookie replaces `previous` (the id the browser sent):
/// that session is signed out, so what was opened under it (its
/// credential, `portcullis login`'s) does not outlive a cookie the person
/// can no longer reach to sign out. Blocking (the store); a failure is a
/// log line, as the new session is open.
pub fn replace(store: &Store, config: &crate::config::Config, previous: Option<&str>, new: &str, client: &str) {
    let Some(id) = previous.filter(|id| *id != new) else {
        return;
    };
    let Ok(Some(found)) = store.web_session(&credential::hash(id)) else {
        return;
    };
    let session = Session {
        login: found.login,
        credential_id: found.credential_id,
        cookie: id.to_string(),
    };
    // Every sign-out is an audit row: this one happens inside another
    // request (the sign-in), so it is an event of its own, on record
    // before the session ends (see `crate::audit::Recorded`).
    let mut row = crate::audit::row::AuditRow::new(crate::audit::id::new(), Utc::now());
    row.principal_kind = "person".into();
    row.login = session.login.clone();
    row.credential_id = session.credential_id.clone();
    row.client = client.into();
    row.path = "/login/callback".into();
    super::signin::mark(&mut row, "signout");
    row.code = 200;
    let recorded = match crate::audit::begin_event(store, row.clone()) {
        Ok(recorded) => recorded,
        Err(error) => {
            // Not on record: not ended either; it expires as it would.
            tracing::error!(login = %session.login, %error, "the session a new sign-in replaced was not ended: the audit cannot record it");
            return;
        }
    };
    let settled = match sign_out(store, config, &session) {
        Ok(()) => {
            row.finish(Utc::now());
            recorded.done(row, Vec::new())
        }
        Err(error) => {
            tracing::warn!(login = %session.login, %error, "the session a new sign-in replaced was not ended");
            recorded.not_made(500, &error.to_string())
        }
    };
    if let Err(error) = settled {
        tracing::error!(login = %session.login, %error, "the sign-out of a replaced session is not settled on record");
    }
}

/// After `login` signed out: their group rule grants follow the provider
/// sessions they still have (the groups those came with, until the last
/// ends), so a grant no other session holds ends now. Blocking (the store).
pub fn regroup_after_sign_out(
    store: &Store,
    config: &crate::config::Config,
    login: &str,
) -> Result<(), crate::signin::groups::RuleError> {
    let left: Vec<WebSession> = store.web_sessions_of(login)?.into_iter().filter(|s| s.oidc).collect();
    let mut groups: Vec<String> = left.iter().flat_map(|s| s.groups.iter().cloned()).collect();
    groups.sort();
    groups.dedup();
    let ends = left.iter().map(|s| s.expires_at).max().unwrap_or_else(Utc::now);
    crate::signin::groups::apply(config, store, login, &groups, ends)?;
    Ok(())
}

/// The `Set-Cookie` header value for `value`, living `lifetime` (empty and
/// expired to sign out).
pub fn set_cookie(value: &str, lifetime: Duration) -> String {
    let max_age = if value.is_empty() { 0 } else { lifetime.as_secs() };
    format!("{COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age={max_age}")
}

/// The `Set-Cookie` value carrying a sign-in `attempt` and where to go
/// after it (`next`, one of our own paths) through the provider's
/// redirects; empty values clear it.
pub fn signin_cookie(attempt: &str, next: &str) -> String {
    let (value, max_age) = if attempt.is_empty() {
        (String::new(), 0)
    } else {
        let encoded = |next: &str| format!("{attempt}~{}", URL_SAFE_NO_PAD.encode(next.as_bytes()));
        let mut value = encoded(next);
        // A browser drops a cookie past 4 KiB without a word, and the
        // callback would then find no sign-in begun (an OAuth client's
        // long authorization request is `next`): sign in, and go to the
        // approvals page instead.
        if value.len() > MAX_SIGNIN_COOKIE {
            tracing::warn!(
                bytes = next.len(),
                "a page to return to after sign-in is too long to keep: not kept"
            );
            value = encoded("/approvals");
        }
        (value, SIGNIN_SECS)
    };
    format!("{SIGNIN_COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age={max_age}")
}

/// The longest sign-in cookie value kept: with its name and attributes,
/// under the 4096 bytes browsers keep.
const MAX_SIGNIN_COOKIE: usize = 3900;

/// The sign-in attempt in `headers`' cookie, and where to go after it
/// (base64url after `~`; the previous release's hex after `.`, for a
/// sign-in begun before an upgrade).
pub fn signin_attempt(headers: &http::HeaderMap) -> Option<(String, String)> {
    let value = cookie(headers, SIGNIN_COOKIE)?;
    let (attempt, next) = match value.split_once('~') {
        Some((attempt, next)) => (attempt, URL_SAFE_NO_PAD.decode(next).ok()?),
        None => {
            let (attempt, next) = value.split_once('.')?;
            let next = (0..next.len())
                .step_by(2)
                .map(|i| next.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                .collect::<Option<Vec<u8>>>()?;
            (attempt, next)
        }
    };
    Some((attempt.to_string(), String::from_utf8(next).ok()?))
}

/// The session of `headers`' cookie, if the store has it unexpired and its
/// person and credential still work. Blocking (the store).
pub fn from_headers(store: &Store, headers: &http::HeaderMap) -> Option<Session> {
    let id = cookie(headers, COOKIE)?;
    let found = store.web_session(&credential::hash(&id)).ok()??;
    if !credential_works(store, &found.login, &found.credential_id) {
        return None;
    }
    Some(Session {
        login: found.login,
        credential_id: found.credential_id,
        cookie: id,
    })
}

/// The CSRF token of a session: forms carry it, POSTs must return it.
pub fn csrf(key: &Key, session: &Session) -> String {
    key.mac(format!("csrf.{}", session.cookie).as_bytes())
}

/// Is `token` the session's CSRF token?
pub fn csrf_ok(key: &Key, session: &Session, token: &str) -> bool {
    key.verify(format!("csrf.{}", session.cookie).as_bytes(), token)
}

/// The sign-in form's nonce: the one in `headers`' pre-session cookie, or a
/// new one with the `Set-Cookie` value that sets it.
pub fn login_nonce(headers: &http::HeaderMap) -> (String, Option<String>) {
    match cookie(headers, LOGIN_COOKIE) {
        Some(nonce) => (nonce, None),
        None => {
            let nonce = random_id();
            let set =
                format!("{LOGIN_COOKIE}={nonce}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={LOGIN_FORM_SECS}");
            (nonce, Some(set))
        }
    }
}

/// The sign-in form's CSRF token for `nonce`.
pub fn login_csrf(key: &Key, nonce: &str) -> String {
    key.mac(format!("login.{nonce}").as_bytes())
}

/// Does a sign-in carry the pre-session cookie and its form's token?
pub fn login_csrf_ok(key: &Key, headers: &http::HeaderMap, token: &str) -> bool {
    cookie(headers, LOGIN_COOKIE).is_some_and(|nonce| key.verify(format!("login.{nonce}").as_bytes(), token))
}

/// 32 random bytes, base64url: an id no one can guess.
fn random_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn cookie(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, value)| *found == name && !value.is_empty())
        .map(|(_, value)| value.to_string())
}

fn credential_works(store: &Store, login: &str, credential_id: &str) -> bool {
    let person = Principal::person(login);
    if !matches!(store.principal_disabled(&person), Ok(Some(false))) {
        return false;
    }
    let now = Utc::now();
    store
        .credential_of(&person, credential_id)
        .is_ok_and(|found| found.is_some_and(|c| c.revoked_at.is_none() && c.expires_at.is_none_or(|e| e > now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::COOKIE, pairs.parse().unwrap());
        h
    }

    #[test]
    fn a_session_lives_in_the_store_by_hash_and_ends_on_sign_out_or_revocation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let (credential, _) = store.issue_credential(&ana, "t", None).unwrap();
        let id = start(&store, "ana", &credential.id, Duration::from_secs(3600)).unwrap();
        assert!(store.web_session(&id).unwrap().is_none(), "the raw id is not stored");
        let cookie = headers(&format!("x=1; {COOKIE}={id}"));
        let session = from_headers(&store, &cookie).expect("signed in");
        assert_eq!(session.login, "ana");
        assert!(from_headers(&store, &headers(&format!("{COOKIE}={id}x"))).is_none());
        end(&store, &session).unwrap();
        assert!(from_headers(&store, &cookie).is_none(), "signed out");

        let id = start(&store, "ana", &credential.id, Duration::from_secs(3600)).unwrap();
        store.revoke_credential(&credential.id).unwrap();
        assert!(
            from_headers(&store, &headers(&format!("{COOKIE}={id}"))).is_none(),
            "revoked ends it"
        );
        assert!(set_cookie(&id, Duration::from_secs(60)).contains("Secure; HttpOnly; SameSite=Lax; Max-Age=60"));
    }

    #[test]
    fn the_sign_in_attempt_cookie_is_same_site_lax_and_carries_where_to_go() {
        let set = signin_cookie("attempt1", "/approvals/0190");
        assert!(set.starts_with(&format!("{SIGNIN_COOKIE}=attempt1~")), "{set}");
        assert!(
            set.ends_with("Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=600"),
            "{set}"
        );
        let value = set.split(';').next().unwrap();
        let back = signin_attempt(&headers(value)).unwrap();
        assert_eq!(back, ("attempt1".to_string(), "/approvals/0190".to_string()));
        assert!(signin_attempt(&headers(&format!("{SIGNIN_COOKIE}=attempt1.zz"))).is_none());
        assert!(signin_attempt(&headers(&format!("{SIGNIN_COOKIE}=attempt1~*"))).is_none());
        // One the previous release set (hex) still reads.
        let before = headers(&format!("{SIGNIN_COOKIE}=attempt1.2f6f61757468"));
        assert_eq!(signin_attempt(&before).unwrap().1, "/oauth");
        // An OAuth client's long authorization request fits (base64, not
        // hex); one past what a browser keeps falls back to the approvals.
        let long = format!("/oauth/authorize?state={}", "s".repeat(2500));
        let set = signin_cookie("attempt1", &long);
        assert!(set.len() < 4096, "{}", set.len());
        let value = set.split(';').next().unwrap();
        assert_eq!(signin_attempt(&headers(value)).unwrap().1, long);
        let set = signin_cookie("attempt1", &format!("/oauth/authorize?state={}", "s".repeat(3500)));
        assert!(set.len() < 4096, "{}", set.len());
        let value = set.split(';').next().unwrap();
        assert_eq!(signin_attempt(&headers(value)).unwrap().1, "/approvals");
        assert!(
            signin_cookie("", "").ends_with("Max-Age=0"),
            "an attempt is cleared once used"
        );
    }

    #[test]
    fn the_sign_in_token_is_bound_to_the_pre_session_cookie_and_the_session_token_to_the_session() {
        let key = Key::from_bytes(&[3; 32]).unwrap();
        let (nonce, set) = login_nonce(&http::HeaderMap::new());
        assert!(set
            .unwrap()
            .starts_with(&format!("{LOGIN_COOKIE}={nonce}; Path=/; Secure; HttpOnly")));
        let with_cookie = headers(&format!("{LOGIN_COOKIE}={nonce}"));
        assert_eq!(login_nonce(&with_cookie), (nonce.clone(), None));
        let token = login_csrf(&key, &nonce);
        assert!(login_csrf_ok(&key, &with_cookie, &token));
        assert!(!login_csrf_ok(&key, &http::HeaderMap::new(), &token), "no cookie");
        assert!(!login_csrf_ok(&key, &headers(&format!("{LOGIN_COOKIE}=other")), &token));
        assert!(!login_csrf_ok(&key, &with_cookie, "00"));

        let session = Session {
            login: "ana".into(),
            credential_id: "c".into(),
            cookie: "id".into(),
        };
        let token = csrf(&key, &session);
        assert!(csrf_ok(&key, &session, &token));
        assert!(
            !csrf_ok(&key, &session, &login_csrf(&key, "id")),
            "a sign-in token is not a session's"
        );
    }
}
