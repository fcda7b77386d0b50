//! Held writes (see `crate::approvals`): the rows, and how they are kept.
//! Every state change is one `UPDATE … WHERE state = <expected>` whose row
//! count says whether it happened: the row's lock makes it compare-and-set
//! on SQLite and PostgreSQL alike, so two calls, processes or replicas
//! never both decide or both run one held write.

use super::sql::{params, OptionalExt, Row, SqlError};
use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a held write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeldState {
    /// Waiting for a person.
    Pending,
    /// Approved; the next call runs it.
    Approved,
    /// Denied.
    Denied,
    /// Nobody decided, or nobody ran it, in time; the body is gone.
    Expired,
    /// A call claimed it and is running it now.
    Executing,
    /// It ran; the outcome is kept.
    Executed,
}

impl HeldState {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            HeldState::Pending => "pending",
            HeldState::Approved => "approved",
            HeldState::Denied => "denied",
            HeldState::Expired => "expired",
            HeldState::Executing => "executing",
            HeldState::Executed => "executed",
        }
    }

    /// Parse the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        [
            HeldState::Pending,
            HeldState::Approved,
            HeldState::Denied,
            HeldState::Expired,
            HeldState::Executing,
            HeldState::Executed,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// What never changes about a held write (stored as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldRequest {
    /// Cluster name.
    pub cluster: String,
    /// `person:<login>` or `bot:<name>` (an agent's person or bot).
    pub requester: String,
    /// The agent that asked, if one did.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The agent acts for its person (who then decides).
    #[serde(default)]
    pub delegated: bool,
    /// The credential that asked (never decides).
    pub credential_id: String,
    /// The MCP tool, if a tool asked.
    #[serde(default)]
    pub tool: String,
    /// The client's address.
    #[serde(default)]
    pub client: String,
    /// HTTP method.
    pub method: String,
    /// Kubernetes path (raw).
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// The body's media type.
    #[serde(default)]
    pub content_type: String,
    /// Kubernetes verb.
    pub verb: String,
    /// API group (empty for core).
    pub api_group: String,
    /// Plural resource (and `/subresource`).
    pub resource: String,
    /// Namespace (empty for cluster scope).
    pub namespace: String,
    /// Object name (empty for collections).
    pub name: String,
    /// What a person sees before deciding.
    pub preview: Preview,
    /// Sent with the real write so that a changed object answers 409.
    pub precondition: Precondition,
}

/// Preconditions taken from the dry run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precondition {
    /// For apply, update and patch: the object's resourceVersion.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// For delete: the object's uid.
    #[serde(default)]
    pub uid: Option<String>,
    /// For deletecollection: the uids its dry run listed, sorted. The API
    /// server takes no precondition for it, so the dry run is repeated
    /// before the run and must list these. (None: held by a release that
    /// did not keep them.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uids: Option<Vec<String>>,
    /// For update and patch: the dry run created the object. No
    /// precondition says "still absent", so the dry run is repeated before
    /// the run and must create it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub creates: bool,
}

/// What the write answered when it ran (Secret values hidden).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// HTTP status.
    pub code: u16,
    /// The answer's body as text (cut at 64 KiB).
    pub body: String,
}

impl Outcome {
    /// A claimed write whose run never recorded its outcome (its caller
    /// went away, or the process that ran it failed): it may or may not
    /// have reached the cluster, so it is never run again, and whoever asks
    /// is told to look.
    pub fn interrupted() -> Outcome {
        Outcome {
            code: 0,
            body: "the approved write was interrupted while it ran (the caller went away or portcullis failed); \
                   whether it reached the cluster is unknown: check the object"
                .into(),
        }
    }
}

/// A held write as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldWrite {
    /// Stable id (UUIDv7), in its URL.
    pub id: String,
    /// The intent's digest: the same first call gets the same held write.
    pub digest: String,
    /// Where it stands.
    pub state: HeldState,
    /// What was asked.
    pub request: HeldRequest,
    /// When held.
    pub created_at: DateTime<Utc>,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
    /// Who decided (login).
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The decider's reason.
    pub decision_reason: Option<String>,
    /// When it ran.
    pub executed_at: Option<DateTime<Utc>>,
    /// What it answered.
    pub outcome: Option<Outcome>,
    /// Its end (denied, expired, run) was told to a caller; the same first
    /// call after that starts a new held write.
    pub answered: bool,
}

/// What a person sees before deciding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    /// The object now (`None`: it does not exist, or could not be read).
    pub current: Option<Value>,
    /// Why there is no current object, when there is none.
    #[serde(default)]
    pub current_note: String,
    /// What the dry run answered.
    pub result: Value,
    /// The change, line by line (YAML).
    pub diff: String,
}

/// What [`Store::insert_held_within`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    /// The new held write is stored.
    New,
    /// The same write is open already: this one, not stored again.
    Same(Box<HeldWrite>),
    /// The requester has the most open already: not stored.
    AtLimit,
}

