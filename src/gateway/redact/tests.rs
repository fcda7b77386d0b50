use super::*;
use crate::gateway::classify::classify;
use crate::identity::{Agent, Principal};
use crate::status::Status;
use http::{HeaderValue, Method, StatusCode};
use serde_json::Value;
use std::sync::Arc;

fn person() -> Identity {
    Identity {
        principal: Principal::person("ana"),
        credential_id: "c1".into(),
        origin: None,
        agent: None,
    }
}

fn agent() -> Identity {
    let agent = Agent {
        id: "a1".into(),
        name: "helper".into(),
        principal: Principal::person("ana"),
        writes_need_approval: false,
        grant_ids: Some(Vec::new()),
        disabled: false,
    };
    Identity {
        agent: Some(Arc::new(agent)),
        ..person()
    }
}

/// kubectl get's Accept, with a space as some clients write it.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json";

fn planned(
    method: Method,
    path: &str,
    identity: &Identity,
    reveal: bool,
) -> (Result<Transform, crate::gateway::error::RequestError>, HeaderMap) {
    let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
    let info = classify(&method, path, query);
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(TABLE));
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    (plan(&info, identity, reveal, &mut headers), headers)
}

#[test]
fn secrets_at_every_scope_and_verb_are_redacted_unless_revealed() {
    let redacted = |method: Method, path: &str| planned(method, path, &person(), false).0.unwrap();
    let secrets = Transform::Redact {
        target: Target::Secrets,
        watch: false,
    };
    assert_eq!(redacted(Method::GET, "/api/v1/namespaces/shop/secrets/db"), secrets);
    assert_eq!(redacted(Method::GET, "/api/v1/secrets"), secrets);
    assert_eq!(redacted(Method::PATCH, "/api/v1/namespaces/shop/secrets/db"), secrets);
    assert_eq!(redacted(Method::DELETE, "/api/v1/namespaces/shop/secrets"), secrets);
    assert_eq!(
        redacted(Method::GET, "/api/v1/secrets?watch=true"),
        Transform::Redact {
            target: Target::Secrets,
            watch: true
        }
    );
    assert_eq!(
        planned(Method::GET, "/api/v1/namespaces/shop/secrets/db", &person(), true)
            .0
            .unwrap(),
        Transform::Pass
    );
    assert_eq!(
        redacted(Method::GET, "/api/v1/namespaces/shop/configmaps/db"),
        Transform::Pass
    );
    assert_eq!(
        redacted(Method::GET, "/apis/example.com/v1/namespaces/shop/secrets/db"),
        Transform::Pass
    );
}

#[test]
fn a_redacted_request_asks_for_uncompressed_json_and_others_are_untouched() {
    let (_, headers) = planned(Method::GET, "/api/v1/namespaces/shop/secrets/db", &person(), false);
    assert_eq!(
        headers.get(ACCEPT).unwrap(),
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    );
    assert!(headers.get(ACCEPT_ENCODING).is_none());
    let (_, headers) = planned(Method::GET, "/api/v1/namespaces/shop/pods", &person(), false);
    assert_eq!(headers.get(ACCEPT).unwrap(), TABLE);
    assert_eq!(headers.get(ACCEPT_ENCODING).unwrap(), "gzip");
}

#[test]
fn a_client_accepting_protobuf_is_typed_and_gets_base64_data_markers() {
    let info = classify(&Method::POST, "/api/v1/namespaces/shop/secrets", None);
    let mut headers = HeaderMap::new();
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/vnd.kubernetes.protobuf, application/json"),
    );
    let transform = plan(&info, &person(), false, &mut headers).unwrap();
    assert_eq!(
        transform,
        Transform::Redact {
            target: Target::TypedSecrets,
            watch: false
        }
    );
    assert_eq!(headers.get(ACCEPT).unwrap(), "application/json");
    let (transform, _) = planned(Method::POST, "/api/v1/namespaces/shop/secrets", &person(), false);
    assert_eq!(
        transform.unwrap(),
        Transform::Redact {
            target: Target::Secrets,
            watch: false
        }
    );
}

#[test]
fn a_client_accepting_only_protobuf_gets_406_for_secrets() {
    let info = classify(&Method::GET, "/api/v1/namespaces/shop/secrets", None);
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/vnd.kubernetes.protobuf"));
    let status = plan(&info, &person(), false, &mut headers).unwrap_err().status();
    assert_eq!((status.code, status.reason.as_str()), (406, "NotAcceptable"));
}

