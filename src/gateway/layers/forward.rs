//! Why: the cluster must see every request as portcullis impersonating its caller, and the time it takes to answer is measured around that send alone.

use crate::audit::record::Counted;
use crate::gateway::error::RequestError;
use crate::gateway::forward::{Call, AGENT_EXTRA, CREDENTIAL_EXTRA};
use crate::gateway::headers;
use http::{header, Request, Response, Version};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

/// Makes a client's request portcullis's own ([`Forward`]): the cluster's
/// URI, the ServiceAccount token, the caller impersonated (with the
/// credential and agent session as extras), our Audit-ID, and the body
/// counted and held to the request limit; then times the answer.
#[derive(Clone, Copy)]
pub struct ForwardLayer<'a> {
    call: &'a Call<'a>,
}

impl<'a> ForwardLayer<'a> {
    /// Forward as `call` describes.
    pub fn new(call: &'a Call<'a>) -> Self {
        ForwardLayer { call }
    }
}

impl<'a, S> tower::Layer<S> for ForwardLayer<'a> {
    type Service = Forward<'a, S>;

    fn layer(&self, inner: S) -> Forward<'a, S> {
        Forward { inner, call: self.call }
    }
}

/// The service [`ForwardLayer`] makes, over the send to the cluster `S`.
#[derive(Clone)]
pub struct Forward<'a, S> {
    inner: S,
    call: &'a Call<'a>,
}

impl<'a, S, B, RB> tower::Service<Request<B>> for Forward<'a, S>
where
    S: tower::Service<Request<Outgoing<B>>, Response = Response<RB>, Error = RequestError>,
{
    type Response = Response<RB>;
    type Error = RequestError;
    type Future = ForwardFuture<'a, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RequestError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> ForwardFuture<'a, S::Future> {
        let state = match build_request(self.call, request) {
            Err(error) => State::Refused { error: Some(error) },
            Ok(request) => State::Sending {
                started: Instant::now(),
                inner: self.inner.call(request),
            },
        };
        ForwardFuture { state, call: self.call }
    }
}

pin_project! {
    /// [`Forward`]'s future: the cluster's answer, timed.
    pub struct ForwardFuture<'a, F> {
        #[pin]
        state: State<F>,
        call: &'a Call<'a>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Refused { error: Option<RequestError> },
        Sending { #[pin] inner: F, started: Instant },
    }
}

impl<F, RB> Future for ForwardFuture<'_, F>
where
    F: Future<Output = Result<Response<RB>, RequestError>>,
{
    type Output = Result<Response<RB>, RequestError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Refused { error } => {
                let error = error.take().expect("a ForwardFuture is not polled after it is ready");
                Poll::Ready(Err(error))
            }
            StateProj::Sending { inner, started } => {
                let response = ready!(inner.poll(cx))?;
                let call = *this.call;
                call.upstream
                    .latency(&call.metrics.upstream_latency)
                    .observe(started.elapsed().as_secs_f64());
                Poll::Ready(Ok(response))
            }
        }
    }
}

/// A request body as portcullis sends it: counted for the audit row, and
/// held to the request limit.
pub type Outgoing<B> = http_body_util::Limited<Counted<B>>;

