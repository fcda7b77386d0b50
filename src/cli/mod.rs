//! The `portcullis` command line: serve, demo; the person commands
//! (`whoami`, `access`, `approvals`, `credential list|revoke`), run on a
//! person's own machine as that person through the server's person API
//! ([`person`], [`remote`]); and the operator commands (`admin …`,
//! [`admin`]), run on the server, that work on the store named by the
//! configuration.
//!
//! One file per noun beside this one (`access`, `approvals`, `audit`,
//! `cluster`, `grant`); the operator's principal, credential and agent
//! commands are here.
//! The CLI sits on top: it calls the domain modules, and nothing below
//! imports it.

pub mod access;
pub mod admin;
pub mod apiserver_audit;
pub mod approvals;
pub mod audit;
pub mod bot_trust;
pub mod ci_login;
pub mod cluster;
pub mod grant;
pub mod group_rule;
pub mod kubeconfig;
pub mod login;
pub mod person;
pub mod plugin;
pub mod remote;
pub mod store;

use crate::audit::row::AuditRow;
use crate::config::Config;
use crate::identity::{Principal, PrincipalKind};
use crate::store::Store;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Grants are checked where identities live; the demo, the examples and
/// the tests issue them as the `grant add` command does.
pub use crate::identity::grant::new_grant;

/// portcullis: an authenticating, impersonating reverse proxy for the
/// Kubernetes API.
#[derive(Debug, Parser)]
#[command(name = "portcullis", version)]
pub struct Cli {
    /// Configuration file.
    #[arg(long, global = true, env = "PORTCULLIS_CONFIG", default_value = "portcullis.toml")]
    pub config: PathBuf,
    /// Where the person commands find the server.
    #[command(flatten)]
    pub remote: remote::RemoteArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy.
    Serve,
    /// Generate a CA and a serving certificate for portcullis (for a first
    /// installation or a lab; production usually brings its own, e.g. from
    /// cert-manager). Never overwrites existing files.
    Certs {
        /// Where to write `ca.pem`, `tls.crt` and `tls.key`.
        #[arg(long, default_value = "certs")]
        out: PathBuf,
        /// DNS names (or IP addresses) the certificate is for, besides
        /// localhost and 127.0.0.1.
        #[arg(long = "name")]
        names: Vec<String>,
    },
    /// Run portcullis in front of a simulated cluster, with credentials and
    /// kubeconfigs written to a directory.
    #[cfg(feature = "demo")]
    Demo {
        /// Where to write the demo's files.
        #[arg(long, default_value = "portcullis-demo")]
        dir: PathBuf,
        /// Address portcullis listens on.
        #[arg(long, default_value = "127.0.0.1:8443")]
        listen: String,
    },
    /// Operator commands, run on the server: they open the store directly
    /// (the first admin, people, bots, credentials handed over, grants,
    /// agents, the audit, the clusters' status).
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// Sign in to a portcullis server through your browser; the credential
    /// (12 h at most, never beyond your web sign-in) is kept in your config
    /// directory, readable by you only.
    Login {
        /// The server, e.g. `https://portcullis.example.com`.
        url: String,
        /// No browser here: sign in on another device with a code (the
        /// device authorization grant, RFC 8628).
        #[arg(long)]
        no_browser: bool,
    },
    /// Revoke your command line credential at the server and forget it.
    Logout,
    /// Who you are signed in as, and your grants.
    Whoami,
    /// Ask for access, list your requests, approve or deny them as yourself.
    #[command(subcommand)]
    Access(access::AccessCommand),
    /// Held writes waiting on you: list, show, approve, deny as yourself.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Your own credentials: list, revoke.
    #[command(subcommand)]
    Credential(person::CredentialCommand),
    /// Add a context `portcullis-<cluster>` for each cluster you have a
    /// grant on to your kubeconfig (`$KUBECONFIG`'s first file, else
    /// `~/.kube/config`), leaving its other entries as they are.
    Kubeconfig,
    /// kubectl's exec credential plugin: prints your signed-in credential
    /// as an `ExecCredential` (the kubeconfig runs it; not for people).
    CredentialPlugin,
    /// Admins: rules giving people in an identity provider's group a role
    /// while signed in: add, list, remove, as yourself.
    #[command(subcommand)]
    GroupRule(group_rule::GroupRuleCommand),
    /// Admins: bots' trust rules for CI jobs' tokens, as yourself.
    #[command(subcommand)]
    Bot(bot_trust::BotCommand),
    /// In a CI job: exchange the job's OpenID Connect token (from
    /// `--token-file` or `--token-env`) for a short-lived credential of the
    /// bot that trusts it, and write a kubeconfig with a context
    /// `portcullis-<cluster>` per cluster (`--server` names portcullis).
    CiLogin {
        /// A file holding the job's token.
        #[arg(long, conflicts_with = "token_env", required_unless_present = "token_env")]
        token_file: Option<PathBuf>,
        /// A variable holding the job's token.
        #[arg(long)]
        token_env: Option<String>,
        /// A cluster to write a context for (repeat it); default: every
        /// cluster the bot holds a grant on.
        #[arg(long = "cluster")]
        clusters: Vec<String>,
        /// The kubeconfig to write (default: `$KUBECONFIG`'s first file,
        /// else `~/.kube/config`).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
}

/// `person …` / `bot …`.
#[derive(Debug, Subcommand)]
pub enum PrincipalCommand {
    /// Add one.
    Add {
        /// Login or bot name.
        name: String,
        /// Bots only: writes wait for a person's approval.
        #[arg(long)]
        writes_need_approval: bool,
        /// People only: may read everyone's audit (`GET /audit`).
        #[arg(long)]
        admin: bool,
    },
    /// List them.
    List,
    /// Disable one: its credentials stop working at once.
    Disable {
        /// Login or bot name.
        name: String,
    },
}

/// Whose credential or grant.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Owner {
    /// A person's login.
    #[arg(long)]
    pub person: Option<String>,
    /// A bot's name.
    #[arg(long)]
    pub bot: Option<String>,
}

