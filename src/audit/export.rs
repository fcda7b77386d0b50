//! The export sink: every committed row as one JSON line, to stdout or to a
//! file that is rotated by size, for a SIEM to collect.
//!
//! Rows are exported after they are committed, in chain order and with
//! their hashes, so the copy outside portcullis can be checked against the
//! store. An export failure is logged and never holds up the audit: the
//! rows stay to be exported (read back from the store), and a failing sink
//! is tried again only after [`RETRY_AFTER`], not at every commit.
//!
//! The writer's [`Exporter`] exports the whole chain from where the last
//! run's export stood (kept in the store, at most a second behind; from
//! the chain's end when none was), not only its own commits: the rows
//! another process committed (the CLI's access request steps, approval
//! decisions, admin actions while the server was stopped) are exported
//! before the writer's next rows, and at its close. A run without export
//! forgets the position, so turning export on later starts from then. On PostgreSQL, where replicas
//! append to one chain, the replicas share one cursor in the store instead
//! ([`AuditStore::export_shared`]): after each commit, a replica exports
//! whatever rows follow it, its own or others', so each row reaches one
//! replica's sink, once.

use super::row::ChainedRow;
use super::store::AuditStore;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where exported rows go.
#[derive(Debug)]
pub struct ExportSink {
    target: Target,
    rotate_bytes: u64,
    keep: usize,
}

#[derive(Debug)]
enum Target {
    Stdout,
    File { path: PathBuf, file: File, size: u64 },
}

impl ExportSink {
    /// `spec` is `stdout` or a file path. A file grows to `rotate_bytes`,
    /// then becomes `<path>.1` (older ones shift up to `<path>.<keep>`).
    pub fn open(spec: &str, rotate_bytes: u64, keep: usize) -> io::Result<Self> {
        let target = if spec == "stdout" {
            Target::Stdout
        } else {
            let path = PathBuf::from(spec);
            let file = append_to(&path)?;
            let size = file.metadata()?.len();
            Target::File { path, file, size }
        };
        Ok(ExportSink {
            target,
            rotate_bytes: rotate_bytes.max(1),
            keep,
        })
    }

    /// Export `rows`, whole or not at all as far as a file can say: a
    /// failure is logged and returned, so that the rows are exported again
    /// (they are in the store) rather than skipped.
    pub fn write(&mut self, rows: &[ChainedRow]) -> io::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut lines = Vec::with_capacity(rows.len() * 512);
        for row in rows {
            // A row is plain strings, numbers and booleans: it serializes.
            if serde_json::to_writer(&mut lines, row).is_ok() {
                lines.push(b'\n');
            }
        }
        self.write_lines(&lines).inspect_err(|error| {
            tracing::warn!(%error, rows = rows.len(), "audit export failed for these rows (they are in the store; exported again at the next commit)");
        })
    }

    fn write_lines(&mut self, lines: &[u8]) -> io::Result<()> {
        if let Target::File { size, .. } = &self.target {
            if *size > 0 && *size + lines.len() as u64 > self.rotate_bytes {
                self.rotate()?;
            }
        }
        match &mut self.target {
            Target::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(lines)?;
                out.flush()
            }
            Target::File { file, size, .. } => {
                if let Err(error) = file.write_all(lines) {
                    // A write cut short leaves part of a line, which the
                    // next rows' would run on from: cut it off.
                    let _ = file.set_len(*size);
                    return Err(error);
                }
                *size += lines.len() as u64;
                Ok(())
            }
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        let Target::File { path, file, size } = &mut self.target else {
            return Ok(());
        };
        let numbered = |n: usize| PathBuf::from(format!("{}.{n}", path.display()));
        if self.keep == 0 {
            std::fs::remove_file(&*path)?;
        } else {
            for n in (1..self.keep).rev() {
                if numbered(n).exists() {
                    std::fs::rename(numbered(n), numbered(n + 1))?;
                }
            }
            std::fs::rename(&*path, numbered(1))?;
        }
        *file = append_to(path)?;
        *size = 0;
        Ok(())
    }
}

/// Rows read back per query when catching up with other processes' rows.
const PAGE: usize = 1000;

