//! Held writes seen from MCP (MCP.md, "Held writes"): how a write tool's
//! call relates to a held write, and how a held answer reaches the client.
//!
//! - A 2026-07-28 client that declared URL elicitation gets an
//!   input-required result: a URL elicitation of the approval page, and the
//!   approval id as request state. Its repeated call (with that state)
//!   waits for the decision and runs the write once approved. A declined or
//!   cancelled elicitation leaves the write pending (`agent.approval_pending`).
//! - Every other client gets `agent.approval_pending` with the approval id,
//!   url and `expires_at`, and repeats with `approval_id`.

use super::error::ToolError;
use super::server::outcome;
use crate::approvals::HeldState;
use crate::gateway::hold::ApprovalRef;
use rmcp::model::{
    CallToolResponse, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

/// The key of the one input request portcullis asks for.
const APPROVAL_INPUT: &str = "approval";

/// How one write tool call relates to a held write.
#[derive(Debug, Clone, Default)]
pub struct Repeat {
    /// The approval it repeats with (its `approval_id`, or the request state).
    pub approval: Option<ApprovalRef>,
    /// The client takes a URL elicitation (and did not just decline one).
    pub elicit: bool,
}

/// Read `approval_id`, the request state and the input responses of a call.
pub fn repeat(
    approval_id: Option<&str>,
    state: Option<String>,
    responses: Option<rmcp::model::InputResponses>,
    context: &RequestContext<RoleServer>,
) -> Repeat {
    let declined = responses.iter().flat_map(|r| r.values()).any(|response| {
        matches!(
            response.get("action").and_then(|a| a.as_str()),
            Some("decline" | "cancel")
        )
    });
    let id = approval_id
        .map(String::from)
        .or(state)
        .filter(|id| !id.trim().is_empty());
    let url_elicitation = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.url.is_some());
    Repeat {
        approval: id.map(|id| ApprovalRef { id, wait: !declined }),
        elicit: !declined && url_elicitation && context.protocol_version() == Some(ProtocolVersion::V_2026_07_28),
    }
}

/// The tool's response: a pending held write becomes an input-required
/// result for a client that takes URL elicitation.
pub fn respond(result: Result<String, ToolError>, repeat: &Repeat) -> CallToolResponse {
    match result {
        Err(ToolError::Held(notice)) if repeat.elicit && notice.state == HeldState::Pending => {
            let params = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: format!("Approve in portcullis: {}", notice.summary),
                url: notice.url.clone(),
                elicitation_id: notice.id.clone(),
            };
            let mut requests = InputRequests::new();
            requests.insert(
                APPROVAL_INPUT.to_string(),
                InputRequest::Elicitation(ElicitRequest::new(params)),
            );
            InputRequiredResult::new(Some(requests), Some(notice.id.clone())).into()
        }
        other => outcome(other).into(),
    }
}
