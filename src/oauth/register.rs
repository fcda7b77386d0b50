//! Dynamic Client Registration (RFC 7591): a client that has no metadata
//! document URL registers its name and redirect URIs and gets a client_id.
//! The MCP revision of 2026-07-28 deprecates it, but clients still use it.
//! Only public clients are registered (PKCE, no secret), with the
//! authorization code and refresh token grants and nothing else.

use super::client::{self, Clients};
use super::error::OAuthError;
use crate::document::{self, Bounds};
use crate::store::RegisteredClient;
use serde_json::{json, Map, Value};

/// The largest registration request read.
pub const MAX_BODY: usize = 64 * 1024;

/// The grants a registered client may use.
const GRANT_TYPES: &[&str] = &["authorization_code", "refresh_token"];
/// The response types a registered client may use.
const RESPONSE_TYPES: &[&str] = &["code"];

/// The most redirect URIs a registration declares: an app has one or two
/// (a loopback port and a web address), and each registration is kept for
/// weeks, whoever sent it.
pub const MAX_REDIRECT_URIS: usize = 10;

/// A registration request that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Its name ("" when it gave none).
    pub client_name: String,
    /// Its redirect URIs, each acceptable.
    pub redirect_uris: Vec<String>,
}

/// Check a registration request's JSON body (at most [`MAX_BODY`] bytes).
/// Errors are RFC 7591 §3.2.2's: `invalid_redirect_uri` for anything wrong
/// with the redirect URIs, `invalid_client_metadata` for the rest.
pub fn validate(body: &[u8]) -> Result<Registration, OAuthError> {
    let request = document::parse_json(body, Bounds::body(MAX_BODY))
        .map_err(|e| OAuthError::invalid_client_metadata(format!("the registration request {e}")))?;
    let Value::Object(fields) = &request else {
        return Err(OAuthError::invalid_client_metadata(
            "the registration request is not a JSON object",
        ));
    };
    let metadata =
        |reason: String| OAuthError::invalid_client_metadata(format!("the registration is refused: {reason}"));
    client::token_endpoint_auth_method(fields.get("token_endpoint_auth_method")).map_err(metadata)?;
    only(fields, "grant_types", GRANT_TYPES).map_err(metadata)?;
    only(fields, "response_types", RESPONSE_TYPES).map_err(metadata)?;
    let client_name = client::client_name(fields.get("client_name")).map_err(metadata)?;
    let declared = fields.get("redirect_uris").unwrap_or(&Value::Null);
    if declared.as_array().is_some_and(|uris| uris.len() > MAX_REDIRECT_URIS) {
        return Err(OAuthError::invalid_redirect_uri(format!(
            "the registration is refused: it declares more than {MAX_REDIRECT_URIS} redirect_uris"
        )));
    }
    let redirect_uris = client::redirect_uris(declared)
        .map_err(|reason| OAuthError::invalid_redirect_uri(format!("the registration is refused: {reason}")))?;
    Ok(Registration {
        client_name,
        redirect_uris,
    })
}

/// `name`, when present, is an array of strings each in `allowed`.
fn only(fields: &Map<String, Value>, name: &str, allowed: &[&str]) -> Result<(), String> {
    let Some(value) = fields.get(name) else {
        return Ok(());
    };
    let items = value.as_array().ok_or_else(|| format!("its {name} are not an array"))?;
    for item in items {
        match item.as_str() {
            Some(word) if allowed.contains(&word) => {}
            _ => {
                return Err(format!(
                    "its {name} hold {item}; portcullis allows only {}",
                    allowed.join(" and ")
                ))
            }
        }
    }
    Ok(())
}

/// The RFC 7591 §3.2.1 answer for a client just registered.
pub fn response(client: &RegisteredClient) -> Value {
    json!({
        "client_id": client.client_id,
        "client_id_issued_at": client.created_at.timestamp(),
        "client_name": client.client_name,
        "redirect_uris": client.redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": GRANT_TYPES,
        "response_types": RESPONSE_TYPES,
    })
}

