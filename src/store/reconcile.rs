//! What the reconciler reads and writes: a cluster's grants, and each
//! cluster's last reconcile status.

use super::{Store, StoreError, GRANT_SELECT};
use crate::identity::Grant;
use crate::reconcile::status::ClusterStatus;
use chrono::Utc;
use rusqlite::{params, OptionalExtension};

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

    /// Record a cluster's reconcile status (replacing the previous one).
    pub fn save_cluster_status(&self, status: &ClusterStatus) -> Result<(), StoreError> {
        let json = serde_json::to_string(status).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.with(|c| {
            c.execute(
                "INSERT INTO cluster_status (cluster, status, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT (cluster) DO UPDATE SET status = ?2, updated_at = ?3",
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
