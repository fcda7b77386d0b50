//! SelfSubjectReview, TokenReview, SelfSubjectAccessReview,
//! SelfSubjectRulesReview, LocalSubjectAccessReview and SubjectAccessReview:
//! answered from the simulator's RBAC, never stored (kube-apiserver's
//! `pkg/registry/authentication` and `pkg/registry/authorization`).
//!
//! The caller has already authorized `create` on the review resource; the
//! answer is the review with `status` filled in, sent with 201.
//!
//! # Known differences from kube-apiserver
//!
//! - TokenReview knows only the simulator's static tokens, and only through
//!   [`create_with_tokens`]; [`create`] answers `authenticated: false` for
//!   every token. The API audience is `https://kubernetes.default.svc.cluster.local`.
//! - Field selectors and label selectors in `resourceAttributes` are ignored
//!   (RBAC ignores them too) and not validated.
//! - Unknown fields are ignored; a review's `kind` and `apiVersion` are not
//!   checked against the path. Validation messages print rejected values as
//!   JSON rather than Go syntax.

// The interfaces return `Status` by value, as the server expects; the
// error path is cold, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

mod access;
mod protobuf;

use super::auth::TokenAuthenticator;
use super::rbac::RbacObjects;
use super::UserInfo;
use crate::request_info::RequestInfo;
use crate::status::Status;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// The API server's own audience, which static tokens are valid for.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Answer a create of a review resource: the review object with `status`
/// filled in (HTTP 201). `user` is the effective (impersonated) user.
/// TokenReviews find no token here: see [`create_with_tokens`].
pub fn create(objects: &dyn RbacObjects, user: &UserInfo, info: &RequestInfo, body: &Value) -> Result<Value, Status> {
    create_with_tokens(objects, &TokenAuthenticator::default(), user, info, body)
}

/// As [`create`], with the simulator's tokens so that a TokenReview of a
/// known token answers `authenticated: true` and its user.
pub fn create_with_tokens(
    objects: &dyn RbacObjects,
    tokens: &TokenAuthenticator,
    user: &UserInfo,
    info: &RequestInfo,
    body: &Value,
) -> Result<Value, Status> {
    let review = Review::new(info, body)?;
    match (info.api_group.as_str(), info.resource.as_str()) {
        ("authentication.k8s.io", "selfsubjectreviews") => Ok(self_subject_review(&review, user)),
        ("authentication.k8s.io", "tokenreviews") => token_review(&review, tokens),
        ("authorization.k8s.io", "selfsubjectaccessreviews") => access::self_access(&review, objects, user),
        ("authorization.k8s.io", "selfsubjectrulesreviews") => access::self_rules(&review, objects, user),
        ("authorization.k8s.io", "localsubjectaccessreviews") => access::local_access(&review, objects, info),
        ("authorization.k8s.io", "subjectaccessreviews") => access::subject_access(&review, objects),
        _ => Err(Status::path_not_found()),
    }
}

/// As [`create_with_tokens`], from the raw request body in whichever
/// `Content-Type` the client sent: JSON (also when absent), YAML, or
/// protobuf, which kubectl's `auth whoami` and `auth can-i` use. Another
/// media type is 415.
pub fn create_from_body(
    objects: &dyn RbacObjects,
    tokens: &TokenAuthenticator,
    user: &UserInfo,
    info: &RequestInfo,
    content_type: Option<&str>,
    bytes: &[u8],
) -> Result<Value, Status> {
    let body = decode_body(info, content_type, bytes)?;
    create_with_tokens(objects, tokens, user, info, &body)
}

/// The media types a review body may come in, as the API server lists them.
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Decode a review body by its `Content-Type` into its JSON form: 400 when
/// it does not decode, 415 for a media type the API server does not read.
pub fn decode_body(info: &RequestInfo, content_type: Option<&str>, bytes: &[u8]) -> Result<Value, Status> {
    let media_type = content_type
        .and_then(|c| c.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "application/json".into());
    let (_, kind) = kind_of(&info.resource);
    let version = if info.api_version.is_empty() {
        "v1"
    } else {
        &info.api_version
    };
    let decoded = match media_type.as_str() {
        "application/json" => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
        "application/yaml" => serde_yaml::from_slice(bytes).map_err(|e| e.to_string()),
        "application/vnd.kubernetes.protobuf" => protobuf::decode(&info.resource, bytes),
        _ => {
            return Err(Status::failure(
                415,
                "UnsupportedMediaType",
                format!("the body of the request was in an unknown format - accepted media types include: {ACCEPTED}"),
            ))
        }
    };
    decoded.map_err(|why| undecodable(kind, version, &why))
}

