//! The spool: each finished request's row reaches the kernel before its
//! answer completes, so a crashed process loses no row of an answered
//! request.
//!
//! The request path appends the row as one JSON line (the row's own
//! encoding, as the export writes it) with one write(2) to the active
//! segment, a file opened `O_APPEND` in this process's slot of the spool
//! folder, and queues it for the writer as before. The writer commits rows
//! from its queue (it never reads the spool back while it runs), fsyncs the
//! segments once per commit, begins a new segment when the active one is
//! past [`SpoolSettings::segment_bytes`], and deletes a segment once every
//! row written to it is committed. At start, rows a crash left in the spool
//! are shipped to the store in their order, those already committed skipped
//! by audit id ([`recover`]), and their segments deleted.
//!
//! What a crash can lose: a process crash (SIGKILL, the OOM killer, a
//! panic) none, since the page cache keeps what was written; a machine crash
//! (power, kernel) the rows written since the spool's last fsync, at most
//! one commit window (100 ms) of answers, as the store's own group commit.
//!
//! The rows not committed yet are counted: past
//! [`SpoolSettings::max_bytes`], [`Spool::admit`] refuses new requests
//! before they are forwarded; past a hard cap above it, new requests
//! wait to be read until the store commits again.

mod recover;
mod slot;

pub use recover::{read_rows, ship};

use super::chain::Encoded;
use super::row::AuditRow;
use super::AuditError;
use slot::Slot;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Where the spool lives and how large it may grow.
#[derive(Debug, Clone)]
pub struct SpoolSettings {
    /// The spool's folder; each running process takes a slot in it.
    pub dir: PathBuf,
    /// Bytes of rows not committed yet past which requests are refused.
    pub max_bytes: u64,
    /// A segment past this size takes no more rows: the writer begins
    /// another, and deletes this one once its rows are committed.
    pub segment_bytes: u64,
}

/// The size at which the writer begins a new segment: small enough that
/// shipping a crash's leftovers checks few committed rows, large enough
/// that a new file is rare (one every few thousand rows).
pub const SEGMENT_BYTES: u64 = 1024 * 1024;

/// How far past [`SpoolSettings::max_bytes`] the spool may grow before new
/// requests wait to be read ([`Spool::relief`]): the bound again, and at
/// least this. Between the bound and the cap, requests are read and refused
/// with a 503, each still a row; a small bound (a test's) must still show
/// those refusals, so the margin never shrinks below 64 MiB.
pub const HARD_CAP_MARGIN: u64 = 64 * 1024 * 1024;

/// The spool of this process; cheap to clone.
#[derive(Clone)]
pub struct Spool(Arc<Shared>);

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spool({})", self.0.slot.dir.display())
    }
}

struct Shared {
    slot: Slot,
    max_bytes: u64,
    segment_bytes: u64,
    /// Where rows go; `None` once the writer has closed the spool (a row
    /// that ends later opens a segment of its own for the next start).
    active: Mutex<Option<Arc<Segment>>>,
    /// Segments that take no more rows, until their rows are committed.
    retired: Mutex<Vec<Arc<Segment>>>,
    /// The number of the next segment.
    next: AtomicU64,
    /// Bytes of rows appended and not committed yet.
    unshipped: AtomicU64,
    /// A write failed: requests are refused until a new segment is begun.
    broken: AtomicBool,
    /// Over the bound at the last look (to log the change, not each request).
    over: AtomicBool,
    /// Told whenever committed rows leave the spool, for requests waiting
    /// past the hard cap ([`Spool::relief`]).
    drained: tokio::sync::Notify,
    /// Segments a crash left, with the slots they are in, until shipped.
    leftovers: Mutex<Leftovers>,
}

#[derive(Default)]
struct Leftovers {
    segments: Vec<(PathBuf, u64)>,
    /// Slots of processes that are gone, held while their rows ship.
    orphans: Vec<Slot>,
}

/// One segment file.
struct Segment {
    path: PathBuf,
    file: File,
    /// Bytes appended.
    size: AtomicU64,
    /// Bytes known to be on disk.
    synced: AtomicU64,
    /// Rows appended (or being appended) and not committed yet.
    pending: AtomicU64,
}

/// A row's place in the spool: given back to [`Spool::shipped`] once the row
/// is committed. A ticket dropped instead (its row given up in memory)
/// keeps its segment, and its bytes counted, until the next start ships it.
#[derive(Debug)]
pub struct Ticket {
    segment: Arc<Segment>,
    bytes: u64,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Segment({})", self.path.display())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A row as its spool line: its JSON (which escapes every newline in its
/// text) and a newline, as [`Encoded::line`] holds it.
pub fn encode(row: &AuditRow) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(row)?;
    line.push(b'\n');
    Ok(line)
}