const SELECT: &str = "SELECT id, digest, state, request, created_at, expires_at, decided_by, decided_at, decision_reason, executed_at, outcome, answered FROM held_writes";

impl Store {
    /// Store a new held write with its sealed body.
    pub fn insert_held(&self, held: &HeldWrite, sealed_body: &[u8]) -> Result<(), StoreError> {
        self.insert_held_within(held, sealed_body, usize::MAX).map(|_| ())
    }

    /// Insert a held write, unless the same write (its digest) is already
    /// open and unanswered (that one then), or its requester already has
    /// `open_limit` open. The checks and the insert are one write
    /// transaction (serializable on PostgreSQL), so requests racing on
    /// several replicas, or several threads, cannot all pass checks made
    /// before the others' inserts: two identical calls at once wait on one
    /// approval, not on two of which the person sees one.
    pub fn insert_held_within(
        &self,
        held: &HeldWrite,
        sealed_body: &[u8],
        open_limit: usize,
    ) -> Result<Inserted, StoreError> {
        let request = serde_json::to_string(&held.request).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.write(|tx| {
            let same = tx
                .query_row(
                    &format!(
                        "{SELECT} WHERE digest = ?1 AND NOT answered AND state IN ('pending', 'approved') \
                         ORDER BY created_at DESC, id DESC LIMIT 1"
                    ),
                    params![held.digest],
                    held_row,
                )
                .optional()?;
            if let Some(same) = same {
                return Ok(Inserted::Same(Box::new(same)));
            }
            if open_of(tx, &held.request.requester)? >= open_limit {
                return Ok(Inserted::AtLimit);
            }
            tx.execute(
                "INSERT INTO held_writes (id, digest, state, request, body, created_at, expires_at, requester) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![held.id, held.digest, held.state.as_str(), request, sealed_body, held.created_at, held.expires_at, held.request.requester],
            )?;
            Ok(Inserted::New)
        })
    }

