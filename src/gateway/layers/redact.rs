//! Why: Secret values never leave the cluster unless a role reveals them, and only a layer sees both the request it narrows to JSON and the answer it redacts.

use crate::body::{self, Body, BoxError};
use crate::gateway::classify::RequestInfo;
use crate::gateway::error::RequestError;
use crate::gateway::redact::{plan, Transform};
use crate::identity::Identity;
use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// Redacts the answer to a request whose caller may not see Secret values
/// ([`Redact`]; how, in [`crate::gateway::redact`]). Every other answer
/// passes untouched and pays nothing but the boxing of its body.
#[derive(Debug, Clone, Copy)]
pub struct RedactLayer<'a> {
    info: &'a RequestInfo,
    identity: &'a Identity,
    reveal_secrets: bool,
    limit: u64,
}

impl<'a> RedactLayer<'a> {
    /// Redaction for `info` sent by `identity`; `reveal_secrets` as the
    /// policy found; `limit` bounds one watch event.
    pub fn new(info: &'a RequestInfo, identity: &'a Identity, reveal_secrets: bool, limit: u64) -> Self {
        RedactLayer {
            info,
            identity,
            reveal_secrets,
            limit,
        }
    }
}

impl<'a, S> tower::Layer<S> for RedactLayer<'a> {
    type Service = Redact<'a, S>;

    fn layer(&self, inner: S) -> Redact<'a, S> {
        Redact { inner, layer: *self }
    }
}

/// The service [`RedactLayer`] makes: plans the request (JSON only, or 406
/// before anything is sent), then transforms `S`'s answer.
#[derive(Debug, Clone)]
pub struct Redact<'a, S> {
    inner: S,
    layer: RedactLayer<'a>,
}

impl<S, R, B> tower::Service<Request<R>> for Redact<'_, S>
where
    S: tower::Service<Request<R>, Response = Response<B>, Error = RequestError>,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = RequestError;
    type Future = RedactFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RequestError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<R>) -> RedactFuture<S::Future> {
        let layer = self.layer;
        let state = match plan(layer.info, layer.identity, layer.reveal_secrets, request.headers_mut()) {
            Err(error) => State::Refused { error: Some(error) },
            Ok(transform) => State::Sending {
                inner: self.inner.call(request),
                transform,
                limit: layer.limit,
            },
        };
        RedactFuture { state }
    }
}

/// A redacted answer being read: its own future, boxed, made only for the
/// answers that are redacted.
type Applying = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

pin_project! {
    /// [`Redact`]'s future.
    pub struct RedactFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Refused { error: Option<RequestError> },
        Sending { #[pin] inner: F, transform: Transform, limit: u64 },
        Applying { applying: Applying },
    }
}

impl<F, B> Future for RedactFuture<F>
where
    F: Future<Output = Result<Response<B>, RequestError>>,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response<Body>, RequestError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let applying = match state.as_mut().project() {
                StateProj::Refused { error } => {
                    let error = error.take().expect("a RedactFuture is not polled after it is ready");
                    return Poll::Ready(Err(error));
                }
                StateProj::Applying { applying } => return applying.as_mut().poll(cx).map(Ok),
                StateProj::Sending {
                    inner,
                    transform,
                    limit,
                } => {
                    let response = ready!(inner.poll(cx))?;
                    if *transform == Transform::Pass {
                        return Poll::Ready(Ok(response.map(body::boxed)));
                    }
                    let (parts, body) = response.into_parts();
                    Box::pin(transform.apply(parts, body, *limit)) as Applying
                }
            };
            state.set(State::Applying { applying });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::classify::classify;
    use crate::gateway::fixture::person;
    use http::Method;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tower::{ServiceBuilder, ServiceExt};

    /// A `GET path` accepting `accept` through the layer; the answer, and
    /// how many requests reached the "cluster".
    async fn redacted(path: &str, accept: &str) -> (Result<Response<Body>, RequestError>, usize) {
        let info = classify(&Method::GET, path, None);
        let identity = person();
        let sent = Arc::new(AtomicUsize::new(0));
        let seen = sent.clone();
        let service = ServiceBuilder::new()
            .layer(RedactLayer::new(&info, &identity, false, 1024))
            .service_fn(move |request: Request<()>| {
                seen.fetch_add(1, Ordering::SeqCst);
                // The request the cluster sees asks for JSON only.
                assert_eq!(request.headers()[http::header::ACCEPT], "application/json");
                let answer = Response::builder()
                    .header("content-type", "application/json")
                    .body(body::full(r#"{"kind":"Secret","apiVersion":"v1","data":{"k":"dg=="}}"#))
                    .unwrap();
                std::future::ready(Ok::<_, RequestError>(answer))
            });
        let request = Request::builder()
            .header(http::header::ACCEPT, accept)
            .body(())
            .unwrap();
        let result = service.oneshot(request).await;
        (result, sent.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_secret_is_redacted_on_its_way_back() {
        let (result, sent) = redacted("/api/v1/namespaces/shop/secrets/db", "application/json").await;
        let bytes = http_body_util::BodyExt::collect(result.unwrap().into_body())
            .await
            .unwrap()
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("<redacted, 1 bytes>"), "{text}");
        assert_eq!(sent, 1);
    }

    #[tokio::test]
    async fn a_client_accepting_no_json_is_refused_before_anything_is_sent() {
        let (result, sent) = redacted("/api/v1/namespaces/shop/secrets/db", "application/yaml").await;
        assert!(matches!(result, Err(RequestError::NotAcceptable { .. })), "{result:?}");
        assert_eq!(sent, 0);
    }
}