impl Owner {
    fn principal(&self) -> Principal {
        match (&self.person, &self.bot) {
            (Some(login), _) => Principal::person(login),
            (None, Some(bot)) => Principal::bot(bot),
            (None, None) => unreachable!("clap requires one of --person or --bot"),
        }
    }
}

/// `credential …`.
#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Issue a credential; the token is printed once.
    Issue {
        /// Whose.
        #[command(flatten)]
        owner: Owner,
        /// A label, e.g. `laptop`.
        #[arg(long, default_value = "default")]
        name: String,
        /// Lifetime, e.g. `30d`, `12h`.
        #[arg(long, default_value = "90d")]
        expires_in: humantime::Duration,
    },
    /// List credentials (never their tokens).
    List,
    /// Revoke a credential at once.
    Revoke {
        /// Credential id.
        id: String,
    },
}

/// `agent …`.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Add an agent acting for a person (with `--grant`s of that person's,
    /// never more) or for a bot; its token is printed once.
    Add {
        /// The agent's name, e.g. `claude`.
        name: String,
        /// Whose agent.
        #[command(flatten)]
        owner: Owner,
        /// A grant id of the person's the agent may use (repeat it).
        #[arg(long = "grant")]
        grants: Vec<String>,
        /// Its writes wait for a person's approval.
        #[arg(long)]
        writes_need_approval: bool,
        /// Lifetime of its credential, e.g. `30d`.
        #[arg(long, default_value = "30d")]
        expires_in: humantime::Duration,
    },
    /// List agents.
    List,
    /// Disable an agent: its credentials stop working at once.
    Disable {
        /// Agent id.
        id: String,
    },
}

/// A CLI failure: printed as a plain message.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Configuration refused.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Store failure.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A grant refused as asked.
    #[error(transparent)]
    Grant(#[from] crate::identity::grant::GrantError),
    /// The audit could not record a change (nothing was changed, or the
    /// change is on record as of unknown outcome).
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// Anything else, already worded for the user.
    #[error("{0}")]
    Message(String),
    /// The server refused a request with this HTTP status, saying why.
    #[error("{message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Why, as the server said (or its status).
        message: String,
    },
}

