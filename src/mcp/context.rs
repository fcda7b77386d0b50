//! One tool call's way into the pipeline: [`ToolContext::send`] builds the
//! `http::Request`, sends it through [`Pipeline::call`] and turns the answer
//! into bytes, or a [`ToolError`] that keeps the cluster's Status and the
//! request's audit id.

use super::error::ToolError;
use super::server::Shared;
use super::Caller;
use crate::body;
use crate::gateway::call::{Refused, ToolCall};
use crate::gateway::hold::{ApprovalRef, ApprovedRun};
use crate::gateway::limits::{ResponseDeadline, ResponseTooLarge};
use crate::gateway::Pipeline;
use crate::status::Status;
use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use std::sync::Arc;

/// Everything one tool call needs.
pub struct ToolContext {
    pub(super) pipeline: Arc<Pipeline>,
    /// Who calls.
    pub caller: Caller,
    /// The tool's name, for the audit.
    pub tool: &'static str,
    /// The cluster the call is about (empty for tools that reach none).
    pub cluster: String,
    /// State shared by all calls.
    pub shared: Arc<Shared>,
}

/// A request a tool sends to its cluster.
#[derive(Debug, Clone)]
pub struct ClusterRequest {
    method: Method,
    path_and_query: String,
    accept: &'static str,
    content_type: Option<&'static str>,
    body: Bytes,
    reveal_secret: bool,
    namespace: Option<String>,
    approval: Option<ApprovalRef>,
}

impl ClusterRequest {
    /// A GET of `path_and_query` (relative to the cluster).
    pub fn get(path_and_query: impl Into<String>) -> Self {
        Self::new(Method::GET, path_and_query)
    }

    /// A request with `method`.
    pub fn new(method: Method, path_and_query: impl Into<String>) -> Self {
        ClusterRequest {
            method,
            path_and_query: path_and_query.into(),
            accept: "application/json",
            content_type: None,
            body: Bytes::new(),
            reveal_secret: false,
            namespace: None,
            approval: None,
        }
    }

    /// Ask for this media type.
    pub fn accept(mut self, accept: &'static str) -> Self {
        self.accept = accept;
        self
    }

    /// Send `body` as `content_type`.
    pub fn body(mut self, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        self.content_type = Some(content_type);
        self.body = body.into();
        self
    }

    /// The namespace concerned, named in a failure's `structuredContent`.
    pub fn in_namespace(mut self, namespace: Option<&str>) -> Self {
        self.namespace = namespace.map(String::from);
        self
    }

    /// A held write's repeat: the approval it names, and whether to wait.
    pub fn approval(mut self, approval: Option<ApprovalRef>) -> Self {
        self.approval = approval;
        self
    }

    /// `read_secret`: the Secret's values reach the agent (audited as such).
    pub fn revealing(mut self) -> Self {
        self.reveal_secret = true;
        self
    }

    /// The `http::Request` the pipeline is sent.
    fn to_http(&self) -> Result<Request<body::Body>, ToolError> {
        let mut builder = Request::builder()
            .method(self.method.clone())
            .uri(&self.path_and_query)
            .header(header::ACCEPT, self.accept);
        if let Some(content_type) = self.content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        let mut request = builder
            .body(body::full(self.body.clone()))
            .map_err(|_| ToolError::invalid("name", "the request path cannot be built from these arguments"))?;
        if let Some(approval) = self.approval.clone() {
            request.extensions_mut().insert(approval);
        }
        Ok(request)
    }
}

/// A cluster's successful answer.
#[derive(Debug)]
pub struct Answer {
    /// The body, whole.
    pub body: Bytes,
    /// The request's audit id.
    pub audit_id: String,
    /// Set when this call ran a held write a person approved.
    pub approved: Option<ApprovedRun>,
}

impl ToolContext {
    /// Send `request` to the call's cluster through the pipeline.
    pub async fn send(&self, request: ClusterRequest) -> Result<Answer, ToolError> {
        let http_request = request.to_http()?;
        let call = ToolCall {
            identity: &self.caller.identity,
            client: &self.caller.client,
            cluster: &self.cluster,
            tool: self.tool,
            reveal_secret: request.reveal_secret,
        };
        let response = self.pipeline.call(call, http_request).await;
        let audit_id = response
            .headers()
            .get("audit-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let refused = response.extensions().get::<Refused>().cloned();
        let approved = response.extensions().get::<ApprovedRun>().cloned();
        let code = response.status();
        let body = match response.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => return Err(self.cut_short(&*error, audit_id)),
        };
        if let Some(Refused(error)) = refused {
            return Err(ToolError::refused(&error, &self.cluster, audit_id));
        }
        if code.is_client_error() || code.is_server_error() {
            return Err(cluster_error(code, &body, request.namespace, audit_id));
        }
        Ok(Answer {
            body,
            audit_id,
            approved,
        })
    }

    /// The answer broke off: over the size cap, past the deadline, or the
    /// cluster went away.
    fn cut_short(&self, error: &(dyn std::error::Error + 'static), audit_id: String) -> ToolError {
        if error.downcast_ref::<ResponseTooLarge>().is_some() {
            return ToolError::TooLarge {
                limit: self.pipeline.response_limit(),
            };
        }
        let (code, message) = if error.downcast_ref::<ResponseDeadline>().is_some() {
            (
                "cluster.timeout",
                format!("cluster {} did not finish answering in time", self.cluster),
            )
        } else {
            (
                "cluster.unavailable",
                format!("the answer of cluster {} was cut short; try again", self.cluster),
            )
        };
        ToolError::Refused {
            code,
            message,
            audit_id,
        }
    }
}

/// The cluster's failure answer: its Status, or one made from its body.
fn cluster_error(code: StatusCode, body: &[u8], namespace: Option<String>, audit_id: String) -> ToolError {
    let status = serde_json::from_slice::<Status>(body)
        .ok()
        .filter(|s| s.kind == "Status" && s.code == code.as_u16())
        .unwrap_or_else(|| plain_status(code, body));
    ToolError::Cluster {
        status: Box::new(status),
        namespace,
        audit_id,
    }
}

/// A Status for a failure whose body is not one (a proxy's page, text).
fn plain_status(code: StatusCode, body: &[u8]) -> Status {
    let reason = code.canonical_reason().unwrap_or("Unknown").replace(' ', "");
    let text: String = String::from_utf8_lossy(body).chars().take(300).collect();
    let message = if text.trim().is_empty() {
        format!("the cluster answered {code}")
    } else {
        text.trim().to_string()
    };
    Status::failure(code.as_u16(), &reason, message)
}
