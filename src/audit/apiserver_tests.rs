use super::*;
use serde_json::json;

const SA: &str = "system:serviceaccount:portcullis:portcullis";

fn event(id: &str, user: &str, impersonated: Option<&str>) -> serde_json::Value {
    let mut event = json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
        "auditID": id, "stage": "ResponseComplete", "verb": "get",
        "requestURI": "/api/v1/namespaces/shop/secrets/db",
        "user": {"username": user, "groups": ["system:serviceaccounts"]},
        "sourceIPs": ["10.0.0.9"], "userAgent": "kubectl/v1.33",
        "responseStatus": {"metadata": {}, "code": 200},
        "requestObject": {"kind": "Secret", "data": {"password": "aHVudGVyMg=="}},
        "responseObject": {"kind": "Secret", "data": {"password": "aHVudGVyMg=="}},
        "annotations": {"authorization.k8s.io/decision": "allow",
                        "authorization.k8s.io/reason": "RBAC: allowed by RoleBinding \"g\""},
        "requestReceivedTimestamp": "2026-01-02T03:04:05.000001Z",
        "stageTimestamp": "2026-01-02T03:04:05.100000Z"
    });
    if let Some(name) = impersonated {
        event["impersonatedUser"] = json!({"username": name, "groups": ["portcullis:grant:1"]});
    }
    event
}

fn list(items: Vec<serde_json::Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items})).unwrap()
}

fn cluster() -> ClusterConfig {
    ClusterConfig {
        name: "prod".into(),
        server: "https://x".into(),
        ca_file: "ca".into(),
        token_file: "t".into(),
        audit_webhook_token_file: None,
        audit_webhook_client_ca_file: None,
        service_account: None,
    }
}

#[test]
fn an_event_list_keeps_what_the_join_needs_and_never_a_body() {
    let events = parse_batch(&list(vec![event("a", SA, Some("user:ana"))])).unwrap();
    let kept = kept("prod", events.into_iter().next().unwrap());
    assert_eq!(
        (kept.audit_id.as_str(), kept.stage.as_str(), kept.code),
        ("a", "ResponseComplete", 200)
    );
    assert_eq!(kept.impersonated_user, "user:ana");
    assert_eq!(kept.impersonated_groups, ["portcullis:grant:1"]);
    assert_eq!(
        (kept.decision.as_str(), kept.source_ips[0].as_str()),
        ("allow", "10.0.0.9")
    );
    assert!(kept.reason.contains("RoleBinding"));
    let debug = format!("{kept:?}");
    assert!(!debug.contains("aHVudGVyMg"), "no body reaches what is kept: {debug}");
}

#[test]
fn a_nul_in_an_events_text_is_kept_marked_so_every_store_takes_the_batch() {
    let mut nul = event("a", SA, Some("user:ana"));
    nul["requestURI"] = json!("/api/v1/namespaces/%00/pods");
    nul["userAgent"] = json!("curl\u{0}");
    nul["annotations"]["authorization.k8s.io/reason"] = json!("namespaces \"\u{0}\" not found");
    let events = parse_batch(&list(vec![nul, event("b", SA, Some("user:ben"))])).unwrap();
    let kept: Vec<_> = events.into_iter().map(|e| kept("prod", e)).collect();
    assert_eq!(kept[0].user_agent, "curl\u{fffd}");
    assert_eq!(kept[0].reason, "namespaces \"\u{fffd}\" not found");
    assert_eq!(
        kept[0].request_uri, "/api/v1/namespaces/%00/pods",
        "escaped, kept as is"
    );
    for store in crate::store::testing::both() {
        let b = store.backend;
        // PostgreSQL refused the whole batch before, losing "b" with "a".
        assert_eq!(store.store_apiserver_events(&kept).unwrap(), 2, "{b}");
        assert_eq!(
            store.apiserver_events("a").unwrap()[0].user_agent,
            "curl\u{fffd}",
            "{b}"
        );
        assert_eq!(store.apiserver_events("b").unwrap().len(), 1, "{b}");
    }
}

#[test]
fn a_malformed_batch_is_refused_whole() {
    let mut missing_stage = event("b", SA, None);
    missing_stage.as_object_mut().unwrap().remove("stage");
    let batch = list(vec![event("a", SA, None), missing_stage]);
    assert!(matches!(parse_batch(&batch), Err(BatchError::Malformed(_))));
    assert!(parse_batch(b"{").is_err());
    let wrong_kind = serde_json::to_vec(&json!({"kind": "List", "apiVersion": "v1", "items": []})).unwrap();
    assert!(parse_batch(&wrong_kind).is_err());
    let long_id = list(vec![event(&"x".repeat(MAX_ID + 1), SA, None)]);
    assert!(parse_batch(&long_id).is_err());
}

#[test]
fn a_log_line_that_is_not_an_event_is_named_by_its_number() {
    let good = event("a", SA, None).to_string();
    let text = format!("{good}\n\n{good}\nnot json\n");
    match parse_lines(&text) {
        Err(BatchError::Line { line, .. }) => assert_eq!(line, 4),
        other => panic!("{other:?}"),
    }
    assert_eq!(parse_lines(&format!("{good}\n{good}\n")).unwrap().len(), 2);
}

#[test]
fn only_portcullis_and_its_people_are_kept() {
    let events = parse_batch(&list(vec![
        event("a", SA, None),
        event("b", "system:kube-controller-manager", None),
        event("c", "admin", Some("user:ana")),
        event("d", "admin", Some("system:serviceaccount:x:y")),
    ]))
    .unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| concerns_portcullis(e, SA))
        .map(|e| e.audit_id.as_str())
        .collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn an_ingested_batch_counts_kept_duplicates_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let batch = || parse_batch(&list(vec![event("a", SA, None), event("b", "other", None)])).unwrap();
    let first = ingest(&store, &cluster(), batch()).unwrap();
    assert_eq!(
        first,
        Ingested {
            kept: 1,
            duplicates: 0,
            ignored: 1
        }
    );
    assert_eq!(ingest(&store, &cluster(), batch()).unwrap().duplicates, 1);
    assert_eq!(store.apiserver_events("a").unwrap().len(), 1);
    assert!(store.apiserver_events("b").unwrap().is_empty());
}