/// How long after a failed export the next is tried (a full disk is not
/// emptied between two commits, and each try reads rows back).
pub const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// The writer's side of the export: the sink, and the last chain position
/// written to it.
#[derive(Debug)]
pub struct Exporter {
    sink: Option<ExportSink>,
    last: Option<i64>,
    /// The store keeps the cursor, shared by the replicas.
    shared: bool,
    /// The shared cursor is known to exist.
    placed: bool,
    /// After a failure, no export is tried before this.
    paused_until: Option<std::time::Instant>,
    /// When the position was last kept in the store (at most once a
    /// second: a crash exports again at most that much, never less).
    kept_at: Option<std::time::Instant>,
}

/// How often the export's own position is kept in the store.
const KEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Exporter {
    /// Export to `sink` (nothing when `None`) the rows committed after
    /// where the last run's export stood, else after the chain's current
    /// end, in `store`.
    pub fn start(sink: Option<ExportSink>, store: &mut dyn AuditStore) -> Exporter {
        if sink.is_none() {
            // Export turned on again later starts from then, not from a
            // position weeks old.
            if let Err(error) = store.forget_export_cursor() {
                tracing::warn!(%error, "audit export: its old position could not be forgotten");
            }
        }
        if sink.is_some() {
            if let Some(placed) = store.export_shared(None) {
                if let Err(error) = &placed {
                    tracing::warn!(%error, "audit export: the shared cursor could not be placed; tried again at each commit");
                }
                return Exporter {
                    sink,
                    last: None,
                    shared: true,
                    placed: placed.is_ok(),
                    paused_until: None,
                    kept_at: None,
                };
            }
        }
        // Where the last run's export stood, else the chain's end.
        let kept = match sink {
            Some(_) => store.export_cursor().unwrap_or_else(|error| {
                tracing::warn!(%error, "audit export: where the last export stood could not be read; exporting from the chain's end");
                None
            }),
            None => None,
        };
        let last = match (&sink, kept) {
            (Some(_), Some(kept)) => Ok(kept),
            (Some(_), None) => store.head().map(|head| head.seq).map_err(|error| {
                tracing::warn!(%error, "audit export: the chain's end could not be read; rows of other processes are exported from the next commit on");
            }),
            (None, _) => Err(()),
        };
        Exporter {
            sink,
            last: last.ok(),
            shared: false,
            placed: false,
            paused_until: None,
            kept_at: None,
        }
    }

    /// Export `committed` (one commit's rows, in chain order), after any
    /// rows committed before them by another process.
    pub fn committed(&mut self, store: &mut dyn AuditStore, committed: &[ChainedRow]) {
        let (Some(first), Some(last)) = (committed.first(), committed.last()) else {
            return;
        };
        if self.sink.is_none() {
            return;
        }
        if self.paused_until.is_some_and(|until| std::time::Instant::now() < until) {
            // Read back from the store once the pause is over.
            if !self.shared {
                self.left_from(first.seq);
            }
            return;
        }
        if self.shared {
            return self.shared_turns(store);
        }
        if self.last.is_some_and(|seen| first.seq > seen + 1) {
            self.others(store, Some(first.seq));
            if self.last.is_some_and(|seen| first.seq > seen + 1) {
                // Rows before these are still to go: these follow them, at
                // the next commit, read back from the store.
                return;
            }
        }
        if let Some(sink) = self.sink.as_mut() {
            if sink.write(committed).is_err() {
                // Read back from the store after the pause, after the rows
                // before them.
                self.left_from(first.seq);
                self.pause();
                return;
            }
        }
        self.last = Some(last.seq);
        self.keep(store, false);
    }

    /// Keep the export's position in the store, at most once a second
    /// unless `now` (at close).
    fn keep(&mut self, store: &mut dyn AuditStore, now: bool) {
        let Some(last) = self.last else { return };
        if !now && self.kept_at.is_some_and(|at| at.elapsed() < KEEP_EVERY) {
            return;
        }
        match store.keep_export_cursor(last) {
            Ok(()) => self.kept_at = Some(std::time::Instant::now()),
            Err(error) => {
                tracing::warn!(%error, "audit export: its position could not be kept; a restart exports again from the last one kept")
            }
        }
    }

    /// The rows from `seq` on are still to be exported (read back from the
    /// store): the position goes back before them, never forward.
    fn left_from(&mut self, seq: i64) {
        self.last = Some(self.last.map_or(seq - 1, |seen| seen.min(seq - 1)));
    }

    fn pause(&mut self) {
        self.paused_until = Some(std::time::Instant::now() + RETRY_AFTER);
    }

    /// Export to `sink` from now on, at once (tests mend a failing sink so).
    #[cfg(test)]
    pub(crate) fn replace_sink(&mut self, sink: ExportSink) {
        self.sink = Some(sink);
        self.paused_until = None;
    }

    /// Whether a failure paused the export.
    #[cfg(test)]
    pub(crate) fn paused(&self) -> bool {
        self.paused_until.is_some()
    }

    /// Export every row committed since the last one exported (at close).
    pub fn catch_up(&mut self, store: &mut dyn AuditStore) {
        match (self.sink.is_some(), self.shared) {
            (false, _) => {}
            (true, true) => self.shared_turns(store),
            (true, false) => {
                self.others(store, None);
                self.keep(store, true);
            }
        }
    }

    /// Export what follows the shared cursor, page after page.
    fn shared_turns(&mut self, store: &mut dyn AuditStore) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        // A cursor not placed at start (the store was down) is placed now:
        // exporting starts from the chain's end at that moment.
        if !self.placed {
            if let Some(Err(error)) = store.export_shared(None) {
                tracing::warn!(%error, "audit export: the shared cursor could not be placed; tried again at the next commit");
                return;
            }
            self.placed = true;
        }
        loop {
            match store.export_shared(Some(&mut |rows: &[ChainedRow]| sink.write(rows))) {
                Some(Ok(n)) if n >= PAGE => continue,
                Some(Err(error)) => {
                    tracing::warn!(%error, "audit export: rows could not be read or written for export; tried again after a pause");
                    self.pause();
                }
                _ => {}
            }
            return;
        }
    }

    /// Export the rows after the last exported one and before `before`.
    fn others(&mut self, store: &mut dyn AuditStore, before: Option<i64>) {
        let (Some(sink), Some(mut after)) = (self.sink.as_mut(), self.last) else {
            return;
        };
        loop {
            let page = match store.chain_page(after, PAGE) {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, "audit export: rows committed by another process could not be read");
                    return;
                }
            };
            let full = page.len() == PAGE;
            let rows: Vec<ChainedRow> = page
                .into_iter()
                .take_while(|row| before.is_none_or(|before| row.seq < before))
                .collect();
            let Some(last) = rows.last() else {
                return;
            };
            if sink.write(&rows).is_err() {
                break;
            }
            after = last.seq;
            self.last = Some(after);
            if !(full && rows.len() == PAGE) {
                return;
            }
        }
        self.pause();
    }
}

