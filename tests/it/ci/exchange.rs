//! A CI job's token, exchanged: the credential works as the bot's, and the
//! audit row of each of its requests names the bot, the rule, and the
//! job's subject, repository and run; tokens signed RS256 and ES256; a
//! rule's own duration and glob; keys rotated at the issuer; a rule
//! removed takes its credentials with it.

use super::issuer::Key;
use super::{trust, Ci, BOT};
use crate::approvals::audit_rows;
use crate::support::eventually;
use portcullis::audit::refusal::Refusal;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_github_actions_token_gives_a_bot_credential_that_kubectl_lists_pods_with_audited_as_the_job() {
    let ci = Ci::start().await;
    let token = ci.issuer.key("rsa-1").sign(&ci.claims("1001"));
    let answer = ci.exchange(&token).await;
    let body = answer.ok();
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(
        body["issued_token_type"],
        "urn:ietf:params:oauth:token-type:access_token"
    );
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["clusters"], serde_json::json!([ci.env.cluster]));
    let credential = body["access_token"].as_str().unwrap();
    assert!(credential.starts_with("pcl_"), "a portcullis credential");
    let held = ci.credentials();
    assert_eq!(held.len(), 1);
    let lasts = held[0].expires_at.unwrap() - held[0].created_at;
    assert!((3590..=3600).contains(&lasts.num_seconds()), "{lasts}");
    let via = format!(
        "ci rule={} sub=repo:acme/shop:ref:refs/heads/main repository=acme/shop run_id=1001",
        ci.rule.id
    );
    assert_eq!(
        (answer.row.login.as_str(), answer.row.via.as_str()),
        (BOT, via.as_str())
    );
    assert_eq!(
        (answer.row.refused.as_str(), answer.row.resource.as_str()),
        ("", "tokens")
    );

    let pods = ci.env.kubectl(credential, "shop").ok(&["get", "pods", "-o", "name"]);
    assert!(pods.contains("pod/"), "{pods}");
    let rows = audit_rows(&ci.env).await;
    let listed = rows
        .iter()
        .find(|r| r.resource == "pods" && r.verb == "list")
        .expect("kubectl's request is audited");
    assert_eq!(
        (listed.principal_kind.as_str(), listed.login.as_str(), listed.code),
        ("bot", BOT, 200)
    );
    assert_eq!(listed.via, via, "the row names the rule and the job");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_es256_token_meeting_a_glob_rule_gets_that_rules_duration() {
    let ci = Ci::start().await;
    let tags = trust(
        &ci.env,
        &ci.issuer,
        &["repository=acme/*", "ref=refs/tags/v*"],
        Some(Duration::from_secs(1800)),
    );
    let mut claims = ci.claims("2002");
    claims["ref"] = "refs/tags/v1.4.0".into();
    let answer = ci.exchange(&ci.issuer.key("ec-1").sign(&claims)).await;
    let body = answer.ok();
    assert_eq!(body["expires_in"], 1800);
    assert!(
        answer.row.via.starts_with(&format!("ci rule={} ", tags.id)),
        "{}",
        answer.row.via
    );
    let pods = ci.env.kubectl(body["access_token"].as_str().unwrap(), "shop");
    assert!(pods.ok(&["get", "pods", "-o", "name"]).contains("pod/"));
}

