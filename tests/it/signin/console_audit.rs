//! The console's audit page for admins (issue 21, item 2): a request made
//! through portcullis is found by its audit id and by its person, with the
//! API server's stages of it (delivered to the audit webhook) beside it;
//! client text is shown escaped; people who are not admins get neither the
//! link nor the page; the page fits a phone and passes axe, light and dark.

use super::browser::{Chromium, SCHEMES};
use super::console::sign_in;
use super::{free_port, portcullis_configured, Idp, Visitor};
use crate::audit::{audit_id, row};
use crate::harness::{Portcullis, CLUSTER};
use http::Method;
use portcullis::identity::Principal;
use serde_json::json;

const SA: &str = "system:serviceaccount:portcullis:portcullis";
const WEBHOOK_TOKEN: &str = "webhook-token-for-the-console-audit-test";
/// A pod name that is a script, as a client could send it.
const SCRIPT_NAME: &str = "%3Cscript%3Ealert(1)";
const RBAC_REASON: &str = "RBAC: allowed by RoleBinding \"grant-1/shop\" of ClusterRole \"viewer\"";

/// The provider, portcullis with a webhook token for its cluster (in the
/// returned directory), and its port.
async fn start() -> (Idp, Portcullis, tempfile::TempDir, u16) {
    let port = free_port();
    let idp = Idp::start(port);
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("audit-webhook-token");
    std::fs::write(&token_file, format!("{WEBHOOK_TOKEN}\n")).unwrap();
    let env = portcullis_configured(&idp.issuer, port, |config| {
        config.clusters[0].audit_webhook_token_file = Some(token_file);
    })
    .await;
    (idp, env, dir, port)
}

/// ana, an admin with viewer in shop, gets a pod named like a script
/// through portcullis; the API server's two stages of it reach the
/// webhook. Returns the request's audit id, once its row is written.
async fn a_joined_request(env: &Portcullis) -> String {
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    env.store.set_admin(&Principal::person("ana"), true).unwrap();
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods/{SCRIPT_NAME}");
    let response = env.raw().get(&path, &token).await;
    let id = audit_id(&response);
    row(env, &id).await;
    let event = |stage: &str| {
        json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": id, "stage": stage, "verb": "get",
            "requestURI": format!("/api/v1/namespaces/shop/pods/{SCRIPT_NAME}"),
            "user": {"username": SA, "groups": ["system:serviceaccounts"]},
            "impersonatedUser": {"username": "user:ana", "groups": ["portcullis:grant:1"]},
            "sourceIPs": ["10.0.0.9"], "userAgent": "portcullis",
            "responseStatus": {"metadata": {}, "code": 404},
            "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": RBAC_REASON},
            "requestReceivedTimestamp": "2026-01-02T03:04:05.000001Z",
            "stageTimestamp": "2026-01-02T03:04:05.100000Z"
        })
    };
    let batch = json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1",
                       "items": [event("RequestReceived"), event("ResponseComplete")]});
    let auth = format!("Bearer {WEBHOOK_TOKEN}");
    let headers = [("content-type", "application/json"), ("authorization", auth.as_str())];
    let webhook = format!("/apiserver-audit/{CLUSTER}");
    let posted = env
        .raw()
        .send(Method::POST, &webhook, &headers, serde_json::to_vec(&batch).unwrap())
        .await;
    assert_eq!(posted.status, 200, "{}", String::from_utf8_lossy(&posted.body));
    id
}

