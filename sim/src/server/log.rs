//! The record of every request the simulated cluster received, so a test
//! can assert what reached the cluster (and what never did).

use crate::UserInfo;
use dashmap::DashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Requests kept; older ones are forgotten.
const KEEP: usize = 10_000;

/// One request as the simulator received it, completed with what became of
/// it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The audit id (the request's `Audit-ID`, else a fresh UUID), also
    /// returned as `Audit-Id`.
    pub audit_id: String,
    /// HTTP method.
    pub method: String,
    /// `HTTP/2.0` or `HTTP/1.1`: a proxy pools HTTP/2 for ordinary
    /// requests and must use HTTP/1.1 for upgrades.
    pub version: String,
    /// Path, as received (not decoded).
    pub path: String,
    /// Raw query string.
    pub query: Option<String>,
    /// Every header received, names lower-case, in order.
    pub headers: Vec<(String, String)>,
    /// The authenticated user (`None` when authentication failed or never
    /// ran).
    pub user: Option<UserInfo>,
    /// The impersonated user, when the request impersonated someone.
    pub impersonated: Option<UserInfo>,
    /// The Kubernetes verb (`get`, `list`, …; the lower-case method for
    /// non-resource requests); empty before classification.
    pub verb: String,
    /// The HTTP status answered (0 when the connection was dropped).
    pub code: u16,
}

impl RecordedRequest {
    /// The value of header `name` (lower-case), if received.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Every value of header `name` (lower-case) received, in order.
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        let named = self.headers.iter().filter(|(n, _)| n == name);
        named.map(|(_, v)| v.as_str()).collect()
    }
}

/// The bounded log of requests: sharded (a `DashMap` keyed by sequence
/// number), so recording is not a global lock on the request path.
#[derive(Debug, Default)]
pub(crate) struct RequestLog {
    next: AtomicU64,
    entries: DashMap<u64, RecordedRequest>,
}

impl RequestLog {
    /// Record a request as it arrives; returns its sequence number.
    pub(crate) fn push(&self, request: RecordedRequest) -> u64 {
        let seq = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.entries.insert(seq, request);
        if let Some(forgotten) = seq.checked_sub(KEEP as u64) {
            self.entries.remove(&forgotten);
        }
        seq
    }

    /// Update the record `seq` (if still kept).
    pub(crate) fn complete(&self, seq: u64, update: impl FnOnce(&mut RecordedRequest)) {
        if let Some(mut entry) = self.entries.get_mut(&seq) {
            update(&mut entry);
        }
    }

    /// A copy of every kept record, oldest first.
    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        let mut kept: Vec<(u64, RecordedRequest)> =
            self.entries.iter().map(|e| (*e.key(), e.value().clone())).collect();
        kept.sort_unstable_by_key(|(seq, _)| *seq);
        kept.into_iter().map(|(_, r)| r).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_completed_in_place_and_the_log_stays_bounded() {
        let log = RequestLog::default();
        let first = log.push(RecordedRequest {
            path: "/a".into(),
            ..Default::default()
        });
        for _ in 0..KEEP {
            log.push(RecordedRequest::default());
        }
        log.complete(first, |r| r.code = 200);
        let kept = log.snapshot();
        assert_eq!(kept.len(), KEEP);
        assert!(kept.iter().all(|r| r.path.is_empty()));
        let last = log.push(RecordedRequest::default());
        log.complete(last, |r| r.code = 201);
        assert_eq!(log.snapshot().last().map(|r| r.code), Some(201));
    }
}
