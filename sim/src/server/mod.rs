//! The simulated cluster's server: TLS (a CA minted at start), HTTP/2 and
//! HTTP/1.1 by ALPN with upgrades (exec, attach, port-forward), one task per
//! connection, graceful shutdown.
//!
//! # Request path
//!
//! [`pipeline::serve`] is the whole path of a request, in order:
//!
//! 1. audit id: the request's `Audit-ID`, else a new UUID; always answered
//!    as `Audit-Id`;
//! 2. record (headers, method, path, query), completed later with the user,
//!    impersonated user, verb and code ([`Sim::requests`]);
//! 3. faults ([`Sim::faults`]);
//! 4. authenticate (static bearer tokens: admin, portcullis, extras);
//! 5. impersonate (`Impersonate-*`);
//! 6. classify (`RequestInfo`);
//! 7. authorize with RBAC, non-resource paths included;
//! 8. dispatch: discovery, review resources, pod streams, or the verbs.
//!
//! # Known differences from kube-apiserver
//!
//! - No API Priority and Fairness (no 429), no request timeout, no
//!   `--goaway-chance`; the request log keeps the last 10,000 requests.
//! - The system namespaces (`default`, `kube-system`, `kube-public`,
//!   `kube-node-lease`) always exist, then the configured objects are
//!   created in order (namespaces first).

// Errors are `Status` by value, the contract between the simulator's
// parts; the error path is cold, so boxing would buy nothing.
#![allow(clippy::result_large_err)]

mod log;
pub(crate) mod pipeline;

pub use log::RecordedRequest;

use crate::auth::TokenAuthenticator;
use crate::faults::Faults;
use crate::handlers::{self, Settings};
use crate::registry;
use crate::store::Store;
use crate::{rbac, seed, UserInfo};
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use log::RequestLog;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// How long shutdown waits for connections to finish before closing them.
const GRACE: Duration = Duration::from_secs(1);

/// Configuration of a simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Token of `kubernetes-admin` (`system:masters`).
    pub admin_token: String,
    /// Token of portcullis's ServiceAccount
    /// (`system:serviceaccount:portcullis:portcullis`).
    pub portcullis_token: String,
    /// More tokens and their users.
    pub extra_tokens: HashMap<String, UserInfo>,
    /// Objects the cluster starts with (namespaces are created first).
    pub objects: Vec<serde_json::Value>,
    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK.
    pub bookmark_interval: Duration,
}

fn random_token() -> String {
    let bytes: [u8; 24] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl SimConfig {
    /// Random tokens, the bootstrap RBAC objects and the demo cluster.
    pub fn new() -> Self {
        let mut objects = rbac::bootstrap_objects();
        objects.extend(seed::demo_objects());
        SimConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_token: random_token(),
            portcullis_token: random_token(),
            extra_tokens: HashMap::new(),
            objects,
            bookmark_interval: Settings::default().bookmark_interval,
        }
    }

    fn authenticator(&self) -> TokenAuthenticator {
        let mut tokens = self.extra_tokens.clone();
        tokens.insert(
            self.admin_token.clone(),
            UserInfo {
                name: "kubernetes-admin".into(),
                groups: vec!["system:masters".into(), "system:authenticated".into()],
                ..Default::default()
            },
        );
        tokens.insert(
            self.portcullis_token.clone(),
            UserInfo {
                name: "system:serviceaccount:portcullis:portcullis".into(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:portcullis".into(),
                    "system:authenticated".into(),
                ],
                ..Default::default()
            },
        );
        TokenAuthenticator { tokens }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// What every request of one simulated cluster shares.
pub(crate) struct State {
    pub(crate) store: Arc<Store>,
    pub(crate) faults: Faults,
    pub(crate) tokens: TokenAuthenticator,
    pub(crate) log: RequestLog,
    pub(crate) settings: Settings,
    /// Bumped by [`Sim::goaway`]: every open connection is asked to go away.
    pub(crate) goaway: watch::Sender<u64>,
    /// TLS connections accepted so far (a client's pooling is visible here).
    pub(crate) accepted: std::sync::atomic::AtomicU64,
}

/// A running simulated cluster. Stops on [`Sim::shutdown`] or when dropped.
pub struct Sim {
    addr: SocketAddr,
    ca_pem: String,
    admin_token: String,
    portcullis_token: String,
    state: Arc<State>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim").field("addr", &self.addr).finish_non_exhaustive()
    }
}

fn invalid_data(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl Sim {
    /// Seed the store, bind, and serve until shut down.
    pub async fn start(config: SimConfig) -> io::Result<Sim> {
        let store = Arc::new(Store::new());
        seed_store(&store, &config.objects)?;
        let tls = crate::tls::generate().map_err(invalid_data)?;
        let tls_config = crate::tls::server_config(&tls.cert_pem, &tls.key_pem).map_err(invalid_data)?;
        let listener = TcpListener::bind(config.bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            store,
            faults: Faults::default(),
            tokens: config.authenticator(),
            log: RequestLog::default(),
            settings: Settings {
                bookmark_interval: config.bookmark_interval,
            },
            goaway: watch::Sender::new(0),
            accepted: std::sync::atomic::AtomicU64::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls_config));
        let task = tokio::spawn(accept_loop(listener, acceptor, Arc::clone(&state), stopped));
        Ok(Sim {
            addr,
            ca_pem: tls.ca_pem,
            admin_token: config.admin_token,
            portcullis_token: config.portcullis_token,
            state,
            stop,
            task: Some(task),
        })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ask every open connection to go away, as kube-apiserver does at
    /// random (`--goaway-chance`) and on restart: HTTP/2 clients get a GOAWAY,
    /// HTTP/1.1 connections close after their current request; new
    /// connections are accepted as before.
    pub fn goaway(&self) {
        self.state.goaway.send_modify(|generation| *generation += 1);
    }

    /// How many TLS connections the simulator has accepted.
    pub fn connections_accepted(&self) -> u64 {
        self.state.accepted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The admin (`system:masters`) bearer token.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// portcullis's ServiceAccount bearer token.
    pub fn portcullis_token(&self) -> &str {
        &self.portcullis_token
    }

    /// Every request received (the last 10,000), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.log.snapshot()
    }

    /// Fault injection rules.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// The cluster's storage.
    pub fn store(&self) -> &Store {
        &self.state.store
    }

    /// A kubeconfig (YAML) for this cluster and `token`, context `sim`, the
    /// CA embedded.
    pub fn kubeconfig(&self, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": self.url(), "certificate-authority-data": ca}}],
            "users": [{"name": "sim", "user": {"token": token}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
            "current-context": "sim",
        });
        serde_yaml::to_string(&config).unwrap_or_default()
    }

    /// Stop accepting, let open requests finish for a moment, then close
    /// every connection.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            // Aborting the accept loop drops its connection tasks.
            task.abort();
        }
    }
}

