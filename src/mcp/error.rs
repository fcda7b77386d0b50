//! Tool errors, as MCP.md specifies them, so that clients never parse prose.
//!
//! - The cluster answered 4xx or 5xx: the text is `<code> <Reason>:
//!   <message>`, then for a 403 a hint, then `(audit id <id>)`; the
//!   `structuredContent` is `{code, reason}` with `kind`, `name`,
//!   `namespace`, and the first cause's `field` and `fieldReason` when the
//!   Status has them.
//! - portcullis refused or failed: the text is `<code>: <message>` and the
//!   `structuredContent` `{code, params, error}`.

use crate::approvals::{rfc3339, HeldState};
use crate::gateway::error::RequestError;
use crate::gateway::hold::{ApprovalRefusal, HeldNotice};
use crate::identity::authenticate::AuthError;
use crate::status::Status;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Map, Value};

/// What a 403 adds, so an agent asks instead of working around it.
pub const FORBIDDEN_HINT: &str = "Your role does not allow this. `whoami` shows what your grants allow; \
     `request_access` asks a person for more (say why). Do not look for another way in.";

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The cluster answered with a failure Status.
    #[error("{} {}: {}", .status.code, .status.reason, .status.message)]
    Cluster {
        /// The cluster's Status (or one made from its HTTP status).
        status: Box<Status>,
        /// The namespace the request was for, if any.
        namespace: Option<String>,
        /// The audit id of the request.
        audit_id: String,
    },
    /// An argument is missing, malformed or out of range.
    #[error("{message}")]
    InvalidArgument {
        /// Which argument.
        argument: std::borrow::Cow<'static, str>,
        /// What is wrong, and what to send instead.
        message: String,
    },
    /// The cluster is not served here.
    #[error("cluster {0:?} is not served by this portcullis: `list_clusters` names the ones that are")]
    UnknownCluster(String),
    /// No resource of the cluster matches the kind.
    #[error("no kind {kind:?} in cluster {cluster}{}", candidates_hint(.candidates))]
    UnknownKind {
        /// The cluster.
        cluster: String,
        /// As given.
        kind: String,
        /// Resources with a similar name.
        candidates: Vec<String>,
    },
    /// Several resources match the kind: `api_version` must choose.
    #[error("kind {kind:?} is ambiguous in cluster {cluster}: pass api_version, one of {}", .candidates.join(", "))]
    AmbiguousKind {
        /// The cluster.
        cluster: String,
        /// As given.
        kind: String,
        /// `<group/version> <Kind>` of each match.
        candidates: Vec<String>,
    },
    /// The cluster's answer is over the size limit and was discarded.
    #[error("the cluster's answer is larger than portcullis's limit of {limit} bytes and was discarded: ask for less (a smaller limit, a label_selector, fewer log lines)")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// portcullis refused the request or could not complete it (the cluster
    /// unreachable or too slow, the audit or the grants unavailable).
    #[error("{message}")]
    Refused {
        /// `cluster.unavailable`, `cluster.timeout`, `request.refused`.
        code: &'static str,
        /// What happened.
        message: String,
        /// The audit id, when the request got one.
        audit_id: String,
    },
    /// The write is held for a person's approval, or was decided, expired
    /// or already run.
    #[error("{}", held_message(.0))]
    Held(Box<HeldNotice>),
    /// The call names an approval it may not run: none of the caller's, or
    /// one held for another write; nothing ran.
    #[error("{}", .0.message())]
    Approval(Box<ApprovalRefusal>),
    /// The feature behind the tool is not available on this portcullis.
    #[error("{0}")]
    Unavailable(String),
}

fn held_message(notice: &HeldNotice) -> String {
    let id = &notice.id;
    match notice.state {
        HeldState::Pending | HeldState::Approved => format!(
            "{} waits for a person's approval. Give them this link: {} (expires at {}). Then call the same tool again \
             with the same arguments and approval_id {id:?}: that call waits for the decision; while it answers pending, \
             call it again.",
            notice.summary,
            notice.url,
            rfc3339(notice.expires_at)
        ),
        HeldState::Denied => format!(
            "{} was denied by {}{}; nothing was changed. Do not retry it another way.",
            notice.summary,
            notice.decided_by.as_deref().unwrap_or("a person"),
            notice.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
        ),
        HeldState::Expired => format!(
            "{} expired before anyone approved and ran it; nothing was changed. Call again without approval_id to ask anew.",
            notice.summary
        ),
        HeldState::Executing | HeldState::Executed => format!(
            "{} already ran after approval by {}{}",
            notice.summary,
            notice.decided_by.as_deref().unwrap_or("a person"),
            notice
                .outcome
                .as_ref()
                .map(|o| format!("; the cluster answered {}: {}", o.code, o.body))
                .unwrap_or_default()
        ),
    }
}