#[test]
fn service_account_tokens_are_redacted_for_agents_only() {
    let path = "/api/v1/namespaces/shop/serviceaccounts/web/token";
    let token = Transform::Redact {
        target: Target::Token,
        watch: false,
    };
    assert_eq!(planned(Method::POST, path, &agent(), false).0.unwrap(), token);
    assert_eq!(
        planned(Method::POST, path, &person(), false).0.unwrap(),
        Transform::Pass
    );
    assert!(hides_values(&classify(&Method::POST, path, None), &agent(), false));
    assert!(!hides_values(&classify(&Method::POST, path, None), &person(), false));
}

fn upstream(code: u16, headers: &[(&str, &str)]) -> Parts {
    let mut builder = Response::builder().status(code);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).unwrap().into_parts().0
}

async fn applied(transform: Transform, parts: Parts, body: &'static [u8]) -> (Response<()>, Bytes) {
    let response = transform
        .apply(parts, http_body_util::Full::new(Bytes::from_static(body)), 1 << 20)
        .await;
    let (parts, body) = response.into_parts();
    (
        Response::from_parts(parts, ()),
        body.collect().await.unwrap().to_bytes(),
    )
}

const SECRET: &[u8] = br#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":"czNjcjN0"}}"#;
const REDACT: Transform = Transform::Redact {
    target: Target::Secrets,
    watch: false,
};

#[tokio::test]
async fn a_secret_response_is_redacted_and_loses_its_old_length() {
    let parts = upstream(200, &[("content-type", "application/json"), ("content-length", "91")]);
    let (response, body) = applied(REDACT, parts, SECRET).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get(CONTENT_LENGTH).is_none());
    let secret: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(secret["data"]["password"], "<redacted, 6 bytes>");
}

#[tokio::test]
async fn pass_relays_the_same_bytes_and_headers() {
    let parts = upstream(200, &[("content-length", "91"), ("content-encoding", "identity")]);
    let (response, body) = applied(Transform::Pass, parts, SECRET).await;
    assert_eq!(&body[..], SECRET);
    assert_eq!(response.headers().get(CONTENT_LENGTH).unwrap(), "91");
}

#[tokio::test]
async fn a_malformed_or_compressed_secret_response_is_refused_with_502() {
    let (response, body) = applied(
        REDACT,
        upstream(200, &[]),
        b"{\"kind\":\"Secret\",\"data\":{\"a\":\"czNj",
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let status: Status = serde_json::from_slice(&body).unwrap();
    assert_eq!((status.code, status.reason.as_str()), (502, "BadGateway"));
    let (response, _) = applied(REDACT, upstream(200, &[("content-encoding", "gzip")]), SECRET).await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
}

/// A watch's answer is not capped as it arrives (it runs on); an error
/// answer to one, read whole, stops at the limit however it comes.
#[tokio::test]
async fn an_endless_error_answer_to_a_secrets_watch_is_refused_at_the_limit() {
    let endless = futures_util::stream::repeat_with(|| {
        Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from_static(&[b'x'; 4096])))
    });
    let body = http_body_util::StreamBody::new(endless);
    let watch = Transform::Redact {
        target: Target::Secrets,
        watch: true,
    };
    let parts = upstream(500, &[("content-type", "application/json")]);
    let response = watch.apply(parts, body, 1 << 20).await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let status: Status = serde_json::from_slice(&body).unwrap();
    assert!(
        status.message.contains("exceeds portcullis's limit of 1048576 bytes"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn a_status_passes_unchanged_even_for_a_watch() {
    let status =
        br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Forbidden","code":403}"#;
    let watch = Transform::Redact {
        target: Target::Secrets,
        watch: true,
    };
    let (response, body) = applied(watch, upstream(403, &[]), status).await;
    assert_eq!((response.status(), &body[..]), (StatusCode::FORBIDDEN, &status[..]));
}

/// An admission check's refusal and warnings are its own text, built from
/// the object as it likes: hidden from a caller who sees values hidden,
/// while the API server's own words (which check refused, why by RBAC)
/// stay.
#[tokio::test]
async fn an_admission_checks_words_are_hidden_and_the_api_servers_own_pass() {
    let denied = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ValidatingAdmissionPolicy 'no-touch' with binding 'b' denied request: password is s3cr3t","reason":"Invalid","details":{"causes":[{"message":"password is s3cr3t","field":"data"}]},"code":422}"#;
    let warned = [
        ("content-type", "application/json"),
        ("warning", "299 - \"password is s3cr3t\""),
    ];
    let (response, body) = applied(REDACT, upstream(422, &warned), denied).await;
    let text = String::from_utf8_lossy(&body);
    assert!(!text.contains("s3cr3t"), "{text}");
    let status: Value = serde_json::from_slice(&body).unwrap();
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("ValidatingAdmissionPolicy 'no-touch' with binding 'b' denied request: <hidden"),
        "{message}"
    );
    assert_eq!(
        (status["reason"].as_str(), status["code"].as_u64()),
        (Some("Invalid"), Some(422))
    );
    assert!(status.get("details").is_none(), "the check's own: {status}");
    let warnings: Vec<_> = response.headers().get_all("warning").iter().collect();
    assert_eq!(warnings.len(), 1);
    assert!(!warnings[0].to_str().unwrap().contains("s3cr3t"), "{warnings:?}");

    let webhook = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"admission webhook \"guard.example.com\" denied the request: old value czNjcjN0","reason":"Forbidden","code":403}"#;
    let (_, body) = applied(REDACT, upstream(403, &[]), webhook).await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        status["message"],
        format!(
            "admission webhook \"guard.example.com\" denied the request: {}",
            crate::secrets::ADMISSION_WORDS_HIDDEN
        )
    );

    // A webhook's Status passes as it wrote it: a reason of its own, and
    // a failed call quotes what the webhook answered.
    let own_reason = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"admission webhook \"guard.example.com\" denied the request: no","reason":"password s3cr3t","details":{"name":"s3cr3t"},"code":403}"#;
    let failed_call = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: failed calling webhook \"guard.example.com\": the server responded with the status code 500 but did not return more information (\"password s3cr3t\")","reason":"InternalError","code":500}"#;
    for (code, body) in [(403, &own_reason[..]), (500, &failed_call[..])] {
        let (_, answer) = applied(REDACT, upstream(code, &[]), body).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("guard.example.com") && text.contains("<hidden"), "{text}");
    }

    let rbac = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets \"db\" is forbidden: User \"bot:ci\" cannot patch resource \"secrets\" in API group \"\" in the namespace \"shop\"","reason":"Forbidden","code":403}"#;
    let (response, body) = applied(REDACT, upstream(403, &[]), rbac).await;
    assert_eq!(&body[..], &rbac[..], "the API server's own words pass unchanged");
    assert!(response.headers().get("warning").is_none());
    let (response, _) = applied(Transform::Pass, upstream(422, &warned), denied).await;
    assert_eq!(
        response.headers()["warning"],
        "299 - \"password is s3cr3t\"",
        "a caller who sees values"
    );
}

