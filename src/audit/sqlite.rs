//! The audit in the embedded SQLite database (tables from migration
//! `0002_audit.sql`).
//!
//! The writer has a connection of its own with `synchronous = FULL`: every
//! commit is on disk when it returns, and batching (see `audit::writer`)
//! keeps that to one fsync per commit window rather than one per request.
//! WAL mode lets the CLI and the admin endpoint read while it writes.

use super::chain::{self, Anchor, Encoded, Link};
use super::forwarded::Forwarded;
use super::query::{Condition, Filter, Outcome};
use super::row::{AuditRow, ChainedRow};
use super::stamp::Stamp;
use super::store::{AuditStore, RECOVERED_REASON};
use super::AuditError;
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, TransactionBehavior};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// The audit tables of a SQLite database.
pub struct SqliteAuditStore {
    conn: Connection,
    /// Ids in `audit_intents`: only their finished rows need the intent
    /// deleted, so a read's row costs no extra statement.
    intents: HashSet<String>,
    /// The intents there were when the store was opened: what a crash left,
    /// all that [`AuditStore::recover`] may record as unknown (the intents
    /// of this process's writes in flight are not).
    left_by_a_crash: HashSet<String>,
    /// Forwarded records for the next commit.
    forwarded: Vec<Forwarded>,
    /// How many wait on a commit ([`AuditStore::yield_while_unwaited`]).
    waited_on: Option<Arc<AtomicUsize>>,
    /// The last row this store committed: the chain's head is never
    /// behind it, unless rows were deleted from its end.
    committed_seq: i64,
}

impl std::fmt::Debug for SqliteAuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteAuditStore")
    }
}

/// The row's columns, in [`AuditRow`] field order (the PostgreSQL store's
/// too).
pub(super) const COLUMNS: &str = "\"id\", \"started_at\", \"ended_at\", \"cluster\", \"principal_kind\", \"login\", \"credential_id\", \"credential_prefix\", \"session\", \"tool\", \"client\", \"method\", \"path\", \"query\", \"verb\", \"api_group\", \"api_version\", \"resource\", \"subresource\", \"namespace\", \"name\", \"code\", \"reason\", \"refused\", \"bytes_in\", \"bytes_out\", \"duration_ms\", \"is_write\", \"discovery\", \"dry_run\", \"redacted\", \"truncated\", \"secret_revealed\", \"held\", \"approved\", \"via\", \"kind\"";
pub(super) const COLUMN_COUNT: usize = 37;

