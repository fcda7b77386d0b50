//! Build the listener (port 0 works), serve TLS with HTTP/2 and HTTP/1.1,
//! and run until told to stop.
//!
//! There is deliberately no whole-request deadline on connections: watches
//! and exec sessions live for hours. TLS handshakes must end within 10
//! seconds, a connection's first request must come within 30 (hyper reads
//! the bytes that tell HTTP/1.1 from HTTP/2 without a deadline of its own)
//! and HTTP/1.1 headers within 30, so slow or silent clients cannot pin
//! connections; one with no request open for `[limits] idle_timeout` is
//! closed (see `idle`); at most `[limits] connections` are open at once; and
//! HTTP/2 concurrent streams are capped (the "rapid reset" class of
//! attacks).

use crate::config::Config;
use crate::doors::Doors;
use crate::gateway::Pipeline;
use crate::reconcile::Reconciler;
use crate::store::notify::{self, Change};
use crate::store::Store;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast::Receiver;
use tokio_rustls::TlsAcceptor;

mod idle;
mod shards;

use idle::Activity;

/// A connection thread's signal to stop: its connections close gracefully
/// when it changes, and the thread waits until all of them have dropped it.
type Stopping = tokio::sync::watch::Receiver<()>;

/// Why portcullis could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate or key is unusable.
    #[error("TLS: {0}")]
    Tls(String),
    /// A cluster's client or the audit could not be set up.
    #[error(transparent)]
    Pipeline(#[from] crate::gateway::BuildError),
    /// A cluster's reconciler client could not be set up.
    #[error(transparent)]
    Reconcile(#[from] crate::reconcile::cluster::ClientError),
    /// The threads that serve connections could not be started.
    #[error("cannot start the connection threads: {0}")]
    Threads(#[source] std::io::Error),
}

/// A bound, not yet running, portcullis.
pub struct App {
    addr: SocketAddr,
    /// Where connections are accepted and served, once running.
    shards: shards::Shards,
    certificate: Arc<ReloadingCertificate>,
    doors: Arc<Doors>,
    reconciler: Arc<Reconciler>,
    store: Store,
    /// The bypass check's grace time and the audit's retention.
    audit: crate::config::AuditConfig,
}

impl App {
    /// Bind the listener and build the pipeline and its doors.
    pub async fn build(config: &Config, store: Store) -> Result<App, AppError> {
        let certificate = Arc::new(ReloadingCertificate::load(
            config.tls.cert_file.clone(),
            config.tls.key_file.clone(),
        )?);
        // Clients are asked for a certificate only when a cluster's audit
        // webhook authenticates with one (`audit_webhook_client_ca_file`).
        let webhook_cas: Vec<&std::path::Path> = config
            .clusters
            .iter()
            .filter_map(|c| c.audit_webhook_client_ca_file.as_deref())
            .collect();
        let verifier = crate::tls::optional_client_verifier(&webhook_cas).map_err(|e| AppError::Tls(e.to_string()))?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| AppError::Tls(e.to_string()))?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut tls = builder.with_cert_resolver(certificate.clone());
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let kept = store.clone();
        let doors = Arc::new(Doors::new(config, store)?);
        // The policy stage's clock: a grant's binding goes when its group
        // stops being sent.
        let clock = doors.pipeline().grant_clock().clone();
        let recorder = crate::audit::forwarded::Recorder::Writer(doors.pipeline().audit().writer().clone());
        let reconciler = Arc::new(Reconciler::new(config, kept.clone(), clock, recorder)?);
        doors.bind_with(reconciler.clone());
        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|source| AppError::Bind {
                addr: config.listen.clone(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| AppError::Bind {
            addr: config.listen.clone(),
            source,
        })?;
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let serving = doors.clone();
        let open = Arc::new(OpenConnections {
            count: AtomicUsize::new(0),
            most: config.limits.connections,
            idle: config.limits.idle_timeout,
            logged: Default::default(),
        });
        let serve = move |tcp, peer, stopping| {
            serve_connection(acceptor.clone(), serving.clone(), open.clone(), tcp, peer, stopping)
        };
        let listener = listener.into_std().map_err(AppError::Threads)?;
        let shards = shards::Shards::start(shards::Shards::per_core(), listener, serve).map_err(AppError::Threads)?;
        Ok(App {
            addr,
            shards,
            certificate,
            doors,
            reconciler,
            store: kept,
            audit: config.audit.clone(),
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The request path, e.g. to read metrics in tests.
    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.doors.pipeline().clone()
    }

    /// The clusters' RBAC reconciler (to trigger or await a pass).
    pub fn reconciler(&self) -> Arc<Reconciler> {
        self.reconciler.clone()
    }

    /// Serve until `shutdown` completes; then stop accepting, give open
    /// requests a few seconds, and return.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let background = self.spawn_background();
        self.shards.serve();
        shutdown.await;
        for task in background {
            task.abort();
        }
        // Another replica takes over the clusters at once, not after the
        // Lease's duration; meanwhile the connection threads stop accepting
        // and drain.
        let stopping = self.shards.stop();
        let releasing = tokio::time::timeout(Duration::from_secs(5), self.reconciler.release());
        let (_, ()) = tokio::join!(releasing, stopping);
        // Connections still open after the drain were dropped with their
        // threads, and the rows of their requests queued as they went, so
        // a clean shutdown loses no audit row.
        self.doors.pipeline().audit().close().await;
    }

    /// The work done beside serving: the clusters' RBAC is kept in step,
    /// undecided access requests and held writes expire, OAuth codes,
    /// tokens and unused clients are forgotten, and certificates
    /// and tokens are re-read, and the API servers' audit events are
    /// checked for requests that went around portcullis; what another
    /// replica changes is dropped from the caches; and open streams whose
    /// credential or grants are gone are ended.
    fn spawn_background(&self) -> [tokio::task::JoinHandle<()>; 8] {
        [
            tokio::spawn(follow_changes(self.store.changes(), self.doors.clone())),
            tokio::spawn(crate::audit::bypass::check_periodically(
                self.store.clone(),
                self.audit.bypass_grace,
                self.audit.retention,
                self.doors.pipeline().metrics.bypass_alerts.clone(),
            )),
            tokio::spawn(crate::oauth::sweep_periodically(
                self.store.clone(),
                self.doors.clients().clone(),
            )),
            tokio::spawn(self.reconciler.clone().run()),
            tokio::spawn(crate::access::expire_periodically(self.store.clone())),
            tokio::spawn(crate::approvals::wait::expire_periodically(self.store.clone())),
            tokio::spawn(refresh(self.doors.pipeline().clone(), self.certificate.clone())),
            tokio::spawn(end_revoked_streams(self.doors.clone())),
        ]
    }
}

/// Drop the cached credentials and grants another replica changed, as
/// soon as the store tells (PostgreSQL; `changes` is `None` on SQLite,
/// where no other replica exists).
async fn follow_changes(changes: Option<Receiver<Change>>, doors: Arc<Doors>) {
    let Some(mut changes) = changes else { return };
    while let Some(change) = notify::next(&mut changes).await {
        if change.stales_credentials() {
            doors.authenticator().forget_all();
        }
        if change.stales_grants() {
            doors.pipeline().policy().forget();
        }
    }
}

/// How many client connections are open, how many may be, and how long
/// one may stand idle.
struct OpenConnections {
    count: AtomicUsize,
    most: usize,
    idle: Duration,
    /// When a refusal was last logged (seconds since the Unix epoch): once
    /// a minute at most, or a flood at the limit floods the log too.
    logged: std::sync::atomic::AtomicU64,
}

pin_project_lite::pin_project! {
    /// A client connection's stream, holding its place among the open
    /// connections until the socket goes: with an upgraded connection
    /// (exec, attach, port-forward), that is after hyper's own part ends.
    struct CountedIo<T> {
        #[pin]
        io: T,
        slot: Counted,
    }
}

impl<T: tokio::io::AsyncRead> tokio::io::AsyncRead for CountedIo<T> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.project().io.poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite> tokio::io::AsyncWrite for CountedIo<T> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }
}

/// One open connection, counted until it is dropped.
struct Counted(Arc<OpenConnections>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's first request must come within this of its handshake.
const FIRST_REQUEST: Duration = Duration::from_secs(30);

/// One client's connection: the TLS handshake (10 s at most), then its
/// requests through the doors (the first within [`FIRST_REQUEST`]) until it
/// closes, stands idle for `[limits] idle_timeout`, or shutdown ends it.
/// Past `[limits] connections` it is closed at once.
async fn serve_connection(
    acceptor: TlsAcceptor,
    doors: Arc<Doors>,
    open: Arc<OpenConnections>,
    tcp: TcpStream,
    peer: SocketAddr,
    mut stopping: Stopping,
) {
    if open.count.fetch_add(1, Ordering::Relaxed) >= open.most {
        open.count.fetch_sub(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = open.logged.load(Ordering::Relaxed);
        if now >= last + 60
            && open
                .logged
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(limit = open.most, "connections refused: [limits] connections are open");
        }
        return;
    }
    let idle = open.idle;
    let counted = Counted(open);
    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await else {
        return;
    };
    let activity = Arc::new(Activity::default());
    let requests = activity.clone();
    let presented =
        tls.get_ref().1.peer_certificates().map(|certs| {
            crate::tls::PeerCertificates(Arc::new(certs.iter().map(|c| c.clone().into_owned()).collect()))
        });
    let service = service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
        let in_flight = requests.begin();
        let doors = doors.clone();
        if let Some(presented) = &presented {
            request.extensions_mut().insert(presented.clone());
        }
        // Boxed: hyper moves a stream's future into its task, and the
        // box is what moves then, not the future's kilobytes.
        Box::pin(async move {
            let response = doors.handle(request, peer).await;
            Ok::<_, std::convert::Infallible>(response.map(|body| crate::body::Guarded::new(body, in_flight)))
        })
    });
    // Served in a task of its own, so that its polls pay for no deadline:
    // this one looks from outside, now and then, and closes a connection
    // that asked nothing or has stood idle.
    let closer = activity.clone();
    let mut serving = tokio::spawn(async move {
        let builder = http_settings();
        let io = CountedIo { io: tls, slot: counted };
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        tokio::pin!(connection);
        let ended = tokio::select! {
            biased;
            ended = connection.as_mut() => ended,
            () = closer.closing() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(error) = ended {
            tracing::debug!(%error, "connection ended with an error");
        }
    });
    // Closed when quiet at every look over `idle`: no request open, none
    // begun or ended, so idle since the first of those looks at least.
    let look = idle / LOOKS;
    let first = tokio::time::Instant::now() + FIRST_REQUEST;
    let mut next = (tokio::time::Instant::now() + look).min(first);
    let mut last = None;
    let mut quiet = 0;
    loop {
        tokio::select! {
            _ = &mut serving => return,
            _ = stopping.changed() => break,
            () = tokio::time::sleep_until(next) => {}
        }
        if !activity.asked() {
            if next >= first {
                tracing::debug!(%peer, "connection closed: no request within 30 s");
                serving.abort();
                return;
            }
            next = (next + look).min(first);
            continue;
        }
        let now = activity.quiet();
        quiet = if now.is_some() && now == last { quiet + 1 } else { 0 };
        if quiet == LOOKS {
            tracing::debug!(%peer, "connection closed: idle for {}", humantime::format_duration(idle));
            break;
        }
        last = now;
        next += look;
    }
    activity.close();
    // Held until its requests are done: the drain waits for every
    // connection's `stopping`.
    let _ = serving.await;
    drop(stopping);
}

/// How many looks at a connection's activity make up its idle timeout.
const LOOKS: u32 = 4;

/// HTTP/1.1 and HTTP/2 as the module doc says: headers within 30 s, at most
/// 250 concurrent streams.
fn http_settings() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    // Pings find a peer that is gone (a laptop closed, a NAT entry
    // dropped) and close its connection.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(250)
        .keep_alive_interval(Duration::from_secs(60))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// Give open requests 5 s to finish after the listener closes.
async fn drain(stop: tokio::sync::watch::Sender<()>) {
    let _ = stop.send(());
    if tokio::time::timeout(Duration::from_secs(5), stop.closed())
        .await
        .is_err()
    {
        tracing::info!("closing streams still open after 5 s");
    }
}

/// Every few seconds: re-read changed certificates and tokens, probe
/// clusters.
async fn refresh(pipeline: Arc<Pipeline>, certificate: Arc<ReloadingCertificate>) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tick.tick().await;
        certificate.reload_if_changed();
        for upstream in pipeline.upstreams() {
            upstream.refresh(pipeline.audit().writer()).await;
        }
    }
}

