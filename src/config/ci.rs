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
    /// The audiences a trust rule may name: the `aud` a job asks its token
    /// for. Empty: `public_url` alone. A token made for another service
    /// (`sts.amazonaws.com`, a registry) must not be one that is taken
    /// here, or whoever receives it there could exchange it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
}

impl CiConfig {
    /// May a trust rule name `audience`, when portcullis is at
    /// `public_url`? (A trailing `/` is not told apart.)
    pub fn accepts_audience(&self, public_url: &str, audience: &str) -> bool {
        let same = |a: &str| a.trim_end_matches('/') == audience.trim_end_matches('/');
        match self.audiences.is_empty() {
            true => same(public_url),
            false => self.audiences.iter().any(|a| same(a)),
        }
    }
}
