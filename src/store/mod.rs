//! Storage of people, bots, credentials and grants.
//!
//! Embedded SQLite (WAL mode) in the data directory: one command runs
//! everything on one machine, and the CLI can work on the same file while the
//! server runs. Migrations are embedded and applied at open. The request path
//! reads through caches (see `identity::authenticate`); the store is touched on
//! a cache miss only.
//!
//! The rows it keeps for the domain modules (access requests, held writes,
//! cluster status) are declared here and re-exported there, so the store
//! imports nothing above `identity`.

use crate::identity::Principal;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod copy;
pub mod postgres;
pub(crate) mod sql;
#[cfg(test)]
pub(crate) mod testing;

pub use copy::copy_sqlite_into;

mod access;
mod agents;
mod apiserver_audit;
mod approvals;
mod consent;
mod credentials;
mod grants;
mod group_rules;
mod jobs;
mod login_codes;
mod mcp_sessions;
mod migrate;
pub mod notify;
mod oauth;
mod oauth_clients;
mod people;
mod principals;
mod reconcile;
mod sessions;
mod trust;

#[cfg(test)]
pub(crate) use access::pending_for_tests;
pub use access::{AccessRequest, AccessState, Given};
pub use apiserver_audit::{ApiserverEvent, Checked, Coverage, Sends, Sent};
pub use approvals::{HeldRequest, HeldState, HeldWrite, Inserted, Outcome, Precondition, Preview};
pub use group_rules::{GroupRule, RuleGrantChange};
pub use login_codes::{CliCode, DeviceDecision, DevicePoll, DeviceRequest};
pub(crate) use migrate::migrate;
pub use oauth::{AgentSession, NewTokens, Refreshed, SessionPlan, Taken};
pub use oauth_clients::RegisteredClient;
pub use people::{ProviderPerson, SignInPerson};
pub use principals::PrincipalRecord;
pub use reconcile::ClusterStatus;
pub use sessions::WebSession;
pub use trust::TrustRule;

/// A transaction that writes, begun IMMEDIATE: it takes the write lock
/// first, waiting up to the busy timeout for another connection's (the
/// audit writer's). A deferred one that reads and then writes fails at once
/// with SQLITE_BUSY when another connection committed in between, whatever
/// the timeout (WAL mode cannot upgrade a stale snapshot): the intermittent
/// 503 of a sign-in under load.
pub(crate) fn write_transaction(c: &Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)
}

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sql::SqlError),
    /// Something named does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// Something with that name exists already.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The request makes no sense.
    #[error("{0}")]
    Invalid(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Database(e.into())
    }
}

impl StoreError {
    /// A PostgreSQL transaction that lost a race with another (serialization
    /// failure or deadlock): running it again is the remedy.
    fn must_retry(&self) -> bool {
        match self {
            StoreError::Database(sql::SqlError::Postgres(e)) => e.code().is_some_and(|code| {
                *code == tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
                    || *code == tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED
            }),
            _ => false,
        }
    }
}

/// A handle on the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
}

/// Where the store keeps its rows.
#[derive(Clone)]
enum Backend {
    /// The embedded SQLite file: one connection, and the file's path for
    /// the audit writer's own.
    Sqlite {
        conn: Arc<Mutex<Connection>>,
        path: Arc<PathBuf>,
    },
    /// A PostgreSQL database shared by replicas.
    Postgres(Arc<postgres::Postgres>),
}

/// How many times, at most, a PostgreSQL write transaction runs when it
/// keeps losing races to other replicas' (its first run included).
const WRITE_ATTEMPTS: u32 = 12;

/// The pause before running a lost transaction again: random, so racers
/// that all lost do not meet again at once, and growing, so a crowd
/// thins out (run again at once, eight racers could each lose eight
/// times, as CI once saw).
fn retry_pause(attempt: u32) -> std::time::Duration {
    let ceiling_ms = (2u64 << attempt.min(16)).min(RETRY_PAUSE_MAX_MS);
    std::time::Duration::from_micros(rand::random_range(0..ceiling_ms * 1000))
}

/// The longest pause between two runs of a lost transaction.
const RETRY_PAUSE_MAX_MS: u64 = 100;

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

