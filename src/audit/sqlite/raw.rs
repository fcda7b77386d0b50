//! The audit INSERTs, prepared once on the writer's connection and bound
//! without copies.
//!
//! rusqlite binds every non-empty text `SQLITE_TRANSIENT`: SQLite mallocs a
//! copy of each value and frees it when the bindings are cleared, some
//! 14,000 instructions per audited row (31 texts). Here texts are bound
//! `SQLITE_STATIC`, read where they lie. That holds because a [`Run`]
//! borrows them: it steps the statement, then resets it and clears its
//! bindings before the borrow ends, on every path.
#![allow(unsafe_code)]

use rusqlite::{ffi, Connection};
use std::ffi::{c_char, c_int, CStr};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// Statements prepared on one connection, kept until the set is dropped:
/// a commit reuses them rather than preparing its INSERTs again.
pub(super) struct Statements {
    /// The connection they were prepared on, the only one they run with.
    db: *mut ffi::sqlite3,
    /// Each statement under its SQL text's address (a dozen at most).
    prepared: Vec<(&'static str, NonNull<ffi::sqlite3_stmt>)>,
}

// SAFETY: the statements belong to one connection, which moves with them
// (`SqliteAuditStore` owns both) and is `Send`; rusqlite refuses SQLite's
// single-thread mode, the one mode where a connection and its statements
// may not change threads. They are used only through `&mut self`.
unsafe impl Send for Statements {}

/// A value for a parameter.
#[derive(Clone, Copy)]
pub(super) enum Param<'v> {
    /// Bound as SQLite text, in place.
    Text(&'v str),
    /// Bound as an SQLite integer.
    Int(i64),
}

impl Statements {
    /// No statements yet, for `conn`.
    pub(super) fn new(conn: &Connection) -> Statements {
        Statements {
            db: handle(conn),
            prepared: Vec::new(),
        }
    }

    /// Start a run of `sql` (prepared the first time) on `conn`, which must
    /// be the connection the set was made for.
    pub(super) fn run<'v>(&mut self, conn: &Connection, sql: &'static str) -> rusqlite::Result<Run<'_, 'v>> {
        if handle(conn) != self.db {
            return Err(misuse("an audit statement run on another connection than its own"));
        }
        let stmt = match self.prepared.iter().find(|(text, _)| ptr::eq(*text, sql)) {
            Some((_, stmt)) => *stmt,
            None => {
                let stmt = self.prepare(sql)?;
                self.prepared.push((sql, stmt));
                stmt
            }
        };
        Ok(Run {
            stmt,
            db: self.db,
            bound: 0,
            _statements: PhantomData,
            _values: PhantomData,
        })
    }

    /// `sql`, one statement, prepared to be kept.
    fn prepare(&self, sql: &str) -> rusqlite::Result<NonNull<ffi::sqlite3_stmt>> {
        let len = c_int::try_from(sql.len()).map_err(|_| misuse("an audit statement too long"))?;
        let (mut stmt, mut tail) = (ptr::null_mut(), ptr::null());
        // SAFETY: `db` is open: `run` found it equal to a borrowed
        // connection's. `sql` is readable for `len` bytes (no NUL needed
        // when the length is given); SQLite writes the two out-pointers.
        let code = unsafe {
            ffi::sqlite3_prepare_v3(
                self.db,
                sql.as_ptr().cast::<c_char>(),
                len,
                ffi::SQLITE_PREPARE_PERSISTENT as _,
                &mut stmt,
                &mut tail,
            )
        };
        if code != ffi::SQLITE_OK {
            return Err(error(self.db, code));
        }
        let stmt = NonNull::new(stmt).ok_or_else(|| misuse("an empty audit statement"))?;
        if tail.cast::<u8>() != sql.as_bytes().as_ptr_range().end {
            // SAFETY: just prepared, and known to no one else.
            unsafe { ffi::sqlite3_finalize(stmt.as_ptr()) };
            return Err(misuse("an audit statement with text after it"));
        }
        Ok(stmt)
    }
}

