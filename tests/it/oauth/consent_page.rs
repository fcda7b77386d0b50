//! The consent page in headless Chromium (issue 19, item 4): signed out,
//! the person signs in at the provider and comes back to it; it names the
//! client and its redirect host, warns when the answer leaves this
//! computer, offers only narrower roles, leaves every grant unchosen and
//! writes needing approval; it fits a 390 px phone and passes axe-core in
//! light and dark; denying sends the browser to the client's loopback
//! address with `access_denied`, `state` and `iss`, and no code.

use super::consent::{path, Setup, CLIENT_NAME, ELSEWHERE, PRESENTED, STATE};
use crate::signin::browser::{Chromium, SCHEMES};
use crate::signin::param;
use crate::support::eventually;
use fantoccini::Locator;
use portcullis::identity::Principal;

/// In `browser`, sign in from the authorization request to `redirect_uri`
/// and wait for the consent page.
async fn open_consent(browser: &Chromium, setup: &Setup, redirect_uri: &str, sign_in: bool) {
    let url = format!("https://127.0.0.1:{}{}", setup.port, path(&setup.params(redirect_uri)));
    let client = &browser.client;
    client.goto(&url).await.unwrap();
    if sign_in {
        let login = client.wait().for_element(Locator::Id("login")).await.unwrap();
        login.send_keys("ana").await.unwrap();
        client.find(Locator::Id("signin")).await.unwrap().click().await.unwrap();
    }
    let shop = format!("grant-{}", setup.grants[0].id);
    client.wait().for_element(Locator::Id(&shop)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consent_page_names_the_client_warns_when_the_answer_leaves_this_computer_fits_a_phone_and_passes_axe_in_light_and_dark(
) {
    let setup = Setup::start().await;
    let shop = &setup.grants[0].id;
    for &(scheme, flags, background) in SCHEMES {
        let browser = Chromium::start_with(flags).await;
        open_consent(&browser, &setup, ELSEWHERE, true).await;
        let text = browser.text().await;
        assert!(
            text.contains(CLIENT_NAME) && text.contains("agent.example.com"),
            "{scheme}: {text}"
        );
        assert!(
            browser.client.find(Locator::Id("warning")).await.is_ok(),
            "{scheme}: {text}"
        );
        assert_eq!(browser.background().await, background, "{scheme}");
        browser
            .assert_fits_a_phone_and_passes_axe(&format!("{scheme} consent page"))
            .await;
        assert_choices_start_unchosen(&browser, shop, scheme).await;

        open_consent(&browser, &setup, PRESENTED, false).await;
        let text = browser.text().await;
        assert!(
            text.contains(CLIENT_NAME) && text.contains("127.0.0.1:45871"),
            "{scheme}: {text}"
        );
        assert!(
            browser.client.find(Locator::Id("warning")).await.is_err(),
            "{scheme}: loopback is this computer"
        );
        browser
            .assert_fits_a_phone_and_passes_axe(&format!("{scheme} loopback consent page"))
            .await;
        browser.stop().await;
    }
    setup.stop().await;
}

/// On the page: no grant chosen, writes needing approval, and for the
/// developer grant its own role and the narrower viewer only.
async fn assert_choices_start_unchosen(browser: &Chromium, shop: &str, scheme: &str) {
    let client = &browser.client;
    let grant = client.find(Locator::Id(&format!("grant-{shop}"))).await.unwrap();
    assert!(
        !grant.is_selected().await.unwrap(),
        "{scheme}: no grant is chosen by default"
    );
    let approval = client.find(Locator::Id("writes_need_approval")).await.unwrap();
    assert!(
        approval.is_selected().await.unwrap(),
        "{scheme}: writes need approval by default"
    );
    let roles = client
        .find(Locator::Id(&format!("role-{shop}")))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        roles.contains("developer") && roles.contains("viewer"),
        "{scheme}: {roles}"
    );
    assert!(
        !roles.contains("admin") && !roles.contains("debugger"),
        "{scheme}: only narrower roles: {roles}"
    );
}

/// A client's loopback listener: its redirect URI, and the request
/// targets it receives (`/callback?…`).
async fn loopback_listener() -> (String, std::sync::mpsc::Receiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://127.0.0.1:{}/callback", listener.local_addr().unwrap().port());
    let (tx, rx) = std::sync::mpsc::channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut head = vec![0; 16 * 1024];
                let n = stream.read(&mut head).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&head[..n]).into_owned();
                if let Some(target) = head.split_whitespace().nth(1) {
                    let _ = tx.send(target.to_string());
                }
                let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                let _ = stream.write_all(ok).await;
            });
        }
    });
    (uri, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denying_in_chromium_sends_the_browser_back_with_access_denied_state_and_iss_and_no_code() {
    let setup = Setup::start().await;
    let (callback, received) = loopback_listener().await;
    let browser = Chromium::start().await;
    open_consent(&browser, &setup, &callback, true).await;
    browser
        .client
        .find(Locator::Id("deny"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let target = eventually("the client's loopback address to receive the answer", async || {
        received.try_recv().map_err(|e| e.to_string())
    })
    .await;
    let to = format!("http://127.0.0.1{target}");
    assert!(target.starts_with("/callback?"), "{target}");
    assert_eq!(param(&to, "error").as_deref(), Some("access_denied"), "{to}");
    assert_eq!(param(&to, "state").as_deref(), Some(STATE), "{to}");
    assert_eq!(param(&to, "iss"), Some(setup.issuer()), "{to}");
    assert_eq!(param(&to, "code"), None, "{to}");
    let sessions = setup.env.store.agent_sessions_of(&Principal::person("ana")).unwrap();
    assert!(sessions.is_empty(), "{sessions:?}");
    browser.stop().await;
    setup.stop().await;
}
