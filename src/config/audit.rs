//! `[audit]`: where rows are exported, how long they are kept, and how long
//! an API server event may wait for portcullis's row before it is a bypass
//! alert.

use super::humantime_serde;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `[audit]`: where rows are exported and how long they are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// JSON lines sink for a SIEM: `"stdout"` or a file path; none if unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
    /// An export file is rotated when it would grow past this (100 MiB).
    pub rotate_bytes: u64,
    /// Rotated export files kept (`<path>.1` … `<path>.<keep>`).
    pub keep: usize,
    /// Rows older than this are swept, hourly (30 days).
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// How long an API server event made with portcullis's ServiceAccount
    /// may go without a portcullis row or record of the same audit id
    /// before it is a bypass alert (30 s, at most 1 d): the audit writer's
    /// batching and the webhook's own delay fit well within it.
    #[serde(with = "humantime_serde")]
    pub bypass_grace: Duration,
    /// Where each finished request's row is appended before its answer
    /// completes, until the store has committed it, so that a crashed
    /// process loses none (`<data_dir>/audit-spool` when unset). Local to
    /// each process: with several replicas, a folder of each one's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool_dir: Option<PathBuf>,
    /// When the spool holds more than this many bytes of rows the store has
    /// not committed yet (it cannot keep up, or cannot commit at all), new
    /// requests are refused with 503 rather than forwarded unrecorded
    /// (64 MiB, about 100,000 rows; rows waiting for their commit are held
    /// in memory too).
    pub spool_max_bytes: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            export: None,
            rotate_bytes: 100 * 1024 * 1024,
            keep: 5,
            retention: Duration::from_secs(30 * 24 * 3600),
            bypass_grace: Duration::from_secs(30),
            spool_dir: None,
            spool_max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// The ServiceAccount portcullis runs as when a cluster names none: the one
/// `deploy/portcullis.yaml` creates.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "system:serviceaccount:portcullis:portcullis";
