//! The audit in PostgreSQL, shared by every replica (tables from migration
//! `postgres/0002_audit.sql` and the later ones that add to them).
//!
//! # One chain for all replicas
//!
//! Every replica appends to the same hash chain, so `portcullis audit
//! verify` checks it end to end exactly as on SQLite, and the rows of all
//! replicas interleave in the order they were committed. One chain per
//! replica would spare the lock below, but verification would then have to
//! know every replica that ever ran, and a chain removed whole, with its
//! replica, would leave no break to show. A commit that appends rows takes
//! a transaction-level advisory lock on the chain, reads the chain's head
//! (its last row, or the anchor), appends its batch with the next positions
//! and linked hashes, and commits: batches append one after another in
//! position order, as SQLite's one writer does. The writer group-commits
//! (see `audit::writer`), so the lock costs one round trip a batch, not a
//! row. A commit of intents or forwarded records alone takes no lock: a
//! write waiting to be forwarded never waits for another replica's batch.
//!
//! Rows cross as JSON, one statement a batch whatever its size
//! (`json_populate_recordset` on the way in, `row_to_json` out), named as
//! the row's own serde fields, so no column list is repeated by position.
//!
//! # Intents left by crashed replicas
//!
//! A write's intent is committed before the write is forwarded and its row
//! replaces it later. With several replicas an intent in the table may be a
//! live replica's write still in flight (an exec stays open for hours), so
//! [`recover`](AuditStore::recover) turns into rows only the intents of
//! replicas that are gone. A store that records intents draws a replica
//! number and holds a session-level advisory lock on it, on a connection of
//! its own, for as long as it lives; each intent names its number (a field
//! of the intent's JSON that rows do not have). A replica is gone when its
//! lock is free: PostgreSQL releases it with the connection of a process
//! that died. Recovery takes each gone replica's lock for its transaction,
//! under the chain's lock, so an intent is recovered once even when two
//! replicas start together. A process restarted after a crash has a new
//! number: it first ships its spool, whose rows settle the intents they
//! answer, then recovers what is left like any other replica.
//!
//! What this cannot tell apart: when PostgreSQL itself restarts, every lock
//! goes with it, and each replica takes its own back at its next commit; a
//! replica starting in between records the writes other replicas still
//! have in flight as unknown, and their rows follow under the same audit
//! id. Nothing is lost and the chain still verifies. A replica that could
//! not recover at its start (the database was down) tries again at a commit
//! a minute later (`WriterSettings::recovery_retry`), when the others have
//! committed, and so taken their locks back, since.

use super::chain::{self, Anchor, Encoded, Link};
use super::forwarded::Forwarded;
use super::query::{Condition, Filter, Outcome};
use super::row::{AuditRow, ChainedRow};
use super::sqlite::{timestamp, COLUMNS, DENIED};
use super::store::{AuditStore, ExportWrite, RECOVERED_REASON};
use super::AuditError;
use crate::store::postgres::{wait, Pg, Postgres};
use crate::store::sql::{params, Db, OptionalExt, SqlError, ToSql};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The audit tables of a PostgreSQL database.
pub struct PostgresAuditStore {
    pg: Arc<Postgres>,
    /// Ids in `audit_intents`: only their finished rows need the intent
    /// deleted, so a batch of reads costs no extra statement.
    intents: HashSet<String>,
    /// Forwarded records for the next commit.
    forwarded: Vec<Forwarded>,
    /// This store's replica, once it has recorded an intent.
    replica: Option<Replica>,
    /// The last row this store committed: the chain's head is never
    /// behind it, unless rows were deleted from its end.
    committed_seq: i64,
}

impl std::fmt::Debug for PostgresAuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostgresAuditStore")
    }
}

/// A replica's number and the connection that holds its lock (taken out of
/// the pool, so the lock goes with the connection when the store drops).
struct Replica {
    number: i32,
    lock: deadpool_postgres::ClientWrapper,
}

/// The advisory lock class of the audit ("paud"): `(AUDIT_LOCKS, CHAIN)`
/// is the chain, `(AUDIT_LOCKS, n)` replica `n` being alive.
const AUDIT_LOCKS: i32 = 0x7061_7564;
const CHAIN: i32 = 0;

/// The chain's head: its last row, else the anchor (none: genesis).
const HEAD: &str = "SELECT seq, hash FROM ((SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1) \
     UNION ALL (SELECT seq, hash FROM audit_anchor WHERE one = 1)) AS ends ORDER BY seq DESC LIMIT 1";

