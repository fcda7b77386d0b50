//! Authenticate: turn a bearer token into an [`Identity`], or say why not.
//!
//! Tokens are checked for shape and checksum first, so garbage never reaches
//! the store. Known tokens are cached by their SHA-256 for a couple of
//! seconds: revocation is immediate in the process that revoked (it calls
//! [`Authenticator::forget`]), and in other replicas as soon as the store
//! tells them of the change (the server calls [`Authenticator::forget_all`]);
//! the cache lifetime bounds it when that word is missed.
//! Unknown tokens are never cached, so a flood of made-up tokens cannot grow
//! memory; and past `[limits] failed_authentications_per_minute` of them
//! from one address, that address's tokens that never worked here are
//! refused without asking the store, so it cannot keep the store busy either.
//!
//! Credentials are read through [`CredentialSource`], which the store
//! implements: identity sits below the store and does not know how
//! credentials are kept.

use super::{credential, Agent, Audience, Credential, Identity, Origin};
use crate::ratelimit::RateLimiter;
use chrono::{DateTime, Utc};
use dashmap::{DashMap, DashSet};
use http::HeaderMap;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Token digests kept as known to the store before `worked` starts again
/// (3 MiB of digests).
const WORKED_MAX: usize = 100_000;
/// `last_used_at` is written at most this often per credential.
const TOUCH_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// Why a request was not authenticated. The `prefix` is the first characters
/// of the presented token: enough to recognise it in the audit, never enough
/// to use it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token")]
    Missing,
    /// Not a portcullis token, or a bad checksum.
    #[error("malformed token {prefix}…")]
    Malformed {
        /// Token prefix.
        prefix: String,
    },
    /// Well-formed but not issued here.
    #[error("unknown token {prefix}…")]
    Unknown {
        /// Token prefix.
        prefix: String,
    },
    /// Past its expiry.
    #[error("expired token {prefix}…")]
    Expired {
        /// Token prefix.
        prefix: String,
    },
    /// Revoked, or its owner disabled.
    #[error("revoked token {prefix}…")]
    Revoked {
        /// Token prefix.
        prefix: String,
    },
    /// The store could not be asked: fail closed.
    #[error("credential store unavailable")]
    StoreUnavailable,
    /// Issued for another place: an OAuth access token is for `/mcp` only
    /// (its audience), never the raw API or the pages.
    #[error("token {prefix}… is for /mcp only")]
    WrongAudience {
        /// Token prefix.
        prefix: String,
    },
    /// The caller's address presented too many unknown tokens of late,
    /// and this one has not authenticated here before: not looked up.
    #[error("too many unknown tokens from your address: token {prefix}… not checked; retry in {retry_after_secs} s")]
    TooManyFailures {
        /// Token prefix.
        prefix: String,
        /// When the address may try again.
        retry_after_secs: u32,
    },
}

impl AuthError {
    /// Short reason for metrics and the audit.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Missing => "missing",
            AuthError::Malformed { .. } => "malformed",
            AuthError::Unknown { .. } => "unknown",
            AuthError::Expired { .. } => "expired",
            AuthError::Revoked { .. } => "revoked",
            AuthError::StoreUnavailable => "store_unavailable",
            AuthError::WrongAudience { .. } => "wrong_audience",
            AuthError::TooManyFailures { .. } => "too_many_failures",
        }
    }

    /// The presented token's display prefix, when there was a token.
    pub fn prefix(&self) -> Option<&str> {
        match self {
            AuthError::Malformed { prefix }
            | AuthError::Unknown { prefix }
            | AuthError::Expired { prefix }
            | AuthError::Revoked { prefix }
            | AuthError::WrongAudience { prefix }
            | AuthError::TooManyFailures { prefix, .. } => Some(prefix),
            AuthError::Missing | AuthError::StoreUnavailable => None,
        }
    }
}

/// A credential found by its token hash, with whether its owner is disabled.
#[derive(Debug, Clone)]
pub struct CredentialLookup {
    /// The credential.
    pub credential: Credential,
    /// The owning person or bot is disabled.
    pub owner_disabled: bool,
    /// Where it is accepted and what issued it, if it was issued so.
    pub origin: Option<Origin>,
}

