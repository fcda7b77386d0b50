//! The storage interface of the audit. SQLite implements it today
//! ([`super::sqlite`]); a PostgreSQL store for several replicas fills the
//! same methods. Methods are blocking: the writer calls them from a blocking
//! thread, never from the request path.

use super::chain::{chained, Anchor, Break, Encoded, Link, Verifier};
use super::forwarded::Forwarded;
use super::query::Filter;
use super::row::{AuditRow, ChainedRow};
use super::AuditError;
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// Where an exporter writes rows a store hands it ([`AuditStore::export_shared`]);
/// an error leaves the shared cursor where it was.
pub type ExportWrite<'a> = &'a mut dyn FnMut(&[ChainedRow]) -> std::io::Result<()>;

/// Where audit rows are kept.
pub trait AuditStore: Send {
    /// In one durable transaction: record `intents` (writes about to be
    /// forwarded, whose outcome is not known yet), then append `rows` to the
    /// hash chain (hashing the JSON each carries), each replacing its
    /// intent. Returns each row's place in the chain, in order.
    fn commit_encoded(&mut self, intents: &[AuditRow], rows: &[Encoded]) -> Result<Vec<Link>, AuditError>;

    /// Let the request path's threads run between a long commit's
    /// statements while `waited_on` is zero (no one waits on a commit).
    /// A store whose commit is not CPU-bound keeps the default: nothing.
    fn yield_while_unwaited(&mut self, waited_on: Arc<AtomicUsize>) {
        let _ = waited_on;
    }

    /// [`commit_encoded`](Self::commit_encoded) for rows not serialised
    /// yet (an event's, recovery's, tests'); returns them as chained.
    fn commit(&mut self, intents: &[AuditRow], rows: &[AuditRow]) -> Result<Vec<ChainedRow>, AuditError> {
        let rows: Vec<Encoded> = rows.iter().cloned().map(Encoded::new).collect();
        let links = self.commit_encoded(intents, &rows)?;
        Ok(chained(links, rows.into_iter().map(Encoded::into_row)))
    }

    /// Keep `records` for the next [`commit`](Self::commit), which writes
    /// them in its transaction (and keeps them for the one after if it
    /// fails).
    fn forwarded(&mut self, records: Vec<Forwarded>);

    /// Turn intents left by a crash into rows whose outcome is unknown
    /// (code 0, reason `Unknown`); returns them as chained.
    fn recover(&mut self) -> Result<Vec<ChainedRow>, AuditError>;

    /// Rows matching `filter`, oldest first.
    fn query(&mut self, filter: &Filter) -> Result<Vec<ChainedRow>, AuditError>;

    /// Where the chain starts (after retention sweeps).
    fn anchor(&mut self) -> Result<Anchor, AuditError>;

    /// Where the chain ends: its last row (the anchor when it has none).
    fn head(&mut self) -> Result<Anchor, AuditError>;

    /// Up to `limit` rows after position `after_seq`, in chain order.
    fn chain_page(&mut self, after_seq: i64, limit: usize) -> Result<Vec<ChainedRow>, AuditError>;

    /// Remove up to `max_rows` of the oldest rows that ended before
    /// `cutoff`, recording the last one removed as the chain's anchor.
    /// Returns how many were removed.
    fn sweep(&mut self, cutoff: DateTime<Utc>, max_rows: usize) -> Result<usize, AuditError>;

    /// The export shared by every process appending to this chain, when
    /// the store keeps one (PostgreSQL, where replicas append to one
    /// chain): with `write`, hand it the rows after the shared cursor, in
    /// chain order, a page at most, and move the cursor past them, under a
    /// lock, so each row is exported by one replica (twice only if that one
    /// dies between writing and moving the cursor); returns how many. With
    /// `None`, only place the cursor at the chain's end if there is none
    /// yet. `None` back: no shared cursor (SQLite: one process, whose
    /// writer exports the whole chain itself).
    fn export_shared(&mut self, _write: Option<ExportWrite<'_>>) -> Option<Result<usize, AuditError>> {
        None
    }

