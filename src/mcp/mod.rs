//! `/mcp`: the MCP server AI agents use, on the same listener as the raw
//! Kubernetes API.
//!
//! Streamable HTTP through the rmcp crate, protocol revisions 2026-07-28
//! (stateless: `server/discover`, per-request `_meta`) and 2025-11-25
//! (`initialize`, `Mcp-Session-Id`) on the one endpoint; a client on either
//! gets the same tools and answers. `../shared/MCP.md` is the contract;
//! `docs/mcp.md` explains it to client authors.
//!
//! Before rmcp sees a request, [`Endpoint::serve`]:
//!
//! 1. takes the identity the `/mcp` door authenticated from the bearer token
//!    (a 401 carries the `resource_metadata` challenge), and refuses a
//!    credential that is not an agent's;
//! 2. applies the per-agent rate limit ([`crate::ratelimit`]), before the body is
//!    read (every credential of an agent shares it);
//! 3. reads the body under the request body limit and refuses a JSON-RPC
//!    batch, and JSON nested deeper than [`crate::document::MAX_DEPTH`];
//! 4. puts a [`Caller`] into the request's extensions, which rmcp hands to
//!    the tool with the request's parts.
//!
//! Each tool is a thin translation: it builds an `http::Request` for a
//! cluster path and sends it through [`Pipeline::call`], so it is classified,
//! impersonated, redacted and audited (with the tool's name and the agent's
//! session) like kubectl's requests. Layout: [`server`] (the handler and its
//! instructions), [`read_tools`], [`write_tools`] and [`whoami`] (the
//! tools), [`args`]
//! (their arguments as JSON Schema), [`context`] (one call's way into the
//! gateway), [`discovery`] (kind resolution), [`render`] and [`table`]
//! (compact text),
//! [`error`] (tool errors), [`sessions`] (2025-11-25 sessions kept in the
//! store, so they survive a restart and work on any replica).

pub mod args;
pub mod arguments;
pub mod context;
pub mod discovery;
pub mod error;
pub mod held;
pub mod read_tools;
pub mod render;
pub mod server;
pub mod sessions;
pub mod table;
pub mod whoami;
pub mod write_tools;

use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::{self, Body, ReadError};
use crate::config::Config;
use crate::document::DocumentError;
use crate::gateway::Pipeline;
use crate::identity::Identity;
use crate::status::Status;
use crate::store::Store;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use std::sync::Arc;
use tower::Service;

/// The 2025-11-25 revision's session header.
const SESSION_HEADER: &str = "mcp-session-id";

/// Who sends an MCP request: put into its extensions once authenticated, and
/// read by every tool from the request's parts.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The agent, as authenticated from the bearer token of this request.
    pub identity: Identity,
    /// The client's address, for audit rows.
    pub client: String,
}

