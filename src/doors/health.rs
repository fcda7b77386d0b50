//! `/healthz`, `/readyz`, `/metrics`: for probes and scrapes, which are not
//! audited.

use crate::body::{self, Body};
use crate::gateway::Pipeline;
use http::{HeaderValue, Response};

/// `/readyz`: 200 while some cluster is reachable (naming those that are
/// not), 503 when none is. One cluster down is down for every replica
/// alike: taking them all out of service would only add sign-in, the
/// approval pages, the audit webhook and the other clusters to the outage
/// (that cluster's own requests answer 503 meanwhile).
pub(super) fn readyz(pipeline: &Pipeline) -> Response<Body> {
    let (mut up, mut down) = (0, Vec::new());
    for upstream in pipeline.upstreams() {
        if upstream.is_reachable() {
            up += 1;
        } else {
            down.push(upstream.name.as_str());
        }
    }
    match (up, down.is_empty()) {
        (_, true) => text(200, "ok".into()),
        (0, false) => text(503, format!("unreachable clusters: {}\n", down.join(", "))),
        _ => text(200, format!("ok; unreachable clusters: {}\n", down.join(", "))),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::fixture::Fixture;

    #[tokio::test]
    async fn readyz_is_unready_when_no_cluster_is_reachable() {
        // The fixture's one cluster closes every connection it is offered.
        let f = Fixture::new("").await;
        assert_eq!(readyz(&f.pipeline).status(), 200, "reachable until probed");
        let upstream = f.pipeline.upstream("c").unwrap();
        upstream.refresh(f.pipeline.audit().writer()).await;
        assert!(!upstream.is_reachable());
        let answer = readyz(&f.pipeline);
        assert_eq!(answer.status(), 503);
    }
}
