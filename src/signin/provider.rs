//! The identity provider's discovery document and signing keys, fetched
//! when first needed and cached: a provider that is down when portcullis
//! starts costs nothing but sign-in, and credentials already issued keep
//! working. The document is read again after an hour; the keys also when an
//! ID token names a key the cached set lacks (the provider rotated its
//! keys), at most once every [`KEY_REFETCH_EVERY`], so forged tokens with
//! made-up key ids cannot make portcullis hammer the provider. A failed
//! discovery is tried again at most once every [`DISCOVERY_RETRY_EVERY`]
//! (`/login`, which any page can make a browser ask for, starts one).

use super::http::HttpClient;
use super::SignInError;
use openidconnect::core::{CoreJsonWebKeySet, CoreProviderMetadata};
use openidconnect::IssuerUrl;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the discovery document is trusted.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// The least time between two key refetches for unknown key ids.
pub const KEY_REFETCH_EVERY: Duration = Duration::from_secs(10);
/// The least time between two discoveries after one failed.
pub const DISCOVERY_RETRY_EVERY: Duration = Duration::from_secs(10);

struct Cached {
    metadata: CoreProviderMetadata,
    fetched: Instant,
}

/// One provider's cached discovery and keys.
pub struct Provider {
    issuer: IssuerUrl,
    http: HttpClient,
    cached: Mutex<Option<Cached>>,
    /// When the keys were last refetched for an unknown key id.
    refetched: Mutex<Option<Instant>>,
    /// When a discovery last failed, and why.
    failed: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.issuer.as_str())
            .finish()
    }
}

impl Provider {
    /// The provider at `issuer`, reached through `http`; nothing is fetched
    /// yet.
    pub fn new(issuer: IssuerUrl, http: HttpClient) -> Provider {
        Provider {
            issuer,
            http,
            cached: Mutex::new(None),
            refetched: Mutex::new(None),
            failed: Mutex::new(None),
        }
    }

    /// The issuer URL.
    pub fn issuer(&self) -> &IssuerUrl {
        &self.issuer
    }

    /// The discovery document (with its keys): the cached one while fresh,
    /// else fetched again; a failed refresh keeps using a cached one.
    pub async fn metadata(&self) -> Result<CoreProviderMetadata, SignInError> {
        let stale = {
            let cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
            match cached.as_ref() {
                Some(c) if c.fetched.elapsed() < DISCOVERY_TTL => return Ok(c.metadata.clone()),
                other => other.map(|c| c.metadata.clone()),
            }
        };
        {
            let failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, why)) = failed.as_ref().filter(|(at, _)| at.elapsed() < DISCOVERY_RETRY_EVERY) {
                return stale.ok_or_else(|| SignInError::ProviderUnavailable(why.clone()));
            }
        }
        let http = self.http.clone();
        let client = move |request| {
            let http = http.clone();
            async move { http.send(request).await }
        };
        match CoreProviderMetadata::discover_async(self.issuer.clone(), &client).await {
            Ok(metadata) => {
                self.store(metadata.clone());
                *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Ok(metadata)
            }
            Err(error) => {
                tracing::warn!(issuer = %self.issuer.as_str(), error = %chain(&error), "identity provider discovery failed");
                *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), chain(&error)));
                stale.ok_or_else(|| SignInError::ProviderUnavailable(chain(&error)))
            }
        }
    }

    /// Fetch the keys again for an ID token whose key id the cached set
    /// lacks; `None` when a refetch happened too recently.
    pub async fn refetch_keys(&self) -> Option<CoreJsonWebKeySet> {
        {
            let mut last = self.refetched.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < KEY_REFETCH_EVERY) {
                return None;
            }
            *last = Some(Instant::now());
        }
        let mut metadata = self.metadata().await.ok()?;
        let http = self.http.clone();
        let client = move |request| {
            let http = http.clone();
            async move { http.send(request).await }
        };
        match CoreJsonWebKeySet::fetch_async(metadata.jwks_uri(), &client).await {
            Ok(keys) => {
                tracing::info!(issuer = %self.issuer.as_str(), "identity provider's keys fetched again");
                metadata = metadata.set_jwks(keys.clone());
                self.store(metadata);
                Some(keys)
            }
            Err(error) => {
                tracing::warn!(error = %chain(&error), "identity provider's keys could not be fetched again");
                None
            }
        }
    }

    /// The client to the provider (cheap to clone).
    pub fn http(&self) -> HttpClient {
        self.http.clone()
    }

    fn store(&self, metadata: CoreProviderMetadata) {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let fetched = cached
            .as_ref()
            .filter(|c| c.fetched.elapsed() < DISCOVERY_TTL)
            .map_or_else(Instant::now, |c| c.fetched);
        *cached = Some(Cached { metadata, fetched });
    }
}

/// An error and its causes, in one line.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_failed_discovery_is_not_tried_again_at_once() {
        // A provider that closes every connection it is offered, counted.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = IssuerUrl::new(format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let offered = Arc::new(AtomicUsize::new(0));
        let counted = offered.clone();
        let serving = tokio::spawn(async move {
            while let Ok((connection, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(connection);
            }
        });
        let provider = Provider::new(issuer, HttpClient::new(None).unwrap());
        for _ in 0..5 {
            assert!(matches!(
                provider.metadata().await,
                Err(SignInError::ProviderUnavailable(_))
            ));
        }
        assert_eq!(offered.load(Ordering::SeqCst), 1, "one try for five sign-ins");
        serving.abort();
    }
}
