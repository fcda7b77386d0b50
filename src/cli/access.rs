//! `portcullis access request|list|approve|deny`: as the signed-in person,
//! through the server's person API; the server decides who may decide.

use super::remote::Remote;
use super::CliError;
use crate::text::escape_control as esc;
use clap::Subcommand;
use serde_json::{json, Value};
use std::io::Write;

/// `access …`.
#[derive(Debug, Subcommand)]
pub enum AccessCommand {
    /// Ask for a role on a cluster for a while, with a reason; a person who
    /// may decide approves or denies it.
    Request {
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
    /// Your access requests, and those you may decide.
    List,
    /// Approve a request as yourself: its grant is made and bound.
    Approve {
        /// Request id.
        id: String,
        /// Why (recorded).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny a request as yourself.
    Deny {
        /// Request id.
        id: String,
        /// Why (recorded).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Run an `access` command against `remote`.
pub async fn run(remote: &Remote, command: AccessCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        AccessCommand::Request {
            cluster,
            role,
            namespace,
            duration,
            reason,
        } => {
            let ask = json!({
                "cluster": cluster, "role": role, "namespace": namespace,
                "duration_seconds": duration.as_secs(), "reason": reason,
            });
            let answer = remote.post("access-requests", ask).await?;
            let r = &answer["request"];
            writeln!(
                out,
                "access request {} is pending until {}",
                s(&r["id"]),
                s(&r["expires_at"])
            )
            .map_err(io)
        }
        AccessCommand::List => list(remote, out).await,
        AccessCommand::Approve { id, reason } => {
            let answer = remote
                .post(
                    &format!("access-requests/{}/approve", super::remote::segment(&id)?),
                    json!({"reason": reason}),
                )
                .await?;
            let grant = &answer["grant"];
            writeln!(
                out,
                "approved access request {}: grant {} until {}\n{}",
                s(&answer["request"]["id"]),
                s(&grant["id"]),
                s(&grant["expires_at"]),
                esc(s(&answer["binding"]))
            )
            .map_err(io)
        }
        AccessCommand::Deny { id, reason } => {
            let answer = remote
                .post(
                    &format!("access-requests/{}/deny", super::remote::segment(&id)?),
                    json!({ "reason": reason }),
                )
                .await?;
            writeln!(out, "denied access request {}", s(&answer["request"]["id"])).map_err(io)
        }
    }
}

async fn list(remote: &Remote, out: &mut dyn Write) -> Result<(), CliError> {
    let answer = remote.get("access-requests").await?;
    writeln!(
        out,
        "{:<38} {:<20} {:<10} {:<12} {:<16} {:<14} {:<9} {:<12} REASON",
        "ID", "REQUESTER", "STATE", "CLUSTER", "NAMESPACE", "ROLE", "DURATION", "DECIDED BY"
    )
    .map_err(io)?;
    for r in answer["requests"].as_array().into_iter().flatten() {
        writeln!(out, "{}", line(r)).map_err(io)?;
    }
    Ok(())
}

/// One request as a table line; what a person or agent wrote is shown
/// with control characters escaped.
fn line(r: &Value) -> String {
    let requester = format!("{}:{}", s(&r["requester"]["kind"]), s(&r["requester"]["name"]));
    let requester = match r["agent_id"].as_str() {
        Some(agent) => format!("{requester} (agent {})", agent.chars().take(8).collect::<String>()),
        None => requester,
    };
    let secs = r["duration"]["secs"].as_u64().unwrap_or_default();
    let duration = humantime::format_duration(std::time::Duration::from_secs(secs)).to_string();
    format!(
        "{:<38} {:<20} {:<10} {:<12} {:<16} {:<14} {duration:<9} {:<12} {}",
        esc(s(&r["id"])),
        esc(&requester),
        esc(s(&r["state"])),
        esc(s(&r["cluster"])),
        esc(r["namespace"].as_str().unwrap_or("*")),
        esc(s(&r["role"])),
        esc(r["decided_by"].as_str().unwrap_or("-")),
        esc(s(&r["reason"]))
    )
}

/// A JSON string's text, empty for anything else.
pub(super) fn s(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

pub(super) fn io(e: std::io::Error) -> CliError {
    CliError::Message(e.to_string())
}
