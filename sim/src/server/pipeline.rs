//! The per-request pipeline, in the order a request meets it.

use super::log::RecordedRequest;
use super::State;
use crate::body::{self, Body};
use crate::faults::{self, FaultAction};
use crate::request_info::{classify, RequestInfo, Unclassifiable};
use crate::status::Status;
use crate::{auth, discovery, handlers, rbac, registry, reviews, streams, UserInfo};
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use std::sync::Arc;

/// The request was dropped on purpose (fault injection): hyper closes the
/// connection (HTTP/1.1) or resets the stream (HTTP/2).
#[derive(Debug, thiserror::Error)]
#[error("fault injection: connection closed without an answer")]
pub(crate) struct Dropped;

/// Serve one request: everything a request meets, in order.
pub(crate) async fn serve(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Dropped> {
    // The audit id joins our record, the response and any caller's audit.
    let audit_id = audit_id(&req);
    // Recorded before anything can refuse it, so tests see every arrival.
    let seq = state.log.push(record(&req, &audit_id));
    // Faults act like a failing cluster or network, whoever is asking.
    let (mut cut, mut frames) = (None, None);
    match state.faults.check(req.method(), req.uri().path()) {
        Some(FaultAction::CloseConnection) => return Err(Dropped),
        Some(FaultAction::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(FaultAction::CutBody { after_bytes }) => cut = Some(after_bytes),
        Some(FaultAction::Unsized { frame_bytes }) => frames = Some(frame_bytes),
        Some(FaultAction::Status(status)) => return Ok(finish(&state, seq, &audit_id, error(status))),
        Some(FaultAction::Body {
            content_type,
            body,
            code,
        }) => return Ok(finish(&state, seq, &audit_id, raw(code, &content_type, body))),
        None => {}
    }
    let mut response = authorized_dispatch(&state, seq, req).await;
    if let Some(after_bytes) = cut {
        response = response.map(|b| faults::cut_body(b, after_bytes));
    }
    if let Some(frame_bytes) = frames {
        response.headers_mut().remove(http::header::CONTENT_LENGTH);
        response = response.map(|b| faults::unsized_body(b, frame_bytes));
    }
    Ok(finish(&state, seq, &audit_id, response))
}

/// Authenticate, impersonate, classify, authorize, dispatch.
async fn authorized_dispatch(state: &State, seq: u64, req: Request<Incoming>) -> Response<Body> {
    // Who is calling: a static bearer token, else 401.
    let user = match state.tokens.authenticate(req.headers()) {
        Ok(user) => user,
        Err(status) => return error(status),
    };
    state.log.complete(seq, |r| r.user = Some(user.clone()));
    // Impersonate-* headers switch to the user RBAC should judge.
    let impersonated = match auth::impersonate(&user, req.headers(), &*state.store) {
        Ok(impersonated) => impersonated,
        Err(status) => return error(status),
    };
    state.log.complete(seq, |r| r.impersonated = impersonated.clone());
    let effective = impersonated.unwrap_or(user);
    // What the request is, in Kubernetes' words.
    let info = match classify(req.method(), req.uri().path(), req.uri().query()) {
        Ok(info) => info,
        Err(unclassifiable) => return unclassifiable_answer(&req, unclassifiable),
    };
    state.log.complete(seq, |r| r.verb = info.verb.clone());
    // RBAC decides, for non-resource paths too.
    if !rbac::allowed(&*state.store, &effective, &info) {
        return error(rbac::forbidden(&effective, &info));
    }
    dispatch(state, &effective, req, info).await
}

/// Route an authorized request to what serves it.
async fn dispatch(state: &State, user: &UserInfo, req: Request<Incoming>, info: RequestInfo) -> Response<Body> {
    if !info.is_resource_request {
        let discovery = matches!(*req.method(), http::Method::GET | http::Method::HEAD)
            .then(|| discovery::handle(req.uri().path(), req.headers()))
            .flatten();
        return discovery.unwrap_or_else(|| discovery::not_found(req.uri().path()));
    }
    if !registry::group_served(&info.api_group) {
        return discovery::not_found(req.uri().path());
    }
    if info.is_review() {
        return review(state, user, req, &info).await;
    }
    if info.resource == "pods" && matches!(info.subresource.as_str(), "log" | "exec" | "attach" | "portforward") {
        return streams::handle(Arc::clone(&state.store), req, info).await;
    }
    handlers::handle(&state.store, &state.settings, req, &info).await
}

/// Review resources answer a create (201) and store nothing.
async fn review(state: &State, user: &UserInfo, req: Request<Incoming>, info: &RequestInfo) -> Response<Body> {
    if info.verb != "create" {
        return error(handlers::method_not_allowed());
    }
    // kubectl sends reviews (auth whoami, auth can-i) as protobuf.
    let protobuf = crate::protobuf::is_protobuf(req.headers());
    let bytes = match Limited::new(req.into_body(), handlers::MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return error(Status::too_large("the request body is too large")),
    };
    let body: serde_json::Value = match crate::protobuf::json_or_protobuf(protobuf, &bytes) {
        Ok(body) => body,
        Err(e) => return error(Status::bad_request(format!("decoding the review: {e}"))),
    };
    match reviews::create_with_tokens(&*state.store, &state.tokens, user, info, &body) {
        Ok(answer) => handlers::respond::json(StatusCode::CREATED, &answer, &http::HeaderMap::new()),
        Err(status) => error(status),
    }
}

/// The request's `Audit-ID`, else a fresh UUID.
fn audit_id<B>(req: &Request<B>) -> String {
    req.headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

fn record<B>(req: &Request<B>, audit_id: &str) -> RecordedRequest {
    RecordedRequest {
        audit_id: audit_id.to_string(),
        method: req.method().to_string(),
        version: format!("{:?}", req.version()),
        path: req.uri().path().to_string(),
        query: req.uri().query().map(str::to_string),
        headers: req
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// Stamp `Audit-Id` (unless already set) and complete the record.
fn finish(state: &State, seq: u64, audit_id: &str, mut response: Response<Body>) -> Response<Body> {
    if !response.headers().contains_key("audit-id") {
        if let Ok(value) = HeaderValue::from_str(audit_id) {
            response.headers_mut().insert("audit-id", value);
        }
    }
    let code = response.status().as_u16();
    state.log.complete(seq, |r| r.code = code);
    response
}

/// What kube-apiserver answers for a request it cannot classify: Go's HTTP
/// server's 400 for a malformed escape, the request info filter's 500
/// otherwise; plain text, not a Status.
fn unclassifiable_answer<B>(req: &Request<B>, why: Unclassifiable) -> Response<Body> {
    let uri = req.uri().to_string();
    let (code, text) = match why {
        Unclassifiable::BadEscape => (400, "400 Bad Request".to_string()),
        Unclassifiable::NoKind => (500, format!("Internal Server Error: {uri:?}: {why}, {uri}")),
    };
    raw(code, "text/plain; charset=utf-8", bytes::Bytes::from(text + "\n"))
}

fn error(status: Status) -> Response<Body> {
    handlers::respond::error(status)
}

fn raw(code: u16, content_type: &str, bytes: bytes::Bytes) -> Response<Body> {
    let mut response = Response::new(body::full(bytes));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}
