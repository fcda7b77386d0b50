//! The 403 Status kube-apiserver answers when authorization refuses
//! (`responsewriters.ForbiddenStatusError` + `apierrors.NewForbidden`).

use super::rules::go_quote;
use crate::request_info::RequestInfo;
use crate::status::{qualified_resource, Status};
use crate::UserInfo;

/// `User "u" cannot get resource "pods/log" in API group "" in the namespace
/// "shop"` and its cluster-scope and non-resource forms.
fn forbidden_message(user: &UserInfo, info: &RequestInfo) -> String {
    let username = go_quote(&user.name);
    if !info.is_resource_request {
        return format!("User {username} cannot {} path {}", info.verb, go_quote(&info.path));
    }
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    let scope = if info.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {}", go_quote(&info.namespace))
    };
    format!(
        "User {username} cannot {} resource {} in API group {} {scope}",
        info.verb,
        go_quote(&resource),
        go_quote(&info.api_group)
    )
}

/// The 403 for `info`, with the authorizer's `reason` appended after `: `
/// when there is one (RBAC gives one only when a binding names a missing
/// role). Details are `{name, group, kind: <resource>}`.
pub fn forbidden_with_reason(user: &UserInfo, info: &RequestInfo, reason: &str) -> Status {
    let mut detail = forbidden_message(user, info);
    if !reason.is_empty() {
        detail.push_str(": ");
        detail.push_str(reason);
    }
    let (group, resource) = if info.is_resource_request {
        (info.api_group.as_str(), info.resource.as_str())
    } else {
        ("", "")
    };
    let message = if group.is_empty() && resource.is_empty() {
        format!("forbidden: {detail}")
    } else if info.name.is_empty() {
        format!("{} is forbidden: {detail}", qualified_resource(resource, group))
    } else {
        format!(
            "{} {} is forbidden: {detail}",
            qualified_resource(resource, group),
            go_quote(&info.name)
        )
    };
    Status::forbidden(message, &info.name, group, resource)
}
