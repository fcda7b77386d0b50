//! What a caller of a held write is told.
//!
//! kubectl and other raw clients get a Status whose HTTP code equals its
//! code. A write waiting for approval is `403 Forbidden`: kubectl prints
//! the message (`Error from server (Forbidden): …`) and never retries a 403
//! on its own, where a 409 Conflict would make `kubectl apply` retry the
//! patch, a 429 or 5xx would be retried by client-go, and a 2xx would read
//! as success. Denied is 403 too, expired 410 `Expired`, already run 409
//! `AlreadyExists` (not `Conflict`, which `kubectl apply` retries).
//!
//! Each is a [`RequestError`] (`Held`, `Approval`), so its Status and its
//! audit refusal reason are decided where every refusal's are; MCP tools
//! read the [`HeldNotice`] or [`ApprovalRefusal`] in it and turn it into
//! their own codes (`agent.approval_pending`, …).

use crate::approvals::{approval_url, rfc3339, HeldState, HeldWrite, Outcome};
use crate::gateway::error::RequestError;
use crate::gateway::Pipeline;
use crate::status::{Status, StatusDetails};
use chrono::{DateTime, Utc};

/// A held write's state, for MCP tools (in the response's extensions).
#[derive(Debug, Clone)]
pub struct HeldNotice {
    /// The approval id.
    pub id: String,
    /// Its approval page.
    pub url: String,
    /// Where it stands.
    pub state: HeldState,
    /// `apply configmaps/flags in shop (sim)`.
    pub summary: String,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
    /// Who decided, and why.
    pub decided_by: Option<String>,
    /// The decider's reason.
    pub reason: Option<String>,
    /// What it answered when it ran.
    pub outcome: Option<Outcome>,
}

/// Put into the response of the call that ran an approved write.
#[derive(Debug, Clone)]
pub struct ApprovedRun {
    /// Who approved it (login).
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
}

/// Why a call naming an approval runs nothing (in the response's
/// extensions, for MCP tools).
#[derive(Debug, Clone)]
pub enum ApprovalRefusal {
    /// No held write of the caller's on this cluster has this id.
    Unknown {
        /// The id as given.
        id: String,
    },
    /// The held write is another write than the one this call asks for.
    Mismatch {
        /// The held write's id.
        id: String,
        /// The held write, as `apply configmaps/flags in shop (sim)`.
        summary: String,
        /// What differs: `method`, `path`, `query`, `content type`, `body`.
        differs: Vec<&'static str>,
    },
}

impl ApprovalRefusal {
    /// What the caller is told.
    pub fn message(&self) -> String {
        match self {
            ApprovalRefusal::Unknown { id } => format!(
                "no held write of yours has approval id {id:?} on this cluster: call again without approval_id"
            ),
            ApprovalRefusal::Mismatch { id, summary, differs } => format!(
                "approval {id} is for another write ({summary}): this call's {} differ{}, and an approval runs only the \
                 write that was approved; nothing was run. Repeat that write's call with the same arguments, or call \
                 without approval_id to ask for this one.",
                differs.join(", "),
                if differs.len() == 1 { "s" } else { "" }
            ),
        }
    }
}

/// The Status of a call whose approval id runs nothing: 404 for an unknown
/// id, 409 for another write's (for [`RequestError::status`]).
pub(crate) fn approval_status(refusal: &ApprovalRefusal) -> Status {
    let (code, reason, id) = match refusal {
        ApprovalRefusal::Unknown { id } => (404, "NotFound", id),
        ApprovalRefusal::Mismatch { id, .. } => (409, "Conflict", id),
    };
    Status::failure(code, reason, refusal.message()).with_details(held_write_details(id))
}

impl Pipeline {
    /// What the caller is told about `held` in its current state, instead
    /// of the cluster's answer.
    pub(super) fn answer(&self, held: &HeldWrite) -> RequestError {
        let url = approval_url(&self.approvals.public_url, &held.id);
        let notice = HeldNotice {
            id: held.id.clone(),
            url: url.clone(),
            state: held.state,
            summary: held.request.summary(),
            expires_at: held.expires_at,
            decided_by: held.decided_by.clone(),
            reason: held.decision_reason.clone(),
            outcome: held.outcome.clone(),
        };
        RequestError::Held {
            notice: Box::new(notice),
            wait: self.approvals.wait,
        }
    }
}

/// The Status of a held write's answer (for [`RequestError::status`]).
pub(crate) fn held_status(held: &HeldNotice, wait: std::time::Duration) -> Status {
    let what = &held.summary;
    let url = &held.url;
    let by = held.decided_by.as_deref().unwrap_or("a person");
    let (code, reason, message) = match held.state {
        HeldState::Pending | HeldState::Approved => (
            403,
            "Forbidden",
            format!(
                "this write waits for a person's approval: {what}. Approve or deny it at {url} (held write {id}, expires at {expires}). \
                 Once approved, run the same command again: it waits up to {wait} for the decision, then runs the write.",
                id = held.id,
                expires = rfc3339(held.expires_at),
                wait = humantime::format_duration(wait),
            ),
        ),
        HeldState::Denied => (
            403,
            "Forbidden",
            format!(
                "this write was denied by {by}{reason}: {what} (held write {id}); nothing was changed",
                // The decider's words reach the asker's terminal: no
                // control characters (the pages and the CLI escape them too).
                reason = held
                    .reason
                    .as_deref()
                    .map(|r| format!(" ({})", crate::text::escape_control(r)))
                    .unwrap_or_default(),
                id = held.id,
            ),
        ),
        HeldState::Expired => (
            410,
            "Expired",
            format!(
                "this write waited for approval and expired at {}: {what} (held write {}); nothing was changed. Run it again to ask anew.",
                rfc3339(held.expires_at),
                held.id
            ),
        ),
        HeldState::Executing | HeldState::Executed => (
            409,
            "AlreadyExists",
            format!(
                "this write already ran after approval by {by}: {what} (held write {}){}",
                held.id,
                held.outcome
                    .as_ref()
                    .map(|o| format!("; the cluster answered {}", o.code))
                    .unwrap_or_default()
            ),
        ),
    };
    Status::failure(code, reason, message).with_details(held_write_details(&held.id))
}

/// The Status details naming held write `id`.
fn held_write_details(id: &str) -> StatusDetails {
    StatusDetails {
        name: id.to_string(),
        group: "portcullis.dev".into(),
        kind: "heldwrites".into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_reason_reaches_the_asker_without_its_control_characters() {
        let notice = HeldNotice {
            id: "h1".into(),
            url: "https://p.example/approvals/h1".into(),
            state: HeldState::Denied,
            summary: "delete pods/web in shop (c)".into(),
            expires_at: Utc::now(),
            decided_by: Some("person:ana".into()),
            reason: Some("no\u{1b}[2J\u{202e}".into()),
            outcome: None,
        };
        let status = held_status(&notice, std::time::Duration::from_secs(1));
        assert!(
            !status.message.contains('\u{1b}') && !status.message.contains('\u{202e}'),
            "{}",
            status.message
        );
        assert!(
            status.message.contains("denied by person:ana (no"),
            "{}",
            status.message
        );
    }
}
