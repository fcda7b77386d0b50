//! The audit: one row per request, and per upgraded stream, that a security
//! team can query and join with the API server's audit log by audit id.
//!
//! - [`row`]: what a row holds; never a token or a Secret value.
//!   [`row_json`]: its JSON, as serde_json writes it but cheaper.
//! - [`record`]: how the request path fills a row and writes it once, when
//!   the response body ends (or the client goes away), or when an upgraded
//!   stream closes. [`refusal`]: the one list of reasons a row records
//!   when portcullis itself refused.
//! - [`writer`]: the batching writer with a bounded queue; writes committed
//!   before they are forwarded, reads group-committed within 100 ms.
//! - [`spool`]: each finished row appended to a local file before its
//!   answer completes, so a crash loses none; shipped at the next start.
//! - [`store`], [`sqlite`] and [`postgres`]: the storage interface, and
//!   its embedded SQLite and shared PostgreSQL implementations (one chain
//!   for every replica).
//! - [`chain`]: the hash chain and its verification; [`stamp`]: a row's
//!   timestamps as text.
//! - [`query`]: filters; `crate::cli::audit` (`portcullis audit`) and
//!   [`read`] use them. [`read`] reads rows for an admin; the `GET /audit`
//!   door that serves them is `crate::doors::audit`.
//! - [`export`]: the JSON lines sink for a SIEM; [`retention`]: the hourly
//!   sweep.

pub mod apiserver;
pub mod bypass;
pub mod chain;
pub mod export;
pub mod forwarded;
pub mod id;
pub mod postgres;
pub mod query;
pub mod read;
pub mod record;
pub mod refusal;
pub mod retention;
pub mod row;
pub mod row_json;
pub mod spool;
pub mod sqlite;
pub mod stamp;
pub mod store;
pub mod writer;

use crate::config::AuditConfig;
use crate::store::{Store, StoreError};
use postgres::PostgresAuditStore;
use query::Filter;
use row::{AuditRow, ChainedRow};
use spool::{Spool, SpoolSettings};
use sqlite::SqliteAuditStore;
use std::sync::{Arc, Mutex};
use store::AuditStore;
use writer::{AuditWriter, WriterMetrics, WriterSettings};

/// Why the audit failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The database failed.
    #[error("audit database error: {0}")]
    Database(#[from] rusqlite::Error),
    /// The store could not be opened or holds something unreadable.
    #[error("audit store: {0}")]
    Store(String),
    /// A commit failed (the message is the store's error).
    #[error("audit commit failed: {0}")]
    Commit(String),
    /// A write's intent did not commit (the store cannot be reached, or
    /// fails): the write is refused; the writer tries again with backoff.
    /// The store's own error is in the writer's log, not here.
    #[error("the audit store cannot be reached")]
    StoreUnreachable,
    /// The spool holds more rows waiting for the store than its bound.
    #[error("{}", spool_full(*.waiting, *.bound, *.unreachable))]
    SpoolFull {
        /// Bytes of rows not committed yet.
        waiting: u64,
        /// `[audit] spool_max_bytes`.
        bound: u64,
        /// Whether the store's last commit failed (else it is only slow).
        unreachable: bool,
    },
    /// The spool cannot be opened or written.
    #[error("audit spool: {0}")]
    Spool(String),
    /// The writer has stopped (shutting down).
    #[error("the audit writer has stopped")]
    Stopped,
    /// The export sink could not be opened.
    #[error("audit export {target}: {source}")]
    Export {
        /// `stdout` or the file.
        target: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn spool_full(waiting: u64, bound: u64, unreachable: bool) -> String {
    let why = match unreachable {
        true => "the audit store cannot be reached, and ",
        false => "",
    };
    format!("{why}its spool holds {waiting} bytes of rows the audit store has not committed yet, over [audit] spool_max_bytes ({bound})")
}

/// The running audit: the writer, a reader for queries, and the retention
/// sweep.
pub struct Audit {
    writer: AuditWriter,
    reader: Arc<Mutex<Box<dyn AuditStore>>>,
    store: Store,
    retention: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl Audit {
    /// Start writing to the database of `store`, each with its own
    /// connection, spooling finished rows in `[audit] spool_dir` (by
    /// default `audit-spool` in `data_dir`). Must be called inside a Tokio
    /// runtime.
    pub fn start(
        config: &AuditConfig,
        data_dir: &std::path::Path,
        store: &Store,
        metrics: WriterMetrics,
    ) -> Result<Audit, AuditError> {
        let sink = config
            .export
            .as_deref()
            .map(|spec| {
                export::ExportSink::open(spec, config.rotate_bytes, config.keep).map_err(|source| AuditError::Export {
                    target: spec.to_string(),
                    source,
                })
            })
            .transpose()?;
        let spool = Spool::open(&SpoolSettings {
            dir: config.spool_dir.clone().unwrap_or_else(|| data_dir.join("audit-spool")),
            max_bytes: config.spool_max_bytes,
            segment_bytes: spool::SEGMENT_BYTES,
        })?;
        let writer = AuditWriter::spawn_spooled(open(store)?, sink, Some(spool), WriterSettings::default(), metrics);
        let reader = Arc::new(Mutex::new(open(store)?));
        let retention = retention::spawn(store.clone(), writer.clone(), config.retention);
        Ok(Audit {
            writer,
            reader,
            store: store.clone(),
            retention,
        })
    }

    /// The writer.
    pub fn writer(&self) -> &AuditWriter {
        &self.writer
    }

    /// Rows matching `filter` (on a blocking thread).
    pub async fn query(&self, filter: Filter) -> Result<Vec<ChainedRow>, AuditError> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            let mut reader = reader.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            reader.query(&filter)
        })
        .await
        .map_err(|e| AuditError::Store(e.to_string()))?
    }

    /// Commit everything queued and stop (a clean shutdown loses nothing).
    pub async fn close(&self) {
        self.retention.abort();
        self.writer.close().await;
    }
}

