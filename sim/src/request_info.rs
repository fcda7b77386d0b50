//! What a request is, worked out the way kube-apiserver's
//! `RequestInfoFactory.NewRequestInfo` (k8s.io/apiserver, package
//! `endpoints/request`) works it out.
//!
//! This is the simulator's own reading, written from the Go rules and from
//! nothing of portcullis: RBAC here judges what portcullis forwards, so if
//! portcullis's classification and this one disagree, a test can see it
//! (tests/it/sim_classification.rs compares the two).
//!
//! The rules, in the order Go applies them:
//!
//! - The path is Go's `URL.Path`: percent-decoded as a whole (so `%2F` is a
//!   slash, and `+` stays a plus), trimmed of slashes at both ends and split
//!   on `/`; empty segments inside it are kept.
//! - Fewer than three segments, or a first segment other than `api`/`apis`,
//!   is a non-resource request whose verb is the lower-case method. Under
//!   `apis` a group must follow, and then at least two more segments.
//! - After the version, `watch` and `proxy` are verbs in the path (and need
//!   something after them); otherwise the method gives the verb: POST
//!   create, GET and HEAD get, PUT update, PATCH patch, DELETE delete, any
//!   other none.
//! - `namespaces/<ns>` sets the namespace; what follows it is the resource,
//!   unless it is one of the namespace's own subresources (`status`,
//!   `finalize`).
//! - The remaining parts are resource, name, subresource (`proxy` has no
//!   subresource: the rest is the proxied path).
//! - A get without a name is a list, or a watch when the first `watch`
//!   value is anything but `0` or `false` (any case), the empty string
//!   included. A list or watch whose `fieldSelector` requires
//!   `metadata.name=<n>` is about `n`, when the list options decode and `n`
//!   is a valid path segment.
//! - A delete without a name is a deletecollection.
//!
//! Two paths have no request info: one with a malformed `%` escape (Go's
//! HTTP server refuses the request line before any handler) and a path verb
//! with nothing after it (RequestInfoFactory's error, which kube-apiserver
//! answers with 500).

mod selector;
mod url;

use serde::Serialize;

pub use url::{parse_query, unescape_path};

/// What a request is, in Kubernetes' words (`request.RequestInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestInfo {
    /// False for `/version`, `/api`, `/apis/apps`, `/healthz`, …
    pub is_resource_request: bool,
    /// The decoded path (kube-apiserver fills it for every request; RBAC
    /// reads it for non-resource requests).
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
    /// Object name, from the path or a list's `metadata.name` field
    /// selector.
    pub name: String,
}

/// A request kube-apiserver answers before (or instead of) classifying it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unclassifiable {
    /// A `%` in the path is not followed by two hex digits: Go's HTTP server
    /// refuses the request line with 400.
    #[error("invalid URL escape in the path")]
    BadEscape,
    /// `watch` or `proxy` in verb position with nothing after it.
    #[error("unable to determine kind and namespace from url")]
    NoKind,
}

impl RequestInfo {
    /// The review resources (self/local/subject access reviews,
    /// selfsubjectreviews, tokenreviews): a create that stores nothing and
    /// is answered from RBAC.
    pub fn is_review(&self) -> bool {
        self.is_resource_request
            && match self.api_group.as_str() {
                "authentication.k8s.io" => matches!(self.resource.as_str(), "selfsubjectreviews" | "tokenreviews"),
                "authorization.k8s.io" => matches!(
                    self.resource.as_str(),
                    "selfsubjectaccessreviews"
                        | "selfsubjectrulesreviews"
                        | "localsubjectaccessreviews"
                        | "subjectaccessreviews"
                ),
                _ => false,
            }
    }
}

/// Classify `method` on the raw `path` (as sent, still percent-encoded)
/// with the raw `query` (without `?`).
pub fn classify(method: &http::Method, path: &str, query: Option<&str>) -> Result<RequestInfo, Unclassifiable> {
    let path = unescape_path(path).ok_or(Unclassifiable::BadEscape)?;
    let mut info = RequestInfo {
        verb: method.as_str().to_ascii_lowercase(),
        path,
        ..Default::default()
    };
    let trimmed = info.path.trim_matches('/');
    let segments: Vec<String> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').map(str::to_string).collect()
    };
    let Some(rest) = api_parts(&mut info, &segments) else {
        return Ok(info);
    };
    resource_parts(&mut info, method, rest, query)?;
    Ok(info)
}

