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

use crate::identity::authenticate::CredentialLookup;
use crate::identity::{credential, Audience, Credential, Grant, Origin, Principal, PrincipalKind};
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub(crate) mod sql;
pub mod postgres;

mod access;
mod agents;
mod apiserver_audit;
mod approvals;
mod consent;
mod credentials;
mod group_rules;
mod login_codes;
mod mcp_sessions;
mod migrate;
mod oauth;
mod oauth_clients;
mod people;
mod reconcile;
mod sessions;
mod trust;

pub use access::{AccessRequest, AccessState};
pub use apiserver_audit::{ApiserverEvent, Checked, Coverage, Sent};
pub use approvals::{HeldRequest, HeldState, HeldWrite, Outcome, Precondition, Preview};
pub use group_rules::{GroupRule, RuleGrantChange};
pub use login_codes::{CliCode, DeviceDecision, DevicePoll};
pub(crate) use migrate::migrate;
pub use oauth::{AgentSession, SessionPlan, Taken};
pub use oauth_clients::RegisteredClient;
pub use people::{ProviderPerson, SignInPerson};
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

/// How many times a PostgreSQL write transaction that lost a race to
/// another replica's is run again.
const WRITE_ATTEMPTS: usize = 8;

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

/// A person or bot as listed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PrincipalRecord {
    /// Who.
    pub principal: Principal,
    /// Disabled principals' credentials stop working.
    pub disabled: bool,
    /// For bots: writes wait for a person's approval.
    pub writes_need_approval: bool,
    /// For people: may read everyone's audit (`GET /audit`).
    pub admin: bool,
    /// When added.
    pub created_at: DateTime<Utc>,
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

    /// Connect to the PostgreSQL database of `config` and migrate it.
    pub fn connect(config: tokio_postgres::Config) -> Result<Store, StoreError> {
        let pg = postgres::Postgres::connect(config)?;
        migrate::migrate_postgres(&pg)?;
        Ok(Store {
            backend: Backend::Postgres(Arc::new(pg)),
        })
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
                let mut client = pg.client()?;
                let mut attempt = 1;
                loop {
                    match pg_transaction(&mut client, &mut f) {
                        Err(e) if e.must_retry() && attempt < WRITE_ATTEMPTS => attempt += 1,
                        done => return done,
                    }
                }
            }
        }
    }

    /// Run `f` with the SQLite connection: the repository's code not yet
    /// written against [`sql::Db`]. On PostgreSQL it fails, saying so.
    fn sqlite<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                f(&conn)
            }
            Backend::Postgres(_) => Err(StoreError::Invalid("not available on PostgreSQL yet".into())),
        }
    }

    /// Add a person or bot.
    pub fn add_principal(&self, principal: &Principal, writes_need_approval: bool) -> Result<(), StoreError> {
        validate_name(&principal.name)?;
        self.sqlite(|c| {
            let inserted = c.execute(
                "INSERT OR IGNORE INTO principals (kind, name, disabled, writes_need_approval, created_at) VALUES (?1, ?2, 0, ?3, ?4)",
                params![principal.kind.as_str(), principal.name, writes_need_approval, Utc::now()],
            )?;
            if inserted == 0 {
                return Err(StoreError::AlreadyExists(principal.to_string()));
            }
            Ok(())
        })
    }

    /// List people or bots.
    pub fn list_principals(&self, kind: PrincipalKind) -> Result<Vec<PrincipalRecord>, StoreError> {
        self.sqlite(|c| {
            let mut stmt = c.prepare(
                "SELECT name, disabled, writes_need_approval, admin, created_at FROM principals WHERE kind = ?1 ORDER BY name",
            )?;
            let rows = stmt.query_map(params![kind.as_str()], |r| {
                Ok(PrincipalRecord {
                    principal: Principal { kind, name: r.get(0)? },
                    disabled: r.get(1)?,
                    writes_need_approval: r.get(2)?,
                    admin: r.get(3)?,
                    created_at: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Mark a person as an admin (may read everyone's audit), or not.
    pub fn set_admin(&self, principal: &Principal, admin: bool) -> Result<(), StoreError> {
        self.sqlite(|c| {
            let n = c.execute(
                "UPDATE principals SET admin = ?3 WHERE kind = ?1 AND name = ?2",
                params![principal.kind.as_str(), principal.name, admin],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(principal.to_string()));
            }
            Ok(())
        })
    }

    /// Is `principal` an enabled admin?
    pub fn is_admin(&self, principal: &Principal) -> Result<bool, StoreError> {
        self.sqlite(|c| {
            let found: Option<bool> = c
                .query_row(
                    "SELECT admin AND NOT disabled FROM principals WHERE kind = ?1 AND name = ?2",
                    params![principal.kind.as_str(), principal.name],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(found.unwrap_or(false))
        })
    }

    /// Disable a person or bot: its credentials stop working; a person's
    /// are revoked too (offboarding: re-enabling brings none back) and their
    /// sign-in sessions end.
    pub fn disable_principal(&self, principal: &Principal) -> Result<(), StoreError> {
        self.sqlite(|c| {
            let tx = write_transaction(c)?;
            let n = tx.execute(
                "UPDATE principals SET disabled = 1 WHERE kind = ?1 AND name = ?2",
                params![principal.kind.as_str(), principal.name],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(principal.to_string()));
            }
            if principal.kind == PrincipalKind::Person {
                tx.execute("DELETE FROM web_sessions WHERE login = ?1", params![principal.name])?;
                tx.execute(
                    "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE kind = 'person' AND owner = ?1",
                    params![principal.name, Utc::now()],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Issue a credential; returns its record and the token (shown once).
    pub fn issue_credential(
        &self,
        principal: &Principal,
        name: &str,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(Credential, String), StoreError> {
        self.issue_credential_with(principal, name, expires_at, &Origin::default())
    }

    /// Issue a credential with an origin: where it is accepted and what
    /// issued it (an OAuth access token, a CI job's exchanged token).
    pub fn issue_credential_with(
        &self,
        principal: &Principal,
        name: &str,
        expires_at: Option<DateTime<Utc>>,
        origin: &Origin,
    ) -> Result<(Credential, String), StoreError> {
        let new = credential::mint();
        let credential = Credential {
            id: uuid::Uuid::now_v7().to_string(),
            principal: principal.clone(),
            name: name.to_string(),
            display_prefix: new.display_prefix.clone(),
            created_at: Utc::now(),
            expires_at,
            last_used_at: None,
            revoked_at: None,
        };
        self.sqlite(|c| {
            exists(c, principal)?;
            c.execute(
                "INSERT INTO credentials (id, kind, owner, name, token_sha256, display_prefix, created_at, expires_at, audience, via) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![credential.id, principal.kind.as_str(), principal.name, name, new.hash, new.display_prefix, credential.created_at, expires_at, origin.audience.map(Audience::as_str), origin.via],
            )?;
            Ok(())
        })?;
        Ok((credential, new.token))
    }

    /// Find a credential by the SHA-256 of its token.
    pub fn lookup_credential(&self, token_sha256: &str) -> Result<Option<CredentialLookup>, StoreError> {
        self.sqlite(|c| {
            Ok(c.query_row(
                &format!("{CREDENTIAL_SELECT} WHERE c.token_sha256 = ?1"),
                params![token_sha256],
                |r| {
                    let audience: Option<String> = r.get(10)?;
                    let via: String = r.get(11)?;
                    // An audience this release does not know fails the lookup
                    // (closed), rather than letting the token go anywhere.
                    let audience = match audience.as_deref().map(Audience::parse) {
                        Some(None) => {
                            let unknown = "unknown credential audience".into();
                            return Err(rusqlite::Error::FromSqlConversionFailure(
                                10,
                                rusqlite::types::Type::Text,
                                unknown,
                            ));
                        }
                        parsed => parsed.flatten(),
                    };
                    let origin = (audience.is_some() || !via.is_empty()).then_some(Origin { audience, via });
                    Ok(CredentialLookup {
                        credential: credential_row(r)?,
                        owner_disabled: r.get(9)?,
                        origin,
                    })
                },
            )
            .optional()?)
        })
    }

    /// List credentials, optionally of one principal.
    pub fn list_credentials(&self, owner: Option<&Principal>) -> Result<Vec<Credential>, StoreError> {
        self.sqlite(|c| {
            let mut stmt = c.prepare(&format!(
                "{CREDENTIAL_SELECT} WHERE (?1 IS NULL OR (c.kind = ?1 AND c.owner = ?2)) ORDER BY c.created_at"
            ))?;
            let (kind, name) = owner.map_or((None, None), |p| (Some(p.kind.as_str()), Some(p.name.as_str())));
            let rows = stmt.query_map(params![kind, name], credential_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Revoke a credential at once.
    pub fn revoke_credential(&self, id: &str) -> Result<(), StoreError> {
        self.sqlite(|c| {
            let n = c.execute(
                "UPDATE credentials SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                params![id, Utc::now()],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("credential {id}")));
            }
            Ok(())
        })
    }

    /// Record that a credential was used.
    pub fn touch_credential(&self, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.sqlite(|c| {
            c.execute(
                "UPDATE credentials SET last_used_at = ?2 WHERE id = ?1",
                params![id, at],
            )?;
            Ok(())
        })
    }

    /// Add a grant.
    pub fn add_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        self.sqlite(|c| {
            exists(c, &grant.subject)?;
            c.execute(
                "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![grant.id, grant.subject.kind.as_str(), grant.subject.name, grant.cluster, grant.namespace, grant.role, grant.expires_at, grant.granted_by, grant.created_at],
            )?;
            Ok(())
        })
    }

    /// Grants of `subject` on `cluster` (all, in effect or not).
    pub fn grants_of(&self, subject: &Principal, cluster: &str) -> Result<Vec<Grant>, StoreError> {
        self.query_grants(
            &format!("{GRANT_SELECT} WHERE kind = ?1 AND subject = ?2 AND cluster = ?3 AND revoked_at IS NULL ORDER BY created_at"),
            params![subject.kind.as_str(), subject.name, cluster],
        )
    }

    /// All grants, newest last.
    pub fn list_grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.query_grants(&format!("{GRANT_SELECT} ORDER BY created_at"), params![])
    }

    /// Revoke a grant at once.
    pub fn revoke_grant(&self, id: &str) -> Result<(), StoreError> {
        self.sqlite(|c| {
            let n = c.execute(
                "UPDATE grants SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                params![id, Utc::now()],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("grant {id}")));
            }
            Ok(())
        })
    }

    fn query_grants(&self, sql: &str, args: impl rusqlite::Params) -> Result<Vec<Grant>, StoreError> {
        self.sqlite(|c| {
            let mut stmt = c.prepare(sql)?;
            let rows = stmt.query_map(args, grant_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }
}

const CREDENTIAL_SELECT: &str = "SELECT c.id, c.kind, c.owner, c.name, c.display_prefix, c.created_at, c.expires_at, c.last_used_at, c.revoked_at, p.disabled, c.audience, c.via FROM credentials c JOIN principals p ON p.kind = c.kind AND p.name = c.owner";
const GRANT_SELECT: &str =
    "SELECT id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, revoked_at FROM grants";

fn kind_of(r: &Row, index: usize) -> rusqlite::Result<PrincipalKind> {
    let text: String = r.get(index)?;
    PrincipalKind::parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, format!("bad kind {text}").into())
    })
}

fn credential_row(r: &Row) -> rusqlite::Result<Credential> {
    Ok(Credential {
        id: r.get(0)?,
        principal: Principal {
            kind: kind_of(r, 1)?,
            name: r.get(2)?,
        },
        name: r.get(3)?,
        display_prefix: r.get(4)?,
        created_at: r.get(5)?,
        expires_at: r.get(6)?,
        last_used_at: r.get(7)?,
        revoked_at: r.get(8)?,
    })
}

fn grant_row(r: &Row) -> rusqlite::Result<Grant> {
    Ok(Grant {
        id: r.get(0)?,
        subject: Principal {
            kind: kind_of(r, 1)?,
            name: r.get(2)?,
        },
        cluster: r.get(3)?,
        namespace: r.get(4)?,
        role: r.get(5)?,
        expires_at: r.get(6)?,
        granted_by: r.get(7)?,
        created_at: r.get(8)?,
        revoked_at: r.get(9)?,
    })
}

fn exists(c: &Connection, principal: &Principal) -> Result<(), StoreError> {
    let found: Option<i64> = c
        .query_row(
            "SELECT 1 FROM principals WHERE kind = ?1 AND name = ?2",
            params![principal.kind.as_str(), principal.name],
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
