//! `portcullis admin store migrate`: an embedded SQLite store copied into
//! an empty PostgreSQL one, table by table and row by row as they are (the
//! audit's hashes and sequence numbers included, so its chain still
//! verifies), in one transaction that checks every table's row count
//! before it commits: a copy that fails leaves nothing behind.

use super::sql::{params, Db, Owned, Sqlite, ToSql};
use super::{Store, StoreError};
use std::path::Path;

/// Rows read from SQLite at a time.
const PAGE: i64 = 2000;

/// Parameters of one multi-row INSERT at most (PostgreSQL takes 65535).
const PARAMS_PER_INSERT: usize = 4000;

/// Copy every table of the SQLite store at `source` into `target` (a
/// PostgreSQL store at the same schema version, with no rows yet); returns
/// each table with its row count, checked on both sides.
pub fn copy_sqlite_into(source: &Path, target: &Store) -> Result<Vec<(String, i64)>, StoreError> {
    if !source.is_file() {
        return Err(StoreError::NotFound(format!("SQLite store {}", source.display())));
    }
    if target.sqlite_path().is_some() {
        return Err(StoreError::Invalid(
            "the target of a store migration is a PostgreSQL store: set [store] url".into(),
        ));
    }
    // Opening migrates the file to this release's schema, the target's.
    let source = Store::open(source)?;
    source.sqlite(|conn| {
        // One read transaction: every table from the same snapshot, even
        // if something still writes to the file.
        let snapshot = conn.unchecked_transaction()?;
        let from = Sqlite(&snapshot);
        let tables = in_dependency_order(&from)?;
        target.with(|to| refuse_unless_empty(to, &tables))?;
        target.write(|to| {
            // Settings a fresh store made for itself (its instance id)
            // give way to the copied store's.
            to.execute("DELETE FROM settings", params![])?;
            for table in &tables {
                copy_table(&from, to, table)?;
            }
            restart_identities(to)?;
            tables.iter().map(|table| same_count(&from, to, table)).collect()
        })
    })
}

/// The number of rows of `table` in both stores, which must agree.
fn same_count(from: &dyn Db, to: &dyn Db, table: &str) -> Result<(String, i64), StoreError> {
    let count = |db: &dyn Db| -> Result<i64, StoreError> {
        Ok(db.query_row(&format!("SELECT COUNT(*) FROM \"{table}\""), params![], |r| r.get(0))?)
    };
    let (here, there) = (count(from)?, count(to)?);
    if here != there {
        return Err(StoreError::Invalid(format!(
            "table {table}: {here} rows in SQLite, {there} in PostgreSQL after the copy, so it was rolled back"
        )));
    }
    Ok((table.to_string(), here))
}

/// Refuse a target that holds anything but a fresh store's own instance
/// id, naming what it holds, before anything is written.
fn refuse_unless_empty(to: &dyn Db, tables: &[String]) -> Result<(), StoreError> {
    let mut held = Vec::new();
    for table in tables {
        let filter = if table == "settings" {
            " WHERE key <> 'instance_id'"
        } else {
            ""
        };
        let rows: i64 = to.query_row(&format!("SELECT COUNT(*) FROM \"{table}\"{filter}"), params![], |r| {
            r.get(0)
        })?;
        if rows > 0 {
            held.push(format!("{table} {rows}"));
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    Err(StoreError::Invalid(format!(
        "the PostgreSQL database is not empty (rows: {}): store migrate copies into an empty database only, \
         and changed nothing",
        held.join(", ")
    )))
}

/// The tables of the source, each after the tables its foreign keys name
/// (a column added later may name a table made after its own), else in
/// the order they were created.
fn in_dependency_order(from: &dyn Db) -> Result<Vec<String>, StoreError> {
    let names: Vec<String> = from.query_map(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         AND name <> 'schema_migrations' ORDER BY rowid",
        params![],
        |r| r.get(0),
    )?;
    let mut pending = Vec::new();
    for name in names {
        let named: Vec<String> = from.query_map(
            &format!("SELECT DISTINCT \"table\" FROM pragma_foreign_key_list('{name}')"),
            params![],
            |r| r.get(0),
        )?;
        // A table naming itself (a grant narrowed from another) has its
        // rows in the order they were made, parents first.
        let needs: Vec<String> = named.into_iter().filter(|t| *t != name).collect();
        pending.push((name, needs));
    }
    let mut ordered: Vec<String> = Vec::new();
    while !pending.is_empty() {
        let ready = pending
            .iter()
            .position(|(_, needs)| needs.iter().all(|t| ordered.contains(t)))
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "the foreign keys of tables {:?} form a cycle",
                    pending.iter().map(|(t, _)| t).collect::<Vec<_>>()
                ))
            })?;
        ordered.push(pending.remove(ready).0);
    }
    Ok(ordered)
}

