//! Access requests (see `crate::access`): the rows, and how they are kept.

use super::{kind_of, Store, StoreError};
use crate::identity::{Grant, Principal};
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;
use std::time::Duration;

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessState {
    /// Waiting for a decision.
    Pending,
    /// Approved: a grant exists.
    Approved,
    /// Denied.
    Denied,
    /// Nobody decided in time.
    Expired,
}

impl AccessState {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessState::Pending => "pending",
            AccessState::Approved => "approved",
            AccessState::Denied => "denied",
            AccessState::Expired => "expired",
        }
    }

    /// Parse the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        [
            AccessState::Pending,
            AccessState::Approved,
            AccessState::Denied,
            AccessState::Expired,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// An access request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessRequest {
    /// Stable id.
    pub id: String,
    /// The person or bot the access is for (an agent's person or bot).
    pub requester: Principal,
    /// The agent that asked, if one did.
    pub agent_id: Option<String>,
    /// Cluster name.
    pub cluster: String,
    /// `None` for the whole cluster.
    pub namespace: Option<String>,
    /// Role name.
    pub role: String,
    /// How long the grant would last.
    pub duration: Duration,
    /// Why, in the requester's words.
    pub reason: String,
    /// Where it stands.
    pub state: AccessState,
    /// When asked.
    pub created_at: DateTime<Utc>,
    /// When it expires if nobody decides.
    pub expires_at: DateTime<Utc>,
    /// Who decided (login).
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The decider's reason (denials).
    pub decision_reason: Option<String>,
    /// The grant an approval created.
    pub grant_id: Option<String>,
}

const SELECT: &str = "SELECT id, kind, subject, agent_id, cluster, namespace, role, duration_secs, reason, state, created_at, expires_at, decided_by, decided_at, decision_reason, grant_id FROM access_requests";

impl Store {
    /// Store a new request.
    pub fn insert_access_request(&self, r: &AccessRequest) -> Result<(), StoreError> {
        self.sqlite(|c| {
            super::exists(c, &r.requester)?;
            c.execute(
                "INSERT INTO access_requests (id, kind, subject, agent_id, cluster, namespace, role, duration_secs, reason, state, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![r.id, r.requester.kind.as_str(), r.requester.name, r.agent_id, r.cluster, r.namespace, r.role, r.duration.as_secs() as i64, r.reason, r.state.as_str(), r.created_at, r.expires_at],
            )?;
            Ok(())
        })
    }

    /// One request.
    pub fn access_request(&self, id: &str) -> Result<Option<AccessRequest>, StoreError> {
        self.sqlite(|c| {
            Ok(
                c.query_row(&format!("{SELECT} WHERE id = ?1"), params![id], request_row)
                    .optional()?,
            )
        })
    }

    /// Every request, oldest first.
    pub fn list_access_requests(&self) -> Result<Vec<AccessRequest>, StoreError> {
        self.sqlite(|c| {
            let mut stmt = c.prepare(&format!("{SELECT} ORDER BY created_at"))?;
            let rows = stmt.query_map([], request_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// In one transaction: mark the pending request approved by `by`, add
    /// `grant`, and give it to the delegated agent `agent_id` if any. Fails
    /// if the request is no longer pending (decided by someone else).
    pub fn approve_access_request(
        &self,
        id: &str,
        grant: &Grant,
        agent_id: Option<&str>,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.sqlite(|c| {
            let tx = super::write_transaction(c)?;
            tx.execute(
                "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![grant.id, grant.subject.kind.as_str(), grant.subject.name, grant.cluster, grant.namespace, grant.role, grant.expires_at, grant.granted_by, grant.created_at],
            )?;
            if let Some(agent) = agent_id {
                tx.execute("INSERT INTO agent_grants (agent_id, grant_id) VALUES (?1, ?2)", params![agent, grant.id])?;
            }
            let changed = tx.execute(
                "UPDATE access_requests SET state = 'approved', decided_by = ?2, decided_at = ?3, grant_id = ?4, decision_reason = ?5 WHERE id = ?1 AND state = 'pending'",
                params![id, by, at, grant.id, reason],
            )?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!("access request {id} is no longer pending")));
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Close a pending request as denied or expired; `false` if it was not
    /// pending any more.
    pub fn close_access_request(
        &self,
        id: &str,
        state: AccessState,
        by: Option<&str>,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.sqlite(|c| {
            let changed = c.execute(
                "UPDATE access_requests SET state = ?2, decided_by = ?3, decision_reason = ?4, decided_at = ?5 WHERE id = ?1 AND state = 'pending'",
                params![id, state.as_str(), by, reason, at],
            )?;
            Ok(changed == 1)
        })
    }

    /// Whether `principal` is disabled; `None` if it does not exist.
    pub fn principal_disabled(&self, principal: &Principal) -> Result<Option<bool>, StoreError> {
        self.sqlite(|c| {
            Ok(c.query_row(
                "SELECT disabled FROM principals WHERE kind = ?1 AND name = ?2",
                params![principal.kind.as_str(), principal.name],
                |r| r.get(0),
            )
            .optional()?)
        })
    }
}

fn request_row(r: &Row) -> rusqlite::Result<AccessRequest> {
    let state: String = r.get(9)?;
    let state = AccessState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(9, rusqlite::types::Type::Text, format!("bad state {state}").into())
    })?;
    let seconds: i64 = r.get(7)?;
    Ok(AccessRequest {
        id: r.get(0)?,
        requester: Principal {
            kind: kind_of(r, 1)?,
            name: r.get(2)?,
        },
        agent_id: r.get(3)?,
        cluster: r.get(4)?,
        namespace: r.get(5)?,
        role: r.get(6)?,
        duration: Duration::from_secs(seconds.max(0) as u64),
        reason: r.get(8)?,
        state,
        created_at: r.get(10)?,
        expires_at: r.get(11)?,
        decided_by: r.get(12)?,
        decided_at: r.get(13)?,
        decision_reason: r.get(14)?,
        grant_id: r.get(15)?,
    })
}
