//! Grants: a role on a cluster (or one of its namespaces) for a person or
//! bot, until a time.

use super::principals::kind_of;
use super::sql::{params, Params, Row, SqlError};
use super::{exists, Store, StoreError};
use crate::identity::{Grant, Principal};
use chrono::Utc;

impl Store {
    /// Add a grant.
    pub fn add_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        self.with(|c| {
            exists(c, &grant.subject)?;
            c.execute(
                "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![grant.id, grant.subject.kind.as_str(), grant.subject.name, grant.cluster, grant.namespace, grant.role, grant.expires_at, grant.granted_by, grant.created_at],
            )?;
            Ok(())
        })
    }

    /// Grants of `subject` on `cluster` (all, in effect or not).
    pub fn grants_of(&self, subject: &Principal, cluster: &str) -> Result<Vec<Grant>, StoreError> {
        self.query_grants(
            &format!(
                "{GRANT_SELECT} WHERE kind = ?1 AND subject = ?2 AND cluster = ?3 AND revoked_at IS NULL ORDER BY created_at, id"
            ),
            params![subject.kind.as_str(), subject.name, cluster],
        )
    }

    /// All grants, newest last.
    pub fn list_grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.query_grants(&format!("{GRANT_SELECT} ORDER BY created_at, id"), params![])
    }

    /// Revoke a grant at once, and (by the store's trigger) the grants
    /// that rest on it. A write transaction: on PostgreSQL another replica
    /// may be giving a grant that rests on this one, which the trigger
    /// cannot see until it commits; serializable, one of the two is refused
    /// and runs again, so no child outlives it.
    pub fn revoke_grant(&self, id: &str) -> Result<(), StoreError> {
        self.write(|c| {
            let n = c.execute(
                "UPDATE grants SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                params![id, Utc::now()],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("grant {id}")));
            }
            Ok(())
        })
    }

    /// The grants a query of [`GRANT_SELECT`] finds.
    pub(super) fn query_grants(&self, sql: &str, args: Params<'_>) -> Result<Vec<Grant>, StoreError> {
        self.with(|c| Ok(c.query_map(sql, args, grant_row)?))
    }
}

/// Every column of a grant, for [`grant_row`].
pub(super) const GRANT_SELECT: &str =
    "SELECT id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, revoked_at FROM grants";

/// A grant from the first ten columns of [`GRANT_SELECT`].
pub(super) fn grant_row(r: &Row) -> Result<Grant, SqlError> {
    Ok(Grant {
        id: r.get(0)?,
        subject: Principal {
            kind: kind_of(r, 1)?,
            name: r.get(2)?,
        },
        cluster: r.get(3)?,
        namespace: r.get(4)?,
        role: r.get(5)?,
        expires_at: r.get(6)?,
        granted_by: r.get(7)?,
        created_at: r.get(8)?,
        revoked_at: r.get(9)?,
    })
}