    /// One held write.
    pub fn held(&self, id: &str) -> Result<Option<HeldWrite>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(&format!("{SELECT} WHERE id = ?1"), params![id], held_row)
                .optional()?)
        })
    }

    /// The newest held write of `digest` whose end no caller was told yet.
    pub fn held_by_digest(&self, digest: &str) -> Result<Option<HeldWrite>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                &format!("{SELECT} WHERE digest = ?1 AND NOT answered ORDER BY created_at DESC, id DESC LIMIT 1"),
                params![digest],
                held_row,
            )
            .optional()?)
        })
    }

    /// The held writes `requester` asked for, newest first, at most
    /// `limit`. Those the previous release made during a rolling upgrade
    /// (no requester column) are looked at too, by their request.
    pub fn held_of(&self, requester: &str, limit: usize) -> Result<Vec<HeldWrite>, StoreError> {
        let found = self.with(|c| {
            Ok(c.query_map(
                &format!("{SELECT} WHERE requester = ?1 OR requester = '' ORDER BY created_at DESC, id DESC LIMIT ?2"),
                params![requester, limit as i64],
                held_row,
            )?)
        })?;
        Ok(found.into_iter().filter(|h| h.request.requester == requester).collect())
    }

    /// How many of `requester`'s held writes wait for a decision or to run.
    pub fn open_held_of(&self, requester: &str) -> Result<usize, StoreError> {
        self.with(|c| open_of(c, requester))
    }

    /// Every held write, newest first.
    pub fn list_held(&self) -> Result<Vec<HeldWrite>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!("{SELECT} ORDER BY created_at DESC, id DESC"),
                params![],
                held_row,
            )?)
        })
    }

    /// The held writes still open (pending or approved), newest first.
    pub fn list_open_held(&self) -> Result<Vec<HeldWrite>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!("{SELECT} WHERE state IN ('pending', 'approved') ORDER BY created_at DESC, id DESC"),
                params![],
                held_row,
            )?)
        })
    }

    /// The sealed body (gone once run or expired).
    pub fn held_body(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.with(|c| {
            let body: Option<Option<Vec<u8>>> = c
                .query_row("SELECT body FROM held_writes WHERE id = ?1", params![id], |r| r.get(0))
                .optional()?;
            Ok(body.flatten())
        })
    }

    /// Pending → approved or denied, by `by`. False when it was no longer
    /// pending (decided by someone else, or expired).
    pub fn decide_held(
        &self,
        id: &str,
        state: HeldState,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        if !matches!(state, HeldState::Approved | HeldState::Denied) {
            return Err(StoreError::Invalid("a decision approves or denies".into()));
        }
        // Pending and not yet expired at `at`: a write past its expiry that
        // the expiry job has not reached (on this replica or another) is
        // not approved only to be refused its run.
        self.with(|c| {
            // A denied write will never run: its body goes at once.
            let n = c.execute(
                "UPDATE held_writes SET state = ?2, decided_by = ?3, decided_at = ?4, decision_reason = ?5, \
                 body = CASE WHEN CAST(?2 AS TEXT) = 'denied' THEN NULL ELSE body END \
                 WHERE id = ?1 AND state = 'pending' AND expires_at > ?4",
                params![id, state.as_str(), by, at, reason],
            )?;
            Ok(n == 1)
        })
    }

    /// Approved and not yet expired → executing: true for exactly one
    /// caller. So a write runs before its expiry, and one still executing
    /// long after it was stranded ([`Store::stranded_held`]).
    pub fn claim_held(&self, id: &str, now: DateTime<Utc>) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE held_writes SET state = 'executing' WHERE id = ?1 AND state = 'approved' AND expires_at > ?2",
                params![id, now],
            )?;
            Ok(n == 1)
        })
    }

    /// Executing → approved again: the run that claimed it sent nothing
    /// (its body could not be opened, the audit could not record it, the
    /// caller went away first), so the approval is not used up. False when
    /// it was not executing.
    pub fn unclaim_held(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE held_writes SET state = 'approved' WHERE id = ?1 AND state = 'executing'",
                params![id],
            )?;
            Ok(n == 1)
        })
    }

    /// Executing → executed with `outcome`; the body is deleted. `told`:
    /// the caller that ran it is given the outcome now; if not (it went
    /// away, or the process that ran it ended), the same call repeated is
    /// told it rather than asking again. False when it had already finished.
    pub fn finish_held(&self, id: &str, outcome: &Outcome, at: DateTime<Utc>, told: bool) -> Result<bool, StoreError> {
        let outcome = serde_json::to_string(outcome).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.with(|c| {
            let n = c.execute(
                "UPDATE held_writes SET state = 'executed', executed_at = ?2, outcome = ?3, body = NULL, answered = ?4 \
                 WHERE id = ?1 AND state = 'executing'",
                params![id, at, outcome, told],
            )?;
            Ok(n == 1)
        })
    }

    /// The held writes still executing though they expired before
    /// `before`: claimed before their expiry, their run is long over, and
    /// the process that ran them ended before it recorded how.
    pub fn stranded_held(&self, before: DateTime<Utc>) -> Result<Vec<HeldWrite>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!("{SELECT} WHERE state = 'executing' AND expires_at <= ?1 ORDER BY created_at, id"),
                params![before],
                held_row,
            )?)
        })
    }

    /// Pending or approved → expired, body deleted. False when it had moved on.
    pub fn expire_held(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE held_writes SET state = 'expired', body = NULL WHERE id = ?1 AND state IN ('pending', 'approved')",
                params![id],
            )?;
            Ok(n == 1)
        })
    }

    /// Does `principal`'s switch say its writes need approval (bots)?
    pub fn writes_need_approval(&self, principal: &crate::identity::Principal) -> Result<bool, StoreError> {
        self.with(|c| {
            let found: Option<bool> = c
                .query_row(
                    "SELECT writes_need_approval FROM principals WHERE kind = ?1 AND name = ?2",
                    params![principal.kind.as_str(), principal.name],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(found.unwrap_or(false))
        })
    }

    /// A caller was told how this held write ended.
    pub fn mark_held_answered(&self, id: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute("UPDATE held_writes SET answered = TRUE WHERE id = ?1", params![id])?;
            Ok(())
        })
    }

    /// The approvals key's fingerprint this store keeps: `fingerprint`
    /// when it is the first one given (recorded), else the one recorded
    /// first. Every replica sharing the store must hold the same key.
    pub fn approvals_key_fingerprint(&self, fingerprint: &str) -> Result<String, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "INSERT INTO settings (key, value) VALUES ('approvals_key_fingerprint', ?1) \
                 ON CONFLICT (key) DO UPDATE SET value = settings.value RETURNING value",
                params![fingerprint],
                |r| r.get(0),
            )?)
        })
    }
}

fn held_row(r: &Row) -> Result<HeldWrite, SqlError> {
    let json_error = SqlError::decode;
    let state: String = r.get(2)?;
    let request: String = r.get(3)?;
    let outcome: Option<String> = r.get(10)?;
    Ok(HeldWrite {
        id: r.get(0)?,
        digest: r.get(1)?,
        state: HeldState::parse(&state).ok_or_else(|| SqlError::decode(2, format!("state {state}")))?,
        request: serde_json::from_str::<HeldRequest>(&request).map_err(|e| json_error(3, e))?,
        created_at: r.get(4)?,
        expires_at: r.get(5)?,
        decided_by: r.get(6)?,
        decided_at: r.get(7)?,
        decision_reason: r.get(8)?,
        executed_at: r.get(9)?,
        outcome: outcome
            .map(|o| serde_json::from_str(&o))
            .transpose()
            .map_err(|e| json_error(10, e))?,
        answered: r.get(11)?,
    })
}

/// How many of `requester`'s held writes are open (pending or approved).
fn open_of(c: &dyn super::sql::Db, requester: &str) -> Result<usize, StoreError> {
    let n: i64 = c.query_row(
        "SELECT COUNT(*) FROM held_writes WHERE requester = ?1 AND state IN ('pending', 'approved')",
        params![requester],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as usize)
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;
