//! portcullis's audit joined to the real API server's audit log by Audit-ID:
//! each row portcullis forwarded is all the API server's events with its id
//! (the stages of one request), under the impersonated user and the grant
//! groups; every event of that user in the test's namespaces is a row; and
//! what portcullis refused itself never reached the API server.

use crate::harness::{Portcullis, RawResponse, REAL_CLUSTER};
use crate::support::eventually;
use http::Method;
use portcullis::audit::query::Filter;
use portcullis::audit::row::AuditRow;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// Who portcullis is to the API server.
const PORTCULLIS: &str = "system:serviceaccount:portcullis:portcullis";

/// portcullis's request body limit in this test.
const BODY_LIMIT: usize = 64 * 1024;

/// What one test sends through portcullis, and to whom.
struct Caller<'a> {
    env: &'a Portcullis,
    auth: String,
}

impl Caller<'_> {
    async fn send(&self, method: Method, path: &str, extra: &[(&str, &str)], body: &str) -> RawResponse {
        let mut headers = vec![
            ("authorization", self.auth.as_str()),
            ("content-type", "application/json"),
        ];
        headers.extend_from_slice(extra);
        let url = format!("/clusters/{REAL_CLUSTER}{path}");
        self.env
            .raw()
            .send(method, &url, &headers, body.as_bytes().to_vec())
            .await
    }
}

/// Every row of this portcullis's store (its own: no other test's).
fn all_rows(env: &Portcullis) -> Vec<AuditRow> {
    let everything = Filter {
        discovery: true,
        ..Filter::default()
    };
    crate::audit::rows(env, everything).into_iter().map(|c| c.row).collect()
}

/// The API server's events, by audit id.
fn events_by_id() -> HashMap<String, Vec<Value>> {
    let mut by_id: HashMap<String, Vec<Value>> = HashMap::new();
    for event in super::shared().audit_events() {
        let id = event["auditID"].as_str().unwrap_or_default().to_string();
        by_id.entry(id).or_default().push(event);
    }
    by_id
}

/// Send one of each kind of request; returns the answered codes by audit id.
async fn traffic(caller: &Caller<'_>, ns: &str, other: &str) -> HashMap<String, u16> {
    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"joined"},"data":{"a":"1"}}"#;
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","data":{{"x":"{}"}}}}"#,
        "a".repeat(2 * BODY_LIMIT)
    );
    let answers = [
        caller.send(Method::POST, &configmaps, &[], body).await,
        caller.send(Method::GET, &format!("{configmaps}/joined"), &[], "").await,
        caller.send(Method::GET, &configmaps, &[], "").await,
        // Refused by the API server: no grant there.
        caller
            .send(Method::GET, &format!("/api/v1/namespaces/{other}/configmaps"), &[], "")
            .await,
        // Refused by portcullis: a body over its limit, and a claimed identity.
        caller.send(Method::POST, &configmaps, &[], &big).await,
        caller
            .send(Method::GET, &configmaps, &[("impersonate-user", "admin")], "")
            .await,
        // A watch the API server ends after a second.
        caller
            .send(Method::GET, &format!("{configmaps}?watch=1&timeoutSeconds=1"), &[], "")
            .await,
    ];
    let codes: Vec<u16> = answers.iter().map(|a| a.status.as_u16()).collect();
    assert_eq!(codes, [201, 200, 200, 403, 413, 400, 200]);
    answers
        .iter()
        .map(|a| (crate::audit::audit_id(a), a.status.as_u16()))
        .collect()
}

/// The stages the API server logs for one request.
fn stages(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["stage"].as_str()).collect()
}

