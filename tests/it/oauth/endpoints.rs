//! The OAuth endpoints portcullis serves for agents' clients, at the HTTP
//! level: discovery (RFC 9728, RFC 8414), CORS on exactly the documents and
//! the token endpoint, the token endpoint's RFC 6749 errors, and an access
//! token's audience (`/mcp` only).

use crate::harness::{Portcullis, Raw};
use crate::mcp::{connect, ok, stateless};
use crate::support::eventually;
use http::Method;
use portcullis::audit::query::Filter;
use portcullis::identity::Principal;
use portcullis::oauth::tokens::{issue_code, Consent};
use serde_json::{json, Value};

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const CLIENT: &str = "https://client.example/meta.json";
const REDIRECT: &str = "http://127.0.0.1:5000/cb";

fn raw(env: &Portcullis) -> Raw {
    Raw::with_ca(&env.ca_pem, format!("https://{}", env.addr))
}

async fn post_form(env: &Portcullis, path: &str, form: &str) -> crate::harness::RawResponse {
    let headers = [("content-type", "application/x-www-form-urlencoded")];
    raw(env)
        .send(Method::POST, path, &headers, form.as_bytes().to_vec())
        .await
}

/// `refresh_token` exchanged at `/oauth/token`.
async fn refresh(env: &Portcullis, refresh_token: &str) -> crate::harness::RawResponse {
    let form = format!("grant_type=refresh_token&refresh_token={refresh_token}&client_id={CLIENT}");
    post_form(env, "/oauth/token", &form).await
}

/// ana (a developer in `shop`) with an agent session's access and refresh
/// tokens, the access token used once (so the credential cache holds it).
async fn ana_connected(env: &Portcullis) -> (String, String) {
    env.person("ana", &[("developer", Some("shop"))]);
    let tokens = tokens_for_ana(env, "developer").await;
    let token = |name: &str| tokens[name].as_str().unwrap().to_string();
    let (access, refresh) = (token("access_token"), token("refresh_token"));
    connect(env, &access, stateless()).await;
    (access, refresh)
}

