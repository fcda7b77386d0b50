//! `[oidc]`: people sign in with the company's OpenID Connect provider; and
//! `[sessions]`: how long a sign-in lasts and how often an address may try.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `[oidc]`: the identity provider people sign in with. Without it, people
/// sign in to the web pages with a portcullis token (the demo).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer URL, exactly as its ID tokens' `iss` says
    /// (`https://accounts.google.com`); discovery is read from
    /// `<issuer>/.well-known/openid-configuration`. `https://` unless the
    /// host is loopback.
    pub issuer: String,
    /// portcullis's client id at the provider.
    pub client_id: String,
    /// A file holding the client secret (trailing whitespace ignored).
    pub client_secret_file: PathBuf,
    /// Scopes asked for besides `openid email profile`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The claim that names the person's login. Unset:
    /// `preferred_username`, else a verified `email`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_claim: Option<String>,
    /// The claim holding the person's groups (kept at each sign-in).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// When set, only people with a verified email in one of these domains
    /// may sign in.
    #[serde(default)]
    pub allowed_email_domains: Vec<String>,
    /// The domains whose people sign in by the name before the `@`: an
    /// email-shaped login claim (`ana@example.com`) from any other domain is
    /// refused, so that `ana@gmail.com` never becomes the `ana` of
    /// example.com. Unset: `allowed_email_domains`.
    #[serde(default)]
    pub login_domains: Vec<String>,
    /// Add a person at their first sign-in (true), or only let in people an
    /// operator added (`portcullis person add`; false, the default).
    #[serde(default)]
    pub create_people: bool,
    /// A PEM bundle of CAs for a provider under a private CA; unset: the
    /// system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

fn default_groups_claim() -> String {
    "groups".into()
}

impl OidcConfig {
    /// Check the fields; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|p| {
                self.issuer
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
            });
        if !self.issuer.starts_with("https://") && !loopback {
            return Err(("oidc.issuer", "must be an https:// URL".into()));
        }
        if self.client_id.is_empty() {
            return Err(("oidc.client_id", "must not be empty".into()));
        }
        for (field, domains) in [
            ("oidc.allowed_email_domains", &self.allowed_email_domains),
            ("oidc.login_domains", &self.login_domains),
        ] {
            if domains.iter().any(|d| d.is_empty() || d.contains('@')) {
                return Err((field, "domains only, like example.com".into()));
            }
        }
        Ok(())
    }
}

/// `[sessions]`: web sign-in sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// How long a sign-in lasts, whatever happens (12 h).
    #[serde(with = "crate::config::humantime_serde")]
    pub lifetime: Duration,
    /// Sign-ins one address may complete per minute (callbacks of a
    /// sign-in begun in the browser), device codes asked for, looked at or
    /// decided (10, and as many at once); more get 429.
    pub sign_in_per_minute: u32,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            lifetime: Duration::from_secs(12 * 3600),
            sign_in_per_minute: 10,
        }
    }
}

impl SessionsConfig {
    /// Check the ranges; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.lifetime < Duration::from_secs(60) || self.lifetime > Duration::from_secs(30 * 86400) {
            return Err(("sessions.lifetime", "must be one minute to 30 days".into()));
        }
        if self.sign_in_per_minute == 0 {
            return Err(("sessions.sign_in_per_minute", "must be at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oidc(issuer: &str) -> OidcConfig {
        OidcConfig {
            issuer: issuer.into(),
            client_id: "portcullis".into(),
            client_secret_file: "secret".into(),
            scopes: Vec::new(),
            login_claim: None,
            groups_claim: default_groups_claim(),
            allowed_email_domains: Vec::new(),
            login_domains: Vec::new(),
            create_people: false,
            ca_file: None,
        }
    }

    #[test]
    fn an_issuer_is_https_unless_it_is_on_this_machine() {
        assert!(oidc("https://accounts.google.com").validate().is_ok());
        assert!(oidc("http://127.0.0.1:5556/dex").validate().is_ok());
        assert!(oidc("http://localhost").validate().is_ok());
        for bad in [
            "http://idp.example.com",
            "http://127.0.0.1.example.com",
            "http://localhost.evil",
        ] {
            assert_eq!(oidc(bad).validate().unwrap_err().0, "oidc.issuer", "{bad}");
        }
    }

    #[test]
    fn a_session_lasts_twelve_hours_by_default_and_at_most_thirty_days() {
        let mut sessions = SessionsConfig::default();
        assert_eq!(sessions.lifetime, Duration::from_secs(43200));
        assert!(sessions.validate().is_ok());
        sessions.lifetime = Duration::from_secs(31 * 86400);
        assert_eq!(sessions.validate().unwrap_err().0, "sessions.lifetime");
    }
}
