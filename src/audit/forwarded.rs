//! Forwarded records: that a request left portcullis for a cluster, written
//! when it leaves rather than when its row is (a watch's or an exec's row
//! is written when it closes, hours later perhaps). The API server's events
//! are matched against rows, intents and these records (`audit::bypass`),
//! so a stream still open is never taken for a bypass; a client's record
//! names whom it was sent as, so one impersonating someone else under its
//! id still is.
//!
//! The request path hands them to the audit writer, which commits them
//! with its next batch of rows; portcullis's own requests (the reconciler's)
//! are recorded the same way, as kind `system` ([`Recorder`]). A client
//! request whose row is in the same commit (most reads: they end within
//! the commit window) needs no record: its row is marked instead
//! ([`stand_in`]).

use super::chain::Encoded;
use super::writer::AuditWriter;
use crate::store::Store;
use chrono::{DateTime, SubsecRound, Utc};
use std::collections::HashMap;

/// The kind of a client's read (through the pipeline): one request to the
/// cluster under its audit id.
const REQUEST: &str = "request";
/// The kind of a client's write: its hold stage may send a dry run and a
/// read under the same audit id before the write itself.
pub const WRITE: &str = "write";

/// A request that left for a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// The `Audit-ID` it carried.
    pub id: String,
    /// The cluster.
    pub cluster: String,
    /// `request` (a client's read, through the pipeline), `write` (a
    /// client's write, or a request its hold stage sends) or `system`
    /// (portcullis's own).
    pub kind: &'static str,
    /// Whom a client's request impersonates: `person` or `bot` (empty for
    /// portcullis's own, or not said), and its login, so that a stream
    /// still open, whose row is not written yet, says whom it was sent as.
    pub principal_kind: &'static str,
    /// The person's or bot's name.
    pub login: String,
    /// When it left.
    pub at: DateTime<Utc>,
}

impl Forwarded {
    /// A client's request `id` to `cluster`, leaving now.
    pub fn request(id: &str, cluster: &str) -> Forwarded {
        Forwarded {
            id: id.to_string(),
            cluster: cluster.to_string(),
            kind: REQUEST,
            principal_kind: "",
            login: String::new(),
            at: Utc::now().trunc_subsecs(6),
        }
    }

    /// Sent as the person or bot `login` (`principal_kind` as a row says
    /// it; any other kind says nobody).
    pub fn as_principal(self, principal_kind: &str, login: &str) -> Forwarded {
        let principal_kind = match principal_kind {
            "person" => "person",
            "bot" => "bot",
            _ => return self,
        };
        Forwarded {
            principal_kind,
            login: login.to_string(),
            ..self
        }
    }

    /// A client's write `id` to `cluster`, or a request sent under its
    /// audit id (a dry run), leaving now.
    pub fn write(id: &str, cluster: &str) -> Forwarded {
        Forwarded {
            kind: WRITE,
            ..Forwarded::request(id, cluster)
        }
    }

    /// portcullis's own request `id` to `cluster`, leaving now.
    pub fn system(id: &str, cluster: &str) -> Forwarded {
        Forwarded {
            kind: "system",
            ..Forwarded::request(id, cluster)
        }
    }
}

/// Leave out of `records` each client request's record whose row is among
/// `rows` (one commit), and mark that row instead: the row's `forwarded`
/// column stands for the record (the row says whether it was a write), so
/// a read costs the store one row, not a row and a record. portcullis's own
/// records (`system`) stay: their kind says the request impersonated nobody.
pub fn stand_in(records: Vec<Forwarded>, rows: &mut [Encoded]) -> Vec<Forwarded> {
    if records.is_empty() || rows.is_empty() {
        return records;
    }
    let mut stood_for = vec![false; records.len()];
    // Sized at once, and not SipHash: the keys are portcullis's own audit
    // ids and configured clusters.
    let mut requests = HashMap::with_capacity_and_hasher(records.len(), foldhash::fast::RandomState::default());
    requests.extend(
        records
            .iter()
            .enumerate()
            .filter(|(_, record)| record.kind == REQUEST || record.kind == WRITE)
            .map(|(i, record)| ((record.id.as_str(), record.cluster.as_str()), i)),
    );
    for row in rows.iter_mut() {
        let of = row.row();
        let key = (of.id.as_str(), of.cluster.as_str());
        if let Some(&i) = requests.get(&key).filter(|_| of.kind.is_empty()) {
            stood_for[i] = true;
            row.stand_for_forwarded();
        }
    }
    drop(requests);
    records
        .into_iter()
        .zip(stood_for)
        .filter_map(|(record, stood_for)| (!stood_for).then_some(record))
        .collect()
}

