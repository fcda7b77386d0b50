//! The writer's side of the store: its blocking calls made on the audit
//! thread ([`AuditThread`]), the export kept in step, and the spool's
//! segments fsynced, rotated and deleted as rows are committed.

use super::thread::AuditThread;
use super::{Sweep, WriterMetrics};
use crate::audit::chain::{self, Encoded};
use crate::audit::export::{ExportSink, Exporter};
use crate::audit::forwarded::{self, Forwarded};
use crate::audit::row::{AuditRow, ChainedRow};
use crate::audit::spool::{self, Spool, Ticket};
use crate::audit::store::AuditStore;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Rows kept for another try after failed commits that have no place in
/// the spool (retention's, or a row the spool could not take); past this,
/// the oldest of them are given up. Spooled rows are all kept: the spool's
/// bound refuses requests before they grow past it.
const MAX_UNSPOOLED: usize = 100_000;

/// Rows to commit, in order, each with its place in the spool (if it has
/// one).
#[derive(Default)]
pub(super) struct Rows {
    pub rows: Vec<Encoded>,
    pub tickets: Vec<Option<Ticket>>,
}

impl Rows {
    pub fn push(&mut self, row: Encoded, ticket: Option<Ticket>) {
        self.rows.push(row);
        self.tickets.push(ticket);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The first `n` rows, taken out.
    pub fn take_front(&mut self, n: usize) -> Rows {
        let n = n.min(self.rows.len());
        Rows {
            rows: self.rows.drain(..n).collect(),
            tickets: self.tickets.drain(..n).collect(),
        }
    }

    /// Put `rows` back before these, keeping the order they came in.
    pub fn put_front(&mut self, mut rows: Rows) {
        rows.rows.append(&mut self.rows);
        rows.tickets.append(&mut self.tickets);
        *self = rows.bounded();
    }

    /// Take out the rows whose ids are in `done`; their tickets.
    fn drop_committed(&mut self, done: &HashSet<String>) -> Vec<Ticket> {
        let mut shipped = Vec::new();
        let (rows, tickets) = (std::mem::take(&mut self.rows), std::mem::take(&mut self.tickets));
        for (row, ticket) in rows.into_iter().zip(tickets) {
            match done.contains(&row.row().id) {
                true => shipped.extend(ticket),
                false => self.push(row, ticket),
            }
        }
        shipped
    }

    /// Keep at most [`MAX_UNSPOOLED`] rows without a place in the spool,
    /// giving up the oldest of them.
    fn bounded(mut self) -> Rows {
        let unspooled = self.tickets.iter().filter(|t| t.is_none()).count();
        let Some(mut over) = unspooled.checked_sub(MAX_UNSPOOLED).filter(|n| *n > 0) else {
            return self;
        };
        let (rows, tickets) = (std::mem::take(&mut self.rows), std::mem::take(&mut self.tickets));
        for (row, ticket) in rows.into_iter().zip(tickets) {
            if over > 0 && ticket.is_none() {
                over -= 1;
                tracing::error!(audit_id = %row.row().id, "audit store unavailable for too long: row lost");
                continue;
            }
            self.push(row, ticket);
        }
        self
    }
}

/// What a commit carries besides its rows.
pub(super) struct Commit {
    pub forwarded: Vec<Forwarded>,
    pub intents: Vec<AuditRow>,
}

/// The store, its exporter and the spool, and the audit thread they go to
/// for each step (the store's calls block) and come back from for the next.
pub(super) struct Storage {
    held: Held,
    thread: AuditThread,
    /// The intents a crash left are still to be recorded as unknown: the
    /// store could not be reached, or the spool's leftovers (whose rows
    /// settle some of them) have not shipped yet. Tried before the first
    /// commit from this time on.
    recovery_pending: Option<Instant>,
    /// How long after a failed recovery it is tried again.
    recovery_retry: Duration,
}

/// What goes to the audit thread and back.
struct Held {
    store: Box<dyn AuditStore>,
    export: Exporter,
    spool: Option<Spool>,
}

impl Storage {
    /// Start the exporter, ship what a crash left in the spool, then record
    /// as unknown the writes a crash left without an outcome.
    pub async fn open(
        store: Box<dyn AuditStore>,
        sink: Option<ExportSink>,
        spool: Option<Spool>,
        thread: AuditThread,
        recovery_retry: Duration,
    ) -> Storage {
        let (store, export) = thread
            .run(move || {
                let mut store = store;
                let export = Exporter::start(sink, store.as_mut());
                (store, export)
            })
            .await;
        let mut storage = Storage {
            held: Held { store, export, spool },
            thread,
            recovery_pending: Some(Instant::now()),
            recovery_retry,
        };
        if let Some(spool) = storage.held.spool.clone() {
            // What cannot ship now is tried again before each commit.
            let shipped;
            (storage, shipped) = storage.ship_leftovers(&spool).await;
            if shipped.is_err() {
                // Their rows would arrive after their intents had been
                // recorded as unknown: recovery waits for them, and, the
                // store likely down, for the pause other replicas need to
                // take their locks back once it is up.
                storage.recovery_pending = Some(Instant::now() + storage.recovery_retry);
                return storage;
            }
        }
        storage.recover().await
    }

