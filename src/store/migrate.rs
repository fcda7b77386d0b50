//! The schema: SQL migrations embedded in the binary, applied in order at
//! open, each recorded in `schema_migrations`. SQLite and PostgreSQL have a
//! file each per version (`migrations/` and `migrations/postgres/`), making
//! the same tables and columns (`tests/it/postgres_schema.rs` holds them
//! together).
//!
//! Rolling upgrades: a migration only expands (new tables, new columns with
//! defaults, new indexes), narrows an index (0019: the previous release's
//! queries by kind then scan) or widens a key (0022: the API server's
//! events by request, which the previous release's inserts and queries by
//! audit id still fit), so the previous release keeps working on the
//! schema of the next one; what it would remove waits for a later release.
//! A replica therefore runs on its own version or the next one, and refuses
//! to start on anything newer, saying so.

use super::postgres::{wait, Pg, Postgres};
use super::sql::{params, Db, SqlError, Sqlite};
use super::StoreError;
use rusqlite::Connection;

/// Every SQLite migration, in order; the version of each is its position
/// plus one.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_identity.sql"),
    include_str!("migrations/0002_audit.sql"),
    include_str!("migrations/0003_agents.sql"),
    include_str!("migrations/0004_reconcile_access.sql"),
    include_str!("migrations/0005_approvals.sql"),
    include_str!("migrations/0006_web_sessions.sql"),
    include_str!("migrations/0007_settings.sql"),
    include_str!("migrations/0008_sign_in.sql"),
    include_str!("migrations/0009_group_rules.sql"),
    include_str!("migrations/0010_session_groups.sql"),
    include_str!("migrations/0011_oauth.sql"),
    include_str!("migrations/0012_mcp_sessions.sql"),
    include_str!("migrations/0013_ci_trust.sql"),
    include_str!("migrations/0014_apiserver_audit.sql"),
    include_str!("migrations/0015_login_codes.sql"),
    include_str!("migrations/0016_notify.sql"),
    include_str!("migrations/0017_audit_export.sql"),
    include_str!("migrations/0018_audit_forwarded_rows.sql"),
    include_str!("migrations/0019_audit_by_kind_partial.sql"),
    include_str!("migrations/0020_device_requester.sql"),
    include_str!("migrations/0021_session_credentials.sql"),
    include_str!("migrations/0022_consent_and_apiserver_requests.sql"),
    include_str!("migrations/0023_held_writes_requester.sql"),
    include_str!("migrations/0024_mcp_sessions_by_agent.sql"),
];

/// The same versions for PostgreSQL.
const POSTGRES_MIGRATIONS: &[&str] = &[
    include_str!("migrations/postgres/0001_identity.sql"),
    include_str!("migrations/postgres/0002_audit.sql"),
    include_str!("migrations/postgres/0003_agents.sql"),
    include_str!("migrations/postgres/0004_reconcile_access.sql"),
    include_str!("migrations/postgres/0005_approvals.sql"),
    include_str!("migrations/postgres/0006_web_sessions.sql"),
    include_str!("migrations/postgres/0007_settings.sql"),
    include_str!("migrations/postgres/0008_sign_in.sql"),
    include_str!("migrations/postgres/0009_group_rules.sql"),
    include_str!("migrations/postgres/0010_session_groups.sql"),
    include_str!("migrations/postgres/0011_oauth.sql"),
    include_str!("migrations/postgres/0012_mcp_sessions.sql"),
    include_str!("migrations/postgres/0013_ci_trust.sql"),
    include_str!("migrations/postgres/0014_apiserver_audit.sql"),
    include_str!("migrations/postgres/0015_login_codes.sql"),
    include_str!("migrations/postgres/0016_notify.sql"),
    include_str!("migrations/postgres/0017_audit_export.sql"),
    include_str!("migrations/postgres/0018_audit_forwarded_rows.sql"),
    include_str!("migrations/postgres/0019_audit_by_kind_partial.sql"),
    include_str!("migrations/postgres/0020_device_requester.sql"),
    include_str!("migrations/postgres/0021_session_credentials.sql"),
    include_str!("migrations/postgres/0022_consent_and_apiserver_requests.sql"),
    include_str!("migrations/postgres/0023_held_writes_requester.sql"),
    include_str!("migrations/postgres/0024_mcp_sessions_by_agent.sql"),
];

/// The schema version this release knows.
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

/// The key of the advisory lock replicas take while migrating, so that two
/// starting at once do not both apply a version.
const MIGRATION_LOCK: i64 = 0x706f_7274_0001;