/// Every second, end the open streams whose credential or grants are gone
/// (see [`crate::gateway::Pipeline::end_revoked_streams`]).
async fn end_revoked_streams(doors: Arc<crate::doors::Doors>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        doors.pipeline().end_revoked_streams(doors.authenticator()).await;
    }
}

/// The serving certificate, swapped in when its files change.
#[derive(Debug)]
struct ReloadingCertificate {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<(Arc<CertifiedKey>, Option<SystemTime>)>,
}

impl ReloadingCertificate {
    fn load(cert_file: PathBuf, key_file: PathBuf) -> Result<Self, AppError> {
        let key = read_certified_key(&cert_file, &key_file)?;
        let modified = modified(&cert_file, &key_file);
        Ok(ReloadingCertificate {
            cert_file,
            key_file,
            current: RwLock::new((Arc::new(key), modified)),
        })
    }

    fn reload_if_changed(&self) {
        let modified = modified(&self.cert_file, &self.key_file);
        if modified.is_none() || modified == self.current.read().unwrap_or_else(|p| p.into_inner()).1 {
            return;
        }
        match read_certified_key(&self.cert_file, &self.key_file) {
            Ok(key) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = (Arc::new(key), modified);
                tracing::info!("serving certificate reloaded");
            }
            Err(error) => tracing::error!(%error, "new serving certificate refused; keeping the old one"),
        }
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|p| p.into_inner()).0.clone())
    }
}

