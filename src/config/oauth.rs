//! `[oauth]`: portcullis as the OAuth 2.1 authorization server of its own
//! `/mcp` (agents connect with a person's consent), and the limits of its
//! endpoints.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `[oauth]`: how agents' OAuth clients are trusted and limited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthConfig {
    /// Requests one address may send to the registration, authorize, token
    /// and revocation endpoints per minute, and the refreshes of one agent
    /// session, and the metadata document fetches of one client (30).
    pub requests_per_minute: u32,
    /// A registered (RFC 7591) client unused this long is deleted (30 days).
    #[serde(with = "super::humantime_serde")]
    pub unused_client_ttl: Duration,
    /// A PEM bundle of CAs trusted, besides the system's, when fetching a
    /// Client ID Metadata Document (a company's private CA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_ca_file: Option<PathBuf>,
    /// FOR TESTS ONLY, never in a deployment: fetch Client ID Metadata
    /// Documents from loopback and private addresses too. Off by default;
    /// named so that nobody sets it by accident.
    pub insecure_test_only_fetch_client_metadata_from_private_addresses: bool,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            requests_per_minute: 30,
            unused_client_ttl: Duration::from_secs(30 * 24 * 3600),
            client_metadata_ca_file: None,
            insecure_test_only_fetch_client_metadata_from_private_addresses: false,
        }
    }
}
