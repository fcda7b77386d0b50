//! `[[clusters]]`: one cluster behind portcullis, and how its API server's
//! audit webhook authenticates.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One cluster behind portcullis.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Name used in `/clusters/<name>`.
    pub name: String,
    /// API server URL, e.g. `https://10.0.0.1:6443`.
    pub server: String,
    /// PEM bundle of CAs to trust for the API server.
    pub ca_file: PathBuf,
    /// portcullis's ServiceAccount token; re-read when it changes.
    pub token_file: PathBuf,
    /// The bearer token the cluster's API server presents to its audit
    /// webhook URL (`/apiserver-audit/<name>`), read from this file at each
    /// call; without it the webhook refuses every call for this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_webhook_token_file: Option<PathBuf>,
    /// Or a client certificate: a PEM bundle of the CA that issues the
    /// certificate the API server presents to its audit webhook (a CA kept
    /// for this alone: any certificate it issued is this cluster's
    /// webhook). The listener then asks clients for a certificate, without
    /// requiring one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_webhook_client_ca_file: Option<PathBuf>,
    /// The user portcullis is to this cluster's API server (its audit's
    /// `user.username`); `system:serviceaccount:portcullis:portcullis`, as
    /// `deploy/` installs it, if unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
}

impl ClusterConfig {
    /// The user portcullis is to this cluster.
    pub fn service_account(&self) -> &str {
        self.service_account
            .as_deref()
            .unwrap_or(super::audit::DEFAULT_SERVICE_ACCOUNT)
    }
}
