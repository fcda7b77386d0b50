//! Each bad CI token is refused with a clear reason, an OAuth error and an
//! audit row, and no credential: a bad signature, `alg: none`, HS256, an
//! unknown key, the wrong issuer or audience, expired or not yet valid, too
//! old by `iat`, a replay (by `jti`, and of a token without one), claims
//! meeting no rule, a disabled bot. A good token of the same issuer is
//! exchanged in the same setup, so each refusal is the token's own fault.

use super::issuer::{hmac, unsigned, Key};
use super::{Answer, Ci, BOT};
use portcullis::audit::refusal::Refusal;
use portcullis::identity::Principal;
use serde_json::Value;

/// The answer refuses with `refusal`: an `invalid_grant` saying `says`,
/// audited so, and no token in it.
fn assert_refused(answer: &Answer, refusal: Refusal, says: &str) {
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.body["error"], "invalid_grant", "{}", answer.body);
    let description = answer.body["error_description"].as_str().unwrap();
    assert!(description.contains(says), "{description:?} lacks {says:?}");
    assert!(answer.body.get("access_token").is_none());
    assert_eq!(answer.row.refused, refusal.as_str());
}

/// A token made by `make` from good claims is refused for `refusal`,
/// saying `says`, and no credential is issued; then a good token works.
async fn refused(make: impl FnOnce(&Ci, Value) -> String, refusal: Refusal, says: &str) {
    let ci = Ci::start().await;
    let token = make(&ci, ci.claims("500"));
    assert_refused(&ci.exchange(&token).await, refusal, says);
    assert!(ci.credentials().is_empty(), "no credential for a refused token");
    let good = ci.issuer.key("rsa-1").sign(&ci.claims("501"));
    ci.exchange(&good).await.ok();
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_forged_under_a_published_key_id_is_refused_for_its_signature() {
    let forged = |_: &Ci, claims: Value| Key::rsa("rsa-1", 2).sign(&claims);
    refused(forged, Refusal::CiTokenSignature, "signature").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsigned_token_is_refused() {
    refused(|_, claims| unsigned(&claims), Refusal::CiTokenUnsigned, "alg none").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_hs256_token_is_refused_before_any_key_is_fetched() {
    let ci = Ci::start().await;
    let token = hmac("rsa-1", b"a-shared-secret", &ci.claims("600"));
    assert_refused(&ci.exchange(&token).await, Refusal::CiTokenAlgorithm, "HMAC");
    assert_eq!(ci.issuer.key_fetches.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(ci.credentials().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_under_a_key_its_issuer_does_not_publish_is_refused() {
    let unknown = |_: &Ci, claims: Value| Key::ec("not-published").sign(&claims);
    refused(unknown, Refusal::CiTokenUnknownKey, "does not publish").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_from_an_issuer_no_rule_trusts_is_refused() {
    let other = |ci: &Ci, mut claims: Value| {
        claims["iss"] = "https://token.actions.example.net".into();
        ci.issuer.key("rsa-1").sign(&claims)
    };
    refused(other, Refusal::CiTokenIssuer, "no trust rule trusts tokens from issuer").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_for_another_audience_is_refused() {
    let elsewhere = |ci: &Ci, mut claims: Value| {
        claims["aud"] = "https://elsewhere.example".into();
        ci.issuer.key("rsa-1").sign(&claims)
    };
    refused(elsewhere, Refusal::CiTokenAudience, "https://elsewhere.example").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_token_is_refused() {
    let expired = |ci: &Ci, mut claims: Value| {
        claims["exp"] = (now() - 120).into();
        ci.issuer.key("ec-1").sign(&claims)
    };
    refused(expired, Refusal::CiTokenExpired, "expired").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_not_valid_yet_is_refused() {
    let early = |ci: &Ci, mut claims: Value| {
        claims["nbf"] = (now() + 600).into();
        ci.issuer.key("rsa-1").sign(&claims)
    };
    refused(early, Refusal::CiTokenNotYetValid, "not valid yet").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_issued_longer_ago_than_the_rule_allows_is_refused() {
    let old = |ci: &Ci, mut claims: Value| {
        claims["iat"] = (now() - 900).into();
        claims["nbf"] = (now() - 900).into();
        ci.issuer.key("rsa-1").sign(&claims)
    };
    refused(old, Refusal::CiTokenTooOld, "at most 600 s old").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_whose_claims_meet_no_rule_is_refused() {
    let other_repo = |ci: &Ci, mut claims: Value| {
        claims["repository"] = "acme/other".into();
        claims["sub"] = "repo:acme/other:ref:refs/heads/main".into();
        ci.issuer.key("rsa-1").sign(&claims)
    };
    refused(other_repo, Refusal::CiNoRule, "repo:acme/other").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_exchanged_twice_is_refused_the_second_time_by_its_jti() {
    let ci = Ci::start().await;
    let claims = ci.claims("700");
    ci.exchange(&ci.issuer.key("rsa-1").sign(&claims)).await.ok();
    // The same jti signed again (another signature, same token id).
    let again = ci.exchange(&ci.issuer.key("ec-1").sign(&claims)).await;
    assert_refused(&again, Refusal::CiTokenReplayed, "exchanged already");
    assert_eq!(again.row.login, BOT);
    assert_eq!(ci.credentials().len(), 1, "one credential for one token");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_without_jti_exchanged_twice_is_refused_the_second_time() {
    let ci = Ci::start().await;
    let mut claims = ci.claims("800");
    claims.as_object_mut().unwrap().remove("jti");
    let token = ci.issuer.key("ec-1").sign(&claims);
    ci.exchange(&token).await.ok();
    assert_refused(
        &ci.exchange(&token).await,
        Refusal::CiTokenReplayed,
        "exchanged already",
    );
    assert_eq!(ci.credentials().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_bots_rule_gives_no_credential() {
    let ci = Ci::start().await;
    ci.env.store.disable_principal(&Principal::bot(BOT)).unwrap();
    let answer = ci.exchange(&ci.issuer.key("rsa-1").sign(&ci.claims("900"))).await;
    assert_refused(&answer, Refusal::CiBotDisabled, "disabled");
    assert!(ci.credentials().is_empty());
}
