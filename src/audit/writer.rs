//! The audit writer: one task that batches rows into the store.
//!
//! On the model of the API server's audit modes: a write's intent is
//! committed before the write is forwarded (blocking mode; concurrent writes
//! share one commit), while finished rows are group-committed at most
//! [`WriterSettings::window`] after the first of them arrived (batch mode),
//! with one fsync per commit rather than one per request. The queue is
//! bounded and its depth is a metric; when it is full, a row waits for room
//! rather than being dropped. A clean shutdown ([`AuditWriter::close`])
//! commits everything queued; a crash loses at most the rows of the last
//! commit window (never a write's intent, which recovery turns into a row).

use super::export::{ExportSink, Exporter};
use super::forwarded::Forwarded;
use super::row::{AuditRow, ChainedRow};
use super::store::AuditStore;
use super::AuditError;
use chrono::{DateTime, Utc};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
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

/// Rows kept for another try after failed commits; past this, the oldest
/// are logged and given up.
const MAX_RETRY: usize = 100_000;

type Ack<T> = oneshot::Sender<T>;
/// A sweep's cutoff, most rows, and where to answer.
type Sweep = (DateTime<Utc>, usize, Ack<Result<usize, String>>);

enum Msg {
    Row(AuditRow),
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
        let (tx, rx) = mpsc::channel(settings.capacity.max(1));
        tokio::spawn(run(store, sink, rx, settings, metrics));
        AuditWriter {
            tx,
            waiting: Arc::new(AtomicUsize::new(0)),
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

    /// Queue a finished row without waiting (from `Drop`): if the queue is
    /// full, a task waits for room.
    pub fn submit(&self, row: AuditRow) {
        self.queue(Msg::Row(row));
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
    /// bounded by concurrency, and no row is dropped.
    pub async fn room(&self) {
        // A permit taken and given back at once: cheap when there is room.
        let _ = self.tx.reserve().await;
    }

    /// Queue a finished row, waiting for room if the queue is full.
    pub async fn append(&self, row: AuditRow) {
        if let Err(mpsc::error::SendError(msg)) = self.tx.send(Msg::Row(row)).await {
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
    /// stop. Rows submitted afterwards are logged as lost.
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
        Msg::Row(row) | Msg::Intent(row, _) => {
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
    rows: Vec<AuditRow>,
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
            Msg::Row(row) => self.rows.push(row),
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
    store: Box<dyn AuditStore>,
    sink: Option<ExportSink>,
    mut rx: mpsc::Receiver<Msg>,
    settings: WriterSettings,
    metrics: WriterMetrics,
) {
    let mut storage = Storage::open(store, sink).await;
    let mut retry: Vec<AuditRow> = Vec::new();
    loop {
        let Some(batch) = next_batch(&mut rx, std::mem::take(&mut retry), settings).await else {
            return;
        };
        metrics.queue_depth.set(rx.len() as i64);
        (storage, retry) = storage
            .commit(batch.forwarded, batch.intents, batch.rows, batch.intent_acks, &metrics)
            .await;
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
async fn next_batch(rx: &mut mpsc::Receiver<Msg>, retry: Vec<AuditRow>, settings: WriterSettings) -> Option<Batch> {
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

/// The store and its exporter. The store's calls block, so both go to a
/// blocking thread for each step and come back for the next.
struct Storage {
    store: Box<dyn AuditStore>,
    export: Exporter,
}

impl Storage {
    /// Start the exporter, then record as unknown the writes a crash left
    /// without an outcome.
    async fn open(store: Box<dyn AuditStore>, sink: Option<ExportSink>) -> Storage {
        let storage = on_blocking_thread(move || {
            let mut store = store;
            let export = Exporter::start(sink, store.as_mut());
            Storage { store, export }
        })
        .await;
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

    /// Commit `forwarded`, `intents` and `rows` in one transaction and
    /// answer whoever waits on the intents. Returns the rows to try again if
    /// it failed.
    async fn commit(
        self,
        forwarded: Vec<Forwarded>,
        intents: Vec<AuditRow>,
        rows: Vec<AuditRow>,
        intent_acks: Vec<Ack<Result<(), String>>>,
        metrics: &WriterMetrics,
    ) -> (Storage, Vec<AuditRow>) {
        let (storage, result) = self
            .blocking(move |store| {
                store.forwarded(forwarded);
                store
                    .commit(&intents, &rows)
                    .map(|c| (c.len(), c))
                    .map_err(|e| (e, rows))
            })
            .await;
        match result {
            Ok(n) => {
                metrics.rows.inc_by(n as u64);
                intent_acks.into_iter().for_each(|ack| drop(ack.send(Ok(()))));
                (storage, Vec::new())
            }
            Err((error, rows)) => {
                metrics.failures.inc();
                tracing::error!(%error, rows = rows.len(), "audit commit failed; rows kept for another try");
                let message = error.to_string();
                intent_acks
                    .into_iter()
                    .for_each(|ack| drop(ack.send(Err(message.clone()))));
                (storage, keep_for_retry(rows))
            }
        }
    }

    /// Remove the oldest rows as retention asked, and answer it.
    async fn sweep(self, (cutoff, max, ack): Sweep) -> Storage {
        let (storage, swept) = self
            .blocking(move |store| store.sweep(cutoff, max).map(|n| (n, Vec::new())))
            .await;
        let _ = ack.send(swept.map_err(|e| e.to_string()));
        storage
    }

    /// Export what is left, then close the store.
    async fn close(self) {
        // Closed before `close` returns, so that whoever opens the
        // database next (a restart, the benchmark's count) never races
        // SQLite's own close of this connection.
        on_blocking_thread(move || {
            let Storage { mut store, mut export } = self;
            export.catch_up(store.as_mut());
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
            let Storage { mut store, mut export } = self;
            let result = f(store.as_mut()).map(|(value, committed)| {
                export.committed(store.as_mut(), &committed);
                value
            });
            (Storage { store, export }, result)
        })
        .await
    }
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

fn keep_for_retry(mut rows: Vec<AuditRow>) -> Vec<AuditRow> {
    if rows.len() > MAX_RETRY {
        for row in rows.drain(..rows.len() - MAX_RETRY) {
            tracing::error!(audit_id = %row.id, "audit store unavailable for too long: row lost");
        }
    }
    rows
}

async fn on_blocking_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(done) => done,
        // The runtime was dropped without the graceful shutdown (which
        // flushes the writer first) and took the closure before it ran;
        // this task goes with it, as in a crash: writes were committed as
        // intents first and are recovered at the next start.
        Err(error) if error.is_cancelled() => std::future::pending().await,
        // The closures do not panic on any input; if one ever did, the
        // writer cannot go on without its store.
        Err(error) => panic!("audit writer thread failed: {error}"),
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
