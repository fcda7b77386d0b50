//! Access reviews: "may this user do this?" (Self/Local/SubjectAccessReview)
//! and "what may I do in this namespace?" (SelfSubjectRulesReview).

use super::Review;
use crate::rbac::{self, go_quote, RbacObjects};
use crate::request_info::RequestInfo;
use crate::status::{Status, StatusCause, StatusDetails};
use crate::UserInfo;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `spec.resourceAttributes`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
struct ResourceAttributes {
    namespace: String,
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    name: String,
}

/// `spec.nonResourceAttributes`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
struct NonResourceAttributes {
    path: String,
    verb: String,
}

/// The spec of every access review (self reviews leave the subject empty).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AccessSpec {
    resource_attributes: Option<ResourceAttributes>,
    non_resource_attributes: Option<NonResourceAttributes>,
    user: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
    uid: String,
}

impl AccessSpec {
    /// The request the review asks about, as RBAC sees requests.
    fn request_info(&self) -> RequestInfo {
        if let Some(r) = &self.resource_attributes {
            return RequestInfo {
                is_resource_request: true,
                verb: r.verb.clone(),
                api_prefix: if r.group.is_empty() { "api" } else { "apis" }.into(),
                api_group: r.group.clone(),
                api_version: r.version.clone(),
                namespace: r.namespace.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                name: r.name.clone(),
                path: String::new(),
            };
        }
        let n = self.non_resource_attributes.as_ref();
        RequestInfo {
            path: n.map(|n| n.path.clone()).unwrap_or_default(),
            verb: n.map(|n| n.verb.clone()).unwrap_or_default(),
            ..Default::default()
        }
    }

    /// Exactly one of resourceAttributes and nonResourceAttributes.
    fn union_errors(&self) -> Vec<FieldError> {
        if self.resource_attributes.is_some() == self.non_resource_attributes.is_some() {
            let value = self
                .non_resource_attributes
                .as_ref()
                .map_or_else(|| go_quote("null"), |n| json!(n).to_string());
            let detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified";
            return vec![FieldError::invalid("spec", value, detail)];
        }
        Vec::new()
    }

    /// A SubjectAccessReview must name a user or a group.
    fn subject_errors(&self) -> Vec<FieldError> {
        if self.user.is_empty() && self.groups.is_empty() {
            let detail = "at least one of user or group must be specified";
            return vec![FieldError::invalid("spec.user", go_quote(""), detail)];
        }
        Vec::new()
    }

    /// The user a (Local)SubjectAccessReview asks about, exactly as given.
    fn subject(&self) -> UserInfo {
        UserInfo {
            name: self.user.clone(),
            uid: self.uid.clone(),
            groups: self.groups.clone(),
            extra: self.extra.clone(),
        }
    }
}

/// One `field.Invalid` error.
struct FieldError {
    field: &'static str,
    /// The rejected value, already formatted.
    value: String,
    detail: &'static str,
}

impl FieldError {
    fn invalid(field: &'static str, value: String, detail: &'static str) -> Self {
        FieldError { field, value, detail }
    }

    fn body(&self) -> String {
        format!("Invalid value: {}: {}", self.value, self.detail)
    }
}

/// 422 Invalid: `SelfSubjectAccessReview.authorization.k8s.io "" is
/// invalid: <field>: Invalid value: …`, one cause per error.
fn invalid(review: &Review<'_>, errors: &[FieldError]) -> Status {
    let all: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.field, e.body())).collect();
    let joined = match all.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let message = format!("{}.{} \"\" is invalid: {joined}", review.kind, review.group);
    let causes = errors
        .iter()
        .map(|e| StatusCause {
            reason: "FieldValueInvalid".into(),
            message: e.body(),
            field: e.field.into(),
        })
        .collect();
    Status::failure(422, "Invalid", message).with_details(StatusDetails {
        group: review.group.into(),
        kind: review.kind.into(),
        causes,
        ..Default::default()
    })
}

/// Authorize the spec's request for `user` and answer with the decision.
fn decide(review: &Review<'_>, objects: &dyn RbacObjects, user: &UserInfo, spec: &AccessSpec) -> Value {
    let decision = rbac::authorize(objects, user, &spec.request_info());
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    review.answer(status)
}

/// SelfSubjectAccessReview: may the requesting user do this?
pub(super) fn self_access(review: &Review<'_>, objects: &dyn RbacObjects, user: &UserInfo) -> Result<Value, Status> {
    let spec: AccessSpec = review.spec()?;
    let errors = spec.union_errors();
    if !errors.is_empty() {
        return Err(invalid(review, &errors));
    }
    Ok(decide(review, objects, user, &spec))
}

/// SubjectAccessReview: may `spec.user`/`spec.groups` do this?
pub(super) fn subject_access(review: &Review<'_>, objects: &dyn RbacObjects) -> Result<Value, Status> {
    let spec: AccessSpec = review.spec()?;
    let mut errors = spec.union_errors();
    errors.extend(spec.subject_errors());
    if !errors.is_empty() {
        return Err(invalid(review, &errors));
    }
    Ok(decide(review, objects, &spec.subject(), &spec))
}

/// LocalSubjectAccessReview: a SubjectAccessReview confined to the
/// request's namespace.
pub(super) fn local_access(
    review: &Review<'_>,
    objects: &dyn RbacObjects,
    info: &RequestInfo,
) -> Result<Value, Status> {
    let namespace = info.namespace.as_str();
    if namespace.is_empty() {
        return Err(Status::bad_request("namespace is required on this type: "));
    }
    if !review.namespace().is_empty() && review.namespace() != namespace {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let spec: AccessSpec = review.spec()?;
    let mut errors = spec.union_errors();
    errors.extend(spec.subject_errors());
    if let Some(r) = spec.resource_attributes.as_ref().filter(|r| r.namespace != namespace) {
        errors.push(FieldError::invalid(
            "spec.resourceAttributes.namespace",
            go_quote(&r.namespace),
            "must match metadata.namespace",
        ));
    }
    if let Some(n) = &spec.non_resource_attributes {
        let value = json!(n).to_string();
        errors.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            value,
            "disallowed on this kind of request",
        ));
    }
    if !errors.is_empty() {
        return Err(invalid(review, &errors));
    }
    let mut answer = decide(review, objects, &spec.subject(), &spec);
    answer["metadata"]["namespace"] = json!(namespace);
    Ok(answer)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RulesSpec {
    namespace: String,
}

/// SelfSubjectRulesReview: every rule that applies to the user in
/// `spec.namespace`. kube-apiserver answers a fresh object (empty spec).
pub(super) fn self_rules(review: &Review<'_>, objects: &dyn RbacObjects, user: &UserInfo) -> Result<Value, Status> {
    let spec: RulesSpec = review.spec()?;
    if spec.namespace.is_empty() {
        return Err(Status::bad_request("no namespace on request"));
    }
    let rules = rbac::rules_review(objects, user, &spec.namespace);
    let mut status = json!({
        "resourceRules": rules.resource_rules,
        "nonResourceRules": rules.non_resource_rules,
        "incomplete": false,
    });
    if !rules.evaluation_error.is_empty() {
        status["evaluationError"] = json!(rules.evaluation_error);
    }
    Ok(json!({
        "kind": review.kind,
        "apiVersion": review.api_version,
        "metadata": {},
        "spec": {},
        "status": status,
    }))
}