/// An operator's change on the store (`portcullis admin …`), on record as
/// every change of who may do what is: `row` (as `operator`/`cli`, see
/// [`operator_row`]) is committed before `change` runs, and settled after
/// it (`crate::audit::Recorded`); `settle` fills in what only the change
/// knows (a new credential's id).
pub(crate) fn recorded<T>(
    store: &Store,
    row: AuditRow,
    change: impl FnOnce() -> Result<T, crate::store::StoreError>,
    settle: impl FnOnce(&T, &mut AuditRow),
) -> Result<T, CliError> {
    let recorded = crate::audit::begin_event(store, row.clone())?;
    match change() {
        Ok(made) => {
            let mut row = row;
            settle(&made, &mut row);
            recorded.done(row, Vec::new())?;
            Ok(made)
        }
        Err(error) => Err(recorded.store_failed(error).into()),
    }
}

/// The row of an operator's change: `verb` on `resource` `name`.
pub(crate) fn operator_row(verb: &str, resource: &str, cluster: &str, namespace: Option<&str>, name: &str) -> AuditRow {
    let actor = crate::signin::groups::Actor::Operator;
    crate::signin::groups::event(verb, resource, &actor, cluster, namespace, name)
}

/// `portcullis certs`: a fresh CA and a serving certificate it signed.
pub fn generate_certs(out: &std::path::Path, names: &[String]) -> Result<(), CliError> {
    let files = ["ca.pem", "tls.crt", "tls.key"].map(|f| out.join(f));
    if let Some(existing) = files.iter().find(|f| f.exists()) {
        return Err(CliError::Message(format!(
            "{} exists; not overwriting it",
            existing.display()
        )));
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let tls =
        crate::tls::generate(&names).map_err(|e| CliError::Message(format!("cannot generate certificates: {e}")))?;
    std::fs::create_dir_all(out).map_err(|e| CliError::Message(format!("cannot create {}: {e}", out.display())))?;
    let cannot =
        |path: &std::path::Path, e: std::io::Error| CliError::Message(format!("cannot write {}: {e}", path.display()));
    for (path, pem) in files[..2].iter().zip([&tls.ca_pem, &tls.cert_pem]) {
        std::fs::write(path, pem).map_err(|e| cannot(path, e))?;
    }
    write_private(&files[2], &tls.key_pem).map_err(|e| cannot(&files[2], e))?;
    println!(
        "wrote {} (give it to clients), {} and {} (point [tls] at them)",
        files[0].display(),
        files[1].display(),
        files[2].display()
    );
    Ok(())
}

/// Write `contents` (a key, a token, a kubeconfig holding one) to `path`,
/// readable by its owner alone from the first byte: written and then
/// narrowed, it would be readable by all for a moment (and for good, if
/// narrowing failed).
pub(crate) fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    // A file that was there already keeps its mode through open.
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(contents.as_bytes())
}

/// Open the store of `config`: its PostgreSQL database when `[store] url`
/// is set, else the embedded SQLite file in `data_dir`.
pub fn open_store(config: &Config) -> Result<Store, CliError> {
    if let Some(pg) = config.store.postgres().map_err(CliError::Message)? {
        return Store::connect_with_ca(pg, config.store.ca_file.as_deref())
            .map_err(|e| CliError::Message(format!("cannot open the store ({}): {e}", config.store.describe())));
    }
    std::fs::create_dir_all(&config.data_dir).map_err(|e| {
        CliError::Message(format!(
            "cannot create data directory {}: {e}",
            config.data_dir.display()
        ))
    })?;
    Ok(Store::open(&config.data_dir.join("portcullis.db"))?)
}

/// Run an administration command, printing to stdout.
pub fn admin(config: &Config, command: Command) -> Result<(), CliError> {
    let store = open_store(config)?;
    match command {
        Command::Admin(c) => admin::run(config, &store, c),
        Command::Serve
        | Command::GroupRule(_)
        | Command::Bot(_)
        | Command::CiLogin { .. }
        | Command::Certs { .. }
        | Command::Whoami
        | Command::Access(_)
        | Command::Approvals(_)
        | Command::Credential(_)
        | Command::Kubeconfig
        | Command::CredentialPlugin
        | Command::Login { .. }
        | Command::Logout => Err(CliError::Message("not an administration command".into())),
        #[cfg(feature = "demo")]
        Command::Demo { .. } => Err(CliError::Message("not an administration command".into())),
    }
}

