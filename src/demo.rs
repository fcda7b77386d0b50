//! `portcullis demo`: the simulated cluster with portcullis in front of it,
//! a person and a bot with their own credentials and grants, an AI agent
//! acting for the person (MCP at `/mcp`), and the files to use them, in one
//! directory.
//!
//! The reconciler writes the roles' ClusterRoles and the grants' bindings
//! into the simulated cluster, as it would into a real one; the demo waits
//! for its first pass before handing out kubeconfigs.

use crate::app::App;
use crate::cli::{new_grant, open_store, CliError};
use crate::config::{ClusterConfig, Config, Limits, TlsConfig};
use crate::identity::Principal;
use portcullis_sim::{Sim, SimConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The demo's cluster name.
pub const CLUSTER: &str = "sim";

/// Run the demo until Ctrl-C.
pub async fn run(dir: &Path, listen: &str) -> Result<(), CliError> {
    let io = |what: &str, e: std::io::Error| CliError::Message(format!("{what}: {e}"));
    let _ = std::fs::remove_dir_all(dir.join("data"));
    std::fs::create_dir_all(dir).map_err(|e| io("cannot create the demo directory", e))?;
    let dir = dir.canonicalize().map_err(|e| io("demo directory", e))?;

    let sim = Sim::start(SimConfig::new())
        .await
        .map_err(|e| io("cannot start the simulated cluster", e))?;
    write(&dir.join("cluster-ca.pem"), sim.ca_pem())?;
    write(&dir.join("cluster-token"), sim.portcullis_token())?;
    let tls = crate::tls::generate(&["localhost"]).map_err(|e| CliError::Message(format!("TLS: {e}")))?;
    write(&dir.join("portcullis-ca.pem"), &tls.ca_pem)?;
    write(&dir.join("portcullis.crt"), &tls.cert_pem)?;
    write(&dir.join("portcullis.key"), &tls.key_pem)?;
    // Seals held writes' bodies and signs the approval pages' cookies.
    write(&dir.join("approvals.key"), &crate::config::approvals::generate_key())?;

    let mut config = Config {
        listen: listen.to_string(),
        public_url: format!("https://{listen}"),
        tls: TlsConfig {
            cert_file: dir.join("portcullis.crt"),
            key_file: dir.join("portcullis.key"),
        },
        data_dir: dir.join("data"),
        trusted_proxies: Vec::new(),
        protected_namespaces: vec!["kube-system".into()],
        limits: Limits::default(),
        clusters: vec![ClusterConfig {
            name: CLUSTER.into(),
            server: sim.url(),
            ca_file: dir.join("cluster-ca.pem"),
            token_file: dir.join("cluster-token"),
        }],
        roles: Vec::new(),
        audit: Default::default(),
        mcp: Default::default(),
        reconcile: Default::default(),
        access: Default::default(),
        approvals: crate::config::approvals::ApprovalsConfig {
            key_file: Some(dir.join("approvals.key")),
            ..Default::default()
        },
    };
    let store = open_store(&config)?;
    let app = App::build(&config, store.clone())
        .await
        .map_err(|e| CliError::Message(e.to_string()))?;
    // With port 0 the address is known only now: write what is really served.
    config.listen = app.local_addr().to_string();
    config.public_url = format!("https://{}", app.local_addr());
    let toml = toml::to_string(&config).map_err(|e| CliError::Message(e.to_string()))?;
    write(&dir.join("portcullis.toml"), &toml)?;
    let url = format!("{}/clusters/{CLUSTER}", config.public_url);
    let week = Duration::from_secs(7 * 24 * 3600);
    let ana = Principal::person("ana");
    store.add_principal(&ana, false)?;
    let ana_grant = new_grant(
        &config,
        ana.clone(),
        CLUSTER,
        "admin",
        Some("shop".into()),
        week,
        "demo",
    )?;
    store.add_grant(&ana_grant)?;
    let (_, ana_token) = store.issue_credential(&ana, "demo", None)?;
    let bot = Principal::bot("deployer");
    store.add_principal(&bot, false)?;
    let bot_grant = new_grant(
        &config,
        bot.clone(),
        CLUSTER,
        "developer",
        Some("payments".into()),
        week,
        "demo",
    )?;
    store.add_grant(&bot_grant)?;
    let (_, bot_token) = store.issue_credential(&bot, "demo", None)?;
    // An agent delegated by ana with her grant: it sees the Secrets of shop
    // redacted, through MCP and on the raw path alike, where ana sees values;
    // its writes wait for ana's approval.
    let agent = store.add_agent(&ana, "assistant", std::slice::from_ref(&ana_grant.id), true)?;
    let (_, agent_token) = store.issue_agent_credential(&agent, None)?;
    let pass = app
        .reconciler()
        .pass_now(CLUSTER)
        .await
        .map_err(|e| CliError::Message(e.to_string()))?;
    if !pass.outcome.ok() {
        return Err(CliError::Message(format!(
            "the simulated cluster's RBAC: {}",
            pass.outcome.errors.join("; ")
        )));
    }

    write(
        &dir.join("person.kubeconfig"),
        &kubeconfig(&url, &tls.ca_pem, "ana", &ana_token, "shop"),
    )?;
    write(
        &dir.join("bot.kubeconfig"),
        &kubeconfig(&url, &tls.ca_pem, "deployer", &bot_token, "payments"),
    )?;
    write(&dir.join("admin.kubeconfig"), &sim.kubeconfig(sim.admin_token()))?;
    write(
        &dir.join("agent.kubeconfig"),
        &kubeconfig(&url, &tls.ca_pem, "assistant", &agent_token, "shop"),
    )?;
    write(&dir.join("agent.token"), &format!("{agent_token}\n"))?;
    write(&dir.join("mcp.json"), &mcp_json(&config.public_url, &agent_token))?;
    print_usage(&dir, &url);

    app.run(crate::app::shutdown_signal()).await;
    sim.shutdown().await;
    Ok(())
}

/// A kubeconfig for a portcullis user: context `portcullis-<cluster>`, the CA
/// embedded.
pub fn kubeconfig(url: &str, ca_pem: &str, user: &str, token: &str, namespace: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let context = format!("portcullis-{CLUSTER}");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {context}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {user}\n    namespace: {namespace}\ncurrent-context: {context}\n"
    )
}