fn held_params(notice: &HeldNotice) -> Value {
    let mut params = json!({"approval_id": notice.id, "url": notice.url, "expires_at": rfc3339(notice.expires_at)});
    if let Some(by) = &notice.decided_by {
        params["decided_by"] = json!(by);
    }
    if let Some(reason) = &notice.reason {
        params["reason"] = json!(reason);
    }
    if let Some(outcome) = &notice.outcome {
        params["outcome"] = json!({"code": outcome.code, "body": outcome.body});
    }
    params
}

fn candidates_hint(candidates: &[String]) -> String {
    if candidates.is_empty() {
        ": `list_api_resources` lists the kinds it serves".to_string()
    } else {
        format!(": did you mean {}?", candidates.join(", "))
    }
}

impl ToolError {
    /// portcullis refused or failed a tool's request to `cluster` itself:
    /// the tool's error for the pipeline's, with the same message as the
    /// Status a raw client gets.
    pub fn refused(error: &RequestError, cluster: &str, audit_id: String) -> ToolError {
        use RequestError as E;
        let code = match error {
            E::ResponseTooLarge { limit, .. } => return ToolError::TooLarge { limit: *limit },
            E::Held { notice, .. } => return ToolError::Held(notice.clone()),
            E::Approval(refusal) => return ToolError::Approval(Box::new(refusal.clone())),
            E::PathNotFound | E::UnknownCluster { .. } => return ToolError::UnknownCluster(cluster.to_string()),
            E::UpstreamTimeout { .. } | E::SecretsTimedOut { .. } => "cluster.timeout",
            E::GrantsUnavailable { .. }
            | E::AuditUnavailable
            | E::ApprovedWriteUnrecorded
            | E::UpstreamUnavailable { .. }
            | E::UpstreamFailed { .. }
            | E::SecretsTooLarge { .. }
            | E::Unredactable { .. }
            | E::WritesNotHeld
            | E::HoldUnavailable
            | E::PreviewUnredactable { .. }
            | E::AnswerCutShort
            | E::StoreUnavailable
            | E::WaitFailed { .. }
            | E::Unauthenticated(AuthError::StoreUnavailable)
            | E::AuditQuery(crate::audit::read::AuditReadError::Unavailable(_)) => "cluster.unavailable",
            _ => "request.refused",
        };
        ToolError::Refused {
            code,
            message: error.status().message,
            audit_id,
        }
    }

    /// An invalid `argument`.
    pub fn invalid(argument: &'static str, message: impl Into<String>) -> Self {
        ToolError::InvalidArgument {
            argument: argument.into(),
            message: message.into(),
        }
    }