/// The ids of a JSON array parameter, as a subquery.
const IDS: &str = "(SELECT json_array_elements_text(CAST(CAST(?1 AS TEXT) AS json)))";

/// Errors of the store's SQL layer, for the audit's callers.
impl From<SqlError> for AuditError {
    fn from(e: SqlError) -> Self {
        AuditError::Store(e.to_string())
    }
}

impl PostgresAuditStore {
    /// The audit on the store's PostgreSQL pool (migrated by the store).
    pub fn open(pg: Arc<Postgres>) -> Result<Self, AuditError> {
        let client = pg.client()?;
        let db: &dyn Db = &Pg(&client);
        let intents: Vec<String> = db.query_map("SELECT id FROM audit_intents", params![], |r| r.get(0))?;
        drop(client);
        Ok(PostgresAuditStore {
            pg,
            intents: intents.into_iter().collect(),
            forwarded: Vec::new(),
            replica: None,
            committed_seq: 0,
        })
    }

    /// Run `f` on a pooled connection, each statement committed alone.
    fn with<T>(&self, f: impl FnOnce(&dyn Db) -> Result<T, SqlError>) -> Result<T, AuditError> {
        let client = self.pg.client()?;
        Ok(f(&Pg(&client))?)
    }

    /// Run `f` in one transaction, holding the chain's lock if `chain`.
    /// READ COMMITTED: each statement sees what committed before it, so
    /// the head read after the lock is the last batch's.
    fn transaction<T>(&self, chain: bool, f: impl FnOnce(&dyn Db) -> Result<T, AuditError>) -> Result<T, AuditError> {
        let mut client = self.pg.client()?;
        let tx = wait(
            client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
                .start(),
        )
        .map_err(SqlError::from)?;
        let db = Pg(&tx);
        if chain {
            db.execute("SELECT pg_advisory_xact_lock(?1, ?2)", params![AUDIT_LOCKS, CHAIN])?;
        }
        let out = f(&db)?;
        wait(tx.commit()).map_err(SqlError::from)?;
        Ok(out)
    }

    /// This store's replica number, its lock held: drawn at the first
    /// intent, and taken again after its connection was lost (PostgreSQL
    /// restarted), before anything else is committed.
    fn replica(&mut self) -> Result<i32, AuditError> {
        if let Some(replica) = &self.replica {
            if !replica.lock.is_closed() {
                return Ok(replica.number);
            }
            let number = replica.number;
            let lock = self.lock_connection()?;
            // A replica recovering finds it alive again once this returns;
            // it may hold the lock for its transaction meanwhile.
            wait(lock.execute("SELECT pg_advisory_lock($1, $2)", &[&AUDIT_LOCKS, &number])).map_err(SqlError::from)?;
            self.replica = Some(Replica { number, lock });
            return Ok(number);
        }
        loop {
            let number: i32 = rand::random();
            if number == CHAIN {
                continue;
            }
            let lock = self.lock_connection()?;
            let taken = wait(lock.query_one("SELECT pg_try_advisory_lock($1, $2)", &[&AUDIT_LOCKS, &number]))
                .map_err(SqlError::from)?;
            // Taken: no live replica has this number (a collision draws again).
            if taken.get::<_, bool>(0) {
                self.replica = Some(Replica { number, lock });
                return Ok(number);
            }
        }
    }

    fn lock_connection(&self) -> Result<deadpool_postgres::ClientWrapper, AuditError> {
        Ok(deadpool_postgres::Object::take(self.pg.client()?))
    }

    /// Rows matching `sql_tail` (after `FROM audit AS a`).
    fn select(&self, sql_tail: &str, args: &[&dyn ToSql]) -> Result<Vec<ChainedRow>, AuditError> {
        let sql = format!("SELECT CAST(row_to_json(a) AS TEXT) FROM audit AS a {sql_tail}");
        let texts: Vec<String> = self.with(|db| db.query_map(&sql, args, |r| r.get(0)))?;
        texts.iter().map(|text| json::chained_row(text)).collect()
    }
}

