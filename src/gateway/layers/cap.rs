//! Why: a response is relayed as it streams, so its size cap and deadline wrap its body as it passes.

use crate::config::Limits;
use crate::gateway::error::RequestError;
use crate::gateway::headers;
use crate::gateway::limits::{BodyOutcome, Capped};
use http::{header, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use prometheus_client::metrics::gauge::Gauge;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// What the cap needs to know about one request.
#[derive(Debug, Clone)]
struct Settings {
    /// The response body's size cap.
    cap: u64,
    /// The request timeout, counted from the send.
    timeout: Duration,
    /// A long-running request: neither cap nor deadline, counted as open.
    streaming: bool,
    /// The client asked for an upgrade: a 101 is spliced, not capped.
    upgrade: bool,
    /// Open streams, for the metrics.
    open: Gauge,
}

/// Puts the cluster's answer under the size cap and the deadline
/// ([`Cap`]): a long-running request gets neither, because both would cut
/// a healthy stream, and counts as open while it lasts.
#[derive(Debug, Clone)]
pub struct CapLayer {
    settings: Settings,
}

impl CapLayer {
    /// The cap for a request under `limits`; `streaming` and `upgrade` as
    /// `forward` found them; `open` counts open streams.
    pub fn new(limits: &Limits, streaming: bool, upgrade: bool, open: Gauge) -> Self {
        CapLayer {
            settings: Settings {
                cap: limits.response_bytes,
                timeout: limits.request_timeout,
                streaming,
                upgrade,
                open,
            },
        }
    }
}

impl<S> tower::Layer<S> for CapLayer {
    type Service = Cap<S>;

    fn layer(&self, inner: S) -> Cap<S> {
        Cap {
            inner,
            settings: self.settings.clone(),
        }
    }
}

/// The service [`CapLayer`] makes: `S`'s answer, its body [`Capped`].
#[derive(Debug, Clone)]
pub struct Cap<S> {
    inner: S,
    settings: Settings,
}

impl<S, R, B> tower::Service<Request<R>> for Cap<S>
where
    S: tower::Service<Request<R>, Response = Response<B>, Error = RequestError>,
{
    type Response = Response<Capped<B>>;
    type Error = RequestError;
    type Future = CapFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RequestError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<R>) -> CapFuture<S::Future> {
        CapFuture {
            inner: self.inner.call(request),
            settings: Some(self.settings.clone()),
            sent: Instant::now(),
        }
    }
}

pin_project! {
    /// [`Cap`]'s future: the inner answer, capped.
    pub struct CapFuture<F> {
        #[pin]
        inner: F,
        settings: Option<Settings>,
        sent: Instant,
    }
}

impl<F, B> Future for CapFuture<F>
where
    F: Future<Output = Result<Response<B>, RequestError>>,
{
    type Output = Result<Response<Capped<B>>, RequestError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let settings = this
            .settings
            .take()
            .expect("a CapFuture is not polled after it is ready");
        Poll::Ready(settings.apply(response, *this.sent))
    }
}

impl Settings {
    /// The answer's head and its body under the size cap and the deadline
    /// (a stream gets neither, and counts as open while it lasts; a 101 to
    /// an upgrade is left for `forward` to splice).
    fn apply<B>(self, mut response: Response<B>, sent: Instant) -> Result<Response<Capped<B>>, RequestError> {
        if self.upgrade && response.status() == StatusCode::SWITCHING_PROTOCOLS {
            return Ok(response.map(|body| Capped::new(body, None, None, Arc::default())));
        }
        if !self.streaming {
            if let Some(len) = content_length(response.headers()).filter(|len| *len > self.cap) {
                return Err(RequestError::ResponseTooLarge { len, limit: self.cap });
            }
        }
        headers::strip_response(response.headers_mut(), false);
        let outcome = Arc::new(BodyOutcome::default());
        Ok(response.map(|body| {
            if self.streaming {
                Capped::new(body, None, None, outcome).guarded(self.open)
            } else {
                Capped::new(body, Some(self.cap), Some(sent + self.timeout), outcome)
            }
        }))
    }
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body;
    use tower::{ServiceBuilder, ServiceExt};

    /// The cap over a "cluster" that answers `status` with `headers`.
    async fn capped(
        streaming: bool,
        upgrade: bool,
        status: u16,
        headers: &[(&'static str, &'static str)],
    ) -> Result<Response<Capped<crate::body::Body>>, RequestError> {
        let limits = Limits {
            response_bytes: 10,
            ..Limits::default()
        };
        let headers: Vec<_> = headers.to_vec();
        let answer = move |_: Request<()>| {
            let mut answer = Response::builder().status(status);
            for (name, value) in &headers {
                answer = answer.header(*name, *value);
            }
            std::future::ready(Ok::<_, RequestError>(answer.body(body::empty()).unwrap()))
        };
        let service = ServiceBuilder::new()
            .layer(CapLayer::new(&limits, streaming, upgrade, Gauge::default()))
            .service_fn(answer);
        service.oneshot(Request::new(())).await
    }

    #[tokio::test]
    async fn an_answer_announced_over_the_cap_is_refused_before_its_body_is_read() {
        let Err(refused) = capped(false, false, 200, &[("content-length", "11")]).await else {
            panic!("an answer over the cap passed");
        };
        assert!(matches!(refused, RequestError::ResponseTooLarge { len: 11, limit: 10 }));
    }

    #[tokio::test]
    async fn a_stream_announced_over_the_cap_is_not_cut() {
        let response = capped(true, false, 200, &[("content-length", "11")]).await.unwrap();
        assert_eq!(response.status(), 200);
    }

    #[tokio::test]
    async fn a_101_to_an_upgrade_keeps_the_headers_the_splice_needs() {
        let upgrade = [("connection", "Upgrade"), ("upgrade", "websocket")];
        let response = capped(true, true, 101, &upgrade).await.unwrap();
        assert_eq!(response.headers()["upgrade"], "websocket");
    }
}