impl CredentialLookup {
    /// Does it still let its holder in at `now`: not revoked or expired,
    /// its owner enabled, and its `agent` (if an agent's) too?
    pub fn works(&self, agent: Option<&Agent>, now: chrono::DateTime<Utc>) -> bool {
        let cred = &self.credential;
        cred.revoked_at.is_none()
            && !self.owner_disabled
            && !agent.is_some_and(|a| a.disabled)
            && cred.expires_at.is_none_or(|at| at > now)
    }
}

/// A failure of the credential source, kept whole for the log.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// Where the authenticator finds credentials (the store). Blocking: called
/// on a blocking thread.
pub trait CredentialSource: Send + Sync + 'static {
    /// The credential whose token's SHA-256 is `token_sha256`, with the
    /// agent it belongs to, if any.
    fn find(&self, token_sha256: &str) -> Result<Option<(CredentialLookup, Option<Agent>)>, SourceError>;

    /// Record that credential `id` authenticated a request at `at`.
    fn touch(&self, id: &str, at: DateTime<Utc>) -> Result<(), SourceError>;
}

/// Shared with the cache: a cached request copies pointers, not the
/// credential's strings.
#[derive(Clone)]
struct Found {
    lookup: Arc<CredentialLookup>,
    agent: Option<Arc<Agent>>,
    origin: Option<Arc<Origin>>,
}

struct Cached {
    found: Found,
    fetched: Instant,
}

/// Authenticates bearer tokens against the store, through a cache.
pub struct Authenticator {
    store: Arc<dyn CredentialSource>,
    /// By the token's SHA-256 ([`credential::digest`]). Not SipHash:
    /// the keys are digests, which nobody can choose to collide.
    cache: DashMap<[u8; 32], Cached, foldhash::fast::RandomState>,
    /// Bumped by every `forget*`: a lookup that read the store before a
    /// revocation must not put what it read back after the revocation
    /// emptied the cache.
    generation: AtomicU64,
    /// Unknown tokens presented, per client address: past the limit, a
    /// token not in `worked` is refused before the store is asked.
    failures: Option<Arc<RateLimiter>>,
    /// The digests of tokens the store knew, kept through the cache's
    /// forgetting (another replica's change empties it), so that callers
    /// sharing an address with a flood are not held back with it.
    worked: DashSet<[u8; 32], foldhash::fast::RandomState>,
    /// Store lookups in flight, by digest: a lookup of the same token that
    /// comes meanwhile waits for it rather than asking the store (and the
    /// failure limit) again, as a client's many first requests do.
    inflight: DashMap<[u8; 32], Arc<Lookup>, foldhash::fast::RandomState>,
    /// How long a credential looked up is trusted without asking the
    /// store again (`[store] cache_ttl`).
    ttl: Duration,
}

/// One store lookup, shared by the requests in flight with its token: what
/// the store knew, or that it could not say (shared too, so that a store
/// that is down fails them together, not one after another).
type Lookup = tokio::sync::OnceCell<Result<Option<Found>, StoreDown>>;

/// The store could not be asked.
#[derive(Debug, Clone, Copy)]
struct StoreDown;

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("cached", &self.cache.len())
            .finish()
    }
}

impl Authenticator {
    /// An authenticator over `store`.
    pub fn new(store: impl CredentialSource) -> Self {
        Authenticator {
            store: Arc::new(store),
            cache: DashMap::default(),
            generation: AtomicU64::new(0),
            failures: None,
            worked: DashSet::default(),
            inflight: DashMap::default(),
            ttl: crate::config::store::DEFAULT_CACHE_TTL,
        }
    }

    /// Keep lookups for `ttl` (`[store] cache_ttl`).
    pub fn keeping_lookups_for(self, ttl: Duration) -> Self {
        Authenticator { ttl, ..self }
    }

    /// Hold back an address past `per_minute` unknown tokens (a burst of
    /// as many): its tokens that never authenticated here are refused
    /// without a store query until it is under the rate again.
    pub fn limiting_failures(self, per_minute: u32) -> Self {
        Authenticator {
            failures: Some(Arc::new(RateLimiter::new(per_minute, per_minute))),
            ..self
        }
    }

    /// Authenticate the request's bearer token, for any place but `/mcp`:
    /// a token whose audience is `/mcp` is refused here. `from` is the
    /// client's address as the audit row has it (empty: not limited).
    pub async fn authenticate(&self, headers: &HeaderMap, from: &str) -> Result<Identity, AuthError> {
        self.authenticate_for(headers, None, from).await
    }

