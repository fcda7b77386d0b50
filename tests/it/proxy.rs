//! kubectl and kube-rs through portcullis: everything works as against the
//! cluster, under the caller's identity.

use crate::harness::{Portcullis, CLUSTER};
use crate::support::eventually;
use http::Method;
use portcullis::identity::Principal;
use std::time::Duration;

const SA: &str = "system:serviceaccount:portcullis:portcullis";

/// What reached the cluster on a caller's behalf (not portcullis's own
/// probes and reconciles, which impersonate no one).
fn forwarded(env: &Portcullis) -> Vec<portcullis_sim::RecordedRequest> {
    env.sim()
        .requests()
        .into_iter()
        .filter(|r| r.header("impersonate-user").is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_and_writes_as_the_person_with_their_grant() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("admin", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");

    let pods = kubectl.ok(&["get", "pods"]);
    assert!(pods.starts_with("NAME"), "{pods}");
    assert!(pods.contains("READY") && pods.contains("STATUS"), "{pods}");

    kubectl.ok(&["create", "configmap", "flags", "--from-literal=dark=true"]);
    let yaml = kubectl.ok(&["get", "configmap", "flags", "-o", "yaml"]);
    assert!(yaml.contains("dark: \"true\""), "{yaml}");

    let manifest = env.dir.path().join("cm.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n",
    )
    .unwrap();
    let applied = kubectl.ok(&["apply", "--server-side", "-f", manifest.to_str().unwrap()]);
    assert!(applied.contains("configmap/applied serverside-applied"), "{applied}");

    kubectl.ok(&["delete", "configmap", "flags"]);
    let gone = kubectl.fails(&["get", "configmap", "flags"]);
    assert!(gone.contains("configmaps \"flags\" not found"), "{gone}");

    let writes: Vec<_> = forwarded(&env)
        .into_iter()
        .filter(|r| r.verb == "create" || r.verb == "delete")
        .collect();
    assert!(!writes.is_empty());
    for request in writes {
        let user = request.impersonated.as_ref().expect("impersonated");
        assert_eq!(user.name, "user:ana");
        assert_eq!(request.user.as_ref().unwrap().name, SA);
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_denial_is_the_clusters_own_403() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let kubectl = env.kubectl(&token, "shop");
    let err = kubectl.fails(&["get", "pods", "-n", "payments"]);
    assert!(
        err.contains(r#"pods is forbidden: User "user:ana" cannot list resource "pods" in API group "" in the namespace "payments""#),
        "{err}"
    );
    let err = kubectl.fails(&["delete", "pod", "--all"]);
    assert!(
        err.contains(
            r#"is forbidden: User "user:ana" cannot delete resource "pods" in API group "" in the namespace "shop""#
        ),
        "{err}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_whoami_and_can_i_show_the_impersonated_identity() {
    let env = Portcullis::start().await;
    let (token, grants) = env.person_with_ttl("ana", &[("developer", Some("shop"))], Duration::from_secs(3600));
    let kubectl = env.kubectl(&token, "shop");
    let whoami = kubectl.ok(&["auth", "whoami"]);
    assert!(whoami.contains("user:ana"), "{whoami}");
    assert!(whoami.contains(&grants[0].group()), "{whoami}");
    assert_eq!(kubectl.ok(&["auth", "can-i", "create", "deployments"]).trim(), "yes");
    let no = kubectl.run(&["auth", "can-i", "get", "secrets"]);
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    let extra = forwarded(&env).into_iter().rev().find_map(|r| r.impersonated).unwrap();
    assert!(extra.extra.contains_key("portcullis.dev/credential-id"), "{extra:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_impersonation_headers_are_refused_in_any_case() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let raw = env.raw();
    let auth = format!("Bearer {token}");
    let before = forwarded(&env).len();
    for (name, value) in [
        ("Impersonate-User", "admin"),
        ("impersonate-uid", "1"),
        ("Impersonate-Extra-x", "y"),
        ("IMPERSONATE-GROUP", "system:masters"),
        // A proxy between portcullis and the cluster may read `_` as `-`.
        ("Impersonate_User", "admin"),
    ] {
        let response = raw
            .send(
                Method::GET,
                &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"),
                &[("authorization", &auth), (name, value)],
                Vec::new(),
            )
            .await;
        assert_eq!(response.status, 400, "{name}");
        let status = response.json();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 400);
        assert!(response.headers.contains_key("audit-id"));
    }
    assert_eq!(forwarded(&env).len(), before, "nothing reached the cluster");
    // kubectl's discovery client cannot show the message, only the reason.
    let err = env.kubectl(&token, "shop").fails(&["get", "pods", "--as", "admin"]);
    assert!(err.contains("BadRequest"), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_identity_and_forwarding_headers_never_reach_the_cluster() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let auth = format!("Bearer {token}");
    let response = env
        .raw()
        .send(
            Method::GET,
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps"),
            &[
                ("authorization", &auth),
                ("x-remote-user", "admin"),
                ("x-remote-group", "system:masters"),
                ("x-forwarded-for", "6.6.6.6"),
                ("x-real-ip", "6.6.6.6"),
                ("audit-id", "chosen-by-client"),
            ],
            Vec::new(),
        )
        .await;
    assert_eq!(response.status, 200);
    let seen = forwarded(&env)
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/configmaps"))
        .unwrap();
    let authorization = seen.header_values("authorization");
    assert_eq!(authorization, [format!("Bearer {}", env.sim().portcullis_token())]);
    for name in ["x-remote-user", "x-remote-group", "x-forwarded-for", "x-real-ip"] {
        assert!(seen.header_values(name).is_empty(), "{name} reached the cluster");
    }
    assert!(
        !seen.headers.iter().any(|(_, v)| v.contains(&token)),
        "the caller's token reached the cluster"
    );
    assert_ne!(seen.audit_id, "chosen-by-client");
    assert_eq!(seen.user.as_ref().unwrap().name, SA);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_id_the_cluster_saw_is_the_one_the_client_got() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env
        .raw()
        .get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &token)
        .await;
    assert_eq!(response.status, 200);
    let audit_id = response.headers["audit-id"].to_str().unwrap().to_string();
    assert_eq!(uuid::Uuid::parse_str(&audit_id).unwrap().get_version_num(), 7);
    let seen = forwarded(&env)
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/pods"))
        .unwrap();
    assert_eq!(seen.audit_id, audit_id);
    assert_eq!(seen.header_values("audit-id"), [audit_id.as_str()]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_paths_are_refused_before_authentication() {
    let env = Portcullis::start().await;
    let raw = env.raw();
    let before = forwarded(&env).len();
    for path in [
        "/clusters/sim/api/v1/namespaces/shop%2Fpayments/pods",
        "/clusters/sim/api/v1/namespaces/shop/../../secrets",
        "/clusters/sim/api/v1/%2e%2e/secrets",
        "/clusters/Bad_Name/api",
    ] {
        let response = raw.send(Method::GET, path, &[], Vec::new()).await;
        assert_eq!(response.status, 400, "{path}");
        assert_eq!(response.json()["reason"], "BadRequest", "{path}");
    }
    let unknown = raw.send(Method::GET, "/clusters/nope/api", &[], Vec::new()).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["reason"], "NotFound");
    assert_eq!(forwarded(&env).len(), before);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_to_an_unknown_cluster_is_read_through_and_the_connection_serves_the_next_request() {
    let env = Portcullis::start().await;
    let padding = "x".repeat(512 * 1024);
    let body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","data":{{"padding":"{padding}"}}}}"#);
    // 404, then 200 on the same connection (no new connect).
    let answers = env
        .refused_then_next("/clusters/nope/api/v1/namespaces/shop/configmaps", body)
        .await;
    assert_eq!(answers, ["404 1", "200 0"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_expired_revoked_and_malformed_tokens_get_401() {
    let env = Portcullis::start().await;
    let raw = env.raw();
    env.person("ana", &[("viewer", Some("shop"))]);
    let ana = portcullis::identity::Principal::person("ana");
    let past = chrono::Utc::now() - chrono::TimeDelta::seconds(5);
    let (_, expired) = env.store.issue_credential(&ana, "old", Some(past)).unwrap();
    let (revoked_cred, revoked) = env.store.issue_credential(&ana, "gone", None).unwrap();
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    assert_eq!(raw.get(&path, &revoked).await.status, 200);
    env.store.revoke_credential(&revoked_cred.id).unwrap();
    // Another process revoked it: the credential cache learns it within its lifetime.
    eventually("the revocation to reach the credential cache", async || {
        raw.get(&path, &revoked).await.status == 401
    })
    .await;
    let unknown = portcullis::identity::credential::mint().token;
    for (token, why) in [
        (unknown.as_str(), "unknown"),
        (expired.as_str(), "expired"),
        (revoked.as_str(), "revoked"),
        ("pcl_nonsense", "malformed"),
    ] {
        let response = raw.get(&path, token).await;
        assert_eq!(response.status, 401, "{why}");
        assert_eq!(response.headers["www-authenticate"], "Bearer realm=\"portcullis\"");
        let status = response.json();
        assert_eq!(status["reason"], "Unauthorized");
        assert!(status["message"].as_str().unwrap().contains(why), "{status}");
    }
    let none = raw.send(Method::GET, &path, &[], Vec::new()).await;
    assert_eq!(none.status, 401);
    let err = env.kubectl(&unknown, "shop").fails(&["get", "pods"]);
    assert!(err.contains("Unauthorized") || err.contains("logged in"), "{err}");
    env.stop().await;
}

/// Past `[limits] failed_authentications_per_minute` unknown tokens from
/// one address, the next token that never worked here is a 429 Status with
/// Retry-After on the raw API and on `/mcp`, recorded as such, while a
/// token that worked goes on working from that address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_presenting_unknown_tokens_past_the_limit_gets_429_and_known_tokens_still_work() {
    let env = Portcullis::start_with(|c| c.limits.failed_authentications_per_minute = 2).await;
    let raw = env.raw();
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    assert_eq!(raw.get(&path, &ana).await.status, 200);
    let made_up = || portcullis::identity::credential::mint().token;
    for _ in 0..2 {
        assert_eq!(raw.get(&path, &made_up()).await.status, 401);
    }
    let held = raw.get(&path, &made_up()).await;
    assert_eq!(held.status, 429, "{:?}", held.body);
    let wait: u64 = held.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=31).contains(&wait), "{wait}");
    let status = held.json();
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], wait, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("too many unknown tokens"),
        "{status}"
    );
    assert_eq!(raw.get(&path, &ana).await.status, 200, "a token that worked still does");

    let auth = format!("Bearer {}", made_up());
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let mcp = raw.send(Method::POST, "/mcp", &headers, body.into_bytes()).await;
    assert_eq!(mcp.status, 429, "{:?}", mcp.body);
    assert!(mcp.headers.contains_key("retry-after"), "{:?}", mcp.headers);

    let rows = crate::approvals::audit_rows(&env).await;
    let refused: Vec<&str> = rows.iter().map(|r| r.refused.as_str()).collect();
    assert_eq!(
        refused.iter().filter(|r| **r == "too_many_failures").count(),
        2,
        "{refused:?}"
    );
    assert_eq!(refused.iter().filter(|r| **r == "unknown").count(), 2, "{refused:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_grant_stops_applying_on_the_next_request() {
    let env = Portcullis::start().await;
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let kubectl = env.kubectl(&token, "shop");
    kubectl.ok(&["get", "configmaps"]);
    // The grant's hour passes at once, however long kubectl took to start,
    // whether or not its grants are still cached.
    env.gateway.grant_clock().advance(Duration::from_secs(3600));
    let err = kubectl.fails(&["get", "configmaps"]);
    assert!(err.contains("forbidden"), "{err}");
    let last = forwarded(&env)
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/configmaps"))
        .unwrap();
    assert!(!last
        .header_values("impersonate-group")
        .contains(&grants[0].group().as_str()));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_stops_applying() {
    let env = Portcullis::start().await;
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let kubectl = env.kubectl(&token, "shop");
    kubectl.ok(&["get", "configmaps"]);
    env.store.revoke_grant(&grants[0].id).unwrap();
    // Revoked by another process: the grant cache learns it within its lifetime.
    let err = eventually("the revoked grant to stop applying", async || {
        let out = kubectl.run(&["get", "configmaps"]);
        if out.status.success() {
            Err("kubectl still lists them")
        } else {
            Ok(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    })
    .await;
    assert!(err.contains("forbidden"), "{err}");
    env.stop().await;
}

/// `[store] cache_ttl` reaches the request path: with no life, a grant and
/// then a person revoked untold (in the store alone, as an admin command on
/// SQLite does) are refused at the very next request, where the default
/// two seconds would have let it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_cache_life_a_revocation_untold_applies_at_the_next_request() {
    let env = Portcullis::start_with(|c| c.store.cache_ttl = Duration::ZERO).await;
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    assert_eq!(env.raw().get(&path, &token).await.status, 200);
    env.store.revoke_grant(&grants[0].id).unwrap();
    assert_eq!(env.raw().get(&path, &token).await.status, 403);
    env.store.disable_principal(&Principal::person("ana")).unwrap();
    assert_eq!(env.raw().get(&path, &token).await.status, 401);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_limit_is_413() {
    let env = Portcullis::start_with(|c| c.limits.request_body_bytes = 64 * 1024).await;
    let token = env.person("ana", &[("admin", Some("shop"))]);
    let big = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": "a".repeat(100 * 1024)}});
    let auth = format!("Bearer {token}");
    let response = env
        .raw()
        .send(
            Method::POST,
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps"),
            &[("authorization", &auth), ("content-type", "application/json")],
            serde_json::to_vec(&big).unwrap(),
        )
        .await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["reason"], "RequestEntityTooLarge");
    assert!(
        !forwarded(&env).iter().any(|r| r.verb == "create"),
        "the body never reached the cluster"
    );
    env.stop().await;
}

fn big_configmaps(env: &Portcullis) {
    for i in 0..4 {
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i}"), "namespace": "shop"}, "data": {"x": "a".repeat(12 * 1024)}});
        env.sim().store().put(object).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_known_to_be_over_the_limit_is_refused_with_advice_to_page() {
    let env = Portcullis::start_with(|c| c.limits.response_bytes = 32 * 1024).await;
    let token = env.person("ana", &[("admin", Some("shop"))]);
    big_configmaps(&env);
    let one = env
        .raw()
        .get(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps/big-0"),
            &token,
        )
        .await;
    assert_eq!(one.status, 200, "a small object passes");
    let list = env
        .raw()
        .get(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps"),
            &token,
        )
        .await;
    assert_eq!(list.status, 502);
    let message = list.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("limit") && message.contains("continue"), "{message}");
    let kubectl = env.kubectl(&token, "shop");
    let err = kubectl.fails(&["get", "configmaps", "--chunk-size=0", "-o", "json"]);
    assert!(err.contains("limit"), "{err}");
    kubectl.ok(&["get", "configmaps", "--chunk-size=1", "-o", "json"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_found_over_the_limit_midway_is_cut_and_marked_truncated() {
    let env = Portcullis::start_with(|c| c.limits.response_bytes = 32 * 1024).await;
    let token = env.person("ana", &[("admin", Some("shop"))]);
    big_configmaps(&env);
    env.sim().faults().add(portcullis_sim::faults::FaultRule {
        method: None,
        path_prefix: "/api/v1/namespaces/shop/configmaps".into(),
        times: None,
        action: portcullis_sim::faults::FaultAction::Unsized { frame_bytes: 4096 },
    });
    // The cap is found out after the headers left: the body ends with an
    // error (HTTP/2 resets the stream, which may even overtake the headers).
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let (mut received, mut broken) = (0usize, false);
    match env.raw().try_stream(&path, &token).await {
        Err(_) => broken = true,
        Ok(response) => {
            let mut body = response.into_body();
            while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
                match frame {
                    Ok(frame) => received += frame.data_ref().map_or(0, |d| d.len()),
                    Err(_) => {
                        broken = true;
                        break;
                    }
                }
            }
        }
    }
    assert!(broken, "the client sees a broken response, not a short valid one");
    assert!(
        received <= 32 * 1024,
        "never more than the cap reaches the client ({received})"
    );
    let filter = portcullis::audit::query::Filter {
        resource: Some("configmaps".into()),
        verb: Some("list".into()),
        ..Default::default()
    };
    eventually("the audit row saying the response was cut", async || {
        crate::audit::rows(&env, filter.clone()).iter().any(|r| r.row.truncated)
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_are_served() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let raw = env.raw();
    assert_eq!(raw.send(Method::GET, "/healthz", &[], Vec::new()).await.status, 200);
    assert_eq!(raw.send(Method::GET, "/readyz", &[], Vec::new()).await.status, 200);
    raw.get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), &token)
        .await;
    raw.get(&format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods"), "pcl_bad")
        .await;
    let metrics = raw.send(Method::GET, "/metrics", &[], Vec::new()).await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(
        text.contains(r#"portcullis_requests_total{cluster="sim",verb="list",code="200"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"portcullis_rejected_credentials_total{reason="malformed"} 1"#),
        "{text}"
    );
    assert!(text.contains("portcullis_upstream_latency_seconds_bucket"), "{text}");
    assert!(text.contains("portcullis_open_streams"), "{text}");

    // Names and methods a client makes up add no series (a cluster name
    // even without a token): each would be kept for the process's life.
    for i in 0..20 {
        raw.send(Method::GET, &format!("/clusters/made-up-{i}/api"), &[], Vec::new())
            .await;
        let method = Method::from_bytes(format!("MADEUP{i}").as_bytes()).unwrap();
        let auth = format!("Bearer {token}");
        raw.send(
            method,
            &format!("/clusters/{CLUSTER}/version"),
            &[("authorization", &auth)],
            Vec::new(),
        )
        .await;
    }
    let metrics = raw.send(Method::GET, "/metrics", &[], Vec::new()).await;
    let text = String::from_utf8_lossy(&metrics.body);
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("portcullis_requests_total{"))
        .collect();
    assert!(!text.contains("made-up") && !text.contains("madeup"), "{text}");
    assert!(series.iter().any(|l| l.contains(r#"cluster="unknown""#)), "{series:?}");
    assert!(series.len() <= 6, "{series:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegated_agent_is_sent_only_its_own_grants() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[("admin", Some("shop")), ("viewer", Some("payments"))],
        Duration::from_secs(3600),
    );
    let agent = env.agent("ana", &[&grants[1]]);
    let kubectl = env.kubectl(&agent, "payments");
    kubectl.ok(&["get", "pods"]);
    let err = kubectl.fails(&["get", "pods", "-n", "shop"]);
    assert!(err.contains(r#"User "user:ana" cannot list resource "pods""#), "{err}");
    let seen = forwarded(&env)
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/pods"))
        .unwrap();
    let user = seen.impersonated.unwrap();
    assert_eq!(user.name, "user:ana");
    assert!(user.groups.contains(&grants[1].group()));
    assert!(
        !user.groups.contains(&grants[0].group()),
        "the person's other grant is never sent"
    );
    assert!(
        user.extra.contains_key("portcullis.dev/agent-session"),
        "{:?}",
        user.extra
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_the_person_or_the_agent_ends_the_agents_access() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    assert_eq!(env.raw().get(&path, &agent).await.status, 200);
    let id = env.store.list_agents().unwrap()[0].id.clone();
    env.store.disable_agent(&id).unwrap();
    eventually("the disabled agent's credential refused", async || {
        env.raw().get(&path, &agent).await.status == 401
    })
    .await;

    let other = env.agent_named("ana", "second", &[&grants[0]]);
    assert_eq!(env.raw().get(&path, &other).await.status, 200);
    env.store
        .disable_principal(&portcullis::identity::Principal::person("ana"))
        .unwrap();
    eventually("the disabled person's agent refused", async || {
        env.raw().get(&path, &other).await.status == 401
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_serviceaccount_token_file_is_reread() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    assert_eq!(env.raw().get(&path, &token).await.status, 200);
    let token_file = env.config.clusters[0].token_file.clone();
    std::fs::write(&token_file, "not-a-valid-token").unwrap();
    eventually("the cluster refusing the new token", async || {
        env.raw().get(&path, &token).await.status == 401
    })
    .await;
    std::fs::write(&token_file, env.sim().portcullis_token()).unwrap();
    eventually("the good token in use again", async || {
        env.raw().get(&path, &token).await.status == 200
    })
    .await;
    env.stop().await;
}

/// A TLS server on `listener` with `tls`'s serving certificate, answering
/// every request 200 with an empty object; dropping the handle (aborting
/// it) closes its connections too.
fn tls_cluster(listener: tokio::net::TcpListener, tls: &portcullis::tls::GeneratedTls) -> tokio::task::JoinHandle<()> {
    use hyper_util::rt::TokioIo;
    let config = portcullis::tls::server_config(&tls.cert_pem, &tls.key_pem).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            connections.spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(|_| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
                        bytes::Bytes::from_static(b"{}"),
                    )))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    })
}

/// A cluster's CA rotated: the API server's new certificate is refused
/// until its CA is in the bundle file, and trusted once it is, with no
/// restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_cluster_ca_bundle_is_reread() {
    let (old, new) = (
        portcullis::tls::generate(&[]).unwrap(),
        portcullis::tls::generate(&[]).unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving_old = tls_cluster(listener, &old);
    let ca_file = std::sync::Arc::new(std::sync::Mutex::new(std::path::PathBuf::new()));
    let env = Portcullis::start_with(|config| {
        let path = Portcullis::folder_of(config).join("rotated-ca.pem");
        std::fs::write(&path, &old.ca_pem).unwrap();
        let mut rotated = config.clusters[0].clone();
        rotated.name = "rotated".into();
        rotated.server = format!("https://{addr}");
        rotated.ca_file = path.clone();
        config.clusters.push(rotated);
        *ca_file.lock().unwrap() = path;
    })
    .await;
    let ca_file = ca_file.lock().unwrap().clone();
    let token = env.person("ana", &[]);
    let path = "/clusters/rotated/api/v1/namespaces/shop/configmaps/x";
    assert_eq!(env.raw().get(path, &token).await.status, 200);

    serving_old.abort();
    let _ = serving_old.await;
    let serving_new = tls_cluster(tokio::net::TcpListener::bind(addr).await.unwrap(), &new);
    eventually("the new certificate refused while its CA is not trusted", async || {
        env.raw().get(path, &token).await.status == 503
    })
    .await;
    std::fs::write(&ca_file, format!("{}{}", old.ca_pem, new.ca_pem)).unwrap();
    eventually("the new CA trusted without a restart", async || {
        env.raw().get(path, &token).await.status == 200
    })
    .await;
    env.stop().await;
    serving_new.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_serving_certificate_is_used_without_a_restart() {
    let env = Portcullis::start().await;
    let renewed = portcullis::tls::generate(&["localhost"]).unwrap();
    std::fs::write(&env.config.tls.key_file, &renewed.key_pem).unwrap();
    std::fs::write(&env.config.tls.cert_file, &renewed.cert_pem).unwrap();
    let base = format!("https://{}", env.addr);
    eventually("the renewed certificate served", async || {
        let raw = crate::harness::Raw::with_ca(&renewed.ca_pem, base.clone());
        raw.try_send(Method::GET, "/healthz")
            .await
            .is_some_and(|status| status == 200)
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_an_unreachable_cluster_and_stays_ready_while_another_is_reachable() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let env = Portcullis::start_with(|c| {
        let mut down = c.clusters[0].clone();
        down.name = "down".into();
        down.server = format!("https://{closed}");
        c.clusters.push(down);
    })
    .await;
    // Still ready: sign-in, approvals and the other cluster go on.
    eventually("readyz to report the cluster", async || {
        let response = env.raw().send(Method::GET, "/readyz", &[], Vec::new()).await;
        let body = String::from_utf8_lossy(&response.body).into_owned();
        response.status == 200 && body.contains("unreachable clusters: down")
    })
    .await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let response = env.raw().get("/clusters/down/api/v1/namespaces", &token).await;
    assert_eq!(response.status, 503);
    assert_eq!(response.json()["reason"], "ServiceUnavailable");
    let up = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    assert_eq!(env.raw().get(&up, &token).await.status, 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps");
    let spoofed = [("x-forwarded-for", "203.0.113.7")];

    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let auth = format!("Bearer {token}");
    let response = env
        .raw()
        .send(Method::GET, &path, &[("authorization", &auth), spoofed[0]], Vec::new())
        .await;
    let row = crate::audit::row(&env, &crate::audit::audit_id(&response)).await;
    assert_eq!(
        row.client, "127.0.0.1",
        "a spoofed header from an untrusted peer is ignored"
    );
    env.stop().await;

    let env = Portcullis::start_with(|c| c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()]).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let auth = format!("Bearer {token}");
    let response = env
        .raw()
        .send(Method::GET, &path, &[("authorization", &auth), spoofed[0]], Vec::new())
        .await;
    let row = crate::audit::row(&env, &crate::audit::audit_id(&response)).await;
    assert_eq!(
        row.client, "203.0.113.7",
        "a trusted load balancer's header is believed"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percent_encoded_paths_are_judged_as_the_cluster_decodes_them() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("secrets-reader", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let plain = env
        .raw()
        .get(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/secrets/db-credentials"),
            &agent,
        )
        .await;
    let encoded = env
        .raw()
        .get(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/%73ecrets/db-credentials"),
            &agent,
        )
        .await;
    assert_eq!((plain.status.as_u16(), encoded.status.as_u16()), (200, 200));
    for response in [&plain, &encoded] {
        let secret = response.json();
        let password = secret["data"]["password"].as_str().unwrap();
        assert!(
            password.starts_with("<redacted"),
            "an encoded resource name is still a Secret: {password}"
        );
    }

    let admin = env.person("root", &[("cluster-admin", None)]);
    let protected = env
        .raw()
        .get(
            &format!("/clusters/{CLUSTER}/api/v1/namespaces/kube%2Dsystem/configmaps"),
            &admin,
        )
        .await;
    assert_eq!(
        protected.status, 403,
        "an encoded protected namespace is still protected"
    );
    env.stop().await;
}
