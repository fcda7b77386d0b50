//! The whole OAuth flow as an MCP client meets it (issue 19's tests and
//! item 7): the official MCP Python SDK's `OAuthClientProvider`
//! (`mcp_python_oauth.py`) discovers portcullis, registers (DCR) or names
//! its Client ID Metadata Document, and hands the authorization URL to the
//! test, which opens it in headless Chromium: ana signs in at the provider,
//! hands over one of her two grants with a narrower role, writes needing
//! her approval, and approves. The SDK's agent then acts with exactly that:
//! its grant's namespace, not the other one, not beyond the chosen role,
//! and its write waits for ana. On both protocol revisions.

use crate::approvals::audit_rows;
use crate::harness::{Portcullis, CLUSTER};
use crate::signin::browser::Chromium;
use crate::signin::{free_port, portcullis_configured, Idp};
use crate::support::eventually;
use fantoccini::Locator;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use portcullis::approvals::HeldState;
use portcullis::body;
use portcullis::identity::Principal;
use portcullis::store::AgentSession;
use serde_json::{json, Value};
use std::io::{BufRead, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The name the client gives itself (DCR) or its document declares.
const CLIENT_NAME: &str = "Python SDK test agent";
/// The longest the Python client may take, browser flow included.
const PYTHON_RUN: Duration = Duration::from_secs(120);

/// A Client ID Metadata Document served over https on 127.0.0.1, with a
/// CA of its own that portcullis is told to trust.
struct MetadataDocument {
    url: String,
    ca_pem: String,
}

impl MetadataDocument {
    async fn serve() -> MetadataDocument {
        let tls = portcullis::tls::generate(&[]).unwrap();
        let config = portcullis::tls::server_config(&tls.cert_pem, &tls.key_pem).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("https://127.0.0.1:{port}/python-agent.json");
        // Any loopback port: the SDK's callback port is its own choice.
        let document = json!({
            "client_id": url,
            "client_name": CLIENT_NAME,
            "redirect_uris": ["http://127.0.0.1/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        })
        .to_string();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, document) = (acceptor.clone(), document.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |request: Request<Incoming>| {
                        let found = request.uri().path() == "/python-agent.json";
                        let answer = Response::builder()
                            .status(if found { StatusCode::OK } else { StatusCode::NOT_FOUND })
                            .header(http::header::CONTENT_TYPE, "application/json")
                            .body(body::full(if found { document.clone() } else { String::new() }))
                            .unwrap();
                        async move { Ok::<_, std::convert::Infallible>(answer) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        MetadataDocument {
            url,
            ca_pem: tls.ca_pem,
        }
    }
}

/// portcullis signing people in with `idp`; trusting `document`'s CA and
/// fetching it from loopback (the test-only switch) when there is one.
async fn start(idp: &Idp, port: u16, document: Option<&MetadataDocument>) -> Portcullis {
    let ca_pem = document.map(|document| document.ca_pem.clone());
    portcullis_configured(&idp.issuer, port, move |config| {
        if let Some(ca_pem) = ca_pem {
            let ca = Portcullis::folder_of(config).join("client-metadata-ca.pem");
            std::fs::write(&ca, ca_pem).unwrap();
            config.oauth.client_metadata_ca_file = Some(ca);
            config
                .oauth
                .insecure_test_only_fetch_client_metadata_from_private_addresses = true;
        }
    })
    .await
}

/// `mcp_python_oauth.py`, running; its stdout read line by line.
struct Script {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    deadline: Instant,
}

impl Script {
    fn spawn(env: &Portcullis, revision: &str, client: &str) -> Script {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let ca = env.dir.path().join("portcullis-ca.pem");
        std::fs::write(&ca, &env.ca_pem).unwrap();
        let mut child = Command::new(root.join(".tools/venv/bin/python"))
            .arg(root.join("tests/it/oauth/mcp_python_oauth.py"))
            .arg(format!("https://{}/mcp", env.addr))
            .arg(&ca)
            .args([revision, client, CLUSTER, "shop", "payments"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python runs (scripts/setup installs the mcp SDK into .tools/venv)");
        // Read on threads: the server under test shares this runtime.
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut said = String::new();
            let _ = stderr.read_to_string(&mut said);
            said
        });
        Script {
            child,
            lines,
            stderr: Some(stderr),
            deadline: Instant::now() + PYTHON_RUN,
        }
    }

    /// The next line it prints (None once its stdout closed), within the
    /// run's bound.
    async fn line(&mut self) -> Option<String> {
        tokio::time::timeout_at(self.deadline, self.lines.recv())
            .await
            .expect("the Python client finishes within its bound")
    }

    /// The authorization URL its redirect handler prints.
    async fn authorize_url(&mut self) -> String {
        while let Some(line) = self.line().await {
            if let Some(url) = line.strip_prefix("AUTHORIZE ") {
                return url.to_string();
            }
        }
        panic!("the client ended before authorizing: {}", self.said().await)
    }

    /// It ended (its stdout closed): how, and what it said on stderr.
    async fn ended(&mut self) -> (std::process::ExitStatus, String) {
        let child = &mut self.child;
        let status = eventually("the Python client to exit", async || child.try_wait().unwrap()).await;
        let said = self.stderr.take().map(|t| t.join().unwrap()).unwrap_or_default();
        (status, said)
    }

    async fn said(&mut self) -> String {
        self.ended().await.1
    }

    /// What it saw: its last line, once it ended successfully.
    async fn seen(mut self) -> Value {
        let mut last = String::new();
        while let Some(line) = self.line().await {
            last = line;
        }
        let (status, said) = self.ended().await;
        assert!(status.success(), "{last}\n{said}");
        serde_json::from_str(&last).unwrap_or_else(|_| panic!("not JSON: {last}\n{said}"))
    }
}

impl Drop for Script {
    // A failed test leaves no Python client waiting for its callback.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In Chromium: sign in at the provider as ana, hand over `chosen` (not
/// `other`) as a developer, keep writes needing approval, approve; the
/// browser ends on the client's loopback page.
async fn consent_in_chromium(browser: &Chromium, url: &str, chosen: &str, other: &str) {
    let client = &browser.client;
    client.goto(url).await.unwrap();
    let login = client.wait().for_element(Locator::Id("login")).await.unwrap();
    login.send_keys("ana").await.unwrap();
    client.find(Locator::Id("signin")).await.unwrap().click().await.unwrap();
    let grant = client
        .wait()
        .for_element(Locator::Id(&format!("grant-{chosen}")))
        .await
        .unwrap();
    let page = browser.text().await;
    assert!(page.contains(CLIENT_NAME), "the consent page names the client: {page}");
    let other = client.find(Locator::Id(&format!("grant-{other}"))).await.unwrap();
    assert!(
        !grant.is_selected().await.unwrap() && !other.is_selected().await.unwrap(),
        "no grant is handed over unless ana chooses it"
    );
    grant.click().await.unwrap();
    let role = client
        .find(Locator::Css(&format!("select[name='role-{chosen}']")))
        .await
        .unwrap();
    // developer's rules are a subset of admin's: offered as narrower.
    role.select_by_value("developer").await.unwrap();
    let approval = client.find(Locator::Id("writes_need_approval")).await.unwrap();
    assert!(approval.is_selected().await.unwrap(), "writes need approval by default");
    client
        .find(Locator::Id("approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.wait_for_text("Authorized. You can close this tab.").await;
}

/// The agent's tool calls ran as the chosen grant and role only.
fn assert_acted_as_chosen(seen: &Value, revision: &str) {
    assert_eq!(seen["protocol"], revision, "{seen}");
    assert_eq!(seen["token_type"], "Bearer", "{seen}");
    assert_eq!(seen["has_refresh_token"], true, "{seen}");
    assert!(seen["tools"].as_array().unwrap().contains(&json!("apply")), "{seen}");
    assert_eq!(
        seen["allowed"]["is_error"], false,
        "the chosen grant's namespace: {seen}"
    );
    assert_eq!(seen["denied"]["is_error"], true, "the grant not handed over: {seen}");
    assert_eq!(
        seen["denied"]["structured"],
        json!({"code": 403, "reason": "Forbidden", "kind": "pods", "namespace": "payments"}),
        "{seen}"
    );
    assert_eq!(
        seen["secret"]["is_error"], true,
        "admin reads Secrets, developer not: {seen}"
    );
    assert_eq!(seen["secret"]["structured"]["code"], 403, "{seen}");
    assert_eq!(seen["write"]["is_error"], true, "{seen}");
    assert_eq!(seen["write"]["structured"]["code"], "agent.approval_pending", "{seen}");
    assert!(
        seen["write"]["text"].as_str().unwrap().contains("/approvals/"),
        "{seen}"
    );
}

/// ana's one agent session: made by `client_id`, writes held, and the
/// held write, and the audit row of its tool call, name it.
async fn assert_session_and_audit(env: &Portcullis, client_id: &str) {
    let sessions: Vec<AgentSession> = env.store.agent_sessions_of(&Principal::person("ana")).unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = &sessions[0];
    assert_eq!(session.client_id.as_deref(), Some(client_id), "{session:?}");
    assert!(session.agent.writes_need_approval, "{session:?}");
    let held: Vec<_> = env
        .store
        .list_held()
        .unwrap()
        .into_iter()
        .filter(|h| h.state == HeldState::Pending)
        .collect();
    assert_eq!(held.len(), 1, "one write waits for ana");
    assert_eq!(held[0].request.agent_id.as_deref(), Some(session.agent.id.as_str()));
    assert_eq!(
        (held[0].request.tool.as_str(), held[0].request.namespace.as_str()),
        ("apply", "shop")
    );
    let rows = audit_rows(env).await;
    let call = rows
        .iter()
        .find(|r| r.tool == "list_resources" && r.namespace == "shop" && r.code == 200)
        .expect("the allowed read is audited");
    assert_eq!(
        (call.login.as_str(), call.session.as_str()),
        ("ana", session.agent.id.as_str())
    );
    assert_eq!(call.via, format!("oauth client={client_id}"));
}

/// The whole flow on `revision`, the client registering (DCR) or named by
/// a metadata document.
async fn flow(revision: &str, with_document: bool) {
    let port = free_port();
    let idp = Idp::start(port);
    let document = if with_document {
        Some(MetadataDocument::serve().await)
    } else {
        None
    };
    let env = start(&idp, port, document.as_ref()).await;
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[("admin", Some("shop")), ("viewer", Some("payments"))],
        Duration::from_secs(3600),
    );
    let client = document
        .as_ref()
        .map_or("dcr".to_string(), |d| format!("cimd:{}", d.url));
    let mut script = Script::spawn(&env, revision, &client);
    let url = script.authorize_url().await;
    assert!(
        url.starts_with(&format!("https://127.0.0.1:{port}/oauth/authorize?")),
        "{url}"
    );
    let browser = Chromium::start().await;
    consent_in_chromium(&browser, &url, &grants[0].id, &grants[1].id).await;
    let seen = script.seen().await;
    assert_acted_as_chosen(&seen, revision);
    let client_id = seen["client_id"].as_str().unwrap();
    match &document {
        Some(document) => assert_eq!(client_id, document.url),
        None => assert!(!client_id.starts_with("https://"), "a registered id: {client_id}"),
    }
    assert_session_and_audit(&env, client_id).await;
    browser.stop().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_with_a_metadata_document_completes_the_oauth_flow_on_2026_07_28_and_its_agent_acts_with_the_chosen_grant_only(
) {
    flow("2026-07-28", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_registering_dynamically_completes_the_oauth_flow_on_2025_11_25_and_its_agent_acts_with_the_chosen_grant_only(
) {
    flow("2025-11-25", false).await;
}