pub(crate) fn principal_command(store: &Store, kind: PrincipalKind, command: PrincipalCommand) -> Result<(), CliError> {
    let make = |name: String| Principal { kind, name };
    match command {
        PrincipalCommand::Add {
            name,
            writes_need_approval,
            admin,
        } => {
            if admin && kind != PrincipalKind::Person {
                return Err(CliError::Message("only people can be admins".into()));
            }
            // Accepted, it would be listed as held and hold nothing: a
            // person's own writes are theirs to make (their agents' are
            // held with `admin agent add --writes-need-approval`).
            if writes_need_approval && kind == PrincipalKind::Person {
                return Err(CliError::Message(
                    "only bots' writes wait for approval (a person's agents' can: admin agent add --writes-need-approval)"
                        .into(),
                ));
            }
            let principal = make(name.clone());
            let mut row = operator_row("create", principals(kind), "", None, &name);
            row.query = format!("admin={admin}&writes_need_approval={writes_need_approval}");
            let add = || {
                store.add_principal(&principal, writes_need_approval)?;
                if admin {
                    store.set_admin(&principal, true)?;
                }
                Ok(())
            };
            recorded(store, row, add, |_, _| {})?;
            println!("added {} {name}{}", kind.as_str(), if admin { " (admin)" } else { "" });
        }
        PrincipalCommand::List => {
            println!(
                "{:<24} {:<9} {:<15} {:<6} CREATED",
                "NAME", "DISABLED", "WRITES-HELD", "ADMIN"
            );
            for p in store.list_principals(kind)? {
                let (name, created) = (&p.principal.name, when(&p.created_at));
                println!(
                    "{name:<24} {:<9} {:<15} {:<6} {created}",
                    p.disabled, p.writes_need_approval, p.admin
                );
            }
        }
        PrincipalCommand::Disable { name } => {
            let row = operator_row("disable", principals(kind), "", None, &name);
            recorded(store, row, || store.disable_principal(&make(name.clone())), |_, _| {})?;
            println!(
                "disabled {} {name}: its credentials stop working within seconds",
                kind.as_str()
            );
        }
    }
    Ok(())
}

pub(crate) fn credential_command(store: &Store, command: CredentialCommand) -> Result<(), CliError> {
    match command {
        CredentialCommand::Issue {
            owner,
            name,
            expires_in,
        } => issue_credential(store, &owner.principal(), &name, *expires_in),
        CredentialCommand::List => list_credentials(store),
        CredentialCommand::Revoke { id } => {
            let row = operator_row("revoke", "credentials", "", None, &id);
            recorded(store, row, || store.revoke_credential(&id), |_, _| {})?;
            println!("revoked credential {id}: refused at once by this process, within seconds by running servers");
            Ok(())
        }
    }
}

/// Now plus `duration`, or a plain message when it is past the last date
/// there is (`--expires-in 1000000y`).
fn after_now(duration: std::time::Duration) -> Result<chrono::DateTime<Utc>, CliError> {
    chrono::TimeDelta::from_std(duration)
        .ok()
        .and_then(|delta| crate::identity::grant::within_dates(Utc::now().checked_add_signed(delta)))
        .ok_or_else(|| CliError::Message("the duration is too long: it ends past the last date there is".into()))
}

/// Issue a credential; the token goes to stdout alone, so that it can be
/// piped, and only this once.
fn issue_credential(
    store: &Store,
    owner: &Principal,
    name: &str,
    expires_in: std::time::Duration,
) -> Result<(), CliError> {
    let expires = after_now(expires_in)?;
    let mut row = operator_row("create", "credentials", "", None, "");
    row.query = owner_query(owner);
    let issue = || store.issue_credential(owner, name, Some(expires));
    let (cred, token) = recorded(store, row, issue, |(cred, _), row| row.name = cred.id.clone())?;
    eprintln!(
        "credential {} for {} expires {}; the token is shown only now:",
        cred.id,
        cred.principal,
        when(&expires)
    );
    println!("{token}");
    Ok(())
}