impl AuditStore for PostgresAuditStore {
    fn commit_encoded(&mut self, intents: &[AuditRow], rows: &[Encoded]) -> Result<Vec<Link>, AuditError> {
        if intents.is_empty() && rows.is_empty() && self.forwarded.is_empty() {
            return Ok(Vec::new());
        }
        let replica = match intents.is_empty() && self.replica.is_none() {
            true => None,
            false => Some(self.replica()?),
        };
        let fresh: HashSet<&str> = intents.iter().map(|row| row.id.as_str()).collect();
        let settled: Vec<&str> = rows
            .iter()
            .map(|row| row.row().id.as_str())
            .filter(|id| self.intents.contains(*id) || fresh.contains(id))
            .collect();
        let committed = self.committed_seq;
        let links = self.transaction(!rows.is_empty(), |db| {
            insert_forwarded(db, &self.forwarded)?;
            insert_intents(db, replica, intents)?;
            let links = append(db, rows, committed)?;
            settle(db, &settled)?;
            Ok(links)
        });
        // A commit that failed may have committed all the same (the
        // connection lost after COMMIT was sent): the row that follows
        // settles its intents either way.
        self.intents.extend(intents.iter().map(|row| row.id.clone()));
        let links = links?;
        if let Some(last) = links.last() {
            self.committed_seq = last.seq;
        }
        self.forwarded.clear();
        // Reads have no intent: most commits hash no id here.
        if !self.intents.is_empty() {
            for row in rows {
                self.intents.remove(&row.row().id);
            }
        }
        Ok(links)
    }

    fn forwarded(&mut self, records: Vec<Forwarded>) {
        self.forwarded.extend(records);
    }

    fn recover(&mut self) -> Result<Vec<ChainedRow>, AuditError> {
        let mine = self.replica.as_ref().map(|replica| replica.number);
        let now = Utc::now();
        let chained = self.transaction(true, |db| {
            let left: Vec<String> =
                db.query_map("SELECT \"row\" FROM audit_intents ORDER BY id", params![], |r| r.get(0))?;
            let mut alive = HashMap::new();
            let mut rows = Vec::new();
            for text in left {
                let (replica, mut row) = json::intent_of(&text)?;
                if (replica.is_some() && replica == mine) || is_alive(db, replica, &mut alive)? {
                    continue;
                }
                row.code = 0;
                row.reason = RECOVERED_REASON.into();
                row.finish(now);
                rows.push(Encoded::recovered(row));
            }
            let ids: Vec<&str> = rows.iter().map(|row| row.row().id.as_str()).collect();
            settle(db, &ids)?;
            let links = append(db, &rows, 0)?;
            Ok(chain::chained(links, rows.into_iter().map(Encoded::into_row)))
        })?;
        for row in &chained {
            self.intents.remove(&row.row.id);
        }
        Ok(chained)
    }

    fn query(&mut self, filter: &Filter) -> Result<Vec<ChainedRow>, AuditError> {
        let (clause, args) = render(&filter.conditions());
        let limit = filter.limit.map(|limit| limit.min(i64::MAX as usize) as i64);
        let mut bound: Vec<&dyn ToSql> = args.iter().map(|arg| arg as &dyn ToSql).collect();
        match &limit {
            None => self.select(&format!("{clause} ORDER BY seq"), &bound),
            // A page forward: the oldest after the place given.
            Some(limit) if filter.after.is_some() => {
                bound.push(limit);
                let tail = format!("{clause} ORDER BY seq LIMIT ?{}", bound.len());
                self.select(&tail, &bound)
            }
            Some(limit) => {
                bound.push(limit);
                let tail = format!("{clause} ORDER BY seq DESC LIMIT ?{}", bound.len());
                let mut rows = self.select(&tail, &bound)?;
                rows.reverse();
                Ok(rows)
            }
        }
    }

    fn anchor(&mut self) -> Result<Anchor, AuditError> {
        let found = self.with(|db| {
            db.query_row("SELECT seq, hash FROM audit_anchor WHERE one = 1", params![], anchor_of)
                .optional()
        })?;
        Ok(found.unwrap_or_default())
    }

    fn head(&mut self) -> Result<Anchor, AuditError> {
        self.with(head_of)
    }

    fn export_shared(&mut self, write: Option<ExportWrite<'_>>) -> Option<Result<usize, AuditError>> {
        Some(self.export_turn(write))
    }

