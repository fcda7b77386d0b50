//! `portcullis approvals list|show|approve|deny`: the same decisions as the
//! approval page, for a person at a terminal (`--by` names them; the CLI
//! runs with the store's own rights, as `access approve` does).

use super::CliError;
use crate::approvals::decide::{self, DecideError};
use crate::approvals::{preview, rfc3339, wait, HeldState, HeldWrite};
use crate::store::Store;
use crate::text::{escape_control as esc, escape_control_lines};
use clap::Subcommand;
use std::io::Write;

/// `approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List held writes, newest first (`--pending` for those still waiting).
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
    /// Approve a held write: the asker's next call runs it once.
    Approve {
        /// Held write id.
        id: String,
        /// The deciding person's login.
        #[arg(long)]
        by: String,
    },
    /// Deny a held write.
    Deny {
        /// Held write id.
        id: String,
        /// The deciding person's login.
        #[arg(long)]
        by: String,
        /// Why (shown to the asker, recorded).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Run an `approvals` command.
pub fn run(store: &Store, command: ApprovalsCommand, out: &mut dyn Write) -> Result<(), CliError> {
    let io = |e: std::io::Error| CliError::Message(e.to_string());
    match command {
        ApprovalsCommand::List { pending } => {
            wait::expire_overdue(store).map_err(message)?;
            writeln!(
                out,
                "{:<38} {:<10} {:<22} {:<12} WRITE",
                "ID", "STATE", "ASKED BY", "DECIDED BY"
            )
            .map_err(io)?;
            for held in store.list_held()? {
                if pending && held.state != HeldState::Pending {
                    continue;
                }
                writeln!(
                    out,
                    "{:<38} {:<10} {:<22} {:<12} {}",
                    held.id,
                    held.state.as_str(),
                    esc(&held.request.requester),
                    esc(held.decided_by.as_deref().unwrap_or("-")),
                    esc(&held.request.summary())
                )
                .map_err(io)?;
            }
        }
        ApprovalsCommand::Show { id } => {
            let held = wait::current(store, &id)
                .map_err(message)?
                .ok_or_else(|| CliError::Message(format!("held write {id} not found")))?;
            write!(out, "{}", show(&held)).map_err(io)?;
        }
        ApprovalsCommand::Approve { id, by } => {
            let held = decide::approve(store, &id, &by, None, None).map_err(message)?;
            writeln!(
                out,
                "approved {}: {}; it runs on the asker's next call",
                held.id,
                esc(&held.request.summary())
            )
            .map_err(io)?;
        }
        ApprovalsCommand::Deny { id, by, reason } => {
            let held = decide::deny(store, &id, &by, None, reason.as_deref()).map_err(message)?;
            writeln!(out, "denied {}: {}", held.id, esc(&held.request.summary())).map_err(io)?;
        }
    }
    Ok(())
}

/// A held write in full, as text. What the asker sent (names, path, query,
/// the object) is shown with control characters escaped, so it cannot forge
/// lines or drive the terminal.
pub fn show(held: &HeldWrite) -> String {
    let r = &held.request;
    let mut text = format!(
        "held write {}\n  state:      {}\n  write:      {}\n  asked by:   {}{}{}\n  request:    {} {}{}\n  held at:    {}\n  expires at: {}\n",
        held.id,
        held.state.as_str(),
        esc(&r.summary()),
        esc(&r.requester),
        r.agent_id.as_deref().map(|a| format!(" (agent {})", esc(a))).unwrap_or_default(),
        if r.tool.is_empty() { String::new() } else { format!(" with tool {}", esc(&r.tool)) },
        esc(&r.method),
        esc(&r.path),
        if r.query.is_empty() { String::new() } else { format!("?{}", esc(&r.query)) },
        rfc3339(held.created_at),
        rfc3339(held.expires_at),
    );
    if let Some(by) = &held.decided_by {
        text.push_str(&format!(
            "  decided by: {}{}\n",
            esc(by),
            held.decision_reason
                .as_deref()
                .map(|r| format!(" ({})", esc(r)))
                .unwrap_or_default()
        ));
    }
    if let Some(outcome) = &held.outcome {
        text.push_str(&format!("  outcome:    {}\n", outcome.code));
    }
    let diff = if r.preview.diff.is_empty() {
        "  (no change)\n".into()
    } else {
        escape_control_lines(&r.preview.diff)
    };
    text.push_str("\ndiff (current → after the write):\n");
    text.push_str(&diff);
    if !r.preview.current_note.is_empty() {
        text.push_str(&format!("\ncurrent object: {}\n", esc(&r.preview.current_note)));
    }
    text.push_str("\ndry-run result:\n");
    text.push_str(&escape_control_lines(&preview::yaml(&r.preview.result)));
    text
}

fn message(e: DecideError) -> CliError {
    CliError::Message(e.to_string())
}
