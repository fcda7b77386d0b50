//! Rows and forwarded records written several to a statement: SQLite's
//! work per statement (cursors opened on the table and each of its indexes,
//! the statement run and reset) is then paid once for many rows.

use super::raw::{Param, Statements};
use super::{Stamp, COLUMNS, COLUMN_COUNT};
use crate::audit::chain::{self, Anchor, Encoded, Link};
use crate::audit::forwarded::Forwarded;
use crate::audit::row::AuditRow;
use rusqlite::Transaction;
use std::sync::OnceLock;

/// Most rows in one statement. Each size a statement is prepared for is
/// kept (in [`Statements`]), so the sizes are few: this, then powers of two
/// for what remains ([`piece`]).
const MOST: usize = 32;

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
/// each size; [`Statements`] knows a statement by its text's address).
fn sql(cache: &'static OnceLock<Vec<String>>, head: impl Fn() -> String, width: usize, rows: usize) -> &'static str {
    let all = cache.get_or_init(|| {
        let group = format!("({})", vec!["?"; width].join(","));
        (0..SIZES)
            .map(|size| format!("{} VALUES {}", head(), vec![group.as_str(); 1 << size].join(",")))
            .collect()
    });
    &all[rows.trailing_zeros() as usize]
}

/// Append `rows` to the chain after `prev` (which moves on), pushing each
/// one's place to `links`.
pub(super) fn rows(
    tx: &Transaction<'_>,
    statements: &mut Statements,
    prev: &mut Anchor,
    rows: &[Encoded],
    links: &mut Vec<Link>,
) -> rusqlite::Result<()> {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    // The texts a statement binds live until it has run.
    let mut stamps = Vec::with_capacity(piece(rows.len()));
    let mut left = rows;
    while !left.is_empty() {
        let (now, later) = left.split_at(piece(left.len()));
        let first = links.len();
        links.extend(now.iter().map(|row| chain::next(prev, row)));
        stamps.clear();
        stamps.extend(
            now.iter()
                .map(|row| [Stamp::of(&row.row().started_at), Stamp::of(&row.row().ended_at)]),
        );
        let head = || format!("INSERT INTO audit (seq, prev_hash, hash, {COLUMNS})");
        let mut insert = statements.run(tx, sql(&SQL, head, COLUMN_COUNT + 3, now.len()))?;
        for ((link, row), stamps) in links[first..].iter().zip(now).zip(&stamps) {
            insert.bind(row_values(link, row.row(), stamps))?;
        }
        insert.execute()?;
        left = later;
    }
    Ok(())
}

/// Record `records`; one already there stays.
pub(super) fn forwarded(
    tx: &Transaction<'_>,
    statements: &mut Statements,
    records: &[Forwarded],
) -> rusqlite::Result<()> {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let mut stamps = Vec::with_capacity(piece(records.len()));
    let mut left = records;
    while !left.is_empty() {
        let (now, later) = left.split_at(piece(left.len()));
        stamps.clear();
        stamps.extend(now.iter().map(|record| Stamp::of(&record.at)));
        let head = || "INSERT OR IGNORE INTO audit_forwarded (id, cluster, kind, at)".to_string();
        let mut insert = statements.run(tx, sql(&SQL, head, 4, now.len()))?;
        for (record, at) in now.iter().zip(&stamps) {
            use Param::Text;
            insert.bind([
                Text(&record.id),
                Text(&record.cluster),
                Text(record.kind),
                Text(at.as_str()),
            ])?;
        }
        insert.execute()?;
        left = later;
    }
    Ok(())
}

/// `link` and `row` as the INSERT's parameters, in its order (seq,
/// prev_hash, hash, then [`COLUMNS`]), typed as rusqlite binds them: bools
/// and the code as integers, counters clamped to `i64::MAX`.
fn row_values<'v>(
    link: &'v Link,
    row: &'v AuditRow,
    [started, ended]: &'v [Stamp; 2],
) -> [Param<'v>; COLUMN_COUNT + 3] {
    use Param::{Int, Text};
    let int = |n: u64| Int(n.min(i64::MAX as u64) as i64);
    let bool = |b: bool| Int(b.into());
    [
        Int(link.seq),
        Text(&link.prev_hash),
        Text(&link.hash),
        Text(&row.id),
        Text(started.as_str()),
        Text(ended.as_str()),
        Text(&row.cluster),
        Text(&row.principal_kind),
        Text(&row.login),
        Text(&row.credential_id),
        Text(&row.credential_prefix),
        Text(&row.session),
        Text(&row.tool),
        Text(&row.client),
        Text(&row.method),
        Text(&row.path),
        Text(&row.query),
        Text(&row.verb),
        Text(&row.api_group),
        Text(&row.api_version),
        Text(&row.resource),
        Text(&row.subresource),
        Text(&row.namespace),
        Text(&row.name),
        Int(row.code.into()),
        Text(&row.reason),
        Text(&row.refused),
        int(row.bytes_in),
        int(row.bytes_out),
        int(row.duration_ms),
        bool(row.write),
        bool(row.discovery),
        bool(row.dry_run),
        bool(row.redacted),
        bool(row.truncated),
        bool(row.secret_revealed),
        bool(row.held),
        bool(row.approved),
        Text(&row.via),
        Text(&row.kind),
    ]
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
