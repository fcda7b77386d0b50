//! One replica at a time for each background job (issue 22, item 5):
//! retention sweeps, expiry, the bypass check.
//!
//! On PostgreSQL a job runs inside a transaction on a pooled connection of
//! its own that holds `pg_try_advisory_xact_lock` on the job's name: a
//! replica that finds the lock taken skips this round instead of waiting,
//! and the lock goes with the transaction, so a replica that dies
//! mid-job frees it with its connection. On SQLite there is one process,
//! and the job just runs.

use super::sql::SqlError;
use super::{Store, StoreError};
use sha2::{Digest, Sha256};
use std::future::Future;

impl Store {
    /// Run `work` unless another replica is running the job named `job`:
    /// `Some` of what it returned, or `None` when it was skipped. Only
    /// running `work` with the lock is promised; if the lock's connection
    /// fails while `work` runs, `work` still completes.
    pub async fn exclusive<F: Future>(&self, job: &str, work: F) -> Result<Option<F::Output>, StoreError> {
        let Some(pg) = self.postgres_pool() else {
            return Ok(Some(work.await));
        };
        let mut client = tokio::task::spawn_blocking(move || pg.client())
            .await
            .map_err(|e| SqlError::Pool(e.to_string()))??;
        let tx = client.transaction().await.map_err(SqlError::from)?;
        let locked: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&job_key(job)])
            .await
            .map_err(SqlError::from)?
            .get(0);
        if !locked {
            return Ok(None);
        }
        let out = work.await;
        if let Err(error) = tx.commit().await {
            tracing::warn!(%error, job, "the job ran, but its lock's transaction failed");
        }
        Ok(Some(out))
    }
}

/// The advisory lock's key: the first 64 bits of the SHA-256 of the job's
/// name, the same in every replica and every release.
fn job_key(job: &str) -> i64 {
    let digest = Sha256::digest(format!("portcullis job {job}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[test]
    fn a_job_s_key_is_stable_and_differs_between_jobs() {
        // A fixed value: replicas of different releases must agree on it.
        assert_eq!(job_key("audit retention"), -4_560_682_954_040_188_167);
        assert_ne!(job_key("audit retention"), job_key("held writes expiry"));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_job_runs_on_one_replica_while_another_holds_it_and_on_any_once_it_is_done() {
        let a = testing::postgres();
        let b = Store::connect(a.postgres_pool().unwrap().config().clone()).unwrap();
        let inside = a
            .exclusive("sweep", async {
                let same = b.exclusive("sweep", async { "ran on b" }).await.unwrap();
                let other = b.exclusive("another job", async { "ran on b" }).await.unwrap();
                (same, other)
            })
            .await
            .unwrap();
        assert_eq!(inside, Some((None, Some("ran on b"))));
        assert_eq!(b.exclusive("sweep", async { 1 }).await.unwrap(), Some(1));
    }

    #[tokio::test]
    async fn a_job_on_sqlite_just_runs() {
        let store = testing::sqlite();
        let nested = store
            .exclusive("sweep", async { store.exclusive("sweep", async { 2 }).await.unwrap() })
            .await
            .unwrap();
        assert_eq!(nested, Some(Some(2)));
    }
}