/// Take the prefix, group and version off `segments`, filling `info`; what
/// is left, or `None` for a non-resource request.
fn api_parts<'a>(info: &mut RequestInfo, segments: &'a [String]) -> Option<&'a [String]> {
    if segments.len() < 3 {
        return None;
    }
    let (prefix, mut rest) = segments.split_first()?;
    let grouped = match prefix.as_str() {
        "api" => false,
        "apis" => true,
        _ => return None,
    };
    if grouped {
        // The prefix is gone: a group, a version and a resource must remain.
        if rest.len() < 3 {
            return None;
        }
        info.api_group = rest[0].clone();
        rest = &rest[1..];
    }
    info.api_prefix = prefix.clone();
    info.is_resource_request = true;
    info.api_version = rest[0].clone();
    Some(&rest[1..])
}

/// Verb, namespace, resource, name and subresource from what follows the
/// version.
fn resource_parts(
    info: &mut RequestInfo,
    method: &http::Method,
    mut rest: &[String],
    query: Option<&str>,
) -> Result<(), Unclassifiable> {
    if matches!(rest[0].as_str(), "watch" | "proxy") {
        if rest.len() < 2 {
            return Err(Unclassifiable::NoKind);
        }
        info.verb = rest[0].clone();
        rest = &rest[1..];
    } else {
        info.verb = method_verb(method).to_string();
    }

    if rest[0] == "namespaces" && rest.len() > 1 {
        info.namespace = rest[1].clone();
        let namespace_subresource = rest.get(2).is_some_and(|s| s == "status" || s == "finalize");
        if rest.len() > 2 && !namespace_subresource {
            rest = &rest[2..];
        }
    }

    info.resource = rest[0].clone();
    if let Some(name) = rest.get(1) {
        info.name = name.clone();
    }
    if info.verb != "proxy" {
        if let Some(subresource) = rest.get(2) {
            info.subresource = subresource.clone();
        }
    }

    if info.name.is_empty() && info.verb == "get" {
        list_or_watch(info, query);
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".into();
    }
    Ok(())
}

/// The verb an HTTP method means on a resource path.
fn method_verb(method: &http::Method) -> &'static str {
    match method.as_str() {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Go's `strings.EqualFold(v, "false")`: Unicode's simple folding also
/// takes the long s (`ſ`) as `s`.
fn equal_fold_false(v: &str) -> bool {
    let folded = v
        .chars()
        .map(|c| if c == '\u{17F}' { 's' } else { c.to_ascii_lowercase() });
    folded.eq("false".chars())
}

/// A get without a name: decode the list options from the query.
fn list_or_watch(info: &mut RequestInfo, query: Option<&str>) {
    let values = parse_query(query.unwrap_or_default());
    let first = |key: &str| values.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    // Convert_Slice_string_To_bool; the same reading whether or not the
    // other options decode.
    let watch = first("watch").is_some_and(|v| v != "0" && !equal_fold_false(v));
    info.verb = if watch { "watch" } else { "list" }.into();

    // A list option that does not convert fails the whole decode, and then
    // kube-apiserver ignores the field selector.
    let int64 = |key: &str| first(key).is_none_or(|v| v.parse::<i64>().is_ok());
    let labels =
        first("labelSelector").is_none_or(|s| crate::handlers::selectors::LabelSelector::parse(Some(s)).is_ok());
    let fields = selector::exact_match(first("fieldSelector").unwrap_or_default(), "metadata.name");
    let (true, true, true, Ok(Some(name))) = (int64("limit"), int64("timeoutSeconds"), labels, fields) else {
        return;
    };
    if valid_path_segment(&name) {
        info.name = name;
    }
}

/// `path.IsValidPathSegmentName`: not `.` or `..`, no `/` and no `%`.
fn valid_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains(['/', '%'])
}

#[cfg(test)]
mod tests;
