//! What the reconciler reads and writes: a cluster's grants, each cluster's
//! last reconcile status, and the installation's instance id.

use super::grants::GRANT_SELECT;
use super::sql::{params, OptionalExt};
use super::{Store, StoreError};
use crate::identity::Grant;
use chrono::{DateTime, Utc};
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
            &format!("{GRANT_SELECT} WHERE cluster = ?1 AND revoked_at IS NULL ORDER BY created_at, id"),
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
        self.with(|c| {
            Ok(
                c.query_row("SELECT value FROM settings WHERE key = 'instance_id'", params![], |r| {
                    r.get(0)
                })?,
            )
        })
    }

    /// Record a cluster's reconcile status (replacing the previous one).
    pub fn save_cluster_status(&self, status: &ClusterStatus) -> Result<(), StoreError> {
        let json = serde_json::to_string(status).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.with(|c| {
            c.execute(
                "INSERT INTO cluster_status (cluster, status, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (cluster) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
                params![status.cluster, json, Utc::now()],
            )?;
            Ok(())
        })
    }

    /// A cluster's last recorded reconcile status.
    pub fn cluster_status(&self, cluster: &str) -> Result<Option<ClusterStatus>, StoreError> {
        let json: Option<String> = self.with(|c| {
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
    use crate::store::testing;

    #[test]
    fn a_cluster_status_is_replaced_and_read_back() {
        for store in testing::both() {
            assert_eq!(store.cluster_status("prod").unwrap(), None, "{}", store.backend);
            let mut status = ClusterStatus {
                cluster: "prod".into(),
                reachable: Some(true),
                ..Default::default()
            };
            store.save_cluster_status(&status).unwrap();
            status.last_error = Some("boom".into());
            store.save_cluster_status(&status).unwrap();
            assert_eq!(store.cluster_status("prod").unwrap(), Some(status), "{}", store.backend);
        }
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
    fn a_postgres_store_has_an_instance_id_of_its_own_like_a_sqlite_one() {
        let [sqlite, postgres] = testing::both();
        let (one, two) = (sqlite.instance_id().unwrap(), postgres.instance_id().unwrap());
        let other = testing::postgres().instance_id().unwrap();
        for id in [&two, &other] {
            assert_eq!(id.len(), 16, "{id}");
            assert!(
                id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{id}"
            );
        }
        assert_eq!(postgres.instance_id().unwrap(), two, "read again");
        assert!(one != two && two != other, "{one} {two} {other}");
    }

    #[test]
    fn only_unrevoked_grants_of_the_cluster_are_listed() {
        for store in testing::both() {
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
            assert_eq!(ids, ["g1"], "{}", store.backend);
            assert_eq!(store.grant("g3").unwrap().cluster, "staging", "{}", store.backend);
            assert!(
                matches!(store.grant("nope"), Err(StoreError::NotFound(_))),
                "{}",
                store.backend
            );
        }
    }
}
