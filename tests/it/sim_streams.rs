//! pods/log, exec, attach, cp and port-forward against the simulated cluster
//! with real kubectl 1.37, over WebSocket (its default) and SPDY (its
//! fallback, forced with `KUBECTL_*_WEBSOCKETS=false`).

use crate::support::{self, kubectl_path};
use portcullis_sim::Sim;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Forces kubectl's SPDY fallback for exec, attach and cp.
const SPDY_EXEC: (&str, &str) = ("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false");
/// Forces kubectl's SPDY fallback for port-forward.
const SPDY_PORT_FORWARD: (&str, &str) = ("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false");

/// kubectl as the admin, with control over env, stdin and child processes.
struct Cli {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Cli {
    fn new(sim: &Sim) -> Cli {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, sim.kubeconfig(sim.admin_token())).expect("the kubeconfig is written");
        Cli { dir, kubeconfig }
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(kubectl_path());
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG");
        cmd.envs(env.iter().copied());
        cmd
    }

    /// Run to completion off the async runtime, feeding `stdin`.
    async fn output(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Output {
        let mut cmd = self.command(args, env);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let input = stdin.map(<[u8]>::to_vec);
        tokio::task::spawn_blocking(move || {
            let mut child = cmd.spawn().expect("kubectl starts");
            if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
                pipe.write_all(&input).expect("stdin is written");
            }
            child.wait_with_output().expect("kubectl finishes")
        })
        .await
        .expect("the kubectl thread joins")
    }

    async fn ok(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.output(args, env, None).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut cmd = self.command(args, env);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().expect("kubectl starts")
    }
}

/// A simulated cluster with namespace `ns` holding pod `web` (container
/// `web`, port 80, one restart, started 100 s ago) and pod `duo` (two
/// containers).
async fn cluster(ns: &str) -> (Sim, Cli) {
    let sim = support::spawn_sim().await;
    let store = sim.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .expect("the namespace is created");
    let started = (chrono::Utc::now() - chrono::Duration::seconds(100))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let status = |names: &[&str]| {
        let statuses: Vec<_> = names
            .iter()
            .map(|n| json!({"name": n, "ready": true, "restartCount": 1, "state": {"running": {"startedAt": started}}}))
            .collect();
        json!({"phase": "Running", "containerStatuses": statuses})
    };
    store
        .create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": ns, "labels": {"app": "web"}},
            "spec": {"nodeName": "sim-node-1", "containers": [{
                "name": "web", "image": "nginx:1.27",
                "ports": [{"containerPort": 80}],
                "env": [{"name": "GREETING", "value": "hello"}]
            }]},
            "status": status(&["web"]),
        }))
        .expect("pod web is created");
    store
        .create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "duo", "namespace": ns},
            "spec": {"nodeName": "sim-node-1", "containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]},
            "status": status(&["a", "b"]),
        }))
        .expect("pod duo is created");
    let cli = Cli::new(&sim);
    (sim, cli)
}