impl Drop for Statements {
    fn drop(&mut self) {
        for (_, stmt) in self.prepared.drain(..) {
            // SAFETY: prepared here, finalized once (drained), and no `Run`
            // is left (it borrows the set). The connection is still open:
            // `SqliteAuditStore` drops this before it; and were it not,
            // rusqlite closes with `sqlite3_close`, which leaves open a
            // connection that still has statements.
            unsafe { ffi::sqlite3_finalize(stmt.as_ptr()) };
        }
    }
}

/// One run of a statement with values borrowed for `'v`. Dropping it (after
/// [`Run::execute`] or an error) resets the statement and clears its
/// bindings, so SQLite keeps no pointer to them.
pub(super) struct Run<'s, 'v> {
    stmt: NonNull<ffi::sqlite3_stmt>,
    db: *mut ffi::sqlite3,
    /// Parameters bound so far, from the first.
    bound: c_int,
    /// One run of the set's statements at a time.
    _statements: PhantomData<&'s mut Statements>,
    _values: PhantomData<&'v str>,
}

impl<'v> Run<'_, 'v> {
    /// Bind `values` to the next parameters, in order.
    pub(super) fn bind(&mut self, values: impl IntoIterator<Item = Param<'v>>) -> rusqlite::Result<()> {
        for value in values {
            self.bound += 1;
            let code = match value {
                Param::Text(text) => self.text(text),
                // SAFETY: `stmt` is live: finalized only when the set is
                // dropped, which this run's borrow of it prevents.
                Param::Int(n) => unsafe { ffi::sqlite3_bind_int64(self.stmt.as_ptr(), self.bound, n) },
            };
            if code != ffi::SQLITE_OK {
                return Err(error(self.db, code));
            }
        }
        Ok(())
    }

    fn text(&self, text: &'v str) -> c_int {
        // rusqlite's empty text: a pointer that is surely valid (an empty
        // `str`'s may dangle).
        let at = if text.is_empty() {
            c"".as_ptr()
        } else {
            text.as_ptr().cast()
        };
        // SAFETY: `stmt` is live (see `bind`). `text` is UTF-8, readable for
        // its length during `'v`, which outlives this run; the binding is
        // cleared when the run is dropped, so SQLite reads it only in
        // `execute`. SQLITE_STATIC: SQLite neither copies nor frees it.
        unsafe {
            ffi::sqlite3_bind_text64(
                self.stmt.as_ptr(),
                self.bound,
                at,
                text.len() as ffi::sqlite3_uint64,
                ffi::SQLITE_STATIC(),
                ffi::SQLITE_UTF8 as _,
            )
        }
    }

    /// Run the statement, which returns no rows, with every parameter
    /// bound.
    pub(super) fn execute(self) -> rusqlite::Result<()> {
        // SAFETY: `stmt` is live (see `bind`).
        let expected = unsafe { ffi::sqlite3_bind_parameter_count(self.stmt.as_ptr()) };
        if self.bound != expected {
            return Err(rusqlite::Error::InvalidParameterCount(
                self.bound as usize,
                expected as usize,
            ));
        }
        // SAFETY: `stmt` is live, and each of its parameters is bound in
        // this run, to values that outlive it.
        match unsafe { ffi::sqlite3_step(self.stmt.as_ptr()) } {
            ffi::SQLITE_DONE => Ok(()),
            ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
            code => Err(error(self.db, code)),
        }
    }
}

impl Drop for Run<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: `stmt` is live (see `bind`). The reset's code repeats a
        // failed step's, already returned.
        unsafe {
            ffi::sqlite3_reset(self.stmt.as_ptr());
            ffi::sqlite3_clear_bindings(self.stmt.as_ptr());
        }
    }
}

fn handle(conn: &Connection) -> *mut ffi::sqlite3 {
    // SAFETY: only the address is used here: kept, and compared.
    unsafe { conn.handle() }
}

