//! `portcullis demo`, run as the binary a newcomer runs.

use crate::support::eventually;
use std::process::{Child, Command, Stdio};

struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(crate::support::kubectl_path())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn the_demo_writes_working_kubeconfigs_and_a_configuration_the_cli_uses() {
    let dir = tempfile::tempdir().unwrap();
    let demo = Demo(
        Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["demo", "--listen", "127.0.0.1:0", "--dir"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let person = dir.path().join("person.kubeconfig");
    // mcp.json is the last file the demo writes, once it serves.
    let mcp_json = dir.path().join("mcp.json");
    eventually("the demo to write mcp.json whole", async || {
        let text = std::fs::read_to_string(&mcp_json).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| v["mcpServers"].is_object())
    })
    .await;
    for file in [
        "portcullis.toml",
        "person.kubeconfig",
        "bot.kubeconfig",
        "admin.kubeconfig",
        "agent.token",
        "mcp.json",
    ] {
        assert!(dir.path().join(file).exists(), "{file} written");
    }
    assert!(std::fs::read_to_string(&person)
        .unwrap()
        .contains("current-context: portcullis-sim"));

    let pods = kubectl(&person, &["get", "pods"]);
    assert!(pods.status.success(), "{}", String::from_utf8_lossy(&pods.stderr));
    assert!(String::from_utf8_lossy(&pods.stdout).contains("web-"));
    let whoami = kubectl(
        &person,
        &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
    );
    assert_eq!(
        String::from_utf8_lossy(&whoami.stdout),
        "user:ana",
        "{}",
        String::from_utf8_lossy(&whoami.stderr)
    );
    let bot = kubectl(&dir.path().join("bot.kubeconfig"), &["get", "pods", "-n", "shop"]);
    assert!(String::from_utf8_lossy(&bot.stderr).contains(r#"User "bot:deployer" cannot list resource "pods""#));
    // The agent acts for ana, and sees her Secrets' values hidden.
    let mcp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("mcp.json")).unwrap()).unwrap();
    let token = std::fs::read_to_string(dir.path().join("agent.token")).unwrap();
    assert_eq!(
        mcp["mcpServers"]["portcullis"]["headers"]["Authorization"],
        format!("Bearer {}", token.trim())
    );
    assert!(mcp["mcpServers"]["portcullis"]["url"]
        .as_str()
        .unwrap()
        .ends_with("/mcp"));
    let secret = ["get", "secret", "db-credentials", "-o", "jsonpath={.data.password}"];
    assert_eq!(
        String::from_utf8_lossy(&kubectl(&person, &secret).stdout),
        "czNjcjN0LVBhNTV3MHJk"
    );
    let hidden = kubectl(&dir.path().join("agent.kubeconfig"), &secret);
    assert_eq!(
        String::from_utf8_lossy(&hidden.stdout),
        "<redacted, 15 bytes>",
        "{}",
        String::from_utf8_lossy(&hidden.stderr)
    );
    // The agent's writes wait for ana's approval, on a page she signs in to.
    let held = kubectl(&dir.path().join("agent.kubeconfig"), &["create", "configmap", "demo"]);
    let said = String::from_utf8_lossy(&held.stderr);
    assert!(
        said.contains("waits for a person's approval") && said.contains("/approvals/"),
        "{said}"
    );
    assert!(std::fs::read_to_string(dir.path().join("portcullis.toml"))
        .unwrap()
        .contains("[approvals]"));
    // ana approves it from her terminal, through the server, as the demo says.
    let id = said
        .split("/approvals/")
        .nth(1)
        .unwrap()
        .chars()
        .take(36)
        .collect::<String>();
    let approved = ana_command(dir.path(), &["approvals", "approve", &id]);
    assert!(
        String::from_utf8_lossy(&approved.stdout).contains(&format!("approved {id}")),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let admin = kubectl(&dir.path().join("admin.kubeconfig"), &["get", "namespaces"]);
    assert!(String::from_utf8_lossy(&admin.stdout).contains("payments"));

    let grants = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--config")
        .arg(dir.path().join("portcullis.toml"))
        .args(["admin", "grant", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&grants.stdout);
    assert!(
        listed.contains("person:ana") && listed.contains("bot:deployer"),
        "{listed} {}",
        String::from_utf8_lossy(&grants.stderr)
    );
    interrupt_and_expect_a_clean_exit(demo).await;
}

/// A person command as ana, with the demo's printed variables: the server
/// (from her kubeconfig), its CA, her token; no login file.
fn ana_command(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let kubeconfig = std::fs::read_to_string(dir.join("person.kubeconfig")).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .split("/clusters/")
        .next()
        .unwrap()
        .to_string();
    let token = std::fs::read_to_string(dir.join("person.token")).unwrap();
    Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .env("PORTCULLIS_SERVER", server)
        .env("PORTCULLIS_CA_FILE", dir.join("portcullis-ca.pem"))
        .env("PORTCULLIS_TOKEN", token.trim())
        .env("HOME", dir)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap()
}

/// Ctrl-C (SIGINT) stops everything: the process exits 0 within seconds.
async fn interrupt_and_expect_a_clean_exit(mut demo: Demo) {
    let pid = demo.0.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = eventually("the demo to stop on Ctrl-C", async || demo.0.try_wait().unwrap()).await;
    assert!(status.success(), "the demo exits cleanly on Ctrl-C: {status}");
}

#[test]
fn certs_writes_a_ca_and_a_serving_certificate_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["certs", "--name", "portcullis.example.com", "--out"])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let cert = std::fs::read_to_string(dir.path().join("tls.crt")).unwrap();
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).unwrap();
    assert!(cert.starts_with("-----BEGIN CERTIFICATE-----") && ca.starts_with("-----BEGIN CERTIFICATE-----"));
    assert_ne!(cert, ca);
    let key = dir.path().join("tls.key");
    assert!(std::fs::read_to_string(&key).unwrap().contains("PRIVATE KEY"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let second = run();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("not overwriting"));
    assert_eq!(std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(), cert);
}
