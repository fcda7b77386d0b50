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
use crate::identity::{Grant, Principal};
use crate::store::Store;
use crate::tls::GeneratedTls;
use portcullis_sim::{Sim, SimConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The demo's cluster name.
pub const CLUSTER: &str = "sim";

/// Run the demo until Ctrl-C.
pub async fn run(dir: &Path, listen: &str) -> Result<(), CliError> {
    let dir = prepare_dir(dir)?;
    let sim = Sim::start(SimConfig::new())
        .await
        .map_err(|e| io_error("cannot start the simulated cluster", e))?;
    let tls = write_keys(&dir, &sim)?;
    let mut config = demo_config(&dir, listen, sim.url());
    let store = open_store(&config)?;
    let app = App::build(&config, store.clone()).await.map_err(message)?;
    // With port 0 the address is known only now: write what is really served.
    config.listen = app.local_addr().to_string();
    config.public_url = format!("https://{}", app.local_addr());
    let toml = toml::to_string(&config).map_err(message)?;
    write(&dir.join("portcullis.toml"), &toml)?;
    let tokens = enroll(&config, &store)?;
    first_pass(&app).await?;
    let url = format!("{}/clusters/{CLUSTER}", config.public_url);
    write_client_files(&dir, &url, &tls.ca_pem, &sim, &config.public_url, &tokens)?;
    print_usage(&dir, &url);

    app.run(crate::app::shutdown_signal()).await;
    sim.shutdown().await;
    Ok(())
}

/// The demo directory, made afresh: the previous run's store is removed.
fn prepare_dir(dir: &Path) -> Result<PathBuf, CliError> {
    let _ = std::fs::remove_dir_all(dir.join("data"));
    std::fs::create_dir_all(dir).map_err(|e| io_error("cannot create the demo directory", e))?;
    dir.canonicalize().map_err(|e| io_error("demo directory", e))
}

/// Write the cluster's CA and token, portcullis's own TLS files and the
/// approvals key; returns the generated TLS for the kubeconfigs.
fn write_keys(dir: &Path, sim: &Sim) -> Result<GeneratedTls, CliError> {
    write(&dir.join("cluster-ca.pem"), sim.ca_pem())?;
    write(&dir.join("cluster-token"), sim.portcullis_token())?;
    let tls = crate::tls::generate(&["localhost"]).map_err(|e| CliError::Message(format!("TLS: {e}")))?;
    write(&dir.join("portcullis-ca.pem"), &tls.ca_pem)?;
    write(&dir.join("portcullis.crt"), &tls.cert_pem)?;
    write(&dir.join("portcullis.key"), &tls.key_pem)?;
    // Seals held writes' bodies and signs the approval pages' cookies.
    write(&dir.join("approvals.key"), &crate::config::approvals::generate_key())?;
    Ok(tls)
}

/// The configuration of portcullis in front of the simulated cluster at
/// `server`, reading the files [`write_keys`] wrote.
fn demo_config(dir: &Path, listen: &str, server: String) -> Config {
    Config {
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
            server,
            ca_file: dir.join("cluster-ca.pem"),
            token_file: dir.join("cluster-token"),
            audit_webhook_token_file: None,
            audit_webhook_client_ca_file: None,
            service_account: None,
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
        // The demo has no identity provider: people sign in with a token.
        oidc: None,
        sessions: Default::default(),
        oauth: Default::default(),
        ci: Default::default(),
        store: Default::default(),
    }
}

/// The demo's users' tokens, shown only in the files written for them.
struct Tokens {
    ana: String,
    bot: String,
    agent: String,
}

/// Add the person ana, the bot deployer and ana's agent, each with a grant
/// and a credential.
fn enroll(config: &Config, store: &Store) -> Result<Tokens, CliError> {
    let ana = Principal::person("ana");
    let ana_grant = enroll_with_grant(config, store, &ana, "admin", "shop")?;
    let (_, ana_token) = store.issue_credential(&ana, "demo", None)?;
    let bot = Principal::bot("deployer");
    enroll_with_grant(config, store, &bot, "developer", "payments")?;
    let (_, bot_token) = store.issue_credential(&bot, "demo", None)?;
    // An agent delegated by ana with her grant: it sees the Secrets of shop
    // redacted, through MCP and on the raw path alike, where ana sees values;
    // its writes wait for ana's approval.
    let (_, _, agent_token) =
        store.add_agent_with_credential(&ana, "assistant", std::slice::from_ref(&ana_grant.id), true, None)?;
    Ok(Tokens {
        ana: ana_token,
        bot: bot_token,
        agent: agent_token,
    })
}

/// Add `who` with a week's grant of `role` in `namespace`.
fn enroll_with_grant(
    config: &Config,
    store: &Store,
    who: &Principal,
    role: &str,
    namespace: &str,
) -> Result<Grant, CliError> {
    store.add_principal(who, false)?;
    let week = Duration::from_secs(7 * 24 * 3600);
    let grant = new_grant(config, who.clone(), CLUSTER, role, Some(namespace.into()), week, "demo")?;
    store.add_grant(&grant)?;
    Ok(grant)
}

/// Bind the grants in the simulated cluster before any kubeconfig is handed
/// out, so the first command already works.
async fn first_pass(app: &App) -> Result<(), CliError> {
    let pass = app.reconciler().pass_now(CLUSTER).await.map_err(message)?;
    if !pass.outcome.ok() {
        return Err(CliError::Message(format!(
            "the simulated cluster's RBAC: {}",
            pass.outcome.errors.join("; ")
        )));
    }
    Ok(())
}

/// Write the kubeconfigs, the agent's token and the MCP client configuration.
fn write_client_files(
    dir: &Path,
    url: &str,
    ca_pem: &str,
    sim: &Sim,
    public_url: &str,
    tokens: &Tokens,
) -> Result<(), CliError> {
    write(
        &dir.join("person.kubeconfig"),
        &kubeconfig(url, ca_pem, "ana", &tokens.ana, "shop"),
    )?;
    write(
        &dir.join("bot.kubeconfig"),
        &kubeconfig(url, ca_pem, "deployer", &tokens.bot, "payments"),
    )?;
    write(&dir.join("admin.kubeconfig"), &sim.kubeconfig(sim.admin_token()))?;
    write(
        &dir.join("agent.kubeconfig"),
        &kubeconfig(url, ca_pem, "assistant", &tokens.agent, "shop"),
    )?;
    write(&dir.join("agent.token"), &format!("{}\n", tokens.agent))?;
    // ana's own commands (approvals, access) go to the server as her.
    write(&dir.join("person.token"), &format!("{}\n", tokens.ana))?;
    write(&dir.join("mcp.json"), &mcp_json(public_url, &tokens.agent))
}

fn io_error(what: &str, e: std::io::Error) -> CliError {
    CliError::Message(format!("{what}: {e}"))
}

fn message(e: impl std::fmt::Display) -> CliError {
    CliError::Message(e.to_string())
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

fn write(path: &Path, contents: &str) -> Result<(), CliError> {
    crate::cli::write_private(path, contents)
        .map_err(|e| CliError::Message(format!("cannot write {}: {e}", path.display())))
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
  your own agent, connected with OAuth (sign in with ana's token on the consent page, choose her grant):
    claude mcp add --transport http portcullis-demo {url_base}/mcp
    (then start `claude` with NODE_EXTRA_CA_CERTS={d}/portcullis-ca.pem and authenticate in /mcp)
  ana approves the agent's writes:
    open {url_base}/approvals and sign in with ana's token (the `token:` in {d}/person.kubeconfig);
    or, as ana, through the server's API with her credential:
      export PORTCULLIS_SERVER={url_base} PORTCULLIS_CA_FILE={d}/portcullis-ca.pem
      PORTCULLIS_TOKEN=$(cat {d}/person.token) portcullis approvals list    # then: approvals approve ID
  straight to the simulated cluster, for comparison:
    kubectl --kubeconfig {d}/admin.kubeconfig get pods -A
  operator commands, on the running demo's store:
    portcullis --config {d}/portcullis.toml admin grant list

Ctrl-C stops everything."
    );
}
