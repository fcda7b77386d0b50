//! The commands a person runs on their own machine, as themselves: each
//! one a call to the server's person API (`crate::doors::api`) with the
//! person's own credential ([`super::remote`]), never the store. The server
//! decides who may do what, as on the web pages.

use super::access::{io, s, AccessCommand};
use super::approvals::ApprovalsCommand;
use super::remote::{PersonEnv, Remote, RemoteArgs};
use super::CliError;
use crate::text::escape_control as esc;
use clap::Subcommand;
use serde_json::json;
use std::io::Write;

/// `credential …`, for one's own credentials.
#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Your credentials (never their tokens).
    List,
    /// Revoke one of your credentials at once.
    Revoke {
        /// Credential id.
        id: String,
    },
}

/// A person command.
#[derive(Debug)]
pub enum PersonCommand {
    /// `whoami`.
    Whoami,
    /// `access …`.
    Access(AccessCommand),
    /// `approvals …`.
    Approvals(ApprovalsCommand),
    /// `credential …`.
    Credential(CredentialCommand),
    /// `kubeconfig`.
    Kubeconfig,
    /// `group-rule …` (admins).
    GroupRule(super::group_rule::GroupRuleCommand),
    /// `bot trust …` (admins).
    Bot(super::bot_trust::BotCommand),
}

/// Run `command` against the server `args` and `env` name, printing to
/// stdout.
pub async fn run(args: &RemoteArgs, env: &PersonEnv, command: PersonCommand) -> Result<(), CliError> {
    let remote = Remote::resolve(args, env)?;
    let out = &mut std::io::stdout().lock();
    match command {
        PersonCommand::Whoami => whoami(&remote, out).await,
        PersonCommand::Access(c) => super::access::run(&remote, c, out).await,
        PersonCommand::Approvals(c) => super::approvals::run(&remote, c, out).await,
        PersonCommand::Credential(c) => credential(&remote, c, out).await,
        PersonCommand::Kubeconfig => super::kubeconfig::run(&remote, env, out).await,
        PersonCommand::GroupRule(c) => super::group_rule::run(&remote, c, out).await,
        PersonCommand::Bot(c) => super::bot_trust::run(&remote, c, out).await,
    }
}

async fn whoami(remote: &Remote, out: &mut dyn Write) -> Result<(), CliError> {
    let me = remote.get("whoami").await?;
    let admin = if me["admin"].as_bool() == Some(true) {
        " (admin)"
    } else {
        ""
    };
    writeln!(
        out,
        "{}{admin}, {} on clusters",
        esc(s(&me["login"])),
        esc(s(&me["user"]))
    )
    .map_err(io)?;
    let expires = me["credential"]["expires_at"].as_str().unwrap_or("never");
    writeln!(
        out,
        "credential {} expires {}",
        esc(s(&me["credential"]["id"])),
        esc(expires)
    )
    .map_err(io)?;
    for g in me["grants"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "grant {}: {} on {} in {} until {}",
            esc(s(&g["id"])),
            esc(s(&g["role"])),
            esc(s(&g["cluster"])),
            esc(g["namespace"]
                .as_str()
                .map_or("the whole cluster".into(), |ns| format!("namespace {ns}"))
                .as_str()),
            esc(s(&g["expires_at"]))
        )
        .map_err(io)?;
    }
    for session in me["agent_sessions"].as_array().into_iter().flatten() {
        agent_session(session, out)?;
    }
    Ok(())
}

/// One agent session of `whoami`: its client, last use, end and grants.
fn agent_session(session: &serde_json::Value, out: &mut dyn Write) -> Result<(), CliError> {
    let client = session["client_name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or(session["client_id"].as_str())
        .unwrap_or("?");
    let grants: Vec<String> = session["grants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| match g["namespace"].as_str() {
            Some(ns) => format!("{} on {}/{ns}", s(&g["role"]), s(&g["cluster"])),
            None => format!("{} on {}", s(&g["role"]), s(&g["cluster"])),
        })
        .collect();
    let approval = if session["writes_need_approval"].as_bool() == Some(true) {
        "writes need approval"
    } else {
        "writes directly"
    };
    writeln!(
        out,
        "agent session {}: client {}, last used {}, until {}, {approval}, grants: {}",
        esc(s(&session["id"])),
        esc(client),
        esc(session["last_used_at"].as_str().unwrap_or("never")),
        esc(session["expires_at"].as_str().unwrap_or("never")),
        esc(&grants.join(", "))
    )
    .map_err(io)
}

async fn credential(remote: &Remote, command: CredentialCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        CredentialCommand::List => {
            let answer = remote.get("credentials").await?;
            writeln!(
                out,
                "{:<38} {:<16} {:<12} {:<22} {:<22} STATE",
                "ID", "NAME", "PREFIX", "EXPIRES", "LAST USED"
            )
            .map_err(io)?;
            for c in answer["credentials"].as_array().into_iter().flatten() {
                let expired = c["expires_at"]
                    .as_str()
                    .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
                    .is_some_and(|t| t <= chrono::Utc::now());
                let state = match (c["revoked_at"].is_null(), expired) {
                    (false, _) => "revoked",
                    (true, true) => "expired",
                    (true, false) => "active",
                };
                writeln!(
                    out,
                    "{:<38} {:<16} {:<12} {:<22} {:<22} {state}",
                    esc(s(&c["id"])),
                    esc(s(&c["name"])),
                    esc(s(&c["display_prefix"])),
                    esc(c["expires_at"].as_str().unwrap_or("never")),
                    esc(c["last_used_at"].as_str().unwrap_or("never")),
                )
                .map_err(io)?;
            }
            Ok(())
        }
        CredentialCommand::Revoke { id } => {
            let answer = remote
                .post(
                    &format!("credentials/{}/revoke", super::remote::segment(&id)?),
                    json!({}),
                )
                .await?;
            writeln!(
                out,
                "revoked credential {}: refused from now on",
                esc(s(&answer["revoked"]))
            )
            .map_err(io)
        }
    }
}