impl Store {
    /// Open (creating if needed) the SQLite database at `path` and migrate it.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        // First: the WAL pragma may wait on a lock held by another connection.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        migrate(&conn)?;
        Ok(Store {
            backend: Backend::Sqlite {
                conn: Arc::new(Mutex::new(conn)),
                path: Arc::new(path.to_path_buf()),
            },
        })
    }

    /// Connect to the PostgreSQL database of `config` and migrate it; TLS
    /// as its `sslmode` says, checked against the system's roots.
    pub fn connect(config: tokio_postgres::Config) -> Result<Store, StoreError> {
        Store::connect_with_ca(config, None)
    }

    /// [`connect`](Self::connect), trusting also the CA certificates in
    /// `ca_file` (`[store] ca_file`).
    pub fn connect_with_ca(config: tokio_postgres::Config, ca_file: Option<&Path>) -> Result<Store, StoreError> {
        let tls = postgres::tls(ca_file).map_err(StoreError::Invalid)?;
        let pg = postgres::Postgres::connect(config, tls)?;
        migrate::migrate_postgres(&pg)?;
        Ok(Store {
            backend: Backend::Postgres(Arc::new(pg)),
        })
    }

    /// The PostgreSQL pool, when the store is on PostgreSQL (the audit's
    /// own store and the notification listener use it).
    pub fn postgres_pool(&self) -> Option<Arc<postgres::Postgres>> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg.clone()),
            Backend::Sqlite { .. } => None,
        }
    }

    /// The SQLite file (the audit writer opens its own connection to it);
    /// `None` on PostgreSQL.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Sqlite { path, .. } => Some(path),
            Backend::Postgres(_) => None,
        }
    }

    /// The database file (the audit writer opens its own connection to it).
    pub fn path(&self) -> &Path {
        self.sqlite_path().unwrap_or(Path::new(""))
    }

    /// Run `f` on a connection, each statement committed on its own.
    /// Blocking: from async code, call inside `spawn_blocking`.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&dyn sql::Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                f(&sql::Sqlite(&conn))
            }
            Backend::Postgres(pg) => {
                let client = pg.client()?;
                f(&postgres::Pg(&client))
            }
        }
    }

    /// Run `f` in one write transaction, committed when it returns `Ok`.
    /// SQLite: begun IMMEDIATE ([`write_transaction`]). PostgreSQL:
    /// SERIALIZABLE, as SQLite's one writer at a time is, and run again
    /// when it loses a race with another replica's, so `f` may run more
    /// than once and must do nothing but its statements.
    pub(crate) fn write<T>(&self, mut f: impl FnMut(&dyn sql::Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let tx = write_transaction(&conn)?;
                let out = f(&sql::Sqlite(&tx))?;
                tx.commit()?;
                Ok(out)
            }
            Backend::Postgres(pg) => {
                let mut attempt = 1;
                loop {
                    // A connection per run: not held idle through the pause,
                    // while others may be waiting for one from the pool.
                    let mut client = pg.client()?;
                    match pg_transaction(&mut client, &mut f) {
                        Err(e) if e.must_retry() && attempt < WRITE_ATTEMPTS => {
                            drop(client);
                            std::thread::sleep(retry_pause(attempt));
                            attempt += 1;
                        }
                        done => return done,
                    }
                }
            }
        }
    }

    /// Run `f` with the SQLite connection itself (copying a whole SQLite
    /// store into PostgreSQL reads it table by table). On PostgreSQL it
    /// fails, saying so.
    fn sqlite<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                f(&conn)
            }
            Backend::Postgres(_) => Err(StoreError::Invalid("this store is not an SQLite file".into())),
        }
    }
}

fn exists(c: &dyn sql::Db, principal: &Principal) -> Result<(), StoreError> {
    use sql::OptionalExt;
    let found: Option<i64> = c
        .query_row(
            "SELECT 1 FROM principals WHERE kind = ?1 AND name = ?2",
            sql::params![principal.kind.as_str(), principal.name],
            |r| r.get(0),
        )
        .optional()?;
    found
        .map(|_| ())
        .ok_or_else(|| StoreError::NotFound(principal.to_string()))
}

fn pg_transaction<T>(
    client: &mut deadpool_postgres::Object,
    f: &mut impl FnMut(&dyn sql::Db) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let tx = postgres::wait(
        client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::Serializable)
            .start(),
    )
    .map_err(sql::SqlError::from)?;
    let out = f(&postgres::Pg(&tx))?;
    postgres::wait(tx.commit()).map_err(sql::SqlError::from)?;
    Ok(out)
}

/// Logins and bot names become Kubernetes user names: keep them plain.
pub(crate) fn validate_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_'))
        && name.as_bytes()[0].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "invalid name {name:?}: use 1-63 lower-case letters, digits, '-', '.' or '_', starting with a letter or digit"
        )))
    }
}

#[cfg(test)]
mod tests;