#[tokio::test]
async fn a_watch_is_redacted_event_by_event() {
    let watch = Transform::Redact {
        target: Target::Secrets,
        watch: true,
    };
    let stream = br#"{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":"czNjcjN0"}}}
"#;
    let (response, body) = applied(
        watch,
        upstream(200, &[("content-type", "application/json;stream=watch")]),
        stream,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let event: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["object"]["data"]["password"], "<redacted, 6 bytes>");
}

/// A Secret watch event as kube-apiserver writes it, and the value in it.
const EVENT: &[u8] = br#"{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":"czNjcjN0"}}}
"#;

#[tokio::test]
async fn a_watch_served_as_plain_json_to_a_list_request_is_still_redacted() {
    // kube-apiserver serves JSON watches as `application/json`: a watch
    // portcullis took for a list must be recognised by its first line.
    let (response, body) = applied(REDACT, upstream(200, &[("content-type", "application/json")]), EVENT).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(!body.windows(8).any(|w| w == b"czNjcjN0"), "{body:?}");
    let event: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["object"]["data"]["password"], "<redacted, 6 bytes>");
}

#[tokio::test]
async fn a_stream_watch_content_type_is_read_as_a_watch_whatever_the_request() {
    let two = [EVENT, EVENT].concat().leak();
    let (response, body) = applied(
        REDACT,
        upstream(200, &[("content-type", "application/json;stream=watch")]),
        two,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let events: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    assert!(events
        .iter()
        .all(|e| e["object"]["data"]["password"] == "<redacted, 6 bytes>"));
}

#[tokio::test]
async fn a_watch_event_whose_first_line_is_not_a_watch_is_redacted_at_the_end() {
    // The last event without its newline: the whole body is read, and its
    // values are still found as events.
    let event = &EVENT[..EVENT.len() - 1];
    let (response, body) = applied(REDACT, upstream(200, &[]), event).await;
    assert_eq!(response.status(), StatusCode::OK);
    let event: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["object"]["data"]["password"], "<redacted, 6 bytes>");
}

