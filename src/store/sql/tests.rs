use super::*;
use chrono::TimeZone;

fn memory() -> rusqlite::Connection {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE t (i INTEGER, b INTEGER, s TEXT, at TEXT, bytes BLOB)")
        .unwrap();
    conn
}

#[test]
fn values_written_through_the_layer_read_back_as_they_were_on_sqlite() {
    let conn = memory();
    let db: &dyn Db = &Sqlite(&conn);
    let at = Utc.with_ymd_and_hms(2026, 12, 3, 21, 0, 0).unwrap();
    let none: Option<&str> = None;
    db.execute(
        "INSERT INTO t (i, b, s, at, bytes) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![42i64, true, none, at, vec![1u8, 2]],
    )
    .unwrap();
    let (i, b, s, read_at, bytes) = db
        .query_row("SELECT i, b, s, at, bytes FROM t", params![], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, bool>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, DateTime<Utc>>(3)?,
                r.get::<_, Vec<u8>>(4)?,
            ))
        })
        .unwrap();
    assert_eq!((i, b, s, read_at, bytes), (42, true, None, at, vec![1, 2]));
    // The text of a time is rusqlite's, as rows written before the layer.
    let text: String = db.query_row("SELECT at FROM t", params![], |r| r.get(0)).unwrap();
    assert_eq!(text, "2026-12-03 21:00:00+00:00");
}

#[test]
fn no_row_is_an_error_that_optional_turns_into_none() {
    let conn = memory();
    let db: &dyn Db = &Sqlite(&conn);
    let found = db.query_row("SELECT i FROM t", params![], |r| r.get::<_, i64>(0));
    assert!(matches!(found, Err(SqlError::NoRows)));
    let found = db
        .query_row("SELECT i FROM t", params![], |r| r.get::<_, i64>(0))
        .optional();
    assert_eq!(found.unwrap(), None);
}

#[test]
fn a_column_read_as_the_wrong_type_names_the_column() {
    let conn = memory();
    let db: &dyn Db = &Sqlite(&conn);
    db.execute("INSERT INTO t (s) VALUES (?1)", params!["text"]).unwrap();
    let err = db
        .query_row("SELECT i, s FROM t", params![], |r| r.get::<_, i64>(1))
        .unwrap_err();
    assert!(err.to_string().starts_with("column 1:"), "{err}");
}

#[test]
fn a_unique_violation_is_recognised_as_a_constraint_violation() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE u (k TEXT PRIMARY KEY)").unwrap();
    let db: &dyn Db = &Sqlite(&conn);
    db.execute("INSERT INTO u (k) VALUES (?1)", params!["a"]).unwrap();
    let err = db.execute("INSERT INTO u (k) VALUES (?1)", params!["a"]).unwrap_err();
    assert!(err.is_constraint_violation(), "{err}");
}
