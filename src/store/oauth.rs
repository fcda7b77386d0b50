//! OAuth for agents, as kept: agent sessions (the delegated agents a
//! person's consent makes, with grants narrowed to the roles they chose),
//! authorization codes and refresh tokens. Codes and tokens are kept only
//! as their SHA-256; each is taken once, atomically, so a second use is
//! seen as a reuse.

use super::credentials::{insert_credential, new_credential, Tie};
use super::sql::{params, Db, OptionalExt, Params};
use super::{Store, StoreError};
use crate::identity::{credential, Agent, Credential, Origin, Principal, PrincipalKind};
use chrono::{DateTime, TimeDelta, Utc};

/// What a person's consent hands to an agent session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlan {
    /// The person it acts for.
    pub person: Principal,
    /// The OAuth client's id (a URL, or a registered id).
    pub client_id: String,
    /// The client's name, as shown on the consent page.
    pub client_name: String,
    /// Each of the person's grants handed over, with the role chosen: the
    /// grant's own, or one whose rules are a subset of it.
    pub grants: Vec<(String, String)>,
    /// When the consent ends.
    pub until: DateTime<Utc>,
    /// Its writes wait for the person's approval.
    pub writes_need_approval: bool,
    /// The credential the consenting web session signed in with: the
    /// session is made only while it works, and ends when it is revoked
    /// (`revoke_credential`; not at a sign-out, which revokes a provider
    /// sign-in's credential without what it opened, as a session of its own
    /// the agent session outlives it).
    pub consented_with: Option<String>,
}

/// An agent session as the person's console shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSession {
    /// The delegated agent.
    pub agent: Agent,
    /// The OAuth client, for a session made by a consent.
    pub client_id: Option<String>,
    /// Its name.
    pub client_name: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When its consent ends.
    pub expires_at: Option<DateTime<Utc>>,
    /// When one of its credentials last authenticated a request.
    pub last_used_at: Option<DateTime<Utc>>,
}

/// An agent session's columns: id, client id and name, made, ends, last used.
type SessionRow = (
    String,
    Option<String>,
    Option<String>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

/// A new agent session: its agent, the clusters whose bindings changed,
/// and its first access token's record.
pub type MadeSession = (Agent, Vec<String>, Credential);

/// The tokens a code's exchange or a refresh hands out, minted before its
/// transaction and kept in it, with the code or refresh token spent: a
/// failure between the two would leave one spent without its tokens, and
/// the client's retry would read as a reuse and end the session.
#[derive(Debug)]
pub struct NewTokens {
    /// The access token.
    pub access: credential::NewToken,
    /// How long an access token lasts at most; the consent's end is the
    /// latest.
    pub access_lifetime: TimeDelta,
    /// Where the access token is accepted and what issued it.
    pub origin: Origin,
    /// The refresh token's SHA-256.
    pub refresh_sha256: String,
}

/// What a refresh token's use came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// New tokens kept, the refresh token spent: the agent and the access
    /// token's record.
    Fresh(Box<(Agent, Credential)>),
    /// Used before: the agent session it belongs to, now ended.
    Reused(Option<String>),
    /// Sent by another client than its session's (a stolen token): the
    /// session is ended.
    OtherClient,
    /// Its agent session was revoked.
    Revoked,
    /// Never issued, expired, or its session is gone.
    Unknown,
}

/// A code's columns: its consent, end, use and the session it made.
type CodeRow = (String, DateTime<Utc>, Option<DateTime<Utc>>, Option<String>);

/// A code or refresh token, taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken<T> {
    /// First use: what it stood for.
    Fresh(T),
    /// Used before: the agent session it made (or belongs to), which a
    /// reuse ends.
    Reused(Option<String>),
    /// Never issued, or expired.
    Unknown,
}