/// The `/mcp` endpoint: checks in front of rmcp's Streamable HTTP service.
pub struct Endpoint {
    service: StreamableHttpService<server::Tools, LocalSessionManager>,
    limiter: crate::ratelimit::RateLimiter,
    body_limit: u64,
    body_within: std::time::Duration,
    challenge: String,
    owners: sessions::Owners,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("body_limit", &self.body_limit)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The endpoint in front of `pipeline`.
    pub fn new(pipeline: Arc<Pipeline>, config: &Config, store: Store) -> Endpoint {
        let sessions = Arc::new(sessions::StoredSessions::new(store.clone()));
        let shared = Arc::new(server::Shared::new(pipeline, store.clone(), config));
        let mut rmcp_config = StreamableHttpServerConfig::default()
            // A bearer token, never a cookie, authenticates every request, so
            // a DNS-rebinding page gains nothing: allow any Host and Origin
            // (portcullis is reached under many names behind load balancers).
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_max_request_body_bytes(usize::try_from(config.limits.request_body_bytes).unwrap_or(usize::MAX));
        // The config is non_exhaustive and has no builder method for this.
        rmcp_config.session_store = Some(sessions);
        let factory = move || Ok(server::Tools::new(shared.clone()));
        Endpoint {
            service: StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), rmcp_config),
            limiter: crate::ratelimit::RateLimiter::new(config.mcp.requests_per_minute, config.mcp.burst),
            body_limit: config.limits.request_body_bytes,
            body_within: config.limits.request_timeout,
            challenge: format!(
                "Bearer resource_metadata=\"{}\"",
                crate::oauth::metadata::Issuer::new(&config.public_url).resource_metadata_url()
            ),
            owners: sessions::Owners::new(store),
        }
    }

    /// The answer to a request whose token was refused (`status` is a 401,
    /// or a 503 when credentials cannot be checked).
    pub fn unauthorized(&self, status: &Status) -> Response<Body> {
        let retry_after = status.details.as_ref().and_then(|d| d.retry_after_seconds);
        let code = match status.code {
            401 => "unauthorized",
            429 => "rate_limited",
            _ => "unavailable",
        };
        let data = retry_after.map_or_else(|| json!({}), |seconds| json!({"retry_after_seconds": seconds}));
        let mut response = refusal(status.code, code, &status.message, data);
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if status.code == 401 {
            if let Ok(value) = HeaderValue::from_str(&self.challenge) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            }
        }
        response
    }

    /// Serve one authenticated `/mcp` request; `row` is its audit row.
    pub async fn serve<B>(&self, request: Request<B>, identity: Identity, row: &mut AuditRow) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
    {
        if !identity.is_agent() {
            row.refuse(Refusal::NotAgent);
            let message = "/mcp takes an agent's credential: create one with `portcullis agent add`";
            return refusal(403, "agent.required", message, json!({}));
        }
        let agent = identity.agent.as_ref().map(|a| a.id.clone()).unwrap_or_default();
        // Before the body is read: a flood costs a hash lookup, no more. Per
        // agent, not per credential: an OAuth session's every refresh makes
        // a credential, and the ones before stay valid for their hour.
        if let Err(wait) = self.limiter.check(&agent) {
            row.refuse(Refusal::RateLimited);
            let seconds = wait.as_secs().max(1);
            let message = format!("too many requests from this agent: wait {seconds} s");
            let mut response = refusal(429, "rate_limited", &message, json!({"retry_after_seconds": seconds}));
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            return response;
        }
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(session) = &session {
            if let Err(response) = self.owned(session, &agent, row).await {
                return *response;
            }
        }
        let (mut parts, incoming) = request.into_parts();
        let ending = parts.method == Method::DELETE;
        let body = if parts.method == Method::POST {
            match self.read_body(incoming, row).await {
                Ok(body) => body,
                Err(response) => return *response,
            }
        } else {
            Bytes::new()
        };
        parts.extensions.insert(Caller {
            identity,
            client: row.client.clone(),
        });
        let request = Request::from_parts(parts, Full::new(body));
        let Ok(response) = self.service.clone().call(request).await;
        if let (true, Some(session)) = (ending && response.status().is_success(), &session) {
            self.owners.forget(session);
        }
        let begun = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok());
        if let (None, Some(begun)) = (&session, begun) {
            if let Err(error) = self.owners.record(begun, &agent).await {
                tracing::error!(%error, "cannot record who began an MCP session");
                row.refuse(Refusal::CredentialsUnavailable);
                return refusal(
                    503,
                    "unavailable",
                    "portcullis cannot keep the session now; try again",
                    json!({}),
                );
            }
        }
        response.map(body::boxed)
    }

    /// Only the agent that began a session may name it; to any other it
    /// does not exist.
    async fn owned(&self, session: &str, agent: &str, row: &mut AuditRow) -> Result<(), Box<Response<Body>>> {
        match self.owners.allows(session, agent).await {
            Ok(sessions::Use::Own) => Ok(()),
            // One answer for both, so another's session ids are not
            // confirmed; the audit tells a stale session (a client back
            // after a day) from someone else's.
            Ok(refused) => {
                row.refuse(match refused {
                    sessions::Use::Foreign => Refusal::McpSessionForeign,
                    _ => Refusal::McpSessionUnknown,
                });
                let message = "no such session: initialize a new one";
                Err(Box::new(refusal(404, "session.not_found", message, json!({}))))
            }
            Err(error) => {
                tracing::error!(%error, "cannot look up who began an MCP session");
                row.refuse(Refusal::CredentialsUnavailable);
                let message = "portcullis cannot check the session now; try again";
                Err(Box::new(refusal(503, "unavailable", message, json!({}))))
            }
        }
    }

    /// The whole body, under the limit; a batch, and JSON nested deeper than
    /// [`crate::document::MAX_DEPTH`], are refused. Notes the tool called (if
    /// any) in the audit row.
    async fn read_body<B>(&self, incoming: B, row: &mut AuditRow) -> Result<Bytes, Box<Response<Body>>>
    where
        B: http_body::Body<Data = Bytes>,
    {
        let limit = usize::try_from(self.body_limit).unwrap_or(usize::MAX);
        let bytes = match crate::body::read_whole(incoming, limit, self.body_within).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge) => {
                row.refuse(Refusal::BodyTooLarge);
                let message = format!("the request body is larger than {} bytes", self.body_limit);
                let params = json!({"limit": self.body_limit});
                return Err(Box::new(refusal(413, "request.too_large", &message, params)));
            }
            Err(ReadError::TimedOut) => {
                row.refuse(Refusal::BodyTimedOut);
                let seconds = self.body_within.as_secs();
                let message = format!("the request body did not arrive whole within {seconds} s");
                let params = json!({"timeout_seconds": seconds});
                return Err(Box::new(refusal(408, "request.timed_out", &message, params)));
            }
            Err(ReadError::Cut) => {
                row.refuse(Refusal::BodyCutShort);
                let message = "the request body broke off";
                return Err(Box::new(refusal(400, "request.cut_short", message, json!({}))));
            }
        };
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            row.refuse(Refusal::Batch);
            let message = "JSON-RPC batches are not accepted: send one message per request";
            return Err(Box::new(refusal(400, "request.batch", message, json!({}))));
        }
        let message = match crate::document::parse_json(&bytes, crate::document::Bounds::body(limit)) {
            Ok(message) => Some(message),
            Err(error @ (DocumentError::TooDeep { limit } | DocumentError::TooManyNodes { limit })) => {
                row.refuse(Refusal::from(&error));
                let message = format!("the request body {error}");
                let code = match error {
                    DocumentError::TooDeep { .. } => "request.too_deep",
                    _ => "request.too_many_values",
                };
                return Err(Box::new(refusal(400, code, &message, json!({"limit": limit}))));
            }
            // Malformed JSON is rmcp's to answer, as a JSON-RPC parse error
            // (the size was bounded above).
            Err(_) => None,
        };
        if let Some(message) = message {
            // A session keeps its `initialize` while it is used: one the
            // size of any body would let an agent fill memory (and what is
            // stored of it is bounded again, see `sessions`).
            if message["method"] == "initialize" && bytes.len() > MAX_INITIALIZE {
                row.refuse(Refusal::BodyTooLarge);
                let message = format!("an initialize message is at most {MAX_INITIALIZE} bytes");
                let params = json!({"limit": MAX_INITIALIZE});
                return Err(Box::new(refusal(413, "request.too_large", &message, params)));
            }
            // A notification (no id) calls no tool.
            let request = message.get("id").is_some_and(|id| !id.is_null());
            if message["method"] == "tools/call" && request {
                row.tool = message["params"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(64)
                    .collect();
            }
        }
        Ok(bytes)
    }
}

/// The largest `initialize` message taken: client info and capabilities
/// are a few hundred bytes, an icon sent inline as a `data:` URI some tens
/// of KiB. rmcp keeps each session's in memory while it is used.
pub const MAX_INITIALIZE: usize = 64 * 1024;

/// An HTTP-level refusal: a JSON-RPC error without an id (the body was not
/// read, or is not acceptable), whose `data` has the same shape as a tool's
/// own errors: `{code, params, error}`.
fn refusal(status: u16, code: &str, message: &str, params: serde_json::Value) -> Response<Body> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32600,
            "message": format!("{code}: {message}"),
            "data": {"code": code, "params": params, "error": message},
        },
    });
    let mut response = Response::new(body::full(body.to_string()));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
