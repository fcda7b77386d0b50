//! Upgrades and timeouts through portcullis, at the byte level: only
//! WebSocket and SPDY upgrades of exec, attach and port-forward pass, a
//! refused upgrade is relayed unchanged, and only ordinary requests time out.

use crate::harness::{Portcullis, CLUSTER};
use crate::support::EVENTUALLY;
use portcullis_sim::faults::{FaultAction, FaultRule};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Send `request` over a fresh HTTP/1.1 TLS connection and return the
/// answer: the head of an upgrade, or the head and the whole body.
pub(crate) async fn http1(addr: std::net::SocketAddr, ca_pem: &str, request: &str) -> String {
    let mut tls = connected(addr, ca_pem, b"http/1.1").await.unwrap();
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        while !whole_answer(&received) {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(EVENTUALLY, read).await.expect("an answer");
    String::from_utf8_lossy(&received).into_owned()
}

/// Whether `received` is a whole answer: a 101's head (what follows is the
/// stream), or a head and the body its framing announces.
fn whole_answer(received: &[u8]) -> bool {
    let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
    let body = &received[end + 4..];
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    if head.starts_with("http/1.1 101") {
        true
    } else if let Some(length) = header("content-length:") {
        body.len() >= length.parse().unwrap_or(usize::MAX)
    } else if header("transfer-encoding:").is_some_and(|t| t.contains("chunked")) {
        body.ends_with(b"0\r\n\r\n")
    } else {
        // Framed by the end of the connection.
        false
    }
}

fn upgrade(path: &str, token: &str, protocol: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: Upgrade\r\nUpgrade: {protocol}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

async fn first_pod(env: &Portcullis) -> String {
    let token = env.sim().admin_token().to_string();
    let kubectl = crate::support::Kubectl::new(env.sim(), &token);
    kubectl.ok(&["get", "pods", "-n", "shop", "-o", "jsonpath={.items[0].metadata.name}"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_websocket_and_spdy_upgrades_of_streams_are_relayed() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let pod = first_pod(&env).await;
    let exec =
        format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods/{pod}/exec?command=echo&command=hi&stdout=true");
    let ws = "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n";

    let ok = http1(env.addr, &env.ca_pem, &upgrade(&exec, &token, "websocket", ws)).await;
    assert!(ok.starts_with("HTTP/1.1 101"), "{ok}");
    assert!(
        ok.to_ascii_lowercase()
            .contains("sec-websocket-protocol: v5.channel.k8s.io"),
        "{ok}"
    );

    let other_protocol = http1(env.addr, &env.ca_pem, &upgrade(&exec, &token, "h2c", "")).await;
    assert!(other_protocol.starts_with("HTTP/1.1 400"), "{other_protocol}");
    assert!(
        other_protocol.contains("only WebSocket and SPDY/3.1"),
        "{other_protocol}"
    );

    let configmaps = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let not_a_stream = http1(env.addr, &env.ca_pem, &upgrade(&configmaps, &token, "websocket", ws)).await;
    assert!(not_a_stream.starts_with("HTTP/1.1 400"), "{not_a_stream}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_reaches_the_cluster_with_exactly_connection_upgrade_and_without_the_headers_the_client_named() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let pod = first_pod(&env).await;
    let exec =
        format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods/{pod}/exec?command=echo&command=hi&stdout=true");
    let request = format!(
        "GET {exec} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Connection: Upgrade, Impersonate-User, Impersonate-Group\r\nconnection: keep-alive,X-Hop , Audit-ID\r\n\
         Upgrade: websocket\r\nX-Hop: 1\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    );
    let answer = http1(env.addr, &env.ca_pem, &request).await;
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");

    let seen = env
        .sim()
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/exec"))
        .expect("the exec reached the cluster");
    let all = |name: &str| -> Vec<&str> {
        seen.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(all("connection"), ["Upgrade"], "{:?}", seen.headers);
    assert_eq!(all("upgrade"), ["websocket"]);
    assert!(
        all("x-hop").is_empty(),
        "a header the client named as hop-by-hop travelled"
    );
    assert!(all("keep-alive").is_empty());
    assert_eq!(all("impersonate-user"), ["user:ana"]);
    assert!(!all("impersonate-group").is_empty());
    assert_eq!(all("audit-id").len(), 1);
    assert_eq!(seen.impersonated.as_ref().unwrap().name, "user:ana");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upgrade_is_relayed_unchanged_so_clients_can_fall_back() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let pod = first_pod(&env).await;
    let k8s_path = format!("/api/v1/namespaces/shop/pods/{pod}/exec?command=echo&command=hi&stdout=true");
    let unknown = "Sec-WebSocket-Protocol: v99.channel.example\r\n";
    let through = http1(
        env.addr,
        &env.ca_pem,
        &upgrade(&format!("/clusters/{CLUSTER}{k8s_path}"), &token, "websocket", unknown),
    )
    .await;
    let status_line = |text: &str| text.lines().next().unwrap_or_default().to_string();
    assert!(!through.starts_with("HTTP/1.1 101"), "{through}");
    let direct = http1(
        env.sim().addr(),
        env.sim().ca_pem(),
        &upgrade(&k8s_path, env.sim().admin_token(), "websocket", unknown),
    )
    .await;
    assert_eq!(
        status_line(&through),
        status_line(&direct),
        "the cluster's answer, as it is"
    );
    let body = |text: &str| {
        text.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default()
    };
    assert_eq!(body(&through).trim().is_empty(), body(&direct).trim().is_empty());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_requests_time_out_and_long_running_ones_do_not() {
    // Long enough for an ordinary request on a loaded machine.
    let env = Portcullis::start_with(|c| c.limits.request_timeout = Duration::from_secs(3)).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    env.sim().faults().add(FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/configmaps/".into(),
        times: None,
        action: FaultAction::Delay(Duration::from_secs(10)),
    });
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let watch = env.raw().stream(&format!("{path}?watch=1"), &token).await;
    assert_eq!(watch.status(), 200);
    // Cut at the request timeout, after the watch opened: the watch is
    // then open for longer than it, and still delivering.
    let slow = env.raw().get(&format!("{path}/settings"), &token).await;
    assert_eq!(slow.status, 504);
    assert_eq!(slow.json()["reason"], "Timeout");
    let bo = env.person("bo", &[("developer", Some("shop"))]);
    let made = env
        .raw()
        .send(
            http::Method::POST,
            &path,
            &[
                ("authorization", &format!("Bearer {bo}")),
                ("content-type", "application/json"),
            ],
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"later"}}"#.to_vec(),
        )
        .await;
    assert_eq!(made.status, 201);
    let mut body = watch.into_body();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(r#""name":"later""#) {
        let frame = tokio::time::timeout(EVENTUALLY, http_body_util::BodyExt::frame(&mut body))
            .await
            .expect("the event, on a watch open past the request timeout")
            .expect("the watch still open")
            .unwrap();
        seen.extend_from_slice(frame.data_ref().map(|d| &d[..]).unwrap_or_default());
    }
    env.stop().await;
}

/// A TLS connection to portcullis at `addr` offering `alpn`, that has sent
/// nothing yet, or the handshake's error.
pub(crate) async fn connected(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    alpn: &[u8],
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_closed_and_a_connection_that_asks_nothing_is_closed_in_30_s() {
    let env = Portcullis::start_with(|config| config.limits.connections = 3).await;
    // Whatever the harness still holds open, the limit is reached within
    // four more connections, and the next one is closed unserved.
    let mut idle = Vec::new();
    let refused = loop {
        match connected(env.addr, &env.ca_pem, b"h2").await {
            Ok(connection) if idle.len() < 4 => idle.push(connection),
            Ok(_) => panic!("more than 3 connections were served"),
            Err(error) => break error,
        }
    };
    assert!(!idle.is_empty(), "the first connections are served: {refused}");
    // Those that asked nothing are closed once their 30 s are up (a silent
    // HTTP/2 client never reaches hyper's header timeout).
    let mut first = idle.remove(0);
    let closed = tokio::time::timeout(Duration::from_secs(90), async {
        let mut buf = [0u8; 64];
        loop {
            match first.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "an idle connection is still open after 90 s");
    drop(idle);
    // And their places are free again.
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    crate::support::eventually("a connection served again", async || {
        let answer = env
            .raw()
            .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &token)
            .await;
        (answer.status == 200).then_some(())
    })
    .await;
    env.stop().await;
}

/// A client connection over `alpn` ("h2" or "http/1.1") that sends one GET
/// of `path`: its answer's status and body, the connection's task, which
/// ends when portcullis closes it, and its sender, kept (a client whose
/// senders are all dropped closes the connection itself).
async fn asked_once(
    env: &Portcullis,
    alpn: &[u8],
    path: &str,
    token: &str,
) -> (
    http::StatusCode,
    hyper::body::Incoming,
    tokio::task::JoinHandle<Result<(), String>>,
    Box<dyn std::any::Any + Send>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let tls = TokioIo::new(connected(env.addr, &env.ca_pem, alpn).await.unwrap());
    let request = http::Request::get(format!("https://{}{path}", env.addr))
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let (answer, connection, sender) = if alpn == b"h2" {
        let (mut sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), tls)
            .await
            .unwrap();
        let connection = tokio::spawn(async move { connection.await.map_err(|e| e.to_string()) });
        (
            sender.send_request(request).await.unwrap(),
            connection,
            Box::new(sender) as Box<dyn std::any::Any + Send>,
        )
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(tls).await.unwrap();
        let connection = tokio::spawn(async move { connection.await.map_err(|e| e.to_string()) });
        (
            sender.send_request(request).await.unwrap(),
            connection,
            Box::new(sender) as _,
        )
    };
    let (head, body) = answer.into_parts();
    (head.status, body, connection, sender)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_no_request_open_for_the_idle_timeout_is_closed_and_one_with_a_watch_is_not() {
    use http_body_util::BodyExt;
    const IDLE: Duration = Duration::from_secs(2);
    let env = Portcullis::start_with(|config| config.limits.idle_timeout = IDLE).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let (status, mut watch, watching, _watch_sender) =
        asked_once(&env, b"h2", &format!("{path}?watch=1"), &token).await;
    assert_eq!(status, 200);
    // Over each protocol, a connection that asked once and then nothing.
    for alpn in [&b"h2"[..], b"http/1.1"] {
        // Before the request: the server's idle time starts later, when it
        // has sent the answer, which the client may read later still.
        let asked = std::time::Instant::now();
        let (status, body, connection, _sender) = asked_once(&env, alpn, &path, &token).await;
        assert_eq!(status, 200);
        body.collect().await.unwrap();
        let ended = tokio::time::timeout(EVENTUALLY, connection)
            .await
            .expect("an idle connection is closed")
            .unwrap();
        let protocol = String::from_utf8_lossy(alpn);
        assert_eq!(ended, Ok(()), "{protocol}: closed gracefully");
        assert!(
            asked.elapsed() >= IDLE,
            "{protocol}: not closed before it was idle for {IDLE:?}"
        );
    }
    // The watch's connection outlived them, idle as it was, and still
    // delivers.
    assert!(!watching.is_finished(), "a connection with a watch open is not idle");
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "after-idle", "namespace": "shop"}, "data": {"x": "1"}});
    env.sim().store().put(object).unwrap();
    let mut seen = String::new();
    tokio::time::timeout(EVENTUALLY, async {
        while !seen.contains("after-idle") {
            let frame = watch.frame().await.expect("the watch is open").unwrap();
            if let Ok(data) = frame.into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .expect("the watch delivers its event");
    drop(watch);
    // Its last request over, that connection is closed in turn.
    let ended = tokio::time::timeout(EVENTUALLY, watching)
        .await
        .expect("closed once idle")
        .unwrap();
    assert_eq!(ended, Ok(()));
    env.stop().await;
}

/// A WebSocket exec of `cat` in the first pod, upgraded and open until the
/// stream is dropped (then cat reads the end of its input).
async fn cat_session(env: &Portcullis, token: &str) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let pod = first_pod(env).await;
    cat_session_in(env, token, CLUSTER, &pod).await
}

async fn cat_session_in(
    env: &Portcullis,
    token: &str,
    cluster: &str,
    pod: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    cat_session_at(env.addr, &env.ca_pem, token, cluster, pod).await
}

/// [`cat_session_in`] with the portcullis at `addr`, whose CA is `ca_pem`.
async fn cat_session_at(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    token: &str,
    cluster: &str,
    pod: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let exec = format!("/clusters/{cluster}/api/v1/namespaces/shop/pods/{pod}/exec?command=cat&stdin=true&stdout=true");
    let ws = "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n";
    let mut session = connected(addr, ca_pem, b"http/1.1").await.unwrap();
    session
        .write_all(upgrade(&exec, token, "websocket", ws).as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(session.read(&mut byte).await.unwrap(), 1, "the answer's head");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
    session
}

/// A shutdown (a rolling deploy) while an exec session is open: past the
/// drain its relay is dropped unpolled, and its row is still written, cut
/// short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_session_open_at_shutdown_is_still_a_row() {
    let mut env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let session = cat_session(&env, &token).await;
    // Stopped as on SIGTERM (and started again, to read the store).
    env.restart().await;
    drop(session);
    let filter = portcullis::audit::query::Filter {
        discovery: true,
        ..Default::default()
    };
    let rows = crate::audit::rows(&env, filter);
    let exec: Vec<_> = rows
        .iter()
        .map(|c| &c.row)
        .filter(|r| r.subresource == "exec")
        .collect();
    assert_eq!(exec.len(), 1, "{exec:?}");
    assert_eq!(
        (exec[0].code, exec[0].truncated, exec[0].login.as_str()),
        (101, true, "ana")
    );
    env.stop().await;
}

/// A `portcullis serve` killed (SIGKILL, the OOM killer) while an exec
/// session is open: the session's intent, committed before it was
/// forwarded, is its row at the next start, of unknown outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_session_open_when_the_process_is_killed_is_a_row_of_unknown_outcome() {
    let mut env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let pod = first_pod(&env).await;
    env.halt().await;
    let mut serve = crate::serve::Serve::start(&env, &token, "killed").await;
    let session = cat_session_at(serve.addr, &env.ca_pem, &token, CLUSTER, &pod).await;
    serve.kill();
    drop(session);
    let restarted = crate::serve::Serve::start(&env, &token, "restarted").await;
    let filter = portcullis::audit::query::Filter {
        discovery: true,
        ..Default::default()
    };
    let exec = crate::support::eventually("the session's row", async || {
        let rows = crate::audit::rows(&env, filter.clone());
        rows.into_iter().map(|c| c.row).find(|r| r.subresource == "exec")
    })
    .await;
    assert_eq!(
        (exec.code, exec.reason.as_str(), exec.login.as_str()),
        (0, "Unknown", "ana")
    );
    restarted.terminate().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_session_counts_among_its_callers_open_streams_until_it_ends() {
    let env = Portcullis::start_with(|config| config.limits.streams_per_caller = 1).await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let session = cat_session(&env, &token).await;
    let watch = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps?watch=1");
    let refused = env.raw().stream(&watch, &token).await;
    assert_eq!(refused.status(), 429, "the session holds ana's one place");
    drop(session);
    let open = crate::support::eventually("the ended session frees its place", async || {
        let answer = env.raw().stream(&watch, &token).await;
        (answer.status() == 200).then_some(answer)
    })
    .await;
    drop(open);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_session_keeps_its_place_among_the_open_connections_until_it_ends() {
    let env = Portcullis::start_with(|config| config.limits.connections = 3).await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let session = cat_session(&env, &token).await;
    // hyper is done with the connection now; its place is still taken.
    let mut others = Vec::new();
    loop {
        match connected(env.addr, &env.ca_pem, b"h2").await {
            Ok(connection) if others.len() < 3 => others.push(connection),
            Ok(_) => panic!("more than 3 connections were served"),
            Err(_) => break,
        }
    }
    assert!(others.len() < 3, "the exec session holds one of the 3 places");
    // Its client gone, the session ends (cat reads the end of its input),
    // and the place is free: well before the silent others are closed for
    // asking nothing (30 s), which would free places too.
    drop(session);
    let freed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(connection) = connected(env.addr, &env.ca_pem, b"h2").await {
                break connection;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(freed.is_ok(), "the ended session's place is still taken");
    drop(others);
    env.stop().await;
}

/// A cluster that upgrades whatever asks for it and then says nothing, and
/// keeps its half of the stream open even after reading the other side's
/// end: unlike kube-apiserver, which closes both halves. It answers anything
/// else 200 with no body. Sends on `ended` each time it reads a stream's end;
/// its streams close when `stop` is dropped.
struct SilentCluster {
    addr: std::net::SocketAddr,
    ca_pem: String,
    ended: tokio::sync::mpsc::UnboundedReceiver<()>,
    stop: tokio::sync::watch::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl SilentCluster {
    async fn start() -> SilentCluster {
        use http::{header, Request, Response};
        use hyper::body::Incoming;
        use hyper_util::rt::TokioIo;
        let tls = portcullis::tls::generate(&[]).unwrap();
        let mut config = portcullis::tls::server_config(&tls.cert_pem, &tls.key_pem).unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ended_tx, ended) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stopped) = tokio::sync::watch::channel(());
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, ended, stopped) = (acceptor.clone(), ended_tx.clone(), stopped.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                        let (ended, mut stopped) = (ended.clone(), stopped.clone());
                        let upgrading = request.headers().contains_key(header::UPGRADE);
                        let upgrade = hyper::upgrade::on(&mut request);
                        tokio::spawn(async move {
                            let Ok(upgraded) = upgrade.await else { return };
                            let mut stream = TokioIo::new(upgraded);
                            let mut buf = [0u8; 1024];
                            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                            let _ = ended.send(());
                            let _ = stopped.changed().await;
                        });
                        let answer = if upgrading {
                            Response::builder()
                                .status(101)
                                .header(header::CONNECTION, "Upgrade")
                                .header(header::UPGRADE, "websocket")
                                .header("sec-websocket-protocol", "v5.channel.k8s.io")
                        } else {
                            Response::builder().status(200)
                        };
                        async move { answer.body(http_body_util::Empty::<bytes::Bytes>::new()) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        SilentCluster {
            addr,
            ca_pem: tls.ca_pem,
            ended,
            stop,
            task,
        }
    }

    fn stop(self) {
        self.task.abort();
        drop(self.stop);
    }
}

/// A second cluster `silent` at `server` (trusting `ca_pem`), otherwise
/// as the first is configured.
fn add_silent_cluster(config: &mut portcullis::config::Config, server: String, ca_pem: &str) {
    let ca_file = Portcullis::folder_of(config).join("silent-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let mut silent = config.clusters[0].clone();
    silent.name = "silent".into();
    silent.server = server;
    silent.ca_file = ca_file;
    config.clusters.push(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_is_gone_ends_though_the_cluster_keeps_its_half_open() {
    let mut silent = SilentCluster::start().await;
    let (server, ca_pem) = (format!("https://{}", silent.addr), silent.ca_pem.clone());
    let env = Portcullis::start_with(|config| {
        add_silent_cluster(config, server, &ca_pem);
        config.limits.streams_per_caller = 1;
    })
    .await;
    let token = env.person("ana", &[]);
    let session = cat_session_in(&env, &token, "silent", "web").await;
    let watch = "/clusters/silent/api/v1/namespaces/shop/configmaps?watch=1";
    let refused = env.raw().stream(watch, &token).await;
    assert_eq!(refused.status(), 429, "the session holds ana's one place");
    // The client is gone, cleanly (close_notify, then FIN: as Go's TLS
    // closes kubectl's connection). The cluster is told (it reads the
    // stream's end), and the stream ends with it, though the cluster says
    // nothing and keeps its half open.
    let mut session = session;
    session.shutdown().await.unwrap();
    drop(session);
    tokio::time::timeout(EVENTUALLY, silent.ended.recv())
        .await
        .expect("the cluster reads the end of the stream");
    crate::support::eventually("the ended stream frees ana's one place", async || {
        env.raw().stream(watch, &token).await.status() == 200
    })
    .await;
    env.stop().await;
    silent.stop();
}

/// A cluster behind a load balancer failing over may accept the TCP
/// connection and never finish the TLS handshake. A watch, which has no
/// request timeout, must not wait on it for ever: the connection's set-up
/// is bounded (10 s), the caller gets a Status, and its stream place is
/// given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_to_a_cluster_that_never_finishes_the_tls_handshake_is_answered_and_its_place_freed() {
    let stalling = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("https://{}", stalling.local_addr().unwrap());
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = stalling.accept().await {
            let _ = accepted_tx.send(());
            open.push(tcp);
        }
    });
    let env = Portcullis::start_with(|config| {
        let mut stalled = config.clusters[0].clone();
        stalled.name = "stalled".into();
        stalled.server = server;
        config.clusters.push(stalled);
        config.limits.streams_per_caller = 1;
    })
    .await;
    let token = env.person("ana", &[]);
    let watch = "/clusters/stalled/api/v1/namespaces/shop/configmaps?watch=1";
    let answered = tokio::time::timeout(EVENTUALLY, env.raw().stream(watch, &token))
        .await
        .expect("an answer, not a wait for ever");
    assert!(accepted.try_recv().is_ok(), "portcullis did connect");
    assert_eq!(answered.status(), 503, "{answered:?}");
    let again = tokio::time::timeout(EVENTUALLY, env.raw().stream(watch, &token))
        .await
        .expect("an answer");
    assert_eq!(again.status(), 503, "ana's one stream place was given back, not 429");
    env.stop().await;
    held.abort();
}

/// A control plane (or something in its place) may take a watch or an exec
/// and never answer it. A long-running request has no request timeout, but
/// its answer's head must come within it: the caller gets a Status and its
/// stream place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_cluster_takes_and_never_answers_is_answered_and_its_place_freed() {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let tls = portcullis::tls::generate(&[]).unwrap();
    let config = portcullis::tls::server_config(&tls.cert_pem, &tls.key_pem).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("https://{}", silent.local_addr().unwrap());
    let (taken_tx, mut taken) = tokio::sync::mpsc::unbounded_channel();
    let held = tokio::spawn(async move {
        while let Ok((tcp, _)) = silent.accept().await {
            let (acceptor, taken_tx) = (acceptor.clone(), taken_tx.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let _ = taken_tx.send(request.uri().path().to_string());
                    std::future::pending::<Result<http::Response<String>, std::convert::Infallible>>()
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let env = Portcullis::start_with(|config| {
        add_silent_cluster(config, server, &tls.ca_pem);
        config.limits.streams_per_caller = 1;
        config.limits.request_timeout = Duration::from_secs(2);
    })
    .await;
    let token = env.person("ana", &[]);
    let watch = "/clusters/silent/api/v1/namespaces/shop/configmaps?watch=1";
    for _ in 0..2 {
        let answered = tokio::time::timeout(EVENTUALLY, env.raw().stream(watch, &token))
            .await
            .expect("an answer, not a wait for ever");
        assert_eq!(
            answered.status(),
            504,
            "{answered:?}: ana's one stream place was given back, not 429"
        );
        // The cluster took it (beside the reconciler's own requests).
        while taken.try_recv().expect("the watch reached the cluster") != "/api/v1/namespaces/shop/configmaps" {}
    }
    env.stop().await;
    held.abort();
}
