//! People and bots: added, listed, made admins, disabled.

use super::sql::{params, OptionalExt, Row, SqlError};
use super::{validate_name, Store, StoreError};
use crate::identity::{Principal, PrincipalKind};
use chrono::{DateTime, SubsecRound, Utc};

/// A person or bot as listed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PrincipalRecord {
    /// Who.
    pub principal: Principal,
    /// Disabled principals' credentials stop working.
    pub disabled: bool,
    /// For bots: writes wait for a person's approval.
    pub writes_need_approval: bool,
    /// For people: may read everyone's audit (`GET /audit`).
    pub admin: bool,
    /// When added.
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// Add a person or bot.
    pub fn add_principal(&self, principal: &Principal, writes_need_approval: bool) -> Result<(), StoreError> {
        validate_name(&principal.name)?;
        // PostgreSQL keeps microseconds: the record reads back as written.
        let now = Utc::now().trunc_subsecs(6);
        self.with(|c| {
            let inserted = c.execute(
                "INSERT INTO principals (kind, name, disabled, writes_need_approval, created_at) VALUES (?1, ?2, FALSE, ?3, ?4) \
                 ON CONFLICT DO NOTHING",
                params![principal.kind.as_str(), principal.name, writes_need_approval, now],
            )?;
            if inserted == 0 {
                return Err(StoreError::AlreadyExists(principal.to_string()));
            }
            Ok(())
        })
    }

    /// List people or bots.
    pub fn list_principals(&self, kind: PrincipalKind) -> Result<Vec<PrincipalRecord>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                "SELECT name, disabled, writes_need_approval, admin, created_at FROM principals WHERE kind = ?1 ORDER BY name",
                params![kind.as_str()],
                |r| {
                    Ok(PrincipalRecord {
                        principal: Principal { kind, name: r.get(0)? },
                        disabled: r.get(1)?,
                        writes_need_approval: r.get(2)?,
                        admin: r.get(3)?,
                        created_at: r.get(4)?,
                    })
                },
            )?)
        })
    }

    /// Mark a person as an admin (may read everyone's audit), or not.
    pub fn set_admin(&self, principal: &Principal, admin: bool) -> Result<(), StoreError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE principals SET admin = ?3 WHERE kind = ?1 AND name = ?2",
                params![principal.kind.as_str(), principal.name, admin],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(principal.to_string()));
            }
            Ok(())
        })
    }

    /// Is `principal` an enabled admin?
    pub fn is_admin(&self, principal: &Principal) -> Result<bool, StoreError> {
        self.with(|c| {
            let found: Option<bool> = c
                .query_row(
                    "SELECT admin AND NOT disabled FROM principals WHERE kind = ?1 AND name = ?2",
                    params![principal.kind.as_str(), principal.name],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(found.unwrap_or(false))
        })
    }

    /// Disable a person or bot: its credentials stop working; a person's
    /// are revoked too (offboarding: re-enabling brings none back), and
    /// their sign-in sessions and their agents end.
    pub fn disable_principal(&self, principal: &Principal) -> Result<(), StoreError> {
        let now = Utc::now();
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE principals SET disabled = TRUE WHERE kind = ?1 AND name = ?2",
                params![principal.kind.as_str(), principal.name],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(principal.to_string()));
            }
            if principal.kind == PrincipalKind::Person {
                tx.execute("DELETE FROM web_sessions WHERE login = ?1", params![principal.name])?;
                tx.execute(
                    "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE kind = 'person' AND owner = ?1",
                    params![principal.name, now],
                )?;
                // Their agent sessions end too, refresh tokens spent, so
                // that no OAuth refresh mints an access token for them again.
                super::oauth::end_agents(
                    tx,
                    "SELECT id FROM agents WHERE kind = 'person' AND owner = ?1",
                    &principal.name,
                    now,
                )?;
            }
            Ok(())
        })
    }
}

/// The principal kind in column `index`.
pub(super) fn kind_of(r: &Row, index: usize) -> Result<PrincipalKind, SqlError> {
    let text: String = r.get(index)?;
    PrincipalKind::parse(&text).ok_or_else(|| SqlError::decode(index, format!("bad kind {text}")))
}
