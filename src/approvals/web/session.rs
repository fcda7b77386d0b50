//! Sign-in sessions for the approval pages: a cookie signed with the
//! approvals key (so sessions survive a restart and work on every replica),
//! and a CSRF token bound to it.
//!
//! The cookie is `__Host-portcullis` (Secure, `Path=/`, no Domain),
//! HttpOnly and SameSite=Strict. Its value is `<login>.<credential id>.
//! <expiry unix seconds>.<HMAC>`; the credential is checked again on every
//! request, so revoking it (or disabling the person) ends the session.

use crate::approvals::seal::Key;
use crate::identity::Principal;
use crate::store::Store;
use chrono::Utc;

/// The cookie's name.
pub const COOKIE: &str = "__Host-portcullis";
/// How long a sign-in lasts.
pub const LIFETIME_SECS: i64 = 8 * 3600;

/// A signed-in person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The person's login.
    pub login: String,
    /// The credential they signed in with (it can never decide its own
    /// held writes).
    pub credential_id: String,
    /// The raw cookie value (the CSRF token is derived from it).
    pub cookie: String,
}

/// A new session's cookie value for `login` signed in with `credential_id`.
pub fn issue(key: &Key, login: &str, credential_id: &str) -> String {
    let expires = Utc::now().timestamp() + LIFETIME_SECS;
    let payload = format!("{login}.{credential_id}.{expires}");
    let mac = key.mac(payload.as_bytes());
    format!("{payload}.{mac}")
}

/// The `Set-Cookie` header value for `value` (empty and expired to sign out).
pub fn set_cookie(value: &str) -> String {
    let max_age = if value.is_empty() { 0 } else { LIFETIME_SECS };
    format!("{COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={max_age}")
}

/// The session in `headers`' cookie, if it is genuine, unexpired, and its
/// credential still works.
pub fn from_headers(key: &Key, store: &Store, headers: &http::HeaderMap) -> Option<Session> {
    let value = headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())?;
    let (payload, mac) = value.rsplit_once('.')?;
    if !key.verify(payload.as_bytes(), mac) {
        return None;
    }
    let mut fields = payload.rsplitn(3, '.');
    let expires: i64 = fields.next()?.parse().ok()?;
    let credential_id = fields.next()?.to_string();
    let login = fields.next()?.to_string();
    if expires <= Utc::now().timestamp() || !credential_works(store, &login, &credential_id) {
        return None;
    }
    Some(Session {
        login,
        credential_id,
        cookie: value,
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

fn credential_works(store: &Store, login: &str, credential_id: &str) -> bool {
    let person = Principal::person(login);
    if !matches!(store.principal_disabled(&person), Ok(Some(false))) {
        return false;
    }
    let now = Utc::now();
    store.list_credentials(Some(&person)).is_ok_and(|credentials| {
        credentials
            .iter()
            .any(|c| c.id == credential_id && c.revoked_at.is_none() && c.expires_at.is_none_or(|e| e > now))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_is_refused_when_altered_and_its_csrf_token_is_bound_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let (credential, _) = store.issue_credential(&ana, "t", None).unwrap();
        let key = Key::from_bytes(&[3; 32]).unwrap();
        let value = issue(&key, "ana", &credential.id);
        let headers = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::COOKIE, format!("x=1; {COOKIE}={v}").parse().unwrap());
            h
        };
        let session = from_headers(&key, &store, &headers(&value)).expect("genuine");
        assert_eq!(session.login, "ana");
        assert!(from_headers(&key, &store, &headers(&value.replacen("ana", "bob", 1))).is_none());
        let token = csrf(&key, &session);
        assert!(csrf_ok(&key, &session, &token));
        assert!(!csrf_ok(&key, &session, "00"));
        store.revoke_credential(&credential.id).unwrap();
        assert!(
            from_headers(&key, &store, &headers(&value)).is_none(),
            "revoked ends it"
        );
        assert!(set_cookie(&value).contains("Secure; HttpOnly; SameSite=Strict"));
    }
}
