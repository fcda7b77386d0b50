//! Classify a request the way kube-apiserver's `RequestInfoFactory` does.
//!
//! Audit rows and policy (is this a write? a Secret read?) need the same
//! answer to "what is this request", so it is computed once, from the path
//! as it will be forwarded. The cluster reads the request on its own; the
//! simulated one does it independently (`portcullis_sim::request_info`) and
//! tests/it/sim_classification.rs checks that the two readings agree.
//! Query parameters are read as the API server reads them
//! ([`super::query`]): a watch that portcullis took for a list would be
//! redacted as a list.

use super::query::Query;
use crate::audit::row::{bounded, is_discovery, AuditRow};
use serde::Serialize;
use smallvec::SmallVec;

/// Segments of a path kept on the stack while it is classified.
const SEGMENTS: usize = 12;

/// What a request is, in Kubernetes' own words.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestInfo {
    /// False for `/version`, `/api`, `/apis/apps`, `/healthz`, …
    pub is_resource_request: bool,
    /// For a non-resource request, the path.
    pub path: String,
    /// get, list, watch, create, update, patch, delete, deletecollection,
    /// proxy; the lower-case method for non-resource requests.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// Empty for the core group.
    pub api_group: String,
    /// `v1`, `v1beta1`, …
    pub api_version: String,
    /// Empty for cluster-scoped requests.
    pub namespace: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// e.g. `log`, `exec`, `status`, `scale`.
    pub subresource: String,
    /// Object name, when the path names one (or, for a list or watch, a
    /// `fieldSelector` of `metadata.name=<name>`, as the API server takes it).
    pub name: String,
    /// `dryRun=All`: the server runs every stage but storage.
    pub dry_run: bool,
}

impl RequestInfo {
    /// True for create, update, patch, delete and deletecollection.
    pub fn is_write(&self) -> bool {
        self.is_resource_request
            && matches!(
                self.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
    }

    /// exec, attach and port-forward: upgraded streams RBAC alone decides.
    pub fn is_stream_subresource(&self) -> bool {
        self.is_resource_request
            && self.api_group.is_empty()
            && self.resource == "pods"
            && matches!(self.subresource.as_str(), "exec" | "attach" | "portforward")
    }

    /// A request through the `proxy` subresource of a pod, service or
    /// node: kube-apiserver's connecters pass it, query and all, to what
    /// runs there, so `dryRun` is not the API server's to honour and the
    /// request runs for real.
    pub fn is_proxy_subresource(&self) -> bool {
        self.is_resource_request
            && self.api_group.is_empty()
            && self.subresource == "proxy"
            && matches!(self.resource.as_str(), "pods" | "services" | "nodes")
    }

    /// Does the API server take this request's `dryRun=All` as a dry run?
    /// Not for what it hands on (a connecter) or serves without reading it
    /// (a TokenRequest).
    fn honours_dry_run(&self) -> bool {
        !self.is_token_request() && !self.is_proxy_subresource() && !self.is_stream_subresource()
    }

    /// The API server's long-running requests, which no whole-request
    /// timeout may cut: verbs watch and proxy; subresources attach, exec,
    /// proxy, log and portforward.
    pub fn is_long_running(&self) -> bool {
        self.is_resource_request
            && (matches!(self.verb.as_str(), "watch" | "proxy")
                || matches!(
                    self.subresource.as_str(),
                    "attach" | "exec" | "proxy" | "log" | "portforward"
                ))
    }

    /// The review resources (self/local/subject access reviews,
    /// selfsubjectreviews, tokenreviews): a create that stores nothing, so
    /// never held for approval, and answered by the simulator from RBAC.
    pub fn is_review(&self) -> bool {
        self.is_resource_request
            && matches!(
                (self.api_group.as_str(), self.resource.as_str()),
                ("authentication.k8s.io", "selfsubjectreviews" | "tokenreviews")
                    | (
                        "authorization.k8s.io",
                        "selfsubjectaccessreviews"
                            | "selfsubjectrulesreviews"
                            | "localsubjectaccessreviews"
                            | "subjectaccessreviews"
                    )
            )
    }

    /// A ServiceAccount's TokenRequest (`serviceaccounts/<name>/token`),
    /// which kube-apiserver's `TokenREST.Create` serves without reading
    /// `dryRun`: even a dry run issues a real token.
    pub fn is_token_request(&self) -> bool {
        self.is_resource_request
            && self.api_group.is_empty()
            && self.resource == "serviceaccounts"
            && self.subresource == "token"
    }

    /// Is this about core/v1 Secrets (any verb, any scope)?
    pub fn is_secrets(&self) -> bool {
        self.is_resource_request && self.api_group.is_empty() && self.resource == "secrets"
    }
}

/// Classify `method` on `path` with the raw query string `query`.
///
/// `path` is the Kubernetes path as sent (for the gateway, what follows
/// `/clusters/<name>`). Each segment is percent-decoded once, as Go's
/// `URL.Path` is before kube-apiserver classifies it: otherwise
/// `%73ecrets` would be Secrets to the cluster but not to portcullis. (The
/// router refuses encoded slashes, so decoding cannot create segments.)
pub fn classify(method: &http::Method, path: &str, query: Option<&str>) -> RequestInfo {
    let segments = path.trim_matches('/').split('/').filter(|p| !p.is_empty());
    // Most paths hold no `%`: their segments are what Go decodes them to,
    // so the per-segment decoding (a copy-free scan each, but one per
    // segment on every request) is skipped.
    // On the stack up to the longest ordinary path (a namespaced
    // subresource is 8 segments; a proxy's rest goes on).
    let decoded: SmallVec<[std::borrow::Cow<'_, str>; SEGMENTS]> = if path.as_bytes().contains(&b'%') {
        segments
            .map(|p| percent_encoding::percent_decode_str(p).decode_utf8_lossy())
            .collect()
    } else {
        segments.map(std::borrow::Cow::Borrowed).collect()
    };
    let parts: SmallVec<[&str; SEGMENTS]> = decoded.iter().map(|p| p.as_ref()).collect();
    resource_info(method, &parts, query).unwrap_or_else(|| RequestInfo {
        is_resource_request: false,
        path: path.to_string(),
        verb: method.as_str().to_ascii_lowercase(),
        ..Default::default()
    })
}

/// `RequestInfoFactory.NewRequestInfo` for a resource path, step by step
/// as Go reads it; `None` where Go falls back to a non-resource request.
fn resource_info(method: &http::Method, parts: &[&str], query: Option<&str>) -> Option<RequestInfo> {
    let mut info = RequestInfo {
        is_resource_request: true,
        ..Default::default()
    };
    let rest = api_group_version(&mut info, parts)?;
    let rest = special_verb_or_method(&mut info, method, rest)?;
    let rest = namespace(&mut info, rest);
    resource_name_subresource(&mut info, rest);
    verb_from_query(&mut info, Query::parse(query));
    Some(info)
}

/// `/api/{version}/…` or `/apis/{group}/{version}/…`: the prefix, group and
/// version, and what follows them (never empty).
fn api_group_version<'p, 's>(info: &mut RequestInfo, parts: &'p [&'s str]) -> Option<&'p [&'s str]> {
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return None;
    }
    info.api_prefix = parts[0].to_string();
    let mut rest = &parts[1..];
    if info.api_prefix == "apis" {
        if rest.len() < 3 {
            return None;
        }
        info.api_group = rest[0].to_string();
        rest = &rest[1..];
    }
    info.api_version = rest[0].to_string();
    Some(&rest[1..])
}