#[tokio::test]
async fn an_answer_that_is_not_json_or_of_an_unknown_kind_is_refused_and_marked_for_the_audit() {
    for (content_type, body) in [
        ("application/yaml", &b"kind: Secret\ndata:\n  password: czNjcjN0\n"[..]),
        ("application/vnd.kubernetes.protobuf", &b"k8s\x00\x0a\x02v1"[..]),
        (
            "application/json",
            &br#"{"kind":"ConfigMap","apiVersion":"v1","data":{"password":"czNjcjN0"}}"#[..],
        ),
        (
            "application/json",
            &br#"{"kind":"List","apiVersion":"v1","items":[{"kind":"ConfigMap","data":{"password":"czNjcjN0"}}]}"#[..],
        ),
    ] {
        let (response, body) = applied(REDACT, upstream(200, &[("content-type", content_type)]), body).await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY, "{content_type}");
        assert!(!body.windows(8).any(|w| w == b"czNjcjN0"));
        let refused = response.extensions().get::<crate::audit::record::Refused>();
        assert_eq!(refused.map(|r| r.0.as_str()), Some("unredactable"));
    }
}

#[test]
fn every_spelling_of_watch_the_api_server_takes_is_planned_as_a_watch() {
    for query in [
        "watch",
        "watch=",
        "watch=yes",
        "watch=1",
        "watch=True",
        "watch=0&watch=1",
    ] {
        let planned = planned(
            Method::GET,
            &format!("/api/v1/namespaces/shop/secrets?{query}"),
            &agent(),
            false,
        );
        let expected = !query.starts_with("watch=0");
        assert_eq!(
            planned.0.unwrap(),
            Transform::Redact {
                target: Target::Secrets,
                watch: expected
            },
            "{query}"
        );
    }
}

#[test]
fn the_first_newline_is_found_wherever_it_falls() {
    for len in 0..100 {
        let mut bytes = vec![b'a'; len];
        assert_eq!(super::newline(&bytes), None);
        bytes.extend_from_slice(b"\nb\n");
        assert_eq!(super::newline(&bytes), Some(len), "{len}");
    }
}

#[test]
fn a_json_patch_of_a_secret_is_refused_only_to_a_caller_who_sees_values_hidden() {
    let patch = |path: &str, content_type: &[u8], reveal: bool| {
        let info = classify(&Method::PATCH, path, None);
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_bytes(content_type).unwrap());
        refuse_blind_read(&info, reveal, &headers)
    };
    let secret = "/api/v1/namespaces/shop/secrets/db";
    for json_patch in [
        &b"application/json-patch+json"[..],
        b"Application/JSON-Patch+JSON; charset=utf-8",
        // kube-apiserver cuts at the `;` and keeps a JSON Patch; read as
        // text, the byte above 0x7f had hidden it.
        b"application/json-patch+json;x=\xff",
        b"application/json-patch+json ;x",
        b"",
    ] {
        let refused = patch(secret, json_patch, false).unwrap_err();
        assert_eq!(refused.status().code, 403, "{json_patch:?}");
        assert_eq!(
            refused.refused().map(crate::audit::refusal::Refusal::as_str),
            Some("secret_json_patch")
        );
        assert!(patch(secret, json_patch, true).is_ok(), "revealed: {json_patch:?}");
    }
    for sets_only in [
        &b"application/merge-patch+json"[..],
        b"application/strategic-merge-patch+json; charset=utf-8",
        b"application/apply-patch+yaml",
    ] {
        assert!(patch(secret, sets_only, false).is_ok(), "{sets_only:?}");
    }
    assert!(patch(
        "/api/v1/namespaces/shop/configmaps/db",
        b"application/json-patch+json",
        false
    )
    .is_ok());
}

#[test]
fn a_secret_write_carrying_a_marker_back_is_refused_to_a_caller_who_sees_values_hidden() {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(crate::secrets::marker(15));
    let typed = format!(r#"{{"kind":"Secret","data":{{"password":"{encoded}"}}}}"#);
    let raw = "\n\x08password\x12\x14<redacted, 15 bytes>".to_string();
    let honest = r#"{"kind":"Secret","data":{"password":"czNjcjN0"}}"#.to_string();
    let secret = "/api/v1/namespaces/shop/secrets/db";
    for method in [Method::PUT, Method::PATCH, Method::POST] {
        let path = if method == Method::POST {
            "/api/v1/namespaces/shop/secrets"
        } else {
            secret
        };
        let info = classify(&method, path, None);
        for body in [&typed, &raw] {
            let refused = refuse_marker_written(&info, false, body.as_bytes()).unwrap_err();
            assert_eq!(refused.status().code, 400, "{method} {body}");
            assert_eq!(
                refused.refused().map(crate::audit::refusal::Refusal::as_str),
                Some("secret_marker")
            );
            assert!(refuse_marker_written(&info, true, body.as_bytes()).is_ok(), "revealed");
        }
        assert!(refuse_marker_written(&info, false, honest.as_bytes()).is_ok());
    }
    let configmap = classify(&Method::PUT, "/api/v1/namespaces/shop/configmaps/db", None);
    assert!(refuse_marker_written(&configmap, false, typed.as_bytes()).is_ok());
}