/// The request as portcullis sends it.
fn build_request<B>(call: &Call<'_>, request: Request<B>) -> Result<Request<Outgoing<B>>, RequestError> {
    let (mut parts, incoming) = request.into_parts();
    let narrowed = call
        .narrowed_by
        .as_deref()
        .map(|terms| crate::gateway::query::with_field_selector(parts.uri.query(), terms));
    let query = narrowed.as_deref().or(parts.uri.query());
    // Checked as it leaves, for the raw API and MCP tools alike, with
    // portcullis's own additions (a held write's `dryRun=All`, a Secrets
    // list's field selector) counted.
    crate::gateway::router::check_query(query)?;
    parts.uri = call
        .upstream
        .uri(call.path, query)
        .map_err(|_| RequestError::Unforwardable)?;
    parts.version = Version::HTTP_11;
    let headers = &mut parts.headers;
    headers.insert(header::AUTHORIZATION, call.upstream.authorization());
    let user = call.identity.principal.kube_user();
    let credential = (CREDENTIAL_EXTRA, call.identity.credential_id.as_str());
    let extras = match &call.identity.agent {
        Some(agent) => &[credential, (AGENT_EXTRA, agent.id.as_str())][..],
        None => &[credential][..],
    };
    headers::impersonate(headers, user, &call.groups, extras)
        .map_err(|e| RequestError::Internal { cause: e.to_string() })?;
    headers.insert(headers::AUDIT_ID, headers::audit_id_value(call.audit_id));
    let counted = Counted::new(incoming, call.sent.clone());
    let limited = http_body_util::Limited::new(counted, call.limits.request_body_bytes as usize);
    Ok(Request::from_parts(parts, limited))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::classify::{classify, RequestInfo};
    use crate::gateway::fixture::{person, Fixture};
    use crate::identity::Identity;
    use http::Method;
    use std::sync::atomic::Ordering;
    use tower::{ServiceBuilder, ServiceExt};

    /// `identity`'s request for `path` to the fixture's cluster `c`, with
    /// no groups.
    fn call_to_c<'a>(f: &'a Fixture, path: &'a str, info: &'a RequestInfo, identity: &'a Identity) -> Call<'a> {
        Call {
            upstream: f.pipeline.upstream("c").unwrap(),
            path,
            info,
            identity,
            groups: Vec::new(),
            reveal_secrets: false,
            audit_id: uuid::Uuid::now_v7(),
            limits: f.pipeline.limits(),
            metrics: &f.pipeline.metrics,
            sent: Default::default(),
            narrowed_by: None,
            stream_groups: None,
            recorder: None,
            for_write: false,
        }
    }

    #[tokio::test]
    async fn the_cluster_sees_the_caller_impersonated_with_our_token_and_audit_id() {
        let f = Fixture::new("").await;
        let path = "/api/v1/namespaces/shop/configmaps";
        let info = classify(&Method::POST, path, None);
        let identity = person();
        let mut call = call_to_c(&f, path, &info, &identity);
        call.groups = vec!["portcullis:edit".into()];
        let audit_id = call.audit_id;
        let authorization = call.upstream.authorization();
        let service = ServiceBuilder::new().layer(ForwardLayer::new(&call)).service_fn(
            |request: Request<Outgoing<crate::body::Body>>| {
                let headers = request.headers().clone();
                async move {
                    let sent = http_body_util::BodyExt::collect(request.into_body())
                        .await
                        .unwrap()
                        .to_bytes();
                    assert_eq!(sent.as_ref(), b"{}");
                    Ok::<_, RequestError>(Response::new(headers))
                }
            },
        );
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .body(crate::body::full("{}"))
            .unwrap();
        let Ok(response) = service.oneshot(request).await else {
            panic!("the layer refused the request");
        };
        let seen = response.into_body();
        assert_eq!(seen["impersonate-user"], "user:ana");
        assert_eq!(seen["impersonate-group"], "portcullis:edit");
        assert_eq!(seen[header::AUTHORIZATION], authorization);
        assert_eq!(seen["audit-id"], audit_id.to_string().as_str());
        assert_eq!(call.sent.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn each_answer_is_counted_in_its_clusters_latency_series() {
        let f = Fixture::new("").await;
        let path = "/api/v1/namespaces/shop/configmaps/a";
        let info = classify(&Method::GET, path, None);
        let identity = person();
        let call = call_to_c(&f, path, &info, &identity);
        for _ in 0..3 {
            let service = ServiceBuilder::new().layer(ForwardLayer::new(&call)).service_fn(
                |_: Request<Outgoing<crate::body::Body>>| async { Ok::<_, RequestError>(Response::new(())) },
            );
            let request = Request::get(path).body(crate::body::empty()).unwrap();
            assert!(service.oneshot(request).await.is_ok());
        }
        let text = f.pipeline.metrics.render();
        let count = text
            .lines()
            .find(|line| line.starts_with("portcullis_upstream_latency_seconds_count{cluster=\"c\"}"))
            .unwrap_or_else(|| panic!("no latency count for cluster c in {text}"));
        assert!(count.ends_with(" 3"), "{count}");
    }
}