    /// The code of one of portcullis's own errors (`None` for the cluster's).
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            ToolError::Cluster { .. } => return None,
            ToolError::InvalidArgument { .. } => "tool.invalid_argument",
            ToolError::UnknownCluster(_) => "cluster.unknown",
            ToolError::UnknownKind { .. } => "kind.unknown",
            ToolError::AmbiguousKind { .. } => "kind.ambiguous",
            ToolError::TooLarge { .. } => "response.too_large",
            ToolError::Refused { code, .. } => code,
            ToolError::Held(notice) => match notice.state {
                HeldState::Pending | HeldState::Approved => "agent.approval_pending",
                HeldState::Denied => "agent.approval_denied",
                HeldState::Expired => "agent.approval_expired",
                HeldState::Executing | HeldState::Executed => "agent.approval_executed",
            },
            ToolError::Approval(refusal) => match **refusal {
                ApprovalRefusal::Unknown { .. } => "agent.approval_unknown",
                ApprovalRefusal::Mismatch { .. } => "agent.approval_mismatch",
            },
            ToolError::Unavailable(_) => "tool.unavailable",
        })
    }

    fn params(&self) -> Value {
        match self {
            ToolError::InvalidArgument { argument, .. } => json!({"argument": argument}),
            ToolError::UnknownCluster(cluster) => json!({"cluster": cluster}),
            ToolError::UnknownKind {
                cluster,
                kind,
                candidates,
            }
            | ToolError::AmbiguousKind {
                cluster,
                kind,
                candidates,
            } => {
                json!({"cluster": cluster, "kind": kind, "candidates": candidates})
            }
            ToolError::TooLarge { limit } => json!({"limit": limit}),
            ToolError::Held(notice) => held_params(notice),
            ToolError::Approval(refusal) => match &**refusal {
                ApprovalRefusal::Unknown { id } => json!({"approval_id": id}),
                ApprovalRefusal::Mismatch { id, summary, differs } => {
                    json!({"approval_id": id, "held": summary, "differs": differs})
                }
            },
            ToolError::Refused { audit_id, .. } if !audit_id.is_empty() => json!({"audit_id": audit_id}),
            _ => json!({}),
        }
    }

    /// The tool result.
    pub fn into_result(self) -> CallToolResult {
        let (text, structured) = match &self {
            ToolError::Cluster {
                status,
                namespace,
                audit_id,
            } => (
                cluster_text(status, audit_id),
                cluster_structured(status, namespace.as_deref()),
            ),
            other => {
                let code = other.code().unwrap_or("error");
                let whole = other.to_string();
                let message = bounded(&whole);
                let structured = json!({"code": code, "params": other.params(), "error": message});
                (format!("{code}: {message}"), structured)
            }
        };
        let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
        result.structured_content = Some(structured);
        result
    }
}

/// The most of a message a tool error carries. A cluster's may be any size
/// (an admission webhook listing its violations, a 422 naming each invalid
/// key of a large ConfigMap), as may one of portcullis's that lists what the
/// caller could have asked for, and a result is at most 256 KiB.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// `message`, cut to [`MAX_MESSAGE_BYTES`] with how much more it had.
fn bounded(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.into();
    }
    let end = crate::text::floor_char_boundary(message, MAX_MESSAGE_BYTES);
    format!("{}… ({} bytes more)", &message[..end], message.len() - end).into()
}

fn cluster_text(status: &Status, audit_id: &str) -> String {
    let mut text = format!("{} {}: {}", status.code, status.reason, bounded(&status.message));
    if status.code == 403 {
        text.push('\n');
        text.push_str(FORBIDDEN_HINT);
    }
    text.push_str(&format!("\n(audit id {audit_id})"));
    text
}