/// Create the system namespaces, then `objects` (namespaces first), as the
/// controllers would have left them.
fn seed_store(store: &Store, objects: &[serde_json::Value]) -> io::Result<()> {
    let system = ["default", "kube-system", "kube-public", "kube-node-lease"].map(system_namespace);
    let (namespaces, others): (Vec<_>, Vec<_>) = objects
        .iter()
        .partition(|o| o["kind"] == "Namespace" && o["apiVersion"] == "v1");
    for object in system.iter().chain(namespaces).chain(others) {
        let mut object = object.clone();
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        if let Some(rt) = registry::find_kind(&group, object["kind"].as_str().unwrap_or_default()) {
            handlers::settle(rt, None, &mut object);
        }
        match store.create(object) {
            Ok(_) => {}
            Err(status) if status.reason == "AlreadyExists" => {}
            Err(status) => {
                return Err(invalid_data(format!(
                    "seeding the simulated cluster: {}",
                    status.message
                )))
            }
        }
    }
    Ok(())
}

/// A namespace kube-apiserver creates itself at start: written by
/// `kube-apiserver`, so its name label is that manager's.
fn system_namespace(name: &str) -> serde_json::Value {
    let mut namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    crate::defaults::decode("", "Namespace", None, &mut namespace);
    if let Some(rt) = registry::find("", "v1", "namespaces") {
        let now = crate::store::now_timestamp();
        crate::patch::record_update(rt, None, &mut namespace, "kube-apiserver", &now);
    }
    namespace
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<State>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    let told_to_stop = stopped.clone();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                // Small answers must not wait for a delayed ACK (Nagle).
                let _ = tcp.set_nodelay(true);
                let (acceptor, state, builder) = (acceptor.clone(), Arc::clone(&state), builder.clone());
                let stopped = told_to_stop.clone();
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    state.accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let goaway = state.goaway.subscribe();
                    let service = hyper::service::service_fn(move |req| pipeline::serve(Arc::clone(&state), req));
                    let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service).into_owned();
                    serve_until_told_to_go(connection, goaway, stopped).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Open connections were told to go away; give them a moment, then cut.
    let _ = tokio::time::timeout(GRACE, async { while connections.join_next().await.is_some() {} }).await;
    connections.shutdown().await;
}

/// Serve one connection until it ends; a GOAWAY request or the simulator
/// stopping shuts it down gracefully (in-flight requests finish).
async fn serve_until_told_to_go<C>(connection: C, mut goaway: watch::Receiver<u64>, mut stopped: watch::Receiver<bool>)
where
    C: std::future::Future + GracefulConnection,
{
    let mut connection = std::pin::pin!(connection);
    let mut going = false;
    loop {
        tokio::select! {
            // Errors here are clients going away; nothing to do.
            _ = connection.as_mut() => return,
            Ok(()) = goaway.changed(), if !going => {
                going = true;
                connection.as_mut().shut_down_gracefully();
            }
            _ = stopped.wait_for(|stop| *stop), if !going => {
                going = true;
                connection.as_mut().shut_down_gracefully();
            }
        }
    }
}

/// A served connection that can be asked to finish gracefully.
trait GracefulConnection {
    /// Send GOAWAY (HTTP/2) or stop keep-alive (HTTP/1.1).
    fn shut_down_gracefully(self: std::pin::Pin<&mut Self>);
}

impl<I, S, E> GracefulConnection for hyper_util::server::conn::auto::UpgradeableConnection<'static, I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: http_body::Body + Send + 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn shut_down_gracefully(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_namespace_s_name_label_is_managed_by_kube_apiserver() {
        let namespace = system_namespace("kube-public");
        let entry = &namespace["metadata"]["managedFields"][0];
        assert_eq!(
            (&entry["manager"], &entry["operation"]),
            (&serde_json::json!("kube-apiserver"), &serde_json::json!("Update"))
        );
        assert_eq!(
            entry["fieldsV1"],
            serde_json::json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}})
        );
    }
}
