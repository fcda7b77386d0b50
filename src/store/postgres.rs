//! The PostgreSQL backend of the store, for several replicas.
//!
//! tokio-postgres connections in a deadpool pool, driven by a small runtime
//! of the store's own: the repository is synchronous (it runs on blocking
//! threads, as SQLite does), and waits for each statement with a plain
//! executor while the connection's task does the I/O on that runtime. No
//! thread of the server's runtime ever drives a connection it also waits
//! for, so a waiting request cannot starve the database.

use super::sql::{Db, Owned, Params, Row, SqlError, Value};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::types::{IsNull, ToSql, Type};

/// TLS to PostgreSQL: rustls, through tokio-postgres-rustls.
pub type Tls = tokio_postgres_rustls::MakeRustlsConnect;

/// TLS as the URL's `sslmode` asks for it (`prefer`, the default: when the
/// server offers it; `require`: always), the server's certificate checked
/// against the system's roots and, when `ca_file` names one, a private CA
/// (as in-cluster PostgreSQL operators issue). A certificate that does not
/// check out is refused, never passed over for plain text.
pub fn tls(ca_file: Option<&Path>) -> Result<Tls, String> {
    let roots = crate::tls::system_roots_and(ca_file).map_err(|message| {
        let path = ca_file.map(|p| p.display().to_string()).unwrap_or_default();
        format!("[store] ca_file {path}: {message}")
    })?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS to PostgreSQL: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Tls::new(config))
}

/// Connections to one PostgreSQL database.
pub struct Postgres {
    pool: Pool,
    runtime: Runtime,
    /// Where the pool connects, kept for connections outside it (the
    /// notification listener's).
    config: tokio_postgres::Config,
    tls: Tls,
    /// The notification listener, started by the first subscriber.
    listener: super::notify::Listener,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Postgres")
    }
}

/// The store's own runtime; dropped without waiting, from any context (a
/// `Store` may be dropped inside the server's runtime).
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Runtime {
    fn handle(&self) -> &tokio::runtime::Handle {
        self.0
            .as_ref()
            .expect("the store's runtime runs until dropped")
            .handle()
    }
}

/// Most connections one replica keeps open.
const POOL_SIZE: usize = 16;

impl Postgres {
    /// A pool on `config` (connections are made when first needed).
    pub fn connect(config: tokio_postgres::Config, tls: Tls) -> Result<Postgres, SqlError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("portcullis-postgres")
            .enable_all()
            .build()
            .map_err(|e| SqlError::Pool(format!("starting the store's runtime: {e}")))?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| SqlError::Pool(e.to_string()))?;
        Ok(Postgres {
            pool,
            runtime: Runtime(Some(runtime)),
            config,
            tls,
            listener: super::notify::Listener::default(),
        })
    }

    /// The store's runtime, for tasks of its own (notifications).
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime.handle()
    }

    /// Where the pool connects (password included: never print it).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The pool's TLS, for connections outside it.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The notification listener of this database.
    pub(crate) fn listener(&self) -> &super::notify::Listener {
        &self.listener
    }

    /// A connection from the pool, waited for on this thread.
    pub fn client(&self) -> Result<deadpool_postgres::Object, SqlError> {
        let pool = self.pool.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.handle().spawn(async move {
            let _ = tx.send(pool.get().await);
        });
        match rx.recv() {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(SqlError::Pool(crate::text::with_causes(&e))),
            Err(_) => Err(SqlError::Pool("the store's runtime has stopped".into())),
        }
    }
}

/// Wait for `future` on this thread; its connection's task runs on the
/// store's runtime.
pub fn wait<F: std::future::Future>(future: F) -> F::Output {
    futures_executor::block_on(future)
}

/// A pooled connection or a transaction on one, as a [`Db`].
pub struct Pg<'a, C: GenericClient + Sync>(pub &'a C);

impl<C: GenericClient + Sync> Db for Pg<'_, C> {
    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize, SqlError> {
        let values: Vec<Value<'_>> = params.iter().map(|p| p.to_value()).collect();
        let bound: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let sql = placeholders(sql);
        wait(async {
            let statement = self.0.prepare_cached(&sql).await?;
            let n = self.0.execute(&statement, &bound).await?;
            Ok(n as usize)
        })
    }

    fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, SqlError> {
        let values: Vec<Value<'_>> = params.iter().map(|p| p.to_value()).collect();
        let bound: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let sql = placeholders(sql);
        let rows = wait(async {
            let statement = self.0.prepare_cached(&sql).await?;
            self.0.query(&statement, &bound).await
        })?;
        rows.iter().map(row).collect()
    }

    fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        Ok(wait(self.0.batch_execute(sql))?)
    }
}

