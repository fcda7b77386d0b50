//! The audit through a running portcullis: one row per request and per
//! upgraded stream, joined with the cluster's audit id, written before a
//! write is forwarded, kept across a restart, tamper-evident and queryable.

use crate::harness::{Portcullis, CLUSTER};
use crate::support::eventually;
use http::Method;
use portcullis::audit::query::Filter;
use portcullis::audit::row::{AuditRow, ChainedRow};
use portcullis::audit::sqlite::SqliteAuditStore;
use portcullis::audit::store::AuditStore;
use portcullis::identity::{credential, Principal};
use std::time::Duration;

/// Rows matching `filter`, read as the CLI would, with its own connection.
pub fn rows(env: &Portcullis, filter: Filter) -> Vec<ChainedRow> {
    SqliteAuditStore::open(env.store.path())
        .unwrap()
        .query(&filter)
        .unwrap()
}

/// The row of `id`, once committed (reads are committed within 100 ms of
/// their response's end).
pub async fn row(env: &Portcullis, id: &str) -> AuditRow {
    let filter = Filter {
        id: Some(id.into()),
        ..Filter::default()
    };
    let found = eventually(&format!("audit row {id}"), async || rows(env, filter.clone()).pop()).await;
    found.row
}

/// The alert rows (requests around portcullis, changed impersonations,
/// reused audit ids), as the CLI reads them.
pub fn alerts(env: &Portcullis) -> Vec<AuditRow> {
    let filter = Filter {
        kind: Some("alert".into()),
        ..Filter::default()
    };
    rows(env, filter).into_iter().map(|c| c.row).collect()
}

pub fn audit_id(response: &crate::harness::RawResponse) -> String {
    response
        .headers
        .get("audit-id")
        .expect("Audit-Id returned")
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_one_row_whose_id_the_cluster_recorded_as_its_audit_id() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .get(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods?limit=500"),
            &token,
        )
        .await;
    assert_eq!(response.status, 200);
    let id = audit_id(&response);
    let row = row(&env, &id).await;
    let upstream: Vec<_> = env.sim().requests().into_iter().filter(|r| r.audit_id == id).collect();
    assert_eq!(upstream.len(), 1, "the cluster recorded the row's id as its audit id");
    assert_eq!(upstream[0].path, "/api/v1/namespaces/shop/pods");
    assert_eq!(
        (row.cluster.as_str(), row.principal_kind.as_str(), row.login.as_str()),
        (CLUSTER, "person", "ana")
    );
    assert_eq!(
        (row.method.as_str(), row.path.as_str(), row.query.as_str()),
        ("GET", "/api/v1/namespaces/shop/pods", "limit=500")
    );
    assert_eq!(
        (row.verb.as_str(), row.resource.as_str(), row.namespace.as_str()),
        ("list", "pods", "shop")
    );
    assert_eq!((row.code, row.client.as_str()), (200, "127.0.0.1"));
    assert_eq!(row.bytes_out, response.body.len() as u64);
    assert!(!row.credential_id.is_empty() && row.ended_at >= row.started_at);
    assert!(!row.write && !row.truncated && !row.discovery && row.refused.is_empty());
    env.stop().await;
}

/// A client that gives up before the answer (kubectl's Ctrl-C, a request
/// timeout) still leaves its request on record: a read the cluster is
/// slow to answer, and a write, each a row saying the client went away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_goes_away_before_its_answer_is_a_row() {
    use portcullis_sim::faults::{FaultAction, FaultRule};
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("developer", Some("shop"))]);
    env.sim().faults().add(FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/configmaps".into(),
        times: None,
        action: FaultAction::Delay(Duration::from_secs(30)),
    });
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let auth = format!("Bearer {token}");
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"gone"}}"#.to_vec();
    for (method, body) in [(Method::GET, Vec::new()), (Method::POST, body)] {
        let (raw, path, auth) = (env.raw(), path.clone(), auth.clone());
        let sent = method.to_string();
        let asked = tokio::spawn(async move {
            let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
            raw.send(method, &path, &headers, body).await
        });
        // The client gives up once the request has reached the cluster,
        // long before the cluster answers.
        eventually("the request reaches the cluster", async || {
            let reached = env
                .sim()
                .requests()
                .iter()
                .any(|r| r.method == sent && r.path == "/api/v1/namespaces/shop/configmaps");
            reached.then_some(())
        })
        .await;
        assert!(!asked.is_finished(), "the cluster has not answered");
        asked.abort();
    }
    let gone = Filter {
        resource: Some("configmaps".into()),
        ..Filter::default()
    };
    let rows = eventually("a row for each request given up", async || {
        let rows: Vec<AuditRow> = rows(&env, gone.clone())
            .into_iter()
            .map(|c| c.row)
            .filter(|r| r.reason == "ClientWentAway")
            .collect();
        (rows.len() == 2).then_some(rows)
    })
    .await;
    let verbs: Vec<&str> = rows.iter().map(|r| r.verb.as_str()).collect();
    assert_eq!(verbs, ["list", "create"]);
    assert!(rows.iter().all(|r| r.login == "ana" && r.code == 0), "{rows:?}");
    env.stop().await;
}

