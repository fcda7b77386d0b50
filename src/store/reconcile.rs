//! What the reconciler reads and writes: a cluster's grants, each cluster's
//! last reconcile status, and the installation's instance id.

use super::{Store, StoreError, GRANT_SELECT};
use crate::identity::Grant;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

/// What the last pass of one cluster found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterStatus {
    /// Cluster name.
    pub cluster: String,
    /// Whether the last pass reached the cluster; `None` before any pass.
    pub reachable: Option<bool>,
    /// Since when it has been reachable (or unreachable).
    pub since: Option<DateTime<Utc>>,
    /// When the last pass ended.
    pub last_reconcile: Option<DateTime<Utc>>,
    /// When the last pass without any error ended.
    pub last_success: Option<DateTime<Utc>>,
    /// The last pass's error(s); `None` when it succeeded.
    pub last_error: Option<String>,
    /// ClusterRoles wanted, and how many of them are in step.
    pub roles_wanted: usize,
    /// ClusterRoles in step after the last pass.
    pub roles_in_step: usize,
    /// Bindings wanted (one per grant in effect).
    pub bindings_wanted: usize,
    /// Bindings in step after the last pass.
    pub bindings_in_step: usize,
    /// Objects the last pass applied (missing or changed).
    pub applied: usize,
    /// Objects the last pass removed (expired, revoked or stray).
    pub removed: usize,
}

impl Store {
    /// The grants of `cluster` that are not revoked (expired ones included:
    /// the caller decides what is in effect at its own "now").
    pub fn unrevoked_grants_on(&self, cluster: &str) -> Result<Vec<Grant>, StoreError> {
        self.query_grants(
            &format!("{GRANT_SELECT} WHERE cluster = ?1 AND revoked_at IS NULL ORDER BY created_at"),
            params![cluster],
        )
    }

    /// One grant by id.
    pub fn grant(&self, id: &str) -> Result<Grant, StoreError> {
        self.query_grants(&format!("{GRANT_SELECT} WHERE id = ?1"), params![id])?
            .pop()
            .ok_or_else(|| StoreError::NotFound(format!("grant {id}")))
    }

    /// The random instance id this store was created with (16 hex
    /// digits): the default of `[reconcile] instance`.
    pub fn instance_id(&self) -> Result<String, StoreError> {
        self.sqlite(|c| Ok(c.query_row("SELECT value FROM settings WHERE key = 'instance_id'", [], |r| r.get(0))?))
    }

    /// Record a cluster's reconcile status (replacing the previous one).
    pub fn save_cluster_status(&self, status: &ClusterStatus) -> Result<(), StoreError> {
        let json = serde_json::to_string(status).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.sqlite(|c| {
            c.execute(
                "INSERT INTO cluster_status (cluster, status, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT (cluster) DO UPDATE SET status = ?2, updated_at = ?3",
                params![status.cluster, json, Utc::now()],
            )?;
            Ok(())
        })
    }

    /// A cluster's last recorded reconcile status.
    pub fn cluster_status(&self, cluster: &str) -> Result<Option<ClusterStatus>, StoreError> {
        let json: Option<String> = self.sqlite(|c| {
            Ok(c.query_row(
                "SELECT status FROM cluster_status WHERE cluster = ?1",
                params![cluster],
                |r| r.get(0),
            )
            .optional()?)
        })?;
        json.map(|j| serde_json::from_str(&j).map_err(|e| StoreError::Invalid(format!("cluster status: {e}"))))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Principal;

    #[test]
    fn a_cluster_status_is_replaced_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        assert_eq!(store.cluster_status("prod").unwrap(), None);
        let mut status = ClusterStatus {
            cluster: "prod".into(),
            reachable: Some(true),
            ..Default::default()
        };
        store.save_cluster_status(&status).unwrap();
        status.last_error = Some("boom".into());
        store.save_cluster_status(&status).unwrap();
        assert_eq!(store.cluster_status("prod").unwrap(), Some(status));
    }

    #[test]
    fn the_instance_id_is_kept_across_opens_and_differs_between_stores() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::open(&dir.path().join("a.db")).unwrap().instance_id().unwrap();
        assert_eq!(first.len(), 16, "{first}");
        assert!(
            first.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{first}"
        );
        let reopened = Store::open(&dir.path().join("a.db")).unwrap().instance_id().unwrap();
        assert_eq!(reopened, first);
        let other = Store::open(&dir.path().join("b.db")).unwrap().instance_id().unwrap();
        assert_ne!(other, first);
    }

    #[test]
    fn only_unrevoked_grants_of_the_cluster_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let grant = |id: &str, cluster: &str| Grant {
            id: id.into(),
            subject: ana.clone(),
            cluster: cluster.into(),
            namespace: None,
            role: "viewer".into(),
            expires_at: Utc::now(),
            granted_by: "t".into(),
            created_at: Utc::now(),
            revoked_at: None,
        };
        for (id, cluster) in [("g1", "prod"), ("g2", "prod"), ("g3", "staging")] {
            store.add_grant(&grant(id, cluster)).unwrap();
        }
        store.revoke_grant("g2").unwrap();
        let ids: Vec<String> = store
            .unrevoked_grants_on("prod")
            .unwrap()
            .into_iter()
            .map(|g| g.id)
            .collect();
        assert_eq!(ids, ["g1"]);
        assert_eq!(store.grant("g3").unwrap().cluster, "staging");
        assert!(matches!(store.grant("nope"), Err(StoreError::NotFound(_))));
    }
}
