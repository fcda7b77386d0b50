//! Rows and forwarded records written several to a statement: SQLite's
//! work per statement (cursors opened on the table and each of its indexes,
//! the statement run and reset) is then paid once for many rows.

use super::{COLUMNS, COLUMN_COUNT};
use crate::audit::chain::{self, Anchor, Encoded, Link};
use crate::audit::forwarded::Forwarded;
use crate::audit::stamp::Stamp;
use rusqlite::{Statement, ToSql, Transaction};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Most rows in one statement: enough to share a statement's own work,
/// and few enough that SQLite's copies of their bound texts (some 18 a
/// row, held until the statement is reset) mostly fit the connection's
/// lookaside memory instead of going to malloc. With 8 rather than 32,
/// callgrind counted 2,200 fewer instructions a small GET (1.2%,
/// benches/RESULTS.md). Each size a statement is prepared for is kept in
/// the connection's statement cache, so the sizes are few: this, then
/// powers of two for what remains ([`piece`]).
const MOST: usize = 8;

/// The sizes, as powers of two: 1, 2, 4, … [`MOST`].
const SIZES: usize = MOST.trailing_zeros() as usize + 1;

/// How many of `left` rows the next statement takes.
fn piece(left: usize) -> usize {
    match left {
        0 => 0,
        n if n >= MOST => MOST,
        n => 1 << (usize::BITS - 1 - n.leading_zeros()),
    }
}

/// `head` followed by `rows` groups of `width` placeholders (built once for
/// each size).
fn sql(cache: &'static OnceLock<Vec<String>>, head: impl Fn() -> String, width: usize, rows: usize) -> &'static str {
    // No spaces: the statement cache hashes the text at each use.
    let all = cache.get_or_init(|| {
        let group = format!("({})", vec!["?"; width].join(","));
        (0..SIZES)
            .map(|size| format!("{} VALUES {}", head(), vec![group.as_str(); 1 << size].join(",")))
            .collect()
    });
    &all[rows.trailing_zeros() as usize]
}

/// Append `rows` to the chain after `prev` (which moves on), pushing each
/// one's place to `links`. Between statements, while no one waits on a
/// commit (`waited_on` is zero), the thread yields its core: a commit is a
/// burst of hashing and inserting (a core for some 13 ms every 100 ms at
/// half of the proxy's best rate), and a request's task woken meanwhile on
/// that core would otherwise wait for the scheduler to preempt the commit,
/// which the thread's nice value does not make prompt. A commit someone
/// waits on (a write's intent, a flush, rows waiting for room in the
/// writer's queue) keeps the thread's full share.
pub(super) fn rows(
    tx: &Transaction<'_>,
    prev: &mut Anchor,
    rows: &[Encoded],
    links: &mut Vec<Link>,
    waited_on: Option<&AtomicUsize>,
) -> rusqlite::Result<()> {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let mut left = rows;
    while !left.is_empty() {
        let (now, later) = left.split_at(piece(left.len()));
        // OR FAIL, not the default ABORT: a statement that may abort
        // half-way through its rows makes SQLite keep a journal of the
        // pages it changes, so it can undo them alone, and past 64 KiB
        // that journal is a temporary file, two pwrite(2) calls for each
        // page (two-thirds of the audit thread's writes). No row here can
        // break a constraint; if one ever did, the commit fails and its
        // whole transaction is rolled back, as with ABORT.
        let head = || format!("INSERT OR FAIL INTO audit (seq, prev_hash, hash, forwarded, {COLUMNS})");
        let mut insert = tx.prepare_cached(sql(&SQL, head, WIDTH, now.len()))?;
        for (i, row) in now.iter().enumerate() {
            let link = chain::next(prev, row);
            bind_row(&mut insert, i * WIDTH, &link, row)?;
            links.push(link);
        }
        insert.raw_execute()?;
        left = later;
        if !left.is_empty() && waited_on.is_some_and(|waited_on| waited_on.load(Ordering::Relaxed) == 0) {
            std::thread::yield_now();
        }
    }
    Ok(())
}

/// Record `records`; one already there stays.
pub(super) fn forwarded(tx: &Transaction<'_>, records: &[Forwarded]) -> rusqlite::Result<()> {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let mut left = records;
    while !left.is_empty() {
        let (now, later) = left.split_at(piece(left.len()));
        let head =
            || "INSERT OR IGNORE INTO audit_forwarded (id, cluster, kind, at, principal_kind, login)".to_string();
        let mut insert = tx.prepare_cached(sql(&SQL, head, 6, now.len()))?;
        for (i, record) in now.iter().enumerate() {
            let at = Stamp::micros(&record.at);
            let values: [&dyn ToSql; 6] = [
                &record.id,
                &record.cluster,
                &record.kind,
                &at.as_str(),
                &record.principal_kind,
                &record.login,
            ];
            for (j, value) in values.into_iter().enumerate() {
                insert.raw_bind_parameter(i * 6 + j + 1, value)?;
            }
        }
        insert.raw_execute()?;
        left = later;
    }
    Ok(())
}

/// Parameters of a row: seq, prev_hash, hash, forwarded, then [`COLUMNS`].
const WIDTH: usize = COLUMN_COUNT + 4;

/// Bind `link` and `row` to the INSERT's parameters after the first `at`,
/// in its order (seq, prev_hash, hash, forwarded, then [`COLUMNS`]).
fn bind_row(insert: &mut Statement<'_>, at: usize, link: &Link, encoded: &Encoded) -> rusqlite::Result<()> {
    let int = |n: u64| n.min(i64::MAX as u64) as i64;
    let row = encoded.row();
    let (started, ended) = (Stamp::micros(&row.started_at), Stamp::micros(&row.ended_at));
    let values: [&dyn ToSql; WIDTH] = [
        &link.seq,
        &link.prev_hash,
        &link.hash,
        &encoded.forwarded(),
        &row.id,
        &started.as_str(),
        &ended.as_str(),
        &row.cluster,
        &row.principal_kind,
        &row.login,
        &row.credential_id,
        &row.credential_prefix,
        &row.session,
        &row.tool,
        &row.client,
        &row.method,
        &row.path,
        &row.query,
        &row.verb,
        &row.api_group,
        &row.api_version,
        &row.resource,
        &row.subresource,
        &row.namespace,
        &row.name,
        &row.code,
        &row.reason,
        &row.refused,
        &int(row.bytes_in),
        &int(row.bytes_out),
        &int(row.duration_ms),
        &row.write,
        &row.discovery,
        &row.dry_run,
        &row.redacted,
        &row.truncated,
        &row.secret_revealed,
        &row.held,
        &row.approved,
        &row.via,
        &row.kind,
    ];
    for (i, value) in values.into_iter().enumerate() {
        insert.raw_bind_parameter(at + i + 1, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_cut_into_the_few_statement_sizes() {
        for n in 0..200 {
            let (mut left, mut pieces) = (n, Vec::new());
            while left > 0 {
                pieces.push(piece(left));
                left -= piece(left);
            }
            assert!(
                pieces.iter().all(|p| p.is_power_of_two() && *p <= MOST),
                "{n}: {pieces:?}"
            );
            assert_eq!(pieces.iter().sum::<usize>(), n);
        }
    }
}
