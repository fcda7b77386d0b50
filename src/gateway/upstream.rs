//! Upstream: each cluster's connections, made once at start.
//!
//! Ordinary requests go over HTTP/1.1 keep-alive connections
//! ([`super::keepalive`]), as nginx forwards: for a small GET, HTTP/2's
//! framing, HPACK and flow control cost more than a connection per
//! concurrent request (5% of the instructions per GET, measured with
//! `scripts/bench --callgrind`).
//! Watches and other long-running requests go over HTTP/2 (ALPN), where
//! one connection carries hundreds of them; exec, attach and port-forward
//! over HTTP/1.1, because the API server never upgrades over HTTP/2. The
//! ServiceAccount token is re-read when its file changes (projected tokens
//! rotate), so the request path only clones a header value.

use super::keepalive::KeepAlive;
pub use super::keepalive::SendError;
use super::metrics::ClusterLabels;
use super::upstream_uri::ServerUrl;
use crate::body::Body;
use crate::config::ClusterConfig;
use crate::identity::Identity;
use crate::tls::CaFileTrust;
use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, SystemTime};

type HttpsClient = Client<Bounded, Body>;

/// HTTP/2 connections kept for long-running requests: 64 × 250 streams
/// carries 16,000 watches. A client opens its connection on first use.
const STREAMING_CONNECTIONS: usize = 64;

