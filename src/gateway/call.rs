//! The internal entry point for MCP tools.
//!
//! A tool builds an ordinary `http::Request` for a cluster path and sends it
//! here. It then meets the same stages as a request from the listener —
//! classify, policy, the audit's commit of a write, forward under
//! impersonation, Secret redaction, the size cap, its audit row — so a tool
//! can never reach a cluster any other way than kubectl traffic does. Only
//! routing and authentication are skipped: the `/mcp` request that carried
//! the tool call was authenticated already, and its identity is passed on.

use super::error::RequestError;
use super::{Pipeline, Stages, Trace};
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::identity::Identity;
use http::{Request, Response};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// Who sends a tool's cluster request, and for which tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// The agent, as authenticated on `/mcp`.
    pub identity: &'a Identity,
    /// The MCP client's address, for the audit row.
    pub client: &'a str,
    /// The cluster named by the tool's arguments.
    pub cluster: &'a str,
    /// The tool's name, written to the audit row.
    pub tool: &'a str,
    /// `read_secret` only: this one `get` of a Secret may carry its values to
    /// the agent; the row records it as a reveal. Ignored for any other
    /// request.
    pub reveal_secret: bool,
}

impl Pipeline {
    /// Send a tool's `request` (path and query relative to the cluster, e.g.
    /// `/api/v1/namespaces/shop/pods?limit=500`) through the request path.
    /// Never fails: portcullis's own refusals come back as a Status response,
    /// and every response carries the `Audit-Id` of its row.
    pub async fn call(&self, call: ToolCall<'_>, request: Request<Body>) -> Response<Body> {
        let audit_id = crate::audit::id::new();
        let span = tracing::info_span!("request", %audit_id, tool = call.tool);
        self.call_traced(call, request, audit_id).instrument(span).await
    }

    async fn call_traced(&self, call: ToolCall<'_>, request: Request<Body>, audit_id: uuid::Uuid) -> Response<Body> {
        let started = Instant::now();
        let uri = request.uri().clone();
        let mut row = AuditRow::arrived(audit_id, request.method(), uri.path(), uri.query());
        row.client = call.client.to_string();
        row.cluster = call.cluster.to_string();
        row.tool = call.tool.to_string();
        row.identify(call.identity);
        let mut trace = Trace::new(row);
        // The same refusals as a path from the listener (dot segments,
        // encoded slashes), though a tool builds its paths itself.
        let routed = super::router::route(&format!("/clusters/{}{}", call.cluster, uri.path())).map(|_| ());
        let result = match (routed, self.clusters.get(call.cluster)) {
            (Err(error), _) => Err(error),
            (Ok(()), None) => Err(unknown_cluster(call.cluster)),
            (Ok(()), Some(upstream)) => {
                let stages = Stages {
                    upstream,
                    path: uri.path(),
                    identity: call.identity,
                    audit_id,
                    limits: &self.tool_limits,
                    reveal_secret: call.reveal_secret,
                };
                self.through(stages, request, &mut trace).await
            }
        };
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                let mut response = self.refusal(&mut trace, &error);
                response.extensions_mut().insert(Refused(Arc::new(error)));
                response
            }
        };
        self.finish(trace, response, audit_id, started)
    }

    /// The largest cluster response relayed, in bytes.
    pub fn response_limit(&self) -> u64 {
        self.limits.response_bytes
    }

    /// The names of the clusters served, sorted.
    pub fn cluster_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.clusters.keys().cloned().collect();
        names.sort();
        names
    }
}

/// Put into the extensions of a tool's response when portcullis itself
/// refused or failed the request (the cluster never answered it), so the
/// tool maps the error itself rather than its Status.
#[derive(Debug, Clone)]
pub struct Refused(pub Arc<RequestError>);

/// A cluster name this portcullis does not serve.
pub(super) fn unknown_cluster(cluster: &str) -> RequestError {
    RequestError::UnknownCluster {
        cluster: cluster.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::fixture::{person, Fixture};

    async fn tool_call(f: &Fixture, cluster: &str, path: &str) -> Response<Body> {
        let identity = person();
        let call = ToolCall {
            identity: &identity,
            client: "127.0.0.1",
            cluster,
            tool: "get_resource",
            reveal_secret: false,
        };
        let request = Request::builder().uri(path).body(crate::body::empty()).unwrap();
        f.pipeline.call(call, request).await
    }

    #[tokio::test]
    async fn a_tool_request_for_a_cluster_not_served_carries_its_refusal_and_an_audit_id() {
        let f = Fixture::new("").await;
        let response = tool_call(&f, "other", "/api/v1/namespaces/shop/pods").await;
        assert_eq!(response.status(), http::StatusCode::NOT_FOUND);
        assert!(response.headers().contains_key("audit-id"));
        let Some(Refused(error)) = response.extensions().get::<Refused>() else {
            panic!("no refusal in the response's extensions");
        };
        assert!(matches!(&**error, RequestError::UnknownCluster { cluster } if cluster == "other"));
        assert_eq!(f.connections(), 0);
    }

    #[tokio::test]
    async fn a_tool_path_with_a_dot_segment_is_refused_like_a_listener_path() {
        let f = Fixture::new("").await;
        let response = tool_call(&f, "c", "/api/v1/namespaces/shop/../kube-system/secrets").await;
        assert_eq!(response.status(), http::StatusCode::BAD_REQUEST);
        let refused = response.extensions().get::<Refused>().map(|r| r.0.clone());
        assert!(
            matches!(refused.as_deref(), Some(RequestError::DotSegment)),
            "{refused:?}"
        );
        assert_eq!(f.connections(), 0);
    }

    #[tokio::test]
    async fn a_tool_request_the_stages_pass_reaches_the_cluster() {
        let f = Fixture::new("").await;
        let response = tool_call(&f, "c", "/api/v1/namespaces/shop/pods").await;
        // The fixture's cluster closes the connection: a failure of
        // portcullis's own, but only after the request reached it.
        assert!(f.connections() >= 1);
        let refused = response.extensions().get::<Refused>().map(|r| r.0.clone());
        assert!(
            matches!(
                refused.as_deref(),
                Some(RequestError::UpstreamUnavailable { .. } | RequestError::UpstreamFailed { .. })
            ),
            "{refused:?}"
        );
    }
}
