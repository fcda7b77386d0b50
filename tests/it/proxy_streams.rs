//! Streams through portcullis: watch, logs -f, exec, cp, port-forward, and
//! what happens when either side goes away.

use crate::harness::{Portcullis, CLUSTER};
use crate::support::{eventually, free_port};
use futures_util::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use std::io::{Read, Write};
use std::time::Duration;

fn admin_api(env: &Portcullis) -> Api<ConfigMap> {
    let mut config = kube::Config::new(env.sim().url().parse().unwrap());
    config.root_cert = Some(vec![{
        use rustls_pki_types::pem::PemObject;
        rustls_pki_types::CertificateDer::from_pem_slice(env.sim().ca_pem().as_bytes())
            .unwrap()
            .to_vec()
    }]);
    config.auth_info.token = Some(env.sim().admin_token().to_string().into());
    Api::namespaced(kube::Client::try_from(config).unwrap(), "shop")
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_quiet_for_longer_than_the_request_timeout_still_delivers_events() {
    // The request timeout (a minute by default) cuts ordinary requests, never
    // a watch; set short, the test outwaits it in a few seconds.
    let env = Portcullis::start_with(|c| c.limits.request_timeout = Duration::from_secs(3)).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let api: Api<ConfigMap> = Api::namespaced(env.kube(&token), "shop");
    let list = api.list(&Default::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let params = WatchParams::default().timeout(290);
    let mut events = api.watch(&params, &rv).await.unwrap().boxed();
    // Outwaited once an ordinary request sent after the watch opened has
    // been cut by it.
    env.sim().faults().add(portcullis_sim::faults::FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/pods".into(),
        times: Some(1),
        action: portcullis_sim::faults::FaultAction::Delay(Duration::from_secs(10)),
    });
    let slow = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &token)
        .await;
    assert_eq!(slow.status, 504, "the request timeout has passed");
    admin_api(&env)
        .create(&PostParams::default(), &configmap("late"))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.try_next().await.unwrap() {
                Some(WatchEvent::Added(cm)) if cm.metadata.name.as_deref() == Some("late") => return cm,
                Some(_) => continue,
                None => panic!("the watch ended"),
            }
        }
    })
    .await
    .expect("the event arrives after the request timeout's worth of silence");
    assert_eq!(event.data.unwrap()["k"], "v");
    // Left open, the watch would hold up the shutdown for its grace period.
    drop(events);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_a_watch_closes_its_stream() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .stream(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps?watch=1"),
            &token,
        )
        .await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.into_data().unwrap().starts_with(b"{\"type\":\"ADDED\""));
    assert_eq!(env.gateway.metrics.open_streams.get(), 1);
    drop(body);
    eventually("the stream closed when the client leaves", async || {
        env.gateway.metrics.open_streams.get() == 0
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_dropping_a_list_midway_is_reported_not_hung() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    env.sim().faults().add(portcullis_sim::faults::FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/configmaps".into(),
        times: None,
        action: portcullis_sim::faults::FaultAction::CutBody { after_bytes: 10 },
    });
    let kubectl = env.kubectl(&token, "shop");
    let started = std::time::Instant::now();
    let out = kubectl.run(&["get", "configmaps", "--request-timeout=20s"]);
    assert!(!out.status.success());
    assert!(started.elapsed() < Duration::from_secs(20), "reported, not hung");
    env.sim().faults().clear();
    kubectl.ok(&["get", "configmaps"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_upstream_connection_is_survived_by_the_next_request() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    kubectl.ok(&["get", "configmaps"]);
    env.sim().faults().add(portcullis_sim::faults::FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/configmaps".into(),
        times: Some(1),
        action: portcullis_sim::faults::FaultAction::CloseConnection,
    });
    let _ = kubectl.run(&["get", "configmaps"]);
    kubectl.ok(&["get", "configmaps"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_streams_lines_as_they_come() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = first_pod(&kubectl);
    let mut child = std::process::Command::new(crate::support::kubectl_path())
        .args([
            "--kubeconfig",
            kubectl.kubeconfig().to_str().unwrap(),
            "logs",
            "-f",
            "--tail=1",
            &pod,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while seen.iter().filter(|b| **b == b'\n').count() < 4 {
            let n = stdout.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        seen
    });
    eventually("four followed lines", async || reader.is_finished()).await;
    let _ = child.kill();
    let _ = child.wait();
    let seen = reader.join().unwrap();
    assert!(
        seen.iter().filter(|b| **b == b'\n').count() >= 4,
        "followed lines: {}",
        String::from_utf8_lossy(&seen)
    );
    env.stop().await;
}

fn first_pod(kubectl: &crate::harness::Kubectl) -> String {
    let name = kubectl.ok(&["get", "pods", "-o", "jsonpath={.items[0].metadata.name}"]);
    assert!(!name.is_empty(), "the seed has pods in shop");
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_works_over_websocket_and_spdy() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = first_pod(&kubectl);
    assert_eq!(
        kubectl.ok(&["exec", &pod, "--", "echo", "hello", "there"]),
        "hello there\n"
    );
    let spdy = std::process::Command::new(crate::support::kubectl_path())
        .args([
            "--kubeconfig",
            kubectl.kubeconfig().to_str().unwrap(),
            "exec",
            &pod,
            "--",
            "echo",
            "over",
            "spdy",
        ])
        .env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")
        .output()
        .unwrap();
    assert!(spdy.status.success(), "{}", String::from_utf8_lossy(&spdy.stderr));
    assert_eq!(String::from_utf8_lossy(&spdy.stdout), "over spdy\n");
    let failing = kubectl.run(&["exec", &pod, "--", "sh", "-c", "exit 3"]);
    assert_eq!(failing.status.code(), Some(3));
    let mut cat = std::process::Command::new(crate::support::kubectl_path())
        .args([
            "--kubeconfig",
            kubectl.kubeconfig().to_str().unwrap(),
            "exec",
            "-i",
            &pod,
            "--",
            "cat",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    cat.stdin
        .take()
        .unwrap()
        .write_all(b"piped through portcullis\n")
        .unwrap();
    let out = cat.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "piped through portcullis\n");
    let upgrades: Vec<_> = env
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/exec"))
        .collect();
    assert!(
        upgrades.len() >= 4,
        "every exec reached the cluster: {}",
        upgrades.len()
    );
    assert!(upgrades
        .iter()
        .all(|r| r.impersonated.as_ref().is_some_and(|u| u.name == "user:ana")));
    assert!(
        upgrades.iter().all(|r| r.version == "HTTP/1.1"),
        "upgrades go over HTTP/1.1"
    );
    let server = env.sim().addr().to_string();
    for upgrade in &upgrades {
        assert_eq!(
            upgrade.header_values("host"),
            [server.as_str()],
            "each upgrade carries one Host, the cluster's"
        );
    }
    let ordinary = env
        .sim()
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/pods"))
        .unwrap();
    assert_eq!(
        ordinary.version, "HTTP/1.1",
        "ordinary requests go over pooled HTTP/1.1"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_is_the_clusters_decision() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = first_pod(&kubectl);
    let err = kubectl.fails(&["exec", &pod, "--", "echo", "hi"]);
    assert!(err.contains("forbidden") && err.contains("pods/exec"), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cp_copies_both_ways() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = first_pod(&kubectl);
    let local = env.dir.path().join("note.txt");
    std::fs::write(&local, "carried through portcullis\n").unwrap();
    kubectl.ok(&["cp", local.to_str().unwrap(), &format!("{pod}:/tmp/note.txt")]);
    let back = env.dir.path().join("back.txt");
    kubectl.ok(&["cp", &format!("{pod}:/tmp/note.txt"), back.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(back).unwrap(), "carried through portcullis\n");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_round_trips_bytes() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = first_pod(&kubectl);
    for websockets in ["true", "false"] {
        let port = free_port();
        let mut child = std::process::Command::new(crate::support::kubectl_path())
            .args([
                "--kubeconfig",
                kubectl.kubeconfig().to_str().unwrap(),
                "port-forward",
                &format!("pod/{pod}"),
                &format!("{port}:80"),
            ])
            .env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stream = eventually("port-forward to listen", async || {
            std::net::TcpStream::connect(("127.0.0.1", port))
        })
        .await;
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(b"ping through portcullis").unwrap();
        let mut buf = [0u8; 23];
        stream.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping through portcullis", "websockets={websockets}");
        let _ = child.kill();
        let _ = child.wait();
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_sending_goaway_is_survived_by_the_next_requests() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    // One client connection for the GETs: portcullis keeps upstream
    // connections per connection thread, and a client connection is served
    // on one (`app::shards`).
    let raw = env.raw();
    assert_eq!(raw.get(&path, &token).await.status, 200);
    // A watch is open on an HTTP/2 connection when the GOAWAY comes, while
    // the GETs use a pooled HTTP/1.1 one, which the cluster then closes.
    let watch = env.raw().stream(&format!("{path}?watch=1"), &token).await;
    assert_eq!(watch.status(), 200);
    let before = env.sim().connections_accepted();
    for _ in 0..3 {
        assert_eq!(raw.get(&path, &token).await.status, 200);
    }
    assert_eq!(
        env.sim().connections_accepted(),
        before,
        "requests share the pooled connection"
    );
    env.sim().goaway();
    // Until portcullis's client has read the GOAWAY, a request may still be
    // sent on the old connection and be refused there (the race the old
    // fixed sleep hid). The GOAWAY comes between requests once a request has
    // gone over a new connection: from then on every request must succeed.
    eventually("a request over a new connection", async || {
        let _ = raw.get(&path, &token).await;
        env.sim().connections_accepted() > before
    })
    .await;
    for _ in 0..5 {
        assert_eq!(raw.get(&path, &token).await.status, 200, "survived");
    }
    assert!(
        env.sim().connections_accepted() > before,
        "a new connection was made after the GOAWAY"
    );
    drop(watch);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_watches_than_one_upstream_connection_carries_all_open() {
    // The simulated cluster, like kube-apiserver, caps concurrent streams
    // per HTTP/2 connection (200 here); 300 watches must still all open.
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps?watch=1");
    let clients: Vec<_> = (0..3).map(|_| env.raw()).collect();
    let opening = clients
        .iter()
        .flat_map(|raw| (0..100).map(|_| raw.stream(&path, &token)));
    let watches = tokio::time::timeout(Duration::from_secs(30), futures_util::future::join_all(opening))
        .await
        .expect("every watch opens");
    assert!(watches.iter().all(|w| w.status() == 200));
    assert_eq!(env.gateway.metrics.open_streams.get(), 300);
    drop(watches);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_requests_reuse_http1_keep_alive_connections_and_watches_go_over_http2() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    // One client connection, served on one of portcullis's connection
    // threads, whose upstream connections its requests take turns on.
    let raw = env.raw();
    assert_eq!(raw.get(&path, &token).await.status, 200);
    let before = env.sim().connections_accepted();
    for _ in 0..5 {
        assert_eq!(raw.get(&path, &token).await.status, 200);
    }
    assert_eq!(env.sim().connections_accepted(), before, "one kept-alive connection");
    let watch = env.raw().stream(&format!("{path}?watch=1"), &token).await;
    assert_eq!(watch.status(), 200);
    let requests = env.sim().requests();
    let version = |watching: bool| {
        let mut versions: Vec<_> = requests
            .iter()
            .filter(|r| {
                r.path.ends_with("/configmaps") && r.query.as_deref().is_some_and(|q| q.contains("watch=1")) == watching
            })
            .map(|r| r.version.clone())
            .collect();
        versions.dedup();
        versions
    };
    assert_eq!(version(false), ["HTTP/1.1"], "GETs over HTTP/1.1");
    assert_eq!(version(true), ["HTTP/2.0"], "the watch over HTTP/2");
    let server = env.sim().addr().to_string();
    for request in requests.iter().filter(|r| r.version == "HTTP/1.1") {
        assert_eq!(
            request.header_values("host"),
            [server.as_str()],
            "one Host, the cluster's: {}",
            request.path
        );
    }
    drop(watch);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_with_its_limit_of_streams_open_is_refused_another_and_no_one_else_is() {
    let env = Portcullis::start_with(|config| config.limits.streams_per_caller = 2).await;
    let (ana, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let bob = env.person("bob", &[("viewer", Some("shop"))]);
    let agent = env.agent("ana", &[&grants[0]]);
    let watch = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps?watch=1");
    let raw = env.raw();
    let first = raw.stream(&watch, &ana).await;
    let second = raw.stream(&watch, &ana).await;
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));

    // (Read as a stream, so that a watch let through fails here rather
    // than hanging.)
    let refused = raw.stream(&watch, &ana).await;
    assert_eq!(refused.status(), 429);
    let audit_id = refused.headers()["audit-id"].to_str().unwrap().to_string();
    let status: serde_json::Value =
        serde_json::from_slice(&refused.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(status["reason"], "TooManyRequests");
    let row = crate::audit::row(&env, &audit_id).await;
    assert_eq!(row.refused, "too_many_streams");
    // kubectl says why.
    let kubectl = env.kubectl(&ana, "shop");
    let said = kubectl.fails(&["get", "configmaps", "--watch-only", "--request-timeout=30s"]);
    assert!(said.contains("already have 2 long-running requests"), "{said}");
    // Ordinary requests do not count; ana's agent's streams are ana's; and
    // another person has places of their own.
    let list = raw
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps"), &ana)
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(raw.stream(&watch, &agent).await.status(), 429);
    assert_eq!(raw.stream(&watch, &bob).await.status(), 200);
    // A watch closed, ana's place is free again.
    drop(first);
    let third = eventually("ana's closed watch frees its place", async || {
        let answer = raw.stream(&watch, &ana).await;
        (answer.status() == 200).then_some(answer)
    })
    .await;
    drop((second, third));
    env.stop().await;
}

/// Read `body` to its end, which must come within 30 s.
async fn ends(body: hyper::body::Incoming) {
    let mut body = body;
    let read = async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the stream ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_watch_ends_when_its_credential_or_the_grant_it_was_sent_with_is_revoked() {
    let env = Portcullis::start().await;
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let watch = format!("{path}?watch=1");
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let open = env.raw().stream(&watch, &ana).await;
    assert_eq!(open.status(), 200);
    let person = portcullis::identity::Principal::person("ana");
    let credential = env.store.list_credentials(Some(&person)).unwrap()[0].id.clone();
    env.store.revoke_credential(&credential).unwrap();
    ends(open.into_body()).await;
    assert_eq!(env.raw().get(&path, &ana).await.status, 401);

    // The credential still works; the grant the watch was let through by
    // does not.
    let bo = env.person("bo", &[("viewer", Some("shop"))]);
    let open = env.raw().stream(&watch, &bo).await;
    assert_eq!(open.status(), 200);
    let person = portcullis::identity::Principal::person("bo");
    let grant = env.store.grants_of(&person, CLUSTER).unwrap()[0].id.clone();
    env.store.revoke_grant(&grant).unwrap();
    ends(open.into_body()).await;
    assert_eq!(
        env.raw().get(&path, &bo).await.status,
        403,
        "the cluster refuses the rest"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_shell_closes_when_its_credential_is_revoked() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = first_pod(&kubectl);
    let mut cat = std::process::Command::new(crate::support::kubectl_path())
        .args([
            "--kubeconfig",
            kubectl.kubeconfig().to_str().unwrap(),
            "exec",
            "-i",
            &pod,
            "--",
            "cat",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The shell is open: what goes in comes back.
    let mut stdin = cat.stdin.take().unwrap();
    stdin.write_all(b"still here\n").unwrap();
    let mut stdout = cat.stdout.take().unwrap();
    let mut line = [0u8; 11];
    stdout.read_exact(&mut line).unwrap();
    assert_eq!(&line, b"still here\n");
    let person = portcullis::identity::Principal::person("ana");
    let credential = env.store.list_credentials(Some(&person)).unwrap()[0].id.clone();
    env.store.revoke_credential(&credential).unwrap();
    // Its input still open, the shell ends because portcullis closed it.
    eventually("the shell to close", async || cat.try_wait().unwrap()).await;
    drop(stdin);
    env.stop().await;
}