/// An MCP client configuration (the `mcpServers` shape most clients read):
/// portcullis's `/mcp` with the agent's bearer token.
pub fn mcp_json(public_url: &str, token: &str) -> String {
    let config = serde_json::json!({
        "mcpServers": {
            "portcullis": {
                "type": "http",
                "url": format!("{}/mcp", public_url.trim_end_matches('/')),
                "headers": {"Authorization": format!("Bearer {token}")},
            }
        }
    });
    serde_json::to_string_pretty(&config).unwrap_or_default() + "\n"
}

fn write(path: &PathBuf, contents: &str) -> Result<(), CliError> {
    std::fs::write(path, contents).map_err(|e| CliError::Message(format!("cannot write {}: {e}", path.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
    Ok(())
}

fn print_usage(dir: &Path, url: &str) {
    let d = dir.display();
    let url_base = url.split("/clusters/").next().unwrap_or(url);
    println!(
        "portcullis demo is running: {url} in front of a simulated cluster.

  person ana (admin of namespace shop):
    kubectl --kubeconfig {d}/person.kubeconfig get pods
    kubectl --kubeconfig {d}/person.kubeconfig get secrets -o yaml
    kubectl --kubeconfig {d}/person.kubeconfig auth whoami
  bot deployer (developer in namespace payments):
    kubectl --kubeconfig {d}/bot.kubeconfig get deployments
    kubectl --kubeconfig {d}/bot.kubeconfig get pods -n shop      # the cluster's own 403
  agent assistant, acting for ana with her grant (Secret values hidden; its writes need ana's approval):
    MCP: {url_base}/mcp with the header in {d}/mcp.json (token in {d}/agent.token;
         trust {d}/portcullis-ca.pem, e.g. SSL_CERT_FILE or NODE_EXTRA_CA_CERTS)
    kubectl --kubeconfig {d}/agent.kubeconfig get secret db-credentials -o yaml
    kubectl --kubeconfig {d}/agent.kubeconfig create configmap demo   # held: the answer gives the approval link
  ana approves the agent's writes:
    open {url_base}/approvals and sign in with ana's token (the `token:` in {d}/person.kubeconfig);
    or: portcullis --config {d}/portcullis.toml approvals list / approvals approve ID --by ana
  straight to the simulated cluster, for comparison:
    kubectl --kubeconfig {d}/admin.kubeconfig get pods -A
  administration, against the running demo:
    portcullis --config {d}/portcullis.toml grant list

Ctrl-C stops everything."
    );
}