/// Commit the row of an event that is not an HTTP request (an access
/// request's step, a held write's decision or expiry), in whichever process
/// it happens: the CLI runs no writer. The row joins the hash chain in one
/// immediate transaction, which interleaves safely with a running server's
/// writer; that writer exports it before its own next rows (see
/// [`export::Exporter`]), so it reaches the JSON lines export too.
pub fn commit_event(store: &Store, row: AuditRow) -> Result<(), AuditError> {
    open(store)?.commit(&[], &[row])?;
    Ok(())
}

/// A change a person makes (a decision, a trust rule) with its row on
/// record: [`begin_event`] commits the row's intent before the change,
/// [`Recorded::done`] the row after it. A change is so never in effect
/// without a trace: if the process or the database fails in between, the
/// intent stays, and recovery records it with an unknown outcome, as it
/// does a write forwarded to a cluster. (Committing the row after the
/// change alone lost it in that window: the change made, the caller told
/// it failed, nothing on record.)
#[must_use = "the intent stays until done or not_made"]
pub struct Recorded {
    audit: Box<dyn AuditStore>,
    intent: AuditRow,
}

/// Commit `intent`, the row of a change about to be made.
pub fn begin_event(store: &Store, intent: AuditRow) -> Result<Recorded, AuditError> {
    let mut audit = open(store)?;
    audit.commit(std::slice::from_ref(&intent), &[])?;
    Ok(Recorded { audit, intent })
}

impl Recorded {
    /// The change was made: its row (under the intent's id, which it
    /// settles), then `more` rows of what it brought with it.
    ///
    /// A database blip is waited out (a few tries over some seconds; a
    /// commit whose answer was lost is found, not made twice). If it lasts,
    /// the error says the change was made: its intent is on record, and is
    /// recorded with an unknown outcome at the next start.
    pub fn done(mut self, mut row: AuditRow, more: Vec<AuditRow>) -> Result<(), AuditError> {
        let id = std::mem::take(&mut self.intent.id);
        row.id = id.clone();
        let mut rows = Vec::with_capacity(1 + more.len());
        rows.push(row);
        rows.extend(more);
        let mut failed = None;
        for pause_ms in [0, 200, 1000, 3000] {
            std::thread::sleep(std::time::Duration::from_millis(pause_ms));
            if failed.is_some()
                && matches!(self.audit.committed(std::slice::from_ref(&id)), Ok(done) if done.contains(&id))
            {
                return Ok(());
            }
            match self.audit.commit(&[], &rows) {
                Ok(_) => return Ok(()),
                Err(error) => failed = Some(error),
            }
        }
        let error = failed.map(|e| e.to_string()).unwrap_or_default();
        tracing::error!(%error, audit_id = %id, "a change was made but its audit row could not be committed");
        Err(AuditError::Store(format!(
            "the change was made, but its audit row could not be committed ({error}): its intent is on record, and is recorded with an unknown outcome when portcullis next starts"
        )))
    }

