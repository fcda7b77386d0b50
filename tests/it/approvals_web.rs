//! The approval pages: in headless Chromium (sign in, open the link, see
//! the diff, approve, and the agent's waiting call returns the result), and
//! their security with a raw client (headers, cookie, CSRF, who may sign in).

use crate::approvals_mcp::{apply_flags, careful_agent, pending};
use crate::cdp::Browser;
use crate::harness::Portcullis;
use crate::mcp::{connect, stateless};
use http::Method;

/// base64 SHA-256 of the serving key's SubjectPublicKeyInfo, for
/// `--ignore-certificate-errors-spki-list`: Chromium trusts this one key.
fn spki_hash(env: &Portcullis) -> String {
    use base64::Engine;
    use rcgen::PublicKeyData;
    use sha2::Digest;
    let pem = std::fs::read_to_string(&env.config.tls.key_file).unwrap();
    let key = rcgen::KeyPair::from_pem(&pem).unwrap();
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(key.subject_public_key_info()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_in_chromium_and_the_agents_waiting_call_returns_the_result() {
    let env = Portcullis::start().await;
    let agent = careful_agent(&env);
    let ana = env
        .store
        .issue_credential(&portcullis::identity::Principal::person("ana"), "browser", None)
        .unwrap()
        .1;
    let client = connect(&env, &agent, stateless()).await;
    let id = pending(&client, apply_flags(None)).await;
    // The agent calls again with the approval id: the call waits.
    let waiting = tokio::spawn(async move {
        let result = crate::mcp::ok(&client, "apply", apply_flags(Some(&id))).await;
        (client, result)
    });

    let profile = tempfile::tempdir().unwrap();
    let mut browser = Browser::start(profile.path(), &spki_hash(&env)).await;
    let base = format!("https://{}", env.addr);
    let id = env.store.list_held().unwrap()[0].id.clone();
    browser.open(&format!("{base}/approvals/{id}")).await;
    browser
        .wait_for("location.pathname === '/login' && document.querySelector('#token')")
        .await;
    browser
        .eval(&format!(
            "document.querySelector('#token').value = '{ana}'; document.querySelector('form[action=\"/login\"]').submit(); true"
        ))
        .await;
    browser
        .wait_for(&format!(
            "location.pathname === '/approvals/{id}' && document.querySelector('#diff')"
        ))
        .await;
    let diff = browser.eval("document.querySelector('#diff').textContent").await;
    assert!(diff.as_str().unwrap().contains("+   checkout: on"), "{diff}");
    assert_eq!(
        browser.eval("document.cookie").await,
        "",
        "the session cookie is HttpOnly"
    );
    browser
        .eval("document.querySelector('#confirm').checked = true; document.querySelector('#approve').click(); true")
        .await;
    // The page after the approval is a snapshot: the agent's waiting call
    // may already be running the write ("executing by ana") when it renders.
    browser.wait_for("document.querySelector('#state') && /^(approved|executing|executed)/.test(document.querySelector('#state').textContent)").await;

    let (client, result) = waiting.await.unwrap();
    assert!(result.starts_with("approved by ana at 20"), "{result}");
    assert!(result.contains("applied configmaps/flags in shop"), "{result}");
    drop(client);
    // The list shows nothing waiting any more.
    browser.open(&format!("{base}/approvals")).await;
    browser
        .wait_for("document.body.textContent.includes('Nothing waits on you')")
        .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_locked_down_and_only_a_persons_own_token_signs_in() {
    let env = Portcullis::start().await;
    let agent = careful_agent(&env);
    let client = connect(&env, &agent, stateless()).await;
    let id = pending(&client, apply_flags(None)).await;
    let raw = env.raw();
    let page = raw
        .send(Method::GET, &format!("/approvals/{id}"), &[], Vec::new())
        .await;
    assert_eq!(page.status, 303, "signed out: to the sign-in page");
    let login = raw.send(Method::GET, "/login", &[], Vec::new()).await;
    let csp = login.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(login.headers["x-frame-options"], "DENY");
    assert!(String::from_utf8_lossy(&login.body).contains("name=\"viewport\""));

    let form = |token: &str| format!("token={token}&next=%2Fapprovals%2F{id}").into_bytes();
    let post = |body: Vec<u8>, cookie: Option<String>| {
        let raw = env.raw();
        async move {
            let mut headers = vec![("content-type", "application/x-www-form-urlencoded".to_string())];
            if let Some(cookie) = cookie {
                headers.push(("cookie", cookie));
            }
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            raw.send(Method::POST, "/login", &headers, body).await
        }
    };
    // An agent's token never signs in, so an agent cannot approve its own write.
    assert_eq!(post(form(&agent), None).await.status, 403);
    let ana = env
        .store
        .issue_credential(&portcullis::identity::Principal::person("ana"), "web", None)
        .unwrap()
        .1;
    let signed_in = post(form(&ana), None).await;
    assert_eq!(signed_in.status, 303);
    let cookie = signed_in.headers["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("__Host-portcullis="), "{cookie}");
    assert!(
        cookie.contains("; Path=/; Secure; HttpOnly; SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();

    // A decision without the page's CSRF token is refused.
    let forged = raw
        .send(
            Method::POST,
            &format!("/approvals/{id}"),
            &[
                ("cookie", &session),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            b"decision=approve&confirm=yes&csrf=00".to_vec(),
        )
        .await;
    assert_eq!(forged.status, 403);
    assert_eq!(
        env.store.held(&id).unwrap().unwrap().state,
        portcullis::approvals::HeldState::Pending
    );
    let shown = raw
        .send(
            Method::GET,
            &format!("/approvals/{id}"),
            &[("cookie", &session)],
            Vec::new(),
        )
        .await;
    assert_eq!(shown.status, 200);
    assert!(String::from_utf8_lossy(&shown.body).contains("name=\"csrf\""));
    env.stop().await;
}