/// A review request being answered: its body and how to name its kind.
struct Review<'a> {
    body: &'a Map<String, Value>,
    kind: &'static str,
    group: &'static str,
    api_version: String,
}

impl<'a> Review<'a> {
    /// 400 unless the body is a JSON object.
    fn new(info: &RequestInfo, body: &'a Value) -> Result<Self, Status> {
        let (group, kind) = kind_of(&info.resource);
        let version = if info.api_version.is_empty() {
            "v1"
        } else {
            &info.api_version
        };
        let Some(body) = body.as_object() else {
            return Err(undecodable(kind, version, "expected a JSON object"));
        };
        Ok(Review {
            body,
            kind,
            group,
            api_version: format!("{group}/{version}"),
        })
    }

    /// `spec`, decoded as Go would (nulls are zero values); 400 otherwise.
    fn spec<T: DeserializeOwned + Default>(&self) -> Result<T, Status> {
        let mut spec = self.body.get("spec").cloned().unwrap_or(Value::Null);
        strip_nulls(&mut spec);
        if spec.is_null() {
            return Ok(T::default());
        }
        T::deserialize(spec).map_err(|e| self.undecodable(&format!("spec: {e}")))
    }

    /// `metadata.namespace` of the body, "" when absent.
    fn namespace(&self) -> &str {
        self.body
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The request echoed back (kind and apiVersion set) with `status`.
    fn answer(&self, status: Value) -> Value {
        let mut out = Value::Object(self.body.clone());
        out["kind"] = json!(self.kind);
        out["apiVersion"] = json!(self.api_version);
        if !out.get("metadata").is_some_and(Value::is_object) {
            out["metadata"] = json!({});
        }
        out["status"] = status;
        out
    }

    /// 400 as the API server's decoder words it.
    fn undecodable(&self, why: &str) -> Status {
        let version = self.api_version.rsplit('/').next().unwrap_or("v1");
        undecodable(self.kind, version, why)
    }
}

/// `<Kind> in version "v1" cannot be handled as a <Kind>: <why>` (400).
fn undecodable(kind: &str, version: &str, why: &str) -> Status {
    Status::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}"
    ))
}

/// (group, Kind) of a review resource.
fn kind_of(resource: &str) -> (&'static str, &'static str) {
    match resource {
        "selfsubjectreviews" => ("authentication.k8s.io", "SelfSubjectReview"),
        "tokenreviews" => ("authentication.k8s.io", "TokenReview"),
        "selfsubjectaccessreviews" => ("authorization.k8s.io", "SelfSubjectAccessReview"),
        "selfsubjectrulesreviews" => ("authorization.k8s.io", "SelfSubjectRulesReview"),
        "localsubjectaccessreviews" => ("authorization.k8s.io", "LocalSubjectAccessReview"),
        _ => ("authorization.k8s.io", "SubjectAccessReview"),
    }
}

/// Remove null members, as Go's decoder leaves those fields at zero.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// `authentication.k8s.io/v1` UserInfo, empty fields omitted.
fn user_info(user: &UserInfo) -> Value {
    let mut out = Map::new();
    if !user.name.is_empty() {
        out.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        out.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        out.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        out.insert("extra".into(), json!(user.extra));
    }
    Value::Object(out)
}

/// What `kubectl auth whoami` shows: the (impersonated) user. A fresh object
/// stamped with the current time, as kube-apiserver answers.
fn self_subject_review(review: &Review<'_>, user: &UserInfo) -> Value {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    json!({
        "kind": review.kind,
        "apiVersion": review.api_version,
        "metadata": {"creationTimestamp": now},
        "status": {"userInfo": user_info(user)},
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct TokenReviewSpec {
    token: String,
    audiences: Vec<String>,
}

/// Authenticate `spec.token` like a request's bearer token would be.
fn token_review(review: &Review<'_>, tokens: &TokenAuthenticator) -> Result<Value, Status> {
    let spec: TokenReviewSpec = review.spec()?;
    if spec.token.is_empty() {
        return Err(Status::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audience_ok = spec.audiences.is_empty() || spec.audiences.iter().any(|a| a == API_AUDIENCE);
    let status = match tokens.user_for_token(&spec.token).filter(|_| audience_ok) {
        Some(user) => {
            json!({"authenticated": true, "user": user_info(&user), "audiences": [API_AUDIENCE]})
        }
        None => json!({"user": {}}),
    };
    Ok(review.answer(status))
}

#[cfg(test)]
mod tests;