/// A code for ana's first grant (as the consent page would make), and the
/// tokens its exchange at `/oauth/token` gives.
async fn tokens_for_ana(env: &Portcullis, role: &str) -> Value {
    let grants = env.store.list_grants().unwrap();
    let grant = grants.iter().find(|g| g.subject == Principal::person("ana")).unwrap();
    let consent = Consent {
        login: "ana".into(),
        client_id: CLIENT.into(),
        client_name: "Example agent".into(),
        grants: vec![(grant.id.clone(), role.into())],
        until: chrono::Utc::now() + chrono::TimeDelta::hours(2),
        writes_need_approval: true,
        redirect_uri: REDIRECT.into(),
        code_challenge: CHALLENGE.into(),
        resource: format!("{}/mcp", env.config.public_url.trim_end_matches('/')),
        signed_in_with: String::new(),
    };
    let code = issue_code(&env.store, &consent).unwrap();
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", &code)
        .append_pair("client_id", CLIENT)
        .append_pair("redirect_uri", REDIRECT)
        .append_pair("code_verifier", VERIFIER)
        .finish();
    let answer = post_form(env, "/oauth/token", &form).await;
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
    assert_eq!(answer.headers["cache-control"], "no-store");
    answer.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_from_mcp_points_at_the_resource_metadata_and_the_documents_answer_any_origin() {
    let env = Portcullis::start().await;
    let client = raw(&env);
    let refused = client.send(Method::POST, "/mcp", &[], b"{}".to_vec()).await;
    assert_eq!(refused.status, 401);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"https://127.0.0.1/.well-known/oauth-protected-resource/mcp\""
    );
    let resource = client
        .send(Method::GET, "/.well-known/oauth-protected-resource/mcp", &[], vec![])
        .await;
    assert_eq!(resource.status, 200);
    assert_eq!(resource.headers["access-control-allow-origin"], "*");
    assert_eq!(resource.json()["resource"], "https://127.0.0.1/mcp");
    assert_eq!(resource.json()["authorization_servers"], json!(["https://127.0.0.1"]));
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let server = client.send(Method::GET, path, &[], vec![]).await;
        assert_eq!(server.status, 200, "{path}");
        assert_eq!(server.headers["access-control-allow-origin"], "*");
        let doc = server.json();
        assert_eq!(doc["issuer"], "https://127.0.0.1");
        assert_eq!(doc["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(doc["client_id_metadata_document_supported"], true);
        assert_eq!(doc["authorization_response_iss_parameter_supported"], true);
    }
    let preflight = client
        .send(
            Method::OPTIONS,
            "/oauth/token",
            &[("origin", "https://app.example")],
            vec![],
        )
        .await;
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.headers["access-control-allow-origin"], "*");
    // Nothing else answers another origin: not registration, not the pages,
    // not the person API.
    for path in [
        "/oauth/register",
        "/oauth/revoke",
        "/api/portcullis/v1/whoami",
        "/console",
    ] {
        let answer = client
            .send(Method::GET, path, &[("origin", "https://app.example")], vec![])
            .await;
        assert!(answer.headers.get("access-control-allow-origin").is_none(), "{path}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_public_url_path_the_documents_are_at_the_root_with_the_path_inserted() {
    let env = Portcullis::start_with(|c| c.public_url = "https://example.com/pc".into()).await;
    let client = raw(&env);
    let refused = client.send(Method::POST, "/mcp", &[], b"{}".to_vec()).await;
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("/.well-known/oauth-protected-resource/pc/mcp"),
        "{challenge}"
    );
    let resource = client
        .send(Method::GET, "/.well-known/oauth-protected-resource/pc/mcp", &[], vec![])
        .await;
    assert_eq!(resource.json()["resource"], "https://example.com/pc/mcp");
    let server = client
        .send(Method::GET, "/.well-known/oauth-authorization-server/pc", &[], vec![])
        .await;
    assert_eq!(server.json()["token_endpoint"], "https://example.com/pc/oauth/token");
    let appended = client
        .send(Method::GET, "/pc/.well-known/openid-configuration", &[], vec![])
        .await;
    assert_eq!(appended.json()["issuer"], "https://example.com/pc");
    let old = client
        .send(Method::GET, "/.well-known/oauth-protected-resource/mcp", &[], vec![])
        .await;
    assert_eq!(old.status, 404, "the path-less document is not this server's");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_answers_every_bad_request_with_an_rfc_6749_error() {
    let env = Portcullis::start().await;
    let cases: [(&str, &str, u16, &str); 6] = [
        ("", "grant_type=authorization_code", 400, "invalid_request"),
        (
            "form",
            "grant_type=password&username=a&password=b",
            400,
            "unsupported_grant_type",
        ),
        (
            "form",
            "grant_type=authorization_code&grant_type=refresh_token",
            400,
            "invalid_request",
        ),
        (
            "form",
            "grant_type=authorization_code&code=x&client_id=c&redirect_uri=r",
            400,
            "invalid_request",
        ),
        (
            "form",
            "grant_type=authorization_code&code=pcl_unknown&client_id=c&redirect_uri=r&code_verifier=v",
            400,
            "invalid_grant",
        ),
        (
            "form",
            "grant_type=refresh_token&refresh_token=nope&client_id=c",
            400,
            "invalid_grant",
        ),
    ];
    for (kind, form, status, code) in cases {
        let headers: &[(&str, &str)] = if kind == "form" {
            &[("content-type", "application/x-www-form-urlencoded")]
        } else {
            &[]
        };
        let answer = raw(&env)
            .send(Method::POST, "/oauth/token", headers, form.as_bytes().to_vec())
            .await;
        assert_eq!(answer.status, status, "{form}");
        assert_eq!(answer.json()["error"], code, "{form}");
        assert!(answer.json()["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty()));
        assert_eq!(answer.headers["access-control-allow-origin"], "*");
    }
    // Each refusal is an audit row with its reason.
    eventually("six refused token requests in the audit", async || {
        let rows = crate::audit::rows(&env, Filter::default());
        let refused = rows
            .iter()
            .filter(|r| r.row.path == "/oauth/token" && r.row.refused == "oauth_token");
        (refused.count() == 6).then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_token_works_on_mcp_and_is_refused_on_the_clusters_and_the_person_api() {
    let env = Portcullis::start().await;
    let ana = env.person("ana", &[("developer", Some("shop"))]);
    let tokens = tokens_for_ana(&env, "viewer").await;
    let access = tokens["access_token"].as_str().unwrap();
    // The grant narrowed to viewer for the session is not listed as ana's own.
    let me = raw(&env).get("/api/portcullis/v1/whoami", &ana).await.json();
    let roles: Vec<&str> = me["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["developer"], "{me}");
    assert_eq!(me["agent_sessions"].as_array().unwrap().len(), 1, "{me}");
    assert!(tokens["expires_in"].as_i64().unwrap() <= 3600);
    let agent = connect(&env, access, stateless()).await;
    let me = ok(&agent, "whoami", json!({})).await;
    assert!(me.contains("ana"), "{me}");
    for path in [
        "/clusters/sim/api/v1/namespaces/shop/pods",
        "/api/portcullis/v1/whoami",
        "/audit",
    ] {
        let answer = raw(&env).get(path, access).await;
        assert_eq!(answer.status, 401, "{path}: {}", String::from_utf8_lossy(&answer.body));
        assert!(
            String::from_utf8_lossy(&answer.body).contains("for /mcp only"),
            "{path}"
        );
    }
    let call = eventually("the tool call's audit row", async || {
        let rows = crate::audit::rows(&env, Filter::default());
        rows.into_iter()
            .find(|r| r.row.path == "/mcp" && r.row.tool == "whoami")
    })
    .await;
    assert_eq!(call.row.via, format!("oauth client={CLIENT}"));
    assert!(!call.row.session.is_empty(), "the row names the agent session");
    eventually("the refusal on the cluster, audited as wrong_audience", async || {
        let rows = crate::audit::rows(&env, Filter::default());
        rows.into_iter()
            .find(|r| r.row.path.starts_with("/api/v1/namespaces/shop/pods") && r.row.refused == "wrong_audience")
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_refresh_token_ends_the_session_and_its_access_token() {
    let env = Portcullis::start().await;
    let (access, refresh_token) = ana_connected(&env).await;
    let revoked = post_form(&env, "/oauth/revoke", &format!("token={refresh_token}")).await;
    assert_eq!(revoked.status, 200);
    assert!(crate::mcp::try_connect(&env, &access, stateless()).await.is_err());
    let again = refresh(&env, &refresh_token).await;
    assert_eq!(again.json()["error"], "invalid_grant");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_access_token_is_refused_at_once_though_it_was_cached() {
    let env = Portcullis::start().await;
    // The access token is in the credential cache (for 2 s).
    let (access, refresh_token) = ana_connected(&env).await;
    let revoked = post_form(&env, "/oauth/revoke", &format!("token={access}")).await;
    assert_eq!(revoked.status, 200);
    assert!(crate::mcp::try_connect(&env, &access, stateless()).await.is_err());
    // An access token is revoked alone: its session goes on.
    let renewed = refresh(&env, &refresh_token).await;
    assert_eq!(renewed.status, 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_or_refresh_token_presented_twice_ends_the_session_and_every_token_of_it() {
    let env = Portcullis::start().await;
    env.person("ana", &[("developer", Some("shop"))]);
    let first = tokens_for_ana(&env, "developer").await;
    let (access, refresh_token) = (
        first["access_token"].as_str().unwrap(),
        first["refresh_token"].as_str().unwrap(),
    );
    let second = refresh(&env, refresh_token).await;
    assert_eq!(second.status, 200);
    let newer = second.json()["access_token"].as_str().unwrap().to_string();
    connect(&env, &newer, stateless()).await;
    // The first refresh token again: a thief or a replay. The whole session ends.
    let replayed = refresh(&env, refresh_token).await;
    assert_eq!(replayed.json()["error"], "invalid_grant");
    for token in [access, newer.as_str()] {
        let refused = crate::mcp::try_connect(&env, token, stateless()).await;
        assert!(refused.is_err(), "every access token of the session is refused");
    }
    let next = second.json()["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(refresh(&env, &next).await.json()["error"], "invalid_grant");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_authorize_token_and_revocation_requests_are_rate_limited_per_address() {
    let env = Portcullis::start_with(|c| c.oauth.requests_per_minute = 2).await;
    let client = raw(&env);
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let json = [("content-type", "application/json")];
    let authorize = "/oauth/authorize?response_type=code&client_id=pcl-client-none";
    for (method, path, headers, body) in [
        (
            Method::POST,
            "/oauth/token",
            &form[..],
            b"grant_type=refresh_token".to_vec(),
        ),
        (Method::POST, "/oauth/register", &json[..], b"{}".to_vec()),
        (
            Method::POST,
            "/oauth/revoke",
            &form[..],
            b"token=pcl_known-to-no-one".to_vec(),
        ),
        (Method::GET, authorize, &[][..], Vec::new()),
    ] {
        let mut codes = Vec::new();
        let mut last = None;
        for _ in 0..3 {
            let answer = client.send(method.clone(), path, headers, body.clone()).await;
            codes.push(answer.status.as_u16());
            last = Some(answer);
        }
        assert_ne!(codes[0], 429, "{path}: the first requests pass ({codes:?})");
        assert_eq!(
            codes[2], 429,
            "{path}: the third within a minute is refused ({codes:?})"
        );
        // The JSON endpoints say when to come back, as RFC 6585 has it.
        if path.starts_with("/oauth/authorize") {
            continue;
        }
        let wait = last
            .unwrap()
            .headers
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let seconds: u64 = wait.as_deref().unwrap_or_default().parse().unwrap_or(0);
        assert!((1..=60).contains(&seconds), "{path}: Retry-After {wait:?}");
    }
    env.stop().await;
}

/// `form` posted to `/oauth/token` as if from `address` (through a trusted
/// proxy); the answer's status.
async fn token_from(env: &Portcullis, address: &str, form: &str) -> u16 {
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("x-forwarded-for", address),
    ];
    raw(env)
        .send(Method::POST, "/oauth/token", &headers, form.as_bytes().to_vec())
        .await
        .status
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naming_a_client_spends_no_budget_of_its_own_and_a_session_refreshes_within_its_budget() {
    let env = Portcullis::start_with(|c| {
        c.oauth.requests_per_minute = 2;
        c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let (_, mut refresh_token) = ana_connected(&env).await;
    // Others name ana's client (a public client's id is the same for every
    // user) with made-up tokens, from two addresses, to their own limit.
    let made_up = format!("grant_type=refresh_token&refresh_token=pcl_made-up&client_id={CLIENT}");
    for address in ["198.51.100.7", "198.51.100.8"] {
        let codes = [
            token_from(&env, address, &made_up).await,
            token_from(&env, address, &made_up).await,
            token_from(&env, address, &made_up).await,
        ];
        assert_eq!(codes, [400, 400, 429], "{address}: refused, then over its own limit");
    }
    // Ana's client still refreshes, from addresses of its own, within its
    // session's budget (2 a minute here), and no further.
    let mut codes = Vec::new();
    for address in ["203.0.113.5", "203.0.113.6", "203.0.113.7"] {
        let form = format!("grant_type=refresh_token&refresh_token={refresh_token}&client_id={CLIENT}");
        let headers = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("x-forwarded-for", address),
        ];
        let answer = raw(&env)
            .send(Method::POST, "/oauth/token", &headers, form.into_bytes())
            .await;
        codes.push(answer.status.as_u16());
        if answer.status == 200 {
            refresh_token = answer.json()["refresh_token"].as_str().unwrap().to_string();
        }
    }
    assert_eq!(codes, [200, 200, 429], "the session's own budget");
    env.stop().await;
}
