//! CI token issuers' discovery documents and signing keys, fetched over
//! https when first needed and cached: the keys are read again after an
//! hour, and also when a token names a key id the cached set lacks (the
//! issuer rotated its keys), at most once every [`KEY_REFETCH_EVERY`] per
//! issuer, so tokens with made-up key ids cannot make portcullis hammer the
//! issuer. Only issuers some trust rule names are ever fetched. One fetch
//! runs at a time per issuer, a failed one is not tried again for 10 s,
//! and while the issuer cannot be reached the keys fetched last serve for
//! up to a day.

use super::Refused;
use crate::audit::refusal::Refusal;
use crate::signin::http::HttpClient;
use jsonwebtoken::jwk::Jwk;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long fetched keys are used before they are read again.
const KEYS_TTL: Duration = Duration::from_secs(3600);
/// How long keys past [`KEYS_TTL`] are still used while the issuer cannot
/// be reached: an outage of the issuer does not stop jobs whose tokens are
/// signed with a key it published the day before.
const STALE_KEYS_LIMIT: Duration = Duration::from_secs(24 * 3600);
/// The least time between a failed fetch and the next: a token only has to
/// parse to make portcullis fetch, so an issuer that is down is not asked
/// again for every such token.
const RETRY_FAILED_AFTER: Duration = Duration::from_secs(10);
/// The least time between two refetches for unknown key ids.
pub const KEY_REFETCH_EVERY: Duration = Duration::from_secs(60);

/// An issuer's cache entry: its keys (none before a first fetch worked).
#[derive(Clone, Default)]
struct Cached {
    keys: Arc<Vec<Jwk>>,
    /// When `keys` were fetched; `None` before any fetch worked.
    fetched: Option<Instant>,
    /// The last refetch for an unknown key id.
    refetched: Option<Instant>,
    /// The last fetch that failed, since the last that worked.
    failed: Option<Instant>,
}

/// What to do for keys, from the cache as it stands.
#[derive(Debug, PartialEq)]
enum Plan {
    /// Use the cached keys (fresh).
    Use,
    /// Fetch them.
    Fetch,
    /// A fetch failed a moment ago: use the stale keys if any, else refuse.
    Failed,
}

impl Cached {
    fn plan(&self, now: Instant) -> Plan {
        let within = |at: Option<Instant>, span| at.is_some_and(|at| now.saturating_duration_since(at) < span);
        if within(self.fetched, KEYS_TTL) {
            Plan::Use
        } else if within(self.failed, RETRY_FAILED_AFTER) {
            Plan::Failed
        } else {
            Plan::Fetch
        }
    }

    /// The keys to go on with at `now` while the issuer cannot be reached:
    /// those fetched within [`STALE_KEYS_LIMIT`].
    fn stale(&self, now: Instant) -> Option<Arc<Vec<Jwk>>> {
        self.fetched
            .is_some_and(|at| now.saturating_duration_since(at) < STALE_KEYS_LIMIT)
            .then(|| self.keys.clone())
    }
}

/// Every issuer's cached keys.
pub struct Issuers {
    http: HttpClient,
    cached: Mutex<HashMap<String, Cached>>,
    /// One fetch at a time per issuer: tokens arriving together while the
    /// keys are missing or old wait for one fetch rather than make one
    /// each.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Issuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuers").finish_non_exhaustive()
    }
}

impl Issuers {
    /// Issuers reached through `http`; nothing is fetched yet.
    pub fn new(http: HttpClient) -> Issuers {
        Issuers {
            http,
            cached: Mutex::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
        }
    }

    /// The key `kid` (or, for a token without one, the one key of the
    /// issuer's set that fits) of `issuer`: from the cache while fresh; a
    /// key the cache lacks makes one refetch, unless one was made less
    /// than [`KEY_REFETCH_EVERY`] ago.
    pub async fn key(&self, issuer: &str, kid: Option<&str>) -> Result<Jwk, Refused> {
        let keys = self.keys(issuer).await?;
        if let Some(key) = find(&keys, kid) {
            return Ok(key);
        }
        if !self.may_refetch(issuer) {
            return Err(unknown_key(kid));
        }
        tracing::info!(issuer = %crate::text::Escaped(issuer), "CI token names an unknown key: fetching the issuer's keys again");
        let _one = self.fetch_lock(issuer);
        let _one = _one.lock().await;
        let keys = self.fetch(issuer).await.map_err(unavailable)?;
        find(&keys, kid).ok_or_else(|| unknown_key(kid))
    }

    /// `issuer`'s keys: cached while fresh, else fetched (one fetch at a
    /// time), else, while the issuer cannot be reached, the last ones for
    /// up to [`STALE_KEYS_LIMIT`].
    async fn keys(&self, issuer: &str) -> Result<Arc<Vec<Jwk>>, Refused> {
        if let Some(cached) = self.cached(issuer).filter(|c| c.plan(Instant::now()) == Plan::Use) {
            return Ok(cached.keys);
        }
        let one = self.fetch_lock(issuer);
        let _one = one.lock().await;
        // Another token may have fetched them while this one waited.
        let cached = self.cached(issuer).unwrap_or_default();
        let why = match cached.plan(Instant::now()) {
            Plan::Use => return Ok(cached.keys),
            Plan::Failed => "it could not be reached a moment ago".to_string(),
            Plan::Fetch => match self.fetch(issuer).await {
                Ok(keys) => return Ok(keys),
                Err(why) => why,
            },
        };
        match cached.stale(Instant::now()) {
            Some(keys) => {
                tracing::warn!(issuer = %crate::text::Escaped(issuer), %why, "CI token issuer unavailable: using the keys fetched last");
                Ok(keys)
            }
            None => Err(unavailable(why)),
        }
    }