/// Why a cluster's client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The CA bundle could not be read or holds no certificate.
    #[error("cluster {cluster}: cannot use CA bundle {path}: {message}")]
    CaBundle {
        /// Cluster.
        cluster: String,
        /// File.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The token file could not be read.
    #[error("cluster {cluster}: cannot read token file {path}: {source}")]
    Token {
        /// Cluster.
        cluster: String,
        /// File.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server URL is not usable.
    #[error("cluster {cluster}: invalid server URL {url}")]
    Url {
        /// Cluster.
        cluster: String,
        /// URL.
        url: String,
    },
}

/// Idle HTTP/1.1 connections kept per cluster and connection thread
/// (`app::shards`): what a burst leaves beyond this is closed rather than
/// held open on the API server.
const IDLE_CONNECTIONS: usize = 128;

/// How long a connection to a cluster may take to set up: TCP, then the
/// TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an idle HTTP/1.1 connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One of a caller's open long-running requests ([`Upstream::open_stream`]):
/// counted for its person or bot, and for the agent if one asked, and
/// kept where [`super::Pipeline::end_revoked_streams`] finds it.
pub struct StreamSlot {
    upstream: Arc<Upstream>,
    keys: [Option<String>; 2],
    id: u64,
    live: Arc<LiveStream>,
}

impl crate::body::Guard for StreamSlot {
    /// Has the stream been ended (its credential or a grant it was sent
    /// with no longer holds)? Registers `cx` to be woken when it is.
    fn poll_ended(&self, cx: &mut std::task::Context<'_>) -> bool {
        if self.live.ended.load(Ordering::Acquire) {
            return true;
        }
        self.live.waker.register(cx.waker());
        self.live.ended.load(Ordering::Acquire)
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.upstream.live.remove(&self.id);
        for key in self.keys.iter().flatten() {
            self.upstream.give_back_stream(key);
        }
    }
}

/// An open long-running request as it was let through: who, with which
/// token, sent which groups. A watch, a followed log or an exec shell
/// lasts hours, and the cluster never checks a stream again: portcullis
/// ends it when what let it through is gone.
pub struct LiveStream {
    /// The SHA-256 of the bearer token it came with (none for an MCP
    /// tool's request, whose session is checked by its own door).
    pub token: Option<[u8; 32]>,
    /// Who sent it.
    pub identity: Identity,
    /// The groups it was sent with.
    pub groups: Vec<String>,
    ended: AtomicBool,
    waker: futures_util::task::AtomicWaker,
}

impl LiveStream {
    /// End the stream: its body ends, or its relay closes both sides.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// A cluster behind portcullis.
pub struct Upstream {
    /// Cluster name.
    pub name: String,
    server_url: ServerUrl,
    keepalive: KeepAlive,
    upgrade_client: HttpsClient,
    /// Watches and other long-running requests, spread over several
    /// HTTP/2 connections: one connection carries at most the API server's
    /// concurrent-stream limit (250 by default), so 10,000 watches on the
    /// ordinary pool would wait forever.
    streaming_clients: Vec<HttpsClient>,
    next_streaming: std::sync::atomic::AtomicUsize,
    /// Long-running requests open, by caller ([`Upstream::open_stream`]).
    open_streams: dashmap::DashMap<String, usize>,
    /// Each open long-running request, by a number of its own.
    live: dashmap::DashMap<u64, Arc<LiveStream>, foldhash::fast::RandomState>,
    next_live: std::sync::atomic::AtomicU64,
    token_file: PathBuf,
    authorization: RwLock<(HeaderValue, Option<SystemTime>)>,
    /// The cluster's CA bundle, read again when the file changes.
    trust: Arc<CaFileTrust>,
    reachable: AtomicBool,
    /// This cluster's series of the latency histogram, found in the family
    /// once rather than by its label on every request.
    latency: OnceLock<Histogram>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("server", &self.server_url.as_str())
            .finish()
    }
}

impl Upstream {
    /// Build the clients for `config`.
    pub fn new(config: &ClusterConfig) -> Result<Arc<Upstream>, UpstreamError> {
        let ca_error = |message: String| UpstreamError::CaBundle {
            cluster: config.name.clone(),
            path: config.ca_file.clone(),
            message,
        };
        let trust = CaFileTrust::open(&config.ca_file).map_err(ca_error)?;
        let server_url = ServerUrl::new(config.server.trim_end_matches('/')).map_err(|_| UpstreamError::Url {
            cluster: config.name.clone(),
            url: config.server.clone(),
        })?;
        let (authorization, modified) = read_token(&config.token_file).map_err(|source| UpstreamError::Token {
            cluster: config.name.clone(),
            path: config.token_file.clone(),
            source,
        })?;
        let keepalive = KeepAlive::new(
            connector(trust.clone(), Protocol::Http1),
            server_url.server().clone(),
            IDLE_CONNECTIONS,
            IDLE_TIMEOUT,
        );
        Ok(Arc::new(Upstream {
            name: config.name.clone(),
            server_url,
            keepalive,
            streaming_clients: (0..STREAMING_CONNECTIONS)
                .map(|_| client(trust.clone(), Protocol::Http2))
                .collect(),
            next_streaming: std::sync::atomic::AtomicUsize::new(0),
            open_streams: dashmap::DashMap::new(),
            live: dashmap::DashMap::default(),
            next_live: std::sync::atomic::AtomicU64::new(0),
            upgrade_client: client(trust.clone(), Protocol::Http1),
            trust,
            token_file: config.token_file.clone(),
            authorization: RwLock::new((authorization, modified)),
            reachable: AtomicBool::new(true),
            latency: OnceLock::new(),
        }))
    }

    /// This cluster's series in `family` (the pipeline's, which outlives
    /// its upstreams); a clone shares the series' counts.
    pub fn latency(&self, family: &Family<ClusterLabels, Histogram>) -> &Histogram {
        self.latency.get_or_init(|| {
            let labels = ClusterLabels {
                cluster: self.name.clone(),
            };
            family.get_or_create(&labels).clone()
        })
    }

    /// The full upstream URI for a Kubernetes path and query.
    pub fn uri(&self, path: &str, query: Option<&str>) -> Result<Uri, http::uri::InvalidUri> {
        self.server_url.uri(path, query)
    }

    /// `Bearer <ServiceAccount token>`, marked sensitive.
    pub fn authorization(&self) -> HeaderValue {
        self.authorization.read().unwrap_or_else(|p| p.into_inner()).0.clone()
    }

    /// Send an ordinary request (HTTP/1.1, keep-alive).
    pub async fn send(&self, request: Request<Body>) -> Result<Response<Incoming>, SendError> {
        self.keepalive.send(self.with_host(request)).await
    }

    /// `request` with the server's `Host`: the HTTP/1.1 clients leave it
    /// to us, made once ([`ServerUrl::host`]); a client's own never gets
    /// this far (`headers::strip_request`).
    fn with_host(&self, mut request: Request<Body>) -> Request<Body> {
        if let Some(host) = self.server_url.host() {
            request.headers_mut().insert(http::header::HOST, host.clone());
        }
        request
    }

    /// Send a long-running request (watch, log follow, proxy) on the next of
    /// the streaming connections, round robin.
    pub async fn send_streaming(&self, request: Request<Body>) -> Result<Response<Incoming>, SendError> {
        let next = self.next_streaming.fetch_add(1, Ordering::Relaxed) % self.streaming_clients.len();
        Ok(self.streaming_clients[next].request(request).await?)
    }

    /// A place for one more long-running request (watch, log follow, proxy,
    /// exec, attach, port-forward) of `caller` on this cluster, held until
    /// the slot is dropped; else the limit `caller` reached. So no one
    /// caller takes all the streams the streaming connections carry (64 ×
    /// the API server's 250) and stalls everyone else's watches.
    ///
    /// A person or bot has `most`, its agents' included: agents are made
    /// by a consent, and counted apart each would bring as many places
    /// again. One agent has half of them, so that a runaway agent leaves
    /// its person room for their own.
    pub fn open_stream(
        self: &Arc<Self>,
        caller: &Identity,
        most: usize,
        token: Option<[u8; 32]>,
        groups: &[String],
    ) -> Result<StreamSlot, usize> {
        let owner = caller.principal.to_string();
        let agent = caller.agent.as_ref().map(|a| ["agent:", &a.id].concat());
        let agent_most = (most / 2).max(1);
        if let Some(agent) = &agent {
            if !self.take_stream(agent, agent_most) {
                return Err(agent_most);
            }
        }
        if !self.take_stream(&owner, most) {
            if let Some(agent) = &agent {
                self.give_back_stream(agent);
            }
            return Err(most);
        }
        let live = Arc::new(LiveStream {
            token,
            identity: caller.clone(),
            groups: groups.to_vec(),
            ended: AtomicBool::new(false),
            waker: futures_util::task::AtomicWaker::new(),
        });
        let id = self.next_live.fetch_add(1, Ordering::Relaxed);
        self.live.insert(id, live.clone());
        Ok(StreamSlot {
            upstream: self.clone(),
            keys: [Some(owner), agent],
            id,
            live,
        })
    }

    /// The long-running requests open now.
    pub fn live_streams(&self) -> Vec<Arc<LiveStream>> {
        self.live.iter().map(|entry| entry.value().clone()).collect()
    }

    fn take_stream(&self, key: &str, most: usize) -> bool {
        let mut open = self.open_streams.entry(key.to_string()).or_insert(0);
        if *open >= most {
            return false;
        }
        *open += 1;
        true
    }

    fn give_back_stream(&self, key: &str) {
        self.open_streams.remove_if_mut(key, |_, open| {
            *open -= 1;
            *open == 0
        });
    }

    /// Send an upgrade request over HTTP/1.1.
    pub async fn send_upgrade(&self, request: Request<Body>) -> Result<Response<Incoming>, SendError> {
        Ok(self.upgrade_client.request(self.with_host(request)).await?)
    }

    /// Was the cluster reachable at the last probe?
    pub fn is_reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// Re-read the token if its file changed; close connections idle too
    /// long; probe reachability. Run every few seconds by the app. The
    /// probe is portcullis's own request: it carries an `Audit-ID` recorded
    /// through `writer`, so the API server's event for it is no bypass
    /// alert.
    pub async fn refresh(&self, writer: &crate::audit::writer::AuditWriter) {
        self.reload_token();
        match self.trust.reload() {
            Ok(true) => tracing::info!(cluster = %self.name, "CA bundle reloaded: new connections trust it"),
            Ok(false) => {}
            Err(error) => {
                tracing::error!(cluster = %self.name, %error, "cannot re-read the CA bundle; the one before stays trusted")
            }
        }
        self.keepalive.reap();
        let probe = async {
            let uri = self.uri("/readyz", None).ok()?;
            let audit_id = crate::audit::id::new();
            let request = Request::get(uri)
                .header(http::header::AUTHORIZATION, self.authorization())
                .header("audit-id", super::headers::audit_id_value(audit_id))
                .body(crate::body::empty())
                .ok()?;
            let record = crate::audit::forwarded::Forwarded::system(&audit_id.to_string(), &self.name);
            writer.forwarded(record);
            self.send(request).await.ok()
        };
        let reachable = tokio::time::timeout(Duration::from_secs(5), probe)
            .await
            .ok()
            .flatten()
            .is_some();
        if self.reachable.swap(reachable, Ordering::Relaxed) != reachable {
            tracing::warn!(cluster = %self.name, reachable, "cluster reachability changed");
        }
    }

    fn reload_token(&self) {
        let modified = std::fs::metadata(&self.token_file).and_then(|m| m.modified()).ok();
        let current = self.authorization.read().unwrap_or_else(|p| p.into_inner()).1;
        if modified.is_none() || modified == current {
            return;
        }
        match read_token(&self.token_file) {
            Ok(fresh) => {
                *self.authorization.write().unwrap_or_else(|p| p.into_inner()) = fresh;
                tracing::info!(cluster = %self.name, "ServiceAccount token reloaded");
            }
            Err(error) => tracing::error!(cluster = %self.name, %error, "cannot re-read ServiceAccount token"),
        }
    }
}

fn read_token(path: &PathBuf) -> std::io::Result<(HeaderValue, Option<SystemTime>)> {
    let modified = std::fs::metadata(path)?.modified().ok();
    let token = std::fs::read_to_string(path)?;
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "token is not a valid header value"))?;
    value.set_sensitive(true);
    Ok((value, modified))
}