/// The export file, made readable by its owner and group only, in a
/// directory made the same way (rows name people and what they did, as
/// the spool's do; a log shipper reads them through the group). A file or
/// directory already there keeps the mode it has.
fn append_to(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o750).create(dir)?;
    }
    OpenOptions::new().create(true).append(true).mode(0o640).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain::{append, Anchor};
    use crate::audit::row::AuditRow;

    /// An export file made here is not readable by every user of the
    /// host, nor is a directory made for it.
    #[test]
    fn an_export_file_and_its_directory_are_made_for_their_owner_and_group() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("made").join("audit.jsonl");
        drop(append_to(&path).unwrap());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path) & 0o007, 0, "{:o}", mode(&path));
        assert_eq!(mode(path.parent().unwrap()) & 0o007, 0);
    }

    /// The rows of the export file at `path`, one JSON line each.
    fn exported_rows(path: &Path) -> Vec<ChainedRow> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn rows(n: usize) -> Vec<ChainedRow> {
        (0..n)
            .map(|_| {
                append(
                    &Anchor::default(),
                    AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now()),
                )
            })
            .collect()
    }

    #[test]
    fn every_row_is_one_json_line_with_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut sink = ExportSink::open(path.to_str().unwrap(), 1 << 20, 3).unwrap();
        let written = rows(3);
        sink.write(&written).unwrap();
        let lines = exported_rows(&path);
        assert_eq!(lines, written);
    }

    #[test]
    fn rows_the_sink_failed_are_exported_at_the_next_commit_in_chain_order() {
        use crate::audit::sqlite::SqliteAuditStore;
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteAuditStore::open(&dir.path().join("p.db")).unwrap();
        let row = || AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now());
        // A disk that is full.
        let full = ExportSink::open("/dev/full", 1 << 20, 1).unwrap();
        let mut exporter = Exporter::start(Some(full), &mut store);
        let first = store.commit(&[], &[row(), row()]).unwrap();
        exporter.committed(&mut store, &first);
        assert!(exporter.paused(), "a failed sink is not tried at every commit");
        let second = store.commit(&[], &[row()]).unwrap();
        exporter.committed(&mut store, &second);
        // The disk has room again.
        let path = dir.path().join("audit.jsonl");
        exporter.replace_sink(ExportSink::open(path.to_str().unwrap(), 1 << 20, 1).unwrap());
        let third = store.commit(&[], &[row()]).unwrap();
        exporter.committed(&mut store, &third);
        let exported = exported_rows(&path);
        let committed: Vec<ChainedRow> = [first, second, third].concat();
        assert_eq!(exported, committed, "every row once, in chain order");
    }

    /// SQLite has one process exporting, but others append to its chain
    /// (the CLI's admin actions, run while the server is stopped): the
    /// next start exports from where the last one stood, not from the
    /// chain's end then.
    #[test]
    fn rows_committed_while_the_exporting_process_was_down_are_exported_at_its_next_start() {
        use crate::audit::sqlite::SqliteAuditStore;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("p.db");
        let path = dir.path().join("audit.jsonl");
        let sink = || ExportSink::open(path.to_str().unwrap(), 1 << 20, 1).unwrap();
        let row = || AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now());
        let mut store = SqliteAuditStore::open(&db).unwrap();
        let mut exporter = Exporter::start(Some(sink()), &mut store);
        let first = store.commit(&[], &[row()]).unwrap();
        exporter.committed(&mut store, &first);
        exporter.catch_up(&mut store);
        drop((exporter, store));
        // The server is down; `portcullis admin …` commits its row.
        let mut cli = SqliteAuditStore::open(&db).unwrap();
        let offline = cli.commit(&[], &[row()]).unwrap();
        drop(cli);
        let mut store = SqliteAuditStore::open(&db).unwrap();
        let mut exporter = Exporter::start(Some(sink()), &mut store);
        let next = store.commit(&[], &[row()]).unwrap();
        exporter.committed(&mut store, &next);
        let exported = exported_rows(&path);
        assert_eq!(
            exported,
            [first, offline, next].concat(),
            "every row once, in chain order"
        );
        drop((exporter, store));

        // A run without export forgets the position: export turned on
        // again starts from then, not with the rows made meanwhile.
        let mut store = SqliteAuditStore::open(&db).unwrap();
        drop(Exporter::start(None, &mut store));
        let unexported = store.commit(&[], &[row()]).unwrap();
        drop(store);
        std::fs::remove_file(&path).unwrap();
        let mut store = SqliteAuditStore::open(&db).unwrap();
        let mut exporter = Exporter::start(Some(sink()), &mut store);
        let later = store.commit(&[], &[row()]).unwrap();
        exporter.committed(&mut store, &later);
        let exported = exported_rows(&path);
        assert_eq!(exported, later, "not {unexported:?}");
    }

    #[test]
    fn a_full_file_is_rotated_and_old_ones_beyond_keep_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut sink = ExportSink::open(path.to_str().unwrap(), 1000, 2).unwrap();
        for _ in 0..6 {
            sink.write(&rows(1)).unwrap();
        }
        let rotated = |n: usize| PathBuf::from(format!("{}.{n}", path.display()));
        assert!(path.exists() && rotated(1).exists() && rotated(2).exists());
        assert!(!rotated(3).exists());
        assert!(std::fs::metadata(&path).unwrap().len() <= 1000);
        assert_eq!(std::fs::read_to_string(rotated(1)).unwrap().lines().count(), 1);
    }
}