impl Clients {
    /// Validate a registration request and store the client.
    pub async fn register(&self, body: &[u8]) -> Result<RegisteredClient, OAuthError> {
        let registration = validate(body)?;
        let store = self.store().clone();
        tokio::task::spawn_blocking(move || {
            store.register_oauth_client(&registration.client_name, &registration.redirect_uris)
        })
        .await
        .map_err(|_| OAuthError::unavailable())?
        .map_err(|error| {
            tracing::error!(%error, "cannot store a registered OAuth client");
            OAuthError::unavailable()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: Value) -> Result<Registration, OAuthError> {
        validate(body.to_string().as_bytes())
    }

    #[test]
    fn a_public_client_with_acceptable_redirect_uris_is_registered() {
        let registration = check(json!({
            "client_name": "Claude Code",
            "redirect_uris": ["http://localhost:54545/callback"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "scope": "ignored",
        }))
        .unwrap();
        assert_eq!(registration.client_name, "Claude Code");
        assert_eq!(registration.redirect_uris, vec!["http://localhost:54545/callback"]);
        let minimal = check(json!({"redirect_uris": ["cursor://anysphere.cursor-retrieval/oauth/callback"]}));
        assert_eq!(minimal.unwrap().client_name, "");
    }

    #[test]
    fn a_registration_with_bad_redirect_uris_is_refused_as_invalid_redirect_uri() {
        for redirect_uris in [
            json!(null),
            json!([]),
            json!("http://127.0.0.1/cb"),
            json!(["http://example.com/cb"]),
            json!(["https://example.com/cb#x"]),
            json!(["data:text/html,hi"]),
            json!(["http://127.0.0.1/cb", "intent://x/cb"]),
            json!((0..11)
                .map(|port| format!("http://127.0.0.1:{}/cb", 5000 + port))
                .collect::<Vec<_>>()),
        ] {
            let mut body = json!({"client_name": "x"});
            if !redirect_uris.is_null() {
                body["redirect_uris"] = redirect_uris.clone();
            }
            let error = check(body).unwrap_err();
            assert_eq!(error.error, "invalid_redirect_uri", "{redirect_uris}: {error}");
            assert_eq!(error.status, 400);
        }
    }

    #[test]
    fn a_registration_of_ten_redirect_uris_is_taken() {
        let uris: Vec<String> = (0..10)
            .map(|port| format!("http://127.0.0.1:{}/cb", 5000 + port))
            .collect();
        let registration = check(json!({"redirect_uris": uris})).unwrap();
        assert_eq!(registration.redirect_uris, uris);
    }

    #[test]
    fn a_registration_with_other_metadata_out_of_bounds_is_refused_as_invalid_client_metadata() {
        let uris = json!(["http://127.0.0.1/cb"]);
        let cases = [
            (
                json!({"token_endpoint_auth_method": "client_secret_post"}),
                "token_endpoint_auth_method",
            ),
            (json!({"grant_types": ["client_credentials"]}), "grant_types"),
            (
                json!({"grant_types": ["authorization_code", "implicit"]}),
                "grant_types",
            ),
            (json!({"grant_types": "authorization_code"}), "grant_types"),
            (json!({"response_types": ["token"]}), "response_types"),
            (json!({"client_name": "n".repeat(201)}), "client_name"),
        ];
        for (mut body, why) in cases {
            body["redirect_uris"] = uris.clone();
            let error = check(body.clone()).unwrap_err();
            assert_eq!(error.error, "invalid_client_metadata", "{body}: {error}");
            assert!(error.description.contains(why), "{body}: {error}");
        }
        for body in [&b"[]"[..], b"{", b"null"] {
            assert_eq!(validate(body).unwrap_err().error, "invalid_client_metadata");
        }
        let huge = format!("{{\"client_name\": \"{}\"}}", "a".repeat(MAX_BODY));
        let error = validate(huge.as_bytes()).unwrap_err();
        assert!(error.description.contains("limit"), "{error}");
    }

    #[test]
    fn the_registration_answer_is_the_rfc_7591_client_information() {
        let client = RegisteredClient {
            client_id: "pcl-client-1".into(),
            client_name: "Agent".into(),
            redirect_uris: vec!["http://127.0.0.1/cb".into()],
            created_at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            last_used_at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        };
        assert_eq!(
            response(&client),
            json!({
                "client_id": "pcl-client-1",
                "client_id_issued_at": 1_700_000_000,
                "client_name": "Agent",
                "redirect_uris": ["http://127.0.0.1/cb"],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            })
        );
    }
}