impl SqliteAuditStore {
    /// Open the database at `path` (migrating it if needed).
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let conn = Connection::open(path)?;
        // First: switching to WAL takes a lock, and without a busy timeout
        // a second connection opening while the first writes fails at once.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        // A statement for each size of multi-row INSERT (see `insert`),
        // besides the rest.
        conn.set_prepared_statement_cache_capacity(32);
        crate::store::migrate(&conn).map_err(|e| AuditError::Store(e.to_string()))?;
        let intents: HashSet<String> = {
            let mut stmt = conn.prepare("SELECT id FROM audit_intents")?;
            let ids = stmt.query_map([], |r| r.get(0))?;
            ids.collect::<Result<_, _>>()?
        };
        Ok(SqliteAuditStore {
            conn,
            left_by_a_crash: intents.clone(),
            intents,
            forwarded: Vec::new(),
            waited_on: None,
            committed_seq: 0,
        })
    }

    fn last(conn: &Connection) -> Result<Anchor, AuditError> {
        let last = conn
            .query_row("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", [], |r| {
                Ok(Anchor {
                    seq: r.get(0)?,
                    hash: r.get(1)?,
                })
            })
            .optional()?;
        match last {
            Some(last) => Ok(last),
            None => anchor(conn),
        }
    }

    fn select(&mut self, sql_tail: &str, args: Vec<Value>) -> Result<Vec<ChainedRow>, AuditError> {
        let sql = format!("SELECT seq, prev_hash, hash, {COLUMNS} FROM audit {sql_tail}");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args), chained_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl AuditStore for SqliteAuditStore {
    fn commit_encoded(&mut self, intents: &[AuditRow], rows: &[Encoded]) -> Result<Vec<Link>, AuditError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut links = Vec::with_capacity(rows.len());
        {
            insert::forwarded(&tx, &self.forwarded)?;
            let mut intent = tx.prepare_cached("INSERT OR REPLACE INTO audit_intents (id, row) VALUES (?1, ?2)")?;
            for row in intents {
                intent.execute(params![
                    row.id,
                    serde_json::to_string(row).map_err(|e| AuditError::Store(e.to_string()))?
                ])?;
            }
            let mut prev = Self::last(&tx)?;
            // With rows only, as on PostgreSQL: an intent committed alone
            // moves no head, and the alert goes before the rows it explains.
            if prev.seq < self.committed_seq && !rows.is_empty() {
                let alert = Encoded::new(super::bypass::cut_short_row(prev.seq, self.committed_seq));
                insert::rows(&tx, &mut prev, std::slice::from_ref(&alert), &mut Vec::new(), None)?;
            }
            insert::rows(&tx, &mut prev, rows, &mut links, self.waited_on.as_deref())?;
            let mut settle = tx.prepare_cached("DELETE FROM audit_intents WHERE id = ?1")?;
            let fresh: HashSet<&str> = intents.iter().map(|row| row.id.as_str()).collect();
            for row in rows.iter().map(Encoded::row) {
                if self.intents.contains(&row.id) || fresh.contains(row.id.as_str()) {
                    settle.execute(params![row.id])?;
                }
            }
        }
        tx.commit()?;
        if let Some(last) = links.last() {
            self.committed_seq = last.seq;
        }
        self.forwarded.clear();
        self.intents.extend(intents.iter().map(|row| row.id.clone()));
        // Reads have no intent: most commits hash no id here.
        if !self.intents.is_empty() {
            for row in rows {
                self.intents.remove(&row.row().id);
            }
        }
        Ok(links)
    }

    fn yield_while_unwaited(&mut self, waited_on: Arc<AtomicUsize>) {
        self.waited_on = Some(waited_on);
    }

    fn forwarded(&mut self, records: Vec<Forwarded>) {
        self.forwarded.extend(records);
    }

    fn recover(&mut self) -> Result<Vec<ChainedRow>, AuditError> {
        let left: Vec<(String, String)> = {
            let mut stmt = self.conn.prepare("SELECT id, row FROM audit_intents ORDER BY id")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let now = Utc::now();
        let mut rows = Vec::with_capacity(left.len());
        for (_, text) in left.into_iter().filter(|(id, _)| self.left_by_a_crash.contains(id)) {
            let mut row: AuditRow = serde_json::from_str(&text).map_err(|e| AuditError::Store(e.to_string()))?;
            row.code = 0;
            row.reason = RECOVERED_REASON.into();
            row.finish(now);
            rows.push(Encoded::recovered(row));
        }
        let links = self.commit_encoded(&[], &rows)?;
        self.left_by_a_crash.clear();
        Ok(chain::chained(links, rows.into_iter().map(Encoded::into_row)))
    }

    fn query(&mut self, filter: &Filter) -> Result<Vec<ChainedRow>, AuditError> {
        let (clause, mut args) = render(&filter.conditions());
        match filter.limit {
            None => self.select(&format!("{clause} ORDER BY seq"), args),
            // A page forward: the oldest after the place given.
            Some(limit) if filter.after.is_some() => {
                args.push(Value::Integer(limit.min(i64::MAX as usize) as i64));
                self.select(&format!("{clause} ORDER BY seq LIMIT ?"), args)
            }
            Some(limit) => {
                args.push(Value::Integer(limit.min(i64::MAX as usize) as i64));
                let mut rows = self.select(&format!("{clause} ORDER BY seq DESC LIMIT ?"), args)?;
                rows.reverse();
                Ok(rows)
            }
        }
    }

    fn anchor(&mut self) -> Result<Anchor, AuditError> {
        anchor(&self.conn)
    }

    fn head(&mut self) -> Result<Anchor, AuditError> {
        Self::last(&self.conn)
    }

    // The export's position, in `audit_export` (which migration 0017 made
    // for PostgreSQL's shared cursor): one process exports here, and keeps
    // its place across restarts.
    fn export_cursor(&mut self) -> Result<Option<i64>, AuditError> {
        Ok(self
            .conn
            .query_row("SELECT seq FROM audit_export WHERE one = 1", [], |r| r.get(0))
            .optional()?)
    }

    fn keep_export_cursor(&mut self, seq: i64) -> Result<(), AuditError> {
        self.conn.execute(
            "INSERT INTO audit_export (one, seq) VALUES (1, ?1) ON CONFLICT (one) DO UPDATE SET seq = excluded.seq",
            params![seq],
        )?;
        Ok(())
    }

    fn forget_export_cursor(&mut self) -> Result<(), AuditError> {
        self.conn.execute("DELETE FROM audit_export", [])?;
        Ok(())
    }

    fn chain_page(&mut self, after_seq: i64, limit: usize) -> Result<Vec<ChainedRow>, AuditError> {
        let args = vec![Value::Integer(after_seq), Value::Integer(limit as i64)];
        self.select("WHERE seq > ? ORDER BY seq LIMIT ?", args)
    }

    fn sweep(&mut self, cutoff: DateTime<Utc>, max_rows: usize) -> Result<usize, AuditError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut last: Option<Anchor> = None;
        let mut count = 0;
        let cutoff = timestamp(&cutoff);
        {
            let mut stmt = tx.prepare("SELECT seq, hash, ended_at FROM audit ORDER BY seq LIMIT ?1")?;
            let mut rows = stmt.query(params![max_rows as i64])?;
            // Only a prefix of the chain goes, so what remains still links
            // to the anchor.
            while let Some(r) = rows.next()? {
                let ended: String = r.get(2)?;
                if ended >= cutoff {
                    break;
                }
                last = Some(Anchor {
                    seq: r.get(0)?,
                    hash: r.get(1)?,
                });
                count += 1;
            }
        }
        if let Some(last) = &last {
            tx.execute("DELETE FROM audit WHERE seq <= ?1", params![last.seq])?;
            tx.execute(
                "INSERT INTO audit_anchor (one, seq, hash) VALUES (1, ?1, ?2) ON CONFLICT (one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
                params![last.seq, last.hash],
            )?;
        }
        tx.commit()?;
        Ok(count)
    }

    fn committed(&mut self, ids: &[String]) -> Result<HashSet<String>, AuditError> {
        // Not the unknown outcome recovery gave an intent (see the trait),
        // nor a bypass alert, which carries the id of the request it is
        // about (and is committed directly, never through the writer).
        let mut stmt = self.conn.prepare_cached(
            "SELECT 1 FROM audit WHERE id = ?1 AND NOT (code = 0 AND reason = ?2) AND kind <> 'alert' LIMIT 1",
        )?;
        let mut found = HashSet::new();
        for id in ids {
            if stmt.exists(params![id, RECOVERED_REASON])? {
                found.insert(id.clone());
            }
        }
        Ok(found)
    }
}

