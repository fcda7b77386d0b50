//! Shipping what a crash left in the spool: a segment's rows, in the order
//! they were written, to the store, skipping those it already committed.

use crate::audit::chain::{self, Encoded};
use crate::audit::row::{AuditRow, ChainedRow};
use crate::audit::store::AuditStore;
use crate::audit::AuditError;
use std::collections::HashSet;
use std::path::Path;

/// Rows checked and committed at once.
const BATCH: usize = 1000;

/// Where every row's line begins. A JSON string escapes its quotes, so
/// these bytes cannot occur inside a row's text.
pub(super) const ROW_START: &[u8] = b"{\"id\":\"";

/// The rows of a segment's `bytes`, in order, each id once. A line the
/// crash cut short (its write never returned, so its answer never
/// completed) is skipped; a row appended right after such a line, on the
/// same line, is still found.
pub fn read_rows(bytes: &[u8]) -> Vec<AuditRow> {
    let mut seen = HashSet::new();
    let mut rows = Vec::new();
    for line in complete_lines(bytes)
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
    {
        let Some(row) = parse(line) else {
            tracing::warn!(bytes = line.len(), "audit spool: an unreadable line is skipped");
            continue;
        };
        if seen.insert(row.id.clone()) {
            rows.push(row);
        }
    }
    rows
}

fn parse(line: &[u8]) -> Option<AuditRow> {
    if let Ok(row) = serde_json::from_slice::<AuditRow>(line) {
        return Some(row);
    }
    let last = line.windows(ROW_START.len()).rposition(|w| w == ROW_START)?;
    serde_json::from_slice(&line[last..]).ok()
}

/// `bytes` up to its last newline: a last line without one was cut.
fn complete_lines(bytes: &[u8]) -> &[u8] {
    match bytes.iter().rposition(|b| *b == b'\n') {
        Some(end) => &bytes[..=end],
        None => &[],
    }
}

/// Commit the rows of the segment at `path` that `store` does not hold
/// yet, in their order; returns how many, and the rows as chained.
pub fn ship(path: &Path, store: &mut dyn AuditStore) -> Result<(usize, Vec<ChainedRow>), AuditError> {
    let bytes = std::fs::read(path).map_err(|e| AuditError::Spool(format!("{}: {e}", path.display())))?;
    let mut rows = read_rows(&bytes).into_iter();
    let mut chained = Vec::new();
    loop {
        let batch: Vec<AuditRow> = rows.by_ref().take(BATCH).collect();
        if batch.is_empty() {
            return Ok((chained.len(), chained));
        }
        let ids: Vec<String> = batch.iter().map(|row| row.id.clone()).collect();
        let committed = store.committed(&ids)?;
        // Serialised again rather than hashing the line as read: a line an
        // older version wrote may differ from this version's JSON of the
        // row it reads as, and the chain hashes what verification will
        // serialise.
        let fresh: Vec<Encoded> = batch
            .into_iter()
            .filter(|row| !committed.contains(&row.id))
            .map(Encoded::recovered)
            .collect();
        if !fresh.is_empty() {
            let links = store.commit_encoded(&[], &fresh)?;
            chained.extend(chain::chained(links, fresh.into_iter().map(Encoded::into_row)));
        }
    }
}
