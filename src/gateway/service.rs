//! The pipeline as a `tower::Service`, so a door calls it the way tower
//! calls any service (`ServiceExt::oneshot`), and layers can wrap it.
//!
//! What the door learnt (the cluster, the Kubernetes path, who sends it,
//! the request's trace) travels into the service as one typed request
//! extension, [`Entry`]; the trace comes back, filled in by the stages, in
//! the response's extensions. A refusal is answered here (the respond
//! stage), so the service never fails.

use super::{Pipeline, Stages, Trace};
use crate::body::{self, Body};
use crate::identity::Identity;
use http::{Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// What a door hands the pipeline with a request, as its extension.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The cluster.
    pub upstream: Arc<super::upstream::Upstream>,
    /// Kubernetes path, raw.
    pub path: String,
    /// Who sends it, as the door authenticated.
    pub identity: Identity,
    /// The request's audit id.
    pub audit_id: uuid::Uuid,
    /// What the stages learn; comes back in the response's extensions.
    pub trace: Trace,
}

/// A raw Kubernetes API request's way through the pipeline, as a service.
/// Always ready: the pipeline queues nothing of its own.
#[derive(Debug, Clone)]
pub struct PipelineService {
    pipeline: Arc<Pipeline>,
}

impl PipelineService {
    /// The service over `pipeline`.
    pub fn new(pipeline: Arc<Pipeline>) -> Self {
        PipelineService { pipeline }
    }
}

/// A service's answer, once its own future ends. Boxed: an async stage
/// chain has no nameable type, and a door would otherwise carry its size.
pub type PipelineFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

impl<B> tower::Service<Request<B>> for PipelineService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<body::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = PipelineFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<B>) -> PipelineFuture {
        let pipeline = self.pipeline.clone();
        Box::pin(async move {
            let Some(mut entry) = request.extensions_mut().remove::<Entry>() else {
                // A door that forgot the entry is a bug of portcullis, and
                // must not reach the cluster.
                let mut trace = Trace::new(crate::audit::row::AuditRow::default());
                let error = super::error::RequestError::Internal {
                    cause: "a request reached the pipeline without its entry".into(),
                };
                return Ok(pipeline.refusal(&mut trace, &error));
            };
            let stages = Stages {
                upstream: &entry.upstream,
                path: &entry.path,
                identity: &entry.identity,
                audit_id: entry.audit_id,
                limits: pipeline.limits(),
                reveal_secret: false,
            };
            let result = pipeline.through(stages, request, &mut entry.trace).await;
            let mut response = pipeline.respond(&mut entry.trace, result);
            response.extensions_mut().insert(entry.trace);
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{held_agent, Fixture};
    use super::*;
    use crate::audit::row::AuditRow;
    use http::Method;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_refused_write_is_answered_with_its_status_and_the_trace_comes_back() {
        let f = Fixture::new("").await;
        let pipeline = f.pipeline.clone();
        let path = "/api/v1/namespaces/shop/configmaps";
        let audit_id = uuid::Uuid::now_v7();
        let entry = Entry {
            upstream: pipeline.upstream("c").unwrap().clone(),
            path: path.into(),
            identity: held_agent(),
            audit_id,
            trace: Trace::new(AuditRow::arrived(audit_id, &Method::POST, path, None)),
        };
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .body(body::full(r#"{"kind":"ConfigMap"}"#))
            .unwrap();
        request.extensions_mut().insert(entry);
        let response = PipelineService::new(pipeline).oneshot(request).await.unwrap();
        // No [approvals] key_file: the write cannot be held, so it is refused.
        assert_eq!(response.status(), 503);
        let trace = response.extensions().get::<Trace>().expect("the trace comes back");
        assert_eq!(trace.row.refused, "approvals_unconfigured");
        assert_eq!(f.connections(), 0);
    }

    #[tokio::test]
    async fn a_request_without_its_entry_never_reaches_the_cluster() {
        let f = Fixture::new("").await;
        let request = Request::builder().uri("/api/v1/pods").body(body::full("")).unwrap();
        let response = PipelineService::new(f.pipeline.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), 500);
        assert_eq!(f.connections(), 0);
    }
}