fn modified(cert: &PathBuf, key: &PathBuf) -> Option<SystemTime> {
    let a = std::fs::metadata(cert).and_then(|m| m.modified()).ok()?;
    let b = std::fs::metadata(key).and_then(|m| m.modified()).ok()?;
    Some(a.max(b))
}

fn read_certified_key(cert_file: &PathBuf, key_file: &PathBuf) -> Result<CertifiedKey, AppError> {
    let err = |what: &PathBuf, e: &dyn std::fmt::Display| AppError::Tls(format!("{}: {e}", what.display()));
    let certs = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| err(cert_file, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(cert_file, &e))?;
    if certs.is_empty() {
        return Err(err(cert_file, &"no certificate found"));
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| err(key_file, &e))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| err(key_file, &e))?;
    let certified = CertifiedKey::new(certs, signing);
    // A key from another pair (a Secret updated with the wrong key, or a
    // certificate written a moment before its key) would fail every
    // handshake: refused, so a reload keeps the pair that works.
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(certified),
        Err(e) => Err(err(key_file, &format!("the key is not the certificate's: {e}"))),
    }
}

/// Completes on Ctrl-C or SIGTERM (how Kubernetes stops a pod), so both end
/// in a clean shutdown that flushes the audit.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops portcullis cleanly");
                return interrupt.await;
            }
        };
        tokio::select! {
            () = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await;
}

#[cfg(test)]
mod certificate_tests {
    use super::*;

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = (crate::tls::generate(&[]).unwrap(), crate::tls::generate(&[]).unwrap());
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("tls.crt"), &one.cert_pem).unwrap();
        std::fs::write(path("tls.key"), &one.key_pem).unwrap();
        std::fs::write(path("other.key"), &other.key_pem).unwrap();
        assert!(read_certified_key(&path("tls.crt"), &path("tls.key")).is_ok());
        let refused = read_certified_key(&path("tls.crt"), &path("other.key")).err().unwrap();
        assert!(
            refused.to_string().contains("the key is not the certificate's"),
            "{refused}"
        );
    }
}
