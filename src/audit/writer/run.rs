//! The writer's loop: batches gathered from the queue and committed in
//! the order their rows came. When a commit fails (the store cannot be
//! reached, or fails), its rows go back to the front of the backlog and the
//! commit is tried again with backoff, until the store answers; meanwhile
//! the queue is still drained (rows join the backlog, in the spool as
//! well), and a write's intent is tried at once, refused if it fails.

use super::storage::{Commit, Rows, Storage};
use super::{Ack, Msg, Sweep, WriterMetrics, WriterSettings};
use crate::audit::forwarded::Forwarded;
use crate::audit::row::AuditRow;
use crate::audit::AuditError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

/// The first wait after a failed commit; each failure doubles it, up to
/// [`MAX_BACKOFF`]: how long reads' rows may wait after the store is back
/// (a write tries at once).
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How long a shutdown keeps trying to commit rows the store has not taken
/// (after the server's own 5 s drain, within a pod's termination grace
/// period); what it cannot ship stays in the spool for the next start.
const SHUTDOWN_SHIPPING: Duration = Duration::from_secs(10);

/// Whether the store's last commit failed, as the writer found it: the
/// handles read it to say why a full spool refuses requests.
#[derive(Debug, Default)]
pub(super) struct Health {
    down: AtomicBool,
}

impl Health {
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }
}

/// What one commit carries besides its rows, which wait in the backlog.
#[derive(Default)]
struct Batch {
    intents: Vec<AuditRow>,
    forwarded: Vec<Forwarded>,
    intent_acks: Vec<Ack<bool>>,
    flushes: Vec<Ack<()>>,
    sweep: Option<Sweep>,
    stop: Option<Ack<()>>,
}

