//! `portcullis access request|list|approve|deny`.

use super::CliError;
use crate::access::{self, AccessAsk, AccessError, AccessRequest, Requester};
use crate::config::Config;
use crate::identity::Principal;
use crate::store::Store;
use crate::text::escape_control as esc;
use clap::{Args, Subcommand};
use std::io::Write;

/// `access …`.
#[derive(Debug, Subcommand)]
pub enum AccessCommand {
    /// Ask for a role on a cluster for a while, with a reason; a person who
    /// may decide approves or denies it.
    Request {
        /// Who asks.
        #[command(flatten)]
        requester: RequesterArgs,
        /// Cluster name.
        #[arg(long)]
        cluster: String,
        /// Role name.
        #[arg(long)]
        role: String,
        /// Namespace; omit for the whole cluster.
        #[arg(long)]
        namespace: Option<String>,
        /// How long the grant would last, e.g. `2h`.
        #[arg(long)]
        duration: humantime::Duration,
        /// Why (shown to whoever decides).
        #[arg(long)]
        reason: String,
    },
    /// List access requests.
    List,
    /// Approve a request: its grant is made and bound.
    Approve {
        /// Request id.
        id: String,
        /// The deciding person's login.
        #[arg(long)]
        by: String,
    },
    /// Deny a request.
    Deny {
        /// Request id.
        id: String,
        /// The deciding person's login.
        #[arg(long)]
        by: String,
        /// Why (recorded).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Who asks: a person, a bot, or an agent (by id, for its person or bot).
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct RequesterArgs {
    /// A person's login.
    #[arg(long)]
    pub person: Option<String>,
    /// A bot's name.
    #[arg(long)]
    pub bot: Option<String>,
    /// An agent's id.
    #[arg(long)]
    pub agent: Option<String>,
}

impl RequesterArgs {
    fn requester(&self, store: &Store) -> Result<Requester, CliError> {
        match (&self.person, &self.bot, &self.agent) {
            (Some(login), _, _) => Ok(Requester {
                principal: Principal::person(login),
                agent_id: None,
            }),
            (None, Some(bot), _) => Ok(Requester {
                principal: Principal::bot(bot),
                agent_id: None,
            }),
            (None, None, Some(id)) => {
                let agent = store.list_agents()?.into_iter().find(|a| &a.id == id);
                let agent = agent.ok_or_else(|| CliError::Message(format!("agent {id} does not exist")))?;
                Ok(Requester {
                    principal: agent.principal,
                    agent_id: Some(agent.id),
                })
            }
            (None, None, None) => Err(CliError::Message("say who asks: --person, --bot or --agent".into())),
        }
    }
}

/// Run an `access` command.
pub fn run(config: &Config, store: &Store, command: AccessCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        AccessCommand::Request {
            requester,
            cluster,
            role,
            namespace,
            duration,
            reason,
        } => {
            let requester = requester.requester(store)?;
            let ask = AccessAsk {
                cluster,
                role,
                namespace,
                duration: *duration,
                reason,
            };
            request(config, store, &requester, &ask, out)
        }
        AccessCommand::List => list(store, out),
        AccessCommand::Approve { id, by } => approve(config, store, &id, &by, out),
        AccessCommand::Deny { id, by, reason } => {
            let request = access::deny(store, &id, &by, reason.as_deref()).map_err(message)?;
            writeln!(out, "denied access request {}", request.id).map_err(io)
        }
    }
}

fn request(
    config: &Config,
    store: &Store,
    requester: &Requester,
    ask: &AccessAsk,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let request = access::request_access(store, config, requester, ask).map_err(message)?;
    writeln!(
        out,
        "access request {} is pending until {}",
        request.id,
        when(&request.expires_at)
    )
    .map_err(io)
}

fn list(store: &Store, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "{:<38} {:<20} {:<10} {:<12} {:<16} {:<14} {:<9} {:<12} REASON",
        "ID", "REQUESTER", "STATE", "CLUSTER", "NAMESPACE", "ROLE", "DURATION", "DECIDED BY"
    )
    .map_err(io)?;
    for r in access::list(store).map_err(message)? {
        writeln!(out, "{}", line(&r)).map_err(io)?;
    }
    Ok(())
}

fn approve(config: &Config, store: &Store, id: &str, by: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let (request, grant) = access::approve(store, config, id, by).map_err(message)?;
    writeln!(
        out,
        "approved access request {}: grant {} until {}",
        request.id,
        grant.id,
        when(&grant.expires_at)
    )
    .map_err(io)?;
    // Bound before returning, or said to be pending.
    writeln!(out, "{}", super::cluster::pass_from_cli(config, store, &grant.cluster)).map_err(io)
}

fn io(e: std::io::Error) -> CliError {
    CliError::Message(e.to_string())
}

/// One request as a table line; the reason is an agent's or a person's
/// own words, so control characters in it are shown escaped.
fn line(r: &AccessRequest) -> String {
    let requester = match &r.agent_id {
        Some(agent) => format!("{} (agent {})", r.requester, agent.chars().take(8).collect::<String>()),
        None => r.requester.to_string(),
    };
    let duration = humantime::format_duration(r.duration).to_string();
    let requester = esc(&requester);
    format!(
        "{:<38} {requester:<20} {:<10} {:<12} {:<16} {:<14} {duration:<9} {:<12} {}",
        r.id,
        r.state.as_str(),
        esc(&r.cluster),
        esc(r.namespace.as_deref().unwrap_or("*")),
        esc(&r.role),
        esc(r.decided_by.as_deref().unwrap_or("-")),
        esc(&r.reason)
    )
}

fn message(e: AccessError) -> CliError {
    CliError::Message(e.to_string())
}

fn when(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
