//! Slots: each running process appends to a folder of the spool that it
//! alone holds, so several processes sharing a data folder (replicas of one
//! store, a restart beside a process still draining) never ship or delete
//! each other's rows, and a slot whose process died is taken, and shipped,
//! by the next one to start.
//!
//! A slot is held with an exclusive SQLite lock on its `owner` file: the
//! kernel releases it when the process ends however it ends (SIGKILL
//! included), and SQLite makes it exclusive between connections of one
//! process too. (`File::try_lock` would do, but needs Rust 1.89; the
//! workspace builds with 1.88 and forbids unsafe code.)

use rusqlite::{Connection, ErrorCode};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A slot this process holds until it is dropped.
pub(super) struct Slot {
    /// The slot's folder.
    pub dir: PathBuf,
    /// Holds the lock; never used otherwise.
    _owner: Mutex<Connection>,
}

/// The file holding a slot's lock.
const OWNER: &str = "owner";
/// What a segment's name ends with.
const SEGMENT: &str = ".spool";

impl Slot {
    /// Take the slot at `dir`, making it if missing; `None` while another
    /// process (or another spool of this one) holds it.
    fn take(dir: &Path) -> io::Result<Option<Slot>> {
        private_dir(dir)?;
        let sqlite = |e: rusqlite::Error| io::Error::other(format!("{}: {e}", dir.join(OWNER).display()));
        let conn = Connection::open(dir.join(OWNER)).map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::ZERO).map_err(sqlite)?;
        // In EXCLUSIVE locking mode the lock a write takes is kept until the
        // connection closes.
        let held = conn
            .pragma_update(None, "locking_mode", "EXCLUSIVE")
            .and_then(|()| {
                conn.execute_batch(&format!(
                    "BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS owner (pid INTEGER); DELETE FROM owner; INSERT INTO owner VALUES ({}); COMMIT;",
                    std::process::id()
                ))
            });
        match held {
            Ok(()) => Ok(Some(Slot {
                dir: dir.to_path_buf(),
                _owner: Mutex::new(conn),
            })),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
            {
                Ok(None)
            }
            Err(e) => Err(sqlite(e)),
        }
    }
}

/// Take the first free slot of the spool at `root` (a new one when all are
/// held), and the free slots beside it that hold segments: their processes
/// are gone, and their rows are to be shipped.
pub(super) fn take_slots(root: &Path) -> io::Result<(Slot, Vec<Slot>)> {
    private_dir(root)?;
    let mut numbers: Vec<u64> = std::fs::read_dir(root)?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.strip_prefix("slot-")?.parse().ok())
        .collect();
    numbers.sort_unstable();
    let (mut own, mut orphans) = (None, Vec::new());
    for &n in &numbers {
        let Some(slot) = Slot::take(&slot_dir(root, n))? else {
            continue;
        };
        if own.is_none() {
            own = Some(slot);
        } else if !segments(&slot.dir)?.is_empty() {
            orphans.push(slot);
        }
    }
    let own = match own {
        Some(own) => own,
        None => {
            let n = numbers.last().map_or(0, |n| n + 1);
            Slot::take(&slot_dir(root, n))?
                .ok_or_else(|| io::Error::other(format!("spool slot {n} was taken while this process made it")))?
        }
    };
    Ok((own, orphans))
}

fn slot_dir(root: &Path, n: u64) -> PathBuf {
    root.join(format!("slot-{n}"))
}

/// The folder's segments, oldest first, with their sizes.
pub(super) fn segments(dir: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if number(&path).is_some() {
            found.push((path, entry.metadata()?.len()));
        }
    }
    found.sort();
    Ok(found)
}

/// A segment's number, from its name (fixed width, so name order is
/// number order); `None` for any other file.
pub(super) fn number(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.strip_suffix(SEGMENT)?.parse().ok()
}

/// Where segment `number` of the slot at `dir` lives.
pub(super) fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}{SEGMENT}"))
}

/// Create a segment for appending, readable by this user only (rows name
/// people and what they did), its name on disk before a row goes in.
pub(super) fn create_segment(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(file)
}

fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}