    fn cached(&self, issuer: &str) -> Option<Cached> {
        self.cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(issuer)
            .cloned()
    }

    fn fetch_lock(&self, issuer: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut fetching = self.fetching.lock().unwrap_or_else(|p| p.into_inner());
        fetching.entry(issuer.to_string()).or_default().clone()
    }

    /// Whether a refetch may be made now; if so, it is noted at once, so
    /// that tokens arriving together make one refetch, not one each.
    fn may_refetch(&self, issuer: &str) -> bool {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cached.entry(issuer.to_string()).or_default();
        if entry.refetched.is_some_and(|at| at.elapsed() < KEY_REFETCH_EVERY) {
            return false;
        }
        entry.refetched = Some(Instant::now());
        true
    }

    /// Fetch `issuer`'s discovery document and key set into the cache; a
    /// failure is noted (the keys fetched before are kept).
    async fn fetch(&self, issuer: &str) -> Result<Arc<Vec<Jwk>>, String> {
        let fetched = self.fetch_keys(issuer).await;
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cached.entry(issuer.to_string()).or_default();
        match fetched {
            Ok(keys) => {
                entry.keys = Arc::new(keys);
                entry.fetched = Some(Instant::now());
                entry.failed = None;
                Ok(entry.keys.clone())
            }
            Err(why) => {
                tracing::warn!(issuer = %crate::text::Escaped(issuer), %why, "CI token issuer unavailable");
                entry.failed = Some(Instant::now());
                Err(why)
            }
        }
    }

    async fn fetch_keys(&self, issuer: &str) -> Result<Vec<Jwk>, String> {
        let discovery_url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        let discovery = self.get_json(&discovery_url).await?;
        if discovery["issuer"].as_str() != Some(issuer) {
            return Err("its discovery document names another issuer".into());
        }
        let jwks_uri = discovery["jwks_uri"]
            .as_str()
            .ok_or("its discovery document has no jwks_uri")?;
        let set = self.get_json(jwks_uri).await?;
        let keys = set["keys"].as_array().ok_or("its key set has no keys")?;
        // A key of a kind this release cannot read is skipped, not fatal.
        Ok(keys
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .filter(|k| k.common.public_key_use.as_ref().is_none_or(is_signing))
            .collect())
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        if !url.starts_with("https://") {
            return Err(format!("{} is not https", crate::text::escape_control(url)));
        }
        let request = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| format!("bad URL: {e}"))?;
        let answer = self.http.send(request).await.map_err(|e| e.0)?;
        if !answer.status().is_success() {
            return Err(format!("it answered {}", answer.status()));
        }
        serde_json::from_slice(answer.body()).map_err(|e| format!("its answer is not JSON: {e}"))
    }
}

fn is_signing(key_use: &jsonwebtoken::jwk::PublicKeyUse) -> bool {
    matches!(key_use, jsonwebtoken::jwk::PublicKeyUse::Signature)
}

/// The key named `kid`; without one, the set's only key.
fn find(keys: &[Jwk], kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.common.key_id.as_deref() == Some(kid)).cloned(),
        None if keys.len() == 1 => keys.first().cloned(),
        None => None,
    }
}

fn unavailable(why: String) -> Refused {
    Refused::new(
        Refusal::CiIssuerUnavailable,
        format!("the token's issuer cannot be reached now to read its keys ({why}); try again"),
    )
}

fn unknown_key(kid: Option<&str>) -> Refused {
    let named = kid.map_or("no key id, and the issuer has several keys".to_string(), |kid| {
        format!(
            "key id {:?}",
            crate::text::escape_control(&kid.chars().take(80).collect::<String>())
        )
    });
    Refused::new(
        Refusal::CiTokenUnknownKey,
        format!("the token is signed with a key its issuer does not publish ({named})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_used_while_fresh_fetched_again_after_and_the_last_serve_a_day_while_fetches_fail() {
        let at = Instant::now();
        let after = |span: Duration| at + span + Duration::from_secs(1);
        let never = Cached::default();
        assert_eq!(never.plan(at), Plan::Fetch);
        assert!(never.stale(at).is_none(), "nothing to go on with before a first fetch");
        let fetched = Cached {
            fetched: Some(at),
            ..Cached::default()
        };
        assert_eq!(fetched.plan(at + Duration::from_secs(60)), Plan::Use);
        assert_eq!(fetched.plan(after(KEYS_TTL)), Plan::Fetch);
        let failing = Cached {
            failed: Some(after(KEYS_TTL)),
            ..fetched.clone()
        };
        assert_eq!(failing.plan(after(KEYS_TTL)), Plan::Failed, "not asked again at once");
        assert_eq!(failing.plan(after(KEYS_TTL) + RETRY_FAILED_AFTER), Plan::Fetch);
        assert!(failing.stale(after(KEYS_TTL)).is_some());
        assert!(failing.stale(after(STALE_KEYS_LIMIT)).is_none(), "a day at most");
    }
}