/// What rusqlite makes of `code` on `db`: SQLite's message for it.
fn error(db: *mut ffi::sqlite3, code: c_int) -> rusqlite::Error {
    // SAFETY: `db` is open (a run borrows its connection's statements). Each
    // call returns a NUL-terminated text that SQLite keeps at least until
    // the next call on `db`, and it is copied at once.
    let message = unsafe {
        let text = if ffi::sqlite3_errcode(db) == code {
            ffi::sqlite3_errmsg(db)
        } else {
            ffi::sqlite3_errstr(code)
        };
        (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned())
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), message)
}

fn misuse(why: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_MISUSE), Some(why.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::Value;
    use Param::{Int, Text};

    static SQL: &str = "INSERT INTO t (a, b) VALUES (?, ?)";

    fn table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a TEXT NOT NULL, b INTEGER NOT NULL CHECK (b > 0))")
            .unwrap();
        conn
    }

    /// The statement's text with what is bound to it now.
    fn bound(statements: &Statements) -> String {
        let (_, stmt) = statements
            .prepared
            .iter()
            .find(|(text, _)| ptr::eq(*text, SQL))
            .unwrap();
        // SAFETY: the statement is live (the set is borrowed); the text
        // SQLite returns is ours, copied then freed.
        unsafe {
            let text = ffi::sqlite3_expanded_sql(stmt.as_ptr());
            let copy = CStr::from_ptr(text).to_string_lossy().into_owned();
            ffi::sqlite3_free(text.cast());
            copy
        }
    }

    fn stored(conn: &Connection) -> Vec<(Value, Value)> {
        let mut stmt = conn.prepare("SELECT a, b FROM t ORDER BY rowid").unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn a_run_leaves_nothing_bound_whether_it_succeeds_or_fails() {
        let conn = table();
        let mut statements = Statements::new(&conn);
        let unbound = "INSERT INTO t (a, b) VALUES (NULL, NULL)";
        let text = String::from("kept");
        let mut run = statements.run(&conn, SQL).unwrap();
        run.bind([Text(&text), Int(1)]).unwrap();
        run.execute().unwrap();
        assert_eq!(bound(&statements), unbound);

        let mut run = statements.run(&conn, SQL).unwrap();
        run.bind([Text(&text), Int(0)]).unwrap();
        let failed = run.execute().unwrap_err();
        assert_eq!(
            failed.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ConstraintViolation)
        );
        assert!(failed.to_string().contains("CHECK constraint failed"), "{failed}");
        assert_eq!(bound(&statements), unbound);

        let mut run = statements.run(&conn, SQL).unwrap();
        run.bind([Text(&text)]).unwrap();
        assert!(matches!(
            run.execute(),
            Err(rusqlite::Error::InvalidParameterCount(1, 2))
        ));
        assert_eq!(bound(&statements), unbound);

        assert_eq!(stored(&conn), [(Value::Text(text), Value::Integer(1))]);
    }

    #[test]
    fn texts_are_stored_as_rusqlite_binds_them() {
        let (ours, theirs) = (table(), table());
        let mut statements = Statements::new(&ours);
        let texts = ["", "a", "é日本\u{1F600}", "nul\0inside", &"ü".repeat(1024)];
        for (i, text) in texts.into_iter().enumerate() {
            let mut run = statements.run(&ours, SQL).unwrap();
            run.bind([Text(text), Int(i as i64 + 1)]).unwrap();
            run.execute().unwrap();
            theirs.execute(SQL, rusqlite::params![text, i as i64 + 1]).unwrap();
        }
        assert_eq!(stored(&ours).len(), texts.len());
        assert_eq!(stored(&ours), stored(&theirs));
    }

    #[test]
    fn statements_run_only_on_the_connection_they_were_made_for() {
        let (own, other) = (table(), table());
        let mut statements = Statements::new(&own);
        let refused = statements.run(&other, SQL).err().unwrap();
        assert_eq!(refused.sqlite_error_code(), Some(rusqlite::ErrorCode::ApiMisuse));
        let mut run = statements.run(&own, SQL).unwrap();
        run.bind([Text("x"), Int(1)]).unwrap();
        run.execute().unwrap();
        assert_eq!(stored(&own).len(), 1);
        assert!(stored(&other).is_empty());
    }
}
