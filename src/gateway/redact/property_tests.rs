//! Property tests: whatever shape a Secret answer takes, however it is
//! framed and cut into frames, and however the request spelt its query, no
//! original value reaches a caller who may not see values. The last test is
//! the seeded fuzz run over classification and redaction together: issue
//! 15's cases first, then random queries built from the same pieces.

use super::{plan, Transform};
use crate::gateway::classify::classify;
use crate::identity::{Agent, Identity, Principal};
use crate::secrets::{Target, LAST_APPLIED};
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

/// A value to hide: distinctive, so that finding it means it leaked.
fn secret_value() -> impl Strategy<Value = String> {
    "[A-Za-z0-9]{12,24}".prop_map(|v| format!("V{v}"))
}

fn last_applied(value: &str) -> Value {
    json!({LAST_APPLIED: format!("{{\"stringData\":{{\"password\":\"{value}\"}}}}"), "team": "shop"})
}

fn secret(value: &str, with_kind: bool) -> Value {
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    let mut secret = json!({"apiVersion": "v1", "type": "Opaque",
        "metadata": {"name": "db", "namespace": "shop", "annotations": last_applied(value)},
        "data": {"password": encoded}, "stringData": {"note": value}});
    if with_kind {
        secret["kind"] = json!("Secret");
    }
    secret
}

fn metadata(value: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"name": "db", "namespace": "shop", "annotations": last_applied(value)}})
}

fn table(object: Option<Value>) -> Value {
    let mut row = json!({"cells": ["db", "Opaque", 1, "5m"]});
    if let Some(object) = object {
        row["object"] = object;
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "columnDefinitions": [], "rows": [row]})
}

fn events(objects: Vec<Value>) -> Vec<u8> {
    let kinds = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"];
    let mut out = Vec::new();
    for (i, object) in objects.into_iter().enumerate() {
        serde_json::to_writer(&mut out, &json!({"type": kinds[i % kinds.len()], "object": object})).unwrap();
        out.push(b'\n');
    }
    out
}

/// Every shape a Secret answer takes: get, create, update, patch, apply,
/// delete and their dry runs answer one Secret; list and deletecollection a
/// SecretList; the rest as named. Some shapes must be refused (a ConfigMap
/// has no place in a Secret answer).
fn body(shape: usize, value: &str) -> Vec<u8> {
    let document = match shape {
        0 => secret(value, true),
        1 => json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
            "items": [secret(value, false), secret(value, false)]}),
        2 => json!({"kind": "List", "apiVersion": "v1", "items": [secret(value, true), metadata(value)]}),
        3 => json!({"kind": "List", "apiVersion": "v1", "items": [secret(value, true),
            {"kind": "ConfigMap", "apiVersion": "v1", "data": {"password": value}}]}),
        4 => table(Some(secret(value, true))),
        5 => table(Some(metadata(value))),
        6 => table(None),
        7 => metadata(value),
        8 => json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
            "items": [metadata(value)]}),
        9 => return events(vec![secret(value, true), secret(value, true), secret(value, true)]),
        10 => return events(vec![table(Some(metadata(value))), table(Some(secret(value, true)))]),
        11 => return events(vec![metadata(value), metadata(value)]),
        _ => {
            let mut out = events(vec![secret(value, true)]);
            let error = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                "status": "Failure", "reason": "Expired", "code": 410}});
            serde_json::to_writer(&mut out, &error).unwrap();
            return out;
        }
    };
    let mut out = serde_json::to_vec(&document).unwrap();
    out.push(b'\n');
    out
}

const SHAPES: usize = 13;

fn agent() -> Identity {
    Identity {
        principal: Principal::person("ana"),
        credential_id: "c1".into(),
        origin: None,
        agent: Some(Arc::new(Agent {
            id: "a1".into(),
            name: "helper".into(),
            principal: Principal::person("ana"),
            writes_need_approval: false,
            grant_ids: Some(Vec::new()),
            disabled: false,
        })),
    }
}

/// Run `transform` over `body` cut into frames of `frame` bytes, answered
/// with `content_type`; the status and the bytes the caller gets.
fn run(transform: Transform, content_type: Option<&str>, body: Vec<u8>, frame: usize) -> (u16, Vec<u8>) {
    let mut response = Response::builder().status(200);
    if let Some(content_type) = content_type {
        response = response.header("content-type", content_type);
    }
    let parts = response.body(()).unwrap().into_parts().0;
    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = body
        .chunks(frame.max(1))
        .map(|chunk| Ok(Frame::data(Bytes::copy_from_slice(chunk))))
        .collect();
    let body = StreamBody::new(futures_util::stream::iter(frames));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async move {
        let response = transform.apply(parts, body, 1 << 20).await;
        let code = response.status().as_u16();
        let bytes = response.into_body().collect().await.map(|b| b.to_bytes());
        (code, bytes.map(|b| b.to_vec()).unwrap_or_default())
    })
}

