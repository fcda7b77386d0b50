//! Why: every request is one audit row and one log line, written when its answer ends, whichever door answers it.

use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::gateway::{headers, Pipeline, Trace};
use http::{Request, Response};
use ipnet::IpNet;
use pin_project_lite::pin_project;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

/// Opens a request's trace (its audit row) and, when the answer comes
/// back, stamps the audit id, logs the request and attaches the row to the
/// answer ([`Pipeline::finish`]). The trace travels to the door as a
/// request extension and comes back as a response extension.
#[derive(Debug, Clone, Copy)]
pub struct RecordLayer<'a> {
    pipeline: &'a Pipeline,
    audit_id: uuid::Uuid,
    peer: IpAddr,
    trusted_proxies: &'a [IpNet],
}

impl<'a> RecordLayer<'a> {
    /// Record request `audit_id` from `peer` in `pipeline`'s audit; the
    /// client is `peer` unless one of `trusted_proxies` names another.
    pub fn new(pipeline: &'a Pipeline, audit_id: uuid::Uuid, peer: IpAddr, trusted_proxies: &'a [IpNet]) -> Self {
        RecordLayer {
            pipeline,
            audit_id,
            peer,
            trusted_proxies,
        }
    }
}

impl<'a, S> tower::Layer<S> for RecordLayer<'a> {
    type Service = Record<'a, S>;

    fn layer(&self, inner: S) -> Record<'a, S> {
        Record { inner, layer: *self }
    }
}

/// The service [`RecordLayer`] makes.
#[derive(Debug, Clone)]
pub struct Record<'a, S> {
    inner: S,
    layer: RecordLayer<'a>,
}

impl<'a, S, R> tower::Service<Request<R>> for Record<'a, S>
where
    S: tower::Service<Request<R>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = RecordFuture<'a, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<R>) -> RecordFuture<'a, S::Future> {
        let started = Instant::now();
        let uri = request.uri();
        let mut row = AuditRow::arrived(self.layer.audit_id, request.method(), uri.path(), uri.query());
        let layer = self.layer;
        row.client = headers::address_text(headers::client_address(
            layer.peer,
            request.headers(),
            layer.trusted_proxies,
        ));
        request.extensions_mut().insert(Trace::new(row));
        RecordFuture {
            inner: self.inner.call(request),
            pipeline: self.layer.pipeline,
            audit_id: self.layer.audit_id,
            started,
        }
    }
}

pin_project! {
    /// [`Record`]'s future: the door's answer, recorded.
    pub struct RecordFuture<'a, F> {
        #[pin]
        inner: F,
        pipeline: &'a Pipeline,
        audit_id: uuid::Uuid,
        started: Instant,
    }
}

impl<F> Future for RecordFuture<'_, F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(mut response) = ready!(this.inner.poll(cx));
        let trace = response.extensions_mut().remove::<Trace>().unwrap_or_else(|| {
            // A door that dropped the trace is a bug; the request is still
            // one row.
            tracing::error!("a door answered without its request's trace");
            Trace::new(AuditRow::new(*this.audit_id, chrono::Utc::now()))
        });
        Poll::Ready(Ok(this.pipeline.finish(trace, response, *this.audit_id, *this.started)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::fixture::Fixture;
    use tower::{ServiceBuilder, ServiceExt};

    #[tokio::test]
    async fn the_door_gets_the_opened_trace_and_the_answer_carries_the_audit_id() {
        let f = Fixture::new("").await;
        let audit_id = uuid::Uuid::now_v7();
        let peer: IpAddr = "192.0.2.7".parse().unwrap();
        let service = ServiceBuilder::new()
            .layer(RecordLayer::new(&f.pipeline, audit_id, peer, &[]))
            .service_fn(|mut request: Request<()>| {
                let trace = request.extensions_mut().remove::<Trace>().expect("the trace is opened");
                assert_eq!(trace.row.path, "/healthz");
                assert_eq!(trace.row.client, "192.0.2.7");
                let mut response = Response::new(crate::body::empty());
                response.extensions_mut().insert(trace);
                std::future::ready(Ok::<_, Infallible>(response))
            });
        let request = Request::builder().uri("/healthz").body(()).unwrap();
        let Ok(response) = service.oneshot(request).await;
        assert_eq!(response.headers()["audit-id"], audit_id.to_string().as_str());
        assert!(
            response.extensions().get::<Trace>().is_none(),
            "the trace is spent on the row"
        );
    }
}
