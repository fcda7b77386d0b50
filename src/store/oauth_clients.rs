//! OAuth clients registered through RFC 7591 Dynamic Client Registration
//! (see `crate::oauth::client`). Registration is open to anyone, so a
//! client nobody uses is deleted after a while instead of kept forever.

use super::sql::{params, OptionalExt};
use super::{Store, StoreError};
use chrono::{DateTime, Utc};

/// A registered client as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredClient {
    /// The id portcullis gave it.
    pub client_id: String,
    /// The name it registered with ("" when it gave none).
    pub client_name: String,
    /// The redirect URIs it declared.
    pub redirect_uris: Vec<String>,
    /// When it registered.
    pub created_at: DateTime<Utc>,
    /// When it was last resolved (authorize, token).
    pub last_used_at: DateTime<Utc>,
}

/// The most registered OAuth clients kept that were never used.
pub const MAX_UNUSED_CLIENTS: usize = 1000;

impl Store {
    /// Register a client under a new random id; the caller has checked its
    /// metadata.
    pub fn register_oauth_client(
        &self,
        client_name: &str,
        redirect_uris: &[String],
    ) -> Result<RegisteredClient, StoreError> {
        let now = Utc::now();
        let client = RegisteredClient {
            // Random, and never an https URL (those are metadata documents).
            client_id: format!("pcl-client-{}", uuid::Uuid::new_v4().simple()),
            client_name: client_name.into(),
            redirect_uris: redirect_uris.to_vec(),
            created_at: now,
            last_used_at: now,
        };
        let uris = serde_json::Value::from(redirect_uris.to_vec()).to_string();
        self.with(|c| {
            c.execute(
                "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at, last_used_at) VALUES (?1, ?2, ?3, ?4, ?4)",
                params![client.client_id, client.client_name, uris, now],
            )?;
            // Registration is open: past the newest MAX_UNUSED_CLIENTS never
            // used, the older ones go (an app uses its client within
            // minutes of registering it), so the table is bounded without
            // refusing the next app.
            c.execute(
                "DELETE FROM oauth_clients WHERE last_used_at = created_at \
                 AND created_at < (SELECT created_at FROM oauth_clients WHERE last_used_at = created_at \
                                   ORDER BY created_at DESC LIMIT 1 OFFSET ?1) \
                 AND NOT EXISTS (SELECT 1 FROM agents WHERE agents.client_id = oauth_clients.client_id)",
                params![MAX_UNUSED_CLIENTS as i64 - 1],
            )?;
            Ok(())
        })?;
        Ok(client)
    }

