//! `/healthz`, `/readyz`, `/metrics`: for probes and scrapes, which are not
//! audited.

use crate::body::{self, Body};
use crate::gateway::Pipeline;
use http::{HeaderValue, Response};

/// `/readyz`: 200 when every cluster is reachable, else 503 naming those
/// that are not.
pub(super) fn readyz(pipeline: &Pipeline) -> Response<Body> {
    let down: Vec<&str> = pipeline
        .upstreams()
        .filter(|u| !u.is_reachable())
        .map(|u| u.name.as_str())
        .collect();
    if down.is_empty() {
        return text(200, "ok".into());
    }
    text(503, format!("unreachable clusters: {}\n", down.join(", ")))
}

/// A plain-text answer.
pub(super) fn text(code: u16, body: String) -> Response<Body> {
    let mut response = Response::new(body::full(body));
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
