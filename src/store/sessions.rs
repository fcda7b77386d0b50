//! Sign-in sessions of the approval pages (see
//! `crate::doors::web::session`), by the SHA-256 of their id only.

use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};

/// A sign-in session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    /// The person's login.
    pub login: String,
    /// The credential they signed in with.
    pub credential_id: String,
    /// When it ends, whatever happens.
    pub expires_at: DateTime<Utc>,
}

impl Store {
    /// Store a new session under the SHA-256 of its id, and forget the
    /// sessions that have ended (so the table stays as small as the number
    /// of people signed in).
    pub fn insert_web_session(&self, id_sha256: &str, session: &WebSession) -> Result<(), StoreError> {
        let now = Utc::now();
        self.with(|c| {
            c.execute("DELETE FROM web_sessions WHERE expires_at <= ?1", params![now])?;
            c.execute(
                "INSERT INTO web_sessions (id_sha256, login, credential_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id_sha256, session.login, session.credential_id, now, session.expires_at],
            )?;
            Ok(())
        })
    }

    /// The unexpired session whose id hashes to `id_sha256`.
    pub fn web_session(&self, id_sha256: &str) -> Result<Option<WebSession>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT login, credential_id, expires_at FROM web_sessions WHERE id_sha256 = ?1 AND expires_at > ?2",
                params![id_sha256, Utc::now()],
                |r| {
                    Ok(WebSession {
                        login: r.get(0)?,
                        credential_id: r.get(1)?,
                        expires_at: r.get(2)?,
                    })
                },
            )
            .optional()?)
        })
    }

    /// End one session (signing out).
    pub fn delete_web_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute("DELETE FROM web_sessions WHERE id_sha256 = ?1", params![id_sha256])?;
            Ok(())
        })
    }

    /// How many sessions `login` has (ended or not), for tests and checks.
    pub fn web_session_count(&self, login: &str) -> Result<i64, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM web_sessions WHERE login = ?1",
                params![login],
                |r| r.get(0),
            )?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Principal;

    #[test]
    fn a_session_is_found_until_it_ends_and_disabling_its_person_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let session = |expires_at| WebSession {
            login: "ana".into(),
            credential_id: "c1".into(),
            expires_at,
        };
        let later = Utc::now() + chrono::TimeDelta::hours(1);
        store.insert_web_session("h1", &session(later)).unwrap();
        store.insert_web_session("h2", &session(later)).unwrap();
        store
            .insert_web_session("old", &session(Utc::now() - chrono::TimeDelta::seconds(1)))
            .unwrap();
        assert_eq!(store.web_session("h1").unwrap(), Some(session(later)));
        assert_eq!(store.web_session("old").unwrap(), None, "an ended session is not found");
        store.delete_web_session("h1").unwrap();
        assert_eq!(store.web_session("h1").unwrap(), None);
        assert!(store.web_session("h2").unwrap().is_some());
        store.disable_principal(&ana).unwrap();
        assert_eq!(store.web_session_count("ana").unwrap(), 0);
    }
}
