//! The callback's own checks against the real provider: a reused code, a
//! missing or wrong `state`, a code issued for another PKCE challenge and
//! an answer naming another issuer are each refused, with a message and an
//! audit row.

use super::{free_port, param, portcullis, Idp, Visitor};
use crate::audit::row;
use crate::harness::Portcullis;

const ATTEMPT: &str = "__Host-portcullis-signin";

async fn pair() -> (Portcullis, Idp) {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    (env, idp)
}

/// The callback's answer is a refusal with `code`, saying `says`, audited
/// as `refused`.
async fn assert_refused(env: &Portcullis, answer: &super::Answer, code: u16, says: &str, refused: &str) {
    assert_eq!(answer.status, code, "{answer:?}");
    assert!(answer.body.contains(says), "{}", answer.body);
    let audited = row(env, answer.audit_id.as_deref().unwrap()).await;
    assert_eq!((audited.verb.as_str(), audited.refused.as_str()), ("signin", refused));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_authorization_code_is_refused() {
    let (env, _idp) = pair().await;
    let visitor = Visitor::new(&env);
    let callback = visitor.to_callback("ana").await;
    let attempt = visitor.cookies.lock().unwrap().get(ATTEMPT).cloned().unwrap();
    assert_eq!(visitor.get(&callback).await.status, 200);
    // The same browser state, replayed with the same code.
    visitor.cookies.lock().unwrap().insert(ATTEMPT.into(), attempt);
    let replayed = visitor.get(&callback).await;
    assert_refused(&env, &replayed, 400, "refused the sign-in code", "signin_code_refused").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_without_this_browsers_state_or_with_another_state_is_refused() {
    let (env, _idp) = pair().await;
    let visitor = Visitor::new(&env);
    let callback = visitor.to_callback("ana").await;
    // Another browser (a login CSRF: the attacker's code in the victim's
    // browser) has no sign-in state at all.
    let elsewhere = Visitor::new(&env).get(&callback).await;
    assert_refused(
        &env,
        &elsewhere,
        400,
        "not started in this browser",
        "signin_state_missing",
    )
    .await;
    let state = param(&callback, "state").unwrap();
    let forged = callback.replace(&format!("state={state}"), "state=0123abcd");
    let wrong = visitor.get(&forged).await;
    assert_refused(
        &env,
        &wrong,
        400,
        "does not belong to the sign-in",
        "signin_state_wrong",
    )
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_is_shown_only_with_this_browsers_state() {
    let (env, _idp) = pair().await;
    let visitor = Visitor::new(&env);
    let words = "Your account is locked: call 555-0100";
    let injected = format!(
        "/login/callback?error=access_denied&error_description={}",
        words.replace(' ', "+")
    );
    // A link anyone can make, in a browser that began no sign-in.
    let answer = Visitor::new(&env).get(&injected).await;
    assert_refused(
        &env,
        &answer,
        400,
        "not started in this browser",
        "signin_state_missing",
    )
    .await;
    assert!(!answer.body.contains("555-0100"), "{}", answer.body);
    // The provider's own error comes back with the state it was given.
    let started = visitor.get("/login").await;
    let state = param(started.location.as_deref().unwrap(), "state").unwrap();
    let answer = visitor
        .get(&format!(
            "/login/callback?error=access_denied&error_description=denied+by+policy&state={state}"
        ))
        .await;
    assert_refused(&env, &answer, 401, "denied by policy", "provider_error").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_issued_for_another_sign_ins_pkce_challenge_is_refused() {
    let (env, _idp) = pair().await;
    let victim = Visitor::new(&env);
    let started = victim.get("/login").await;
    let victim_state = param(started.location.as_deref().unwrap(), "state").unwrap();
    // The attacker's code (for the attacker's PKCE challenge), injected with
    // the victim's own state: only the PKCE verifier can tell.
    let attackers = Visitor::new(&env).to_callback("eve").await;
    let code = param(&attackers, "code").unwrap();
    let injected = format!("/login/callback?code={code}&state={victim_state}");
    let answer = victim.get(&injected).await;
    assert_refused(&env, &answer, 400, "refused the sign-in code", "signin_code_refused").await;
    assert!(
        env.store.list_credentials(None).unwrap().is_empty(),
        "no one was signed in"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_whose_iss_names_another_issuer_is_refused_before_its_code_is_spent() {
    let (env, idp) = pair().await;
    let visitor = Visitor::new(&env);
    let callback = visitor.to_callback("ana").await;
    let attempt = visitor.cookies.lock().unwrap().get(ATTEMPT).cloned().unwrap();
    // A mix-up (RFC 9207): the browser comes back saying another provider
    // answered, so the code must not be sent to this one's token endpoint.
    let (path, query) = callback.split_once('?').unwrap();
    let others: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k != "iss"))
        .append_pair("iss", "https://evil.example")
        .finish();
    let mixed_up = visitor.get(&format!("{path}?{others}")).await;
    assert_refused(
        &env,
        &mixed_up,
        401,
        "the answer came from another identity provider",
        "id_token_issuer",
    )
    .await;
    assert!(
        env.store.list_credentials(None).unwrap().is_empty(),
        "no one was signed in"
    );
    // The code was not spent: the true answer still signs ana in.
    visitor.cookies.lock().unwrap().insert(ATTEMPT.into(), attempt);
    assert_eq!(param(&callback, "iss").as_deref(), Some(idp.issuer.as_str()));
    let true_answer = visitor.get(&callback).await;
    assert_eq!(true_answer.status, 200, "{true_answer:?}");
    env.stop().await;
}
