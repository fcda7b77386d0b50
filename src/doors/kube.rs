//! `/clusters/<name>/…`: the raw Kubernetes API door. An unknown cluster
//! and a client's `Impersonate-*` headers are refused before the token is
//! read, so no identity claim is ever weighed; then the pipeline, called as
//! a `tower::Service` with what the door learnt as the request's
//! [`Entry`]. A body the pipeline leaves unread when portcullis refuses
//! the request is read to its end, within a bound, before the refusal is
//! sent ([`super::unread`]), so that every client reads it whole.

use super::unread::{self, Lent};
use super::Doors;
use crate::body::Body;
use crate::gateway::error::RequestError;
use crate::gateway::service::{Entry, PipelineService};
use crate::gateway::Trace;
use http::{Request, Response};
use hyper::body::Incoming;
use tower::ServiceExt;

impl Doors {
    /// A request for the cluster its row names (`trace.row.cluster`) at
    /// Kubernetes path `path`. When portcullis refuses it, what the client
    /// still sends of its body is read and discarded first
    /// ([`Doors::drain`]).
    pub(super) async fn cluster_request(
        &self,
        path: String,
        request: Request<Incoming>,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        let (request, unread) = unread::lend(request);
        let result = self.lent_request(path, request, audit_id, trace).await;
        if result.is_err() || !trace.row.refused.is_empty() {
            // The refusal is in the row before the drain: a client that
            // goes away meanwhile leaves the row of its refusal.
            let response = self.pipeline.respond(trace, result);
            self.drain(unread).await;
            return Ok(response);
        }
        result
    }

    async fn lent_request(
        &self,
        path: String,
        mut request: Request<Lent<Incoming>>,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        let upstream = self.pipeline.upstream(&trace.row.cluster)?.clone();
        // Refused before authenticating: an identity claim is never weighed.
        if let Some(name) = crate::gateway::headers::has_impersonation(request.headers()) {
            let header = name.to_string();
            return Err(RequestError::IdentityHeader { header });
        }
        let identity = self
            .authenticator
            .authenticate(request.headers(), &trace.row.client)
            .await
            .map_err(|e| self.unauthorized(e, trace))?;
        trace.row.identify(&identity);
        // The trace travels with the request and comes back with the
        // response; the stages write its row if the client goes away.
        let trace_out = std::mem::replace(trace, Trace::lent());
        request.extensions_mut().insert(Entry {
            upstream,
            path,
            identity,
            audit_id,
            trace: trace_out,
        });
        let Ok(mut response) = PipelineService::new(self.pipeline.clone()).oneshot(request).await;
        match response.extensions_mut().remove::<Trace>() {
            Some(back) => *trace = back,
            // A bug of the stages; the request is still a row.
            None => trace.audited = true,
        }
        Ok(response)
    }
}