    fn chain_page(&mut self, after_seq: i64, limit: usize) -> Result<Vec<ChainedRow>, AuditError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.select("WHERE seq > ?1 ORDER BY seq LIMIT ?2", params![after_seq, limit])
    }

    fn sweep(&mut self, cutoff: DateTime<Utc>, max_rows: usize) -> Result<usize, AuditError> {
        let cutoff = timestamp(&cutoff);
        let max_rows = max_rows.min(i64::MAX as usize) as i64;
        self.transaction(true, |db| {
            let oldest = db.query_map(
                "SELECT seq, hash, ended_at FROM audit ORDER BY seq LIMIT ?1",
                params![max_rows],
                |r| Ok((anchor_of(r)?, r.get::<_, String>(2)?)),
            )?;
            // Only a prefix of the chain goes, so what remains still links
            // to the anchor.
            let gone = oldest.iter().take_while(|(_, ended)| *ended < cutoff).count();
            let Some((last, _)) = gone.checked_sub(1).map(|i| &oldest[i]) else {
                return Ok(0);
            };
            db.execute("DELETE FROM audit WHERE seq <= ?1", params![last.seq])?;
            db.execute(
                "INSERT INTO audit_anchor (one, seq, hash) VALUES (1, ?1, ?2) \
                 ON CONFLICT (one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
                params![last.seq, last.hash],
            )?;
            Ok(gone)
        })
    }

    fn committed(&mut self, ids: &[String]) -> Result<HashSet<String>, AuditError> {
        let ids = Value::from(ids.to_vec()).to_string();
        // Not the unknown outcome recovery gave an intent (see the trait),
        // nor a bypass alert, which carries the id of the request it is
        // about (and is committed directly, never through the writer).
        let sql = format!(
            "SELECT DISTINCT id FROM audit WHERE id IN {IDS} AND NOT (code = 0 AND reason = ?2) AND kind <> 'alert'"
        );
        let found: Vec<String> = self.with(|db| db.query_map(&sql, params![ids, RECOVERED_REASON], |r| r.get(0)))?;
        Ok(found.into_iter().collect())
    }
}

fn anchor_of(r: &crate::store::sql::Row) -> Result<Anchor, SqlError> {
    Ok(Anchor {
        seq: r.get(0)?,
        hash: r.get(1)?,
    })
}

fn head_of(db: &dyn Db) -> Result<Anchor, SqlError> {
    Ok(db.query_row(HEAD, params![], anchor_of).optional()?.unwrap_or_default())
}

/// Append `rows` after the chain's head, in one statement. The caller holds
/// the chain's lock.
fn append(db: &dyn Db, rows: &[Encoded], committed: i64) -> Result<Vec<Link>, AuditError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut prev = head_of(db)?;
    let mut links = Vec::with_capacity(rows.len());
    // One allocation: a record adds at most about 400 bytes to the row's
    // JSON (every key it can add, the longest values).
    let mut records = Vec::with_capacity(rows.iter().map(|row| row.json().len() + 400).sum::<usize>() + 2);
    records.push(b'[');
    // Rows this store committed are gone from the chain's end: an alert
    // goes first (not among the rows' links).
    if prev.seq < committed {
        let alert = Encoded::new(super::bypass::cut_short_row(prev.seq, committed));
        let link = chain::next(&mut prev, &alert);
        json::record(&mut records, &link, &alert)?;
        records.push(b',');
    }
    for row in rows {
        let link = chain::next(&mut prev, row);
        if !links.is_empty() {
            records.push(b',');
        }
        json::record(&mut records, &link, row)?;
        links.push(link);
    }
    records.push(b']');
    let records = String::from_utf8(records).map_err(|e| AuditError::Store(e.to_string()))?;
    db.execute(insert_sql(), params![records])?;
    Ok(links)
}

/// `INSERT INTO audit … SELECT … FROM json_populate_recordset(…)`, built
/// once. The columns are named, so a column a later schema adds takes its
/// default (a rolling upgrade).
fn insert_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "INSERT INTO audit (seq, prev_hash, hash, forwarded, {COLUMNS}) \
             SELECT seq, prev_hash, hash, forwarded, {COLUMNS} \
             FROM json_populate_recordset(NULL::audit, CAST(CAST(?1 AS TEXT) AS json))"
        )
    })
}

/// Record `forwarded` (one statement; a record already there stays).
fn insert_forwarded(db: &dyn Db, forwarded: &[Forwarded]) -> Result<(), AuditError> {
    if forwarded.is_empty() {
        return Ok(());
    }
    let records: Vec<Value> = forwarded
        .iter()
        .map(|f| {
            serde_json::json!({"id": f.id, "cluster": f.cluster, "kind": f.kind, "at": timestamp(&f.at),
                "principal_kind": f.principal_kind, "login": f.login})
        })
        .collect();
    db.execute(
        "INSERT INTO audit_forwarded (id, cluster, kind, at, principal_kind, login) \
         SELECT id, cluster, kind, at, principal_kind, login \
         FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS json)) \
         AS f(id TEXT, cluster TEXT, kind TEXT, at TEXT, principal_kind TEXT, login TEXT) \
         ON CONFLICT DO NOTHING",
        params![Value::Array(records).to_string()],
    )?;
    Ok(())
}