impl Store {
    /// Make the agent session a consent describes: the agent, and for each
    /// narrowed role a grant derived from the person's own (ending with it,
    /// and at the consent's end at the latest). Returns the agent and the
    /// clusters whose bindings changed.
    pub fn add_agent_session(&self, plan: &SessionPlan) -> Result<(Agent, Vec<String>), StoreError> {
        self.write(|tx| insert_session(tx, plan))
    }

    /// Exchange a code in one write transaction: unknown or expired, or
    /// used before (naming the session its first exchange made — set in
    /// the same transaction as its use, so a second exchange racing the
    /// first still sees it); else `check` judges its consent (client,
    /// redirect URI, PKCE) *before* it is spent, so a wrong attempt does
    /// not burn it, and the session is made and the code spent together.
    pub fn exchange_code<E>(
        &self,
        code_sha256: &str,
        now: DateTime<Utc>,
        tokens: &NewTokens,
        check: impl FnOnce(&str) -> Result<SessionPlan, E>,
    ) -> Result<Taken<Result<MadeSession, E>>, StoreError> {
        let found: Option<CodeRow> = self.with(|c| {
            Ok(c.query_row(
                "SELECT consent, expires_at, used_at, agent_id FROM oauth_codes WHERE code_sha256 = ?1",
                params![code_sha256],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?)
        })?;
        let consent = match found {
            None => return Ok(Taken::Unknown),
            Some((_, _, Some(_), agent)) => return Ok(Taken::Reused(agent)),
            Some((_, expires, None, _)) if expires <= now => return Ok(Taken::Unknown),
            Some((consent, ..)) => consent,
        };
        // A code's consent never changes: judged once, outside the
        // transaction (which may run again on PostgreSQL).
        let plan = match check(&consent) {
            Ok(plan) => plan,
            Err(refused) => return Ok(Taken::Fresh(Err(refused))),
        };
        self.write(|tx| {
            // Spent first, only if still unspent: of two exchanges racing,
            // one spends it; the other sees the session the first made.
            let spent = tx.execute(
                "UPDATE oauth_codes SET used_at = ?2 WHERE code_sha256 = ?1 AND used_at IS NULL AND expires_at > ?3",
                params![code_sha256, Utc::now(), now],
            )?;
            if spent == 0 {
                return taken_before(tx, code_sha256);
            }
            let (agent, clusters) = insert_session(tx, &plan)?;
            tx.execute(
                "UPDATE oauth_codes SET agent_id = ?2 WHERE code_sha256 = ?1",
                params![code_sha256, agent.id],
            )?;
            let access = keep_tokens(tx, &agent, tokens, plan.until)?;
            Ok(Taken::Fresh(Ok((agent, clusters, access))))
        })
    }

    /// Use a refresh token in one write transaction: spent, and `tokens`
    /// kept in its place, together. Used before, or sent by another client
    /// than its session's, it ends the session in the same transaction.
    pub fn refresh_tokens(
        &self,
        sha256: &str,
        now: DateTime<Utc>,
        client_id: &str,
        tokens: &NewTokens,
    ) -> Result<Refreshed, StoreError> {
        self.write(|tx| {
            let (agent_id, until) = match spend_refresh_token(tx, sha256, now)? {
                Taken::Fresh(found) => found,
                Taken::Reused(session) => {
                    if let Some(session) = &session {
                        end_agents(tx, "SELECT id FROM agents WHERE id = ?1", session, Utc::now())?;
                    }
                    return Ok(Refreshed::Reused(session));
                }
                Taken::Unknown => return Ok(Refreshed::Unknown),
            };
            let client: Option<String> = tx
                .query_row("SELECT client_id FROM agents WHERE id = ?1", params![agent_id], |r| {
                    r.get(0)
                })
                .optional()?
                .flatten();
            let Some(agent) = super::agents::load(tx, &agent_id)? else {
                return Ok(Refreshed::Unknown);
            };
            if client.as_deref() != Some(client_id) {
                end_agents(tx, "SELECT id FROM agents WHERE id = ?1", &agent_id, Utc::now())?;
                return Ok(Refreshed::OtherClient);
            }
            if agent.disabled {
                return Ok(Refreshed::Revoked);
            }
            let access = keep_tokens(tx, &agent, tokens, until)?;
            Ok(Refreshed::Fresh(Box::new((agent, access))))
        })
    }

    /// End an agent session at once: the agent disabled, every credential
    /// and refresh token of it revoked, its derived grants revoked.
    pub fn end_agent_session(&self, agent_id: &str) -> Result<(), StoreError> {
        self.write(|tx| end_agents(tx, "SELECT id FROM agents WHERE id = ?1", agent_id, Utc::now()))
    }

    /// The agent sessions of `person`, newest first (agents added by
    /// `portcullis agent add` included, without a client).
    pub fn agent_sessions_of(&self, person: &Principal) -> Result<Vec<AgentSession>, StoreError> {
        self.sessions_where(
            "a.kind = ?1 AND a.owner = ?2",
            params![person.kind.as_str(), person.name],
        )
    }

    /// The agent session of agent `id`.
    pub fn agent_sessions_of_agent(&self, id: &str) -> Result<Option<AgentSession>, StoreError> {
        Ok(self.sessions_where("a.id = ?1", params![id])?.pop())
    }

    /// The agent sessions whose agent meets `clause`, newest first.
    fn sessions_where(&self, clause: &str, args: Params<'_>) -> Result<Vec<AgentSession>, StoreError> {
        let rows: Vec<SessionRow> = self.with(|c| {
            Ok(c.query_map(
                &format!(
                    "SELECT a.id, a.client_id, a.client_name, a.created_at, a.expires_at, \
                     (SELECT MAX(last_used_at) FROM credentials WHERE agent_id = a.id) \
                     FROM agents a WHERE {clause} ORDER BY a.created_at DESC"
                ),
                args,
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )?)
        })?;
        let mut sessions = Vec::new();
        for (id, client_id, client_name, created_at, expires_at, last_used_at) in rows {
            let Some(agent) = self.agent(&id)? else { continue };
            sessions.push(AgentSession {
                agent,
                client_id,
                client_name,
                created_at,
                expires_at,
                last_used_at,
            });
        }
        Ok(sessions)
    }

    /// Keep an authorization code (its SHA-256) standing for `consent`
    /// until `expires_at`.
    pub fn put_code(&self, code_sha256: &str, consent: &str, expires_at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO oauth_codes (code_sha256, consent, expires_at) VALUES (?1, ?2, ?3)",
                params![code_sha256, consent, expires_at],
            )?;
            Ok(())
        })
    }

    /// The agent session a code's exchange made, if it was exchanged.
    pub fn code_session(&self, code_sha256: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT agent_id FROM oauth_codes WHERE code_sha256 = ?1",
                params![code_sha256],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
        })
    }

    /// Keep a refresh token (its SHA-256) of `agent_id`, good until
    /// `expires_at`.
    pub fn put_refresh_token(&self, sha256: &str, agent_id: &str, expires_at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO oauth_refresh_tokens (token_sha256, agent_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![sha256, agent_id, Utc::now(), expires_at],
            )?;
            Ok(())
        })
    }

    /// Take a refresh token: the first time, its agent session and the
    /// consent's end; after that, its session. Tests look at a token's
    /// state with it; a refresh is [`Store::refresh_tokens`].
    #[cfg(test)]
    pub(crate) fn take_refresh_token(
        &self,
        sha256: &str,
        now: DateTime<Utc>,
    ) -> Result<Taken<(String, DateTime<Utc>)>, StoreError> {
        self.with(|c| spend_refresh_token(c, sha256, now))
    }

    /// The agent session a refresh token belongs to, without taking it
    /// (for revocation, RFC 7009).
    pub fn refresh_token_session(&self, sha256: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT agent_id FROM oauth_refresh_tokens WHERE token_sha256 = ?1",
                params![sha256],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// Forget codes and refresh tokens past their end.
    pub fn sweep_oauth(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        self.with(|c| {
            let codes = c.execute("DELETE FROM oauth_codes WHERE expires_at <= ?1", params![now])?;
            let tokens = c.execute("DELETE FROM oauth_refresh_tokens WHERE expires_at <= ?1", params![now])?;
            Ok(codes + tokens)
        })
    }

    /// One agent by id.
    pub fn agent(&self, id: &str) -> Result<Option<Agent>, StoreError> {
        self.with(|c| super::agents::load(c, id))
    }
}