    /// Where this process's own export stood when it last kept its place
    /// ([`AuditStore::keep_export_cursor`]), if the store keeps it (SQLite;
    /// PostgreSQL's export is shared instead).
    fn export_cursor(&mut self) -> Result<Option<i64>, AuditError> {
        Ok(None)
    }

    /// Keep the position of this process's own export: every row up to
    /// `seq` went to the sink. The next start exports from there, so rows
    /// other processes commit while it is down (the CLI's admin actions)
    /// are not skipped.
    fn keep_export_cursor(&mut self, _seq: i64) -> Result<(), AuditError> {
        Ok(())
    }

    /// Forget the position of this process's own export (a run without
    /// export: turned on again, it starts from the chain's end then).
    fn forget_export_cursor(&mut self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Which of `ids` already have their row in the chain (an intent is
    /// not a row, nor is the unknown outcome recovery gave an intent):
    /// what a crash's spool holds beyond them is shipped. A spool's row
    /// whose intent another replica recorded as unknown while this process
    /// was down is its real outcome, and follows that row in the chain.
    fn committed(&mut self, ids: &[String]) -> Result<HashSet<String>, AuditError> {
        let mut found = HashSet::new();
        for id in ids {
            let filter = Filter {
                id: Some(id.clone()),
                discovery: true,
                ..Filter::default()
            };
            if self.query(&filter)?.iter().any(|row| !is_recovered_unknown(&row.row)) {
                found.insert(id.clone());
            }
        }
        Ok(found)
    }
}

/// The reason of the row recovery writes for an intent a crash left
/// without an outcome (with code 0); no answered request's row has it.
pub const RECOVERED_REASON: &str = "Unknown";

/// Is `row` the unknown outcome recovery recorded for a crash's intent?
pub fn is_recovered_unknown(row: &AuditRow) -> bool {
    row.code == 0 && row.reason == RECOVERED_REASON
}

/// What `portcullis audit verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Rows whose links checked out.
    pub checked: u64,
    /// The first break, if any.
    pub broken: Option<Break>,
}

impl VerifyReport {
    /// `checked` rows, and no break.
    pub fn intact(checked: u64) -> VerifyReport {
        VerifyReport { checked, broken: None }
    }
}

/// Walk the whole chain from its anchor, a page at a time. A retention
/// sweep during the walk moves the anchor and removes rows ahead of it: a
/// break found then is the sweep's, and the walk starts again from the new
/// anchor, for as long as sweeps keep moving it (a sweep ends; a real break
/// is reported by the first walk during which none ran).
pub fn verify(store: &mut dyn AuditStore) -> Result<VerifyReport, AuditError> {
    loop {
        let anchor = store.anchor()?;
        let report = walk(store, anchor.clone())?;
        if report.broken.is_none() || store.anchor()? == anchor {
            return Ok(report);
        }
    }
}

fn walk(store: &mut dyn AuditStore, anchor: Anchor) -> Result<VerifyReport, AuditError> {
    const PAGE: usize = 5000;
    // Retention removes the rows up to the anchor in the same transaction
    // that moves it, so none is ever left at or before it: a kept row there
    // is an anchor moved by hand. (Read after the anchor: a sweep in
    // between only moves the rows on, and the walk is tried again.)
    if let Some(first) = store.chain_page(i64::MIN, 1)?.first() {
        if first.seq <= anchor.seq {
            return Ok(VerifyReport {
                checked: 0,
                broken: Some(Break::BeforeAnchor {
                    id: first.row.id.clone(),
                    seq: first.seq,
                    anchor: anchor.seq,
                }),
            });
        }
    }
    let mut after = anchor.seq;
    let mut verifier = Verifier::new(anchor);
    loop {
        let page = store.chain_page(after, PAGE)?;
        for row in &page {
            if let Err(broken) = verifier.check(row) {
                return Ok(VerifyReport {
                    checked: verifier.checked,
                    broken: Some(broken),
                });
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.seq,
            _ => return Ok(VerifyReport::intact(verifier.checked)),
        }
    }
}