    /// The change failed in the store: the intent's row says so (404 for
    /// a thing not found, 409 for one changed since it was read, else
    /// 500), and the error is handed back.
    pub fn store_failed(self, error: StoreError) -> StoreError {
        let code = match &error {
            StoreError::NotFound(_) => 404,
            StoreError::Invalid(_) => 409,
            _ => 500,
        };
        let _ = self.not_made(code, &error.to_string());
        error
    }

    /// The change was not made (another decided first, it failed): the
    /// intent's row, with `code` and `reason`.
    pub fn not_made(mut self, code: u16, reason: &str) -> Result<(), AuditError> {
        let mut row = std::mem::take(&mut self.intent);
        row.code = code;
        row.reason = reason.into();
        row.write = false;
        row.finish(chrono::Utc::now());
        self.audit.commit(&[], &[row])?;
        Ok(())
    }
}

/// The audit's own store on the database of `store` (the CLI reads and
/// verifies through it): the one place that knows which database it is.
pub fn open(store: &Store) -> Result<Box<dyn AuditStore>, AuditError> {
    match store.postgres_pool() {
        Some(pg) => Ok(Box::new(PostgresAuditStore::open(pg)?)),
        None => Ok(Box::new(SqliteAuditStore::open(store.path())?)),
    }
}