fn cluster_structured(status: &Status, namespace: Option<&str>) -> Value {
    let mut out = Map::new();
    out.insert("code".into(), json!(status.code));
    out.insert("reason".into(), json!(status.reason));
    if let Some(details) = &status.details {
        if !details.kind.is_empty() {
            out.insert("kind".into(), json!(details.kind));
        }
        if !details.name.is_empty() {
            out.insert("name".into(), json!(details.name));
        }
        if let Some(cause) = details.causes.first() {
            if !cause.field.is_empty() {
                out.insert("field".into(), json!(cause.field));
            }
            if !cause.reason.is_empty() {
                out.insert("fieldReason".into(), json!(cause.reason));
            }
        }
    }
    if let Some(namespace) = namespace.filter(|ns| !ns.is_empty()) {
        out.insert("namespace".into(), json!(namespace));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{StatusCause, StatusDetails};

    fn text_of(result: &CallToolResult) -> String {
        result.content[0].as_text().map(|t| t.text.clone()).unwrap_or_default()
    }

    #[test]
    fn a_refusal_by_portcullis_keeps_its_status_message_under_the_tool_code_of_its_status_class() {
        let cases = [
            RequestError::UpstreamTimeout {
                cluster: "c".into(),
                timeout: std::time::Duration::from_secs(1),
            },
            RequestError::UpstreamFailed { cluster: "c".into() },
            RequestError::UpstreamUnavailable { cluster: "c".into() },
            RequestError::AuditUnavailable,
            RequestError::WritesNotHeld,
            RequestError::AnswerCutShort,
            RequestError::RequestTooLarge { limit: 1 },
            RequestError::DotSegment,
            RequestError::HeldBodyGone,
            RequestError::NotAcceptable {
                message: "json only".into(),
            },
        ];
        for error in cases {
            let status = error.status();
            let class = match status.code {
                504 => "cluster.timeout",
                502 | 503 => "cluster.unavailable",
                _ => "request.refused",
            };
            let tool = ToolError::refused(&error, "c", "id".into());
            assert_eq!(tool.code(), Some(class), "{error:?}");
            assert_eq!(tool.to_string(), status.message, "{error:?}");
        }
    }

    #[test]
    fn an_oversized_answer_and_an_unknown_cluster_are_their_own_tool_errors() {
        let large = RequestError::ResponseTooLarge { len: 9, limit: 4 };
        assert!(matches!(
            ToolError::refused(&large, "c", String::new()),
            ToolError::TooLarge { limit: 4 }
        ));
        let unknown = RequestError::UnknownCluster { cluster: "x".into() };
        assert!(matches!(ToolError::refused(&unknown, "x", String::new()), ToolError::UnknownCluster(c) if c == "x"));
    }

    #[test]
    fn a_cluster_403_carries_the_hint_the_audit_id_and_its_structure() {
        let status = Status::forbidden("pods is forbidden: User \"user:ana\" cannot list", "", "", "pods");
        let error = ToolError::Cluster {
            status: Box::new(status),
            namespace: Some("shop".into()),
            audit_id: "a1".into(),
        };
        let result = error.into_result();
        assert_eq!(result.is_error, Some(true));
        let text = text_of(&result);
        assert!(text.starts_with("403 Forbidden: pods is forbidden"), "{text}");
        assert!(
            text.contains("request_access") && text.ends_with("(audit id a1)"),
            "{text}"
        );
        assert_eq!(
            result.structured_content.unwrap(),
            json!({"code": 403, "reason": "Forbidden", "kind": "pods", "namespace": "shop"})
        );
    }

    #[test]
    fn a_long_message_is_cut_in_the_text_and_the_structure_and_the_audit_id_stays() {
        let long = "é".repeat(1024 * 1024);
        let error = ToolError::Cluster {
            status: Box::new(Status::failure(422, "Invalid", &long)),
            namespace: None,
            audit_id: "a3".into(),
        };
        let text = text_of(&error.into_result());
        assert!(text.len() < 2 * MAX_MESSAGE_BYTES, "{}", text.len());
        assert!(text.starts_with("422 Invalid: éé"), "{}", &text[..40]);
        assert!(
            text.ends_with(&format!(
                "é… ({} bytes more)\n(audit id a3)",
                long.len() - MAX_MESSAGE_BYTES
            )),
            "{}",
            &text[text.len() - 80..]
        );
        let ours = ToolError::invalid("key", format!("Secret s has no key \"k\"; its keys: {long}"));
        let result = ours.into_result();
        let text = text_of(&result);
        assert!(
            text.len() < 2 * MAX_MESSAGE_BYTES && text.contains(" bytes more)"),
            "{}",
            text.len()
        );
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["code"], "tool.invalid_argument");
        assert!(structured["error"].as_str().unwrap().len() < 2 * MAX_MESSAGE_BYTES);
    }

    #[test]
    fn a_422_names_the_first_causes_field() {
        let details = StatusDetails {
            name: "web".into(),
            kind: "Deployment".into(),
            causes: vec![StatusCause {
                reason: "FieldValueRequired".into(),
                message: "x".into(),
                field: "spec.x".into(),
            }],
            ..Default::default()
        };
        let status = Status::failure(422, "Invalid", "Deployment \"web\" is invalid").with_details(details);
        let error = ToolError::Cluster {
            status: Box::new(status),
            namespace: None,
            audit_id: "a2".into(),
        };
        assert_eq!(
            error.into_result().structured_content.unwrap(),
            json!({"code": 422, "reason": "Invalid", "kind": "Deployment", "name": "web", "field": "spec.x", "fieldReason": "FieldValueRequired"})
        );
    }

    #[test]
    fn portcullis_errors_are_code_colon_message_with_code_params_error() {
        let error = ToolError::AmbiguousKind {
            cluster: "c".into(),
            kind: "events".into(),
            candidates: vec!["v1 Event".into()],
        };
        let result = error.into_result();
        assert!(text_of(&result).starts_with("kind.ambiguous: kind \"events\" is ambiguous"));
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["code"], "kind.ambiguous");
        assert_eq!(structured["params"]["candidates"], json!(["v1 Event"]));
        assert!(structured["error"].as_str().unwrap().contains("pass api_version"));
    }
}
