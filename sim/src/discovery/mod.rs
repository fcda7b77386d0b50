//! Discovery and the other non-resource GETs: `/version`, `/api`,
//! `/api/v1`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`, `/openapi/v3`,
//! `/healthz`, `/livez`, `/readyz`.
//!
//! Everything is derived from [`RESOURCES`], so discovery, storage and RBAC
//! never disagree about a kind.
//!
//! `/api` and `/apis` honour the `Accept` header as kube-apiserver does:
//! kubectl 1.37 and client-go ask for
//! `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json`
//! and get the aggregated `apidiscovery.k8s.io/v2` document in one round trip
//! (the Content-Type names the `as=` type, which client-go checks before it
//! parses); a plain `application/json` client (kube-rs `Discovery`) gets the
//! legacy `APIVersions` / `APIGroupList` and fetches each group version.
//!
//! # Differences from kube-apiserver
//!
//! - No protobuf: a client that accepts only protobuf gets 406.
//! - `/openapi/v2` is not served (404): kubectl 1.37 only falls back to it
//!   when `/openapi/v3` fails. See [`openapi`] for what the v3 documents hold.
//! - `serverAddressByClientCIDRs` names the `Host` the client used (or
//!   `127.0.0.1:6443`), not an advertise address.
//! - Health endpoints ignore `?verbose` and individual checks.

mod aggregated;
mod legacy;
pub mod openapi;
mod schemas;

use super::registry::{ResourceType, RESOURCES};
use crate::body::{self, Body};
use crate::status::Status;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

/// The Kubernetes version the simulator claims to be.
pub const GIT_VERSION: &str = "v1.37.0";

/// Content-Type of the aggregated discovery document.
pub const AGGREGATED_CONTENT_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Answer a discovery or other non-resource GET, or `None` if `path` is not
/// one. `path` may carry a query string (`/openapi/v3/api/v1?hash=…`).
pub fn handle(path: &str, headers: &HeaderMap) -> Option<Response<Body>> {
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let path = match path.trim_end_matches('/') {
        "" => "/",
        trimmed => trimmed,
    };
    match path {
        "/version" => Some(json_response(&version())),
        "/healthz" | "/livez" | "/readyz" => Some(text_response("ok")),
        "/api" | "/apis" => Some(root(path, headers)),
        "/openapi/v3" => Some(openapi::root_response()),
        _ if path.starts_with("/openapi/v3/") => openapi::group_version_response(&path["/openapi/v3/".len()..], query),
        _ => group_or_version(path),
    }
}

/// `/api` or `/apis`, aggregated or legacy as the client asked.
fn root(path: &str, headers: &HeaderMap) -> Response<Body> {
    let core = path == "/api";
    let mut response = match negotiate(headers) {
        Some(Format::Aggregated) => {
            let mut response = json_response(&aggregated::list(core));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(AGGREGATED_CONTENT_TYPE));
            response
        }
        Some(Format::Legacy) if core => json_response(&legacy::api_versions(headers)),
        Some(Format::Legacy) => json_response(&legacy::group_list()),
        None => status_response(Status::failure(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, \
             application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )),
    };
    // Caches must key on Accept, since the same URL has two documents.
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

/// `/api/v1`, `/apis/<g>` or `/apis/<g>/<v>`; `None` for anything else.
fn group_or_version(path: &str) -> Option<Response<Body>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let document = match parts.as_slice() {
        ["api", version] => legacy::resource_list("", version)?,
        ["apis", group] if !group.is_empty() => legacy::group(group)?,
        ["apis", group, version] if !group.is_empty() => legacy::resource_list(group, version)?,
        _ => return None,
    };
    Some(json_response(&document))
}

/// Which discovery document a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`.
    Aggregated,
    /// `APIVersions` / `APIGroupList`.
    Legacy,
}

/// The first media range in `Accept` that the simulator can serve, in the
/// client's order (client-go lists its preference first and sends no
/// q-values). No `Accept` at all means JSON.
fn negotiate(headers: &HeaderMap) -> Option<Format> {
    let mut values = headers.get_all(header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return Some(Format::Legacy);
    }
    values
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(media_range_format)
}

/// What one media range (`application/json;g=…;v=v2;as=…`) asks for.
fn media_range_format(range: &str) -> Option<Format> {
    let mut pieces = range.split(';').map(str::trim);
    let essence = pieces.next()?.to_ascii_lowercase();
    let params: Vec<(String, String)> = pieces
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"').to_string()))
        .collect();
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    match essence.as_str() {
        "application/json" => match (param("g"), param("v"), param("as")) {
            (None, None, None) => Some(Format::Legacy),
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) => Some(Format::Aggregated),
            // v2beta1 (removed in 1.33) or another conversion: not served.
            _ => None,
        },
        "*/*" | "application/*" => Some(Format::Legacy),
        _ => None,
    }
}

/// `/version`, as `kubectl version` prints it.
fn version() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "36",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-04-21T00:00:00Z",
        "goVersion": "go1.25.3",
        "compiler": "gc",
        "platform": format!("{}/{}", go_os(), go_arch()),
    })
}

/// Go's name for this operating system.
fn go_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's name for this architecture.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// Groups in served order, core (`""`) first, each with its versions in
/// preference order.
pub(crate) fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES {
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => groups.push((r.group, vec![r.version])),
        }
    }
    groups
}

/// Resources of one group version, sorted by plural as discovery lists them.
pub(crate) fn resources_of(group: &str, version: &str) -> Vec<&'static ResourceType> {
    let mut resources: Vec<&'static ResourceType> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    resources.sort_by_key(|r| r.plural);
    resources
}

/// A 200 JSON response.
pub(crate) fn json_response(value: &Value) -> Response<Body> {
    bytes_response(StatusCode::OK, "application/json", Bytes::from(value.to_string()))
}

/// A 200 `text/plain` response, as the health endpoints answer.
fn text_response(text: &'static str) -> Response<Body> {
    let mut response = bytes_response(StatusCode::OK, "text/plain; charset=utf-8", Bytes::from(text));
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// A response with `content_type` and an uncacheable body.
pub(crate) fn bytes_response(code: StatusCode, content_type: &'static str, bytes: Bytes) -> Response<Body> {
    let mut response = Response::new(body::full(bytes));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

/// What kube-apiserver answers for a path nothing serves. The API's own
/// handlers (everything under `/api`, a served group's `/apis/<g>` and
/// `/version`) answer a JSON NotFound Status; the rest falls through to
/// the server's mux, whose Go `http.NotFound` writes a plain-text
/// `404 page not found` (an unknown group included, as in a cluster
/// without that group's CRD or APIService).
pub fn not_found(path: &str) -> Response<Body> {
    if answered_by_the_api(path) {
        return status_response(Status::path_not_found());
    }
    let mut response = bytes_response(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        Bytes::from_static(b"404 page not found\n"),
    );
    response
        .headers_mut()
        .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// Whether a kube-apiserver handler that writes Statuses owns `path`.
fn answered_by_the_api(path: &str) -> bool {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let mut segments = path.trim_start_matches('/').split('/');
    match (segments.next(), segments.next()) {
        (Some("api"), _) => true,
        (Some("version"), Some(_)) => true,
        (Some("apis"), Some(group)) if !group.is_empty() => super::registry::group_served(group),
        _ => false,
    }
}

/// A Status error as a response with our body type.
pub(crate) fn status_response(status: Status) -> Response<Body> {
    status.into_response::<Bytes>().map(body::full)
}

#[cfg(test)]
mod tests;
