//! Credentials: issued, looked up by their token's hash, listed, revoked;
//! and the store as the authenticator's [`CredentialSource`].

use super::principals::kind_of;
use super::sql::{params, OptionalExt, Row, SqlError};
use super::{exists, Store, StoreError};
use crate::identity::authenticate::{CredentialLookup, CredentialSource, SourceError};
use crate::identity::{credential, Agent, Audience, Credential, Origin, Principal};
use chrono::{DateTime, SubsecRound, Utc};

/// What a new credential must not outlive, checked in its insert's
/// transaction.
pub(super) enum Tie<'a> {
    Nothing,
    /// The web sign-in session whose id hashes to this.
    WebSession(&'a str),
    /// The CI trust rule of this id.
    TrustRule(&'a str),
    /// The agent of this id, which the credential is then the agent's: in
    /// the same insert, so there is never a moment in which it acts as
    /// the agent's person.
    Agent(&'a str),
}

impl Tie<'_> {
    /// `NotFound` unless what the credential is tied to is still there.
    pub(super) fn still_there(&self, tx: &dyn super::sql::Db) -> Result<(), StoreError> {
        let count = |sql: &str, args: super::sql::Params<'_>| tx.query_row(sql, args, |r| r.get::<_, i64>(0));
        let (found, what) = match self {
            Tie::Nothing => return Ok(()),
            Tie::WebSession(session) => (
                count(
                    "SELECT COUNT(*) FROM web_sessions WHERE id_sha256 = ?1 AND expires_at > ?2",
                    params![session, Utc::now()],
                )?,
                "web sign-in session".to_string(),
            ),
            Tie::TrustRule(rule) => (
                count("SELECT COUNT(*) FROM ci_trust_rules WHERE id = ?1", params![rule])?,
                format!("trust rule {rule}"),
            ),
            Tie::Agent(agent) => (
                count(
                    "SELECT COUNT(*) FROM agents WHERE id = ?1 AND NOT disabled",
                    params![agent],
                )?,
                format!("agent {agent} (or it is disabled)"),
            ),
        };
        if found == 0 {
            return Err(StoreError::NotFound(what));
        }
        Ok(())
    }
}

/// The record of a credential about to be inserted with `new`'s token.
pub(super) fn new_credential(
    principal: &Principal,
    name: &str,
    expires_at: Option<DateTime<Utc>>,
    new: &credential::NewToken,
) -> Credential {
    Credential {
        id: uuid::Uuid::now_v7().to_string(),
        principal: principal.clone(),
        name: name.to_string(),
        display_prefix: new.display_prefix.clone(),
        // PostgreSQL keeps microseconds: the record reads back as returned.
        created_at: Utc::now().trunc_subsecs(6),
        expires_at,
        last_used_at: None,
        revoked_at: None,
    }
}

/// Insert `credential`, tied to what `tie` names (its check is the
/// caller's, in the same transaction).
pub(super) fn insert_credential(
    c: &dyn super::sql::Db,
    credential: &Credential,
    new: &credential::NewToken,
    origin: &Origin,
    tie: &Tie<'_>,
) -> Result<(), StoreError> {
    let (web_session, agent) = match *tie {
        Tie::WebSession(session) => (Some(session), None),
        Tie::Agent(agent) => (None, Some(agent)),
        Tie::Nothing | Tie::TrustRule(_) => (None, None),
    };
    let principal = &credential.principal;
    exists(c, principal)?;
    c.execute(
        "INSERT INTO credentials (id, kind, owner, name, token_sha256, display_prefix, created_at, expires_at, audience, via, web_session, agent_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![credential.id, principal.kind.as_str(), principal.name, credential.name, new.hash, new.display_prefix, credential.created_at, credential.expires_at, origin.audience.map(Audience::as_str), origin.via, web_session, agent],
    )?;
    Ok(())
}

impl Store {
    /// Issue a credential; returns its record and the token (shown once).
    pub fn issue_credential(
        &self,
        principal: &Principal,
        name: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(Credential, String), StoreError> {
        self.issue_credential_with(principal, name, expires_at, &Origin::default())
    }

    /// Issue a credential with an origin: where it is accepted and what
    /// issued it (an OAuth access token, a CI job's exchanged token).
    pub fn issue_credential_with(
        &self,
        principal: &Principal,
        name: &str,
        expires_at: Option<DateTime<Utc>>,
        origin: &Origin,
    ) -> Result<(Credential, String), StoreError> {
        self.issue(principal, name, expires_at, origin, Tie::Nothing)
    }

    /// Issue a CI job's credential through trust rule `rule`: `NotFound`
    /// if the rule is gone by the insert, so a removal racing an exchange
    /// (whose key fetch can take seconds) either comes first or revokes it.
    pub fn issue_ci_credential(
        &self,
        principal: &Principal,
        expires_at: DateTime<Utc>,
        origin: &Origin,
        rule: &str,
    ) -> Result<(Credential, String), StoreError> {
        self.issue(principal, "ci", Some(expires_at), origin, Tie::TrustRule(rule))
    }

    /// Issue a credential that ends with the web sign-in session whose id
    /// hashes to `session_sha256` (signing out revokes it), and at
    /// `expires_at`.
    pub fn issue_session_credential(
        &self,
        principal: &Principal,
        name: &str,
        expires_at: DateTime<Utc>,
        session_sha256: &str,
    ) -> Result<(Credential, String), StoreError> {
        let tie = Tie::WebSession(session_sha256);
        self.issue(principal, name, Some(expires_at), &Origin::default(), tie)
    }

    pub(super) fn issue(
        &self,
        principal: &Principal,
        name: &str,
        expires_at: Option<DateTime<Utc>>,
        origin: &Origin,
        tie: Tie<'_>,
    ) -> Result<(Credential, String), StoreError> {
        let new = credential::mint();
        let credential = new_credential(principal, name, expires_at, &new);
        match tie {
            Tie::Nothing => self.with(|c| insert_credential(c, &credential, &new, origin, &tie))?,
            // With the tie's check in one transaction: a sign-out or a
            // rule's removal racing it either comes first (no credential)
            // or revokes it.
            tie => self.write(|tx| {
                tie.still_there(tx)?;
                insert_credential(tx, &credential, &new, origin, &tie)
            })?,
        }
        Ok((credential, new.token))
    }

    /// Find a credential by the SHA-256 of its token.
    pub fn lookup_credential(&self, token_sha256: &str) -> Result<Option<CredentialLookup>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                &format!("{CREDENTIAL_SELECT} WHERE c.token_sha256 = ?1"),
                params![token_sha256],
                |r| {
                    let audience: Option<String> = r.get(10)?;
                    let via: String = r.get(11)?;
                    // An audience this release does not know fails the lookup
                    // (closed), rather than letting the token go anywhere.
                    let audience = match audience.as_deref().map(Audience::parse) {
                        Some(None) => return Err(SqlError::decode(10, "unknown credential audience")),
                        parsed => parsed.flatten(),
                    };
                    let origin = (audience.is_some() || !via.is_empty()).then_some(Origin { audience, via });
                    Ok(CredentialLookup {
                        credential: credential_row(r)?,
                        owner_disabled: r.get(9)?,
                        origin,
                    })
                },
            )
            .optional()?)
        })
    }

    /// List credentials, optionally of one principal; oldest first.
    pub fn list_credentials(&self, owner: Option<&Principal>) -> Result<Vec<Credential>, StoreError> {
        let (kind, name) = owner.map_or((None, None), |p| (Some(p.kind.as_str()), Some(p.name.as_str())));
        self.with(|c| {
            Ok(c.query_map(
                &format!(
                    "{CREDENTIAL_SELECT} WHERE (CAST(?1 AS TEXT) IS NULL OR (c.kind = ?1 AND c.owner = ?2)) \
                     ORDER BY c.created_at, c.id"
                ),
                params![kind, name],
                credential_row,
            )?)
        })
    }

    /// `owner`'s credentials neither revoked nor expired at `now`, oldest
    /// first (what the console lists: the ended ones grow with every
    /// refreshed agent token).
    pub fn live_credentials_of(&self, owner: &Principal, now: DateTime<Utc>) -> Result<Vec<Credential>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!(
                    "{CREDENTIAL_SELECT} WHERE c.kind = ?1 AND c.owner = ?2 AND c.revoked_at IS NULL \
                     AND (c.expires_at IS NULL OR c.expires_at > ?3) ORDER BY c.created_at, c.id"
                ),
                params![owner.kind.as_str(), owner.name, now],
                credential_row,
            )?)
        })
    }

    /// `owner`'s credential `id`, if it is theirs: one row, for the
    /// checks made on every page (a person's credentials grow with each
    /// sign-in and each refreshed agent token).
    pub fn credential_of(&self, owner: &Principal, id: &str) -> Result<Option<Credential>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                &format!("{CREDENTIAL_SELECT} WHERE c.id = ?1 AND c.kind = ?2 AND c.owner = ?3"),
                params![id, owner.kind.as_str(), owner.name],
                credential_row,
            )
            .optional()?)
        })
    }

    /// Revoke a credential at once.
    ///
    /// What was opened with it goes with it: the web sessions signed in
    /// with it, the credentials `portcullis login` got under those, and the
    /// agent sessions consented in them; and so on down, as a credential
    /// got under one sign-in can sign in again. A stolen token used to sign
    /// in on the web page must not leave a 12-hour command-line credential,
    /// or an agent's refresh token, behind once it is revoked.
    pub fn revoke_credential(&self, id: &str) -> Result<(), StoreError> {
        let now = Utc::now();
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                params![id, now],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("credential {id}")));
            }
            let mut opened_with = vec![id.to_string()];
            let mut seen = std::collections::HashSet::new();
            while let Some(credential) = opened_with.pop() {
                if !seen.insert(credential.clone()) {
                    continue;
                }
                let under: Vec<String> = tx.query_map(
                    "SELECT id FROM credentials WHERE web_session IN \
                     (SELECT id_sha256 FROM web_sessions WHERE credential_id = ?1)",
                    params![credential],
                    |r| r.get(0),
                )?;
                tx.execute(
                    "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE web_session IN \
                     (SELECT id_sha256 FROM web_sessions WHERE credential_id = ?1)",
                    params![credential, now],
                )?;
                tx.execute("DELETE FROM web_sessions WHERE credential_id = ?1", params![credential])?;
                super::oauth::end_agents(tx, "SELECT id FROM agents WHERE consented_with = ?1", &credential, now)?;
                opened_with.extend(under);
            }
            Ok(())
        })
    }

    /// Record that a credential was used.
    pub fn touch_credential(&self, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE credentials SET last_used_at = ?2 WHERE id = ?1",
                params![id, at],
            )?;
            Ok(())
        })
    }
}

