//! The approval pages: in headless Chromium over WebDriver (sign in, open
//! the link, see the diff, approve, and the agent's waiting call returns
//! the result; the page at phone width, light and dark, through axe-core), and
//! their security with a raw client (headers, cookie, CSRF, who may sign in).

use crate::approvals_mcp::{apply_flags, careful_agent, pending};
use crate::harness::{Portcullis, CLUSTER as C};
use crate::mcp::{connect, stateless};
use crate::signin::browser::{Chromium, SCHEMES};
use fantoccini::Locator;
use http::Method;
use serde_json::json;

/// Sign in with `token` on the sign-in page the browser was sent to, and
/// wait to land back on `path` with `element` shown.
async fn sign_in_with_token(browser: &Chromium, token: &str, path: &str, element: &str) {
    let field = browser.client.wait().for_element(Locator::Id("token")).await.unwrap();
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/login");
    field.send_keys(token).await.unwrap();
    browser
        .client
        .find(Locator::Css("form[action='/login'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_until(&format!(
            "location.pathname === '{path}' && document.querySelector('{element}')"
        ))
        .await;
}

/// portcullis with a careful agent's apply held: the environment, ana's
/// token for the browser, the agent's MCP client and the approval id.
async fn held_apply() -> (Portcullis, String, crate::mcp::Client, String) {
    let env = Portcullis::start().await;
    let agent = careful_agent(&env);
    let ana = env
        .store
        .issue_credential(&portcullis::identity::Principal::person("ana"), "browser", None)
        .unwrap()
        .1;
    let client = connect(&env, &agent, stateless()).await;
    let id = pending(&client, apply_flags(None)).await;
    (env, ana, client, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_in_chromium_and_the_agents_waiting_call_returns_the_result() {
    let (env, ana, client, id) = held_apply().await;
    // The agent calls again with the approval id: the call waits.
    let waiting = tokio::spawn(async move {
        let result = crate::mcp::ok(&client, "apply", apply_flags(Some(&id))).await;
        (client, result)
    });

    let browser = Chromium::start().await;
    let base = format!("https://{}", env.addr);
    let id = env.store.list_held().unwrap()[0].id.clone();
    browser.client.goto(&format!("{base}/approvals/{id}")).await.unwrap();
    sign_in_with_token(&browser, &ana, &format!("/approvals/{id}"), "#diff").await;
    let diff = browser
        .client
        .find(Locator::Id("diff"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(diff.contains("+   checkout: on"), "{diff}");
    let cookies = browser.client.execute("return document.cookie", vec![]).await.unwrap();
    assert_eq!(cookies, "", "the session cookie is HttpOnly");
    browser
        .client
        .find(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .client
        .find(Locator::Id("approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The page after the approval is a snapshot: the agent's waiting call
    // may already be running the write ("executing by ana") when it renders.
    browser
        .wait_until("document.querySelector('#state') && /^(approved|executing|executed)/.test(document.querySelector('#state').textContent)")
        .await;

    let (client, result) = waiting.await.unwrap();
    assert!(result.starts_with("approved by ana at 20"), "{result}");
    assert!(result.contains("applied configmaps/flags in shop"), "{result}");
    drop(client);
    // The list shows nothing waiting any more.
    browser.client.goto(&format!("{base}/approvals")).await.unwrap();
    browser.wait_for_text("Nothing waits on you").await;
    browser.stop().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_writes_page_fits_a_phone_and_passes_axe_in_light_and_dark() {
    let (env, ana, client, id) = held_apply().await;
    let path = format!("/approvals/{id}");
    for &(scheme, flags, background) in SCHEMES {
        let browser = Chromium::start_with(flags).await;
        browser.client.set_window_size(390, 844).await.unwrap();
        browser
            .client
            .goto(&format!("https://{}{path}", env.addr))
            .await
            .unwrap();
        browser.client.wait().for_element(Locator::Id("token")).await.unwrap();
        let sign_in = format!("{scheme}: the token sign-in page");
        browser.assert_fits_a_phone_and_passes_axe(&sign_in).await;
        sign_in_with_token(&browser, &ana, &path, "#diff").await;
        let text = browser.text().await;
        assert!(text.contains("checkout: on"), "{scheme}: the diff is shown: {text}");
        let overflow = browser.overflow(390).await;
        assert_eq!(overflow, 0, "{scheme}: {overflow} px wider than a phone");
        assert_eq!(browser.background().await, background, "{scheme}");
        let violations = browser.axe_violations().await;
        assert!(violations.is_empty(), "{scheme}: {violations:#?}");
        browser.stop().await;
    }
    drop(client);
    env.stop().await;
}

/// The sign-in page's pre-session cookie (`name=value`) and its form's CSRF
/// token.
async fn sign_in_form(env: &Portcullis) -> (String, String) {
    let page = env.raw().send(Method::GET, "/login", &[], Vec::new()).await;
    assert_eq!(page.status, 200);
    let set = page.headers["set-cookie"].to_str().unwrap();
    assert!(
        set.starts_with("__Host-portcullis-login=") && set.contains("; Path=/; Secure; HttpOnly; SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    (cookie, hidden(&String::from_utf8_lossy(&page.body), "csrf"))
}

/// The value of the hidden form field `name` in `page`.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).unwrap_or_else(|| panic!("no {name} field: {page}")) + marker.len();
    page[start..].split('"').next().unwrap().to_string()
}

async fn post_form(env: &Portcullis, path: &str, cookie: Option<&str>, form: String) -> crate::harness::RawResponse {
    let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
    if let Some(cookie) = cookie {
        headers.push(("cookie", cookie));
    }
    env.raw().send(Method::POST, path, &headers, form.into_bytes()).await
}

/// Sign `login` in with a new token; returns the session cookie (`name=value`).
async fn sign_in(env: &Portcullis, login: &str) -> String {
    let person = portcullis::identity::Principal::person(login);
    if env.store.principal_disabled(&person).unwrap().is_none() {
        env.store.add_principal(&person, false).unwrap();
    }
    let token = env.store.issue_credential(&person, "web", None).unwrap().1;
    let (login_cookie, csrf) = sign_in_form(env).await;
    let form = format!("token={token}&next=%2Fapprovals&csrf={csrf}");
    let signed_in = post_form(env, "/login", Some(&login_cookie), form).await;
    assert_eq!(signed_in.status, 303);
    let set = signed_in.headers["set-cookie"].to_str().unwrap();
    assert!(set.starts_with("__Host-portcullis="), "{set}");
    set.split(';').next().unwrap().to_string()
}

/// The status of the approvals list for `session` (200 signed in, 303 to
/// the sign-in page otherwise).
async fn list_status(env: &Portcullis, session: &str) -> u16 {
    let list = env
        .raw()
        .send(Method::GET, "/approvals", &[("cookie", session)], Vec::new())
        .await;
    list.status.as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_is_refused_without_the_sign_in_forms_own_csrf_token() {
    let env = Portcullis::start().await;
    let ana = env.person("ana", &[]);
    let (login_cookie, csrf) = sign_in_form(&env).await;
    let (other_cookie, _) = sign_in_form(&env).await;
    let form = |csrf: &str| format!("token={ana}&next=%2Fapprovals&csrf={csrf}");
    let attempts = [
        ("no token and no cookie", None, format!("token={ana}&next=%2Fapprovals")),
        ("the token without its cookie", None, form(&csrf)),
        (
            "no token",
            Some(login_cookie.as_str()),
            format!("token={ana}&next=%2Fapprovals"),
        ),
        ("a wrong token", Some(login_cookie.as_str()), form("00")),
        ("another form's cookie", Some(other_cookie.as_str()), form(&csrf)),
    ];
    for (what, cookie, body) in attempts {
        let refused = post_form(&env, "/login", cookie, body).await;
        assert_eq!(refused.status, 403, "{what}");
        assert!(
            refused
                .headers
                .get_all("set-cookie")
                .iter()
                .all(|c| !c.to_str().unwrap().starts_with("__Host-portcullis=")),
            "{what}: no session"
        );
        let page = String::from_utf8_lossy(&refused.body);
        assert!(page.contains("did not come from this site"), "{what}: {page}");
        assert!(page.contains("name=\"csrf\""), "{what}: a fresh form to sign in with");
    }
    let signed_in = post_form(&env, "/login", Some(&login_cookie), form(&csrf)).await;
    assert_eq!(signed_in.status, 303);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_in_the_store_on_sign_out_and_when_its_person_is_disabled() {
    let env = Portcullis::start().await;
    let session = sign_in(&env, "ana").await;
    assert_eq!(list_status(&env, &session).await, 200);
    let id = session.split_once('=').unwrap().1;
    let stored: Vec<String> = rusqlite::Connection::open(env.store.path())
        .unwrap()
        .prepare("SELECT id_sha256 FROM web_sessions")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        stored,
        [portcullis::identity::credential::hash(id)],
        "only the id's hash is stored"
    );

    let list = env
        .raw()
        .send(Method::GET, "/approvals", &[("cookie", &session)], Vec::new())
        .await;
    let csrf = hidden(&String::from_utf8_lossy(&list.body), "csrf");
    let signed_out = post_form(&env, "/logout", Some(&session), format!("csrf={csrf}")).await;
    assert_eq!(signed_out.status, 303);
    assert_eq!(
        list_status(&env, &session).await,
        303,
        "the cookie from before signing out is refused"
    );
    assert_eq!(env.store.web_session_count("ana").unwrap(), 0);

    let session = sign_in(&env, "ana").await;
    assert_eq!(list_status(&env, &session).await, 200);
    let out = env.cli(&["admin", "person", "disable", "ana"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        env.store.web_session_count("ana").unwrap(),
        0,
        "disabling ends the sessions"
    );
    assert_eq!(
        list_status(&env, &session).await,
        303,
        "a disabled person's session is refused"
    );
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

    let (login_cookie, csrf) = sign_in_form(&env).await;
    let form = |token: &str| format!("token={token}&next=%2Fapprovals%2F{id}&csrf={csrf}");
    // An agent's token never signs in, so an agent cannot approve its own write.
    let refused = post_form(&env, "/login", Some(&login_cookie), form(&agent)).await;
    assert_eq!(refused.status, 403);
    assert!(String::from_utf8_lossy(&refused.body).contains("Only a person&#39;s own token signs in here"));
    let ana = env
        .store
        .issue_credential(&portcullis::identity::Principal::person("ana"), "web", None)
        .unwrap()
        .1;
    let signed_in = post_form(&env, "/login", Some(&login_cookie), form(&ana)).await;
    assert_eq!(signed_in.status, 303);
    let cookie = signed_in.headers["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("__Host-portcullis="), "{cookie}");
    assert!(cookie.contains("; Path=/; Secure; HttpOnly; SameSite=Lax"), "{cookie}");
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
    let shown = held_page(&env, &id, &session).await;
    assert!(shown.contains("name=\"csrf\""));
    env.stop().await;
}

/// The page of held write `id` as the signed-in `session` sees it (200).
async fn held_page(env: &Portcullis, id: &str, session: &str) -> String {
    let shown = env
        .raw()
        .send(
            Method::GET,
            &format!("/approvals/{id}"),
            &[("cookie", session)],
            Vec::new(),
        )
        .await;
    assert_eq!(shown.status, 200);
    String::from_utf8_lossy(&shown.body).into_owned()
}

/// "Trojan Source": a right-to-left isolate in a held value would show the
/// approver `# ` before a line the cluster gets in another order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_writes_page_shows_characters_that_reorder_text_as_escapes() {
    let env = Portcullis::start().await;
    let agent = careful_agent(&env);
    let client = connect(&env, &agent, stateless()).await;
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\n\
                    data:\n  run.sh: \"rm -rf /data \u{2067}# keep\u{2069} \u{2066}\"\n";
    let id = pending(&client, json!({"cluster": C, "manifest": manifest})).await;
    let session = sign_in(&env, "ana").await;
    let page = held_page(&env, &id, &session).await;
    assert!(page.contains("rm -rf /data"), "the value is on the page");
    for c in ['\u{2066}', '\u{2067}', '\u{2069}'] {
        assert!(!page.contains(c), "{c:?} reached the page as it is");
    }
    assert!(
        page.contains("\\u{2067}# keep\\u{2069} \\u{2066}"),
        "each shows as its escape: {page}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_page_is_a_page_and_without_web_pages_the_command_line_gets_json() {
    let env = Portcullis::start().await;
    for path in ["/approvals/zz", "/console/Upper", "/login/elsewhere"] {
        let answer = env.raw().send(Method::GET, path, &[], Vec::new()).await;
        assert_eq!(answer.status, 404, "{path}");
        let kind = answer.headers["content-type"].to_str().unwrap();
        assert!(kind.starts_with("text/html"), "{path}: {kind}");
        assert!(String::from_utf8_lossy(&answer.body).contains("No such page"), "{path}");
    }
    env.stop().await;
    // No [approvals] key_file: no web pages at all.
    let env = Portcullis::start_with(|config| config.approvals.key_file = None).await;
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let asked = env
        .raw()
        .send(
            Method::POST,
            "/login/device/code",
            &form,
            b"client_id=portcullis-cli".to_vec(),
        )
        .await;
    assert_eq!(asked.status, 404);
    assert_eq!(asked.json()["error"], "invalid_request");
    assert!(asked.json()["error_description"].as_str().unwrap().contains("key_file"));
    let page = env.raw().send(Method::GET, "/console", &[], Vec::new()).await;
    assert!(String::from_utf8_lossy(&page.body).contains("key_file is not set"));
    env.stop().await;
}
