//! Commit: a write, a Secret reveal, or an exec, attach or port-forward
//! session is on record before the cluster sees it (the API server's
//! blocking audit mode): no record, no request. A session's row is written
//! only when it ends, so a process killed while one is open leaves its
//! intent, recorded as of unknown outcome at the next start.

use super::classify::RequestInfo;
use super::error::RequestError;
use super::{Pipeline, Trace};
use crate::audit::AuditError;

impl Pipeline {
    /// The commit stage: every request waits for room when the audit
    /// writer lags, and is refused when its row could not be kept; then the
    /// audit intent of a write or a reveal is committed.
    pub(super) async fn commit(
        &self,
        info: &RequestInfo,
        reveal_one: bool,
        trace: &mut Trace,
    ) -> Result<(), RequestError> {
        // Backpressure: when the audit writer lags, new requests wait; when
        // the rows waiting for its store fill the spool, they are refused,
        // never forwarded unrecorded.
        self.audit.writer().room().await.map_err(|error| {
            tracing::debug!(%error, "the audit spool is full: request refused");
            RequestError::AuditSpoolUnavailable {
                cause: error.to_string(),
            }
        })?;
        // Recorded as forwarded by the forward stage, as it leaves.
        if !(info.is_write() || reveal_one || info.is_stream_subresource()) {
            return Ok(());
        }
        // Boxed: only writes wait on an intent, and its future would
        // otherwise be part of every read's future too.
        Box::pin(self.audit.writer().commit_intent((*trace.row).clone()))
            .await
            .map_err(|error| {
                tracing::error!(%error, "the audit cannot commit: request refused");
                match error {
                    // Say why: the writer tries again until the store is back.
                    AuditError::StoreUnreachable => RequestError::AuditSpoolUnavailable {
                        cause: error.to_string(),
                    },
                    _ => RequestError::AuditUnavailable,
                }
            })
    }
}