const CREDENTIAL_SELECT: &str = "SELECT c.id, c.kind, c.owner, c.name, c.display_prefix, c.created_at, c.expires_at, c.last_used_at, c.revoked_at, p.disabled, c.audience, c.via FROM credentials c JOIN principals p ON p.kind = c.kind AND p.name = c.owner";

/// A credential from the first nine columns of [`CREDENTIAL_SELECT`].
fn credential_row(r: &Row) -> Result<Credential, SqlError> {
    Ok(Credential {
        id: r.get(0)?,
        principal: Principal {
            kind: kind_of(r, 1)?,
            name: r.get(2)?,
        },
        name: r.get(3)?,
        display_prefix: r.get(4)?,
        created_at: r.get(5)?,
        expires_at: r.get(6)?,
        last_used_at: r.get(7)?,
        revoked_at: r.get(8)?,
    })
}

impl CredentialSource for Store {
    fn find(&self, token_sha256: &str) -> Result<Option<(CredentialLookup, Option<Agent>)>, SourceError> {
        let Some(lookup) = self.lookup_credential(token_sha256)? else {
            return Ok(None);
        };
        let agent = self.agent_of_credential(&lookup.credential.id)?;
        Ok(Some((lookup, agent)))
    }

    fn touch(&self, id: &str, at: DateTime<Utc>) -> Result<(), SourceError> {
        Ok(self.touch_credential(id, at)?)
    }
}