/// What a client speaks to the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 when the API server offers it (ALPN), else HTTP/1.1.
    Http2,
}

/// A connector whose connections are set up, TCP and TLS, within
/// [`CONNECT_TIMEOUT`] or not at all. A control plane failing over behind
/// a load balancer may take the SYN and never answer it, or accept and
/// never finish the handshake: a stream (watch, exec), which has no request
/// timeout, would wait for ever, holding its caller's stream place.
#[derive(Clone)]
pub(super) struct Bounded(HttpsConnector<HttpConnector>);

impl tower::Service<Uri> for Bounded {
    type Response = <HttpsConnector<HttpConnector> as tower::Service<Uri>>::Response;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, server: Uri) -> Self::Future {
        let connecting = self.0.call(server);
        Box::pin(async move {
            tokio::time::timeout(CONNECT_TIMEOUT, connecting)
                .await
                .map_err(|_| format!("no connection within {} s (TCP and TLS)", CONNECT_TIMEOUT.as_secs()))?
        })
    }
}

/// TCP (no Nagle delay), then TLS to the cluster's CA, offering HTTP/2
/// by ALPN only for `Protocol::Http2`; within [`CONNECT_TIMEOUT`].
pub(super) fn connector(trust: Arc<CaFileTrust>, protocol: Protocol) -> Bounded {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|_| unreachable_tls())
        .dangerous()
        .with_custom_certificate_verifier(trust)
        .with_no_client_auth();
    // Without TCP_NODELAY a small request that follows another on the same
    // connection waits for the delayed ACK (40 ms on Linux): the benchmark's
    // small GETs at concurrency 4 showed it as a 40 ms median.
    let mut tcp = HttpConnector::new();
    tcp.set_nodelay(true);
    // Also here: the connector shares it among a name's addresses, so one
    // that drops SYNs leaves time to try the next.
    tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
    tcp.enforce_http(false);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only();
    Bounded(match protocol {
        Protocol::Http2 => builder.enable_http1().enable_http2().wrap_connector(tcp),
        Protocol::Http1 => builder.enable_http1().wrap_connector(tcp),
    })
}