fn anchor(conn: &Connection) -> Result<Anchor, AuditError> {
    let found = conn
        .query_row("SELECT seq, hash FROM audit_anchor WHERE one = 1", [], |r| {
            Ok(Anchor {
                seq: r.get(0)?,
                hash: r.get(1)?,
            })
        })
        .optional()?;
    Ok(found.unwrap_or_default())
}

/// Timestamps are stored as fixed-width RFC 3339 text (microseconds, `Z`),
/// so that text order is time order.
pub(super) fn timestamp(t: &DateTime<Utc>) -> String {
    Stamp::micros(t).as_str().to_owned()
}

/// A stored time, read only in the one form it is written in: the chain
/// hashes the instant, and queries and retention compare the text, so a
/// time rewritten as the same instant in another form (another offset)
/// would move a row out of a query's range unseen.
fn time_at(r: &Row, index: usize) -> rusqlite::Result<DateTime<Utc>> {
    let text: String = r.get(index)?;
    let unreadable = |e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, e)
    };
    let t = DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| unreadable(Box::new(e)))?;
    if Stamp::micros(&t).as_str() != text {
        return Err(unreadable(not_as_written(&text).into()));
    }
    Ok(t)
}

/// Why a stored time that is not in the form portcullis writes is refused.
pub(super) fn not_as_written(text: &str) -> String {
    format!("the stored time {text:?} is not in the form portcullis writes: the row was edited")
}

