//! `POST /apiserver-audit/<cluster>`: kube-apiserver's audit webhook
//! backend (batch mode) delivers its `EventList`s here, to be joined with
//! portcullis's rows and checked for bypasses (`crate::audit::apiserver`,
//! `crate::audit::bypass`).
//!
//! Each cluster has its own credential, a bearer token read from the file
//! its configuration names (`audit_webhook_token_file`) at each call, so it
//! can be rotated in place; a cluster without one refuses every call. A
//! caller that is not the cluster's API server could otherwise bury a real
//! bypass under noise, or forge matches: so anything else is a 401 with an
//! audit row. Bodies are bounded and each cluster's calls rate-limited; a
//! batch is kept whole or not at all, and a refused one loses nothing kept
//! before (the API server retries it).

use crate::audit::apiserver::{self, BatchError};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::body::ReadError;
use crate::config::{ClusterConfig, Config};
use crate::status::{Status, StatusDetails};
use crate::store::Store;
use crate::tls::PeerCertificates;
use http::{Request, Response};
use prometheus_client::metrics::counter::Counter;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::UnixTime;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

/// Largest batch accepted: the API server's default batch (400 events at
/// Metadata level) is far below.
pub const MAX_BODY: usize = 8 * 1024 * 1024;
/// Calls a cluster may make in a burst, and per second after it.
const BURST: f64 = 20.0;
const PER_SECOND: f64 = 10.0;

/// The webhook's state: each cluster's configuration and call budget.
#[derive(Debug)]
pub struct Webhook {
    store: Store,
    clusters: HashMap<String, ClusterConfig>,
    budgets: Mutex<HashMap<String, (f64, Instant)>>,
    /// Per cluster, the verifier of its webhook's client certificates.
    certificates: HashMap<String, Arc<dyn ClientCertVerifier>>,
    /// Events of other users, counted and dropped.
    pub ignored: Counter,
}

impl Webhook {
    /// The webhook for `config`'s clusters, keeping events in `store`.
    pub fn new(config: &Config, store: Store, ignored: Counter) -> Webhook {
        let certificates = config
            .clusters
            .iter()
            .filter_map(|c| {
                let file = c.audit_webhook_client_ca_file.as_deref()?;
                match crate::tls::optional_client_verifier(&[file]) {
                    Ok(verifier) => verifier.map(|v| (c.name.clone(), v)),
                    Err(error) => {
                        // The listener refused to start on it already; fail closed.
                        tracing::error!(cluster = c.name, %error, "cannot use the audit webhook's client CA");
                        None
                    }
                }
            })
            .collect();
        Webhook {
            store,
            certificates,
            clusters: config.clusters.iter().map(|c| (c.name.clone(), c.clone())).collect(),
            budgets: Mutex::default(),
            ignored,
        }
    }