fn columns(from: &dyn Db, table: &str) -> Result<Vec<String>, StoreError> {
    Ok(from.query_map(
        &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
        params![],
        |r| r.get(0),
    )?)
}

/// Copy `table`'s rows in the order they were written, a page at a time,
/// each page in multi-row INSERTs (a row at a time takes minutes for an
/// audit of millions).
fn copy_table(from: &dyn Db, to: &dyn Db, table: &str) -> Result<(), StoreError> {
    let columns = columns(from, table)?;
    let list = columns
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let select = format!("SELECT rowid, {list} FROM \"{table}\" WHERE rowid > ?1 ORDER BY rowid LIMIT ?2");
    let per_insert = (PARAMS_PER_INSERT / columns.len()).max(1);
    let mut after = i64::MIN;
    loop {
        let rows = from.query(&select, params![after, PAGE])?;
        let Some(last) = rows.last() else { return Ok(()) };
        after = last.get(0)?;
        for chunk in rows.chunks(per_insert) {
            let values: Vec<&Owned> = chunk.iter().flat_map(|row| &row.values()[1..]).collect();
            let slots: Vec<String> = (0..chunk.len())
                .map(|r| {
                    let row: Vec<String> = (1..=columns.len())
                        .map(|c| format!("?{}", r * columns.len() + c))
                        .collect();
                    format!("({})", row.join(", "))
                })
                .collect();
            let insert = format!("INSERT INTO \"{table}\" ({list}) VALUES {}", slots.join(", "));
            let params: Vec<&dyn ToSql> = values.iter().map(|v| *v as &dyn ToSql).collect();
            to.execute(&insert, &params)?;
        }
        if (rows.len() as i64) < PAGE {
            return Ok(());
        }
    }
}

/// Identity columns continue after the copied values.
fn restart_identities(to: &dyn Db) -> Result<(), StoreError> {
    let identities: Vec<(String, String)> = to.query_map(
        "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT) FROM information_schema.columns \
         WHERE table_schema = current_schema() AND is_identity = 'YES'",
        params![],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (table, column) in identities {
        to.query(
            &format!(
                "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), \
                 COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
            ),
            params![],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn names(store: &Store) -> Vec<String> {
        store
            .with(|db| Ok(db.query_map("SELECT name FROM principals ORDER BY name", params![], |r| r.get(0))?))
            .unwrap()
    }

    #[test]
    fn a_table_of_more_rows_than_a_page_is_copied_whole_and_a_second_copy_is_refused() {
        let (source, target) = (testing::sqlite(), testing::postgres());
        let now = chrono::Utc::now();
        let rows = PAGE as usize * 2 + 500;
        source
            .write(|tx| {
                for i in 0..rows {
                    tx.execute(
                        "INSERT INTO principals (kind, name, created_at) VALUES ('person', ?1, ?2)",
                        params![format!("p{i:05}"), now],
                    )?;
                }
                Ok(())
            })
            .unwrap();
        let copied = copy_sqlite_into(source.path(), &target).unwrap();
        assert!(copied.contains(&("principals".to_string(), rows as i64)), "{copied:?}");
        assert_eq!(names(&target), names(&source));

        let refused = copy_sqlite_into(source.path(), &target).unwrap_err().to_string();
        assert!(refused.contains(&format!("rows: principals {rows}")), "{refused}");
        assert_eq!(names(&target).len(), rows, "nothing copied twice");
    }
}