impl Spool {
    /// Take a slot in `settings.dir` (made if missing), note the segments
    /// that crashed processes left for the writer to ship first, and begin
    /// a segment.
    pub fn open(settings: &SpoolSettings) -> Result<Spool, AuditError> {
        let failed = |source: std::io::Error| AuditError::Spool(format!("{}: {source}", settings.dir.display()));
        let (slot, orphans) = slot::take_slots(&settings.dir).map_err(failed)?;
        let mut segments = Vec::new();
        for dir in std::iter::once(&slot.dir).chain(orphans.iter().map(|o| &o.dir)) {
            segments.extend(slot::segments(dir).map_err(failed)?);
        }
        let last = slot::segments(&slot.dir)
            .map_err(failed)?
            .iter()
            .filter_map(|(path, _)| slot::number(path))
            .max();
        let unshipped = segments.iter().map(|(_, size)| size).sum();
        let spool = Spool(Arc::new(Shared {
            slot,
            max_bytes: settings.max_bytes,
            segment_bytes: settings.segment_bytes.max(1),
            active: Mutex::new(None),
            retired: Mutex::new(Vec::new()),
            next: AtomicU64::new(last.map_or(0, |n| n + 1)),
            unshipped: AtomicU64::new(unshipped),
            drained: tokio::sync::Notify::new(),
            broken: AtomicBool::new(false),
            over: AtomicBool::new(false),
            leftovers: Mutex::new(Leftovers { segments, orphans }),
        }));
        *lock(&spool.0.active) = Some(spool.begin().map_err(failed)?);
        Ok(spool)
    }

    /// This process's folder in the spool.
    pub fn slot(&self) -> &Path {
        &self.0.slot.dir
    }

    /// Append `row`'s line with one write. `None` if it could not be
    /// written (the spool then refuses requests until the writer begins a
    /// new segment).
    pub fn append(&self, row: &Encoded) -> Option<Ticket> {
        let line = row.line();
        let segment = self.take_place()?;
        // One write(2): with O_APPEND the kernel places the line whole at
        // the end, however many threads append at once.
        match (&segment.file).write(line) {
            Ok(written) if written == line.len() => {
                let bytes = written as u64;
                segment.size.fetch_add(bytes, Ordering::Relaxed);
                self.0.unshipped.fetch_add(bytes, Ordering::Relaxed);
                Some(Ticket { segment, bytes })
            }
            outcome => {
                segment.pending.fetch_sub(1, Ordering::Relaxed);
                self.0.broken.store(true, Ordering::Relaxed);
                let error = outcome.map_or_else(|e| e.to_string(), |n| format!("wrote {n} of {} bytes", line.len()));
                tracing::error!(audit_id = %row.row().id, %error, "audit spool: a row could not be written; requests are refused until the spool is writable");
                None
            }
        }
    }

    /// The active segment, its pending count raised under the lock, so the
    /// writer never deletes a segment a row is being written to.
    fn take_place(&self) -> Option<Arc<Segment>> {
        let mut active = lock(&self.0.active);
        if active.is_none() {
            // Closed: a row that ends after shutdown began still reaches the
            // disk, for the next start to ship.
            *active = Some(self.begin().ok()?);
        }
        let segment = active.as_ref()?;
        segment.pending.fetch_add(1, Ordering::Relaxed);
        Some(segment.clone())
    }

    /// May a request be forwarded? Not while the rows waiting for the store
    /// are past the bound, nor while the spool cannot be written.
    pub fn admit(&self) -> Result<(), AuditError> {
        if self.0.broken.load(Ordering::Relaxed) {
            return Err(AuditError::Spool("a row could not be written to it".into()));
        }
        let waiting = self.0.unshipped.load(Ordering::Relaxed);
        let over = waiting > self.0.max_bytes;
        if over != self.0.over.swap(over, Ordering::Relaxed) {
            if over {
                tracing::warn!(
                    waiting,
                    bound = self.0.max_bytes,
                    "audit spool full: new requests are refused until the store commits"
                );
            } else {
                tracing::info!(waiting, "audit spool below its bound again: requests are served");
            }
        }
        match over {
            true => Err(AuditError::SpoolFull {
                waiting,
                bound: self.0.max_bytes,
                // The writer knows; it says so (`AuditWriter::room`).
                unreachable: false,
            }),
            false => Ok(()),
        }
    }

    /// Bytes of rows not committed yet.
    pub fn waiting(&self) -> u64 {
        self.0.unshipped.load(Ordering::Relaxed)
    }

    /// These rows are committed.
    pub fn shipped(&self, tickets: impl IntoIterator<Item = Ticket>) {
        for ticket in tickets {
            ticket.segment.pending.fetch_sub(1, Ordering::Relaxed);
            self.0.unshipped.fetch_sub(ticket.bytes, Ordering::Relaxed);
        }
        self.0.drained.notify_waiters();
    }

