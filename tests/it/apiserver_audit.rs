//! The API server's own audit, delivered to portcullis's webhook
//! (`/apiserver-audit/<cluster>`) as kube-apiserver's batch backend posts
//! it: refused without the cluster's own token, kept once per stage and
//! never with a body, joined to portcullis's row by audit id, and an alert
//! for a request made as portcullis that portcullis never sent.

use crate::audit::{alerts, audit_id, row, rows};
use crate::harness::{Portcullis, RawResponse, CLUSTER};
use crate::support::eventually;
use http::Method;
use portcullis::audit::query::Filter;
use portcullis::identity::Principal;
use serde_json::{json, Value};
use std::time::Duration;

const SA: &str = "system:serviceaccount:portcullis:portcullis";
const WEBHOOK_TOKEN: &str = "webhook-token-for-the-test-cluster";

/// portcullis with a webhook token for its cluster and a 1 s grace time
/// (the token's directory lives as long as the test).
async fn start() -> (Portcullis, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("audit-webhook-token");
    std::fs::write(&token_file, format!("{WEBHOOK_TOKEN}\n")).unwrap();
    let env = Portcullis::start_with(|config| {
        config.clusters[0].audit_webhook_token_file = Some(token_file);
        config.audit.bypass_grace = Duration::from_secs(1);
    })
    .await;
    (env, dir)
}

/// One event as kube-apiserver writes it, with a Secret in its bodies.
fn event(id: &str, stage: &str, impersonated: Option<&str>) -> Value {
    let mut event = json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
        "auditID": id, "stage": stage, "verb": "get",
        "requestURI": "/api/v1/namespaces/shop/secrets/db",
        "user": {"username": SA, "groups": ["system:serviceaccounts"]},
        "sourceIPs": ["203.0.113.7"], "userAgent": "curl/8.5.0",
        "responseStatus": {"metadata": {}, "code": 200},
        "requestObject": {"kind": "Secret", "data": {"password": "c2VjcmV0LXZhbHVlLTQy"}},
        "responseObject": {"kind": "Secret", "stringData": {"password": "secret-value-42"}},
        "annotations": {"authorization.k8s.io/decision": "allow",
                        "authorization.k8s.io/reason": "RBAC: allowed by RoleBinding \"grant-1/shop\""},
        "requestReceivedTimestamp": "2026-01-02T03:04:05.000001Z",
        "stageTimestamp": "2026-01-02T03:04:05.100000Z"
    });
    if let Some(name) = impersonated {
        event["impersonatedUser"] = json!({"username": name, "groups": ["portcullis:grant:1"]});
    }
    event
}

/// `events` impersonating the group of ana's grant (the bypass check
/// holds a request's grant groups to its person's grants), not the
/// made-up `portcullis:grant:1`.
fn as_anas(env: &Portcullis, mut events: Vec<Value>) -> Vec<Value> {
    let ana = portcullis::identity::Principal::person("ana");
    let grant = env
        .store
        .list_grants()
        .unwrap()
        .into_iter()
        .find(|g| g.subject == ana)
        .unwrap();
    for event in &mut events {
        if event["impersonatedUser"]["username"] == "user:ana" {
            event["impersonatedUser"]["groups"] = json!([grant.group()]);
        }
    }
    events
}

fn batch(items: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items})).unwrap()
}

async fn post(env: &Portcullis, token: Option<&str>, body: Vec<u8>) -> RawResponse {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    let path = format!("/apiserver-audit/{CLUSTER}");
    env.raw().send(Method::POST, &path, &headers, body).await
}

/// The events kept of `id`.
fn kept(env: &Portcullis, id: &str) -> Vec<portcullis::store::ApiserverEvent> {
    env.store.apiserver_events(id).unwrap()
}

