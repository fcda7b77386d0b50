//! Each bad ID token is refused with a clear message and an audit row:
//! forged, expired, for another audience, from another issuer, for another
//! nonce, unsigned (`alg: none`), and signed with a key the issuer does not
//! publish. The same issuer's good token signs in, so each refusal is the
//! token's own fault.

use super::fake_issuer::{unsigned, FakeIssuer, Signer};
use super::{free_port, param, portcullis, Visitor, CLIENT_ID};
use crate::audit::row;
use crate::harness::Portcullis;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// portcullis in front of a fake issuer, a sign-in started: the visitor,
/// the attempt's state and the nonce a token must carry.
async fn started() -> (FakeIssuer, Portcullis, Visitor, String, String) {
    let fake = FakeIssuer::start().await;
    let env = portcullis(&fake.issuer, free_port(), |_| {}).await;
    let visitor = Visitor::new(&env);
    let to_provider = visitor.get("/login").await;
    let location = to_provider.location.unwrap();
    assert!(location.starts_with(&format!("{}/auth?", fake.issuer)), "{location}");
    assert_eq!(param(&location, "code_challenge_method").as_deref(), Some("S256"));
    let (state, nonce) = (param(&location, "state").unwrap(), param(&location, "nonce").unwrap());
    (fake, env, visitor, state, nonce)
}

/// Good claims for `issuer` and `nonce`.
fn claims(issuer: &str, nonce: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": issuer, "sub": "sub-ana", "aud": CLIENT_ID, "iat": now, "exp": now + 300,
        "nonce": nonce, "preferred_username": "ana",
    })
}

/// Sign in with the token `make` mints; the callback's answer.
async fn sign_in_with(make: impl FnOnce(&FakeIssuer, Value) -> String) -> (Portcullis, FakeIssuer, super::Answer) {
    let (fake, env, visitor, state, nonce) = started().await;
    let token = make(&fake, claims(&fake.issuer, &nonce));
    fake.will_answer(token);
    let answer = visitor.get(&format!("/login/callback?code=any&state={state}")).await;
    (env, fake, answer)
}

/// The token made by `make` is refused, saying `says`, audited `refused`.
async fn assert_refused(make: impl FnOnce(&FakeIssuer, Value) -> String, says: &str, refused: &str) -> FakeIssuer {
    let (env, fake, answer) = sign_in_with(make).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer.body.contains("ID token from the identity provider was refused"),
        "{}",
        answer.body
    );
    assert!(answer.body.contains(says), "{}", answer.body);
    let audited = row(&env, answer.audit_id.as_deref().unwrap()).await;
    assert_eq!((audited.verb.as_str(), audited.refused.as_str()), ("signin", refused));
    assert!(
        env.store.list_credentials(None).unwrap().is_empty(),
        "no one was signed in"
    );
    env.stop().await;
    fake
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_issuers_good_token_signs_in() {
    let (env, _fake, answer) = sign_in_with(|fake, claims| fake.signer.sign(&fake.signer.kid, &claims)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(row(&env, answer.audit_id.as_deref().unwrap()).await.login, "ana");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_id_token_is_refused() {
    let forger = Signer::new("forger");
    assert_refused(
        |fake, claims| forger.sign(&fake.signer.kid, &claims),
        "signature is not by the identity provider",
        "id_token_signature",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_id_token_is_refused() {
    let expired = |fake: &FakeIssuer, mut claims: Value| {
        let now = chrono::Utc::now().timestamp();
        claims["iat"] = json!(now - 900);
        claims["exp"] = json!(now - 600);
        fake.signer.sign(&fake.signer.kid, &claims)
    };
    assert_refused(expired, "it has expired", "id_token_expired").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_for_another_client_is_refused() {
    let other = |fake: &FakeIssuer, mut claims: Value| {
        claims["aud"] = json!("someone-else");
        fake.signer.sign(&fake.signer.kid, &claims)
    };
    assert_refused(other, "issued to another client", "id_token_audience").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_from_another_issuer_is_refused() {
    let other = |fake: &FakeIssuer, mut claims: Value| {
        claims["iss"] = json!("https://evil.example");
        fake.signer.sign(&fake.signer.kid, &claims)
    };
    assert_refused(other, "issued by another issuer", "id_token_issuer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_for_another_sign_ins_nonce_is_refused() {
    let other = |fake: &FakeIssuer, mut claims: Value| {
        claims["nonce"] = json!("a-nonce-from-another-sign-in");
        fake.signer.sign(&fake.signer.kid, &claims)
    };
    assert_refused(other, "issued for another sign-in", "id_token_nonce").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_alg_none_id_token_is_refused() {
    assert_refused(
        |_, claims| unsigned(&claims),
        "unsigned or signed with an algorithm not accepted",
        "id_token_unsigned",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_signed_with_an_unpublished_key_is_refused_after_the_keys_are_fetched_once_more() {
    let stranger = Signer::new("not-published");
    let fake = assert_refused(
        |_, claims| stranger.sign(&stranger.kid, &claims),
        "signed with a key the identity provider does not publish",
        "id_token_unknown_key",
    )
    .await;
    // Discovery fetched the keys once; the unknown key id once more.
    assert_eq!(fake.key_fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_key_ids_make_portcullis_fetch_the_keys_again_at_most_once_in_ten_seconds() {
    let fake = FakeIssuer::start().await;
    let env = portcullis(&fake.issuer, free_port(), |_| {}).await;
    let stranger = Signer::new("made-up");
    for _ in 0..3 {
        let visitor = Visitor::new(&env);
        let location = visitor.get("/login").await.location.unwrap();
        let (state, nonce) = (param(&location, "state").unwrap(), param(&location, "nonce").unwrap());
        fake.will_answer(stranger.sign(&stranger.kid, &claims(&fake.issuer, &nonce)));
        let answer = visitor.get(&format!("/login/callback?code=any&state={state}")).await;
        assert_eq!(
            row(&env, answer.audit_id.as_deref().unwrap()).await.refused,
            "id_token_unknown_key"
        );
    }
    assert_eq!(
        fake.key_fetches.load(Ordering::SeqCst),
        2,
        "discovery, then one refetch"
    );
    env.stop().await;
}