/// Spend a refresh token: the first time, its agent session and the
/// consent's end; after that, its session.
fn spend_refresh_token(
    c: &dyn Db,
    sha256: &str,
    now: DateTime<Utc>,
) -> Result<Taken<(String, DateTime<Utc>)>, StoreError> {
    let fresh: Option<(String, DateTime<Utc>)> = c
        .query_row(
            "UPDATE oauth_refresh_tokens SET used_at = ?2 WHERE token_sha256 = ?1 AND used_at IS NULL AND expires_at > ?2 \
             RETURNING agent_id, expires_at",
            params![sha256, now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some(fresh) = fresh {
        return Ok(Taken::Fresh(fresh));
    }
    let used: Option<(Option<DateTime<Utc>>, String)> = c
        .query_row(
            "SELECT used_at, agent_id FROM oauth_refresh_tokens WHERE token_sha256 = ?1",
            params![sha256],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match used {
        Some((Some(_), agent)) => Taken::Reused(Some(agent)),
        _ => Taken::Unknown,
    })
}

/// Keep `tokens` for `agent`, in `tx`: the access token, ending within
/// its lifetime and by `until`, and the refresh token, ending at `until`.
/// The access token's record.
fn keep_tokens(tx: &dyn Db, agent: &Agent, tokens: &NewTokens, until: DateTime<Utc>) -> Result<Credential, StoreError> {
    let now = Utc::now();
    let expires = (now + tokens.access_lifetime).min(until);
    if expires <= now {
        return Err(StoreError::Invalid("the consent has ended".into()));
    }
    let tie = Tie::Agent(&agent.id);
    tie.still_there(tx)?;
    let name = super::agents::credential_name(agent);
    let access = new_credential(&agent.principal, &name, Some(expires), &tokens.access);
    insert_credential(tx, &access, &tokens.access, &tokens.origin, &tie)?;
    tx.execute(
        "INSERT INTO oauth_refresh_tokens (token_sha256, agent_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
        params![tokens.refresh_sha256, agent.id, now, until],
    )?;
    Ok(access)
}

/// Insert the agent session `plan` describes, in `tx`; the agent and the
/// clusters whose bindings changed.
fn insert_session(tx: &dyn Db, plan: &SessionPlan) -> Result<(Agent, Vec<String>), StoreError> {
    if let Some(credential) = &plan.consented_with {
        // A code allowed in a sign-in whose credential was revoked since
        // (a stolen token, say) makes nothing.
        let works: i64 = tx.query_row(
            "SELECT COUNT(*) FROM credentials WHERE id = ?1 AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > ?2)",
            params![credential, Utc::now()],
            |r| r.get(0),
        )?;
        if works == 0 {
            return Err(StoreError::Invalid(
                "the sign-in this was allowed in has ended (its credential was revoked or expired): allow it again"
                    .into(),
            ));
        }
    }
    let mut grant_ids = Vec::new();
    let mut clusters = Vec::new();
    for (grant_id, role) in &plan.grants {
        let parent = own_grant(tx, &plan.person, grant_id)?;
        if *role == parent.role {
            grant_ids.push(grant_id.clone());
            continue;
        }
        let id = uuid::Uuid::now_v7().to_string();
        tx.execute(
            "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, parent_id) \
             VALUES (?1, 'person', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![id, plan.person.name, parent.cluster, parent.namespace, role, parent.expires_at.min(plan.until),
                format!("consent:{}", plan.client_name), Utc::now(), grant_id],
        )?;
        clusters.push(parent.cluster);
        grant_ids.push(id);
    }
    let agent = Agent {
        id: uuid::Uuid::now_v7().to_string(),
        // Unique per person, readable in lists.
        name: format!("oauth-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        principal: plan.person.clone(),
        writes_need_approval: plan.writes_need_approval,
        grant_ids: Some(grant_ids.clone()),
        disabled: false,
    };
    tx.execute(
        "INSERT INTO agents (id, name, kind, owner, writes_need_approval, created_at, client_id, client_name, expires_at, consented_with) \
         VALUES (?1, ?2, 'person', ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![agent.id, agent.name, plan.person.name, agent.writes_need_approval, Utc::now(),
            plan.client_id, plan.client_name, plan.until, plan.consented_with],
    )?;
    for grant in &grant_ids {
        tx.execute(
            "INSERT INTO agent_grants (agent_id, grant_id) VALUES (?1, ?2)",
            params![agent.id, grant],
        )?;
    }
    clusters.sort();
    clusters.dedup();
    Ok((agent, clusters))
}

/// End the agent sessions whose ids `agents` selects (given `arg` as
/// `?1`): each agent disabled, its credentials revoked, its refresh tokens
/// spent (so no refresh mints an access token again) and the grants
/// derived for it revoked.
pub(super) fn end_agents(tx: &dyn Db, agents: &str, arg: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
    // Only rows not ended yet are written: a transaction that ends what
    // another has just ended (racing refreshes of one token) then writes
    // nothing, and does not lose to it again when run again.
    tx.execute(
        &format!("UPDATE agents SET disabled = TRUE WHERE id IN ({agents}) AND NOT disabled"),
        params![arg],
    )?;
    tx.execute(
        &format!("UPDATE credentials SET revoked_at = ?2 WHERE agent_id IN ({agents}) AND revoked_at IS NULL"),
        params![arg, now],
    )?;
    tx.execute(
        &format!("UPDATE oauth_refresh_tokens SET used_at = ?2 WHERE agent_id IN ({agents}) AND used_at IS NULL"),
        params![arg, now],
    )?;
    tx.execute(
        &format!(
            "UPDATE grants SET revoked_at = ?2 WHERE parent_id IS NOT NULL AND revoked_at IS NULL \
             AND id IN (SELECT grant_id FROM agent_grants WHERE agent_id IN ({agents}))"
        ),
        params![arg, now],
    )?;
    Ok(())
}

/// What a code spent (or expired) by another exchange stands for now.
fn taken_before<T>(tx: &dyn Db, code_sha256: &str) -> Result<Taken<T>, StoreError> {
    let used: Option<(Option<DateTime<Utc>>, Option<String>)> = tx
        .query_row(
            "SELECT used_at, agent_id FROM oauth_codes WHERE code_sha256 = ?1",
            params![code_sha256],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match used {
        Some((Some(_), agent)) => Taken::Reused(agent),
        _ => Taken::Unknown,
    })
}

/// What an agent session takes from a person's grant.
struct OwnGrant {
    cluster: String,
    namespace: Option<String>,
    role: String,
    expires_at: DateTime<Utc>,
}

/// The person's own grant `id` (not one derived for an agent), in effect.
fn own_grant(c: &dyn Db, person: &Principal, id: &str) -> Result<OwnGrant, StoreError> {
    debug_assert_eq!(person.kind, PrincipalKind::Person);
    let grant = c
        .query_row(
            "SELECT cluster, namespace, role, expires_at FROM grants WHERE id = ?1 AND kind = 'person' \
             AND subject = ?2 AND parent_id IS NULL AND revoked_at IS NULL AND expires_at > ?3",
            params![id, person.name, Utc::now()],
            |r| {
                Ok(OwnGrant {
                    cluster: r.get(0)?,
                    namespace: r.get(1)?,
                    role: r.get(2)?,
                    expires_at: r.get(3)?,
                })
            },
        )
        .optional()?;
    grant.ok_or_else(|| StoreError::Invalid(format!("grant {id} is not {person}'s own grant in effect")))
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
