//! Dynamic Client Registration (RFC 7591) through `POST /oauth/register`:
//! a public client with acceptable redirect URIs gets a client_id that
//! resolves; anything else gets RFC 7591's JSON error.

use crate::harness::Portcullis;
use http::{Method, StatusCode};
use portcullis::oauth::client::{ClientKind, Clients};
use serde_json::{json, Value};

async fn register(env: &Portcullis, body: &Value) -> crate::harness::RawResponse {
    let headers = [("content-type", "application/json")];
    env.raw()
        .send(Method::POST, "/oauth/register", &headers, body.to_string().into_bytes())
        .await
}

#[tokio::test]
async fn a_registered_client_gets_its_client_information_and_resolves_by_its_id() {
    let env = Portcullis::start().await;
    let answer = register(
        &env,
        &json!({
            "client_name": "Claude Code",
            "redirect_uris": ["http://localhost/callback"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert_eq!(answer.headers["cache-control"], "no-store");
    let info = answer.json();
    assert_eq!(info["client_name"], "Claude Code");
    assert_eq!(info["redirect_uris"], json!(["http://localhost/callback"]));
    assert_eq!(info["token_endpoint_auth_method"], "none");
    assert_eq!(info["grant_types"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(info["response_types"], json!(["code"]));
    assert!(info["client_id_issued_at"].as_i64().unwrap() > 0);
    let client_id = info["client_id"].as_str().unwrap();
    let clients = Clients::new(&env.config, env.store.clone()).unwrap();
    let client = clients.resolve(client_id).await.unwrap();
    assert_eq!(client.kind, ClientKind::Registered);
    assert_eq!(client.client_name, "Claude Code");
    assert!(portcullis::oauth::redirect::matches(
        &client.redirect_uris,
        "http://localhost:49152/callback"
    ));
}

#[tokio::test]
async fn a_registration_with_a_refused_redirect_uri_or_metadata_gets_the_rfc_7591_error() {
    let env = Portcullis::start().await;
    let cases = [
        (
            json!({"redirect_uris": ["http://example.com/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://example.com/cb#x"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["microsoft-edge:https://example.com/cb"]}),
            "invalid_redirect_uri",
        ),
        (json!({"client_name": "no redirect"}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_basic"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["http://127.0.0.1/cb"], "padding": "x".repeat(70 * 1024)}),
            "invalid_client_metadata",
        ),
    ];
    for (body, error) in cases {
        let answer = register(&env, &body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{error}");
        assert_eq!(answer.json()["error"], error);
        assert!(answer.json()["error_description"].as_str().unwrap().len() > 10);
    }
}

#[tokio::test]
async fn registration_answers_only_post() {
    let env = Portcullis::start().await;
    let answer = env.raw().send(Method::GET, "/oauth/register", &[], Vec::new()).await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(answer.headers["allow"], "POST");
    assert_eq!(answer.json()["error"], "invalid_request");
}
