//! `Portcullis::start()`: the simulated cluster with portcullis in front of
//! it on 127.0.0.1 port 0, a temporary store, and real clients.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use portcullis::app::App;
use portcullis::config::{ClusterConfig, Config, Limits, TlsConfig};
use portcullis::identity::{Grant, Principal};
use portcullis::store::Store;
use portcullis_sim::{Sim, SimConfig};

pub use crate::support::Kubectl;
use std::net::SocketAddr;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

/// The cluster name tests use.
pub const CLUSTER: &str = "sim";
/// The name of the real control plane in portcullis's configuration.
pub const REAL_CLUSTER: &str = "real";

/// The cluster portcullis is put in front of.
struct Upstream {
    name: &'static str,
    server: String,
    ca_pem: String,
    token: String,
}

/// A running simulated cluster with portcullis in front of it.
pub struct Portcullis {
    /// The cluster's name in portcullis: [`CLUSTER`] or [`REAL_CLUSTER`].
    pub cluster: &'static str,
    sim: Option<Sim>,
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub store: Store,
    pub config: Config,
    pub dir: tempfile::TempDir,
    pub gateway: Arc<portcullis::gateway::Pipeline>,
    pub reconciler: Arc<portcullis::reconcile::Reconciler>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Portcullis {
    /// The folder of the harness's files, as an `adjust` closure sees the
    /// configuration: files a test writes there are removed with the rest.
    pub fn folder_of(config: &Config) -> &std::path::Path {
        config
            .data_dir
            .parent()
            .expect("the data folder is in the harness's folder")
    }

    /// Start with default limits.
    pub async fn start() -> Portcullis {
        Self::start_with(|_| {}).await
    }

    /// Start, adjusting the configuration first.
    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Portcullis {
        let sim = Sim::start(SimConfig::new()).await.expect("simulated cluster starts");
        let upstream = Upstream {
            name: CLUSTER,
            server: sim.url(),
            ca_pem: sim.ca_pem().to_string(),
            token: sim.portcullis_token().to_string(),
        };
        Self::start_in_front_of(upstream, Some(sim), adjust).await
    }

    /// A second installation, with its own store (so its own instance id),
    /// in front of `other`'s simulated cluster.
    pub async fn start_beside(other: &Portcullis, adjust: impl FnOnce(&mut Config)) -> Portcullis {
        let upstream = Upstream {
            name: CLUSTER,
            server: other.sim().url(),
            ca_pem: other.sim().ca_pem().to_string(),
            token: other.sim().portcullis_token().to_string(),
        };
        Self::start_in_front_of(upstream, None, adjust).await
    }

    /// Start in front of the real control plane the tests share
    /// ([`crate::real::shared`]), as cluster [`REAL_CLUSTER`].
    pub async fn start_real() -> Portcullis {
        Self::start_real_with(|_| {}).await
    }

    /// [`Self::start_real`], adjusting the configuration first.
    pub async fn start_real_with(adjust: impl FnOnce(&mut Config)) -> Portcullis {
        let real = tokio::task::spawn_blocking(crate::real::shared).await.unwrap();
        Self::start_real_on(real, adjust).await
    }

    /// In front of `real`, a control plane of a test's own, as cluster
    /// [`REAL_CLUSTER`].
    pub async fn start_real_on(
        real: &crate::real::cluster::RealCluster,
        adjust: impl FnOnce(&mut Config),
    ) -> Portcullis {
        let upstream = Upstream {
            name: REAL_CLUSTER,
            server: real.url.clone(),
            ca_pem: real.ca_pem.clone(),
            token: real.portcullis_token.clone(),
        };
        Self::start_in_front_of(upstream, None, adjust).await
    }

    async fn start_in_front_of(upstream: Upstream, sim: Option<Sim>, adjust: impl FnOnce(&mut Config)) -> Portcullis {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("cluster-ca.pem"), &upstream.ca_pem).unwrap();
        std::fs::write(path("cluster-token"), &upstream.token).unwrap();
        let tls = portcullis::tls::generate(&["localhost"]).unwrap();
        std::fs::write(path("tls.crt"), &tls.cert_pem).unwrap();
        std::fs::write(path("tls.key"), &tls.key_pem).unwrap();
        std::fs::write(path("approvals.key"), portcullis::config::approvals::generate_key()).unwrap();
        let mut config = Config {
            listen: "127.0.0.1:0".into(),
            public_url: "https://127.0.0.1".into(),
            tls: TlsConfig {
                cert_file: path("tls.crt"),
                key_file: path("tls.key"),
            },
            data_dir: path("data"),
            trusted_proxies: Vec::new(),
            protected_namespaces: vec!["kube-system".into()],
            limits: Limits::default(),
            clusters: vec![ClusterConfig {
                name: upstream.name.into(),
                server: upstream.server.clone(),
                ca_file: path("cluster-ca.pem"),
                token_file: path("cluster-token"),
                audit_webhook_token_file: None,
                audit_webhook_client_ca_file: None,
                service_account: None,
            }],
            roles: Vec::new(),
            audit: Default::default(),
            mcp: Default::default(),
            // Passes run when a test asks (`reconcile()`): no periodic
            // resync traffic in the simulated cluster's request log unless a
            // test sets a short one.
            reconcile: portcullis::config::ReconcileConfig {
                resync: Duration::from_secs(3600),
                ..Default::default()
            },
            access: Default::default(),
            approvals: portcullis::config::approvals::ApprovalsConfig {
                key_file: Some(path("approvals.key")),
                ..Default::default()
            },
            oidc: None,
            sessions: Default::default(),
            oauth: Default::default(),
            ci: Default::default(),
            store: Default::default(),
        };
        adjust(&mut config);
        let store = portcullis::cli::open_store(&config).unwrap();
        let app = App::build(&config, store.clone()).await.expect("portcullis starts");
        let addr = app.local_addr();
        let gateway = app.pipeline();
        let reconciler = app.reconciler();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async {
            let _ = stopped.await;
        }));
        let env = Portcullis {
            cluster: upstream.name,
            sim,
            addr,
            ca_pem: tls.ca_pem,
            store,
            config,
            dir,
            gateway,
            reconciler,
            stop: Some(stop),
            task: Some(task),
        };
        // The roles' ClusterRoles exist before any test runs.
        env.reconcile().await;
        env
    }

    /// Run one reconcile pass of the cluster now and wait for it; panics
    /// unless everything got into step (tests stay deterministic).
    pub async fn reconcile(&self) -> portcullis::reconcile::pass::PassReport {
        let report = self
            .reconciler
            .pass_now(self.cluster)
            .await
            .expect("the cluster is configured");
        assert!(report.outcome.ok(), "reconcile pass failed: {:?}", report.outcome);
        report
    }

    /// [`Self::reconcile`] from synchronous test code (multi-thread runtime).
    pub fn reconcile_blocking(&self) -> portcullis::reconcile::pass::PassReport {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(self.reconcile()))
    }

    /// Run the `portcullis` binary with this configuration (written to the
    /// temporary directory), as an administrator would.
    pub fn cli(&self, args: &[&str]) -> Output {
        let path = self.dir.path().join("portcullis.toml");
        std::fs::write(&path, toml::to_string(&self.config).unwrap()).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .arg("--config")
            .arg(&path)
            .args(args)
            .env_remove("PORTCULLIS_CONFIG")
            .output()
            .expect("portcullis runs")
    }

    /// Run a person command (`whoami`, `access …`, `approvals …`,
    /// `credential …`) as the binary a person runs on their machine: against
    /// this server's API with `token`, trusting its CA, with a home of its
    /// own (no login file unless a test writes one).
    pub fn person_cli(&self, token: &str, args: &[&str]) -> Output {
        let ca = self.dir.path().join("portcullis-ca.pem");
        std::fs::write(&ca, &self.ca_pem).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .env("PORTCULLIS_SERVER", format!("https://{}", self.addr))
            .env("PORTCULLIS_CA_FILE", &ca)
            .env("PORTCULLIS_TOKEN", token)
            .env("HOME", self.dir.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("PORTCULLIS_CONFIG")
            .output()
            .expect("portcullis runs")
    }

    /// The simulated cluster (not there in front of the real one).
    pub fn sim(&self) -> &Sim {
        self.sim
            .as_ref()
            .expect("portcullis is in front of the simulated cluster")
    }

    /// `https://127.0.0.1:<port>/clusters/sim`.
    pub fn url(&self) -> String {
        format!("https://{}/clusters/{}", self.addr, self.cluster)
    }

    /// Add a person with `grants` (role, namespace) lasting `ttl`; returns a
    /// token and the grants.
    pub fn person_with_ttl(&self, login: &str, grants: &[(&str, Option<&str>)], ttl: Duration) -> (String, Vec<Grant>) {
        let person = Principal::person(login);
        self.store.add_principal(&person, false).unwrap();
        let grants: Vec<Grant> = grants
            .iter()
            .map(|(role, ns)| {
                let grant = portcullis::cli::new_grant(
                    &self.config,
                    person.clone(),
                    self.cluster,
                    role,
                    ns.map(Into::into),
                    ttl,
                    "test",
                )
                .unwrap();
                self.store.add_grant(&grant).unwrap();
                grant
            })
            .collect();
        self.reconcile_blocking();
        let (_, token) = self.store.issue_credential(&person, "test", None).unwrap();
        (token, grants)
    }

    /// Add a person with `grants` for an hour; returns a token.
    pub fn person(&self, login: &str, grants: &[(&str, Option<&str>)]) -> String {
        self.person_with_ttl(login, grants, Duration::from_secs(3600)).0
    }

    /// Add an agent for person `login` with `grants` (ids); returns its token.
    pub fn agent(&self, login: &str, grants: &[&Grant]) -> String {
        self.agent_named(login, "helper", grants)
    }

    /// Add an agent called `name` for person `login`; returns its token.
    pub fn agent_named(&self, login: &str, name: &str, grants: &[&Grant]) -> String {
        let ids: Vec<String> = grants.iter().map(|g| g.id.clone()).collect();
        let agent = self
            .store
            .add_agent(&Principal::person(login), name, &ids, false)
            .unwrap();
        self.store.issue_agent_credential(&agent, None).unwrap().1
    }

    /// kubectl with a kubeconfig for `token`, default namespace `namespace`.
    pub fn kubectl(&self, token: &str, namespace: &str) -> Kubectl {
        Kubectl::with_kubeconfig(&portcullis::demo::kubeconfig(
            &self.url(),
            &self.ca_pem,
            "tester",
            token,
            namespace,
        ))
    }

    /// A raw HTTPS client trusting portcullis's CA (HTTP/1.1 and HTTP/2).
    pub fn raw(&self) -> Raw {
        Raw::new(&self.ca_pem, format!("https://{}", self.addr))
    }

    /// A kube-rs client for `token`.
    pub fn kube(&self, token: &str) -> kube::Client {
        let mut config = kube::Config::new(self.url().parse().unwrap());
        config.root_cert = Some(vec![pem_to_der(&self.ca_pem)]);
        config.auth_info.token = Some(token.to_string().into());
        config.default_namespace = "shop".into();
        kube::Client::try_from(config).unwrap()
    }

    /// Stop portcullis cleanly (as on Ctrl-C) and start it again on the same
    /// store and simulated cluster; it listens on a new port.
    pub async fn restart(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("portcullis stops")
                .unwrap();
        }
        let app = App::build(&self.config, self.store.clone())
            .await
            .expect("portcullis restarts");
        self.addr = app.local_addr();
        self.gateway = app.pipeline();
        self.reconciler = app.reconciler();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.task = Some(tokio::spawn(app.run(async {
            let _ = stopped.await;
        })));
        self.stop = Some(stop);
    }

    /// POST `body` to `path` without a token over HTTP/1.1 with curl, the
    /// body sent at once (no `Expect: 100-continue`, as the SDKs and API
    /// servers send theirs), then GET `/healthz` with `--next`: each
    /// answer's code and new connects ("401 1", then "200 0" when the
    /// first connection served the second request). A large body is still
    /// arriving when a refusal is made before reading it.
    pub async fn refused_then_next(&self, path: &str, body: String) -> Vec<String> {
        let dir = self.dir.path().to_path_buf();
        let ca = dir.join("portcullis-ca.pem");
        std::fs::write(&ca, &self.ca_pem).unwrap();
        let file = dir.join("refused-body.json");
        std::fs::write(&file, body).unwrap();
        let (url, health) = (
            format!("https://{}{path}", self.addr),
            format!("https://{}/healthz", self.addr),
        );
        let out = tokio::task::spawn_blocking(move || {
            let write_out = "%{http_code} %{num_connects}\\n";
            std::process::Command::new("curl")
                .args(["-sS", "--http1.1", "--cacert"])
                .arg(&ca)
                .args([
                    "-H",
                    "Content-Type: application/json",
                    "-H",
                    "Accept: application/json, text/event-stream",
                ])
                .args(["-H", "Expect:", "-X", "POST", "-o", "/dev/null", "-w", write_out])
                .arg("--data-binary")
                .arg(format!("@{}", file.display()))
                .arg(&url)
                .args(["--next", "-sS", "--http1.1", "--cacert"])
                .arg(&ca)
                .args(["-o", "/dev/null", "-w", write_out])
                .arg(&health)
                .output()
                .expect("curl runs")
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Stop portcullis gracefully and wait until it has, keeping the
    /// simulated cluster (another installation may be in front of it).
    pub async fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    /// Stop portcullis and the simulated cluster.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        if let Some(sim) = self.sim.take() {
            sim.shutdown().await;
        }
    }
}

