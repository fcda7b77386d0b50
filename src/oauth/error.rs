//! The errors of the OAuth endpoints, in the caller's language: RFC 6749
//! §5.2 JSON (`{"error": …, "error_description": …}`) from the token,
//! registration (RFC 7591 §3.2.2) and revocation endpoints.

use serde_json::json;

/// One OAuth error: its RFC code, a description for the person reading the
/// client's log, and the HTTP status it is sent with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}: {description}")]
pub struct OAuthError {
    /// The RFC's code (`invalid_grant`, `invalid_request`, …).
    pub error: &'static str,
    /// What went wrong, in words; never a token.
    pub description: String,
    /// 400, or 401 for `invalid_client`, 429 when rate-limited, 503 when
    /// the store cannot be reached.
    pub status: u16,
    /// For a 429, the seconds to wait (sent as `Retry-After`).
    pub retry_after: Option<u64>,
}

impl OAuthError {
    fn new(error: &'static str, status: u16, description: impl Into<String>) -> OAuthError {
        OAuthError {
            error,
            retry_after: None,
            description: description.into(),
            status,
        }
    }

    /// `invalid_request`: a parameter is missing, repeated or malformed.
    pub fn invalid_request(description: impl Into<String>) -> OAuthError {
        OAuthError::new("invalid_request", 400, description)
    }

    /// `invalid_grant`: the code, refresh token or subject token is not
    /// good (unknown, used, expired, or for another client).
    pub fn invalid_grant(description: impl Into<String>) -> OAuthError {
        OAuthError::new("invalid_grant", 400, description)
    }

    /// `invalid_client`: the client is unknown or may not do this.
    pub fn invalid_client(description: impl Into<String>) -> OAuthError {
        OAuthError::new("invalid_client", 401, description)
    }

    /// `unsupported_grant_type`.
    pub fn unsupported_grant_type(grant_type: &str) -> OAuthError {
        let shown: String = grant_type.chars().take(80).collect();
        OAuthError::new(
            "unsupported_grant_type",
            400,
            format!("grant_type {shown:?} is not supported here"),
        )
    }

    /// `invalid_target`: the `resource` (RFC 8707) is not this server's.
    pub fn invalid_target(description: impl Into<String>) -> OAuthError {
        OAuthError::new("invalid_target", 400, description)
    }

    /// `invalid_redirect_uri` (RFC 7591).
    pub fn invalid_redirect_uri(description: impl Into<String>) -> OAuthError {
        OAuthError::new("invalid_redirect_uri", 400, description)
    }

    /// `invalid_client_metadata` (RFC 7591).
    pub fn invalid_client_metadata(description: impl Into<String>) -> OAuthError {
        OAuthError::new("invalid_client_metadata", 400, description)
    }

    /// `slow_down`-like refusal for a flood: 429.
    pub fn rate_limited(seconds: u64) -> OAuthError {
        OAuthError {
            retry_after: Some(seconds),
            ..OAuthError::new("invalid_request", 429, format!("too many requests: wait {seconds} s"))
        }
    }

    /// `temporarily_unavailable`: the store cannot be asked (fail closed).
    pub fn unavailable() -> OAuthError {
        OAuthError::new(
            "temporarily_unavailable",
            503,
            "portcullis cannot reach its store; try again",
        )
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        json!({"error": self.error, "error_description": self.description}).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_is_the_rfc_6749_json_with_its_code_and_description() {
        let error = OAuthError::invalid_grant("the code was already used");
        let body: serde_json::Value = serde_json::from_str(&error.body()).unwrap();
        assert_eq!(body["error"], "invalid_grant");
        assert_eq!(body["error_description"], "the code was already used");
        assert_eq!(error.status, 400);
        assert_eq!(OAuthError::invalid_client("x").status, 401);
    }
}
