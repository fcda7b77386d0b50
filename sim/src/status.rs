//! Kubernetes `metav1.Status`: every error the simulated cluster answers.
//!
//! kubectl prints a Status message verbatim only when the HTTP status equals
//! the Status `code`; anything else shows as `an error on the server
//! ("unknown")`. The wire shape is the same as portcullis's own
//! `portcullis::status`, duplicated on purpose (see the crate docs): the
//! simulator speaks Kubernetes' format, not portcullis's types.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde::{Deserialize, Serialize};

/// A `metav1.Status` with `status: Failure` (or Success for delete answers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    pub api_version: String,
    /// Always empty.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// `Failure` or `Success`.
    pub status: String,
    /// Human-readable message, printed by kubectl as it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason (`NotFound`, `Forbidden`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extra detail about the object concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// HTTP status code, equal to the response's; 0 (and left out, as
    /// kube-apiserver leaves it out) in a Success Status.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Kind (or, for Forbidden, the resource) of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Individual causes, e.g. one per invalid field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds a client should wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// `metav1.StatusCause`: its type serializes as `reason`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusCause {
    /// Cause type, e.g. `FieldValueRequired`, `FieldManagerConflict`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// JSON path of the field concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// A Failure Status with the given code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: Default::default(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            details: None,
            code,
        }
    }

    /// A Success Status, as returned by some deletes: no `code`, as
    /// kube-apiserver's delete handler sends it.
    pub fn success(details: StatusDetails) -> Self {
        Status {
            status: "Success".into(),
            details: Some(details),
            ..Status::failure(0, "", "")
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::failure(401, "Unauthorized", message)
    }

    /// 403 Forbidden with details `{name, group, kind: <resource>}`.
    pub fn forbidden(message: impl Into<String>, name: &str, group: &str, resource: &str) -> Self {
        Self::failure(403, "Forbidden", message).with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        })
    }

    /// 404 NotFound for a named object: `configmaps "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified_resource(resource, group);
        Self::failure(404, "NotFound", format!("{qualified} \"{name}\" not found")).with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        })
    }

    /// 404 NotFound for a path that serves nothing.
    pub fn path_not_found() -> Self {
        Self::failure(404, "NotFound", "the server could not find the requested resource")
            .with_details(StatusDetails::default())
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified_resource(resource, group);
        Self::failure(409, "AlreadyExists", format!("{qualified} \"{name}\" already exists")).with_details(
            StatusDetails {
                name: name.into(),
                group: group.into(),
                kind: resource.into(),
                ..Default::default()
            },
        )
    }

    /// 409 Conflict: the stale-resourceVersion wording.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified_resource(resource, group);
        Self::failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        })
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::failure(413, "RequestEntityTooLarge", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::failure(500, "InternalError", message)
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::failure(503, "ServiceUnavailable", message)
    }

    /// Attach details.
    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(details);
        self
    }

    /// Serialize to JSON bytes.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).expect("Status always serializes"))
    }

    /// An HTTP response with the crate's [`crate::body::Body`].
    pub fn response(self) -> Response<crate::body::Body> {
        self.into_response::<Bytes>().map(crate::body::full)
    }

    /// An HTTP response whose status equals `code`, with a JSON body.
    pub fn into_response<B: From<Bytes>>(self) -> Response<B> {
        let code = match self.code {
            0 => StatusCode::OK,
            code => StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        };
        let retry_after = self.details.as_ref().and_then(|d| d.retry_after_seconds);
        let mut response = Response::new(B::from(self.to_bytes()));
        *response.status_mut() = code;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `pods` for the core group, `deployments.apps` otherwise: how kube-apiserver
/// names a resource in messages.
pub fn qualified_resource(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_status_equals_code() {
        let response: Response<Bytes> = Status::conflict("", "configmaps", "x").into_response();
        assert_eq!(response.status(), 409);
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(body["code"], 409);
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["metadata"], serde_json::json!({}));
        assert_eq!(
            body["message"],
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
    }

    #[test]
    fn a_success_status_has_no_code_and_answers_200() {
        let status = Status::success(StatusDetails::default());
        let body = serde_json::to_value(&status).unwrap();
        assert!(body.get("code").is_none(), "{body}");
        let response: Response<Bytes> = status.into_response();
        assert_eq!(response.status(), 200);
    }

    #[test]
    fn not_found_names_group_qualified_resource() {
        let status = Status::not_found("apps", "deployments", "web");
        assert_eq!(status.message, "deployments.apps \"web\" not found");
        assert_eq!(status.details.unwrap().kind, "deployments");
    }

    #[test]
    fn cause_type_serializes_as_reason() {
        let cause = StatusCause {
            reason: "FieldManagerConflict".into(),
            message: "conflict".into(),
            field: ".spec.replicas".into(),
        };
        let json = serde_json::to_value(cause).unwrap();
        assert_eq!(json["reason"], "FieldManagerConflict");
    }
}
