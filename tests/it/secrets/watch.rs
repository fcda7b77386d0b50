//! Issue 15, item 1: every spelling of `?watch` that kube-apiserver takes as
//! a watch is one to portcullis too, and a Secret answer is read as what it
//! is (a watch stream, a list, a shape portcullis does not know), never
//! passed unredacted.
//!
//! The stand-in for a cluster that decodes `watch` as Go does: the
//! simulated cluster answers the Secrets collection with the watch stream
//! kube-apiserver sends for those spellings (plain `application/json`,
//! one event a line), whatever portcullis asked.

use super::{assert_hidden, stored_secret, PASSWORD, PASSWORD_B64};
use crate::harness::Portcullis;
use portcullis_sim::faults::{FaultAction, FaultRule};
use serde_json::json;
use std::time::Duration;

const COLLECTION: &str = "/clusters/sim/api/v1/namespaces/shop/secrets";

/// An agent delegated ana's `secrets-reader` grant on shop: ana sees values,
/// her agent never does.
fn agent(env: &Portcullis) -> String {
    let (_, grants) = env.person_with_ttl("ana", &[("secrets-reader", Some("shop"))], Duration::from_secs(3600));
    env.agent("ana", &[&grants[0]])
}

/// The cluster answers the collection with `body` as `content_type`.
fn answer(env: &Portcullis, content_type: &str, body: Vec<u8>) {
    env.sim().faults().clear();
    env.sim().faults().add(FaultRule::new(
        "/api/v1/namespaces/shop/secrets",
        FaultAction::Body {
            content_type: content_type.into(),
            body: body.into(),
            code: 200,
        },
    ));
}

/// db-credentials as watch events (`kinds`), as kube-apiserver writes them.
fn watch_events(env: &Portcullis, kinds: &[&str]) -> Vec<u8> {
    let secret = stored_secret(env, "db-credentials").expect("seeded");
    let mut stream = Vec::new();
    for kind in kinds {
        serde_json::to_writer(&mut stream, &json!({"type": kind, "object": &*secret})).unwrap();
        stream.push(b'\n');
    }
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_watching_secrets_with_any_spelling_the_api_server_takes_never_sees_a_value() {
    let env = super::start().await;
    let agent = agent(&env);
    // The first event of a watch on one Secret: what the cluster has sent
    // when the stream's first frame reaches portcullis.
    answer(&env, "application/json", watch_events(&env, &["ADDED"]));
    for query in [
        "watch",
        "watch=",
        "watch=yes",
        "watch=1&watch=0",
        "watch&fieldSelector=metadata.name%3Ddb-credentials",
    ] {
        let response = env.raw().get(&format!("{COLLECTION}?{query}"), &agent).await;
        assert_eq!(response.status, 200, "{query}");
        let text = String::from_utf8_lossy(&response.body);
        assert_hidden(&text);
        assert_eq!(
            text.matches("\"password\":\"<redacted, 15 bytes>\"").count(),
            1,
            "{query}: the event is redacted: {text}"
        );
        let row = crate::audit::row(&env, &crate::audit::audit_id(&response)).await;
        assert_eq!((row.verb.as_str(), row.redacted), ("watch", true), "{query}");
        if query.contains("fieldSelector") {
            assert_eq!(
                row.name, "db-credentials",
                "the selected object, as the API server names it"
            );
        }
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_stream_answering_what_portcullis_took_for_a_list_is_still_redacted() {
    let env = super::start().await;
    let agent = agent(&env);
    answer(&env, "application/json", watch_events(&env, &["ADDED", "MODIFIED"]));
    let response = env.raw().get(&format!("{COLLECTION}?watch=false"), &agent).await;
    assert_eq!(response.status, 200);
    let text = String::from_utf8_lossy(&response.body);
    assert_hidden(&text);
    assert_eq!(text.matches("<redacted, 15 bytes>").count(), 2, "{text}");
    let row = crate::audit::row(&env, &crate::audit::audit_id(&response)).await;
    assert_eq!(row.verb, "list");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_watch_parameter_streams_the_simulated_clusters_watch_redacted() {
    let env = super::start().await;
    let agent = agent(&env);
    let path = format!("{COLLECTION}?watch&fieldSelector=metadata.name%3Ddb-credentials&timeoutSeconds=1");
    let response = env.raw().get(&path, &agent).await;
    assert_eq!(response.status, 200);
    let text = String::from_utf8_lossy(&response.body);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().expect("an event")).unwrap();
    assert_eq!(first["type"], "ADDED", "{text}");
    assert_eq!(first["object"]["data"]["password"], "<redacted, 15 bytes>");
    assert_hidden(&text);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_answer_of_a_shape_portcullis_does_not_know_is_refused_and_audited() {
    let env = super::start().await;
    let agent = agent(&env);
    let mixed = json!({"kind": "List", "apiVersion": "v1", "items": [
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}, "data": {"password": PASSWORD}}]});
    let cases = [
        ("application/json", serde_json::to_vec(&mixed).unwrap()),
        (
            "application/yaml",
            format!("kind: Secret\ndata:\n  password: {PASSWORD_B64}\n").into_bytes(),
        ),
    ];
    for (content_type, body) in cases {
        answer(&env, content_type, body);
        let response = env.raw().get(COLLECTION, &agent).await;
        assert_eq!(
            (response.status.as_u16(), response.json()["reason"].as_str()),
            (502, Some("BadGateway")),
            "{content_type}"
        );
        assert_hidden(&String::from_utf8_lossy(&response.body));
        let row = crate::audit::row(&env, &crate::audit::audit_id(&response)).await;
        assert_eq!(
            (row.code, row.refused.as_str()),
            (502, "unredactable"),
            "{content_type}"
        );
    }
    env.stop().await;
}
