//! The signed-in person's console (issue 18, item 3) in headless Chromium:
//! it names grants' origins and agents, gives relative times with the
//! exact UTC time on hover, fits a 390 px phone without sideways
//! scrolling, follows the system's dark mode, and axe-core finds no serious
//! or critical violation on it or on the approval pages.

use super::browser::{Chromium, SCHEMES};
use super::{free_port, portcullis, Idp};
use crate::harness::{Portcullis, CLUSTER};
use fantoccini::Locator;
use portcullis::access::{self, AccessAsk, Requester};
use portcullis::identity::Principal;
use std::time::Duration;

/// The console's pages and the approval list, for the checks.
const PAGES: &[&str] = &["/console", "/approvals"];

/// Sign `person` in through the provider, landing on the console.
pub async fn sign_in(browser: &Chromium, port: u16, person: &str) {
    let client = &browser.client;
    client.goto(&format!("https://127.0.0.1:{port}/console")).await.unwrap();
    let login = client.wait().for_element(Locator::Id("login")).await.unwrap();
    login.send_keys(person).await.unwrap();
    client.find(Locator::Id("signin")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("My access").await;
}

/// ana: in group devs (a rule gives viewer in shop), admin of shop, with
/// an agent; carol asks for access in shop, which ana may decide.
fn set_up(env: &Portcullis) {
    let root = Principal::person("root");
    env.store.add_principal(&root, false).unwrap();
    env.store.set_admin(&root, true).unwrap();
    let out = crate::rbac::cli_ok(
        env,
        &[
            "admin",
            "group-rule",
            "add",
            "--group",
            "devs",
            "--cluster",
            CLUSTER,
            "--role",
            "viewer",
            "--namespace",
            "shop",
        ],
    );
    assert!(out.contains("group rule"), "{out}");
    let ana = Principal::person("ana");
    env.store.add_principal(&ana, false).unwrap();
    let admin = portcullis::cli::new_grant(
        &env.config,
        ana.clone(),
        CLUSTER,
        "admin",
        Some("shop".into()),
        Duration::from_secs(3 * 3600),
        "root",
    )
    .unwrap();
    env.store.add_grant(&admin).unwrap();
    env.store
        .add_agent(&ana, "deploy-helper", std::slice::from_ref(&admin.id), true)
        .unwrap();
    let carol = Principal::person("carol");
    env.store.add_principal(&carol, false).unwrap();
    let ask = AccessAsk {
        cluster: CLUSTER.into(),
        role: "developer".into(),
        namespace: Some("shop".into()),
        duration: Duration::from_secs(3600),
        reason: "fix the checkout incident, ticket OPS-123456789012345678901234567890".into(),
    };
    let requester = Requester {
        principal: carol,
        agent_id: None,
    };
    access::request_access(&env.store, &env.config, &requester, &ask).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_names_things_gives_relative_times_fits_a_phone_and_passes_axe_in_light_and_dark() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    set_up(&env);
    for &(scheme, flags, background) in SCHEMES {
        let browser = Chromium::start_with(flags).await;
        browser.client.set_window_size(390, 844).await.unwrap();
        sign_in(&browser, port, "ana").await;
        let text = browser.text().await;
        for words in [
            "viewer on sim / shop",
            "from group devs",
            "deploy-helper",
            "carol asks for developer",
            "ends in 1",
        ] {
            assert!(text.contains(words), "{scheme}: the console says {words:?}: {text}");
        }
        let title = browser
            .client
            .execute("return document.querySelector('#grants time').title", vec![])
            .await
            .unwrap();
        assert!(title.as_str().unwrap().ends_with(" UTC"), "{title}");
        for page in PAGES {
            browser
                .client
                .goto(&format!("https://127.0.0.1:{port}{page}"))
                .await
                .unwrap();
            browser.wait_for_text("Signed in as ana").await;
            let overflow = browser.overflow(390).await;
            assert_eq!(overflow, 0, "{scheme} {page}: {overflow} px wider than a phone");
            assert_eq!(browser.background().await, background, "{scheme} {page}");
            let violations = browser.axe_violations().await;
            assert!(violations.is_empty(), "{scheme} {page}: {violations:#?}");
        }
        browser.stop().await;
    }
    env.stop().await;
}