/// Apply the embedded migrations not yet applied to `conn`'s database.
pub(crate) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")?;
    let applied = check_version(&Sqlite(conn))?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        conn.execute_batch(&format!(
            "BEGIN; {sql}; INSERT INTO schema_migrations VALUES ({}); COMMIT;",
            index + 1
        ))?;
    }
    Ok(())
}

/// Apply the PostgreSQL migrations not yet applied, under an advisory lock
/// held by one connection for the whole run.
pub(crate) fn migrate_postgres(pg: &Postgres) -> Result<(), StoreError> {
    let mut client = pg.client()?;
    let db = Pg(&client);
    db.execute("SELECT pg_advisory_lock(?1)", params![MIGRATION_LOCK])?;
    let result = create_versions_table(&Pg(&client)).and_then(|()| apply_postgres(&mut client));
    let unlocked = Pg(&client).execute("SELECT pg_advisory_unlock(?1)", params![MIGRATION_LOCK]);
    result?;
    unlocked?;
    Ok(())
}

/// The table of applied versions, made under the migration lock (checked
/// first: `IF NOT EXISTS` on a made table sends a NOTICE every replica would
/// log at each start).
fn create_versions_table(db: &dyn Db) -> Result<(), StoreError> {
    let made: Option<String> = db.query_row(
        "SELECT CAST(to_regclass('schema_migrations') AS TEXT)",
        params![],
        |r| r.get(0),
    )?;
    if made.is_none() {
        db.execute_batch("CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY)")?;
    }
    Ok(())
}

fn apply_postgres(client: &mut deadpool_postgres::Object) -> Result<(), StoreError> {
    let applied = check_version(&Pg(&*client))?;
    for (index, sql) in POSTGRES_MIGRATIONS.iter().enumerate().skip(applied) {
        let tx = wait(client.transaction()).map_err(SqlError::from)?;
        let db = Pg(&tx);
        db.execute_batch(sql)?;
        db.execute(
            "INSERT INTO schema_migrations (version) VALUES (?1)",
            params![(index + 1) as i64],
        )?;
        wait(tx.commit()).map_err(SqlError::from)?;
    }
    Ok(())
}

/// The version applied, or a refusal when it is newer than this release
/// can run on.
fn check_version(db: &dyn Db) -> Result<usize, StoreError> {
    let applied: i64 = db.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        params![],
        |r| r.get(0),
    )?;
    let applied = applied.max(0) as usize;
    if applied > SCHEMA_VERSION + 1 {
        return Err(StoreError::Invalid(format!(
            "the store's schema is version {applied}, newer than this release of portcullis runs on \
             (version {SCHEMA_VERSION}, or {} during a rolling upgrade): run a newer portcullis",
            SCHEMA_VERSION + 1
        )));
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_version(version: usize) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        conn.execute("DELETE FROM schema_migrations", []).unwrap();
        conn.execute("INSERT INTO schema_migrations VALUES (?1)", [version as i64])
            .unwrap();
        conn
    }

    #[test]
    fn a_store_one_version_ahead_is_run_on_during_a_rolling_upgrade() {
        let conn = with_version(SCHEMA_VERSION + 1);
        migrate(&conn).unwrap();
    }

    #[test]
    fn both_backends_have_a_migration_for_every_version() {
        assert_eq!(POSTGRES_MIGRATIONS.len(), MIGRATIONS.len());
    }

    #[test]
    fn a_postgres_store_migrates_once_and_refuses_a_schema_two_versions_ahead() {
        let store = crate::store::testing::postgres();
        let Some(pg) = store.postgres_pool() else {
            panic!("not on PostgreSQL")
        };
        // A second replica starting on the same database applies nothing.
        migrate_postgres(&pg).unwrap();
        store
            .with(|c| {
                Ok(c.execute(
                    "INSERT INTO schema_migrations (version) VALUES (?1)",
                    params![(SCHEMA_VERSION + 2) as i64],
                )?)
            })
            .unwrap();
        let err = migrate_postgres(&pg).unwrap_err().to_string();
        assert!(err.contains("run a newer portcullis"), "{err}");
    }

    #[test]
    fn a_store_two_versions_ahead_is_refused_with_a_message_saying_so() {
        let conn = with_version(SCHEMA_VERSION + 2);
        let err = migrate(&conn).unwrap_err().to_string();
        assert!(err.contains(&format!("version {}", SCHEMA_VERSION + 2)), "{err}");
        assert!(err.contains("run a newer portcullis"), "{err}");
    }
}