/// The HTML-escaped `text`, as the page shows it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_finds_a_request_by_audit_id_and_by_person_with_the_api_servers_stages_decision_and_reason_beside_it()
{
    let (_idp, env, _dir, _port) = start().await;
    let id = a_joined_request(&env).await;
    let visitor = Visitor::new(&env);
    visitor.sign_in("ana").await;
    let console = visitor.get("/console").await;
    assert!(console.body.contains("href=\"/console/audit\""), "{}", console.body);
    let by_id = visitor.get(&format!("/console/audit?id={id}")).await;
    assert_eq!(by_id.status, 200, "{}", by_id.body);
    let page = by_id.body;
    assert!(page.contains(&format!("id=\"row-{id}\"")), "the row of {id}: {page}");
    for words in [
        "1 row, newest first",
        "by <b>ana</b> on sim / shop",
        "code 404",
        "RequestReceived",
        "ResponseComplete",
        "as <b>user:ana</b> in portcullis:grant:1",
        &format!("allow: {}", escaped(RBAC_REASON)),
    ] {
        assert!(page.contains(words), "the page says {words:?}: {page}");
    }
    let by_person = visitor
        .get("/console/audit?login=ana&cluster=sim&since=1h&outcome=")
        .await;
    assert_eq!(by_person.status, 200, "{}", by_person.body);
    assert!(
        by_person.body.contains(&format!("id=\"row-{id}\"")),
        "{}",
        by_person.body
    );
    let by_someone_else = visitor.get("/console/audit?login=carol").await;
    assert!(
        by_someone_else.body.contains("No row matches"),
        "{}",
        by_someone_else.body
    );
    let bad_time = visitor.get("/console/audit?since=yesterday").await;
    assert_eq!(bad_time.status, 400, "{}", bad_time.body);
    assert!(bad_time.body.contains("filter since:"), "{}", bad_time.body);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_in_a_requests_name_is_shown_escaped_on_the_audit_page() {
    let (_idp, env, _dir, _port) = start().await;
    let id = a_joined_request(&env).await;
    assert_eq!(
        row(&env, &id).await.name,
        "<script>alert(1)",
        "the row holds the script"
    );
    let visitor = Visitor::new(&env);
    visitor.sign_in("ana").await;
    let page = visitor.get(&format!("/console/audit?id={id}")).await.body;
    assert!(page.contains("pods &lt;script&gt;alert(1)"), "{page}");
    assert!(!page.contains("<script"), "no script reaches the page: {page}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_who_is_not_an_admin_sees_no_audit_link_and_gets_403_from_the_audit_page() {
    let (_idp, env, _dir, _port) = start().await;
    let id = a_joined_request(&env).await;
    env.store.add_principal(&Principal::person("carol"), false).unwrap();
    let visitor = Visitor::new(&env);
    visitor.sign_in("carol").await;
    let console = visitor.get("/console").await;
    assert_eq!(console.status, 200, "{}", console.body);
    assert!(console.body.contains("Signed in as <b>carol</b>"), "{}", console.body);
    assert!(!console.body.contains("/console/audit"), "{}", console.body);
    let refused = visitor.get(&format!("/console/audit?id={id}")).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("Only people marked admin"), "{}", refused.body);
    assert!(
        !refused.body.contains(&id),
        "nothing of the row shows: {}",
        refused.body
    );
    let refusal = row(&env, refused.audit_id.as_deref().unwrap()).await;
    assert_eq!(
        (refusal.login.as_str(), refusal.refused.as_str()),
        ("carol", "not_admin")
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_page_fits_a_phone_and_passes_axe_in_light_and_dark() {
    let (_idp, env, _dir, port) = start().await;
    let id = a_joined_request(&env).await;
    for &(scheme, flags, background) in SCHEMES {
        let browser = Chromium::start_with(flags).await;
        browser.client.set_window_size(390, 844).await.unwrap();
        sign_in(&browser, port, "ana").await;
        let link = browser
            .client
            .find(fantoccini::Locator::Id("audit-link"))
            .await
            .unwrap();
        link.click().await.unwrap();
        browser.wait_for_text("Audit id").await;
        let url = format!("https://127.0.0.1:{port}/console/audit?id={id}");
        browser.client.goto(&url).await.unwrap();
        browser.wait_for_text("ResponseComplete").await;
        let title = browser
            .client
            .execute("return document.querySelector('#rows time').title", vec![])
            .await
            .unwrap();
        assert!(title.as_str().unwrap().ends_with(" UTC"), "{scheme}: {title}");
        assert_eq!(browser.background().await, background, "{scheme}");
        browser
            .assert_fits_a_phone_and_passes_axe(&format!("{scheme} audit page"))
            .await;
        browser.stop().await;
    }
    env.stop().await;
}
