//! CI token issuers' discovery documents and signing keys, fetched over
//! https when first needed and cached: the keys are read again after an
//! hour, and also when a token names a key id the cached set lacks (the
//! issuer rotated its keys), at most once every [`KEY_REFETCH_EVERY`] per
//! issuer, so tokens with made-up key ids cannot make portcullis hammer the
//! issuer. Only issuers some trust rule names are ever fetched.

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
/// The least time between two refetches for unknown key ids.
pub const KEY_REFETCH_EVERY: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct Cached {
    keys: Arc<Vec<Jwk>>,
    fetched: Instant,
    refetched: Option<Instant>,
}

/// Every issuer's cached keys.
pub struct Issuers {
    http: HttpClient,
    cached: Mutex<HashMap<String, Cached>>,
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
        }
    }

    /// The key `kid` (or, for a token without one, the one key of the
    /// issuer's set that fits) of `issuer`: from the cache while fresh; a
    /// key the cache lacks makes one refetch, unless one was made less
    /// than [`KEY_REFETCH_EVERY`] ago.
    pub async fn key(&self, issuer: &str, kid: Option<&str>) -> Result<Jwk, Refused> {
        let cached = self.cached(issuer);
        let keys = match &cached {
            Some(c) if c.fetched.elapsed() < KEYS_TTL => c.keys.clone(),
            _ => self.fetch(issuer, cached.as_ref().and_then(|c| c.refetched)).await?,
        };
        if let Some(key) = find(&keys, kid) {
            return Ok(key);
        }
        if !self.may_refetch(issuer) {
            return Err(unknown_key(kid));
        }
        tracing::info!(issuer = %crate::text::Escaped(issuer), "CI token names an unknown key: fetching the issuer's keys again");
        let keys = self.fetch(issuer, Some(Instant::now())).await?;
        find(&keys, kid).ok_or_else(|| unknown_key(kid))
    }

    fn cached(&self, issuer: &str) -> Option<Cached> {
        self.cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(issuer)
            .cloned()
    }

    /// Whether a refetch may be made now; if so, it is noted at once, so
    /// that tokens arriving together make one refetch, not one each.
    fn may_refetch(&self, issuer: &str) -> bool {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = cached.get_mut(issuer) else {
            return true;
        };
        if entry.refetched.is_some_and(|at| at.elapsed() < KEY_REFETCH_EVERY) {
            return false;
        }
        entry.refetched = Some(Instant::now());
        true
    }

    /// Fetch `issuer`'s discovery document and key set, and cache them
    /// with the time of the last refetch for an unknown key.
    async fn fetch(&self, issuer: &str, refetched: Option<Instant>) -> Result<Arc<Vec<Jwk>>, Refused> {
        let keys = Arc::new(self.fetch_keys(issuer).await.map_err(|why| {
            tracing::warn!(issuer = %crate::text::Escaped(issuer), %why, "CI token issuer unavailable");
            Refused::new(
                Refusal::CiIssuerUnavailable,
                format!("the token's issuer cannot be reached now to read its keys ({why}); try again"),
            )
        })?);
        let entry = Cached {
            keys: keys.clone(),
            fetched: Instant::now(),
            refetched,
        };
        self.cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(issuer.to_string(), entry);
        Ok(keys)
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
