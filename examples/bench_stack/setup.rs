//! `setup DIR`: portcullis's configuration and store in front of the running
//! simulated cluster, with a person whose role reveals Secret values and an
//! agent acting for it (whose responses are redacted).

use portcullis::config::Config;
use portcullis::identity::Principal;
use std::path::Path;
use std::time::Duration;

/// Write `portcullis.toml`, its TLS files and store, and `stack.json`.
pub async fn run(dir: &Path) -> anyhow::Result<()> {
    let dir = dir.canonicalize()?;
    let sim: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("sim.json"))?)?;
    let tls = portcullis::tls::generate(&["localhost"])?;
    std::fs::write(dir.join("portcullis-ca.pem"), &tls.ca_pem)?;
    std::fs::write(dir.join("portcullis.crt"), &tls.cert_pem)?;
    std::fs::write(dir.join("portcullis.key"), &tls.key_pem)?;
    let port = free_port()?;
    let d = dir.display();
    // As an operator writes it; the MCP rate limit is lifted so that the
    // benchmark measures latency, not the limiter.
    let toml = format!(
        r#"listen = "127.0.0.1:{port}"
public_url = "https://127.0.0.1:{port}"
data_dir = "{d}/data"
protected_namespaces = ["kube-system"]

[tls]
cert_file = "{d}/portcullis.crt"
key_file = "{d}/portcullis.key"

[mcp]
requests_per_minute = 100000000
burst = 1000000

[[clusters]]
name = "sim"
server = "{server}"
ca_file = "{d}/cluster-ca.pem"
token_file = "{d}/cluster-token"
"#,
        server = sim["url"].as_str().unwrap_or_default(),
    );
    let path = dir.join("portcullis.toml");
    std::fs::write(&path, toml)?;
    let config = Config::load(&path, std::iter::empty())?;
    let (person_token, agent_token) = principals(&config)?;
    let stack = serde_json::json!({
        "url": format!("https://127.0.0.1:{port}"),
        "cluster_path": "/clusters/sim",
        "ca_file": dir.join("portcullis-ca.pem"),
        "config": path,
        "person_token": person_token,
        "agent_token": agent_token,
    });
    std::fs::write(dir.join("stack.json"), serde_json::to_string_pretty(&stack)?)?;
    Ok(())
}

/// Person `bench`, admin of namespace `bench` for a day (admin reveals
/// Secret values), and agent `bench-agent` acting for it with that grant.
fn principals(config: &Config) -> anyhow::Result<(String, String)> {
    let store = portcullis::cli::open_store(config)?;
    let person = Principal::person("bench");
    store.add_principal(&person, false)?;
    let grant = portcullis::cli::new_grant(
        config,
        person.clone(),
        "sim",
        "admin",
        Some(super::objects::NAMESPACE.into()),
        Duration::from_secs(24 * 3600),
        "bench",
    )?;
    store.add_grant(&grant)?;
    let watch_grant = portcullis::cli::new_grant(
        config,
        person.clone(),
        "sim",
        "viewer",
        Some(super::objects::WATCH_NAMESPACE.into()),
        Duration::from_secs(24 * 3600),
        "bench",
    )?;
    store.add_grant(&watch_grant)?;
    let (_, person_token) = store.issue_credential(&person, "bench", None)?;
    let agent = store.add_agent(&person, "bench-agent", std::slice::from_ref(&grant.id), false)?;
    let (_, agent_token) = store.issue_agent_credential(&agent, None)?;
    Ok((person_token, agent_token))
}

/// A port free now on 127.0.0.1 (portcullis binds it a moment later).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