fn list_credentials(store: &Store) -> Result<(), CliError> {
    println!(
        "{:<38} {:<20} {:<12} {:<12} {:<20} {:<20} STATE",
        "ID", "OWNER", "NAME", "PREFIX", "EXPIRES", "LAST USED"
    );
    for c in store.list_credentials(None)? {
        let state = if c.revoked_at.is_some() {
            "revoked"
        } else if c.expires_at.is_some_and(|e| e <= Utc::now()) {
            "expired"
        } else {
            "active"
        };
        let expires = c.expires_at.as_ref().map_or("never".into(), when);
        let used = c.last_used_at.as_ref().map_or("never".into(), when);
        println!(
            "{:<38} {:<20} {:<12} {:<12} {:<20} {:<20} {state}",
            c.id,
            c.principal.to_string(),
            c.name,
            c.display_prefix,
            expires,
            used
        );
    }
    Ok(())
}

pub(crate) fn agent_command(store: &Store, command: AgentCommand) -> Result<(), CliError> {
    match command {
        AgentCommand::Add {
            name,
            owner,
            grants,
            writes_need_approval,
            expires_in,
        } => {
            let expires = after_now(*expires_in)?;
            let owner = owner.principal();
            let mut row = operator_row("create", "agents", "", None, "");
            row.query = owner_query(&owner);
            let add = || store.add_agent_with_credential(&owner, &name, &grants, writes_need_approval, Some(expires));
            let (agent, _, token) = recorded(store, row, add, |(agent, ..), row| row.name = agent.id.clone())?;
            eprintln!(
                "agent {} ({name}) acts for {}; its token is shown only now:",
                agent.id, agent.principal
            );
            println!("{token}");
        }
        AgentCommand::List => {
            println!(
                "{:<38} {:<16} {:<20} {:<15} {:<9} GRANTS",
                "ID", "NAME", "ACTS FOR", "WRITES-HELD", "DISABLED"
            );
            for a in store.list_agents()? {
                let grants = a
                    .grant_ids
                    .as_ref()
                    .map_or("all of the bot's".to_string(), |ids| ids.join(","));
                println!(
                    "{:<38} {:<16} {:<20} {:<15} {:<9} {grants}",
                    a.id,
                    a.name,
                    a.principal.to_string(),
                    a.writes_need_approval,
                    a.disabled
                );
            }
        }
        AgentCommand::Disable { id } => {
            let row = operator_row("disable", "agents", "", None, &id);
            recorded(store, row, || store.disable_agent(&id), |_, _| {})?;
            println!("disabled agent {id}: its credentials stop working within seconds");
        }
    }
    Ok(())
}

/// `owner=<principal>`, for the row of a credential or an agent made for
/// them.
fn owner_query(owner: &Principal) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("owner", &owner.to_string())
        .finish()
}

/// The resource the audit names principals of `kind` by.
fn principals(kind: PrincipalKind) -> &'static str {
    match kind {
        PrincipalKind::Person => "people",
        PrincipalKind::Bot => "bots",
    }
}

pub(crate) fn when(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    /// A key or token file is its owner's alone, new or written over one
    /// that others could read.
    #[cfg(unix)]
    #[test]
    fn a_private_file_is_readable_by_its_owner_alone_new_or_rewritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let new = dir.path().join("new.key");
        super::write_private(&new, "secret").unwrap();
        assert_eq!(
            (mode(&new), std::fs::read_to_string(&new).unwrap()),
            (0o600, "secret".into())
        );
        let old = dir.path().join("old.token");
        std::fs::write(&old, "a longer token than the new one").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::write_private(&old, "pcl_new").unwrap();
        assert_eq!(
            (mode(&old), std::fs::read_to_string(&old).unwrap()),
            (0o600, "pcl_new".into())
        );
    }
}