/// A client that goes away in a door, before any pipeline (here: while
/// the authorization page fetches the metadata document its `client_id`
/// names, from a server that never answers), leaves its row too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_goes_away_in_the_door_is_a_row() {
    let env = Portcullis::start_with(|config| {
        config
            .oauth
            .insecure_test_only_fetch_client_metadata_from_private_addresses = true;
    })
    .await;
    // Takes the connection and never says a word.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client_id = format!("https://{}/client.json", silent.local_addr().unwrap());
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", &client_id)
        .finish();
    let raw = env.raw();
    let asked = tokio::spawn(async move {
        raw.send(Method::GET, &format!("/oauth/authorize?{query}"), &[], Vec::new())
            .await
    });
    // portcullis is fetching the document: the door waits on it.
    let (fetching, _) = tokio::time::timeout(Duration::from_secs(60), silent.accept())
        .await
        .expect("portcullis fetches the client's metadata document")
        .unwrap();
    // The client gives up: its stream is reset.
    asked.abort();
    assert!(asked.await.is_err_and(|e| e.is_cancelled()), "no answer came");
    let given_up = eventually("a row for the request given up", async || {
        rows(&env, Filter::default())
            .into_iter()
            .map(|c| c.row)
            .find(|r| r.path == "/oauth/authorize")
    })
    .await;
    assert_eq!(
        (given_up.resource.as_str(), given_up.reason.as_str(), given_up.code),
        ("oauthconsents", "ClientWentAway", 0),
        "{given_up:?}"
    );
    drop(fetching);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rbac_denial_is_a_row_with_the_clusters_reason() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/payments/pods"), &token)
        .await;
    assert_eq!(response.status, 403);
    let row = row(&env, &audit_id(&response)).await;
    assert_eq!(
        (row.code, row.reason.as_str(), row.refused.as_str()),
        (403, "Forbidden", "")
    );
    assert_eq!((row.login.as_str(), row.namespace.as_str()), ("ana", "payments"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rejected_credential_is_a_row_with_its_prefix_and_reason_never_the_token() {
    let env = Portcullis::start().await;
    env.person("ana", &[("viewer", Some("shop"))]);
    let ana = Principal::person("ana");
    let past = chrono::Utc::now() - chrono::TimeDelta::minutes(1);
    let (_, expired) = env.store.issue_credential(&ana, "old", Some(past)).unwrap();
    let (revoked_cred, revoked) = env.store.issue_credential(&ana, "gone", None).unwrap();
    env.store.revoke_credential(&revoked_cred.id).unwrap();
    let unknown = credential::mint().token;
    let malformed = "pcl_definitely-not-a-token".to_string();
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    let missing = env.raw().send(Method::GET, &path, &[], Vec::new()).await;
    let row_of_missing = row(&env, &audit_id(&missing)).await;
    assert_eq!(
        (
            row_of_missing.code,
            row_of_missing.refused.as_str(),
            row_of_missing.reason.as_str()
        ),
        (401, "missing", "Unauthorized")
    );
    for (token, reason) in [
        (&malformed, "malformed"),
        (&unknown, "unknown"),
        (&expired, "expired"),
        (&revoked, "revoked"),
    ] {
        let response = env.raw().get(&path, token).await;
        assert_eq!(response.status, 401, "{reason}");
        let row = row(&env, &audit_id(&response)).await;
        assert_eq!((row.code, row.refused.as_str()), (401, reason));
        assert_eq!(row.credential_prefix, credential::display_prefix(token), "{reason}");
        assert!(row.login.is_empty() && row.credential_id.is_empty(), "{reason}");
        let json = serde_json::to_string(&row).unwrap();
        assert!(!json.contains(token.as_str()), "{reason}: the token is in the row");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_path_and_a_refused_identity_header_are_rows() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let bad_path = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/a%2Fb/pods"), &token)
        .await;
    assert_eq!(bad_path.status, 400);
    let row_of_path = row(&env, &audit_id(&bad_path)).await;
    assert_eq!((row_of_path.code, row_of_path.refused.as_str()), (400, "path"));
    assert_eq!(
        row_of_path.path,
        format!("/clusters/{CLUSTER}/api/v1/namespaces/a%2Fb/pods")
    );
    let auth = format!("Bearer {token}");
    let headers = [("authorization", auth.as_str()), ("impersonate-user", "admin")];
    let claimed = env
        .raw()
        .send(
            Method::GET,
            &format!("/clusters/{CLUSTER}/api/v1/pods"),
            &headers,
            Vec::new(),
        )
        .await;
    assert_eq!(claimed.status, 400);
    let row_of_claim = row(&env, &audit_id(&claimed)).await;
    assert_eq!(
        (row_of_claim.refused.as_str(), row_of_claim.cluster.as_str()),
        ("identity_header", CLUSTER)
    );
    assert!(row_of_claim.login.is_empty(), "refused before authenticating");
    assert!(!env.sim().requests().iter().any(|r| r.audit_id == row_of_claim.id));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_stream_is_one_row_with_its_bytes_both_ways() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("debugger", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let pod = kubectl.ok(&["get", "pods", "-o", "jsonpath={.items[0].metadata.name}"]);
    assert_eq!(
        kubectl.ok(&["exec", &pod, "--", "echo", "hello", "there"]),
        "hello there\n"
    );
    let exec = Filter {
        resource: Some("pods/exec".into()),
        ..Filter::default()
    };
    let found = eventually("the exec stream's row", async || {
        let found = rows(&env, exec.clone());
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(found.len(), 1, "one row for the stream");
    let row = &found[0].row;
    assert_eq!(
        (row.code, row.verb.as_str(), row.name.as_str(), row.login.as_str()),
        (101, "get", pod.as_str(), "ana")
    );
    assert!(row.bytes_in > 0, "client to cluster bytes counted");
    assert!(
        row.bytes_out > "hello there\n".len() as u64,
        "cluster to client bytes counted"
    );
    assert!(row.ended_at >= row.started_at);
    assert!(env
        .sim()
        .requests()
        .iter()
        .any(|r| r.audit_id == row.id && r.path.ends_with("/exec")));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_not_forwarded_when_the_audit_cannot_commit_it() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("admin", Some("shop"))]);
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON audit_intents BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .unwrap();
    let auth = format!("Bearer {token}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unrecorded"}}"#.to_vec();
    let refused = env.raw().send(Method::POST, &path, &headers, body.clone()).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["reason"], "ServiceUnavailable");
    assert!(
        // (portcullis's own Lease requests do reach it.)
        !env.sim()
            .requests()
            .iter()
            .any(|r| r.method == "POST" && r.path.contains("/configmaps")),
        "the write never reached the cluster"
    );
    let refused_row = row(&env, &audit_id(&refused)).await;
    assert_eq!(
        (refused_row.code, refused_row.refused.as_str(), refused_row.write),
        (503, "audit_unavailable", true)
    );
    assert_eq!(env.raw().get(&path, &token).await.status, 200, "reads go on");

    db.execute_batch("DROP TRIGGER refuse").unwrap();
    let created = env.raw().send(Method::POST, &path, &headers, body).await;
    assert_eq!(created.status, 201);
    let id = audit_id(&created);
    assert!(env
        .sim()
        .requests()
        .iter()
        .any(|r| r.method == "POST" && r.audit_id == id));
    let row = row(&env, &id).await;
    assert_eq!((row.code, row.verb.as_str(), row.write), (201, "create", true));
    assert!(row.bytes_in > 0);
    let intents: i64 = db
        .query_row("SELECT COUNT(*) FROM audit_intents", [], |r| r.get(0))
        .unwrap();
    assert_eq!(intents, 0, "the row replaced its intent");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_row_is_lost_across_a_restart_under_load() {
    const N: usize = 200;
    let mut env = Portcullis::start().await;
    let token = env.person("loader", &[("viewer", Some("shop"))]);
    let raw = std::sync::Arc::new(env.raw());
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let requests: Vec<_> = (0..N)
        .map(|_| {
            let (raw, path, token) = (raw.clone(), path.clone(), token.clone());
            tokio::spawn(async move { raw.get(&path, &token).await.status })
        })
        .collect();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    // No pause: rows still in the commit window must survive a clean stop.
    env.restart().await;
    let login = Filter {
        login: Some("loader".into()),
        ..Filter::default()
    };
    assert_eq!(rows(&env, login).len(), N);
    let mut store = SqliteAuditStore::open(env.store.path()).unwrap();
    let report = portcullis::audit::store::verify(&mut store).unwrap();
    assert_eq!((report.checked as usize, report.broken), (N, None));
    let after = env.raw().get(&path, &token).await;
    assert_eq!(after.status, 200, "serving again after the restart");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reveal_is_not_made_when_the_audit_cannot_commit_it() {
    use crate::mcp::{connect, fails, ok, stateless};
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("secrets-reader", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let client = connect(&env, &agent, stateless()).await;
    let args =
        serde_json::json!({"cluster": CLUSTER, "namespace": "shop", "name": "db-credentials", "key": "password"});
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    db.execute_batch("CREATE TRIGGER refuse BEFORE INSERT ON audit_intents BEGIN SELECT RAISE(ABORT, 'no'); END;")
        .unwrap();
    let secret_gets = || {
        env.sim()
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/secrets/db-credentials"))
            .count()
    };
    let before = secret_gets();
    let (text, _) = fails(&client, "read_secret", args.clone()).await;
    assert!(!text.contains("s3cr3t"), "{text}");
    assert_eq!(secret_gets(), before, "the reveal never reached the cluster");
    db.execute_batch("DROP TRIGGER refuse").unwrap();
    let revealed = ok(&client, "read_secret", args).await;
    assert!(revealed.contains("s3cr3t-Pa55w0rd"), "{revealed}");
    env.stop().await;
}
