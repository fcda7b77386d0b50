//! The audit's export shared by the replicas: one cursor row in
//! `audit_export`, locked by whichever replica exports, so a row goes to
//! exactly one replica's sink however many append to the chain.

use super::{head_of, json, PostgresAuditStore};
use crate::audit::store::ExportWrite;
use crate::audit::AuditError;
use crate::store::sql::{params, OptionalExt};

/// Rows exported per turn; the exporter asks again while pages are full.
pub(super) const PAGE: i64 = 1000;

impl PostgresAuditStore {
    pub(super) fn export_turn(&mut self, write: Option<ExportWrite<'_>>) -> Result<usize, AuditError> {
        let Some(write) = write else {
            self.transaction(false, |db| {
                let head = head_of(db)?;
                db.execute(
                    "INSERT INTO audit_export (one, seq) VALUES (1, ?1) ON CONFLICT (one) DO NOTHING",
                    params![head.seq],
                )?;
                Ok(0)
            })?;
            return Ok(0);
        };
        self.transaction(false, |db| {
            // Waits while another replica exports: it may be exporting the
            // rows this one just committed, and the next turn finds them done.
            let cursor: Option<i64> = db
                .query_row(
                    "SELECT seq FROM audit_export WHERE one = 1 FOR UPDATE",
                    params![],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(cursor) = cursor else {
                return Err(AuditError::Store("the audit export has no cursor".into()));
            };
            let texts: Vec<String> = db.query_map(
                "SELECT CAST(row_to_json(a) AS TEXT) FROM audit AS a WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                params![cursor, PAGE],
                |r| r.get(0),
            )?;
            let rows = texts
                .iter()
                .map(|text| json::chained_row(text))
                .collect::<Result<Vec<_>, _>>()?;
            let Some(last) = rows.last() else {
                return Ok(0);
            };
            // Written before the cursor moves: a crash between the two
            // exports these rows again rather than never, and a sink that
            // failed leaves them to the next turn (this replica's or
            // another's).
            write(&rows).map_err(|error| AuditError::Store(format!("the export sink failed: {error}")))?;
            db.execute("UPDATE audit_export SET seq = ?1 WHERE one = 1", params![last.seq])?;
            Ok(rows.len())
        })
    }
}
