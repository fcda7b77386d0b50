//! `[store]`: where portcullis keeps its rows. Unset, the embedded SQLite
//! file in `data_dir` (one process); with `url`, a PostgreSQL database that
//! several replicas share.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// [`StoreConfig::cache_ttl`] unless set: what the credential and grant
/// caches keep lookups for.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(2);

/// The longest [`StoreConfig::cache_ttl`]: a change whose word from the
/// store is missed applies within it.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(300);

/// `[store]`: the database.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `postgres://user@host:5432/portcullis?sslmode=disable`; unset: the
    /// embedded SQLite. `PORTCULLIS_STORE__URL` sets it from the
    /// environment (a Kubernetes Secret), so the password need not be in
    /// the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A file holding the PostgreSQL password (a mounted Secret), used
    /// when the URL has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// CA certificates (PEM) trusted for the server's certificate besides
    /// the system's, for a private CA; TLS itself is the URL's `sslmode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// How long a credential looked up and a principal's grants are kept
    /// in memory. A change made through any replica of a PostgreSQL store
    /// drops them at once (its notification); this bounds how long one
    /// whose word is missed, or one an `admin` command makes on an SQLite
    /// store, takes to apply. 2 s; at most 5 min.
    #[serde(with = "super::humantime_serde")]
    pub cache_ttl: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            password_file: None,
            ca_file: None,
            cache_ttl: DEFAULT_CACHE_TTL,
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry the password: never in a log line.
        f.debug_struct("StoreConfig")
            .field("url", &self.url.as_ref().map(|_| "<set>"))
            .field("password_file", &self.password_file)
            .field("ca_file", &self.ca_file)
            .field("cache_ttl", &self.cache_ttl)
            .finish()
    }
}

impl StoreConfig {
    /// The PostgreSQL connection settings, the password read from
    /// `password_file` when the URL has none; `None` for SQLite.
    pub fn postgres(&self) -> Result<Option<tokio_postgres::Config>, String> {
        let Some(url) = &self.url else { return Ok(None) };
        let mut config: tokio_postgres::Config = url
            .parse()
            // The parser's message never repeats the URL (nor its password).
            .map_err(|e| format!("[store] url is not a PostgreSQL URL: {e}"))?;
        if config.get_password().is_none() {
            if let Some(path) = &self.password_file {
                let password = std::fs::read_to_string(path)
                    .map_err(|e| format!("[store] password_file {}: {e}", path.display()))?;
                config.password(password.trim_end_matches(['\r', '\n']));
            }
        }
        if config.get_application_name().is_none() {
            config.application_name("portcullis");
        }
        Ok(Some(config))
    }

    /// Where the store is, for messages: the URL without its password.
    pub fn describe(&self) -> String {
        match self.postgres() {
            Ok(Some(c)) => {
                let host = match c.get_hosts().first() {
                    Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
                    Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
                    None => String::new(),
                };
                let port = c.get_ports().first().copied().unwrap_or(5432);
                format!(
                    "PostgreSQL database {:?} on {host}:{port} as {:?}",
                    c.get_dbname().unwrap_or(""),
                    c.get_user().unwrap_or("")
                )
            }
            Ok(None) => "the embedded SQLite store".into(),
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_comes_from_its_file_and_never_shows_in_debug() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\n").unwrap();
        let config = StoreConfig {
            url: Some("postgres://portcullis@db.internal:5433/p".into()),
            password_file: Some(file),
            ca_file: None,
            ..StoreConfig::default()
        };
        let pg = config.postgres().unwrap().unwrap();
        assert_eq!(pg.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(pg.get_ports(), [5433]);
        assert!(
            config.describe().ends_with("on db.internal:5433 as \"portcullis\""),
            "{}",
            config.describe()
        );
        let with_password = StoreConfig {
            url: Some("postgres://portcullis:hunter2@db/p".into()),
            password_file: None,
            ca_file: None,
            ..StoreConfig::default()
        };
        assert!(!format!("{with_password:?}").contains("hunter2"));
        assert!(
            !with_password.describe().contains("hunter2"),
            "{}",
            with_password.describe()
        );
        assert!(
            with_password.describe().contains("\"p\""),
            "{}",
            with_password.describe()
        );
    }

    #[test]
    fn no_url_is_sqlite_and_a_bad_url_says_what_is_wrong() {
        assert!(StoreConfig::default().postgres().unwrap().is_none());
        let bad = StoreConfig {
            url: Some("mysql://x:pw@y/z".into()),
            password_file: None,
            ca_file: None,
            ..StoreConfig::default()
        };
        let err = bad.postgres().unwrap_err();
        assert!(err.starts_with("[store] url"), "{err}");
        assert!(!err.contains("pw"), "{err}");
    }
}
