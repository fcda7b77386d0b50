//! The audit writer: one task that batches rows into the store.
//!
//! On the model of the API server's audit modes: a write's intent is
//! committed before the write is forwarded (blocking mode; concurrent writes
//! share one commit), while finished rows are group-committed at most
//! [`WriterSettings::window`] after the first of them arrived (batch mode),
//! with one fsync per commit rather than one per request. The queue is
//! bounded and its depth is a metric; when it is full, a row waits for room
//! rather than being dropped. A clean shutdown ([`AuditWriter::close`])
//! commits everything queued. With a [`Spool`], each finished row is
//! appended to it before it is queued, so a crash loses none: the next
//! start ships what the spool holds (and a write's intent without its row
//! becomes a row of unknown outcome); without one, a crash loses at most
//! the rows of the last commit window.
//!
//! When the store does not commit (PostgreSQL unreachable or restarting),
//! the writer keeps the rows, in order, and tries again with backoff until
//! it answers (see [`run`]); reads go on being served while the spool is
//! within its bound, and each write is refused unless its intent commits.

mod run;
mod storage;
mod thread;

use super::chain::Encoded;
use super::export::ExportSink;
use super::forwarded::Forwarded;
use super::row::AuditRow;
use super::spool::{Spool, Ticket};
use super::store::AuditStore;
use super::AuditError;
use chrono::{DateTime, Utc};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use run::Health;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use storage::Storage;
use tokio::sync::{mpsc, oneshot, Notify};

/// How the writer batches.
#[derive(Debug, Clone, Copy)]
pub struct WriterSettings {
    /// Longest a finished row waits for its commit.
    pub window: Duration,
    /// Queue capacity, in rows.
    pub capacity: usize,
    /// Most rows in one commit.
    pub max_batch: usize,
    /// After a crash recovery failed (the store down at start), how long
    /// before it is tried again, at a commit: on PostgreSQL, replicas take
    /// back the locks that mark their writes in flight only at their next
    /// commit after the database's own restart, and a recovery before that
    /// would record those writes as unknown.
    pub recovery_retry: Duration,
}

impl Default for WriterSettings {
    fn default() -> Self {
        WriterSettings {
            window: Duration::from_millis(100),
            capacity: 16_384,
            max_batch: 4096,
            recovery_retry: Duration::from_secs(60),
        }
    }
}

/// The writer's metrics (clones of the registered ones).
#[derive(Debug, Clone, Default)]
pub struct WriterMetrics {
    /// Messages waiting in the queue.
    pub queue_depth: Gauge,
    /// Rows committed.
    pub rows: Counter,
    /// Commits that failed.
    pub failures: Counter,
}

type Ack<T> = oneshot::Sender<T>;
/// A sweep's cutoff, most rows, and where to answer.
type Sweep = (DateTime<Utc>, usize, Ack<Result<usize, String>>);

/// A row is boxed: the queue's slots are as large as its largest message,
/// and a row inline (some 900 bytes) made every slot that size, copied in
/// and out several times over, for the small forwarded records too
/// (benches/RESULTS.md).
enum Msg {
    Row(Box<Encoded>, Option<Ticket>),
    Forwarded(Forwarded),
    Intent(Box<AuditRow>, Ack<bool>),
    Flush(Ack<()>),
    Sweep(DateTime<Utc>, usize, Ack<Result<usize, String>>),
    Stop(Ack<()>),
}

/// A handle on the writer; cheap to clone.
#[derive(Debug, Clone)]
pub struct AuditWriter {
    tx: mpsc::Sender<Msg>,
    /// Rows waiting for room in a full queue.
    waiting: Arc<AtomicUsize>,
    /// Where finished rows are appended before they are queued.
    spool: Option<Spool>,
    /// Whether the store's last commit failed (to say why the spool is full).
    health: Arc<Health>,
    /// Wakes the writer within its window: someone waits on the commit, or
    /// the queue is half full. Rows alone do not wake it (see [`run`]).
    wake: Arc<Notify>,
    /// How many wait on a commit: while none does, a long commit yields
    /// its core between statements ([`AuditStore::yield_while_unwaited`]).
    waited_on: Arc<AtomicUsize>,
    /// The runtime the writer was started on, where rows wait for room.
    runtime: tokio::runtime::Handle,
}