    /// Authenticate the bearer token of a request to the place `audience`
    /// names (`None`: the raw API, the pages, the person API): a token
    /// bound to an audience is accepted there only.
    pub async fn authenticate_for(
        &self,
        headers: &HeaderMap,
        audience: Option<Audience>,
        from: &str,
    ) -> Result<Identity, AuthError> {
        let token = bearer_token(headers).ok_or(AuthError::Missing)?;
        // Only a refusal shows the prefix: an accepted token is not copied.
        let prefix = || credential::display_prefix(token);
        // Nor any of a value that is not a portcullis token at all: a
        // cluster's token or a password sent here by mistake, whose first
        // characters may be most of it.
        credential::check(token).map_err(|_| AuthError::Malformed {
            prefix: credential::shown_if_ours(token),
        })?;
        let found = match self.lookup(credential::digest(token), Some(from)).await {
            Ok(found) => found.ok_or_else(|| AuthError::Unknown { prefix: prefix() })?,
            Err(Refused::HeldBack(wait)) => {
                return Err(AuthError::TooManyFailures {
                    prefix: prefix(),
                    retry_after_secs: u32::try_from(wait.as_secs().saturating_add(1)).unwrap_or(u32::MAX),
                })
            }
            Err(Refused::Store) => return Err(AuthError::StoreUnavailable),
        };
        let now = Utc::now();
        let cred = &found.lookup.credential;
        let agent_disabled = found.agent.as_ref().is_some_and(|a| a.disabled);
        if cred.revoked_at.is_some() || found.lookup.owner_disabled || agent_disabled {
            return Err(AuthError::Revoked { prefix: prefix() });
        }
        if cred.expires_at.is_some_and(|at| at <= now) {
            return Err(AuthError::Expired { prefix: prefix() });
        }
        let bound_to = found.origin.as_ref().and_then(|o| o.audience);
        if bound_to.is_some() && bound_to != audience {
            return Err(AuthError::WrongAudience { prefix: prefix() });
        }
        self.touch(&found.lookup, now);
        Ok(Identity {
            principal: cred.principal.clone(),
            credential_id: cred.id.clone(),
            agent: found.agent,
            origin: found.origin,
        })
    }

    /// Does the token of SHA-256 `digest` still authenticate as it did
    /// (not revoked or expired, its owner and agent enabled)? `None` when
    /// the store cannot say: an open stream is not ended for a blip.
    pub async fn still_works(&self, digest: [u8; 32]) -> Option<bool> {
        let found = match self.lookup(digest, None).await {
            Ok(found) => found,
            Err(_) => return None,
        };
        Some(found.is_some_and(|found| found.lookup.works(found.agent.as_deref(), Utc::now())))
    }

    /// Drop every cached entry of credential `id` (after revoking it here).
    pub fn forget(&self, id: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        // A lookup begun before is not joined by one after.
        self.inflight.clear();
        self.cache.retain(|_, cached| cached.found.lookup.credential.id != id);
    }

