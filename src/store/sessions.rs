//! Sign-in sessions of the approval pages (see
//! `crate::doors::web::session`), by the SHA-256 of their id only.

use super::sql::{params, OptionalExt, Row, SqlError};
use super::{Store, StoreError};
use chrono::{DateTime, Utc};

/// A sign-in session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    /// The person's login.
    pub login: String,
    /// The credential they signed in with.
    pub credential_id: String,
    /// When it ends, whatever happens.
    pub expires_at: DateTime<Utc>,
    /// Signed into through the identity provider: the credential is the
    /// session's own, revoked when it ends (otherwise it is the person's
    /// token's, left alone).
    pub oidc: bool,
    /// The groups claim the provider sign-in came with (none for a token
    /// sign-in).
    pub groups: Vec<String>,
}

const SESSION_SELECT: &str =
    "SELECT login, credential_id, expires_at, signed_in_with = 'oidc', groups FROM web_sessions";

fn session_row(r: &Row) -> Result<WebSession, SqlError> {
    let groups: Option<String> = r.get(4)?;
    Ok(WebSession {
        login: r.get(0)?,
        credential_id: r.get(1)?,
        expires_at: r.get(2)?,
        oidc: r.get(3)?,
        groups: groups.and_then(|g| serde_json::from_str(&g).ok()).unwrap_or_default(),
    })
}

impl Store {
    /// Store a new session under the SHA-256 of its id, and forget the
    /// sessions that have ended (so the table stays as small as the number
    /// of people signed in).
    pub fn insert_web_session(&self, id_sha256: &str, session: &WebSession) -> Result<(), StoreError> {
        let now = Utc::now();
        let groups = session
            .oidc
            .then(|| serde_json::Value::from(session.groups.clone()).to_string());
        self.with(|c| {
            c.execute("DELETE FROM web_sessions WHERE expires_at <= ?1", params![now])?;
            c.execute(
                "INSERT INTO web_sessions (id_sha256, login, credential_id, created_at, expires_at, signed_in_with, groups) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![id_sha256, session.login, session.credential_id, now, session.expires_at, if session.oidc { "oidc" } else { "token" }, groups],
            )?;
            Ok(())
        })
    }

