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

mod storage;

use super::export::ExportSink;
use super::forwarded::Forwarded;
use super::row::AuditRow;
use super::spool::{Spool, Ticket};
use super::store::AuditStore;
use super::AuditError;
use chrono::{DateTime, Utc};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use storage::{Commit, Rows, Storage};
use tokio::sync::{mpsc, oneshot};

/// How the writer batches.
#[derive(Debug, Clone, Copy)]
pub struct WriterSettings {
    /// Longest a finished row waits for its commit.
    pub window: Duration,
    /// Queue capacity, in rows.
    pub capacity: usize,
    /// Most rows in one commit.
    pub max_batch: usize,
}

impl Default for WriterSettings {
    fn default() -> Self {
        WriterSettings {
            window: Duration::from_millis(100),
            capacity: 16_384,
            max_batch: 4096,
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

enum Msg {
    Row(AuditRow, Option<Ticket>),
    Forwarded(Forwarded),
    Intent(AuditRow, Ack<Result<(), String>>),
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
        store: Box<dyn AuditStore>,
        sink: Option<ExportSink>,
        spool: Option<Spool>,
        settings: WriterSettings,
        metrics: WriterMetrics,
    ) -> AuditWriter {
        let (tx, rx) = mpsc::channel(settings.capacity.max(1));
        tokio::spawn(run(Storage::open(store, sink, spool.clone()), rx, settings, metrics));
        AuditWriter {
            tx,
            waiting: Arc::new(AtomicUsize::new(0)),
            spool,
        }
    }

    /// Commit `row` as an intent and wait until it is on disk. An error
    /// means the request must not be forwarded.
    pub async fn commit_intent(&self, row: AuditRow) -> Result<(), AuditError> {
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Msg::Intent(row, ack))
            .await
            .map_err(|_| AuditError::Stopped)?;
        done.await.map_err(|_| AuditError::Stopped)?.map_err(AuditError::Commit)
    }

    /// Append a finished row to the spool (one write, so it reaches the
    /// kernel before the caller lets its answer complete), then queue it
    /// without waiting (from `Drop`): if the queue is full, a task waits
    /// for room.
    pub fn submit(&self, row: AuditRow) {
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
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(msg)) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    self.waiting.fetch_add(1, Ordering::SeqCst);
                    let (tx, waiting) = (self.tx.clone(), self.waiting.clone());
                    runtime.spawn(async move {
                        if let Err(mpsc::error::SendError(msg)) = tx.send(msg).await {
                            lost(msg);
                        }
                        waiting.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Err(_) => lost(msg),
            },
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
            spool.admit()?;
        }
        // A permit taken and given back at once: cheap when there is room.
        let _ = self.tx.reserve().await;
        Ok(())
    }

    /// Queue a row that records no request (retention's), waiting for room
    /// if the queue is full; it is not spooled.
    pub async fn append(&self, row: AuditRow) {
        if let Err(mpsc::error::SendError(msg)) = self.tx.send(Msg::Row(row, None)).await {
            lost(msg);
        }
    }

    /// Wait until every row queued before now is committed (or has failed).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Msg::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Remove up to `max_rows` of the oldest rows that ended before `cutoff`.
    pub async fn sweep(&self, cutoff: DateTime<Utc>, max_rows: usize) -> Result<usize, AuditError> {
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Msg::Sweep(cutoff, max_rows, ack))
            .await
            .map_err(|_| AuditError::Stopped)?;
        done.await.map_err(|_| AuditError::Stopped)?.map_err(AuditError::Commit)
    }

    /// Commit everything queued (including rows waiting for room), then
    /// stop, leaving the spool empty. Rows submitted afterwards are logged,
    /// and kept in the spool for the next start.
    pub async fn close(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.waiting.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (ack, done) = oneshot::channel();
        if self.tx.send(Msg::Stop(ack)).await.is_ok() {
            let _ = done.await;
        }
    }
}