/// Record `intents` of `replica` (one statement; the last of an id wins,
/// as it replaces one already there).
fn insert_intents(db: &dyn Db, replica: Option<i32>, intents: &[AuditRow]) -> Result<(), AuditError> {
    if intents.is_empty() {
        return Ok(());
    }
    let mut seen = HashSet::new();
    let mut records = Vec::with_capacity(intents.len());
    for row in intents.iter().rev().filter(|row| seen.insert(row.id.as_str())) {
        records.push(serde_json::json!({"id": row.id, "row": json::intent(row, replica)?}));
    }
    db.execute(
        "INSERT INTO audit_intents (id, \"row\") SELECT id, \"row\" \
         FROM json_to_recordset(CAST(CAST(?1 AS TEXT) AS json)) AS i(id TEXT, \"row\" TEXT) \
         ON CONFLICT (id) DO UPDATE SET \"row\" = excluded.\"row\"",
        params![Value::Array(records).to_string()],
    )?;
    Ok(())
}

/// Delete the intents of `ids` (one statement).
fn settle(db: &dyn Db, ids: &[&str]) -> Result<(), AuditError> {
    if ids.is_empty() {
        return Ok(());
    }
    let ids = Value::from(ids.to_vec()).to_string();
    db.execute(&format!("DELETE FROM audit_intents WHERE id IN {IDS}"), params![ids])?;
    Ok(())
}

/// Is `replica` alive (its lock held by another connection)? A gone one's
/// lock is taken for this transaction, so no other recovery takes its
/// intents too. Each replica is asked once.
fn is_alive(db: &dyn Db, replica: Option<i32>, known: &mut HashMap<i32, bool>) -> Result<bool, SqlError> {
    let Some(number) = replica else {
        return Ok(false);
    };
    if let Some(alive) = known.get(&number) {
        return Ok(*alive);
    }
    let taken: bool = db.query_row(
        "SELECT pg_try_advisory_xact_lock(?1, ?2)",
        params![AUDIT_LOCKS, number],
        |r| r.get(0),
    )?;
    known.insert(number, !taken);
    Ok(!taken)
}

/// Render conditions as a `WHERE` clause and its text arguments.
fn render(conditions: &[Condition]) -> (String, Vec<String>) {
    let mut args: Vec<String> = Vec::new();
    let mut arg = |value: String| {
        args.push(value);
        format!("?{}", args.len())
    };
    let clauses: Vec<String> = conditions
        .iter()
        .map(|condition| match condition {
            Condition::Equals(column, value) => format!("\"{column}\" = {}", arg(value.clone())),
            Condition::AtOrAfter(column, t) => format!("\"{column}\" >= {}", arg(timestamp(t))),
            Condition::Before(column, t) => format!("\"{column}\" < {}", arg(timestamp(t))),
            Condition::Credential(c) => {
                let p = arg(c.clone());
                format!("(credential_id = {p} OR credential_prefix = {p})")
            }
            Condition::Outcome(Outcome::Allowed) => format!("NOT {DENIED} AND code BETWEEN 1 AND 399"),
            Condition::Outcome(Outcome::Denied) => DENIED.into(),
            Condition::Outcome(Outcome::Refused) => "refused <> ''".into(),
            Condition::Outcome(Outcome::Error) => format!("NOT {DENIED} AND (code >= 400 OR code = 0)"),
            Condition::Outcome(Outcome::Write) => "is_write".into(),
            Condition::NotDiscovery => "NOT discovery".into(),
            Condition::OfAKind => "kind <> ''".into(),
            // The arguments are texts: the place is cast to the column's type.
            Condition::After(seq) => format!("seq > CAST(CAST({} AS TEXT) AS BIGINT)", arg(seq.to_string())),
        })
        .collect();
    if clauses.is_empty() {
        return (String::new(), args);
    }
    (format!("WHERE {}", clauses.join(" AND ")), args)
}

mod export;
mod json;

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;

#[cfg(test)]
mod records_tests;