    /// Record as unknown the writes a crash left without an outcome; on a
    /// failure, tried again before the next commit.
    async fn recover(self) -> Storage {
        let (mut storage, recovered) = self.blocking(|store| store.recover().map(|c| (c.len(), c))).await;
        storage.recovery_pending = recovered.is_err().then(|| Instant::now() + storage.recovery_retry);
        match recovered {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                rows = n,
                "audit: writes whose outcome was lost in a crash are recorded as unknown"
            ),
            Err(error) => {
                tracing::error!(%error, "audit: could not recover intents left by a crash; tried again before the next commit")
            }
        }
        storage
    }

    /// Ship the spool's leftover segments in order, before any new row: a
    /// row already committed is skipped by its audit id. A segment that
    /// cannot be shipped stays, with those after it, and is tried again
    /// before the next commit ([`commit`](Self::commit)).
    async fn ship_leftovers(mut self, spool: &Spool) -> (Storage, Result<(), String>) {
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
                    return (self, Err(error.to_string()));
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
        (self, Ok(()))
    }

    /// Commit `forwarded`, `intents` and `rows` in one transaction (the
    /// spool fsynced first; a request's forwarded record whose row is among
    /// `rows` is left out, the row marked instead). After a failed commit
    /// (`recheck`), which may have committed all the same (the connection
    /// lost after COMMIT was sent), rows the store already holds are left
    /// out by their audit id, so none is committed twice. Returns the store's error and the rows
    /// to try again if it failed.
    pub async fn commit(
        self,
        commit: Commit,
        mut rows: Rows,
        recheck: bool,
        metrics: &WriterMetrics,
    ) -> (Storage, Result<(), (String, Rows)>) {
        let Commit { forwarded, intents } = commit;
        let forwarded = forwarded::stand_in(forwarded, &mut rows.rows);
        let spool = self.held.spool.clone();
        let mut this = self;
        // A crash's leftovers go first, so the chain keeps their order.
        if let Some(spool) = spool.as_ref().filter(|spool| spool.has_leftovers()) {
            let shipped;
            (this, shipped) = this.ship_leftovers(spool).await;
            if let Err(error) = shipped {
                // Kept in memory for the commit that follows them.
                this.held.store.forwarded(forwarded);
                return (this, Err((error, rows)));
            }
        }
        if this.recovery_pending.is_some_and(|at| Instant::now() >= at) {
            this = this.recover().await;
        }
        let (storage, result) = this
            .blocking(move |store| {
                let mut rows = rows;
                if let Some(spool) = &spool {
                    spool.sync();
                }
                store.forwarded(forwarded);
                if recheck && !rows.is_empty() {
                    let ids: Vec<String> = rows.rows.iter().map(|row| row.row().id.clone()).collect();
                    match store.committed(&ids) {
                        Ok(done) => {
                            let shipped = rows.drop_committed(&done);
                            if let Some(spool) = &spool {
                                spool.shipped(shipped);
                            }
                        }
                        Err(error) => return Err((error, rows)),
                    }
                }
                match store.commit_encoded(&intents, &rows.rows) {
                    Ok(links) => {
                        if let Some(spool) = &spool {
                            spool.shipped(rows.tickets.into_iter().flatten());
                            spool.maintain();
                        }
                        // The rows move into their places, for the export.
                        let chained = chain::chained(links, rows.rows.into_iter().map(Encoded::into_row));
                        Ok((chained.len(), chained))
                    }
                    Err(error) => Err((error, rows)),
                }
            })
            .await;
        match result {
            Ok(n) => {
                metrics.rows.inc_by(n as u64);
                (storage, Ok(()))
            }
            Err((error, rows)) => {
                metrics.failures.inc();
                (storage, Err((error.to_string(), rows)))
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
        let Storage { held, thread, .. } = self;
        thread
            .run(move || {
                let Held {
                    mut store,
                    mut export,
                    spool,
                } = held;
                export.catch_up(store.as_mut());
                if let Some(spool) = spool {
                    spool.close();
                }
                drop(store);
                drop(export);
            })
            .await;
    }

    /// Run `f` on the audit thread with the store, then export what it
    /// committed. Returns the storage for the next step.
    async fn blocking<T: Send + 'static, E: Send + 'static>(
        self,
        f: impl FnOnce(&mut dyn AuditStore) -> Result<(T, Vec<ChainedRow>), E> + Send + 'static,
    ) -> (Storage, Result<T, E>) {
        let Storage {
            mut held,
            thread,
            recovery_pending,
            recovery_retry,
        } = self;
        let (held, result) = thread
            .run(move || {
                let result = f(held.store.as_mut()).map(|(value, committed)| {
                    held.export.committed(held.store.as_mut(), &committed);
                    value
                });
                (held, result)
            })
            .await;
        (
            Storage {
                held,
                thread,
                recovery_pending,
                recovery_retry,
            },
            result,
        )
    }
}
