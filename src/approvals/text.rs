//! A held write as text, for a person at a terminal: the CLI prints what
//! the person API (`crate::doors::api`) returns, so that both show the same
//! thing and the server, not the CLI, reads the store.

use super::{preview, rfc3339, HeldWrite};
use crate::text::{escape_control as esc, escape_control_lines};

/// A held write in full, as text. What the asker sent (names, path, query,
/// the object) is shown with control characters escaped, so it cannot forge
/// lines or drive the terminal.
pub fn describe(held: &HeldWrite) -> String {
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
