//! The writer's side of the store: its blocking calls made on a blocking
//! thread, the export kept in step, and the spool's segments fsynced,
//! rotated and deleted as rows are committed.

use super::{Ack, Sweep, WriterMetrics};
use crate::audit::export::{ExportSink, Exporter};
use crate::audit::forwarded::Forwarded;
use crate::audit::row::{AuditRow, ChainedRow};
use crate::audit::spool::{self, Spool, Ticket};
use crate::audit::store::AuditStore;

/// Rows kept for another try after failed commits; past this, the oldest
/// are given up in memory (a spooled one waits in the spool for the next
/// start).
const MAX_RETRY: usize = 100_000;

/// Rows to commit, each with its place in the spool (if it has one).
#[derive(Default)]
pub(super) struct Rows {
    pub rows: Vec<AuditRow>,
    pub tickets: Vec<Option<Ticket>>,
}

impl Rows {
    pub fn push(&mut self, row: AuditRow, ticket: Option<Ticket>) {
        self.rows.push(row);
        self.tickets.push(ticket);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Keep at most [`MAX_RETRY`] rows, giving up the oldest.
    fn bounded(mut self) -> Rows {
        if self.rows.len() > MAX_RETRY {
            let over = self.rows.len() - MAX_RETRY;
            for (row, ticket) in self.rows.drain(..over).zip(self.tickets.drain(..over)) {
                match ticket {
                    // Dropped, not shipped: its segment stays until the next
                    // start ships it.
                    Some(_) => {
                        tracing::warn!(audit_id = %row.id, "audit store unavailable for too long: row left in the spool for the next start")
                    }
                    None => tracing::error!(audit_id = %row.id, "audit store unavailable for too long: row lost"),
                }
            }
        }
        self
    }
}

/// What a commit carries besides its rows.
pub(super) struct Commit {
    pub forwarded: Vec<Forwarded>,
    pub intents: Vec<AuditRow>,
    pub intent_acks: Vec<Ack<Result<(), String>>>,
}

/// The store, its exporter and the spool. The store's calls block, so all
/// three go to a blocking thread for each step and come back for the next.
pub(super) struct Storage {
    store: Box<dyn AuditStore>,
    export: Exporter,
    spool: Option<Spool>,
}

impl Storage {
    /// Start the exporter, ship what a crash left in the spool, then record
    /// as unknown the writes a crash left without an outcome.
    pub async fn open(store: Box<dyn AuditStore>, sink: Option<ExportSink>, spool: Option<Spool>) -> Storage {
        let mut storage = on_blocking_thread(move || {
            let mut store = store;
            let export = Exporter::start(sink, store.as_mut());
            Storage { store, export, spool }
        })
        .await;
        if let Some(spool) = storage.spool.clone() {
            storage = storage.ship_leftovers(&spool).await;
        }
        let (storage, recovered) = storage.blocking(|store| store.recover().map(|c| (c.len(), c))).await;
        match recovered {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                rows = n,
                "audit: writes whose outcome was lost in a crash are recorded as unknown"
            ),
            Err(error) => tracing::error!(%error, "audit: could not recover intents left by a crash"),
        }
        storage
    }

    /// Ship the spool's leftover segments in order, before any new row: a
    /// row already committed is skipped by its audit id. A segment that
    /// cannot be shipped stays, with those after it, for the next start.
    async fn ship_leftovers(mut self, spool: &Spool) -> Storage {
        let mut total = 0;
        for path in spool.leftovers() {
            let at = path.clone();
            let (storage, shipped) = self.blocking(move |store| spool::ship(&at, store)).await;
            self = storage;
            match shipped {
                Ok(n) => {
                    total += n;
                    spool.leftover_shipped(&path);
                }
                Err(error) => {
                    tracing::error!(%error, segment = %path.display(), "audit: rows a crash left in the spool cannot be shipped yet");
                    break;
                }
            }
        }
        spool.release_orphans();
        if total > 0 {
            tracing::warn!(
                rows = total,
                "audit: rows answered before a crash were shipped from the spool"
            );
        }
        self
    }

    /// Commit `forwarded`, `intents` and `rows` in one transaction (the
    /// spool fsynced first) and answer whoever waits on the intents.
    /// Returns the rows to try again if it failed.
    pub async fn commit(self, commit: Commit, rows: Rows, metrics: &WriterMetrics) -> (Storage, Rows) {
        let Commit {
            forwarded,
            intents,
            intent_acks,
        } = commit;
        let spool = self.spool.clone();
        let (storage, result) = self
            .blocking(move |store| {
                if let Some(spool) = &spool {
                    spool.sync();
                }
                store.forwarded(forwarded);
                match store.commit(&intents, &rows.rows) {
                    Ok(chained) => {
                        if let Some(spool) = &spool {
                            spool.shipped(rows.tickets.into_iter().flatten());
                            spool.maintain();
                        }
                        Ok((chained.len(), chained))
                    }
                    Err(error) => Err((error, rows)),
                }
            })
            .await;
        match result {
            Ok(n) => {
                metrics.rows.inc_by(n as u64);
                intent_acks.into_iter().for_each(|ack| drop(ack.send(Ok(()))));
                (storage, Rows::default())
            }
            Err((error, rows)) => {
                metrics.failures.inc();
                tracing::error!(%error, rows = rows.len(), "audit commit failed; rows kept for another try");
                let message = error.to_string();
                intent_acks
                    .into_iter()
                    .for_each(|ack| drop(ack.send(Err(message.clone()))));
                (storage, rows.bounded())
            }
        }
    }

    /// Remove the oldest rows as retention asked, and answer it.
    pub async fn sweep(self, (cutoff, max, ack): Sweep) -> Storage {
        let (storage, swept) = self
            .blocking(move |store| store.sweep(cutoff, max).map(|n| (n, Vec::new())))
            .await;
        let _ = ack.send(swept.map_err(|e| e.to_string()));
        storage
    }

    /// Export what is left, delete the spool's shipped segments, then
    /// close the store.
    pub async fn close(self) {
        // Closed before `close` returns, so that whoever opens the
        // database next (a restart, the benchmark's count) never races
        // SQLite's own close of this connection.
        on_blocking_thread(move || {
            let Storage {
                mut store,
                mut export,
                spool,
            } = self;
            export.catch_up(store.as_mut());
            if let Some(spool) = spool {
                spool.close();
            }
            drop(store);
            drop(export);
        })
        .await;
    }

    /// Run `f` on a blocking thread with the store, then export what it
    /// committed. Returns the storage for the next step.
    async fn blocking<T: Send + 'static, E: Send + 'static>(
        self,
        f: impl FnOnce(&mut dyn AuditStore) -> Result<(T, Vec<ChainedRow>), E> + Send + 'static,
    ) -> (Storage, Result<T, E>) {
        on_blocking_thread(move || {
            let Storage {
                mut store,
                mut export,
                spool,
            } = self;
            let result = f(store.as_mut()).map(|(value, committed)| {
                export.committed(store.as_mut(), &committed);
                value
            });
            (Storage { store, export, spool }, result)
        })
        .await
    }
}

async fn on_blocking_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(done) => done,
        // The runtime was dropped without the graceful shutdown (which
        // flushes the writer first) and took the closure before it ran;
        // this task goes with it, as in a crash: writes were committed as
        // intents first, reads were spooled, and both are recovered at the
        // next start.
        Err(error) if error.is_cancelled() => std::future::pending().await,
        // The closures do not panic on any input; if one ever did, the
        // writer cannot go on without its store.
        Err(error) => panic!("audit writer thread failed: {error}"),
    }
}