fn client(trust: Arc<CaFileTrust>, protocol: Protocol) -> HttpsClient {
    let mut client = Client::builder(TokioExecutor::new());
    // The HTTP/1.1 clients' requests carry the `Host` made once
    // (`Upstream::with_host`); over HTTP/2 hyper sends `:authority`.
    client
        .set_host(protocol == Protocol::Http2)
        .timer(hyper_util::rt::TokioTimer::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_max_idle_per_host(IDLE_CONNECTIONS)
        .http2_keep_alive_interval(Duration::from_secs(30));
    client.build(connector(trust, protocol))
}

/// The ring provider supports the default protocol versions; this cannot
/// happen.
fn unreachable_tls() -> ! {
    panic!("ring provider lacks default TLS versions")
}

#[cfg(test)]
mod tests {
    use crate::gateway::fixture::{held_agent, person, Fixture};

    #[tokio::test]
    async fn a_caller_holds_at_most_its_limit_of_streams_its_agents_included_and_an_agent_half() {
        let fixture = Fixture::new("").await;
        let upstream = fixture.pipeline.upstream("c").unwrap();
        let (ana, agent) = (person(), held_agent());
        let first = upstream.open_stream(&ana, 4, None, &[]).expect("ana's first place");
        let agents: Vec<_> = (0..2)
            .map(|_| {
                upstream
                    .open_stream(&agent, 4, None, &[])
                    .expect("the agent's own half")
            })
            .collect();
        assert_eq!(
            upstream.open_stream(&agent, 4, None, &[]).err(),
            Some(2),
            "an agent has half"
        );
        let last = upstream.open_stream(&ana, 4, None, &[]).expect("ana still has room");
        assert_eq!(
            upstream.open_stream(&ana, 4, None, &[]).err(),
            Some(4),
            "the agent's count as ana's"
        );
        drop(first);
        let again = upstream.open_stream(&ana, 4, None, &[]).expect("a place freed");
        drop((again, last, agents));
        assert!(
            upstream.open_streams.is_empty(),
            "no caller is kept once its streams are gone"
        );
    }
}
