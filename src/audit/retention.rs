//! Retention: rows older than the configured age (30 days by default) are
//! removed hourly, by one replica at a time.
//!
//! The sweep goes through the writer in chunks, so that rows keep flowing
//! between chunks and the proxy never waits for a long delete. The store
//! records the last removed row as the chain's anchor, so the remaining
//! chain still verifies.

use super::writer::AuditWriter;
use super::AuditError;
use crate::store::Store;
use chrono::Utc;
use std::time::Duration;

/// How often the sweep runs.
pub const EVERY: Duration = Duration::from_secs(3600);
/// Rows removed per chunk.
const CHUNK: usize = 2000;

/// Sweep now, then every [`EVERY`], until the task is aborted; skipped
/// while another replica of `store` sweeps.
pub fn spawn(store: Store, writer: AuditWriter, retention: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            let swept = store
                .exclusive("audit retention", sweep(&writer, retention))
                .await
                .map_err(|e| AuditError::Store(e.to_string()));
            match swept {
                Ok(None | Some(Ok(0))) => {}
                Ok(Some(Ok(rows))) => tracing::info!(rows, "audit retention removed old rows"),
                Ok(Some(Err(error))) | Err(error) => tracing::error!(%error, "audit retention sweep failed"),
            }
        }
    })
}

/// Remove every row that ended more than `retention` ago; returns how many.
pub async fn sweep(writer: &AuditWriter, retention: Duration) -> Result<usize, AuditError> {
    let age = chrono::TimeDelta::from_std(retention).unwrap_or(chrono::TimeDelta::MAX);
    let cutoff = Utc::now()
        .checked_sub_signed(age)
        .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC);
    let mut total = 0;
    loop {
        let removed = writer.sweep(cutoff, CHUNK).await?;
        total += removed;
        if removed < CHUNK {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::row::AuditRow;
    use crate::audit::sqlite::SqliteAuditStore;
    use crate::audit::store::{verify, AuditStore};
    use crate::audit::writer::{WriterMetrics, WriterSettings};

    #[tokio::test]
    async fn a_sweep_through_the_writer_keeps_recent_rows_and_a_verifiable_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let store = SqliteAuditStore::open(&path).unwrap();
        let writer = AuditWriter::spawn(
            Box::new(store),
            None,
            WriterSettings::default(),
            WriterMetrics::default(),
        );
        let old = Utc::now() - chrono::TimeDelta::days(31);
        for i in 0..5 {
            let mut row = AuditRow::new(uuid::Uuid::now_v7(), if i < 3 { old } else { Utc::now() });
            row.finish(if i < 3 { old } else { Utc::now() });
            writer.append(row).await;
        }
        writer.flush().await;
        assert_eq!(sweep(&writer, Duration::from_secs(30 * 86400)).await.unwrap(), 3);
        let mut reader = SqliteAuditStore::open(&path).unwrap();
        assert_eq!(reader.chain_page(0, 100).unwrap().len(), 2);
        let report = verify(&mut reader).unwrap();
        assert_eq!((report.checked, report.broken), (2, None));
    }
}
