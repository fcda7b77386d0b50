//! `portcullis admin store migrate`: an embedded SQLite store copied into
//! an empty PostgreSQL one, table by table and row by row as they are (the
//! audit's hashes and sequence numbers included, so its chain still
//! verifies), in one transaction: a copy that fails leaves nothing behind.

use super::sql::{params, Db, Sqlite, ToSql};
use super::{Store, StoreError};
use std::path::Path;

/// Rows read from SQLite at a time.
const PAGE: i64 = 2000;

/// Copy every table of the SQLite store at `source` into `target` (a
/// PostgreSQL store at the same schema version, with no rows yet); returns
/// each table with its row count, checked on both sides.
pub fn copy_sqlite_into(source: &Path, target: &Store) -> Result<Vec<(String, i64)>, StoreError> {
    if !source.exists() {
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
        let from = Sqlite(conn);
        let tables = tables(&from)?;
        target.write(|to| {
            for table in &tables {
                copy_table(&from, to, table)?;
            }
            restart_identities(to)
        })?;
        tables
            .iter()
            .map(|table| {
                let count = |db: &dyn Db| -> Result<i64, StoreError> {
                    Ok(db.query_row(&format!("SELECT COUNT(*) FROM {table}"), params![], |r| r.get(0))?)
                };
                let (here, there) = (count(&from)?, target.with(|to| count(to))?);
                if here != there {
                    return Err(StoreError::Invalid(format!(
                        "table {table}: {here} rows in SQLite, {there} in PostgreSQL after the copy"
                    )));
                }
                Ok((table.clone(), here))
            })
            .collect()
    })
}

/// The tables of the source, in the order they were created (a table is
/// created after those its foreign keys name).
fn tables(from: &dyn Db) -> Result<Vec<String>, StoreError> {
    Ok(from.query_map(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         AND name <> 'schema_migrations' ORDER BY rowid",
        params![],
        |r| r.get(0),
    )?)
}

fn columns(from: &dyn Db, table: &str) -> Result<Vec<String>, StoreError> {
    Ok(from.query_map(
        &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
        params![],
        |r| r.get(0),
    )?)
}

fn copy_table(from: &dyn Db, to: &dyn Db, table: &str) -> Result<(), StoreError> {
    // Settings a fresh store made for itself (its instance id) give way to
    // the copied store's; any other row means the target is in use.
    if table == "settings" {
        to.execute("DELETE FROM settings", params![])?;
    }
    let present: i64 = to.query_row(&format!("SELECT COUNT(*) FROM {table}"), params![], |r| r.get(0))?;
    if present > 0 {
        return Err(StoreError::Invalid(format!(
            "the PostgreSQL store already has rows in {table}: migrate into an empty database"
        )));
    }
    let columns = columns(from, table)?;
    let list = columns.join(", ");
    let slots: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    let insert = format!("INSERT INTO {table} ({list}) VALUES ({})", slots.join(", "));
    let select = format!("SELECT {list} FROM {table} ORDER BY rowid LIMIT ?1 OFFSET ?2");
    let mut offset = 0;
    loop {
        let rows = from.query(&select, params![PAGE, offset])?;
        for row in &rows {
            let values: Vec<&dyn ToSql> = row.values().iter().map(|v| v as &dyn ToSql).collect();
            to.execute(&insert, &values)?;
        }
        if (rows.len() as i64) < PAGE {
            return Ok(());
        }
        offset += PAGE;
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
