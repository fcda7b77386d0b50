//! `portcullis admin …`: the operator commands, run on the server with its
//! configuration, that open the store directly: bootstrap (the first admin,
//! people and bots before anyone signs in, a credential handed over), the
//! audit, the clusters' reconcile status. They act with the store's own
//! rights, so they decide nothing for a person: approving, deciding and
//! revoking one's own things go through the server as the person
//! (`crate::cli::person`).

use super::{agent_command, audit, cluster, credential_command, grant, principal_command, CliError};
use super::{AgentCommand, CredentialCommand, PrincipalCommand};
use crate::access;
use crate::config::Config;
use crate::identity::PrincipalKind;
use crate::store::Store;
use crate::text::escape_control as esc;
use clap::Subcommand;
use std::io::Write;

/// `admin …`.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Manage people.
    #[command(subcommand)]
    Person(PrincipalCommand),
    /// Manage bots (CI jobs, automation), and which CI jobs' tokens they
    /// trust (`admin bot trust`).
    #[command(subcommand)]
    Bot(super::bot_trust::AdminBotCommand),
    /// Issue, list and revoke anyone's credentials.
    #[command(subcommand)]
    Credential(CredentialCommand),
    /// Give, list and revoke grants.
    #[command(subcommand)]
    Grant(grant::GrantCommand),
    /// Add, list and disable AI agents.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Query the audit (`--json` for JSON lines), or `audit verify` its
    /// hash chain.
    Audit(audit::AuditCommand),
    /// Every access request, whoever asked (people decide them with
    /// `portcullis access approve|deny`).
    #[command(subcommand)]
    Access(AdminAccessCommand),
    /// The clusters' RBAC reconcile status.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Group rules, on the store as the operator (to bootstrap; admins use
    /// `portcullis group-rule` as themselves).
    #[command(subcommand)]
    GroupRule(super::group_rule::GroupRuleCommand),
    /// The database: `store migrate` copies the embedded SQLite store into
    /// PostgreSQL.
    #[command(subcommand)]
    Store(super::store::StoreCommand),
}

/// `admin access …`.
#[derive(Debug, Subcommand)]
pub enum AdminAccessCommand {
    /// List every access request.
    List,
}

/// Run an operator command on `store`, printing to stdout.
pub fn run(config: &Config, store: &Store, command: AdminCommand) -> Result<(), CliError> {
    let out = &mut std::io::stdout().lock();
    match command {
        AdminCommand::Person(c) => principal_command(store, PrincipalKind::Person, c),
        AdminCommand::Bot(super::bot_trust::AdminBotCommand::Principal(c)) => {
            principal_command(store, PrincipalKind::Bot, c)
        }
        AdminCommand::Bot(super::bot_trust::AdminBotCommand::Trust(c)) => {
            super::bot_trust::run_operator(config, store, c, out)
        }
        AdminCommand::Credential(c) => credential_command(store, c),
        AdminCommand::Grant(c) => grant::run(config, store, c),
        AdminCommand::Agent(c) => agent_command(store, c),
        AdminCommand::Audit(c) => audit::run(config, store, c, out),
        AdminCommand::Access(AdminAccessCommand::List) => list_access(store, out),
        AdminCommand::Cluster(c) => cluster::run(config, store, c, out),
        AdminCommand::GroupRule(c) => super::group_rule::run_operator(config, store, c, out),
        AdminCommand::Store(c) => super::store::run(config, store, c, out),
    }
}

fn list_access(store: &Store, out: &mut dyn Write) -> Result<(), CliError> {
    let io = |e: std::io::Error| CliError::Message(e.to_string());
    writeln!(
        out,
        "{:<38} {:<20} {:<10} {:<12} {:<16} {:<14} {:<12} REASON",
        "ID", "REQUESTER", "STATE", "CLUSTER", "NAMESPACE", "ROLE", "DECIDED BY"
    )
    .map_err(io)?;
    let requests = access::list(store).map_err(|e| CliError::Message(e.to_string()))?;
    for r in requests {
        writeln!(
            out,
            "{:<38} {:<20} {:<10} {:<12} {:<16} {:<14} {:<12} {}",
            r.id,
            esc(&r.requester.to_string()),
            r.state.as_str(),
            esc(&r.cluster),
            esc(r.namespace.as_deref().unwrap_or("*")),
            esc(&r.role),
            esc(r.decided_by.as_deref().unwrap_or("-")),
            esc(&r.reason)
        )
        .map_err(io)?;
    }
    Ok(())
}