fn lost(msg: Msg) {
    match msg {
        Msg::Row(row, Some(_)) => {
            tracing::warn!(audit_id = %row.id, "the audit writer has stopped: this request's row waits in the spool for the next start")
        }
        Msg::Row(row, None) | Msg::Intent(row, _) => {
            tracing::error!(audit_id = %row.id, "the audit writer has stopped: this request's row is lost")
        }
        Msg::Forwarded(record) => {
            tracing::warn!(audit_id = %record.id, "the audit writer has stopped: this request's forwarded record is lost")
        }
        _ => {}
    }
}

/// What one commit carries.
#[derive(Default)]
struct Batch {
    rows: Rows,
    intents: Vec<AuditRow>,
    forwarded: Vec<Forwarded>,
    intent_acks: Vec<Ack<Result<(), String>>>,
    flushes: Vec<Ack<()>>,
    sweep: Option<Sweep>,
    stop: Option<Ack<()>>,
}

impl Batch {
    fn add(&mut self, msg: Msg) {
        match msg {
            Msg::Row(row, ticket) => self.rows.push(row, ticket),
            Msg::Forwarded(record) => self.forwarded.push(record),
            Msg::Intent(row, ack) => {
                self.intents.push(row);
                self.intent_acks.push(ack);
            }
            Msg::Flush(ack) => self.flushes.push(ack),
            Msg::Sweep(cutoff, max, ack) => self.sweep = Some((cutoff, max, ack)),
            Msg::Stop(ack) => self.stop = Some(ack),
        }
    }

    /// Someone is waiting on this commit: do not wait for more rows.
    fn urgent(&self) -> bool {
        !self.intents.is_empty() || !self.flushes.is_empty() || self.sweep.is_some() || self.stop.is_some()
    }

    /// Nothing more may join (a sweep or stop closes the batch).
    fn closed(&self, max: usize) -> bool {
        self.sweep.is_some() || self.stop.is_some() || self.rows.len() + self.intents.len() >= max
    }
}

async fn run(
    storage: impl std::future::Future<Output = Storage>,
    mut rx: mpsc::Receiver<Msg>,
    settings: WriterSettings,
    metrics: WriterMetrics,
) {
    let mut storage = storage.await;
    let mut retry = Rows::default();
    loop {
        let Some(batch) = next_batch(&mut rx, std::mem::take(&mut retry), settings).await else {
            return;
        };
        metrics.queue_depth.set(rx.len() as i64);
        let commit = Commit {
            forwarded: batch.forwarded,
            intents: batch.intents,
            intent_acks: batch.intent_acks,
        };
        (storage, retry) = storage.commit(commit, batch.rows, &metrics).await;
        for ack in batch.flushes {
            let _ = ack.send(());
        }
        if let Some(sweep) = batch.sweep {
            storage = storage.sweep(sweep).await;
        }
        if let Some(ack) = batch.stop {
            storage.close().await;
            let _ = ack.send(());
            return;
        }
    }
}

/// The next batch: the rows kept for another try, or else the first message
/// to arrive, then what [`gather`] adds. `None` once every sender is gone.
async fn next_batch(rx: &mut mpsc::Receiver<Msg>, retry: Rows, settings: WriterSettings) -> Option<Batch> {
    let mut batch = Batch {
        rows: retry,
        ..Batch::default()
    };
    if batch.rows.is_empty() {
        batch.add(rx.recv().await?);
    }
    gather(rx, &mut batch, settings).await;
    Some(batch)
}

/// Add to `batch` what arrives within the window (or until someone waits).
async fn gather(rx: &mut mpsc::Receiver<Msg>, batch: &mut Batch, settings: WriterSettings) {
    let deadline = tokio::time::Instant::now() + settings.window;
    while !batch.urgent() && !batch.closed(settings.max_batch) {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(msg) => batch.add(msg),
                None => break,
            },
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    while !batch.closed(settings.max_batch) {
        match rx.try_recv() {
            Ok(msg) => batch.add(msg),
            Err(_) => break,
        }
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
