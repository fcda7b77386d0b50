//! A request body over the limit, sent by real clients over HTTP/2 and
//! HTTP/1.1: each gets the whole 413 Status, whether the length was
//! announced or the body just kept coming (issue 23 item 4).

use crate::audit;
use crate::harness::{Portcullis, CLUSTER};
use crate::support::{kubectl_path, Kubectl};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Over the default limit of 3 MiB by several HTTP/2 windows, so the client
/// is still sending when the refusal comes; within what portcullis reads
/// through after refusing (four limits).
const OVER_LIMIT: usize = 10 * 1024 * 1024;

/// A ConfigMap manifest (JSON) of about `size` bytes.
fn configmap(name: &str, size: usize) -> Vec<u8> {
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop"}, "data": {"x": "a".repeat(size)}});
    serde_json::to_vec(&object).unwrap()
}

/// How the body goes: with a Content-Length, or streamed without one
/// (chunked over HTTP/1.1, DATA frames alone over HTTP/2).
#[derive(Clone, Copy)]
enum Length {
    Announced,
    Unannounced,
}

/// What curl got.
struct CurlAnswer {
    /// curl's exit status (0: it read a whole response).
    exit: Option<i32>,
    /// Each response's HTTP status and the connections curl opened for it
    /// (0: it reused the one before), in order.
    answers: Vec<(u16, u32)>,
    /// The first response's body.
    body: String,
    /// The first response's headers.
    headers: String,
    stderr: String,
}

impl CurlAnswer {
    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?} ({})", self.body, self.stderr))
    }

    fn audit_id(&self) -> String {
        let line = self
            .headers
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("audit-id:"));
        let line = line.unwrap_or_else(|| panic!("no Audit-Id in {}", self.headers));
        line.split_once(':').unwrap().1.trim().to_string()
    }
}

/// What curl writes out after each response: see [`answer`].
const WRITE_OUT: &str = "%{http_code} %{num_connects}\\n";

/// A line of [`WRITE_OUT`].
fn answer(line: &str) -> Option<(u16, u32)> {
    let (code, connects) = line.trim().split_once(' ')?;
    Some((code.parse().ok()?, connects.parse().ok()?))
}