fn assert_no_value(out: &[u8], value: &str) {
    let text = String::from_utf8_lossy(out);
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    assert!(!text.contains(value), "the value leaked: {text}");
    assert!(!text.contains(&encoded), "the encoded value leaked: {text}");
    assert!(!text.contains(LAST_APPLIED), "last-applied leaked: {text}");
}

const CONTENT_TYPES: [Option<&str>; 3] = [Some("application/json"), Some("application/json;stream=watch"), None];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_original_value_survives_any_shape_framing_or_target(
        shape in 0..SHAPES,
        value in secret_value(),
        content_type in 0..CONTENT_TYPES.len(),
        watch in any::<bool>(),
        typed in any::<bool>(),
        frame in 1usize..400,
    ) {
        let target = if typed { Target::TypedSecrets } else { Target::Secrets };
        let (code, out) = run(Transform::Redact { target, watch }, CONTENT_TYPES[content_type], body(shape, &value), frame);
        assert_no_value(&out, &value);
        // The shapes portcullis knows are redacted, never refused; the
        // ConfigMap in a List is refused (a 502, or in a stream already
        // answered 200, an ERROR event carrying one).
        let refused = code == 502 || String::from_utf8_lossy(&out).contains("\"code\":502");
        prop_assert_eq!(refused, shape == 3, "shape {} answered {}: {}", shape, code, String::from_utf8_lossy(&out));
    }
}

/// One piece of a query, and what the API server makes of it for `watch`:
/// `Some(w)` when it is a `watch` value the server reads, `None` when the
/// server ignores or drops it. The oracle is this table, not a decoder.
const PIECES: &[(&str, Option<bool>)] = &[
    ("watch", Some(true)),
    ("watch=", Some(true)),
    ("watch=yes", Some(true)),
    ("watch=1", Some(true)),
    ("watch=True", Some(true)),
    ("wat%63h=t", Some(true)),
    ("watch=%ff", Some(true)),
    ("watch=0", Some(false)),
    ("watch=false", Some(false)),
    ("watch=FALSE", Some(false)),
    ("watch=1;", None),
    ("watch;=1", None),
    ("watch=%zz", None),
    ("Watch=1", None),
    ("limit=500", None),
    ("fieldSelector=metadata.name%3Ddb", None),
    ("resourceVersion=0", None),
    ("allowWatchBookmarks=true", None),
    ("sendInitialEvents=true", None),
    ("timeoutSeconds=30", None),
];

/// Classify the request, plan for an agent, let the "cluster" answer as
/// kube-apiserver would (a watch stream as plain JSON, or a list), redact,
/// and check both the verb and that nothing leaked.
fn request_and_answer(legacy: bool, pieces: &[usize], value: &str, frame: usize) {
    let query = pieces.iter().map(|i| PIECES[*i].0).collect::<Vec<_>>().join("&");
    let server_watches = legacy || pieces.iter().find_map(|i| PIECES[*i].1).unwrap_or(false);
    let path = if legacy {
        "/api/v1/watch/namespaces/shop/secrets"
    } else {
        "/api/v1/namespaces/shop/secrets"
    };
    let info = classify(&Method::GET, path, Some(&query));
    assert_eq!(info.verb == "watch", server_watches, "{path}?{query}: {info:?}");
    let transform = plan(&info, &agent(), false, &mut HeaderMap::new()).unwrap();
    let answer = if server_watches { body(9, value) } else { body(1, value) };
    let (code, out) = run(transform, Some("application/json"), answer, frame);
    assert_eq!(code, 200, "{path}?{query}: {}", String::from_utf8_lossy(&out));
    assert_no_value(&out, value);
}

#[test]
fn the_issues_watch_spellings_are_watches_and_stay_redacted() {
    for (legacy, pieces) in [
        (false, vec![0, 15]),
        (false, vec![1]),
        (false, vec![2]),
        (false, vec![7, 3]),
        (false, vec![10, 3]),
        (false, vec![5]),
        (false, vec![12]),
        (true, vec![7]),
        (true, vec![]),
    ] {
        request_and_answer(legacy, &pieces, "Vs3cr3t-Pa55w0rd", 7);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn classification_and_redaction_agree_with_the_api_server_on_any_query(
        legacy in any::<bool>(),
        pieces in proptest::collection::vec(0..PIECES.len(), 0..5),
        value in secret_value(),
        frame in 1usize..300,
    ) {
        request_and_answer(legacy, &pieces, &value, frame);
    }
}