    /// Answer one call for `cluster`, noting in `row` what it was.
    pub async fn serve<B>(&self, cluster: &str, request: Request<B>, row: &mut AuditRow) -> Response<Body>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        row.cluster = crate::audit::row::bounded(cluster);
        (row.verb, row.api_group, row.api_version, row.resource) =
            ("create".into(), "audit.k8s.io".into(), "v1".into(), "events".into());
        match self.accept(cluster, request, row).await {
            Ok(response) => response,
            Err((status, why)) => {
                if let Some(why) = why {
                    row.refuse(why);
                }
                row.reason = status.reason.clone();
                let challenge = status.code == 401;
                let mut response = status.response();
                if challenge {
                    let value = http::HeaderValue::from_static("Bearer realm=\"portcullis-audit-webhook\"");
                    response.headers_mut().insert(http::header::WWW_AUTHENTICATE, value);
                }
                response
            }
        }
    }

    async fn accept<B>(
        &self,
        cluster: &str,
        request: Request<B>,
        row: &mut AuditRow,
    ) -> Result<Response<Body>, (Status, Option<Refusal>)>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        if request.method() != http::Method::POST {
            let status = Status::failure(405, "MethodNotAllowed", "the audit webhook takes POST only");
            return Err((status, None));
        }
        let presented = request.extensions().get::<PeerCertificates>();
        let config = self.authenticate(cluster, request.headers(), presented).await?;
        self.spend(cluster)?;
        let body = crate::body::read_whole(request.into_body(), MAX_BODY, crate::body::SMALL_BODY_WITHIN)
            .await
            .map_err(|error| match error {
                ReadError::TooLarge => {
                    let message = format!("an audit batch is at most {MAX_BODY} bytes");
                    (Status::too_large(message), Some(Refusal::BodyTooLarge))
                }
                ReadError::TimedOut => {
                    let status = Status::failure(408, "Timeout", "the audit batch did not arrive in time");
                    (status, Some(Refusal::BodyTimedOut))
                }
                ReadError::Cut => (
                    Status::bad_request("the audit batch broke off"),
                    Some(Refusal::BodyCutShort),
                ),
            })?;
        row.bytes_in = body.len() as u64;
        let events = apiserver::parse_batch(&body).map_err(refused_batch)?;
        let store = self.store.clone();
        let ingested = tokio::task::spawn_blocking(move || apiserver::ingest(&store, &config, events))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(|e| {
                tracing::error!(error = %e, "cannot keep the API server's audit batch");
                (
                    Status::unavailable("the audit batch cannot be kept now: send it again"),
                    None,
                )
            })?;
        self.ignored.inc_by(ingested.ignored as u64);
        let details = StatusDetails::default();
        Ok(Status::success(details).response())
    }

    /// The cluster's configuration, if the call bears its webhook token or
    /// a client certificate its webhook CA issued.
    async fn authenticate(
        &self,
        cluster: &str,
        headers: &http::HeaderMap,
        presented: Option<&PeerCertificates>,
    ) -> Result<ClusterConfig, (Status, Option<Refusal>)> {
        let refused = || {
            let message = "the audit webhook needs this cluster's own bearer token or client certificate";
            (Status::unauthorized(message), Some(Refusal::AuditWebhookCredential))
        };
        let config = self.clusters.get(cluster).ok_or_else(refused)?;
        if let (Some(verifier), Some(PeerCertificates(chain))) = (self.certificates.get(cluster), presented) {
            // The listener accepted any of the clusters' webhook CAs: this
            // cluster's own must have issued it.
            if let Some((leaf, intermediates)) = chain.split_first() {
                if verifier
                    .verify_client_cert(leaf, intermediates, UnixTime::now())
                    .is_ok()
                {
                    return Ok(config.clone());
                }
            }
            return Err(refused());
        }
        let file = config.audit_webhook_token_file.as_ref().ok_or_else(refused)?;
        let expected = match tokio::fs::read_to_string(file).await {
            Ok(token) if !token.trim().is_empty() => token.trim().to_string(),
            Ok(_) | Err(_) => {
                tracing::error!(cluster, file = %file.display(), "cannot read the audit webhook token file");
                return Err(refused());
            }
        };
        let presented = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(refused)?;
        // Compared as digests: equal length, and no early exit on the token.
        if Sha256::digest(presented.trim()) != Sha256::digest(&expected) {
            return Err(refused());
        }
        Ok(config.clone())
    }

    /// Take one call from `cluster`'s budget (a token bucket).
    fn spend(&self, cluster: &str) -> Result<(), (Status, Option<Refusal>)> {
        let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let (tokens, at) = budgets.entry(cluster.to_string()).or_insert((BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * PER_SECOND).min(BURST);
        *at = now;
        if *tokens < 1.0 {
            let details = StatusDetails {
                retry_after_seconds: Some(1),
                ..StatusDetails::default()
            };
            let status = Status::failure(429, "TooManyRequests", "too many audit batches: send it again shortly");
            return Err((status.with_details(details), Some(Refusal::RateLimited)));
        }
        *tokens -= 1.0;
        Ok(())
    }
}

fn refused_batch(error: BatchError) -> (Status, Option<Refusal>) {
    let message = format!("the audit batch was refused, nothing of it kept: {error}");
    (Status::bad_request(message), Some(Refusal::AuditWebhookBatch))
}
