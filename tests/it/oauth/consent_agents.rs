//! What a consent makes (issue 19, items 4 and 6): an agent session whose
//! access token works on `/mcp` only, as the narrowed role the person
//! chose; shown on the person's console and in `portcullis whoami`; ended
//! by revoking it on the console, or by disabling the person, or by
//! revoking the credential of the sign-in it was consented in.

use super::consent::{allowed_code, approve, exchange, Setup, FORM};
use crate::approvals::{audit_rows, person_ok};
use crate::harness::Portcullis;
use crate::mcp::{connect, fails, ok, stateless};
use crate::signin::Visitor;
use crate::support::eventually;
use http::Method;
use portcullis::identity::Principal;
use serde_json::json;

const CONFIGMAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-agent\n  namespace: shop\ndata:\n  a: b\n";

/// The status of a `tools/list` on `/mcp` with `token`.
async fn mcp_status(env: &Portcullis, token: &str) -> u16 {
    let auth = format!("Bearer {token}");
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let answer = env.raw().send(Method::POST, "/mcp", &headers, body.into_bytes()).await;
    answer.status.as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_narrowed_role_becomes_a_token_that_works_on_mcp_only_and_reads_only_what_that_role_allows() {
    let setup = Setup::start().await;
    let env = &setup.env;
    let visitor = Visitor::new(env);
    visitor.sign_in("ana").await;
    let token = approve(&setup, &visitor, "viewer", false).await;
    env.reconcile().await;

    let pods = env.raw().get("/clusters/sim/api/v1/namespaces/shop/pods", &token).await;
    assert_eq!(pods.status, 401, "an /mcp token is refused on the Kubernetes API");
    let client = connect(env, &token, stateless()).await;
    let whoami = ok(&client, "whoami", json!({})).await;
    assert!(whoami.contains("viewer on namespace shop"), "{whoami}");
    assert!(
        !whoami.contains("developer") && !whoami.contains("payments"),
        "{whoami}"
    );
    ok(
        &client,
        "list_resources",
        json!({"cluster": "sim", "kind": "pods", "namespace": "shop"}),
    )
    .await;
    let (said, _) = fails(&client, "apply", json!({"cluster": "sim", "manifest": CONFIGMAP})).await;
    assert!(
        said.contains("403") && said.contains("forbidden"),
        "a viewer cannot create: {said}"
    );
    let (said, _) = fails(
        &client,
        "list_resources",
        json!({"cluster": "sim", "kind": "pods", "namespace": "payments"}),
    )
    .await;
    assert!(said.contains("403"), "the payments grant was not handed over: {said}");
    assert_kept_as_chosen(&setup).await;
    drop(client);
    setup.stop().await;
}

/// One session, ending within the hour chosen, writing directly as
/// chosen; the consent audited as ana's, naming the client.
async fn assert_kept_as_chosen(setup: &Setup) {
    let env = &setup.env;
    let sessions = env.store.agent_sessions_of(&Principal::person("ana")).unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let ends = sessions[0].expires_at.unwrap();
    assert!(
        ends <= chrono::Utc::now() + chrono::TimeDelta::hours(1),
        "one hour chosen: {ends}"
    );
    assert!(!sessions[0].agent.writes_need_approval, "as chosen");
    let rows = audit_rows(env).await;
    let consent = rows
        .iter()
        .find(|r| r.verb == "authorize" && r.resource == "oauthconsents")
        .expect("the consent is audited");
    assert_eq!((consent.login.as_str(), consent.code), ("ana", 200));
    assert_eq!(consent.name, setup.client_id);
}

/// The hidden CSRF token of the visitor's console, and the page.
async fn console(visitor: &Visitor) -> (String, String) {
    let page = visitor.get("/console").await;
    assert_eq!(page.status, 200, "{page:?}");
    let marker = "name=\"csrf\" value=\"";
    let start = page.body.find(marker).unwrap() + marker.len();
    let csrf = page.body[start..].split('"').next().unwrap().to_string();
    (csrf, page.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_sessions_show_on_the_console_and_in_whoami_and_revoking_one_or_disabling_the_person_refuses_its_next_call(
) {
    let setup = Setup::start().await;
    let env = &setup.env;
    let visitor = Visitor::new(env);
    visitor.sign_in("ana").await;
    let first = approve(&setup, &visitor, "viewer", true).await;
    let second = approve(&setup, &visitor, "developer", false).await;
    let ana = Principal::person("ana");
    let sessions = env.store.agent_sessions_of(&ana).unwrap();
    let (second_id, first_id) = (sessions[0].agent.id.clone(), sessions[1].agent.id.clone());
    env.reconcile().await;
    let client = connect(env, &first, stateless()).await;
    ok(&client, "whoami", json!({})).await;
    eventually("the first session's use to be noted", async || {
        env.store.agent_sessions_of(&ana).unwrap()[1].last_used_at.is_some()
    })
    .await;

    let csrf = assert_listed(&setup, &visitor, &first_id, &second_id).await;
    let revoked = visitor
        .post(&format!("/console/agents/{first_id}/revoke"), &format!("csrf={csrf}"))
        .await;
    assert_eq!(revoked.status, 303, "{revoked:?}");
    eventually("the revoked session to be refused", async || {
        mcp_status(env, &first).await == 401
    })
    .await;
    assert_ne!(mcp_status(env, &second).await, 401, "the other session still works");
    let whoami = person_ok(env, &setup.ana, &["whoami"]);
    assert!(!whoami.contains(&first_id) && whoami.contains(&second_id), "{whoami}");

    let out = env.cli(&["admin", "person", "disable", "ana"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    eventually("a disabled person's session to be refused", async || {
        mcp_status(env, &second).await == 401
    })
    .await;
    drop(client);
    setup.stop().await;
}

/// A token stolen and used to sign in on the web page, then to allow the
/// thief's agent: revoking the token must leave the thief nothing, neither
/// the agent session made (its access token, its refresh token) nor a
/// code allowed and not exchanged yet. A session consented in another
/// sign-in is not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_credential_of_a_sign_in_ends_the_agent_sessions_consented_in_it_and_its_codes() {
    let setup = Setup::start().await;
    let env = &setup.env;
    let (thief, owner) = (Visitor::new(env), Visitor::new(env));
    thief.sign_in("ana").await;
    let made = exchange(&setup, &allowed_code(&setup, &thief, "viewer", true).await).await;
    assert_eq!(made.status, 200, "{:?}", made.body);
    let tokens = made.json();
    let (access, refresh) = (
        tokens["access_token"].as_str().unwrap().to_string(),
        tokens["refresh_token"].as_str().unwrap().to_string(),
    );
    let pending = allowed_code(&setup, &thief, "viewer", true).await;
    let sign_ins = env.store.web_sessions_of("ana").unwrap();
    assert_eq!(sign_ins.len(), 1, "{sign_ins:?}");
    let stolen = sign_ins[0].credential_id.clone();
    owner.sign_in("ana").await;
    let kept = approve(&setup, &owner, "viewer", true).await;
    env.reconcile().await;
    assert_ne!(
        mcp_status(env, &access).await,
        401,
        "the thief's session works until the revocation"
    );

    let out = env.cli(&["admin", "credential", "revoke", &stolen]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    eventually("the thief's access token to be refused", async || {
        mcp_status(env, &access).await == 401
    })
    .await;
    let headers = [("content-type", FORM)];
    let form = format!(
        "grant_type=refresh_token&refresh_token={refresh}&client_id={}",
        setup.client_id
    );
    let refreshed = env
        .raw()
        .send(Method::POST, "/oauth/token", &headers, form.into_bytes())
        .await;
    assert_eq!(refreshed.status, 400, "{:?}", refreshed.body);
    assert_eq!(refreshed.json()["error"], "invalid_grant", "{:?}", refreshed.body);
    let late = exchange(&setup, &pending).await;
    assert_eq!(late.status, 400, "{:?}", late.body);
    let refusal = late.json();
    assert_eq!(refusal["error"], "invalid_grant", "{refusal}");
    assert!(
        refusal["error_description"].as_str().unwrap().contains("sign-in"),
        "{refusal}"
    );
    assert_eq!(
        env.store.agent_sessions_of(&Principal::person("ana")).unwrap().len(),
        2,
        "the late code made no session"
    );
    assert_ne!(
        mcp_status(env, &kept).await,
        401,
        "a session consented elsewhere still works"
    );
    setup.stop().await;
}

/// Both sessions are on the console, the first (used) with its client,
/// grant, approval switch and last use; whoami lists it with its client
/// and last use. Returns the console's CSRF token.
async fn assert_listed(setup: &Setup, visitor: &Visitor, first_id: &str, second_id: &str) -> String {
    let (csrf, page) = console(visitor).await;
    let item = &page[page
        .find(&format!("id=\"agent-{first_id}\""))
        .expect("the first session is listed")..];
    let item = &item[..item.find("</li>").unwrap()];
    for words in [
        "Consent Test Agent",
        "viewer on sim / shop",
        "writes need approval: yes",
        "last used <time",
    ] {
        assert!(item.contains(words), "the console says {words:?}: {item}");
    }
    assert!(page.contains(&format!("id=\"agent-{second_id}\"")), "{page}");
    let whoami = person_ok(&setup.env, &setup.ana, &["whoami"]);
    let line = whoami
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "agent session {first_id}: client Consent Test Agent, last used 20"
            ))
        })
        .unwrap_or_else(|| panic!("whoami lists the session with its client and last use: {whoami}"));
    assert!(
        line.contains("viewer on sim/shop") && line.contains("writes need approval"),
        "{line}"
    );

    csrf
}