    /// The unexpired session whose id hashes to `id_sha256`.
    pub fn web_session(&self, id_sha256: &str) -> Result<Option<WebSession>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                &format!("{SESSION_SELECT} WHERE id_sha256 = ?1 AND expires_at > ?2"),
                params![id_sha256, Utc::now()],
                session_row,
            )
            .optional()?)
        })
    }

    /// `login`'s unexpired sessions.
    pub fn web_sessions_of(&self, login: &str) -> Result<Vec<WebSession>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!("{SESSION_SELECT} WHERE login = ?1 AND expires_at > ?2"),
                params![login, Utc::now()],
                session_row,
            )?)
        })
    }

    /// End one session (signing out); a session signed into through the
    /// identity provider takes its own credential with it, and every
    /// session takes the credentials issued under it (`portcullis login`'s).
    pub fn delete_web_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        let now = Utc::now();
        self.write(|tx| {
            tx.execute(
                "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE id IN \
                 (SELECT credential_id FROM web_sessions WHERE id_sha256 = ?1 AND signed_in_with = 'oidc')",
                params![id_sha256, now],
            )?;
            tx.execute(
                "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE web_session = ?1",
                params![id_sha256, now],
            )?;
            tx.execute("DELETE FROM web_sessions WHERE id_sha256 = ?1", params![id_sha256])?;
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
    use crate::store::testing;
    use chrono::SubsecRound;

    #[test]
    fn a_session_is_found_until_it_ends_and_disabling_its_person_ends_it() {
        for store in testing::both() {
            session_ends(&store, store.backend);
        }
    }

    fn session_ends(store: &Store, backend: &str) {
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let session = |expires_at| WebSession {
            login: "ana".into(),
            credential_id: "c1".into(),
            expires_at,
            oidc: false,
            groups: Vec::new(),
        };
        // PostgreSQL keeps microseconds.
        let later = Utc::now().trunc_subsecs(6) + chrono::TimeDelta::hours(1);
        store.insert_web_session("h1", &session(later)).unwrap();
        store.insert_web_session("h2", &session(later)).unwrap();
        store
            .insert_web_session("old", &session(Utc::now() - chrono::TimeDelta::seconds(1)))
            .unwrap();
        assert_eq!(store.web_session("h1").unwrap(), Some(session(later)), "{backend}");
        assert_eq!(
            store.web_session("old").unwrap(),
            None,
            "{backend}: an ended session is not found"
        );
        store.delete_web_session("h1").unwrap();
        assert_eq!(store.web_session("h1").unwrap(), None, "{backend}");
        assert!(store.web_session("h2").unwrap().is_some(), "{backend}");
        assert_eq!(
            store.web_session_count("ana").unwrap(),
            2,
            "{backend}: h2 and the ended one"
        );
        store.disable_principal(&ana).unwrap();
        assert_eq!(store.web_session_count("ana").unwrap(), 0, "{backend}");
    }

    #[test]
    fn signing_out_revokes_a_provider_sessions_own_credential_and_those_issued_under_it_and_disabling_revokes_them_all()
    {
        for store in testing::both() {
            signing_out_revokes(&store, store.backend);
        }
    }

    #[test]
    fn revoking_the_credential_a_session_signed_in_with_ends_it_and_what_was_issued_under_it() {
        for store in testing::both() {
            let backend = store.backend;
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            let (stolen, _) = store.issue_credential(&ana, "laptop", None).unwrap();
            let (other, _) = store.issue_credential(&ana, "desktop", None).unwrap();
            let later = Utc::now() + chrono::TimeDelta::hours(1);
            let session = |credential_id: &str| WebSession {
                login: "ana".into(),
                credential_id: credential_id.into(),
                expires_at: later,
                groups: Vec::new(),
                oidc: false,
            };
            store.insert_web_session("by-stolen", &session(&stolen.id)).unwrap();
            store.insert_web_session("by-other", &session(&other.id)).unwrap();
            let (under, _) = store
                .issue_session_credential(&ana, "command line", later, "by-stolen")
                .unwrap();
            let (kept, _) = store
                .issue_session_credential(&ana, "command line", later, "by-other")
                .unwrap();
            // Signed in again with what the stolen sign-in got, and an
            // agent allowed there: the chain goes too.
            store.insert_web_session("by-under", &session(&under.id)).unwrap();
            let (deeper, _) = store
                .issue_session_credential(&ana, "command line", later, "by-under")
                .unwrap();
            let plan = crate::store::oauth::SessionPlan {
                person: ana.clone(),
                client_id: "c".into(),
                client_name: "Client".into(),
                grants: Vec::new(),
                until: later,
                writes_need_approval: true,
                consented_with: Some(deeper.id.clone()),
            };
            let (agent, _) = store.add_agent_session(&plan).unwrap();
            store.revoke_credential(&stolen.id).unwrap();
            let revoked = |id: &str| {
                let all = store.list_credentials(Some(&ana)).unwrap();
                all.iter().find(|c| c.id == id).unwrap().revoked_at.is_some()
            };
            assert!(revoked(&under.id), "{backend}: issued under its session");
            assert!(store.web_session("by-stolen").unwrap().is_none(), "{backend}");
            assert!(revoked(&deeper.id), "{backend}: issued under a sign-in made with that");
            assert!(store.web_session("by-under").unwrap().is_none(), "{backend}");
            assert!(
                store.agent(&agent.id).unwrap().unwrap().disabled,
                "{backend}: the agent allowed down the chain"
            );
            assert!(!revoked(&kept.id) && !revoked(&other.id), "{backend}");
            assert!(store.web_session("by-other").unwrap().is_some(), "{backend}");
            assert!(matches!(store.revoke_credential("nope"), Err(StoreError::NotFound(_))));
        }
    }

    fn signing_out_revokes(store: &Store, backend: &str) {
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let (kubeconfig, _) = store.issue_credential(&ana, "laptop", None).unwrap();
        let (own, _) = store.issue_credential(&ana, "web sign-in", None).unwrap();
        let later = Utc::now() + chrono::TimeDelta::hours(1);
        let session = |credential_id: &str, oidc| WebSession {
            login: "ana".into(),
            credential_id: credential_id.into(),
            expires_at: later,
            groups: if oidc { vec!["devs".into()] } else { Vec::new() },
            oidc,
        };
        store
            .insert_web_session("token", &session(&kubeconfig.id, false))
            .unwrap();
        store.insert_web_session("oidc", &session(&own.id, true)).unwrap();
        // `portcullis login`'s, allowed in each session.
        let (under_token, _) = store
            .issue_session_credential(&ana, "command line", later, "token")
            .unwrap();
        let (under_oidc, _) = store
            .issue_session_credential(&ana, "command line", later, "oidc")
            .unwrap();
        assert_eq!(
            store.web_session("oidc").unwrap().unwrap().groups,
            ["devs"],
            "{backend}"
        );
        assert!(store.web_session("oidc").unwrap().unwrap().oidc, "{backend}");
        assert_eq!(store.web_sessions_of("ana").unwrap().len(), 2, "{backend}");
        let revoked = |id: &str| {
            let all = store.list_credentials(Some(&ana)).unwrap();
            all.iter().find(|c| c.id == id).unwrap().revoked_at.is_some()
        };
        store.delete_web_session("token").unwrap();
        assert!(
            revoked(&under_token.id),
            "{backend}: issued under the session, ended with it"
        );
        assert!(!revoked(&under_oidc.id), "{backend}: another session's stays");
        store.delete_web_session("oidc").unwrap();
        assert!(revoked(&under_oidc.id), "{backend}");
        assert!(
            matches!(
                store.issue_session_credential(&ana, "command line", later, "oidc"),
                Err(StoreError::NotFound(_))
            ),
            "{backend}: none is issued under a session that has ended"
        );
        assert!(
            !revoked(&kubeconfig.id),
            "{backend}: a token sign-in leaves the token alone"
        );
        assert!(
            revoked(&own.id),
            "{backend}: the provider session's credential ends with it"
        );
        store.disable_principal(&ana).unwrap();
        assert!(
            revoked(&kubeconfig.id),
            "{backend}: disabling a person revokes every credential"
        );
    }
}