/// One forwarded row against all the API server's events with its id.
fn assert_joined(row: &AuditRow, events: &[Value], groups: &BTreeSet<String>) {
    let expected = if row.verb == "watch" {
        vec!["RequestReceived", "ResponseStarted", "ResponseComplete"]
    } else {
        vec!["RequestReceived", "ResponseComplete"]
    };
    assert_eq!(stages(events), expected, "row {} ({} {})", row.id, row.verb, row.path);
    for event in events {
        assert_eq!(event["user"]["username"], PORTCULLIS, "{event}");
        assert_eq!(event["verb"], row.verb.as_str(), "{event}");
        assert_eq!(
            event["requestURI"].as_str().unwrap().split('?').next(),
            Some(row.path.as_str())
        );
        assert_eq!(event["objectRef"]["namespace"], row.namespace.as_str(), "{event}");
    }
    // The API server impersonates after logging a request's first stage.
    for event in &events[1..] {
        assert_eq!(
            event["impersonatedUser"]["username"],
            format!("user:{}", row.login),
            "{event}"
        );
        let sent: BTreeSet<String> = event["impersonatedUser"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(String::from))
            .filter(|g| g.starts_with("portcullis:grant:"))
            .collect();
        assert_eq!(&sent, groups, "{event}");
    }
    let complete = events.last().unwrap();
    assert_eq!(complete["responseStatus"]["code"], row.code, "{complete}");
}

/// Every row, once each forwarded one's last stage is in the API server's
/// log; and the API server's events by audit id.
async fn settled(env: &Portcullis, answered: &HashMap<String, u16>) -> (Vec<AuditRow>, HashMap<String, Vec<Value>>) {
    eventually(
        "every row, and the API server's last stage of each forwarded one",
        async || {
            let rows = all_rows(env);
            let events = events_by_id();
            let waiting: Vec<String> = rows
                .iter()
                .filter(|r| r.refused.is_empty())
                .filter(|r| !stages(events.get(&r.id).map_or(&[][..], Vec::as_slice)).contains(&"ResponseComplete"))
                .map(|r| format!("{} {}", r.verb, r.id))
                .collect();
            if rows.len() == answered.len() && waiting.is_empty() {
                Ok((rows, events))
            } else {
                Err(format!(
                    "{} of {} rows; no last stage yet of {waiting:?}",
                    rows.len(),
                    answered.len()
                ))
            }
        },
    )
    .await
}

/// The ids of the rows portcullis forwarded.
fn forwarded_ids(rows: &[AuditRow]) -> BTreeSet<&str> {
    rows.iter()
        .filter(|r| r.refused.is_empty())
        .map(|r| r.id.as_str())
        .collect()
}

/// The ids of the API server's events impersonating `user` in `namespaces`.
fn impersonating<'e>(user: &str, namespaces: &[&str], events: &'e HashMap<String, Vec<Value>>) -> BTreeSet<&'e str> {
    events
        .values()
        .flatten()
        .filter(|e| e["impersonatedUser"]["username"] == user)
        .filter(|e| namespaces.contains(&e["objectRef"]["namespace"].as_str().unwrap_or_default()))
        .filter_map(|e| e["auditID"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forwarded_row_is_the_api_servers_events_with_its_audit_id_and_every_event_is_a_row() {
    let env = Portcullis::start_real_with(|c| c.limits.request_body_bytes = BODY_LIMIT as u64).await;
    let cluster = super::shared();
    let (ns, other) = (
        cluster.namespace("join").unwrap(),
        cluster.namespace("join-other").unwrap(),
    );
    let (token, grants) = env.person_with_ttl("jo", &[("developer", Some(&ns))], std::time::Duration::from_secs(3600));
    let caller = Caller {
        env: &env,
        auth: format!("Bearer {token}"),
    };
    let answered = traffic(&caller, &ns, &other).await;
    let groups: BTreeSet<String> = grants.iter().map(|g| g.group()).collect();

    let (rows, events) = settled(&env, &answered).await;

    for row in &rows {
        assert_eq!(
            answered.get(&row.id),
            Some(&row.code),
            "row {} answered as recorded",
            row.id
        );
        let found = events.get(&row.id).map_or(&[][..], Vec::as_slice);
        if row.refused.is_empty() {
            assert_joined(row, found, &groups);
        } else {
            assert!(
                found.is_empty(),
                "refused by portcullis ({}), yet the API server saw it: {found:?}",
                row.refused
            );
        }
    }
    let mut refused: Vec<&str> = rows
        .iter()
        .map(|r| r.refused.as_str())
        .filter(|r| !r.is_empty())
        .collect();
    refused.sort();
    assert_eq!(refused, ["body_too_large", "identity_header"]);

    // The other way round: each event of jo in these namespaces is a row.
    assert_eq!(impersonating("user:jo", &[&ns, &other], &events), forwarded_ids(&rows));
    env.stop().await;
}