/// POST `manifest` to the ConfigMaps of shop with curl over `protocol`
/// (`--http2` or `--http1.1`), then, when `then_get` is set, a GET on the
/// same connection if curl can keep it.
async fn curl(
    env: &Portcullis,
    token: &str,
    protocol: &str,
    manifest: &Path,
    length: Length,
    then_get: bool,
) -> CurlAnswer {
    let dir = env.dir.path().to_path_buf();
    let ca = dir.join("portcullis-ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let url = format!(
        "https://{}/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps",
        env.addr
    );
    let (manifest, protocol, token) = (manifest.to_path_buf(), protocol.to_string(), token.to_string());
    tokio::task::spawn_blocking(move || {
        let (body, headers) = (dir.join("curl-body"), dir.join("curl-headers"));
        let mut command = Command::new("curl");
        command
            .args(["-sS", &protocol, "--cacert"])
            .arg(&ca)
            .args(["-H", &format!("Authorization: Bearer {token}")])
            // No `Expect: 100-continue`: the body goes at once, as kubectl
            // sends it.
            .args(["-H", "Content-Type: application/json", "-H", "Expect:"])
            .args(["-X", "POST", "-w", WRITE_OUT, "-o"])
            .arg(&body)
            .arg("-D")
            .arg(&headers);
        match length {
            Length::Announced => command.arg("--data-binary").arg(format!("@{}", manifest.display())),
            Length::Unannounced => command.args(["-T", "-"]).stdin(std::fs::File::open(&manifest).unwrap()),
        };
        command.arg(&url);
        if then_get {
            command
                .args(["--next", "-sS", &protocol, "--cacert"])
                .arg(&ca)
                .args(["-H", &format!("Authorization: Bearer {token}"), "-o", "/dev/null"])
                .args(["-w", WRITE_OUT])
                .arg(&url);
        }
        let out = command.stderr(Stdio::piped()).output().expect("curl runs");
        CurlAnswer {
            exit: out.status.code(),
            answers: String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(answer)
                .collect(),
            body: std::fs::read_to_string(&body).unwrap_or_default(),
            headers: std::fs::read_to_string(&headers).unwrap_or_default(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// A person allowed to create ConfigMaps in shop, and an over-limit manifest.
fn setup(env: &Portcullis) -> (String, PathBuf) {
    let token = env.person("ana", &[("admin", Some("shop"))]);
    let manifest = env.dir.path().join("big.json");
    std::fs::write(&manifest, configmap("big", OVER_LIMIT)).unwrap();
    (token, manifest)
}

/// curl read the whole 413 Status, and the refusal is in the audit.
async fn assert_refused_whole(env: &Portcullis, answer: &CurlAnswer) {
    assert_eq!(answer.exit, Some(0), "curl failed: {}", answer.stderr);
    assert_eq!(answer.answers.first().map(|a| a.0), Some(413), "{}", answer.stderr);
    let status = answer.status();
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["reason"], "RequestEntityTooLarge", "{status}");
    assert_eq!(status["code"], 413, "{status}");
    let row = audit::row(env, &answer.audit_id()).await;
    assert_eq!((row.code, row.refused.as_str()), (413, "body_too_large"));
}

/// Whether a client still sending reads the refusal, or its connection is
/// reset first, depends on how the frames and packets fall: a few tries.
const TRIES: usize = 5;

async fn curl_is_refused_whole(protocol: &str, length: Length) {
    let env = Portcullis::start().await;
    let (token, manifest) = setup(&env);
    for _ in 0..TRIES {
        let answer = curl(&env, &token, protocol, &manifest, length, false).await;
        assert_refused_whole(&env, &answer).await;
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_http2_gets_the_whole_413_status_for_a_body_announced_over_the_limit() {
    curl_is_refused_whole("--http2", Length::Announced).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_http2_gets_the_whole_413_status_for_a_body_without_a_length_that_grows_over_the_limit() {
    curl_is_refused_whole("--http2", Length::Unannounced).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_http1_gets_the_whole_413_status_for_a_body_announced_over_the_limit_or_chunked() {
    curl_is_refused_whole("--http1.1", Length::Announced).await;
    curl_is_refused_whole("--http1.1", Length::Unannounced).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_request_on_the_connection_of_a_refused_body_is_answered_over_either_protocol() {
    let env = Portcullis::start().await;
    let (token, manifest) = setup(&env);
    for protocol in ["--http2", "--http1.1"] {
        for length in [Length::Announced, Length::Unannounced] {
            let answer = curl(&env, &token, protocol, &manifest, length, true).await;
            assert_eq!(answer.exit, Some(0), "{protocol}: {}", answer.stderr);
            // The body was read through, so the connection stays usable.
            assert_eq!(answer.answers, [(413, 1), (200, 0)], "{protocol}: {}", answer.stderr);
        }
    }
    env.stop().await;
}

/// Run `kubectl` with `args`, over HTTP/2 unless `http1`; its stderr,
/// asserting it failed.
fn kubectl_fails(kubectl: &Kubectl, http1: bool, args: &[&str]) -> String {
    let mut command = Command::new(kubectl_path());
    command
        .arg("--kubeconfig")
        .arg(kubectl.kubeconfig())
        .arg("--cache-dir")
        .arg(kubectl.dir().join("cache"))
        .args(args)
        .env_remove("KUBECONFIG");
    if http1 {
        // client-go's switch for HTTP/1.1 only.
        command.env("DISABLE_HTTP2", "true");
    }
    let out = command.output().expect("kubectl runs");
    assert!(!out.status.success(), "kubectl {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_over_http2_and_over_http1_is_told_a_manifest_over_the_limit_is_too_large() {
    let env = Portcullis::start().await;
    let (token, manifest) = setup(&env);
    let kubectl = env.kubectl(&token, "shop");
    let manifest = manifest.to_str().unwrap().to_string();
    let said = tokio::task::spawn_blocking(move || {
        [false, true].map(|http1| {
            ["create", "replace", "create", "replace"]
                .map(|verb| kubectl_fails(&kubectl, http1, &[verb, "-f", &manifest]))
        })
    })
    .await
    .unwrap();
    for said in said.iter().flatten() {
        assert!(
            said.contains("Error from server (RequestEntityTooLarge)")
                && said.contains("the request body is larger than portcullis's limit of 3145728 bytes"),
            "{said}"
        );
    }
    env.stop().await;
}
