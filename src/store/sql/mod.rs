//! One SQL dialect for both stores.
//!
//! The repository (`Store`'s methods) is written once against [`Db`], and
//! runs on the embedded SQLite or on PostgreSQL. The SQL it sends is the
//! common part of both dialects:
//!
//! - parameters are `?1`, `?2`, … (PostgreSQL receives them as `$1`, `$2`);
//! - booleans are written `TRUE`/`FALSE` and compared with `NOT x`, never
//!   `0`/`1` (PostgreSQL columns are `BOOLEAN`);
//! - `INSERT … ON CONFLICT DO NOTHING` / `DO UPDATE SET x = excluded.x`,
//!   never `INSERT OR IGNORE`/`OR REPLACE`; `RETURNING` for generated values;
//! - a parameter whose type PostgreSQL cannot infer (alone beside `IS
//!   NULL`, inside `length()`) is written `CAST(?1 AS TEXT)`; an aggregate
//!   whose PostgreSQL type is `NUMERIC` (`SUM`) is cast to `BIGINT`.
//!
//! Values are bound by the type the database expects: a time is a SQLite
//! text in rusqlite's format (as every row written before has it) and a
//! PostgreSQL `TIMESTAMPTZ`; a boolean is a SQLite integer and a PostgreSQL
//! `BOOLEAN`.

use chrono::{DateTime, Utc};

/// An error from either database, or a value that did not decode.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// SQLite failed.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[error("{0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// No connection could be had from the pool.
    #[error("no database connection: {0}")]
    Pool(String),
    /// A query expected a row and found none.
    #[error("no row found")]
    NoRows,
    /// A column held something its reader does not accept.
    #[error("column {column}: {message}")]
    Decode {
        /// Which column (from 0).
        column: usize,
        /// What was wrong.
        message: String,
    },
}

impl SqlError {
    /// A column `column` that did not decode.
    pub fn decode(column: usize, message: impl std::fmt::Display) -> SqlError {
        SqlError::Decode {
            column,
            message: message.to_string(),
        }
    }

    /// Did a UNIQUE, PRIMARY KEY or other constraint refuse the statement?
    pub fn is_constraint_violation(&self) -> bool {
        match self {
            SqlError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => {
                f.code == rusqlite::ErrorCode::ConstraintViolation
            }
            SqlError::Postgres(e) => e.code().is_some_and(|code| code.code().starts_with("23")),
            _ => false,
        }
    }
}

/// A value bound to a parameter, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// A boolean.
    Bool(bool),
    /// Text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
    /// A point in time.
    Time(DateTime<Utc>),
}

/// Something that can be bound to a parameter.
pub trait ToSql {
    /// The value to bind.
    fn to_value(&self) -> Value<'_>;
}

macro_rules! to_sql_int {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_value(&self) -> Value<'_> {
                Value::Int(*self as i64)
            }
        }
    )*};
}
to_sql_int!(i64, i32, u32, u16, u8);

impl ToSql for bool {
    fn to_value(&self) -> Value<'_> {
        Value::Bool(*self)
    }
}
impl ToSql for f64 {
    fn to_value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}
impl ToSql for str {
    fn to_value(&self) -> Value<'_> {
        Value::Text(self)
    }
}
impl ToSql for String {
    fn to_value(&self) -> Value<'_> {
        Value::Text(self)
    }
}
impl ToSql for [u8] {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}
impl ToSql for Vec<u8> {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}
impl ToSql for DateTime<Utc> {
    fn to_value(&self) -> Value<'_> {
        Value::Time(*self)
    }
}
impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_value(&self) -> Value<'_> {
        (**self).to_value()
    }
}
impl<T: ToSql> ToSql for Option<T> {
    fn to_value(&self) -> Value<'_> {
        self.as_ref().map_or(Value::Null, ToSql::to_value)
    }
}

/// The parameters of one statement, as `params![a, b, c]` makes them.
pub type Params<'a> = &'a [&'a dyn ToSql];

/// `params![a, b]`: the parameters of a statement, each borrowed.
macro_rules! params {
    () => { &[] as &[&dyn $crate::store::sql::ToSql] };
    ($($p:expr),+ $(,)?) => { &[$(&$p as &dyn $crate::store::sql::ToSql),+] as &[&dyn $crate::store::sql::ToSql] };
}
pub(crate) use params;

/// A value read from a row, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum Owned {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// A boolean.
    Bool(bool),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
    /// A point in time.
    Time(DateTime<Utc>),
}

impl ToSql for Owned {
    fn to_value(&self) -> Value<'_> {
        match self {
            Owned::Null => Value::Null,
            Owned::Int(i) => Value::Int(*i),
            Owned::Real(f) => Value::Real(*f),
            Owned::Bool(b) => Value::Bool(*b),
            Owned::Text(s) => Value::Text(s),
            Owned::Blob(b) => Value::Blob(b),
            Owned::Time(t) => Value::Time(*t),
        }
    }
}

/// One row of a result.
#[derive(Debug, Clone)]
pub struct Row {
    pub(super) values: Vec<Owned>,
}

/// A column's position in a row.
pub trait RowIndex {
    /// From 0.
    fn index(self) -> usize;
}
impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

impl Row {
    /// Every column's value, in order (copying a row as it is).
    pub fn values(&self) -> &[Owned] {
        &self.values
    }