    /// Drop every cached credential (another replica changed credentials,
    /// owners or agents: which ones, it does not say).
    pub fn forget_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        // A lookup begun before is not joined by one after.
        self.inflight.clear();
        self.cache.clear();
    }

    /// Drop the cached entry of the token whose SHA-256 is `digest`.
    pub fn forget_digest(&self, digest: &[u8; 32]) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        // A lookup begun before is not joined by one after.
        self.inflight.clear();
        self.cache.remove(digest);
    }

    /// Drop every cached credential of agent session `id` (after revoking
    /// the agent here), so it is refused on its next request.
    pub fn forget_agent(&self, id: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        // A lookup begun before is not joined by one after.
        self.inflight.clear();
        self.cache
            .retain(|_, cached| cached.found.agent.as_ref().is_none_or(|agent| agent.id != id));
    }

    /// The credential of the token whose SHA-256 is `digest`, from the
    /// cache or the store; a token presented `from` an address held back
    /// is looked up only if it authenticated here before.
    async fn lookup(&self, digest: [u8; 32], from: Option<&str>) -> Result<Option<Found>, Refused> {
        if let Some(cached) = self.cache.get(&digest) {
            if cached.fetched.elapsed() < self.ttl {
                return Ok(Some(cached.found.clone()));
            }
        }
        let asking = Asking {
            inflight: &self.inflight,
            digest,
            cell: self.inflight.entry(digest).or_default().clone(),
        };
        let read = asking.cell.get_or_try_init(|| self.read(digest, from)).await?;
        read.clone().map_err(|StoreDown| Refused::Store)
    }

    /// Ask the store for the token whose SHA-256 is `digest`, and cache
    /// what it knows. A token that never worked here, presented `from` an
    /// address, takes one of that address's failures before the store is
    /// asked (so lookups in flight together cannot all pass), given back
    /// if the token is good or the store cannot say. `Err` only when held
    /// back: that is this address's, not the others' in flight.
    async fn read(&self, digest: [u8; 32], from: Option<&str>) -> Result<Result<Option<Found>, StoreDown>, Refused> {
        let limited = match (&self.failures, from) {
            (Some(limiter), Some(from)) if !from.is_empty() && !self.worked.contains(&digest) => {
                Some((limiter.clone(), address_key(from).into_owned()))
            }
            _ => None,
        };
        if let Some((limiter, address)) = &limited {
            limiter.check(address).map_err(Refused::HeldBack)?;
        }
        // Read before the store is: the entry's age counts from here.
        let (generation, read_at) = (self.generation.load(Ordering::SeqCst), Instant::now());
        let store = self.store.clone();
        let key = credential::lower_hex(&digest);
        let found = tokio::task::spawn_blocking(move || {
            let found = store.find(&key);
            // Given back here, where it runs to its end even if the caller
            // has gone meanwhile: only a token the store does not know
            // stays counted.
            if let Some((limiter, address)) = &limited {
                if !matches!(found, Ok(None)) {
                    limiter.refund(address);
                }
            }
            Ok::<_, SourceError>(found?.map(|(lookup, agent)| Found {
                origin: lookup.origin.clone().map(Arc::new),
                lookup: Arc::new(lookup),
                agent: agent.map(Arc::new),
            }))
        })
        .await
        .map_err(|_| StoreDown)
        .and_then(|read| {
            read.map_err(|error| {
                tracing::error!(%error, "credential lookup failed");
                StoreDown
            })
        });
        let found = match found {
            Ok(found) => found,
            Err(down) => return Ok(Err(down)),
        };
        match &found {
            Some(found) => {
                if self.worked.len() >= WORKED_MAX {
                    self.worked.clear();
                }
                self.worked.insert(digest);
                self.cache.insert(
                    digest,
                    Cached {
                        found: found.clone(),
                        fetched: read_at,
                    },
                );
                // A forget since the read began may have emptied the cache
                // before this insert: then what was read may be revoked
                // already, and is not kept. (Checked after inserting, so a
                // forget that comes later still finds it to drop.)
                if self.generation.load(Ordering::SeqCst) != generation {
                    self.cache.remove(&digest);
                }
            }
            None => {
                self.cache.remove(&digest);
            }
        }
        Ok(Ok(found))
    }

    fn touch(&self, lookup: &CredentialLookup, now: chrono::DateTime<Utc>) {
        let due = lookup.credential.last_used_at.is_none_or(|at| now - at > TOUCH_EVERY);
        if !due {
            return;
        }
        // Update the cached copy first so concurrent requests don't all write.
        for mut entry in self.cache.iter_mut() {
            if entry.found.lookup.credential.id == lookup.credential.id {
                Arc::make_mut(&mut entry.found.lookup).credential.last_used_at = Some(now);
            }
        }
        let store = self.store.clone();
        let id = lookup.credential.id.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(error) = store.touch(&id, now) {
                tracing::warn!(%error, credential = %id, "could not record last use");
            }
        });
    }
}

/// A lookup's place among those in flight, given up when it ends, however
/// it ends (a caller gone mid-lookup included): a finished lookup's answer
/// is never found there later, past its cache lifetime.
struct Asking<'a> {
    inflight: &'a DashMap<[u8; 32], Arc<Lookup>, foldhash::fast::RandomState>,
    digest: [u8; 32],
    cell: Arc<Lookup>,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.inflight
            .remove_if(&self.digest, |_, kept| Arc::ptr_eq(kept, &self.cell));
    }
}

