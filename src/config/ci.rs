//! `[ci]`: CI jobs exchanging their OpenID Connect tokens for short-lived
//! bot credentials (`crate::ci`). The issuers each bot trusts are trust
//! rules in the store; what is set here is how portcullis reaches them.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[ci]`: how CI token issuers are reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CiConfig {
    /// A PEM bundle of CAs for issuers under a private CA (a company's own
    /// GitLab), trusted instead of the system's roots; unset: the system's
    /// roots. Issuers are always reached over https.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}