/// `?1` → `$1`, and a bare `?` → the next number, outside quotes.
pub fn placeholders(sql: &str) -> Cow<'_, str> {
    if !sql.contains('?') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let (mut quote, mut next) = (None::<char>, 1);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '?') => {
                out.push('$');
                if chars.peek().is_some_and(char::is_ascii_digit) {
                    continue;
                }
                out.push_str(&next.to_string());
                next += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    Cow::Owned(out)
}

fn row(row: &tokio_postgres::Row) -> Result<Row, SqlError> {
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        values.push(column_value(row, i, column.type_())?);
    }
    Ok(Row { values })
}

fn column_value(row: &tokio_postgres::Row, i: usize, ty: &Type) -> Result<Owned, SqlError> {
    fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
        row: &'a tokio_postgres::Row,
        i: usize,
    ) -> Result<Option<T>, SqlError> {
        row.try_get::<_, Option<T>>(i).map_err(SqlError::from)
    }
    let value = match *ty {
        Type::BOOL => get::<bool>(row, i)?.map(Owned::Bool),
        Type::INT2 => get::<i16>(row, i)?.map(|v| Owned::Int(v.into())),
        Type::INT4 => get::<i32>(row, i)?.map(|v| Owned::Int(v.into())),
        Type::INT8 => get::<i64>(row, i)?.map(Owned::Int),
        Type::FLOAT4 => get::<f32>(row, i)?.map(|v| Owned::Real(v.into())),
        Type::FLOAT8 => get::<f64>(row, i)?.map(Owned::Real),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            get::<String>(row, i)?.map(Owned::Text)
        }
        Type::BYTEA => get::<Vec<u8>>(row, i)?.map(Owned::Blob),
        Type::TIMESTAMPTZ => get::<chrono::DateTime<chrono::Utc>>(row, i)?.map(Owned::Time),
        ref other => {
            return Err(SqlError::decode(
                i,
                format!("PostgreSQL type {other} is not read here: cast it"),
            ));
        }
    };
    Ok(value.unwrap_or(Owned::Null))
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

fn int_to_sql(i: i64, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::INT8 => i.to_sql(ty, out),
        Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
        Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
        Type::BOOL => (i != 0).to_sql(ty, out),
        Type::FLOAT8 => (i as f64).to_sql(ty, out),
        Type::TEXT | Type::VARCHAR | Type::UNKNOWN => i.to_string().to_sql(ty, out),
        _ => Err(format!("an integer cannot be a {ty} parameter").into()),
    }
}

/// Each value becomes the type PostgreSQL inferred for its parameter.
impl ToSql for Value<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => int_to_sql(i, ty, out),
            Value::Bool(b) if *ty == Type::BOOL => b.to_sql(ty, out),
            Value::Bool(b) => int_to_sql(b as i64, ty, out),
            Value::Real(f) if *ty == Type::FLOAT4 => (f as f32).to_sql(ty, out),
            Value::Real(f) => f.to_sql(ty, out),
            Value::Text(s) if *ty == Type::TIMESTAMPTZ => {
                let time = <chrono::DateTime<chrono::Utc> as super::sql::FromSql>::from_sql(&Owned::Text(s.into()))?;
                time.to_sql(ty, out)
            }
            Value::Text(s) => s.to_sql(ty, out),
            Value::Blob(b) => b.to_sql(ty, out),
            Value::Time(t) if *ty == Type::TIMESTAMPTZ => t.to_sql(ty, out),
            Value::Time(t) => super::sql::sqlite_time(&t).to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn numbered_and_bare_placeholders_become_dollars_outside_quotes() {
        assert_eq!(placeholders("SELECT 1"), "SELECT 1");
        assert_eq!(
            placeholders("a = ?1 AND b = ?12 OR ?1 IS NULL"),
            "a = $1 AND b = $12 OR $1 IS NULL"
        );
        assert_eq!(placeholders("a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(placeholders("x = '?1' AND \"q?\" = ?2"), "x = '?1' AND \"q?\" = $2");
    }
}

#[cfg(test)]
#[path = "postgres_tls_tests.rs"]
mod tls_tests;