/// Methods the simulator saw for a pod subresource (GET = WebSocket,
/// POST = SPDY, as kubectl sends them).
fn methods(sim: &Sim, subresource: &str) -> Vec<String> {
    sim.requests()
        .into_iter()
        .filter(|r| r.path.ends_with(&format!("/{subresource}")))
        .map(|r| format!("{} {}", r.method, r.code))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_logs_honours_tail_since_previous_and_container_checks() {
    let (sim, cli) = cluster("logs").await;
    let all = cli.ok(&["logs", "-n", "logs", "web"], &[]).await;
    assert_eq!(all.lines().count(), 50, "{all}");
    assert!(all.lines().all(|l| l.contains(" web web #")), "{all}");
    let tail = cli.ok(&["logs", "-n", "logs", "web", "--tail=3"], &[]).await;
    assert_eq!(
        tail.lines().collect::<Vec<_>>(),
        all.lines().skip(47).collect::<Vec<_>>()
    );
    let recent = cli.ok(&["logs", "-n", "logs", "web", "--since=75s"], &[]).await;
    let n = recent.lines().count();
    assert!(n > 0 && n < 50, "--since=75s kept {n} lines");
    let previous = cli.ok(&["logs", "-n", "logs", "web", "-p", "--timestamps"], &[]).await;
    assert!(
        previous.contains("[previous]") && previous.contains("SIGTERM"),
        "{previous}"
    );
    let bad = cli
        .output(&["logs", "-n", "logs", "web", "-c", "nope"], &[], None)
        .await;
    assert!(String::from_utf8_lossy(&bad.stderr).contains("container nope is not valid for pod web"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_logs_follow_streams_new_lines_until_killed() {
    let (sim, cli) = cluster("follow").await;
    let mut child = cli.spawn(&["logs", "-f", "-n", "follow", "web"], &[]);
    let stdout = child.stdout.take().expect("piped stdout");
    let lines = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .take(53)
            .map(|l| l.unwrap_or_default())
            .collect::<Vec<_>>()
    });
    let lines = tokio::time::timeout(Duration::from_secs(20), lines)
        .await
        .expect("live lines arrive")
        .expect("joined");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(lines.len(), 53);
    assert!(lines[52].contains("#53"), "{:?}", &lines[50..]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_exec_runs_commands_over_websocket_and_spdy() {
    let (sim, cli) = cluster("exec").await;
    assert_eq!(
        cli.ok(&["exec", "-n", "exec", "web", "--", "echo", "hi"], &[]).await,
        "hi\n"
    );
    assert_eq!(methods(&sim, "exec"), ["GET 101"], "kubectl tries WebSocket first");
    assert_eq!(
        cli.ok(&["exec", "-n", "exec", "web", "--", "echo", "hi"], &[SPDY_EXEC])
            .await,
        "hi\n"
    );
    assert_eq!(methods(&sim, "exec").last().map(String::as_str), Some("POST 101"));
    let env = cli.ok(&["exec", "-n", "exec", "web", "--", "env"], &[SPDY_EXEC]).await;
    assert!(
        env.contains("GREETING=hello\n") && env.contains("HOSTNAME=web\n"),
        "{env}"
    );
    let both = cli
        .output(&["exec", "-n", "exec", "duo", "--", "hostname"], &[], None)
        .await;
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("Defaulted container \"a\""),
        "kubectl picks the first container"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_and_stderr_propagate_over_both_transports() {
    let (sim, cli) = cluster("codes").await;
    for env in [&[][..], &[SPDY_EXEC][..]] {
        let out = cli
            .output(
                &["exec", "-n", "codes", "web", "--", "sh", "-c", "echo oops >&2; exit 3"],
                env,
                None,
            )
            .await;
        assert_eq!(
            out.status.code(),
            Some(3),
            "{env:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = cli
            .output(&["exec", "-n", "codes", "web", "--", "no-such-tool"], env, None)
            .await;
        assert_eq!(out.status.code(), Some(127), "{env:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("sh: no-such-tool: not found"));
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_with_stdin_copies_it_back_until_stdin_ends() {
    let (sim, cli) = cluster("stdin").await;
    for env in [&[][..], &[SPDY_EXEC][..]] {
        let out = cli
            .output(
                &["exec", "-i", "-n", "stdin", "web", "--", "cat"],
                env,
                Some(b"line one\nline two\n"),
            )
            .await;
        assert!(
            out.status.success(),
            "{env:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "line one\nline two\n", "{env:?}");
    }
    let out = cli
        .output(&["attach", "-i", "-n", "stdin", "web"], &[], Some(b"attached\n"))
        .await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "attached\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_cp_copies_files_into_and_out_of_a_pod() {
    let (sim, cli) = cluster("cp").await;
    let local = cli.dir.path().join("upload.txt");
    std::fs::write(&local, "payload from the laptop\n").expect("the local file is written");
    let local_str = local.to_string_lossy().into_owned();
    cli.ok(&["cp", &local_str, "cp/web:/tmp/upload.txt"], &[]).await;
    assert_eq!(
        cli.ok(&["exec", "-n", "cp", "web", "--", "cat", "/tmp/upload.txt"], &[])
            .await,
        "payload from the laptop\n"
    );
    // Into an existing directory keeps the file name; over SPDY this time.
    cli.ok(&["cp", &local_str, "cp/web:/app"], &[SPDY_EXEC]).await;
    assert!(cli
        .ok(&["exec", "-n", "cp", "web", "--", "ls", "/app"], &[])
        .await
        .contains("upload.txt\n"));
    let back = cli.dir.path().join("download.txt");
    let back_str = back.to_string_lossy().into_owned();
    cli.ok(&["cp", "cp/web:/tmp/upload.txt", &back_str], &[]).await;
    assert_eq!(
        std::fs::read_to_string(&back).expect("the copy exists"),
        "payload from the laptop\n"
    );
    let dir = cli.dir.path().join("app-copy");
    cli.ok(&["cp", "cp/web:/app", &dir.to_string_lossy()], &[SPDY_EXEC])
        .await;
    assert!(dir.join("README").is_file() && dir.join("upload.txt").is_file());
    sim.shutdown().await;
}

/// Start `kubectl port-forward` to port 80 on a free local port; returns the
/// child and the local port it printed.
async fn port_forward(cli: &Cli, ns: &str, env: &[(&str, &str)]) -> (Child, u16) {
    let mut child = cli.spawn(&["port-forward", "-n", ns, "pod/web", ":80"], env);
    let stdout = child.stdout.take().expect("piped stdout");
    // Keep draining stdout: kubectl dies of SIGPIPE if it cannot print
    // "Handling connection for …".
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = first_tx.send(first);
        for _ in lines {}
    });
    let line = tokio::time::timeout(Duration::from_secs(20), first_rx)
        .await
        .expect("port-forward is ready")
        .expect("a first line");
    // "Forwarding from 127.0.0.1:43567 -> 80"
    let port = line
        .split_whitespace()
        .nth(2)
        .and_then(|addr| addr.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a local port in {line:?}"));
    (child, port)
}

async fn echo_round_trip(port: u16, payload: &'static [u8]) -> std::io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        tcp.write_all(payload)?;
        let mut back = vec![0u8; payload.len()];
        tcp.read_exact(&mut back)?;
        Ok(back)
    })
    .await
    .expect("joined")
}

/// Stop kubectl and return what it printed on stderr.
fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let mut err = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut err);
    }
    let _ = child.wait();
    err
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_port_forward_round_trips_bytes_over_websocket_and_spdy() {
    let (sim, cli) = cluster("pf").await;
    for (env, method) in [(&[][..], "GET 101"), (&[SPDY_PORT_FORWARD][..], "POST 101")] {
        let (child, port) = port_forward(&cli, "pf", env).await;
        let first = echo_round_trip(port, b"ping over the tunnel\n").await;
        let second = echo_round_trip(port, b"second connection").await;
        let stderr = stop(child);
        let seen = methods(&sim, "portforward");
        assert_eq!(
            first.as_deref().ok(),
            Some(&b"ping over the tunnel\n"[..]),
            "{env:?}: {first:?} {stderr} {seen:?}"
        );
        assert_eq!(
            second.as_deref().ok(),
            Some(&b"second connection"[..]),
            "{env:?}: {stderr}"
        );
        assert_eq!(seen.last().map(String::as_str), Some(method), "{env:?}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_requests_fail_the_way_kube_apiserver_fails_them() {
    let (sim, _cli) = cluster("errs").await;
    let get = |path: &'static str, headers: &'static [(&'static str, &'static str)]| {
        let sim = &sim;
        async move {
            support::raw(sim, http::Method::GET, path, headers, "")
                .await
                .expect("an answer")
        }
    };
    let plain = get("/api/v1/namespaces/errs/pods/web/exec?command=ls&stdout=true", &[]).await;
    assert_eq!(
        (plain.status.as_u16(), plain.json()["message"].clone()),
        (400, json!("Upgrade request required"))
    );
    let ws_v9 = get(
        "/api/v1/namespaces/errs/pods/web/exec?command=ls&stdout=true",
        &[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-protocol", "v9.channel.k8s.io"),
        ],
    )
    .await;
    assert_eq!(
        ws_v9.status.as_u16(),
        400,
        "an unsupported subprotocol is refused without 101"
    );
    let missing = get("/api/v1/namespaces/errs/pods/nope/log", &[]).await;
    assert_eq!(
        (missing.status.as_u16(), missing.json()["message"].clone()),
        (404, json!("pods \"nope\" not found"))
    );
    let duo = get("/api/v1/namespaces/errs/pods/duo/log", &[]).await;
    assert_eq!(
        duo.json()["message"],
        "a container name must be specified for pod duo, choose one of: [a b]"
    );
    let invalid = get("/api/v1/namespaces/errs/pods/web/log?tailLines=-1", &[]).await;
    assert_eq!(
        (invalid.status.as_u16(), invalid.json()["reason"].clone()),
        (422, json!("Invalid"))
    );
    let limited = get("/api/v1/namespaces/errs/pods/web/log?limitBytes=10", &[]).await;
    assert_eq!(limited.body.as_ref().map(|b| b.len()).ok(), Some(10));
    assert_eq!(limited.headers["content-type"], "text/plain");
    sim.shutdown().await;
}