    /// Column `index` read as `T` (`r.get::<_, i64>(3)` names the type).
    pub fn get<I: RowIndex, T: FromSql>(&self, index: I) -> Result<T, SqlError> {
        let index = index.index();
        let value = self
            .values
            .get(index)
            .ok_or_else(|| SqlError::decode(index, "no such column"))?;
        T::from_sql(value).map_err(|message| SqlError::decode(index, message))
    }
}

/// Something a column can be read as.
pub trait FromSql: Sized {
    /// Read it, or say why not.
    fn from_sql(value: &Owned) -> Result<Self, String>;
}

fn unexpected<T>(value: &Owned, wanted: &str) -> Result<T, String> {
    Err(format!("expected {wanted}, found {value:?}"))
}

impl FromSql for i64 {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Int(i) => Ok(*i),
            Owned::Bool(b) => Ok(*b as i64),
            other => unexpected(other, "an integer"),
        }
    }
}
macro_rules! from_sql_int {
    ($($t:ty),*) => {$(
        impl FromSql for $t {
            fn from_sql(value: &Owned) -> Result<Self, String> {
                let wide = i64::from_sql(value)?;
                <$t>::try_from(wide).map_err(|_| format!("{wide} is out of range"))
            }
        }
    )*};
}
from_sql_int!(i32, u32, u64, usize);

impl FromSql for bool {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Bool(b) => Ok(*b),
            Owned::Int(i) => Ok(*i != 0),
            other => unexpected(other, "a boolean"),
        }
    }
}
impl FromSql for f64 {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Real(f) => Ok(*f),
            Owned::Int(i) => Ok(*i as f64),
            other => unexpected(other, "a number"),
        }
    }
}
impl FromSql for String {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Text(s) => Ok(s.clone()),
            other => unexpected(other, "text"),
        }
    }
}
impl FromSql for Vec<u8> {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Blob(b) => Ok(b.clone()),
            Owned::Text(s) => Ok(s.as_bytes().to_vec()),
            other => unexpected(other, "bytes"),
        }
    }
}
impl FromSql for DateTime<Utc> {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Time(t) => Ok(*t),
            // Written by rusqlite ("%F %T%.f%:z"), or RFC 3339.
            Owned::Text(s) => {
                let text = rusqlite::types::ValueRef::Text(s.as_bytes());
                <DateTime<Utc> as rusqlite::types::FromSql>::column_result(text).map_err(|e| e.to_string())
            }
            other => unexpected(other, "a time"),
        }
    }
}
impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(value: &Owned) -> Result<Self, String> {
        match value {
            Owned::Null => Ok(None),
            other => T::from_sql(other).map(Some),
        }
    }
}

/// A connection, or a transaction on one.
pub trait Db {
    /// Run one statement; how many rows it changed.
    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize, SqlError>;

    /// Run one query; every row.
    fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, SqlError>;

    /// Run statements without parameters, separated by `;`.
    fn execute_batch(&self, sql: &str) -> Result<(), SqlError>;
}

impl dyn Db + '_ {
    /// The first row of a query read by `f`, or [`SqlError::NoRows`].
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        f: impl FnOnce(&Row) -> Result<T, SqlError>,
    ) -> Result<T, SqlError> {
        let rows = self.query(sql, params)?;
        rows.first().map_or(Err(SqlError::NoRows), f)
    }

    /// Every row of a query, each read by `f`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        f: impl FnMut(&Row) -> Result<T, SqlError>,
    ) -> Result<Vec<T>, SqlError> {
        self.query(sql, params)?.iter().map(f).collect()
    }
}

/// `.optional()`: no row is `None`, as rusqlite's `OptionalExtension`.
pub trait OptionalExt<T> {
    /// [`SqlError::NoRows`] becomes `Ok(None)`.
    fn optional(self) -> Result<Option<T>, SqlError>;
}

impl<T> OptionalExt<T> for Result<T, SqlError> {
    fn optional(self) -> Result<Option<T>, SqlError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(SqlError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A SQLite connection or transaction as a [`Db`].
pub struct Sqlite<'a>(pub &'a rusqlite::Connection);

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match *self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::from(i),
            Value::Real(f) => ToSqlOutput::from(f),
            Value::Bool(b) => ToSqlOutput::from(b as i64),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            // rusqlite's own text for a time: what every earlier row holds.
            Value::Time(t) => ToSqlOutput::from(sqlite_time(&t)),
        })
    }
}

/// A time as SQLite rows hold it (rusqlite's format): text whose order is
/// the order of the times.
pub fn sqlite_time(t: &DateTime<Utc>) -> String {
    t.format("%F %T%.f%:z").to_string()
}

fn sqlite_values(params: Params<'_>) -> Vec<Value<'_>> {
    params.iter().map(|p| p.to_value()).collect()
}

impl Db for Sqlite<'_> {
    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize, SqlError> {
        let values = sqlite_values(params);
        let mut stmt = self.0.prepare_cached(sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(values.iter()))?)
    }

    fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, SqlError> {
        let values = sqlite_values(params);
        let mut stmt = self.0.prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                use rusqlite::types::ValueRef;
                values.push(match row.get_ref(i)? {
                    ValueRef::Null => Owned::Null,
                    ValueRef::Integer(i) => Owned::Int(i),
                    ValueRef::Real(f) => Owned::Real(f),
                    ValueRef::Text(t) => Owned::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Owned::Blob(b.to_vec()),
                });
            }
            out.push(Row { values });
        }
        Ok(out)
    }

    fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        Ok(self.0.execute_batch(sql)?)
    }
}

#[cfg(test)]
mod tests;
