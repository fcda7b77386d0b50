//! Forwarded records: that a request left portcullis for a cluster, written
//! when it leaves rather than when its row is (a watch's or an exec's row
//! is written when it closes, hours later perhaps). The API server's events
//! are matched against rows, intents and these records (`audit::bypass`),
//! so a stream still open is never taken for a bypass.
//!
//! The request path hands them to the audit writer, which commits them
//! with its next batch of rows; portcullis's own requests (the reconciler's)
//! are recorded the same way, as kind `system` ([`Recorder`]).

use super::writer::AuditWriter;
use crate::store::Store;
use chrono::{DateTime, SubsecRound, Utc};

/// A request that left for a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// The `Audit-ID` it carried.
    pub id: String,
    /// The cluster.
    pub cluster: String,
    /// `request` (a client's, through the pipeline) or `system`
    /// (portcullis's own).
    pub kind: &'static str,
    /// When it left.
    pub at: DateTime<Utc>,
}

impl Forwarded {
    /// A client's request `id` to `cluster`, leaving now.
    pub fn request(id: &str, cluster: &str) -> Forwarded {
        Forwarded {
            id: id.to_string(),
            cluster: cluster.to_string(),
            kind: "request",
            at: Utc::now().trunc_subsecs(6),
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
