//! SelfSubjectReview, SelfSubjectAccessReview, SelfSubjectRulesReview,
//! LocalSubjectAccessReview and SubjectAccessReview: answered from the
//! simulator's RBAC, never stored. (Interface stub.)

use super::rbac::RbacObjects;
use super::UserInfo;
use crate::gateway::classify::RequestInfo;
use crate::status::Status;
use serde_json::Value;

/// Answer a create of a review resource: the review object with `status`
/// filled in (HTTP 201).
pub fn create(
    objects: &dyn RbacObjects,
    user: &UserInfo,
    info: &RequestInfo,
    body: &Value,
) -> Result<Value, Status> {
    let _ = (objects, user, info, body);
    Err(Status::path_not_found())
}

/// Is `resource` in `group` one of the review resources?
pub fn is_review(group: &str, resource: &str) -> bool {
    matches!(
        (group, resource),
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