/// Where portcullis's own requests are recorded: the server's audit writer
/// (batched), or, in a command run beside it, the store directly.
#[derive(Debug, Clone)]
pub enum Recorder {
    /// The running server's writer.
    Writer(AuditWriter),
    /// A one-off command's store (a few requests: one insert each).
    Store(Store),
}

impl Recorder {
    /// Record `record`; a failure is logged (the request then shows as a
    /// bypass alert, which says what happened: better than not sending it).
    pub fn record(&self, record: Forwarded) {
        match self {
            Recorder::Writer(writer) => writer.forwarded(record),
            Recorder::Store(store) => {
                if let Err(error) = store.record_forwarded(&record.id, &record.cluster, record.kind, record.at) {
                    tracing::warn!(%error, "cannot record portcullis's own request to the cluster");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::row::AuditRow;
    use crate::audit::writer::{WriterMetrics, WriterSettings};
    use crate::store::sql::params;
    use crate::store::{testing, Sent};

    fn row(cluster: &str, kind: &str) -> AuditRow {
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
        row.cluster = cluster.into();
        row.kind = kind.into();
        row.principal_kind = "person".into();
        row.login = "ana".into();
        row.finish(Utc::now());
        row
    }

    #[test]
    fn a_client_requests_record_is_left_to_its_row_in_the_same_commit_and_no_other_is() {
        let (read, own, elsewhere, other) = (row("prod", ""), row("prod", "system"), row("test", ""), row("prod", ""));
        let open = uuid::Uuid::now_v7().to_string();
        let records = vec![
            Forwarded::request(&read.id, "prod"),
            Forwarded::request(&open, "prod"),
            Forwarded::system(&own.id, "prod"),
            Forwarded::request(&elsewhere.id, "prod"),
        ];
        let mut rows: Vec<Encoded> = [read, own, elsewhere, other].map(Encoded::new).into();
        let kept: Vec<String> = stand_in(records, &mut rows).into_iter().map(|r| r.id).collect();
        assert_eq!(kept, [open, rows[1].row().id.clone(), rows[2].row().id.clone()]);
        let marked: Vec<bool> = rows.iter().map(Encoded::forwarded).collect();
        assert_eq!(marked, [true, false, false, false]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_committed_with_its_record_is_stored_as_its_row_and_still_counted_as_sent() {
        for store in testing::both() {
            let b = store.backend;
            let settings = WriterSettings::default();
            let audit = crate::audit::open(&store).unwrap();
            let writer = AuditWriter::spawn(audit, None, settings, WriterMetrics::default());
            let (read, open) = (row("prod", ""), uuid::Uuid::now_v7().to_string());
            writer.forwarded(Forwarded::request(&read.id, "prod"));
            writer.forwarded(Forwarded::request(&open, "prod").as_principal("person", "ana"));
            writer.submit(read.clone());
            writer.flush().await;
            let records: Vec<String> = store
                .with(|c| Ok(c.query_map("SELECT id FROM audit_forwarded", params![], |r| r.get(0))?))
                .unwrap();
            assert_eq!(
                records,
                std::slice::from_ref(&open),
                "{b}: only the request still open keeps a record"
            );
            let marked: bool = store
                .with(|c| {
                    Ok(
                        c.query_row("SELECT forwarded FROM audit WHERE id = ?1", params![read.id], |r| {
                            r.get(0)
                        })?,
                    )
                })
                .unwrap();
            assert!(marked, "{b}");
            assert_eq!(
                store.portcullis_sent(&read.id, "prod").unwrap().0,
                Sent::As("user:ana".into()),
                "{b}"
            );
            assert_eq!(
                store.portcullis_sent(&open, "prod").unwrap().0,
                Sent::As("user:ana".into()),
                "{b}: a stream still open says whom it was sent as"
            );
            assert_eq!(
                store.portcullis_sent(&open, "test").unwrap().0,
                Sent::No,
                "{b}: sent to another cluster"
            );
            let hour = chrono::TimeDelta::hours(1);
            let coverage = store
                .apiserver_coverage("prod", Utc::now() - hour, Utc::now() + hour)
                .unwrap();
            assert_eq!(
                (coverage.portcullis_requests, coverage.missing),
                (2, 2),
                "{b}: {coverage:?}"
            );
            writer.close().await;
        }
    }
}