/// One waiting on a commit, counted in [`AuditWriter::waited_on`] until
/// dropped (when the answer came, or the wait was given up).
struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn new(waited_on: &Arc<AtomicUsize>) -> Waiting {
        waited_on.fetch_add(1, Ordering::Relaxed);
        Waiting(waited_on.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AuditWriter {
    /// Start the writer task over `store`, exporting committed rows to
    /// `sink`. Must be called inside a Tokio runtime.
    pub fn spawn(
        store: Box<dyn AuditStore>,
        sink: Option<ExportSink>,
        settings: WriterSettings,
        metrics: WriterMetrics,
    ) -> AuditWriter {
        Self::spawn_spooled(store, sink, None, settings, metrics)
    }

    /// [`spawn`](Self::spawn), appending each finished row to `spool`
    /// before it is queued; the writer first ships what a crash left there.
    pub fn spawn_spooled(
        mut store: Box<dyn AuditStore>,
        sink: Option<ExportSink>,
        spool: Option<Spool>,
        settings: WriterSettings,
        metrics: WriterMetrics,
    ) -> AuditWriter {
        let (tx, rx) = mpsc::channel(settings.capacity.max(1));
        let health = Arc::new(Health::default());
        let wake = Arc::new(Notify::new());
        // Only when the process is out of threads at its start.
        let thread = thread::AuditThread::start().expect("cannot start the audit thread");
        let waited_on = Arc::new(AtomicUsize::new(0));
        store.yield_while_unwaited(waited_on.clone());
        let storage = Storage::open(store, sink, spool.clone(), thread, settings.recovery_retry);
        tokio::spawn(run::run(storage, rx, settings, metrics, health.clone(), wake.clone()));
        AuditWriter {
            tx,
            waiting: Arc::new(AtomicUsize::new(0)),
            spool,
            health,
            wake,
            waited_on,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Commit `row` as an intent and wait until it is on disk. An error
    /// means the request must not be forwarded.
    pub async fn commit_intent(&self, row: AuditRow) -> Result<(), AuditError> {
        let (ack, done) = oneshot::channel();
        let _waiting = self
            .urgent(Msg::Intent(Box::new(row), ack))
            .await
            .map_err(|_| AuditError::Stopped)?;
        match done.await.map_err(|_| AuditError::Stopped)? {
            true => Ok(()),
            false => Err(AuditError::StoreUnreachable),
        }
    }

    /// Append a finished row to the spool (one write, so it reaches the
    /// kernel before the caller lets its answer complete), then queue it
    /// without waiting (from `Drop`): if the queue is full, a task waits
    /// for room.
    pub fn submit(&self, row: AuditRow) {
        // Serialised once: the spool writes these bytes and the commit
        // hashes them.
        let row = Box::new(Encoded::new(row));
        let ticket = self.spool.as_ref().and_then(|spool| spool.append(&row));
        self.queue(Msg::Row(row, ticket));
    }

    /// Record without waiting that a request left for its cluster: it goes
    /// into the next commit with the rows, so the request path pays no
    /// commit of its own.
    pub fn forwarded(&self, record: Forwarded) {
        self.queue(Msg::Forwarded(record));
    }

    fn queue(&self, msg: Msg) {
        match self.tx.try_send(msg) {
            Ok(()) => {
                if self.tx.capacity() < self.tx.max_capacity() / 2 {
                    self.wake.notify_one();
                }
            }
            Err(mpsc::error::TrySendError::Full(msg)) => {
                self.wake.notify_one();
                self.waiting.fetch_add(1, Ordering::SeqCst);
                let room = ForRoom {
                    msg: Some(msg),
                    waiting: self.waiting.clone(),
                    // The writer is behind: its commits take their full share.
                    _behind: Waiting::new(&self.waited_on),
                };
                let tx = self.tx.clone();
                // On the writer's own runtime: a row may be finished where
                // there is none (a `Drop` on a plain thread, where it was
                // lost before), or on a runtime that ends before the writer
                // has room (where it was dropped with its task).
                drop(self.runtime.spawn(async move {
                    let mut room = room;
                    if let Ok(permit) = tx.reserve().await {
                        if let Some(msg) = room.msg.take() {
                            permit.send(msg);
                        }
                    }
                }));
            }
            Err(mpsc::error::TrySendError::Closed(msg)) => lost(msg),
        }
    }

    /// Wait until the queue has room. Requests wait here before they are
    /// forwarded when the writer lags, so only rows of requests already in
    /// flight ever wait in [`submit`](Self::submit)'s tasks: the backlog is
    /// bounded by concurrency, and no row is dropped. An error, when the
    /// spool is past its bound (the store does not commit) or cannot be
    /// written, means the request must not be forwarded: its row could not
    /// be kept.
    pub async fn room(&self) -> Result<(), AuditError> {
        if let Some(spool) = &self.spool {
            spool.admit().map_err(|error| match error {
                AuditError::SpoolFull { waiting, bound, .. } => AuditError::SpoolFull {
                    waiting,
                    bound,
                    unreachable: self.health.is_down(),
                },
                other => other,
            })?;
        }
        // A permit taken and given back at once: cheap when there is room.
        let _ = self.tx.reserve().await;
        Ok(())
    }

    /// Wait while the spool is past its hard cap (see [`Spool::relief`]);
    /// at once when it is not, which is one atomic load.
    pub async fn relief(&self) {
        if let Some(spool) = self.spool.as_ref().filter(|spool| spool.overwhelmed()) {
            tracing::warn!("audit spool past its hard cap: new requests wait until the store commits");
            spool.relief().await;
        }
    }

    /// Queue a row that records no request (retention's), waiting for room
    /// if the queue is full; it is not spooled.
    pub async fn append(&self, row: AuditRow) {
        if let Err(mpsc::error::SendError(msg)) = self.tx.send(Msg::Row(Box::new(Encoded::new(row)), None)).await {
            lost(msg);
        }
    }

    /// Queue `msg`, which someone waits on, and wake the writer for it; the
    /// caller counts as waiting until the returned [`Waiting`] is dropped.
    async fn urgent(&self, msg: Msg) -> Result<Waiting, mpsc::error::SendError<Msg>> {
        let waiting = Waiting::new(&self.waited_on);
        self.tx.send(msg).await?;
        self.wake.notify_one();
        Ok(waiting)
    }

    /// Wait until every row queued before now is committed (or has failed).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if let Ok(_waiting) = self.urgent(Msg::Flush(ack)).await {
            let _ = done.await;
        }
    }

    /// Remove up to `max_rows` of the oldest rows that ended before `cutoff`.
    pub async fn sweep(&self, cutoff: DateTime<Utc>, max_rows: usize) -> Result<usize, AuditError> {
        let (ack, done) = oneshot::channel();
        let _waiting = self
            .urgent(Msg::Sweep(cutoff, max_rows, ack))
            .await
            .map_err(|_| AuditError::Stopped)?;
        done.await.map_err(|_| AuditError::Stopped)?.map_err(AuditError::Commit)
    }

    /// Commit everything queued (including rows waiting for room), then
    /// stop, leaving the spool empty. If the store does not commit, it is
    /// tried again for up to 10 s; what it has not taken by then stays in
    /// the spool for the next start, as do rows submitted afterwards.
    pub async fn close(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.waiting.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (ack, done) = oneshot::channel();
        if let Ok(_waiting) = self.urgent(Msg::Stop(ack)).await {
            let _ = done.await;
        }
    }
}

/// A message waiting for room in the queue: counted in
/// [`AuditWriter::waiting`] until it is queued or, if the writer has
/// stopped or the runtime is gone, reported lost.
struct ForRoom {
    msg: Option<Msg>,
    waiting: Arc<AtomicUsize>,
    _behind: Waiting,
}

impl Drop for ForRoom {
    fn drop(&mut self) {
        if let Some(msg) = self.msg.take() {
            lost(msg);
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lost(msg: Msg) {
    match msg {
        Msg::Row(row, Some(_)) => {
            tracing::warn!(audit_id = %row.row().id, "the audit writer has stopped: this request's row waits in the spool for the next start")
        }
        Msg::Row(row, None) => {
            tracing::error!(audit_id = %row.row().id, "the audit writer has stopped: this request's row is lost")
        }
        Msg::Intent(row, _) => {
            tracing::error!(audit_id = %row.id, "the audit writer has stopped: this request's row is lost")
        }
        Msg::Forwarded(record) => {
            tracing::warn!(audit_id = %record.id, "the audit writer has stopped: this request's forwarded record is lost")
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