// The authenticator over the real store: what a request meets.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::authenticate::{AuthError, Authenticator};
    use crate::store::testing::{self, TestStore};
    use http::HeaderMap;

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        h
    }

    /// Each backend's store with a person `ana`, and an authenticator on it.
    fn setups() -> Vec<(TestStore, Authenticator)> {
        testing::both()
            .into_iter()
            .map(|store| {
                store.add_principal(&Principal::person("ana"), false).unwrap();
                let auth = Authenticator::new(store.store.clone());
                (store, auth)
            })
            .collect()
    }

    /// A flood of made-up tokens from one address is refused before the
    /// store is asked: a valid token never used before is refused from
    /// there too (so it was not looked up), while a token that worked
    /// before, even once the cache forgot it, and every other address go
    /// on as usual. An IPv6 /64 counts as one address.
    #[tokio::test]
    async fn an_address_sending_unknown_tokens_is_held_back_but_tokens_that_worked_are_not() {
        for (store, auth) in setups() {
            let b = store.backend;
            let auth = auth.limiting_failures(3);
            let ana = Principal::person("ana");
            let (_, known) = store.issue_credential(&ana, "known", None).unwrap();
            let (_, fresh) = store.issue_credential(&ana, "fresh", None).unwrap();
            let (flood, elsewhere) = ("203.0.113.9", "198.51.100.1");
            auth.authenticate(&headers(&known), elsewhere).await.unwrap();
            let made_up = || crate::identity::credential::mint().token;
            for _ in 0..3 {
                let refused = auth.authenticate(&headers(&made_up()), flood).await;
                assert!(matches!(refused, Err(AuthError::Unknown { .. })), "{b}: {refused:?}");
            }
            let held = auth.authenticate(&headers(&made_up()), flood).await;
            let Err(AuthError::TooManyFailures { retry_after_secs, .. }) = held else {
                panic!("{b}: {held:?}")
            };
            assert!((1..=21).contains(&retry_after_secs), "{b}: {retry_after_secs}");
            auth.forget_all();
            assert!(
                auth.authenticate(&headers(&known), flood).await.is_ok(),
                "{b}: it worked before"
            );
            let unseen = auth.authenticate(&headers(&fresh), flood).await;
            assert!(
                matches!(unseen, Err(AuthError::TooManyFailures { .. })),
                "{b}: {unseen:?}"
            );
            assert!(auth.authenticate(&headers(&fresh), elsewhere).await.is_ok(), "{b}");

            for host in ["2001:db8::1", "2001:db8::2", "2001:db8::3"] {
                let refused = auth.authenticate(&headers(&made_up()), host).await;
                assert!(matches!(refused, Err(AuthError::Unknown { .. })), "{b}: {refused:?}");
            }
            let same_64 = auth.authenticate(&headers(&made_up()), "2001:db8::ffff").await;
            assert!(
                matches!(same_64, Err(AuthError::TooManyFailures { .. })),
                "{b}: {same_64:?}"
            );
            let next_64 = auth.authenticate(&headers(&made_up()), "2001:db8:0:1::1").await;
            assert!(matches!(next_64, Err(AuthError::Unknown { .. })), "{b}: {next_64:?}");
            for _ in 0..5 {
                let unlimited = auth.authenticate(&headers(&made_up()), "").await;
                assert!(
                    matches!(unlimited, Err(AuthError::Unknown { .. })),
                    "{b}: no address, no limit"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_valid_token_authenticates_its_owner() {
        for (store, auth) in setups() {
            let (cred, token) = store
                .issue_credential(&Principal::person("ana"), "laptop", None)
                .unwrap();
            let identity = auth.authenticate(&headers(&token), "").await.unwrap();
            assert_eq!(identity.principal, Principal::person("ana"), "{}", store.backend);
            assert_eq!(identity.credential_id, cred.id, "{}", store.backend);
        }
    }

    #[tokio::test]
    async fn each_kind_of_bad_token_is_told_apart() {
        for (store, auth) in setups() {
            let backend = store.backend;
            let ana = Principal::person("ana");
            assert_eq!(auth.authenticate(&HeaderMap::new(), "").await, Err(AuthError::Missing));
            assert!(
                matches!(
                    auth.authenticate(&headers("hello"), "").await,
                    Err(AuthError::Malformed { .. })
                ),
                "{backend}"
            );
            let unknown = credential::mint().token;
            assert!(
                matches!(
                    auth.authenticate(&headers(&unknown), "").await,
                    Err(AuthError::Unknown { .. })
                ),
                "{backend}"
            );
            let past = Utc::now() - chrono::TimeDelta::minutes(1);
            let (_, expired) = store.issue_credential(&ana, "old", Some(past)).unwrap();
            assert!(
                matches!(
                    auth.authenticate(&headers(&expired), "").await,
                    Err(AuthError::Expired { .. })
                ),
                "{backend}"
            );
            let (cred, revoked) = store.issue_credential(&ana, "gone", None).unwrap();
            auth.authenticate(&headers(&revoked), "").await.unwrap();
            store.revoke_credential(&cred.id).unwrap();
            auth.forget(&cred.id);
            assert!(
                matches!(
                    auth.authenticate(&headers(&revoked), "").await,
                    Err(AuthError::Revoked { .. })
                ),
                "{backend}"
            );
        }
    }

    #[tokio::test]
    async fn errors_never_carry_the_whole_token() {
        for (store, auth) in setups() {
            let unknown = credential::mint().token;
            let err = auth.authenticate(&headers(&unknown), "").await.unwrap_err();
            assert!(!format!("{err} {err:?}").contains(&unknown), "{}", store.backend);
        }
    }
}
