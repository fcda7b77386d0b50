//! The schema: SQL migrations embedded in the binary, applied in order at
//! open, each recorded in `schema_migrations`.

use super::StoreError;
use rusqlite::Connection;

/// Every migration, in order; the version of each is its position plus one.
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
];

/// Apply the embedded migrations not yet applied to `conn`'s database.
pub(crate) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")?;
    let applied: i64 = conn.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |r| {
        r.get(0)
    })?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
        conn.execute_batch(&format!(
            "BEGIN; {sql}; INSERT INTO schema_migrations VALUES ({}); COMMIT;",
            index + 1
        ))?;
    }
    Ok(())
}