/// The webhook call's own audit row, found by its answer's audit id.
async fn call_row(env: &Portcullis, response: &RawResponse) -> portcullis::audit::row::AuditRow {
    let id = audit_id(response);
    eventually("the webhook call's row", async || {
        let filter = Filter {
            id: Some(id.clone()),
            discovery: true,
            ..Filter::default()
        };
        rows(env, filter).pop()
    })
    .await
    .row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_call_without_the_clusters_own_token_is_refused_with_an_audit_row() {
    let (env, _token_dir) = start().await;
    let person = env.person("ana", &[("viewer", Some("shop"))]);
    for token in [None, Some("wrong-token"), Some(person.as_str())] {
        let response = post(&env, token, batch(vec![event("forged-1", "ResponseComplete", None)])).await;
        assert_eq!(response.status, 401, "{token:?}");
        assert_eq!(response.json()["reason"], "Unauthorized");
        let row = call_row(&env, &response).await;
        assert_eq!(row.refused, "audit_webhook_credential");
    }
    assert!(kept(&env, "forged-1").is_empty(), "nothing of a refused call is kept");
    let elsewhere = env
        .raw()
        .send(
            Method::POST,
            "/apiserver-audit/other",
            &[("authorization", &format!("Bearer {WEBHOOK_TOKEN}"))],
            batch(vec![]),
        )
        .await;
    assert_eq!(elsewhere.status, 401, "another cluster's URL does not take this token");
}

/// A refused call's body still arriving is read and discarded before the
/// 401, so its HTTP/1.1 connection serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_call_refused_for_its_token_leaves_the_http1_connection_usable() {
    let (env, _token_dir) = start().await;
    let padding = "x".repeat(512 * 1024);
    let events = batch(vec![json!({"kind": "Event", "auditID": "padded", "padding": padding})]);
    let path = format!("/apiserver-audit/{CLUSTER}");
    let answers = env.refused_then_next(&path, String::from_utf8(events).unwrap()).await;
    assert_eq!(answers, ["401 1", "200 0"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_delivered_twice_is_kept_once_and_never_with_its_bodies() {
    let (env, _token_dir) = start().await;
    let events = vec![
        event("dup-1", "RequestReceived", Some("user:ana")),
        event("dup-1", "ResponseComplete", Some("user:ana")),
    ];
    for _ in 0..2 {
        let response = post(&env, Some(WEBHOOK_TOKEN), batch(events.clone())).await;
        assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
    }
    let stages: Vec<String> = kept(&env, "dup-1").into_iter().map(|e| e.stage).collect();
    assert_eq!(stages, ["RequestReceived", "ResponseComplete"]);
    let database = std::fs::read(env.store.path()).unwrap();
    let wal = std::fs::read(env.store.path().with_extension("db-wal")).unwrap_or_default();
    for secret in ["secret-value-42", "c2VjcmV0LXZhbHVlLTQy"] {
        for bytes in [&database, &wal] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} reached the store"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_batch_is_refused_and_what_was_kept_before_stays() {
    let (env, _token_dir) = start().await;
    let good = post(
        &env,
        Some(WEBHOOK_TOKEN),
        batch(vec![event("kept-1", "ResponseComplete", None)]),
    )
    .await;
    assert_eq!(good.status, 200);
    let mut broken = event("lost-1", "ResponseComplete", None);
    broken.as_object_mut().unwrap().remove("auditID");
    let bad = batch(vec![event("lost-2", "ResponseComplete", None), broken]);
    let response = post(&env, Some(WEBHOOK_TOKEN), bad).await;
    assert_eq!(response.status, 400);
    let message = response.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("nothing of it kept") && message.contains("auditID"),
        "{message}"
    );
    assert_eq!(call_row(&env, &response).await.refused, "audit_webhook_batch");
    assert!(
        kept(&env, "lost-2").is_empty(),
        "a refused batch is kept not even in part"
    );
    assert_eq!(kept(&env, "kept-1").len(), 1, "an earlier batch is intact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_endpoint_shows_the_api_servers_stages_and_rbac_reason_beside_the_row() {
    let (env, _token_dir) = start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &ana)
        .await;
    let id = audit_id(&response);
    row(&env, &id).await;
    let events = vec![
        event(&id, "RequestReceived", Some("user:ana")),
        event(&id, "ResponseComplete", Some("user:ana")),
    ];
    assert_eq!(post(&env, Some(WEBHOOK_TOKEN), batch(events)).await.status, 200);
    // Another cluster's request under the same id (a client may send any
    // Audit-ID) is not this row's.
    let elsewhere = portcullis::store::ApiserverEvent {
        audit_id: id.clone(),
        stage: "ResponseComplete".into(),
        cluster: "elsewhere".into(),
        received_at: chrono::Utc::now(),
        stage_at: chrono::Utc::now(),
        ..Default::default()
    };
    env.store.store_apiserver_events(&[elsewhere]).unwrap();
    let admin = env.person("root", &[]);
    env.store.set_admin(&Principal::person("root"), true).unwrap();
    let read = env.raw().get(&format!("/audit?id={id}"), &admin).await;
    assert_eq!(read.status, 200, "{}", String::from_utf8_lossy(&read.body));
    let line: Value = serde_json::from_slice(read.body.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["id"], id.as_str());
    assert_eq!(line["login"], "ana");
    let apiserver = line["apiserver"].as_array().unwrap();
    assert_eq!(apiserver.len(), 2, "{line}");
    assert_eq!(apiserver[1]["stage"], "ResponseComplete");
    assert_eq!(apiserver[1]["code"], 200);
    assert_eq!(apiserver[1]["impersonated_user"], "user:ana");
    assert_eq!(apiserver[1]["impersonated_groups"][0], "portcullis:grant:1");
    assert_eq!(apiserver[1]["decision"], "allow");
    assert!(apiserver[1]["reason"].as_str().unwrap().contains("RoleBinding"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_made_as_portcullis_that_it_never_sent_becomes_an_alert_after_the_grace() {
    let (env, _token_dir) = start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &ana)
        .await;
    let forwarded = audit_id(&response);
    // Committed before its event comes: else, late past the grace on a
    // loaded machine, it is counted as never sent.
    row(&env, &forwarded).await;
    let events = as_anas(
        &env,
        vec![
            event("leaked-1", "ResponseComplete", None),
            event("leaked-2", "ResponseComplete", Some("user:ana")),
            event(&forwarded, "ResponseComplete", Some("user:ana")),
        ],
    );
    assert_eq!(post(&env, Some(WEBHOOK_TOKEN), batch(events)).await.status, 200);
    let raised = eventually("two alert rows", async || {
        let found = alerts(&env);
        (found.len() == 2).then_some(found)
    })
    .await;
    let ids: Vec<&str> = raised.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["leaked-1", "leaked-2"], "the forwarded request is no alert");
    assert_eq!(raised[0].client, "203.0.113.7");
    let metrics = env.raw().get("/metrics", "").await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(text.contains("portcullis_bypass_alerts_total 2"), "{text}");
    let listed = env.cli(&["admin", "audit", "alerts"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("leaked-1") && listed.contains("curl%2F8.5.0") && listed.contains("Bypass"),
        "{listed}"
    );
    let newest = env.cli(&["admin", "audit", "alerts", "--limit", "1"]);
    let (table, note) = (
        String::from_utf8_lossy(&newest.stdout),
        String::from_utf8_lossy(&newest.stderr),
    );
    assert_eq!(table.lines().count(), 2, "the header and one alert: {table}");
    assert!(note.contains("the newest 1 alerts"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_portcullis_audit_id_impersonating_someone_else_becomes_an_alert() {
    let (env, _token_dir) = start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let pods = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    let (sent, reused) = (
        audit_id(&env.raw().get(&pods, &ana).await),
        audit_id(&env.raw().get(&pods, &ana).await),
    );
    row(&env, &sent).await;
    row(&env, &reused).await;
    let events = as_anas(
        &env,
        vec![
            event(&sent, "ResponseComplete", Some("user:ana")),
            event(&reused, "ResponseComplete", Some("user:bob")),
        ],
    );
    assert_eq!(post(&env, Some(WEBHOOK_TOKEN), batch(events)).await.status, 200);
    let raised = eventually("an alert row", async || alerts(&env).pop()).await;
    assert_eq!(
        (raised.id.as_str(), raised.reason.as_str()),
        (reused.as_str(), "Impersonation")
    );
    assert!(raised.query.contains("impersonatedUser=user%3Abob"), "{}", raised.query);
    let checked = eventually("ana's own request checked", async || {
        env.store.apiserver_audit_checked(&sent).unwrap()
    })
    .await;
    assert_eq!(checked, portcullis::store::Checked::Matched);
    assert_eq!(alerts(&env).len(), 1, "only the reused audit id is an alert");
}

/// The API server takes a client's `Audit-ID` as it is: a request sent
/// around portcullis with an id portcullis used, as the same person and
/// groups, ten minutes after portcullis's own, is kept as a request of its
/// own (not dropped as a delivery again) and becomes an alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_request_under_an_audit_id_portcullis_used_becomes_an_alert_though_it_impersonates_the_same() {
    let (env, _token_dir) = start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let pods = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    let sent = audit_id(&env.raw().get(&pods, &ana).await);
    row(&env, &sent).await;
    let raised = reused_at(&env, &sent, "2026-01-02T03:14:05").await;
    assert!(
        raised.started_at.to_rfc3339().starts_with("2026-01-02T03:14:05"),
        "{raised:?}"
    );
}

/// ana's own request `sent` and a second one under its id received at
/// `second` (`YYYY-MM-DDTHH:MM:SS`), as the API server reports them: the
/// one alert they raise, a reuse.
async fn reused_at(env: &Portcullis, sent: &str, second: &str) -> portcullis::audit::row::AuditRow {
    let own = as_anas(env, vec![event(sent, "ResponseComplete", Some("user:ana"))]).remove(0);
    let mut again = own.clone();
    again["requestReceivedTimestamp"] = json!(format!("{second}.000001Z"));
    again["stageTimestamp"] = json!(format!("{second}.100000Z"));
    assert_eq!(
        post(env, Some(WEBHOOK_TOKEN), batch(vec![own, again])).await.status,
        200
    );
    let raised = eventually("an alert row", async || alerts(env).pop()).await;
    assert_eq!((raised.id.as_str(), raised.reason.as_str()), (sent, "ReusedAuditID"));
    assert_eq!(alerts(env).len(), 1, "portcullis's own request is no alert");
    raised
}

/// A request through a `proxy` subresource (as an exec or a port-forward)
/// is a POST, so a write, and yet one request however long it lasts: a
/// second request under its id a second later is a reuse, not one of a
/// held write's stages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_under_the_audit_id_of_a_proxied_post_becomes_an_alert() {
    let (env, _token_dir) = start().await;
    let ana = env.person("ana", &[("developer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/services/web:80/proxy/reset");
    let auth = format!("Bearer {ana}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let sent = audit_id(&env.raw().send(Method::POST, &path, &headers, b"{}".to_vec()).await);
    let own_row = row(&env, &sent).await;
    assert!(own_row.write && own_row.subresource == "proxy", "{own_row:?}");
    // One second after the first (`event`'s 03:04:05): within what a
    // write's stages may take.
    reused_at(&env, &sent, "2026-01-02T03:04:06").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_counts_matched_events_alerts_and_requests_whose_event_never_came() {
    let (env, _token_dir) = start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let pods = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    let sent = audit_id(&env.raw().get(&pods, &ana).await);
    let lost = audit_id(&env.raw().get(&pods, &ana).await);
    row(&env, &sent).await;
    row(&env, &lost).await;
    let events = as_anas(
        &env,
        vec![
            event(&sent, "RequestReceived", None),
            event(&sent, "ResponseComplete", Some("user:ana")),
            event("leaked-9", "ResponseComplete", None),
        ],
    );
    assert_eq!(post(&env, Some(WEBHOOK_TOKEN), batch(events)).await.status, 200);
    let coverage = || {
        let out = env.cli(&[
            "admin",
            "audit",
            "coverage",
            "--cluster",
            CLUSTER,
            "--since",
            "1h",
            "--json",
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let counted = eventually("both events checked and the lost request past the grace", async || {
        let c = coverage();
        let lost_requests = c["missing"].as_u64().unwrap() - c["missing_own"].as_u64().unwrap();
        (c["unchecked"] == 0 && lost_requests == 1).then_some(c)
    })
    .await;
    assert_eq!(
        (&counted["apiserver_requests"], &counted["matched"], &counted["alerts"]),
        (&json!(2), &json!(1), &json!(1)),
        "{counted}"
    );
    assert!(env.store.apiserver_events(&lost).unwrap().is_empty());
    let text = env.cli(&["admin", "audit", "coverage", "--cluster", CLUSTER]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("matched to portcullis:    1") && text.contains("webhook working?"),
        "{text}"
    );
    let unknown = env.cli(&["admin", "audit", "coverage", "--cluster", "nowhere"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("cluster nowhere is not configured"));
}
