//! Held writes through MCP with the rmcp client: an agent whose writes need
//! its person's approval gets `agent.approval_pending` (or, on 2026-07-28
//! with URL elicitation, an input-required result), its person decides,
//! and the repeated call runs the write once.

use crate::approvals::real_writes;
use crate::harness::{Portcullis, CLUSTER as C};
use crate::mcp::{connect, fails, ok, stateless, try_connect_as, Client};
use crate::support::eventually;
use portcullis::approvals::decide;
use portcullis::identity::Principal;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, InputRequest};
use serde_json::{json, Value};
use std::time::Duration;

/// ana (admin of shop) and her agent, given her grant, whose writes need
/// her approval; returns the agent's token.
pub fn careful_agent(env: &Portcullis) -> String {
    careful_agent_in(env, "shop")
}

/// [`careful_agent`], ana being admin of `ns` in `env`'s cluster.
pub fn careful_agent_in(env: &Portcullis, ns: &str) -> String {
    let (_, grants) = env.person_with_ttl("ana", &[("admin", Some(ns))], Duration::from_secs(3600));
    let agent = env
        .store
        .add_agent(
            &Principal::person("ana"),
            "careful",
            std::slice::from_ref(&grants[0].id),
            true,
        )
        .unwrap();
    env.store.issue_agent_credential(&agent, None).unwrap().1
}

pub fn apply_flags(approval_id: Option<&str>) -> Value {
    let manifest =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\ndata:\n  checkout: \"on\"\n";
    let mut args = json!({"cluster": C, "manifest": manifest});
    if let Some(id) = approval_id {
        args["approval_id"] = json!(id);
    }
    args
}

/// The pending approval id of a held call.
pub async fn pending(client: &Client, args: Value) -> String {
    let (text, structured) = fails(client, "apply", args).await;
    assert_eq!(structured["code"], "agent.approval_pending", "{text}");
    assert!(text.contains("/approvals/"), "{text}");
    structured["params"]["approval_id"].as_str().unwrap().to_string()
}