#[cfg(test)]
mod recorded_tests {
    use super::*;
    use crate::audit::chain::{Encoded, Link};
    use crate::store::testing;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A store whose next `fail` commits fail: before committing, or (a
    /// connection lost after COMMIT was sent) after.
    struct Blips {
        store: Box<dyn AuditStore>,
        fail: Arc<AtomicUsize>,
        after_committing: bool,
    }

    impl AuditStore for Blips {
        fn commit_encoded(&mut self, intents: &[AuditRow], rows: &[Encoded]) -> Result<Vec<Link>, AuditError> {
            let failing = self.fail.load(Ordering::SeqCst) > 0;
            if failing {
                self.fail.fetch_sub(1, Ordering::SeqCst);
                if !self.after_committing {
                    return Err(AuditError::Store("connection refused".into()));
                }
                self.store.commit_encoded(intents, rows)?;
                return Err(AuditError::Store("connection closed".into()));
            }
            self.store.commit_encoded(intents, rows)
        }
        fn committed(&mut self, ids: &[String]) -> Result<std::collections::HashSet<String>, AuditError> {
            self.store.committed(ids)
        }
        fn forwarded(&mut self, records: Vec<forwarded::Forwarded>) {
            self.store.forwarded(records)
        }
        fn recover(&mut self) -> Result<Vec<row::ChainedRow>, AuditError> {
            self.store.recover()
        }
        fn query(&mut self, filter: &query::Filter) -> Result<Vec<row::ChainedRow>, AuditError> {
            self.store.query(filter)
        }
        fn anchor(&mut self) -> Result<chain::Anchor, AuditError> {
            self.store.anchor()
        }
        fn head(&mut self) -> Result<chain::Anchor, AuditError> {
            self.store.head()
        }
        fn chain_page(&mut self, after_seq: i64, limit: usize) -> Result<Vec<row::ChainedRow>, AuditError> {
            self.store.chain_page(after_seq, limit)
        }
        fn sweep(&mut self, cutoff: chrono::DateTime<chrono::Utc>, max_rows: usize) -> Result<usize, AuditError> {
            self.store.sweep(cutoff, max_rows)
        }
    }

    #[test]
    fn a_blip_as_a_changes_row_is_committed_is_waited_out_and_a_lost_answer_makes_no_second_row() {
        for after_committing in [false, true] {
            let store = testing::sqlite();
            let intent = event("approve");
            let id = intent.id.clone();
            let fail = Arc::new(AtomicUsize::new(0));
            let mut audit = Blips {
                store: open(&store).unwrap(),
                fail: fail.clone(),
                after_committing,
            };
            audit.commit(std::slice::from_ref(&intent), &[]).unwrap();
            let recorded = Recorded {
                audit: Box::new(audit),
                intent,
            };
            fail.store(2, Ordering::SeqCst);
            recorded.done(event("approve"), Vec::new()).unwrap();
            let kept = rows(&store);
            assert_eq!(kept.len(), 1, "after_committing {after_committing}: one row, no second");
            assert_eq!(kept[0].id, id);
            assert!(open(&store).unwrap().recover().unwrap().is_empty(), "no intent left");
        }
    }

    fn event(verb: &str) -> AuditRow {
        let mut row = AuditRow::new(id::new(), chrono::Utc::now());
        row.verb = verb.into();
        row.resource = "heldwrites".into();
        row.code = 200;
        row.write = true;
        row.finish(chrono::Utc::now());
        row
    }

    fn rows(store: &Store) -> Vec<AuditRow> {
        let all = open(store).unwrap().query(&query::Filter::default()).unwrap();
        all.into_iter().map(|chained| chained.row).collect()
    }

    #[test]
    fn a_change_cut_short_after_its_intent_is_recovered_as_unknown_and_one_made_is_its_row() {
        for store in testing::both() {
            let b = store.backend;
            // Made: one row, under the intent's id, and no intent left.
            let recorded = begin_event(&store, event("approve")).unwrap();
            let id = recorded.intent.id.clone();
            recorded.done(event("approve"), vec![event("revoke")]).unwrap();
            let kept = rows(&store);
            assert_eq!(kept.len(), 2, "{b}");
            assert_eq!((kept[0].id.as_str(), kept[0].code), (id.as_str(), 200), "{b}");
            assert_eq!(kept[1].verb, "revoke", "{b}");
            // Not made (another decided first): the intent's row, saying so.
            let recorded = begin_event(&store, event("deny")).unwrap();
            recorded.not_made(409, "decided already").unwrap();
            let kept = rows(&store);
            assert_eq!(
                (kept[2].code, kept[2].reason.as_str(), kept[2].write),
                (409, "decided already", false),
                "{b}"
            );
            assert!(
                open(&store).unwrap().recover().unwrap().is_empty(),
                "{b}: no intent left over"
            );
            // Failed in the store: the row's code says how.
            for (error, code) in [
                (StoreError::Invalid("no longer pending".into()), 409),
                (StoreError::NotFound("trust rule t".into()), 404),
            ] {
                let recorded = begin_event(&store, event("approve")).unwrap();
                let handed_back = recorded.store_failed(error).to_string();
                let kept = rows(&store);
                let last = kept.last().unwrap();
                assert_eq!((last.code, last.reason.as_str()), (code, handed_back.as_str()), "{b}");
            }
            // Cut short (the process died after the intent): recovered by
            // the next process as a change of unknown outcome.
            let recorded = begin_event(&store, event("approve")).unwrap();
            let id = recorded.intent.id.clone();
            drop(recorded);
            // PostgreSQL frees the dead replica's lock some time after its
            // connection closes: until then its intent is a live write's.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let recovered = loop {
                let recovered = open(&store).unwrap().recover().unwrap();
                if !recovered.is_empty() || std::time::Instant::now() > deadline {
                    break recovered;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            assert_eq!(recovered.len(), 1, "{b}");
            assert_eq!(
                (
                    recovered[0].row.id.as_str(),
                    recovered[0].row.code,
                    recovered[0].row.reason.as_str()
                ),
                (id.as_str(), 0, "Unknown"),
                "{b}"
            );
        }
    }

    /// The chain hashes a row's instant, and queries and retention compare
    /// the stored text: a time rewritten as the same instant at another
    /// offset would pass the chain and drop out of `--since`.
    #[test]
    fn a_time_rewritten_as_the_same_instant_in_another_form_is_refused_when_read() {
        for store in testing::both() {
            let b = store.backend;
            let mut audit = open(&store).unwrap();
            let mut row = AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now());
            row.finish(chrono::Utc::now());
            audit.commit(&[], std::slice::from_ref(&row)).unwrap();
            let read = |sql: &str| {
                store
                    .with(|c| Ok(c.query_row(sql, crate::store::sql::params![row.id], |r| r.get::<_, String>(0))?))
                    .unwrap()
            };
            let stored = read("SELECT started_at FROM audit WHERE id = ?1");
            let elsewhere = chrono::DateTime::parse_from_rfc3339(&stored)
                .unwrap()
                .with_timezone(&chrono::FixedOffset::west_opt(10 * 3600).unwrap())
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
            store
                .with(|c| {
                    Ok(c.execute(
                        "UPDATE audit SET started_at = ?2 WHERE id = ?1",
                        crate::store::sql::params![row.id, elsewhere],
                    )?)
                })
                .unwrap();
            assert_eq!(read("SELECT started_at FROM audit WHERE id = ?1"), elsewhere, "{b}");
            let filter = query::Filter {
                discovery: true,
                ..Default::default()
            };
            let refused = audit.query(&filter).unwrap_err().to_string();
            assert!(
                refused.contains("is not in the form portcullis writes"),
                "{b}: {refused}"
            );
            assert!(store::verify(audit.as_mut()).is_err(), "{b}: verify does not pass it");
        }
    }
}
