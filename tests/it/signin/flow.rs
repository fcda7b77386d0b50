//! Signing in with the real provider: who a sign-in is, sessions and
//! sign-out, people who must exist, disabled people, email and login
//! domains, key rotation, and the provider being down.

use super::{free_port, portcullis, Idp, Visitor};
use crate::audit::row;
use crate::harness::Portcullis;
use portcullis::identity::Principal;

/// portcullis and the provider, each knowing the other.
async fn pair(adjust: impl FnOnce(&mut portcullis::config::OidcConfig)) -> (Portcullis, Idp) {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, adjust).await;
    (env, idp)
}

/// The page `path` as the visitor sees it.
async fn page(visitor: &Visitor, path: &str) -> super::Answer {
    visitor.get(path).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_with_the_provider_as_their_normalised_login_and_it_is_audited() {
    let (env, _idp) = pair(|_| {}).await;
    let visitor = Visitor::new(&env);
    let signed_in = visitor.sign_in("ana").await;
    assert_eq!(signed_in.status, 200, "{signed_in:?}");
    assert!(signed_in.body.contains("url=/approvals"), "{}", signed_in.body);
    assert!(
        !visitor.cookies.lock().unwrap().contains_key("__Host-portcullis-signin"),
        "the attempt is used up"
    );
    let list = page(&visitor, "/approvals").await;
    assert_eq!(list.status, 200);
    assert!(
        list.body.contains("Signed in as <b>ana</b>"),
        "Ana is ana: {}",
        list.body
    );

    let audited = row(&env, signed_in.audit_id.as_deref().unwrap()).await;
    assert_eq!(
        (
            audited.verb.as_str(),
            audited.resource.as_str(),
            audited.login.as_str(),
            audited.refused.as_str()
        ),
        ("signin", "sessions", "ana", "")
    );
    let credentials = env.store.list_credentials(Some(&Principal::person("ana"))).unwrap();
    assert_eq!(credentials.len(), 1, "the session's own credential");
    assert_eq!(credentials[0].id, audited.credential_id);
    let hours = (credentials[0].expires_at.unwrap() - chrono::Utc::now()).num_minutes();
    assert!((715..=720).contains(&hours), "12 h by default: {hours} min");
    assert_eq!(env.store.person_groups(&_idp.issuer, "ana").unwrap(), ["devs"]);

    // Another identity at the provider whose login claim is also ana's.
    let other = Visitor::new(&env).sign_in("ana2").await;
    assert_eq!(other.status, 403);
    assert!(other.body.contains("belongs to someone else"), "{}", other.body);
    assert_eq!(
        row(&env, other.audit_id.as_deref().unwrap()).await.refused,
        "login_taken"
    );
    // With a provider, no portcullis token signs in on the form.
    let form = visitor.post("/login", "token=x").await;
    assert_eq!(form.status, 405);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_must_exist_unless_added_at_sign_in_and_disabling_one_ends_their_session_at_once() {
    let (env, _idp) = pair(|oidc| oidc.create_people = false).await;
    let refused = Visitor::new(&env).sign_in("carol").await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("no portcullis person carol"), "{}", refused.body);
    assert_eq!(
        row(&env, refused.audit_id.as_deref().unwrap()).await.refused,
        "person_unknown"
    );

    env.store.add_principal(&Principal::person("carol"), false).unwrap();
    let visitor = Visitor::new(&env);
    assert_eq!(visitor.sign_in("carol").await.status, 200);
    assert_eq!(page(&visitor, "/approvals").await.status, 200);
    let out = env.cli(&["admin", "person", "disable", "carol"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(page(&visitor, "/approvals").await.status, 303, "the session ended");
    let credentials = env.store.list_credentials(Some(&Principal::person("carol"))).unwrap();
    assert!(credentials.iter().all(|c| c.revoked_at.is_some()), "and its credential");

    let again = Visitor::new(&env).sign_in("carol").await;
    assert_eq!(again.status, 403);
    assert!(again.body.contains("carol is disabled"), "{}", again.body);
    let audited = row(&env, again.audit_id.as_deref().unwrap()).await;
    assert_eq!(
        (audited.refused.as_str(), audited.login.as_str()),
        ("person_disabled", "carol")
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_from_another_domain_does_not_take_over_the_person_of_that_name() {
    let (env, _idp) = pair(|oidc| {
        oidc.create_people = false;
        oidc.login_domains = vec!["example.com".into()];
    })
    .await;
    env.store.add_principal(&Principal::person("ana"), false).unwrap();
    env.store.add_principal(&Principal::person("dan"), false).unwrap();

    let refused = Visitor::new(&env).sign_in("mallory").await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("ana@elsewhere.test is not in a domain"),
        "{}",
        refused.body
    );
    assert_eq!(
        row(&env, refused.audit_id.as_deref().unwrap()).await.refused,
        "login_claim"
    );
    // ana's own first sign-in still finds her unlinked, and Dan@Example.com
    // (a listed domain) is dan.
    for (person, login) in [("ana", "ana"), ("dan", "dan")] {
        let visitor = Visitor::new(&env);
        assert_eq!(visitor.sign_in(person).await.status, 200, "{person}");
        let list = page(&visitor, "/approvals").await;
        assert!(
            list.body.contains(&format!("Signed in as <b>{login}</b>")),
            "{person}: {}",
            list.body
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_email_or_one_outside_the_allowed_domains_does_not_sign_in() {
    let (env, _idp) = pair(|oidc| oidc.allowed_email_domains = vec!["example.com".into()]).await;
    for (person, says) in [
        ("bob", "not verified"),
        ("eve", "eve@elsewhere.test is not in a domain"),
    ] {
        let refused = Visitor::new(&env).sign_in(person).await;
        assert_eq!(refused.status, 403, "{person}");
        assert!(refused.body.contains(says), "{person}: {}", refused.body);
        assert_eq!(
            row(&env, refused.audit_id.as_deref().unwrap()).await.refused,
            "email_domain"
        );
    }
    assert_eq!(
        Visitor::new(&env).sign_in("carol").await.status,
        200,
        "carol@example.com is verified"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_ends_the_session_and_its_credential_and_is_audited() {
    let (env, _idp) = pair(|_| {}).await;
    let visitor = Visitor::new(&env);
    visitor.sign_in("ana").await;
    let list = page(&visitor, "/approvals").await;
    let csrf = list
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let cookie = visitor
        .cookies
        .lock()
        .unwrap()
        .get("__Host-portcullis")
        .cloned()
        .unwrap();
    let out = visitor.post("/logout", &format!("csrf={csrf}")).await;
    assert_eq!(
        (out.status, out.location.as_deref()),
        (303, Some(format!("https://{}/login?signed_out=1", env.addr).as_str()))
    );
    let audited = row(&env, out.audit_id.as_deref().unwrap()).await;
    assert_eq!((audited.verb.as_str(), audited.login.as_str()), ("signout", "ana"));
    assert!(page(&visitor, "/login?signed_out=1")
        .await
        .body
        .contains("You are signed out"));
    visitor
        .cookies
        .lock()
        .unwrap()
        .insert("__Host-portcullis".into(), cookie);
    assert_eq!(
        page(&visitor, "/approvals").await.status,
        303,
        "the old cookie is refused"
    );
    let credentials = env.store.list_credentials(Some(&Principal::person("ana"))).unwrap();
    assert!(
        credentials[0].revoked_at.is_some(),
        "the session's credential is revoked"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_at_the_provider_is_picked_up_without_a_restart() {
    let (env, idp) = pair(|_| {}).await;
    assert_eq!(Visitor::new(&env).sign_in("ana").await.status, 200);
    idp.rotate().await;
    let after = Visitor::new(&env).sign_in("ana").await;
    assert_eq!(after.status, 200, "signed with the new key: {}", after.body);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_provider_down_sign_in_says_so_and_issued_credentials_keep_working() {
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let env = portcullis(&nobody, free_port(), |_| {}).await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let visitor = Visitor::new(&env);
    let down = visitor.get("/login").await;
    assert_eq!(down.status, 503);
    assert!(
        down.body.contains("identity provider cannot be reached"),
        "{}",
        down.body
    );
    assert!(
        down.body.contains("credentials already issued keep working"),
        "{}",
        down.body
    );
    assert_eq!(
        row(&env, down.audit_id.as_deref().unwrap()).await.refused,
        "provider_unavailable"
    );
    let listed = env
        .raw()
        .get("/clusters/sim/api/v1/namespaces/shop/configmaps", &token)
        .await;
    assert_eq!(listed.status, 200, "{}", String::from_utf8_lossy(&listed.body));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_from_one_address_are_rate_limited_and_links_any_page_can_make_are_not() {
    let (env, _idp) = pair(|_| {}).await;
    let limit = env.config.sessions.sign_in_per_minute;
    // What any web page can make a visitor's browser ask for: `/login`, a
    // callback without the sign-in cookie, device codes (a form any page
    // can post). Device codes (each a row in the store) have a budget of
    // their own (asked at once: the bucket refills one token in six
    // seconds); none of these spends the address's sign-ins.
    for _ in 0..limit {
        let asked = Visitor::new(&env)
            .post("/login/device/code", "client_id=portcullis-cli")
            .await;
        assert_eq!(asked.status, 200, "{}", asked.body);
    }
    let asked = Visitor::new(&env)
        .post("/login/device/code", "client_id=portcullis-cli")
        .await;
    assert_eq!(asked.status, 429, "{}", asked.body);
    assert!(asked.body.contains("\"error\":\"slow_down\""), "{}", asked.body);
    assert_eq!(
        row(&env, asked.audit_id.as_deref().unwrap()).await.refused,
        "rate_limited"
    );
    for _ in 0..=limit {
        assert_eq!(Visitor::new(&env).get("/login").await.status, 303);
        let stray = Visitor::new(&env).get("/login/callback?code=x&state=y").await;
        assert_eq!(stray.status, 400, "{}", stray.body);
    }
    // Callbacks of a sign-in begun in this browser (each a code exchanged
    // at the provider) do.
    let visitor = Visitor::new(&env);
    for _ in 0..limit {
        assert_eq!(visitor.get("/login").await.status, 303);
        assert_eq!(visitor.get("/login/callback?code=x&state=y").await.status, 400);
    }
    assert_eq!(visitor.get("/login").await.status, 303);
    let refused = visitor.get("/login/callback?code=x&state=y").await;
    assert_eq!(refused.status, 429);
    assert_eq!(
        row(&env, refused.audit_id.as_deref().unwrap()).await.refused,
        "rate_limited"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_codes_cannot_be_tried_one_after_another() {
    let (env, _idp) = pair(|_| {}).await;
    let visitor = Visitor::new(&env);
    assert_eq!(visitor.sign_in("ana").await.status, 200);
    let page = visitor.get("/login/device").await;
    let csrf = super::csrf_of(&page.body);
    // A code that waits nowhere is said so, and is a refusal in the audit.
    let missed = visitor
        .post("/login/device/check", &format!("csrf={csrf}&user_code=BCDF-GHJK"))
        .await;
    assert_eq!(missed.status, 404, "{}", missed.body);
    assert!(
        missed.body.contains("No command line waits with this code"),
        "{}",
        missed.body
    );
    assert_eq!(
        row(&env, missed.audit_id.as_deref().unwrap()).await.refused,
        "signin_code_refused"
    );
    // Looking and deciding both take from the address's sign-in attempts,
    // so guessing stops at the limit (asked at once: the bucket refills
    // one token in six seconds).
    let limit = env.config.sessions.sign_in_per_minute;
    let tries = (0..limit)
        .map(|i| {
            let (path, decision) = if i % 2 == 0 {
                ("/login/device/check", "")
            } else {
                ("/login/device", "&decision=allow")
            };
            (
                path,
                format!(
                    "csrf={csrf}&user_code=BCDF-GHJ{}{decision}",
                    (b'B' + (i % 20) as u8) as char
                ),
            )
        })
        .collect::<Vec<_>>();
    let mut statuses = Vec::new();
    for (path, body) in &tries {
        statuses.push(visitor.post(path, body).await.status);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    let refused = visitor
        .post(
            "/login/device",
            &format!("csrf={csrf}&user_code=BCDF-GHJK&decision=allow"),
        )
        .await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(
        refused.body.contains("Too many codes tried from your address"),
        "{}",
        refused.body
    );
    assert_eq!(
        row(&env, refused.audit_id.as_deref().unwrap()).await.refused,
        "rate_limited"
    );
    env.stop().await;
}

/// A browser signed in already is sent on by `/login` (any page can link
/// there, and a provider with single sign-on finishes without a click):
/// its session stays. A sign-in that finishes in a browser whose cookie
/// names a live session anyway (begun in another tab before that one
/// signed in) ends that session: the person can no longer reach it to
/// sign out, so it must not keep its credential, or `portcullis login`'s
/// under it, for the rest of its lifetime. Another browser's session stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_again_in_the_same_browser_ends_the_session_it_had() {
    let (env, _idp) = pair(|_| {}).await;
    let ana = Principal::person("ana");
    let elsewhere = Visitor::new(&env);
    assert_eq!(elsewhere.sign_in("ana").await.status, 200);
    // A second tab begins a sign-in, then the first signs in.
    let visitor = Visitor::new(&env);
    let begun = visitor.to_callback("ana").await;
    let first_tab = Visitor::new(&env);
    assert_eq!(first_tab.sign_in("ana").await.status, 200);
    let cookie = |v: &Visitor| v.cookies.lock().unwrap().get("__Host-portcullis").cloned().unwrap();
    let first = cookie(&first_tab);
    visitor
        .cookies
        .lock()
        .unwrap()
        .insert("__Host-portcullis".into(), first.clone());
    // Signed in: `/login` sends the browser on, and nothing ends.
    let again = visitor.get("/login?next=/console").await;
    assert_eq!(again.status, 303, "{again:?}");
    assert!(
        again.location.as_deref().is_some_and(|l| l.ends_with("/console")),
        "{again:?}"
    );
    assert_eq!(env.store.web_session_count("ana").unwrap(), 2);
    let first_hash = portcullis::identity::credential::hash(&first);
    let first_credential = env.store.web_session(&first_hash).unwrap().unwrap().credential_id;
    let until = chrono::Utc::now() + chrono::TimeDelta::hours(1);
    let (under, _) = env
        .store
        .issue_session_credential(&ana, "portcullis-login", until, &first_hash)
        .unwrap();

    // The other tab's sign-in finishes: the session it replaces ends.
    assert_eq!(visitor.get(&begun).await.status, 200);
    assert_ne!(cookie(&visitor), first);
    assert!(
        env.store.web_session(&first_hash).unwrap().is_none(),
        "the first session ended"
    );
    let revoked = |id: &str| {
        env.store
            .list_credentials(Some(&ana))
            .unwrap()
            .into_iter()
            .any(|c| c.id == id && c.revoked_at.is_some())
    };
    assert!(revoked(&first_credential), "its own credential is revoked");
    assert!(revoked(&under.id), "the credential got under it is revoked");
    assert_eq!(
        env.store.web_session_count("ana").unwrap(),
        2,
        "the other browser's and the new one"
    );
    assert_eq!(
        elsewhere.get("/approvals").await.status,
        200,
        "the other browser is still signed in"
    );
    // The ended session's sign-out is on record.
    let rows = crate::approvals::audit_rows(&env).await;
    assert!(
        rows.iter()
            .any(|r| r.verb == "signout" && r.credential_id == first_credential),
        "{rows:?}"
    );
    env.stop().await;
}