fn chained_row(r: &Row) -> rusqlite::Result<ChainedRow> {
    let n = |i: usize| -> rusqlite::Result<u64> { r.get::<_, i64>(i).map(|v| v.max(0) as u64) };
    let row = AuditRow {
        id: r.get(3)?,
        started_at: time_at(r, 4)?,
        ended_at: time_at(r, 5)?,
        cluster: r.get(6)?,
        principal_kind: r.get(7)?,
        login: r.get(8)?,
        credential_id: r.get(9)?,
        credential_prefix: r.get(10)?,
        session: r.get(11)?,
        tool: r.get(12)?,
        client: r.get(13)?,
        method: r.get(14)?,
        path: r.get(15)?,
        query: r.get(16)?,
        verb: r.get(17)?,
        api_group: r.get(18)?,
        api_version: r.get(19)?,
        resource: r.get(20)?,
        subresource: r.get(21)?,
        namespace: r.get(22)?,
        name: r.get(23)?,
        code: n(24)?.min(u16::MAX.into()) as u16,
        reason: r.get(25)?,
        refused: r.get(26)?,
        bytes_in: n(27)?,
        bytes_out: n(28)?,
        duration_ms: n(29)?,
        write: r.get(30)?,
        discovery: r.get(31)?,
        dry_run: r.get(32)?,
        redacted: r.get(33)?,
        truncated: r.get(34)?,
        secret_revealed: r.get(35)?,
        held: r.get(36)?,
        approved: r.get(37)?,
        via: r.get(38)?,
        kind: r.get(39)?,
    };
    Ok(ChainedRow {
        seq: r.get(0)?,
        prev_hash: r.get(1)?,
        hash: r.get(2)?,
        row,
    })
}

/// Render conditions as a `WHERE` clause and its arguments.
fn render(conditions: &[Condition]) -> (String, Vec<Value>) {
    let mut clauses = Vec::new();
    let mut args = Vec::new();
    for condition in conditions {
        match condition {
            Condition::Equals(column, value) => {
                clauses.push(format!("\"{column}\" = ?"));
                args.push(Value::Text(value.clone()));
            }
            Condition::AtOrAfter(column, t) => {
                clauses.push(format!("\"{column}\" >= ?"));
                args.push(Value::Text(timestamp(t)));
            }
            Condition::Before(column, t) => {
                clauses.push(format!("\"{column}\" < ?"));
                args.push(Value::Text(timestamp(t)));
            }
            Condition::Credential(c) => {
                clauses.push("(credential_id = ? OR credential_prefix = ?)".into());
                args.extend([Value::Text(c.clone()), Value::Text(c.clone())]);
            }
            Condition::Outcome(Outcome::Allowed) => clauses.push(format!("NOT {DENIED} AND code BETWEEN 1 AND 399")),
            Condition::Outcome(Outcome::Denied) => clauses.push(DENIED.into()),
            Condition::Outcome(Outcome::Refused) => clauses.push("refused <> ''".into()),
            Condition::Outcome(Outcome::Error) => clauses.push(format!("NOT {DENIED} AND (code >= 400 OR code = 0)")),
            Condition::Outcome(Outcome::Write) => clauses.push("is_write = 1".into()),
            Condition::NotDiscovery => clauses.push("discovery = 0".into()),
            Condition::After(seq) => {
                clauses.push("seq > ?".into());
                args.push(Value::Integer(*seq));
            }
            Condition::OfAKind => clauses.push("kind <> ''".into()),
        }
    }
    if clauses.is_empty() {
        return (String::new(), args);
    }
    (format!("WHERE {}", clauses.join(" AND ")), args)
}

/// The rows of a denied request, in SQL both stores run.
pub(super) const DENIED: &str = "(refused <> '' OR code IN (401, 403))";

mod insert;

#[cfg(test)]
#[path = "sqlite_tests.rs"]
mod tests;
