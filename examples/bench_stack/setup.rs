//! `setup DIR`: portcullis's configuration and store in front of the running
//! simulated cluster and real control plane, as two clusters of one
//! portcullis (as an operator serves several), with a person whose role
//! reveals Secret values and an agent acting for it (whose responses are
//! redacted). Without a real control plane (no `DIR/real.json`: the
//! profile-guided build's training, `scripts/pgo-build`, runs where no
//! kube-apiserver is built), in front of the simulated cluster alone.

use portcullis::config::Config;
use portcullis::identity::Principal;
use std::path::Path;
use std::time::Duration;

/// Write `portcullis.toml`, its TLS files and store, and `stack.json`.
pub async fn run(dir: &Path) -> anyhow::Result<()> {
    let dir = dir.canonicalize()?;
    let sim: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("sim.json"))?)?;
    let real: Option<serde_json::Value> = match std::fs::read_to_string(dir.join("real.json")) {
        Ok(text) => Some(serde_json::from_str(&text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let tls = portcullis::tls::generate(&["localhost"])?;
    std::fs::write(dir.join("portcullis-ca.pem"), &tls.ca_pem)?;
    std::fs::write(dir.join("portcullis.crt"), &tls.cert_pem)?;
    std::fs::write(dir.join("portcullis.key"), &tls.key_pem)?;
    let port = free_port()?;
    let d = dir.display();
    // As an operator writes it; the MCP rate limit is lifted so that the
    // benchmark measures latency, not the limiter, and the open streams'
    // limit so that one person may hold the watch scenario's 10,000.
    let toml = format!(
        r#"listen = "127.0.0.1:{port}"
public_url = "https://127.0.0.1:{port}"
data_dir = "{d}/data"
protected_namespaces = ["kube-system"]

[tls]
cert_file = "{d}/portcullis.crt"
key_file = "{d}/portcullis.key"

[limits]
streams_per_caller = 20000

[mcp]
requests_per_minute = 100000000
burst = 1000000

[[clusters]]
name = "sim"
server = "{server}"
ca_file = "{d}/cluster-ca.pem"
token_file = "{d}/cluster-token"
{real_cluster}"#,
        server = sim["url"].as_str().unwrap_or_default(),
        real_cluster = real.as_ref().map(|real| real_cluster(real, &dir)).unwrap_or_default(),
    );
    let path = dir.join("portcullis.toml");
    std::fs::write(&path, toml)?;
    let config = Config::load(&path, std::iter::empty())?;
    let (person_token, agent_token) = principals(&config, real.is_some())?;
    let stack = serde_json::json!({
        "url": format!("https://127.0.0.1:{port}"),
        "cluster_path": "/clusters/sim",
        "real_cluster_path": real.is_some().then_some("/clusters/real"),
        "ca_file": dir.join("portcullis-ca.pem"),
        "config": path,
        "person_token": person_token,
        "agent_token": agent_token,
    });
    std::fs::write(dir.join("stack.json"), serde_json::to_string_pretty(&stack)?)?;
    Ok(())
}

/// The real control plane's `[[clusters]]` entry, its files in `dir`.
fn real_cluster(real: &serde_json::Value, dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"
# portcullis's own ServiceAccount token, holding exactly deploy/rbac.yaml.
[[clusters]]
name = "real"
server = "{server}"
ca_file = "{d}/real-cluster-ca.pem"
token_file = "{d}/real-cluster-token"
"#,
        server = real["url"].as_str().unwrap_or_default(),
    )
}

/// Person `bench`, admin of namespace `bench` on both clusters (or the
/// simulated one alone, without `real`) for a day (admin reveals Secret
/// values), and agent `bench-agent` acting for it with the simulated
/// cluster's grant.
fn principals(config: &Config, real: bool) -> anyhow::Result<(String, String)> {
    let store = portcullis::cli::open_store(config)?;
    let person = Principal::person("bench");
    store.add_principal(&person, false)?;
    let grant_on = |cluster: &str, role: &str, namespace: &str| {
        portcullis::cli::new_grant(
            config,
            person.clone(),
            cluster,
            role,
            Some(namespace.into()),
            Duration::from_secs(24 * 3600),
            "bench",
        )
    };
    let grant = grant_on("sim", "admin", super::objects::NAMESPACE)?;
    store.add_grant(&grant)?;
    store.add_grant(&grant_on("sim", "viewer", super::objects::WATCH_NAMESPACE)?)?;
    if real {
        // Reconciled onto the real cluster by portcullis as its ServiceAccount.
        store.add_grant(&grant_on("real", "admin", super::objects::NAMESPACE)?)?;
    }
    let (_, person_token) = store.issue_credential(&person, "bench", None)?;
    let agent = store.add_agent(&person, "bench-agent", std::slice::from_ref(&grant.id), false)?;
    let (_, agent_token) = store.issue_agent_credential(&agent, None)?;
    Ok((person_token, agent_token))
}

/// A port free now on 127.0.0.1 (portcullis binds it a moment later).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
