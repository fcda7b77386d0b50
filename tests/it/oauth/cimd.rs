//! Client ID Metadata Documents fetched by `Clients` from a server the test
//! runs over https on 127.0.0.1 (with its own CA): a good document
//! resolves and is reused; a wrong client_id, an oversized document, a
//! redirect, a server that never answers, and (without the test-only
//! switch) a loopback address are each refused.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use portcullis::body::{self, Body};
use portcullis::config::Config;
use portcullis::oauth::client::{ClientError, ClientKind, Clients};
use portcullis::store::Store;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A document server on 127.0.0.1 that notes every path requested.
struct DocumentServer {
    base: String,
    ca_pem: String,
    requested: Arc<Mutex<Vec<String>>>,
}

impl DocumentServer {
    async fn start() -> DocumentServer {
        let tls = portcullis::tls::generate(&[]).unwrap();
        let config = portcullis::tls::server_config(&tls.cert_pem, &tls.key_pem).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let requested = Arc::new(Mutex::new(Vec::new()));
        let (log, origin) = (requested.clone(), base.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, log, origin) = (acceptor.clone(), log.clone(), origin.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |request: Request<Incoming>| {
                        log.lock().unwrap().push(request.uri().path().to_string());
                        let origin = origin.clone();
                        async move { Ok::<_, std::convert::Infallible>(answer(&origin, request.uri().path()).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        DocumentServer {
            base,
            ca_pem: tls.ca_pem,
            requested,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn requested(&self) -> Vec<String> {
        self.requested.lock().unwrap().clone()
    }

    /// `Clients` trusting this server's CA, with the test-only switch as given.
    fn clients(&self, dir: &tempfile::TempDir, private_addresses: bool) -> Clients {
        let ca = dir.path().join("metadata-ca.pem");
        std::fs::write(&ca, &self.ca_pem).unwrap();
        let text = format!(
            "listen = \"127.0.0.1:0\"\npublic_url = \"https://127.0.0.1\"\ndata_dir = {:?}\n[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n",
            dir.path().display().to_string()
        );
        let mut config = Config::from_sources(&text, Vec::new()).unwrap();
        config.oauth.client_metadata_ca_file = Some(ca);
        config
            .oauth
            .insecure_test_only_fetch_client_metadata_from_private_addresses = private_addresses;
        let store = Store::open(&dir.path().join("portcullis.db")).unwrap();
        Clients::new(&config, store).unwrap()
    }
}

fn document(client_id: &str, padding: usize) -> String {
    json!({
        "client_id": client_id,
        "client_name": "Test Agent",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
        "padding": "x".repeat(padding),
    })
    .to_string()
}

async fn answer(origin: &str, path: &str) -> Response<Body> {
    let url = format!("{origin}{path}");
    let ok = |text: String| Response::new(body::full(text));
    match path {
        "/good.json" => ok(document(&url, 0)),
        "/other.json" => ok(document(&format!("{origin}/good.json"), 0)),
        "/large.json" => ok(document(&url, 70 * 1024)),
        "/large-chunked.json" => {
            // No Content-Length: the size is only known by reading.
            let text = Bytes::from(document(&url, 70 * 1024));
            let chunks: Vec<Result<Bytes, body::BoxError>> =
                text.chunks(4096).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
            Response::new(body::from_stream(futures_util::stream::iter(chunks)))
        }
        "/redirect.json" => Response::builder()
            .status(StatusCode::FOUND)
            .header(http::header::LOCATION, format!("{origin}/target.json"))
            .body(body::empty())
            .unwrap(),
        "/target.json" => ok(document(&format!("{origin}/redirect.json"), 0)),
        // Holds the connection open and never answers.
        "/slow.json" => std::future::pending().await,
        _ => {
            let mut response = ok(String::new());
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    }
}

fn reason(error: ClientError) -> String {
    match error {
        ClientError::Document { reason, .. } => reason,
        other => panic!("expected a document refusal, got {other}"),
    }
}

#[tokio::test]
async fn a_good_metadata_document_resolves_and_is_reused_without_a_second_fetch() {
    let server = DocumentServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = server.clients(&dir, true);
    let url = server.url("/good.json");
    let client = clients.resolve(&url).await.unwrap();
    assert_eq!(client.client_id, url);
    assert_eq!(client.client_name, "Test Agent");
    assert_eq!(client.redirect_uris, vec!["http://127.0.0.1/callback"]);
    assert_eq!(client.kind, ClientKind::Metadata);
    let again = clients.resolve(&url).await.unwrap();
    assert_eq!(again, client);
    assert_eq!(
        server.requested(),
        vec!["/good.json"],
        "the second resolve used the cached document"
    );
}

#[tokio::test]
async fn a_metadata_document_whose_client_id_is_not_its_url_is_refused() {
    let server = DocumentServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = server.clients(&dir, true);
    let error = clients.resolve(&server.url("/other.json")).await.unwrap_err();
    assert!(reason(error).contains("client_id is not exactly its own URL"));
}

#[tokio::test]
async fn a_metadata_document_over_64_kib_is_refused_with_or_without_a_content_length() {
    let server = DocumentServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = server.clients(&dir, true);
    for path in ["/large.json", "/large-chunked.json"] {
        let error = clients.resolve(&server.url(path)).await.unwrap_err();
        let reason = reason(error);
        assert!(reason.contains("larger than 64 KiB"), "{path}: {reason}");
    }
}

#[tokio::test]
async fn a_metadata_document_url_that_redirects_is_refused_and_the_target_is_never_fetched() {
    let server = DocumentServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = server.clients(&dir, true);
    let error = clients.resolve(&server.url("/redirect.json")).await.unwrap_err();
    let reason = reason(error);
    assert!(reason.contains("redirect (HTTP 302 Found)"), "{reason}");
    assert_eq!(
        server.requested(),
        vec!["/redirect.json"],
        "the redirect was not followed"
    );
}

#[tokio::test]
async fn a_metadata_document_server_that_never_answers_is_refused_after_5_seconds() {
    let server = DocumentServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = server.clients(&dir, true);
    let started = Instant::now();
    let error = clients.resolve(&server.url("/slow.json")).await.unwrap_err();
    let waited = started.elapsed();
    let reason = reason(error);
    assert!(reason.contains("did not arrive within 5 s"), "{reason}");
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    assert_eq!(server.requested(), vec!["/slow.json"], "the request reached the server");
}

#[tokio::test]
async fn a_metadata_document_on_a_loopback_address_is_refused_without_the_test_only_switch() {
    let server = DocumentServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clients = server.clients(&dir, false);
    let error = clients.resolve(&server.url("/good.json")).await.unwrap_err();
    let reason = reason(error);
    assert!(reason.contains("its host is not at a public address"), "{reason}");
    // A name's address is not told: anyone may name any URL.
    let named = server.url("/good.json").replace("127.0.0.1", "localhost");
    let reason = self::reason(clients.resolve(&named).await.unwrap_err());
    assert!(reason.contains("its host is not at a public address"), "{reason}");
    assert!(!reason.contains("127.0.0.1") && !reason.contains("::1"), "{reason}");
    // Nor whether a name exists at all: one that resolves nowhere reads the same.
    let nowhere = self::reason(
        clients
            .resolve("https://no-such-host.invalid/meta.json")
            .await
            .unwrap_err(),
    );
    assert_eq!(nowhere, reason);
    assert!(server.requested().is_empty(), "nothing was fetched");
}
