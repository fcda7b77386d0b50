//! The console's forms end to end in headless Chromium (issue 18, item 3):
//! a person asks for access and sees the request's state, a person who may
//! decide approves it with a reason and the grant exists; a person revokes
//! one of their credentials and one of their agents, whose tokens are then
//! refused; the kubeconfig download names the exec plugin and no token.

use super::browser::Chromium;
use super::console::sign_in;
use super::{free_port, portcullis, Idp};
use crate::harness::{Portcullis, CLUSTER};
use crate::support::eventually;
use fantoccini::Locator;
use portcullis::identity::Principal;
use std::time::Duration;

/// ana, admin of shop (so she may decide requests there); returns the
/// grant.
fn ana_admin_of_shop(env: &Portcullis) -> portcullis::identity::Grant {
    let ana = Principal::person("ana");
    env.store.add_principal(&ana, false).unwrap();
    let admin = portcullis::cli::new_grant(
        &env.config,
        ana,
        CLUSTER,
        "admin",
        Some("shop".into()),
        Duration::from_secs(3 * 3600),
        "root",
    )
    .unwrap();
    env.store.add_grant(&admin).unwrap();
    env.reconcile_blocking();
    admin
}

/// Click the button `css` and wait for the console to come back with
/// `script` true in it.
async fn submit(browser: &Chromium, css: &str, script: &str) {
    browser
        .client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_until(&format!("location.pathname === '/console' && ({script})"))
        .await;
}

/// Fill in the request form as the signed-in person and ask.
async fn ask_for_developer_in_shop(browser: &Chromium, reason: &str) {
    let client = &browser.client;
    let field = async |id: &str| client.find(Locator::Id(id)).await.unwrap();
    field("role").await.select_by_label("developer").await.unwrap();
    field("cluster").await.select_by_label(CLUSTER).await.unwrap();
    field("namespace").await.send_keys("shop").await.unwrap();
    field("duration").await.select_by_value("1h").await.unwrap();
    field("reason").await.send_keys(reason).await.unwrap();
    submit(browser, "#ask", "document.querySelector('#requests')").await;
}

/// The `#requests` list's text.
async fn my_requests(browser: &Chromium) -> String {
    let list = browser.client.find(Locator::Id("requests")).await.unwrap();
    list.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_asks_for_access_on_the_console_and_an_admin_approves_it_there_with_a_reason() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    ana_admin_of_shop(&env);
    let carol = Chromium::start().await;
    sign_in(&carol, port, "carol").await;
    ask_for_developer_in_shop(&carol, "fix the checkout incident OPS-1").await;
    let asked = my_requests(&carol).await;
    assert!(asked.contains("developer on sim / shop"), "{asked}");
    assert!(asked.contains("pending"), "{asked}");
    let request = portcullis::access::list(&env.store).unwrap().pop().unwrap();
    assert_eq!(request.requester, Principal::person("carol"));

    let ana = Chromium::start().await;
    sign_in(&ana, port, "ana").await;
    ana.wait_for_text("carol asks for developer").await;
    let reason = ana
        .client
        .find(Locator::Id(&format!("reason-{}", request.id)))
        .await
        .unwrap();
    reason.send_keys("on call this week").await.unwrap();
    let approve = format!("form[action='/console/access/{}'] button[value='approve']", request.id);
    submit(&ana, &approve, "!document.querySelector('#to-decide')").await;
    let grants = env.store.grants_of(&Principal::person("carol"), CLUSTER).unwrap();
    assert!(
        grants
            .iter()
            .any(|g| g.role == "developer" && g.namespace.as_deref() == Some("shop")),
        "{grants:?}"
    );
    let decided = env.store.access_request(&request.id).unwrap().unwrap();
    assert_eq!(decided.decision_reason.as_deref(), Some("on call this week"));

    carol.client.refresh().await.unwrap();
    carol.wait_for_text("approved by ana").await;
    ana.stop().await;
    carol.stop().await;
    env.stop().await;
}

/// The status of listing pods in shop with `token`.
async fn pods_status(env: &Portcullis, token: &str) -> u16 {
    let path = format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/pods");
    env.raw().get(&path, token).await.status.as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_revokes_a_credential_and_an_agent_on_the_console_and_their_tokens_are_refused() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let admin = ana_admin_of_shop(&env);
    let laptop = env
        .store
        .issue_credential(&Principal::person("ana"), "laptop", None)
        .unwrap()
        .1;
    let agent = env.agent_named("ana", "deploy-helper", &[&admin]);
    assert_eq!(pods_status(&env, &laptop).await, 200);
    assert_eq!(pods_status(&env, &agent).await, 200);

    let browser = Chromium::start().await;
    sign_in(&browser, port, "ana").await;
    let gone = "!document.querySelector(\"button[aria-label='Revoke laptop']\")";
    submit(&browser, "button[aria-label='Revoke laptop']", gone).await;
    assert_eq!(pods_status(&env, &laptop).await, 401, "the revoked credential");
    let revoked = "!document.querySelector(\"button[aria-label='Revoke deploy-helper']\")";
    submit(&browser, "button[aria-label='Revoke deploy-helper']", revoked).await;
    let agents = browser.client.find(Locator::Id("agents")).await.unwrap();
    let agents = agents.text().await.unwrap();
    assert!(
        agents.contains("deploy-helper") && agents.contains("revoked"),
        "{agents}"
    );
    assert_eq!(pods_status(&env, &agent).await, 401, "the revoked agent");
    browser.stop().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_downloads_a_kubeconfig_whose_user_runs_the_exec_plugin_and_holds_no_token() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    ana_admin_of_shop(&env);
    let downloads = tempfile::tempdir().unwrap();
    let browser = Chromium::start_downloading_to(downloads.path()).await;
    sign_in(&browser, port, "ana").await;
    let link = browser.client.find(Locator::Id("kubeconfig")).await.unwrap();
    link.click().await.unwrap();
    let saved = downloads.path().join("portcullis-kubeconfig.yaml");
    // Chromium reserves the file's name with an empty file while it writes
    // to a `.crdownload` beside it, then renames that over it: the download
    // is done once the name holds bytes and no partial file is left.
    let text = eventually("the kubeconfig to be downloaded", async || {
        let text = std::fs::read_to_string(&saved).map_err(|e| e.to_string())?;
        let partial = std::fs::read_dir(downloads.path())
            .map_err(|e| e.to_string())?
            .flatten()
            .any(|entry| entry.path().extension().is_some_and(|ext| ext == "crdownload"));
        if text.is_empty() || partial {
            return Err("still downloading".to_string());
        }
        Ok(text)
    })
    .await;
    assert!(!text.to_ascii_lowercase().contains("token"), "{text}");
    let parsed: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(parsed["current-context"], format!("portcullis-{CLUSTER}"));
    let exec = &parsed["users"][0]["user"]["exec"];
    assert_eq!(exec["command"], "portcullis", "{text}");
    assert_eq!(exec["args"][0], "credential-plugin", "{text}");
    assert_eq!(exec["apiVersion"], "client.authentication.k8s.io/v1", "{text}");
    browser.stop().await;
    env.stop().await;
}