    /// Past the hard cap ([`HARD_CAP_MARGIN`])? Requests refused before they are
    /// forwarded are still rows: while the store is down, a flood of them
    /// would grow the spool, and the writer's memory, without end.
    pub fn overwhelmed(&self) -> bool {
        let cap = self.0.max_bytes.saturating_add(self.0.max_bytes.max(HARD_CAP_MARGIN));
        self.0.unshipped.load(Ordering::Relaxed) > cap
    }

    /// Wait until the spool is back under the hard cap. New requests wait
    /// here before they are read (backpressure, as a full listen queue
    /// gives): none is answered, forwarded or refused unrecorded, and a
    /// client that gives up leaves nothing behind.
    pub async fn relief(&self) {
        loop {
            let drained = self.0.drained.notified();
            if !self.overwhelmed() {
                return;
            }
            drained.await;
        }
    }

    /// Put what was appended on disk (the writer's grouped fsync, once per
    /// commit). Blocking.
    pub fn sync(&self) {
        let active = lock(&self.0.active).clone();
        let retired = lock(&self.0.retired).clone();
        for segment in active.iter().chain(retired.iter()) {
            let size = segment.size.load(Ordering::Relaxed);
            if segment.synced.load(Ordering::Relaxed) < size {
                match segment.file.sync_data() {
                    Ok(()) => segment.synced.store(size, Ordering::Relaxed),
                    Err(error) => tracing::warn!(%error, "audit spool: fsync failed"),
                }
            }
        }
    }

    /// Begin a new segment when the active one is full (or a write failed),
    /// and delete the segments whose rows are all committed. Blocking.
    pub fn maintain(&self) {
        let full = lock(&self.0.active)
            .as_ref()
            .is_some_and(|s| s.size.load(Ordering::Relaxed) >= self.0.segment_bytes);
        if full || self.0.broken.load(Ordering::Relaxed) {
            match self.begin() {
                Ok(segment) => {
                    self.retire(Some(segment));
                    self.0.broken.store(false, Ordering::Relaxed);
                }
                Err(error) => tracing::error!(%error, "audit spool: cannot begin a new segment"),
            }
        }
        self.delete_shipped();
    }

    /// Take no more rows in the active segment and delete every segment
    /// whose rows are committed: after the writer's last commit, the spool
    /// is left empty. Blocking.
    pub fn close(&self) {
        self.retire(None);
        self.delete_shipped();
    }

    /// Make `next` the active segment, retiring the one before.
    fn retire(&self, next: Option<Arc<Segment>>) {
        let before = std::mem::replace(&mut *lock(&self.0.active), next);
        lock(&self.0.retired).extend(before);
    }

    fn delete_shipped(&self) {
        lock(&self.0.retired).retain(|segment| {
            if segment.pending.load(Ordering::Relaxed) > 0 {
                return true;
            }
            match std::fs::remove_file(&segment.path) {
                Ok(()) => false,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
                Err(error) => {
                    tracing::warn!(%error, segment = %segment.path.display(), "audit spool: cannot delete a shipped segment");
                    true
                }
            }
        });
    }

    /// A new segment file in this process's slot.
    fn begin(&self) -> std::io::Result<Arc<Segment>> {
        let number = self.0.next.fetch_add(1, Ordering::Relaxed);
        let path = slot::segment_path(&self.0.slot.dir, number);
        let file = slot::create_segment(&path)?;
        Ok(Arc::new(Segment {
            path,
            file,
            size: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            pending: AtomicU64::new(0),
        }))
    }

    /// The segments a crash left, oldest first, for the writer to ship
    /// before anything else.
    pub fn leftovers(&self) -> Vec<PathBuf> {
        let leftovers = lock(&self.0.leftovers);
        leftovers.segments.iter().map(|(path, _)| path.clone()).collect()
    }

    /// Are rows a crash left still waiting to be shipped?
    pub fn has_leftovers(&self) -> bool {
        !lock(&self.0.leftovers).segments.is_empty()
    }

    /// The rows of leftover `path` are in the store: delete it.
    pub fn leftover_shipped(&self, path: &Path) {
        let mut leftovers = lock(&self.0.leftovers);
        if let Some(at) = leftovers.segments.iter().position(|(p, _)| p == path) {
            let (_, size) = leftovers.segments.remove(at);
            self.0.unshipped.fetch_sub(size, Ordering::Relaxed);
            self.0.drained.notify_waiters();
            if let Err(error) = std::fs::remove_file(path) {
                tracing::warn!(%error, segment = %path.display(), "audit spool: cannot delete a shipped segment");
            }
        }
    }

    /// Let go of the slots of processes that are gone, once their rows
    /// are shipped (those that could not be stay, for the next start).
    pub fn release_orphans(&self) {
        lock(&self.0.leftovers).orphans.clear();
    }
}

#[cfg(test)]
mod tests;