/// `/watch/…` and `/proxy/…` name their verb; otherwise the method does.
fn special_verb_or_method<'p, 's>(
    info: &mut RequestInfo,
    method: &http::Method,
    rest: &'p [&'s str],
) -> Option<&'p [&'s str]> {
    if matches!(rest[0], "watch" | "proxy") {
        if rest.len() < 2 {
            return None;
        }
        info.verb = rest[0].to_string();
        return Some(&rest[1..]);
    }
    info.verb = verb_for_method(method).to_string();
    Some(rest)
}

/// `/namespaces/{namespace}/{resource}/…`: the namespace, and the parts
/// from the resource on. A namespace's own subresources (`status`,
/// `finalize`) keep `namespaces` as the resource.
fn namespace<'p, 's>(info: &mut RequestInfo, rest: &'p [&'s str]) -> &'p [&'s str] {
    if rest[0] == "namespaces" && rest.len() > 1 {
        info.namespace = rest[1].to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            return &rest[2..];
        }
    }
    rest
}

/// `resource/name/subresource/…`; a proxy's path after the name is not a
/// subresource.
fn resource_name_subresource(info: &mut RequestInfo, rest: &[&str]) {
    if rest.len() >= 3 && info.verb != "proxy" {
        info.subresource = rest[2].to_string();
    }
    if rest.len() >= 2 {
        info.name = rest[1].to_string();
    }
    info.resource = rest[0].to_string();
}

/// Without a name, a get is a list or a watch (naming one object through
/// `fieldSelector` if it selects one) and a delete is a deletecollection;
/// `dryRun` is read as the server reads it (a TokenRequest ignores it, so
/// that one is never taken as a dry run: not held, audited or answered as
/// one).
fn verb_from_query(info: &mut RequestInfo, query: Query<'_>) {
    if info.name.is_empty() && info.verb == "get" {
        info.verb = if query.watch() { "watch" } else { "list" }.to_string();
        info.name = query.selected_name().unwrap_or_default();
    }
    info.dry_run = query.dry_run() && info.honours_dry_run();
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }
}

// The audit sits below the request path and does not know `RequestInfo`:
// the row learns what the request is here.
impl AuditRow {
    /// Record what it is, as Kubernetes classifies it.
    pub fn classify(&mut self, info: &RequestInfo) {
        self.verb = info.verb.clone();
        // Read from the path, so as long as a client makes them: bounded as
        // the path itself is.
        self.api_group = bounded(&info.api_group);
        self.api_version = bounded(&info.api_version);
        self.resource = bounded(&info.resource);
        self.subresource = bounded(&info.subresource);
        self.namespace = bounded(&info.namespace);
        self.name = bounded(&info.name);
        self.write = info.is_write();
        self.discovery = !info.is_resource_request && is_discovery(&info.path);
        self.dry_run = info.dry_run;
    }
}

fn verb_for_method(method: &http::Method) -> &'static str {
    match *method {
        http::Method::POST => "create",
        http::Method::GET | http::Method::HEAD => "get",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "",
    }
}

/// The classify stage: what the request is, as kube-apiserver reads it,
/// noted in its audit row (with the agent's session, if an agent sends it).
pub(super) fn stage<B>(
    stages: &super::Stages<'_>,
    request: &http::Request<B>,
    trace: &mut super::Trace,
) -> RequestInfo {
    if let Some(agent) = &stages.identity.agent {
        trace.row.session = agent.id.clone();
    }
    let info = classify(request.method(), stages.path, request.uri().query());
    trace.row.classify(&info);
    info
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
