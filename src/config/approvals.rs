//! `[approvals]`: the key that seals held writes' bodies, how long a
//! repeated call waits for a decision, and when an undecided write expires.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The longest approval wait accepted: a client (and any load balancer in
/// between) must still be listening when the answer comes.
pub const MAX_WAIT: Duration = Duration::from_secs(240);

/// `[approvals]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// A file holding 32 random bytes as 64 hex characters: the key that
    /// seals held bodies at rest and signs sign-in cookies. Unset: writes
    /// that need approval are refused (nothing can be held). Set but
    /// unreadable or malformed: portcullis refuses to start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// How long a repeated call waits for the decision (50 s; 0 to 240 s,
    /// 0 answers at once).
    #[serde(with = "crate::config::humantime_serde")]
    pub wait: Duration,
    /// An undecided (or approved but not run) write expires after this long
    /// (15 min); its body is then deleted.
    #[serde(with = "crate::config::humantime_serde")]
    pub expiry: Duration,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig {
            key_file: None,
            wait: Duration::from_secs(50),
            expiry: Duration::from_secs(15 * 60),
        }
    }
}

impl ApprovalsConfig {
    /// Check the ranges; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.wait > MAX_WAIT {
            return Err(("approvals.wait", "must be 0 to 240 seconds".into()));
        }
        if self.expiry < Duration::from_secs(60) {
            return Err(("approvals.expiry", "must be at least one minute".into()));
        }
        Ok(())
    }
}

/// A fresh key file's contents: 32 random bytes as hex (the demo writes
/// one; `openssl rand -hex 32` makes one too).
pub fn generate_key() -> String {
    use rand::RngCore;
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    key.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_refused_beyond_240_seconds_and_defaults_to_50() {
        let mut config = ApprovalsConfig::default();
        assert_eq!(config.wait, Duration::from_secs(50));
        assert_eq!(config.expiry, Duration::from_secs(900));
        config.wait = Duration::from_secs(241);
        assert_eq!(config.validate().unwrap_err().0, "approvals.wait");
        config.wait = Duration::ZERO;
        assert!(config.validate().is_ok());
    }
}