fn agent_patches(env: &Portcullis) -> usize {
    real_writes(env, "user:ana", "patch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_mcp_apply_approved_by_the_agents_person_runs_once_and_says_who_approved() {
    let env = Portcullis::start().await;
    let client = connect(&env, &careful_agent(&env), stateless()).await;
    let id = pending(&client, apply_flags(None)).await;
    assert_eq!(
        pending(&client, apply_flags(None)).await,
        id,
        "the same first call, the same approval"
    );
    assert_eq!(env.store.list_held().unwrap().len(), 1);
    assert_eq!(agent_patches(&env), 0);
    // Another admin of shop is not the agent's person: only ana decides.
    env.person("bob", &[("admin", Some("shop"))]);
    let refused = decide::approve(&env.store, &id, "bob", None, None).unwrap_err();
    assert!(refused.to_string().contains("only person:ana"), "{refused}");
    decide::approve(&env.store, &id, "ana", None, None).unwrap();

    let text = ok(&client, "apply", apply_flags(Some(&id))).await;
    assert!(
        text.starts_with("approved by ana at 20") && text.contains("Z\napplied configmaps/flags in shop"),
        "{text}"
    );
    assert_eq!(agent_patches(&env), 1);
    let (text, structured) = fails(&client, "apply", apply_flags(Some(&id))).await;
    assert_eq!(structured["code"], "agent.approval_executed", "{text}");
    assert_eq!(structured["params"]["outcome"]["code"], 201);
    assert_eq!(agent_patches(&env), 1, "ran exactly once");
    env.stop().await;
}

/// Each held write keeps its preview for the people who decide: an agent
/// has at most 20 waiting at once, and the 21st is refused before its dry
/// run; a decision makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_has_at_most_twenty_writes_waiting_for_approval() {
    let env = Portcullis::start().await;
    let client = connect(&env, &careful_agent(&env), stateless()).await;
    let apply = |n: usize| {
        let manifest = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags-{n}\n  namespace: shop\n");
        json!({"cluster": C, "manifest": manifest})
    };
    let mut first = String::new();
    for n in 0..portcullis::gateway::hold::MAX_OPEN_HELD {
        let id = pending(&client, apply(n)).await;
        if n == 0 {
            first = id;
        }
    }
    let (text, _) = fails(&client, "apply", apply(99)).await;
    assert!(
        text.contains("you have 20 writes waiting for a person's approval"),
        "{text}"
    );
    assert_eq!(env.store.list_held().unwrap().len(), 20);
    decide::deny(&env.store, &first, "ana", None, None).unwrap();
    pending(&client, apply(99)).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_calls_run_an_approved_write_only_once() {
    let env = Portcullis::start().await;
    let token = careful_agent(&env);
    let (first, second) = (
        connect(&env, &token, stateless()).await,
        connect(&env, &token, stateless()).await,
    );
    let id = pending(&first, apply_flags(None)).await;
    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    let call = |client| crate::mcp::try_call(client, "apply", apply_flags(Some(&id)));
    let (a, b) = tokio::join!(call(&first), call(&second));
    let results = [a.unwrap(), b.unwrap()];
    let ran = results.iter().filter(|r| r.is_error != Some(true)).count();
    let executed = results
        .iter()
        .filter(|r| {
            r.structured_content
                .as_ref()
                .is_some_and(|s| s["code"] == "agent.approval_executed")
        })
        .count();
    assert_eq!((ran, executed), (1, 1));
    assert_eq!(agent_patches(&env), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_expired_and_still_pending_writes_answer_with_their_own_codes() {
    let env = Portcullis::start_with(|c| c.approvals.wait = Duration::from_millis(300)).await;
    let client = connect(&env, &careful_agent(&env), stateless()).await;
    let id = pending(&client, apply_flags(None)).await;
    // Called with the approval id while nobody decided: pending again.
    assert_eq!(pending(&client, apply_flags(Some(&id))).await, id);
    decide::deny(&env.store, &id, "ana", None, Some("use the flag service")).unwrap();
    let (text, structured) = fails(&client, "apply", apply_flags(Some(&id))).await;
    assert_eq!(structured["code"], "agent.approval_denied");
    assert!(text.contains("denied by ana: use the flag service"), "{text}");

    let scale = json!({"cluster": C, "kind": "deploy", "name": "web", "namespace": "shop", "replicas": 3});
    let (_, held) = fails(&client, "scale", scale.clone()).await;
    let id = held["params"]["approval_id"].as_str().unwrap().to_string();
    let past = chrono::Utc::now() - chrono::TimeDelta::minutes(1);
    rusqlite::Connection::open(env.store.path())
        .unwrap()
        .execute(
            "UPDATE held_writes SET expires_at = ?1 WHERE id = ?2",
            rusqlite::params![past, id],
        )
        .unwrap();
    let mut again = scale;
    again["approval_id"] = json!(id);
    let (_, structured) = fails(&client, "scale", again).await;
    assert_eq!(structured["code"], "agent.approval_expired");
    assert_eq!(agent_patches(&env), 0);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_with_url_elicitation_gets_an_input_required_result_and_its_repeat_runs_the_write() {
    let env = Portcullis::start().await;
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation =
        Some(rmcp::model::ElicitationCapability::new().with_url(rmcp::model::UrlElicitationCapability::new()));
    let config = ClientConfig::new(capabilities, rmcp::model::Implementation::new("test", "1"));
    let client = try_connect_as(&env, &careful_agent(&env), stateless(), config)
        .await
        .unwrap();
    let params = |state: Option<&str>| {
        let args = apply_flags(None).as_object().cloned().unwrap();
        let params = CallToolRequestParams::new("apply").with_arguments(args);
        match state {
            Some(state) => params.with_request_state(state),
            None => params,
        }
    };
    let CallToolResponse::InputRequired(asked) = client.call_tool_once(params(None)).await.unwrap() else {
        panic!("an input-required result")
    };
    let id = asked.request_state.clone().expect("the request state");
    let requests = asked.input_requests.expect("input requests");
    let Some(InputRequest::Elicitation(elicit)) = requests.values().next() else {
        panic!("a URL elicitation")
    };
    let wire = serde_json::to_value(&elicit.params).unwrap();
    assert_eq!(wire["mode"], "url");
    assert!(wire["url"].as_str().unwrap().ends_with(&format!("/approvals/{id}")));
    assert_eq!(
        wire["message"],
        "Approve in portcullis: apply configmaps/flags in shop (sim)"
    );
    // A declined elicitation leaves the write pending, answered at once.
    let mut declined = rmcp::model::InputResponses::new();
    declined.insert("approval".into(), json!({"action": "decline"}));
    let CallToolResponse::Complete(still) = client
        .call_tool_once(params(Some(&id)).with_input_responses(declined))
        .await
        .unwrap()
    else {
        panic!("a final result")
    };
    assert_eq!(still.structured_content.unwrap()["code"], "agent.approval_pending");
    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    let CallToolResponse::Complete(done) = client.call_tool_once(params(Some(&id))).await.unwrap() else {
        panic!("a final result")
    };
    let text = crate::mcp::text(&done);
    assert!(text.starts_with("approved by ana at "), "{text}");
    assert_eq!(agent_patches(&env), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_request_approved_with_a_writing_role_lets_the_sessions_writes_through_unheld() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[("viewer", Some("shop")), ("admin", Some("shop"))],
        Duration::from_secs(3600),
    );
    let agent = env
        .store
        .add_agent(
            &Principal::person("ana"),
            "careful",
            std::slice::from_ref(&grants[0].id),
            true,
        )
        .unwrap();
    let token = env.store.issue_agent_credential(&agent, None).unwrap().1;
    let client = connect(&env, &token, stateless()).await;
    // As a viewer, the dry run is refused: that is the answer, nothing held.
    let (_, refused) = fails(&client, "apply", apply_flags(None)).await;
    assert_eq!(refused["code"], 403);
    assert!(env.store.list_held().unwrap().is_empty());
    developer_in_shop_approved(&env, &client).await;
    // The agent's identity (with its grants) is cached for a while. The
    // cluster's answer to a review (never held, and it writes nothing) says
    // when the new grant is sent.
    eventually("the new grant sent for the agent", async || {
        may_patch_flags(&env, &token).await
    })
    .await;
    let text = ok(&client, "apply", apply_flags(None)).await;
    assert!(text.starts_with("applied configmaps/flags in shop"), "{text}");
    assert_eq!(agent_patches(&env), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_writing_role_lets_through_only_the_writes_that_role_allows() {
    let env = Portcullis::start().await;
    let admin = crate::support::Kubectl::admin(env.sim());
    admin.ok(&[
        "-n",
        "shop",
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=password=s3cret",
    ]);
    // ana's agent holds her admin grant in shop, its writes held.
    let token = careful_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    developer_in_shop_approved(&env, &client).await;
    // developer patches ConfigMaps: that write runs unheld.
    let text = ok(&client, "apply", apply_flags(None)).await;
    assert!(text.starts_with("applied configmaps/flags in shop"), "{text}");
    assert_eq!(agent_patches(&env), 1);
    // developer does not touch Secrets: deleting one is still held, though
    // the agent's own admin grant lets the cluster do it.
    let args = json!({"cluster": C, "kind": "Secret", "name": "db", "namespace": "shop"});
    let (text, held) = fails(&client, "delete_resource", args).await;
    assert_eq!(held["code"], "agent.approval_pending", "{text}");
    assert_eq!(real_writes(&env, "user:ana", "delete"), 0);
    admin.ok(&["-n", "shop", "get", "secret", "db"]);
    env.stop().await;
}

/// The agent of `client` asks for developer in shop, ana approves, and the
/// reconciler binds it.
async fn developer_in_shop_approved(env: &Portcullis, client: &Client) {
    let ask =
        json!({"cluster": C, "role": "developer", "namespace": "shop", "duration": "1h", "reason": "ship the flag"});
    ok(client, "request_access", ask).await;
    let request = env.store.list_access_requests().unwrap().remove(0);
    portcullis::access::approve(&env.store, &env.config, &request.id, "ana", None).unwrap();
    env.reconcile().await;
}

/// Whether the cluster lets the caller of `token` patch ConfigMaps in shop,
/// asked with a SelfSubjectAccessReview through portcullis.
async fn may_patch_flags(env: &Portcullis, token: &str) -> bool {
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "patch", "resource": "configmaps", "namespace": "shop"}},
    });
    let auth = format!("Bearer {token}");
    let answer = env
        .raw()
        .send(
            http::Method::POST,
            &format!("/clusters/{C}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
            &[("authorization", &auth), ("content-type", "application/json")],
            review.to_string().into_bytes(),
        )
        .await;
    answer.json()["status"]["allowed"] == true
}

/// Real (not dry-run) requests by ana's agent with `method` under `path`.
fn agent_requests(env: &Portcullis, method: &str, path: &str) -> usize {
    env.sim()
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path.starts_with(path))
        .filter(|r| r.impersonated.as_ref().is_some_and(|u| u.name == "user:ana"))
        .filter(|r| !r.query.as_deref().unwrap_or_default().contains("dryRun=All"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_id_given_with_other_arguments_runs_nothing_and_the_same_arguments_run_the_held_write_once() {
    let env = Portcullis::start().await;
    let admin = crate::support::Kubectl::admin(env.sim());
    for name in ["drop", "keep"] {
        admin.ok(&["-n", "shop", "create", "configmap", name, "--from-literal=a=b"]);
    }
    let client = connect(&env, &careful_agent(&env), stateless()).await;
    let delete = |name: &str, approval_id: Option<&str>| {
        let mut args = json!({"cluster": C, "kind": "ConfigMap", "name": name, "namespace": "shop"});
        if let Some(id) = approval_id {
            args["approval_id"] = json!(id);
        }
        args
    };
    let (_, held) = fails(&client, "delete_resource", delete("drop", None)).await;
    assert_eq!(held["code"], "agent.approval_pending");
    let id = held["params"]["approval_id"].as_str().unwrap().to_string();
    decide::approve(&env.store, &id, "ana", None, None).unwrap();

    // The approved delete of `drop`, named for another object: refused.
    let (text, refused) = fails(&client, "delete_resource", delete("keep", Some(&id))).await;
    assert_eq!(refused["code"], "agent.approval_mismatch", "{text}");
    assert_eq!(refused["params"]["approval_id"], id.as_str());
    assert_eq!(refused["params"]["differs"], json!(["path"]));
    assert!(
        text.starts_with("agent.approval_mismatch: approval ") && text.contains("delete configmaps/drop in shop"),
        "{text}"
    );
    // Another write's body with the same approval: refused too.
    let (text, refused) = fails(&client, "apply", apply_flags(Some(&id))).await;
    assert_eq!(refused["code"], "agent.approval_mismatch", "{text}");
    let paths = "/api/v1/namespaces/shop/configmaps";
    assert_eq!(agent_requests(&env, "DELETE", paths), 0, "nothing ran");
    assert_eq!(agent_requests(&env, "PATCH", paths), 0, "nothing ran");
    admin.ok(&["-n", "shop", "get", "configmap", "keep", "drop"]);
    assert_eq!(
        env.store.held(&id).unwrap().unwrap().state,
        portcullis::approvals::HeldState::Approved,
        "still waiting for its own call"
    );

    // The same arguments run the stored request, once.
    let text = ok(&client, "delete_resource", delete("drop", Some(&id))).await;
    assert!(text.contains("deleted configmaps/drop in shop"), "{text}");
    assert_eq!(agent_requests(&env, "DELETE", &format!("{paths}/drop")), 1);
    assert_eq!(agent_requests(&env, "DELETE", paths), 1);
    admin.ok(&["-n", "shop", "get", "configmap", "keep"]);

    // An id that is no held write of this agent's says so.
    let (text, unknown) = fails(&client, "delete_resource", delete("keep", Some("no-such-id"))).await;
    assert_eq!(unknown["code"], "agent.approval_unknown", "{text}");
    assert_eq!(agent_requests(&env, "DELETE", paths), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_apply_repeated_with_another_manifest_runs_nothing() {
    let env = Portcullis::start().await;
    let client = connect(&env, &careful_agent(&env), stateless()).await;
    let id = pending(&client, apply_flags(None)).await;
    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    let mut other = apply_flags(Some(&id));
    other["manifest"] = json!(other["manifest"].as_str().unwrap().replace("\"on\"", "\"off\""));
    let (text, refused) = fails(&client, "apply", other).await;
    assert_eq!(refused["code"], "agent.approval_mismatch", "{text}");
    assert_eq!(refused["params"]["differs"], json!(["body"]));
    assert_eq!(agent_patches(&env), 0);
    let text = ok(&client, "apply", apply_flags(Some(&id))).await;
    assert!(text.starts_with("approved by ana at "), "{text}");
    assert_eq!(agent_patches(&env), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_restart_asked_again_waits_on_the_same_approval_and_runs_its_stored_request() {
    let env = Portcullis::start().await;
    let client = connect(&env, &careful_agent(&env), stateless()).await;
    let restart = |id: Option<&str>| {
        let mut args = json!({"cluster": C, "kind": "Deployment", "name": "web", "namespace": "shop"});
        if let Some(id) = id {
            args["approval_id"] = json!(id);
        }
        args
    };
    let (_, held) = fails(&client, "rollout_restart", restart(None)).await;
    let id = held["params"]["approval_id"].as_str().unwrap().to_string();
    let asked = chrono::Utc::now().timestamp();
    // Asked again a second later, without the id: the same write waiting.
    eventually("the next second", async || chrono::Utc::now().timestamp() != asked).await;
    let (text, again) = fails(&client, "rollout_restart", restart(None)).await;
    assert_eq!(again["params"]["approval_id"], id.as_str(), "{text}");
    assert_eq!(env.store.list_held().unwrap().len(), 1, "one held write");
    let asked = chrono::Utc::now().timestamp();
    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    // The repeat stamps another second into its body than the held one.
    eventually("the next second", async || chrono::Utc::now().timestamp() != asked).await;
    let text = ok(&client, "rollout_restart", restart(Some(&id))).await;
    assert!(text.starts_with("approved by ana at "), "{text}");
    assert_eq!(agent_patches(&env), 1);
    env.stop().await;
}