/// A token only has to parse to make portcullis read its issuer's keys:
/// while the issuer is down, tokens arriving together wait for one fetch,
/// and a failed fetch is not made again at once; once it is back, jobs
/// get through again.
#[tokio::test(flavor = "multi_thread")]
async fn an_issuer_that_is_down_is_asked_once_for_tokens_arriving_together_and_again_once_it_is_back() {
    // Enough token requests from this address for the polling below.
    let ci = Ci::start_with(|config| config.oauth.requests_per_minute = 10_000).await;
    ci.issuer.failing.store(true, Ordering::SeqCst);
    let key = ci.issuer.key("rsa-1");
    let tokens: Vec<String> = (0..4).map(|i| key.sign(&ci.claims(&format!("down-{i}")))).collect();
    let answers = futures_util::future::join_all(tokens.iter().map(|t| ci.exchange(t))).await;
    for answer in &answers {
        assert_eq!(answer.status, 503, "{}", answer.body);
        assert_eq!(answer.body["error"], "temporarily_unavailable");
        assert_eq!(answer.row.refused, Refusal::CiIssuerUnavailable.as_str());
    }
    let again = ci.exchange(&key.sign(&ci.claims("down-4"))).await;
    assert_eq!(again.status, 503, "{}", again.body);
    assert_eq!(
        ci.issuer.key_fetches.load(Ordering::SeqCst),
        1,
        "one fetch for the tokens together, none again at once"
    );
    ci.issuer.failing.store(false, Ordering::SeqCst);
    let mut run = 0;
    eventually("a job to get through once the issuer is back", async || {
        run += 1;
        let answer = ci.exchange(&key.sign(&ci.claims(&format!("back-{run}")))).await;
        (answer.status == 200).then_some(()).ok_or(answer.body.to_string())
    })
    .await;
    assert!(ci.issuer.key_fetches.load(Ordering::SeqCst) >= 2);
    assert!(
        ci.issuer.key_fetches.load(Ordering::SeqCst) <= 4,
        "asked again only every 10 s while down: {}",
        ci.issuer.key_fetches.load(Ordering::SeqCst)
    );
    assert_eq!(ci.credentials().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_rotated_at_the_issuer_is_picked_up_and_unknown_key_ids_refetch_at_most_once_a_minute() {
    let ci = Ci::start().await;
    let first = ci.exchange(&ci.issuer.key("rsa-1").sign(&ci.claims("1"))).await;
    first.ok();
    assert_eq!(ci.issuer.key_fetches.load(Ordering::SeqCst), 1);

    let rotated = Key::rsa("rsa-2", 1);
    ci.issuer.publish(vec![rotated.clone()]);
    let second = ci.exchange(&rotated.sign(&ci.claims("2"))).await;
    second.ok();
    assert_eq!(ci.issuer.key_fetches.load(Ordering::SeqCst), 2);

    let made_up = ci.exchange(&rotated.sign_as("made-up", &ci.claims("3"))).await;
    assert_eq!(made_up.row.refused, Refusal::CiTokenUnknownKey.as_str());
    assert_eq!(
        ci.issuer.key_fetches.load(Ordering::SeqCst),
        2,
        "no refetch within a minute of the last"
    );
    let old = ci.exchange(&Key::rsa("rsa-1", 0).sign(&ci.claims("4"))).await;
    assert_eq!(
        old.row.refused,
        Refusal::CiTokenUnknownKey.as_str(),
        "the old key is gone"
    );
    assert_eq!(ci.credentials().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_a_rule_revokes_the_credentials_it_gave_and_refuses_its_tokens() {
    let ci = Ci::start().await;
    let answer = ci.exchange(&ci.issuer.key("rsa-1").sign(&ci.claims("4004"))).await;
    let credential = answer.ok()["access_token"].as_str().unwrap().to_string();
    let raw = ci.env.raw();
    let pods = format!("/clusters/{}/api/v1/namespaces/shop/pods", ci.env.cluster);
    assert_eq!(raw.get(&pods, &credential).await.status, 200);

    let actor = portcullis::signin::groups::Actor::Operator;
    let (_, revoked) = portcullis::ci::rules::remove_rule(&ci.env.store, &ci.rule.id, &actor).unwrap();
    assert_eq!(revoked, 1);
    eventually("the credential is refused", async || {
        raw.get(&pods, &credential).await.status == 401
    })
    .await;
    let later = ci.exchange(&ci.issuer.key("rsa-1").sign(&ci.claims("4005"))).await;
    assert_eq!(later.row.refused, Refusal::CiTokenIssuer.as_str());
}