/// Why a lookup gave no answer.
enum Refused {
    /// The address is held back for the unknown tokens it sent (how long).
    HeldBack(Duration),
    /// The store could not be asked.
    Store,
}

/// Whose failures (or requests, for a limit by address) `from` (an
/// address as the audit row writes it) counts with: an IPv6 address with
/// the rest of its /64, which one host usually holds whole; anything else
/// as it is.
pub fn address_key(from: &str) -> Cow<'_, str> {
    match from.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            Cow::Owned(format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3]))
        }
        _ => Cow::Borrowed(from),
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme in any
/// case).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_value_that_is_no_portcullis_token_shows_none_of_itself() {
        let authenticator = Authenticator::new(Slow(Arc::new(SlowStore::default())));
        let refused = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::AUTHORIZATION, format!("Bearer {value}").parse().unwrap());
            let authenticator = &authenticator;
            async move { authenticator.authenticate(&headers, "").await.unwrap_err() }
        };
        let password = refused("hunter2-is-my-password").await;
        assert_eq!(password.prefix(), Some(""));
        assert!(!password.to_string().contains("hunter"), "{password}");
        let mut typo = credential::mint().token;
        typo.pop();
        assert_eq!(
            refused(&typo).await.prefix(),
            Some(&typo[..10]),
            "a mistyped token of ours"
        );
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert(http::header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }

    /// One credential, read as the store had it when a lookup began; the
    /// first lookup then waits for `release`, as a slow store read would.
    #[derive(Default)]
    struct SlowStore {
        revoked: std::sync::atomic::AtomicBool,
        down: std::sync::atomic::AtomicBool,
        release: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
        lookups: AtomicU64,
    }

    struct Slow(Arc<SlowStore>);

    impl CredentialSource for Slow {
        fn find(&self, _: &str) -> Result<Option<(CredentialLookup, Option<Agent>)>, SourceError> {
            let revoked = self.0.revoked.load(Ordering::SeqCst);
            self.0.lookups.fetch_add(1, Ordering::SeqCst);
            let release = self.0.release.lock().unwrap().take();
            if let Some(release) = release {
                release.recv().unwrap();
            }
            if self.0.down.load(Ordering::SeqCst) {
                return Err("the store is down".into());
            }
            let credential = Credential {
                id: "c1".into(),
                principal: crate::identity::Principal::person("ana"),
                name: "laptop".into(),
                display_prefix: "pcl_x".into(),
                created_at: Utc::now(),
                expires_at: None,
                last_used_at: Some(Utc::now()),
                revoked_at: revoked.then(Utc::now),
            };
            let lookup = CredentialLookup {
                credential,
                owner_disabled: false,
                origin: None,
            };
            Ok(Some((lookup, None)))
        }

        fn touch(&self, _: &str, _: DateTime<Utc>) -> Result<(), SourceError> {
            Ok(())
        }
    }

    /// The configured life of the cache: with none, each request asks the
    /// store; within a long one, a credential revoked untold still passes
    /// until the cache is forgotten.
    #[tokio::test]
    async fn a_credential_looked_up_is_kept_for_the_configured_life() {
        let token = credential::mint().token;
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        let store = Arc::new(SlowStore::default());
        let uncached = Authenticator::new(Slow(store.clone())).keeping_lookups_for(Duration::ZERO);
        let kept = Authenticator::new(Slow(store.clone())).keeping_lookups_for(Duration::from_secs(3600));
        for authenticator in [&uncached, &kept] {
            assert!(authenticator.authenticate(&headers, "").await.is_ok());
        }
        store.revoked.store(true, Ordering::SeqCst);
        assert!(uncached.authenticate(&headers, "").await.is_err(), "asked again");
        assert!(kept.authenticate(&headers, "").await.is_ok(), "kept for the hour");
        kept.forget_all();
        assert!(kept.authenticate(&headers, "").await.is_err());
    }

    /// A client's many first requests with one token (a controller's
    /// informers starting) ask the store once, and take one of the
    /// address's failures, given back; made-up tokens in flight together
    /// each take one, so no more of them than the limit reach the store.
    #[test]
    fn lookups_of_one_token_in_flight_together_ask_the_store_once_and_unknown_ones_are_each_counted() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = Arc::new(SlowStore::default());
            let (release, wait) = std::sync::mpsc::channel();
            *store.release.lock().unwrap() = Some(wait);
            let authenticator = Arc::new(Authenticator::new(Slow(store.clone())).limiting_failures(3));
            for answer in twenty_at_once(&authenticator, &store, release).await {
                assert!(answer.is_ok());
            }
            assert_eq!(store.lookups.load(Ordering::SeqCst), 1, "one store lookup for all");

            // A store that is down fails them together, once.
            store.down.store(true, Ordering::SeqCst);
            let (release, wait) = std::sync::mpsc::channel();
            *store.release.lock().unwrap() = Some(wait);
            for answer in twenty_at_once(&authenticator, &store, release).await {
                assert_eq!(answer.unwrap_err(), AuthError::StoreUnavailable);
            }
            assert_eq!(
                store.lookups.load(Ordering::SeqCst),
                2,
                "one more lookup, failed for all"
            );
        });

        let unknown = Arc::new(Authenticator::new(Unknown(Arc::default())).limiting_failures(3));
        let refused: Vec<AuthError> = runtime.block_on(async {
            let asking: Vec<_> = (0..20)
                .map(|_| {
                    let (unknown, headers) = (unknown.clone(), bearer(&credential::mint().token));
                    tokio::spawn(async move { unknown.authenticate(&headers, "203.0.113.9").await.unwrap_err() })
                })
                .collect();
            let mut refused = Vec::new();
            for task in asking {
                refused.push(task.await.unwrap());
            }
            refused
        });
        let looked_up = refused
            .iter()
            .filter(|e| matches!(e, AuthError::Unknown { .. }))
            .count();
        assert_eq!(looked_up, 3, "{refused:?}");
    }

    /// Twenty requests with one new token from one address at once, on
    /// this (one-threaded) runtime: each task runs until it waits, the
    /// first in `store` (held there until all are waiting), the others on
    /// it. Their answers.
    async fn twenty_at_once(
        authenticator: &Arc<Authenticator>,
        store: &SlowStore,
        release: std::sync::mpsc::Sender<()>,
    ) -> Vec<Result<Identity, AuthError>> {
        let before = store.lookups.load(Ordering::SeqCst);
        let headers = bearer(&credential::mint().token);
        let asking: Vec<_> = (0..20)
            .map(|_| {
                let (authenticator, headers) = (authenticator.clone(), headers.clone());
                tokio::spawn(async move { authenticator.authenticate(&headers, "203.0.113.9").await })
            })
            .collect();
        while store.lookups.load(Ordering::SeqCst) == before {
            tokio::task::yield_now().await;
        }
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        let mut answers = Vec::new();
        for task in asking {
            answers.push(task.await.unwrap());
        }
        answers
    }

    /// Headers carrying `token`.
    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        headers
    }

    /// A store that knows no token.
    struct Unknown(Arc<AtomicU64>);

    impl CredentialSource for Unknown {
        fn find(&self, _: &str) -> Result<Option<(CredentialLookup, Option<Agent>)>, SourceError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(None)
        }

        fn touch(&self, _: &str, _: DateTime<Utc>) -> Result<(), SourceError> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lookup_that_read_before_a_revocation_is_not_cached_past_it() {
        let store = Arc::new(SlowStore::default());
        let (release, wait) = std::sync::mpsc::channel();
        *store.release.lock().unwrap() = Some(wait);
        let authenticator = Arc::new(Authenticator::new(Slow(store.clone())));
        let mut headers = HeaderMap::new();
        let bearer = format!("Bearer {}", credential::mint().token);
        headers.insert(http::header::AUTHORIZATION, bearer.parse().unwrap());
        let in_flight = {
            let (authenticator, headers) = (authenticator.clone(), headers.clone());
            tokio::spawn(async move { authenticator.authenticate(&headers, "").await })
        };
        while store.lookups.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // Revoked while that lookup is in the store; the revoker forgets.
        store.revoked.store(true, Ordering::SeqCst);
        authenticator.forget_all();
        release.send(()).unwrap();
        assert!(
            in_flight.await.unwrap().is_ok(),
            "it read the store before the revocation"
        );
        let next = authenticator.authenticate(&headers, "").await;
        assert!(matches!(next, Err(AuthError::Revoked { .. })), "{next:?}");
        assert_eq!(store.lookups.load(Ordering::SeqCst), 2, "read again, not cached");
    }
}
