//! Helpers shared by the integration tests: the simulated cluster, kubectl
//! pointed straight at it, a kube-rs client and a raw HTTPS client; and
//! [`eventually`], the one way a test waits.

#![allow(dead_code)]

use crate::real::cluster::janitor;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use portcullis_sim::{Sim, SimConfig};
use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

/// kubectl 1.37: `KUBECTL_FOR_TESTS`, else the one the repository installs.
pub fn kubectl_path() -> PathBuf {
    match std::env::var_os("KUBECTL_FOR_TESTS") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/venv/bin/kubectl"),
    }
}

/// How long [`eventually`] waits: far beyond what any awaited condition
/// needs on a loaded machine, so that only a condition that never comes
/// fails a test.
pub const EVENTUALLY: Duration = Duration::from_secs(60);

/// What a check given to [`eventually`] answers: `true`, `Some(value)` or
/// `Ok(value)` once the awaited condition holds. `Err(why)` says why not
/// yet; the last one is in the panic message.
pub trait Awaited {
    /// What [`eventually`] returns once the condition holds.
    type Value;
    /// The value, or why the condition does not hold yet.
    fn settled(self) -> Result<Self::Value, String>;
}

impl Awaited for bool {
    type Value = ();
    fn settled(self) -> Result<(), String> {
        if self {
            Ok(())
        } else {
            Err("false".into())
        }
    }
}

impl<T> Awaited for Option<T> {
    type Value = T;
    fn settled(self) -> Result<T, String> {
        self.ok_or_else(|| "none".into())
    }
}

impl<T, E: std::fmt::Display> Awaited for Result<T, E> {
    type Value = T;
    fn settled(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// Poll `check` until the condition it tests holds, and return what it
/// found. The one way tests wait: for a condition, never for a fixed time.
/// Polls quickly at first, then every 200 ms; panics naming `what` if the
/// condition has not held within [`EVENTUALLY`]. The deadline is wall time,
/// so a test on a paused tokio clock still waits for real threads.
pub async fn eventually<R: Awaited>(what: &str, mut check: impl AsyncFnMut() -> R) -> R::Value {
    let deadline = std::time::Instant::now() + EVENTUALLY;
    let mut pause = Duration::from_millis(10);
    loop {
        let why = match check().await.settled() {
            Ok(value) => return value,
            Err(why) => why,
        };
        assert!(
            std::time::Instant::now() < deadline,
            "still waiting for {what} after {} s (last: {why})",
            EVENTUALLY.as_secs()
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// A simulated cluster on 127.0.0.1 port 0 with the default objects.
pub async fn spawn_sim() -> Sim {
    Sim::start(SimConfig::new())
        .await
        .expect("the simulated cluster starts")
}

/// A simulated cluster with an adjusted configuration.
pub async fn spawn_sim_with(adjust: impl FnOnce(&mut SimConfig)) -> Sim {
    let mut config = SimConfig::new();
    adjust(&mut config);
    Sim::start(config).await.expect("the simulated cluster starts")
}

/// kubectl with its own kubeconfig and cache in a temporary directory.
pub struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl for `sim` as the user of `token`.
    pub fn new(sim: &Sim, token: &str) -> Kubectl {
        Self::with_kubeconfig(&sim.kubeconfig(token))
    }

    /// kubectl with the kubeconfig `contents` (e.g. one portcullis wrote).
    pub fn with_kubeconfig(contents: &str) -> Kubectl {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, contents).expect("the kubeconfig is written");
        Kubectl { dir, kubeconfig }
    }

    /// The kubeconfig's path.
    pub fn kubeconfig(&self) -> &PathBuf {
        &self.kubeconfig
    }

    /// kubectl for `sim` as `kubernetes-admin`.
    pub fn admin(sim: &Sim) -> Kubectl {
        Self::new(sim, sim.admin_token())
    }

    /// The temporary directory (for manifests).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Run kubectl; its output whatever the exit status.
    pub fn run(&self, args: &[&str]) -> Output {
        std::process::Command::new(kubectl_path())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs")
    }

    /// Run kubectl and return stdout; panic with stderr if it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run kubectl expecting failure; return stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// A kube-rs client for `sim` as the user of `token`.
pub async fn kube_client(sim: &Sim, token: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig(token)).expect("the kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a kube-rs configuration");
    kube::Client::try_from(config).expect("a kube-rs client")
}

/// A raw answer: status, headers and the body bytes as sent (not
/// decompressed).
pub struct RawAnswer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Result<Bytes, String>,
    /// The ALPN protocol the connection negotiated.
    pub alpn: Option<Vec<u8>>,
}

impl RawAnswer {
    /// The body as JSON (panics when it is not).
    pub fn json(&self) -> serde_json::Value {
        let body = self.body.as_ref().expect("a complete body");
        serde_json::from_slice(body).expect("a JSON body")
    }
}

/// The ALPN protocol the simulator picks when a client offers `offers`.
pub async fn negotiated_alpn(sim: &Sim, offers: &[&[u8]]) -> Option<Vec<u8>> {
    let mut tls = client_tls(sim).ok()?;
    tls.alpn_protocols = offers.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.ok()?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").ok()?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .ok()?;
    stream.get_ref().1.alpn_protocol().map(|p| p.to_vec())
}

fn client_tls(sim: &Sim) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(sim.ca_pem().as_bytes()) {
        roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Send one HTTP/1.1 request over a fresh TLS connection trusting the sim's
/// CA, with the admin token unless `headers` has an Authorization. `Err` when
/// the connection fails before an answer.
pub async fn raw(
    sim: &Sim,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<RawAnswer, String> {
    let mut tls = client_tls(sim)?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(sim.addr())
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let alpn = stream.get_ref().1.alpn_protocol().map(|p| p.to_vec());
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", sim.addr().to_string());
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization")) {
        builder = builder.header("authorization", format!("Bearer {}", sim.admin_token()));
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).map_err(|e| e.to_string());
    Ok(RawAnswer {
        status: parts.status,
        headers: parts.headers,
        body,
        alpn,
    })
}

/// Removes `path` once this test process has exited, however it ends: for
/// the files of a fixture kept in a `static`, which is never dropped (a
/// cluster token and a store among them). The control plane's janitor,
/// waiting for no process.
pub fn remove_at_exit(path: &std::path::Path) {
    static JANITORS: std::sync::Mutex<Vec<std::process::Child>> = std::sync::Mutex::new(Vec::new());
    let janitor = janitor(path, &[]).expect("a janitor process starts");
    JANITORS.lock().unwrap_or_else(|e| e.into_inner()).push(janitor);
}

#[test]
fn a_janitor_removes_its_folder_once_its_stdin_closes_and_not_before() {
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::write(dir.join("token"), "secret").unwrap();
    let mut janitor = janitor(&dir, &[]).unwrap();
    assert_eq!(janitor.try_wait().unwrap(), None, "it waits for its stdin to close");
    assert!(dir.join("token").exists());
    drop(janitor.stdin.take());
    assert!(janitor.wait().unwrap().success());
    assert!(!dir.exists(), "{} is left", dir.display());
}

pub use crate::port::free_port;