impl Batch {
    fn add(&mut self, msg: Msg, backlog: &mut Rows) {
        match msg {
            Msg::Row(row, ticket) => backlog.push(*row, ticket),
            Msg::Forwarded(record) => self.forwarded.push(record),
            Msg::Intent(row, ack) => {
                self.intents.push(*row);
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

    /// Nothing more may join (a sweep or stop closes the batch, and a
    /// backlog of a whole batch goes at once).
    fn closed(&self, backlog: &Rows, max: usize) -> bool {
        self.sweep.is_some() || self.stop.is_some() || backlog.len() + self.intents.len() >= max
    }
}

/// The loop's state between commits.
#[derive(Default)]
struct State {
    /// Rows not committed yet, in the order they came.
    backlog: Rows,
    /// The wait before the next try while commits fail.
    backoff: Option<Duration>,
    /// When commits began to fail.
    down_since: Option<Instant>,
    /// A shutdown asked: whom to answer, and until when to keep trying.
    stop: Option<(Ack<()>, Instant)>,
}

impl State {
    /// Note how the last commit went; its rows go back to the front if it
    /// failed.
    fn outcome(&mut self, committed: Result<(), (String, Rows)>, health: &Health) {
        match committed {
            Ok(()) => {
                if let Some(since) = self.down_since.take() {
                    tracing::warn!(down = ?since.elapsed(), waiting = self.backlog.len(), "audit store commits again: the rows that waited follow in order, and writes are accepted");
                }
                self.backoff = None;
                health.down.store(false, Ordering::Relaxed);
            }
            Err((error, rows)) => {
                self.backlog.put_front(rows);
                match self.down_since {
                    None => {
                        tracing::error!(%error, waiting = self.backlog.len(), "audit commit failed: rows wait in the spool and are tried again until the store commits; writes are refused meanwhile")
                    }
                    Some(_) => tracing::debug!(%error, waiting = self.backlog.len(), "audit commit failed again"),
                }
                self.down_since.get_or_insert_with(Instant::now);
                self.backoff = Some(self.backoff.map_or(FIRST_BACKOFF, |d| (d * 2).min(MAX_BACKOFF)));
                health.down.store(true, Ordering::Relaxed);
            }
        }
    }

    /// A shutdown may end now: everything is committed, or its time is up
    /// (what is left stays in the spool for the next start).
    fn may_stop(&self) -> bool {
        let Some((_, until)) = &self.stop else {
            return false;
        };
        let shipped = self.backoff.is_none() && self.backlog.is_empty();
        if !shipped && Instant::now() >= *until {
            tracing::warn!(
                rows = self.backlog.len(),
                "audit: shutting down with rows the store has not committed; they stay in the spool for the next start"
            );
            return true;
        }
        shipped
    }
}

pub(super) async fn run(
    storage: impl std::future::Future<Output = Storage>,
    mut rx: mpsc::Receiver<Msg>,
    settings: WriterSettings,
    metrics: WriterMetrics,
    health: std::sync::Arc<Health>,
    wake: std::sync::Arc<Notify>,
) {
    let mut storage = storage.await;
    let mut state = State::default();
    loop {
        let mut batch = Batch::default();
        let open = match state.backoff {
            Some(delay) => wait_out(&mut rx, &mut batch, &mut state, delay).await,
            None => next_batch(&mut rx, &mut batch, &mut state, settings, &wake).await,
        };
        if let Some(ack) = batch.stop.take() {
            state.stop.get_or_insert((ack, Instant::now() + SHUTDOWN_SHIPPING));
        }
        if !open && state.backlog.is_empty() && !batch.urgent() && batch.forwarded.is_empty() {
            return;
        }
        metrics.queue_depth.set(rx.len() as i64);
        let commit = Commit {
            forwarded: batch.forwarded,
            intents: batch.intents,
        };
        let rows = state.backlog.take_front(settings.max_batch);
        let committed;
        (storage, committed) = storage.commit(commit, rows, state.backoff.is_some(), &metrics).await;
        let ok = committed.is_ok();
        // Health first: whoever a refused write answers next finds it.
        state.outcome(committed, &health);
        for ack in batch.intent_acks {
            let _ = ack.send(ok);
        }
        for ack in batch.flushes {
            let _ = ack.send(());
        }
        if let Some(sweep) = batch.sweep {
            storage = match state.backoff {
                None => storage.sweep(sweep).await,
                Some(_) => {
                    let _ = sweep.2.send(Err(AuditError::StoreUnreachable.to_string()));
                    storage
                }
            };
        }
        if state.may_stop() {
            storage.close().await;
            if let Some((ack, _)) = state.stop.take() {
                let _ = ack.send(());
            }
            return;
        }
        if !open && state.backoff.is_some() {
            // Every handle is gone and the store does not commit: what waits
            // stays in the spool for the next start.
            return;
        }
    }
}

/// The next batch while the store commits: the first message to arrive
/// (unless rows already wait, or a shutdown hurries), then what [`gather`]
/// adds. `false` once every sender is gone.
async fn next_batch(
    rx: &mut mpsc::Receiver<Msg>,
    batch: &mut Batch,
    state: &mut State,
    settings: WriterSettings,
    wake: &Notify,
) -> bool {
    let hurry = state.stop.is_some();
    if state.backlog.is_empty() && !hurry {
        match rx.recv().await {
            Some(msg) => batch.add(msg, &mut state.backlog),
            None => return false,
        }
    }
    gather(rx, batch, &mut state.backlog, settings, hurry, wake).await
}

/// Add to `batch` what arrives within the window (or until someone waits).
/// Within the window the writer sleeps through rows and forwarded records,
/// which only join the queue: two of them a request each woke this task
/// (often on the other worker thread) only to move them to the backlog. It
/// wakes for someone waiting on the commit and for a half-full queue
/// ([`Notify`]), and at the window's end. `false` once every sender is
/// gone.
async fn gather(
    rx: &mut mpsc::Receiver<Msg>,
    batch: &mut Batch,
    backlog: &mut Rows,
    settings: WriterSettings,
    hurry: bool,
    wake: &Notify,
) -> bool {
    let deadline = Instant::now() + settings.window;
    loop {
        while !batch.closed(backlog, settings.max_batch) {
            match rx.try_recv() {
                Ok(msg) => batch.add(msg, backlog),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        }
        if hurry || batch.urgent() || batch.closed(backlog, settings.max_batch) || Instant::now() >= deadline {
            return true;
        }
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// While commits fail: wait `delay` (not past a shutdown's deadline),
/// taking every message meanwhile so the queue never fills; rows join the
/// backlog. A write cuts the wait short, with the writes queued beside it:
/// its intent's commit is the next try (a write must be on record before
/// it is forwarded, so it is refused if that fails, and goes through at
/// once when the store is back). A shutdown cuts it short too. `false`
/// once every sender is gone.
async fn wait_out(rx: &mut mpsc::Receiver<Msg>, batch: &mut Batch, state: &mut State, delay: Duration) -> bool {
    let mut until = Instant::now() + delay;
    if let Some((_, deadline)) = &state.stop {
        until = until.min(*deadline);
    }
    while !batch.urgent() {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(msg) => batch.add(msg, &mut state.backlog),
                None => {
                    tokio::time::sleep_until(until).await;
                    return false;
                }
            },
            () = tokio::time::sleep_until(until) => return true,
        }
    }
    while let Ok(msg) = rx.try_recv() {
        batch.add(msg, &mut state.backlog);
    }
    true
}