    /// The registered client `client_id`, if there is one.
    pub fn find_oauth_client(&self, client_id: &str) -> Result<Option<RegisteredClient>, StoreError> {
        self.with(|c| {
            let row = c
                .query_row(
                    "SELECT client_id, client_name, redirect_uris, created_at, last_used_at FROM oauth_clients WHERE client_id = ?1",
                    params![client_id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get(3)?,
                            r.get(4)?,
                        ))
                    },
                )
                .optional()?;
            let Some((client_id, client_name, uris, created_at, last_used_at)) = row else {
                return Ok(None);
            };
            let redirect_uris = serde_json::from_str(&uris)
                .map_err(|e| StoreError::Invalid(format!("client {client_id}'s redirect URIs are unreadable: {e}")))?;
            Ok(Some(RegisteredClient {
                client_id,
                client_name,
                redirect_uris,
                created_at,
                last_used_at,
            }))
        })
    }

    /// Note that `client_id` was used at `at`.
    pub fn touch_oauth_client(&self, client_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE oauth_clients SET last_used_at = ?2 WHERE client_id = ?1 AND last_used_at < ?2",
                params![client_id, at],
            )?;
            Ok(())
        })
    }

    /// Delete every registered client not used since `cutoff` and with no
    /// agent session still in effect; returns how many.
    pub fn delete_oauth_clients_unused_since(&self, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
        self.with(|c| {
            Ok(c.execute(
                "DELETE FROM oauth_clients WHERE last_used_at < ?1 AND NOT EXISTS \
                 (SELECT 1 FROM agents WHERE agents.client_id = oauth_clients.client_id \
                  AND agents.disabled = FALSE AND agents.expires_at > ?2)",
                params![cutoff, Utc::now()],
            )?)
        })
    }

    /// Set when `client_id` was last used, even back in time (which
    /// [`Store::touch_oauth_client`] never moves it): for tests of the sweep.
    #[cfg(test)]
    pub(crate) fn set_oauth_client_last_used(&self, client_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE oauth_clients SET last_used_at = ?2 WHERE client_id = ?1",
                params![client_id, at],
            )?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registration is open: clients never used are kept up to a bound,
    /// the oldest going first; a used one stays.
    #[test]
    fn past_the_bound_the_oldest_clients_never_used_go_and_used_ones_stay() {
        for store in crate::store::testing::both() {
            let b = store.backend;
            let uris = ["http://127.0.0.1/cb".to_string()];
            let used = store.register_oauth_client("used", &uris).unwrap();
            store
                .touch_oauth_client(&used.client_id, Utc::now() + chrono::TimeDelta::seconds(1))
                .unwrap();
            let first = store.register_oauth_client("first", &uris).unwrap();
            for _ in 0..MAX_UNUSED_CLIENTS {
                store.register_oauth_client("flood", &uris).unwrap();
            }
            let count = |sql: &str| -> i64 { store.with(|c| Ok(c.query_row(sql, params![], |r| r.get(0))?)).unwrap() };
            assert_eq!(
                count("SELECT COUNT(*) FROM oauth_clients WHERE last_used_at = created_at"),
                MAX_UNUSED_CLIENTS as i64,
                "{b}"
            );
            assert!(
                store.find_oauth_client(&first.client_id).unwrap().is_none(),
                "{b}: the oldest went"
            );
            assert!(
                store.find_oauth_client(&used.client_id).unwrap().is_some(),
                "{b}: a used one stays"
            );
        }
    }
    use crate::store::testing;
    use chrono::{SubsecRound, TimeDelta};

    #[test]
    fn a_registered_client_is_found_by_its_id_with_its_redirect_uris() {
        for store in testing::both() {
            let b = store.backend;
            let uris = vec!["http://127.0.0.1/cb".to_string(), "cursor://x/cb".to_string()];
            let client = store.register_oauth_client("Cursor", &uris).unwrap();
            assert!(client.client_id.starts_with("pcl-client-"), "{b}");
            let found = store.find_oauth_client(&client.client_id).unwrap().unwrap();
            assert_eq!(found.client_name, "Cursor", "{b}");
            assert_eq!(found.redirect_uris, uris, "{b}");
            assert_eq!(store.find_oauth_client("pcl-client-unknown").unwrap(), None, "{b}");
            let other = store.register_oauth_client("Cursor", &uris).unwrap();
            assert_ne!(
                other.client_id, client.client_id,
                "{b}: each registration gets its own id"
            );
        }
    }

    #[test]
    fn only_clients_unused_since_the_cutoff_are_deleted() {
        for store in testing::both() {
            let b = store.backend;
            let uris = vec!["http://127.0.0.1/cb".to_string()];
            let idle = store.register_oauth_client("idle", &uris).unwrap();
            let used = store.register_oauth_client("used", &uris).unwrap();
            // Whole microseconds, as PostgreSQL keeps them.
            let later = (Utc::now() + TimeDelta::days(31)).trunc_subsecs(6);
            store.touch_oauth_client(&used.client_id, later).unwrap();
            store
                .touch_oauth_client(&used.client_id, later - TimeDelta::days(2))
                .unwrap();
            let deleted = store
                .delete_oauth_clients_unused_since(later - TimeDelta::days(1))
                .unwrap();
            assert_eq!(deleted, 1, "{b}");
            assert_eq!(store.find_oauth_client(&idle.client_id).unwrap(), None, "{b}");
            let kept = store.find_oauth_client(&used.client_id).unwrap().unwrap();
            assert_eq!(kept.last_used_at, later, "{b}: a use never moves the last use back");
        }
    }
}