impl Drop for Portcullis {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// A raw HTTPS client.
pub struct Raw {
    client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    base: String,
}

/// A response read whole.
pub struct RawResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl RawResponse {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }
}

impl Raw {
    /// A client trusting only `ca_pem`, for `base` (`https://host:port`).
    pub fn with_ca(ca_pem: &str, base: String) -> Raw {
        Self::new(ca_pem, base)
    }

    /// GET `path`; `None` when the connection fails (e.g. TLS refused).
    pub async fn try_send(&self, method: Method, path: &str) -> Option<StatusCode> {
        let request = Request::builder().method(method).uri(format!("{}{path}", self.base));
        let response = self
            .client
            .request(request.body(Full::new(Bytes::new())).unwrap())
            .await
            .ok()?;
        Some(response.status())
    }

    fn new(ca_pem: &str, base: String) -> Raw {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls_pki_types::CertificateDer::from(pem_to_der(ca_pem)))
            .unwrap();
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .enable_http2()
            .build();
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Raw { client, base }
    }

    /// Send a request to `path` (raw, not normalised) and read the answer.
    pub async fn send(&self, method: Method, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> RawResponse {
        let mut request = Request::builder().method(method).uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .client
            .request(request.body(Full::new(Bytes::from(body))).unwrap())
            .await
            .expect("request sent");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        RawResponse {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// GET with a bearer token.
    pub async fn get(&self, path: &str, token: &str) -> RawResponse {
        let auth = format!("Bearer {token}");
        self.send(Method::GET, path, &[("authorization", &auth)], Vec::new())
            .await
    }

    /// GET with a bearer token; `None` unless the whole answer arrived (the
    /// connection failed, or broke off before the body's end).
    pub async fn try_get(&self, path: &str, token: &str) -> Option<RawResponse> {
        let request = Request::get(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (parts, body) = self.client.request(request).await.ok()?.into_parts();
        let body = body.collect().await.ok()?.to_bytes();
        Some(RawResponse {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// Send and return the streaming response, or the error if none came.
    pub async fn try_stream(
        &self,
        path: &str,
        token: &str,
    ) -> Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        let request = Request::get(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        self.client.request(request).await
    }

    /// Send and return the streaming response (for watches).
    pub async fn stream(&self, path: &str, token: &str) -> http::Response<hyper::body::Incoming> {
        let request = Request::get(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        self.client.request(request).await.expect("request sent")
    }
}
