//! `portcullis approvals list|show|approve|deny`: the same decisions as the
//! approval page, as the signed-in person, through the server's person API
//! (the server checks who may decide, and the credential that asked for a
//! write never decides it).

use super::access::{io, s};
use super::remote::Remote;
use super::CliError;
use crate::text::escape_control as esc;
use clap::Subcommand;
use serde_json::json;
use std::io::Write;

/// `approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Held writes waiting on you and those you asked for, newest first
    /// (`--pending` for those still waiting).
    List {
        /// Only those waiting for a decision.
        #[arg(long)]
        pending: bool,
    },
    /// Show one held write: who asked, what, where, the diff and the dry run.
    Show {
        /// Held write id.
        id: String,
    },
    /// Approve a held write as yourself: the asker's next call runs it once.
    Approve {
        /// Held write id.
        id: String,
        /// Why (recorded).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny a held write as yourself.
    Deny {
        /// Held write id.
        id: String,
        /// Why (shown to the asker, recorded).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Run an `approvals` command against `remote`.
pub async fn run(remote: &Remote, command: ApprovalsCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        ApprovalsCommand::List { pending } => {
            let path = if pending {
                "held-writes?pending=true"
            } else {
                "held-writes"
            };
            let answer = remote.get(path).await?;
            writeln!(
                out,
                "{:<38} {:<10} {:<22} {:<12} WRITE",
                "ID", "STATE", "ASKED BY", "DECIDED BY"
            )
            .map_err(io)?;
            for held in answer["held_writes"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "{:<38} {:<10} {:<22} {:<12} {}",
                    esc(s(&held["id"])),
                    esc(s(&held["state"])),
                    esc(s(&held["requester"])),
                    esc(held["decided_by"].as_str().unwrap_or("-")),
                    esc(s(&held["write"]))
                )
                .map_err(io)?;
            }
            Ok(())
        }
        // The server escaped what the asker sent; the text is shown as it came.
        ApprovalsCommand::Show { id } => {
            let answer = remote
                .get(&format!("held-writes/{}", super::remote::segment(&id)?))
                .await?;
            write!(out, "{}", s(&answer["held_write"]["text"])).map_err(io)
        }
        ApprovalsCommand::Approve { id, reason } => {
            let answer = remote
                .post(
                    &format!("held-writes/{}/approve", super::remote::segment(&id)?),
                    json!({ "reason": reason }),
                )
                .await?;
            let held = &answer["held_write"];
            writeln!(
                out,
                "approved {}: {}; it runs on the asker's next call",
                esc(s(&held["id"])),
                esc(s(&held["write"]))
            )
            .map_err(io)
        }
        ApprovalsCommand::Deny { id, reason } => {
            let answer = remote
                .post(
                    &format!("held-writes/{}/deny", super::remote::segment(&id)?),
                    json!({ "reason": reason }),
                )
                .await?;
            let held = &answer["held_write"];
            writeln!(out, "denied {}: {}", esc(s(&held["id"])), esc(s(&held["write"]))).map_err(io)
        }
    }
}
