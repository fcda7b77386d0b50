//! Several replicas of one installation sharing one store (issue 22,
//! items 1 and 5): `portcullis login`'s codes given by one replica are
//! exchanged at another, and a replica whose approvals key is not the
//! store's refuses to start.

use crate::harness::Portcullis;
use crate::signin::{csrf_of, free_port, portcullis, Idp, Visitor};
use serde_json::Value;

/// A second replica of `first`: the same store, approvals key and sign-in
/// settings.
async fn replica_of(first: &Portcullis) -> Portcullis {
    Portcullis::start_beside(first, |c| {
        c.data_dir = first.config.data_dir.clone();
        c.approvals.key_file = first.config.approvals.key_file.clone();
        c.oidc = first.config.oidc.clone();
    })
    .await
}

/// `visitor` (signed in) allows a loopback login as `portcullis login`
/// asks for it; the token request exchanging its code.
async fn loopback_code_exchange(visitor: &Visitor) -> String {
    let verifier = "v".repeat(50);
    let challenge = portcullis::doors::web::cli_login::challenge_of(&verifier);
    let redirect = "http://127.0.0.1:1/cb";
    let query = format!("redirect_uri={redirect}&code_challenge={challenge}&code_challenge_method=S256&state=s1");
    let page = visitor.get(&format!("/login/cli?{query}")).await;
    let csrf = csrf_of(&page.body);
    let allowed = visitor.post("/login/cli", &format!("csrf={csrf}&{query}")).await;
    let code = allowed.body.split("code=").nth(1).unwrap().split('&').next().unwrap();
    format!(
        "grant_type=authorization_code&client_id=portcullis-cli&code={code}&code_verifier={verifier}&redirect_uri={redirect}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_code_given_by_one_replica_is_exchanged_once_at_another() {
    let port = free_port();
    let idp = Idp::start(port);
    let a = portcullis(&idp.issuer, port, |_| {}).await;
    let b = replica_of(&a).await;
    let at_a = Visitor::new(&a);
    assert_eq!(at_a.sign_in("ana").await.status, 200);
    let exchange = loopback_code_exchange(&at_a).await;

    let token = Visitor::new(&b).post("/oauth/token", &exchange).await;
    assert_eq!(token.status, 200, "{}", token.body);
    let answer: Value = serde_json::from_str(&token.body).unwrap();
    assert_eq!(answer["login"], "ana");
    let again = at_a.post("/oauth/token", &exchange).await;
    assert_eq!(again.status, 400, "used once, on any replica: {}", again.body);
    assert!(again.body.contains("invalid_grant"), "{}", again.body);
    b.stop().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_code_allowed_on_one_replica_is_polled_to_a_credential_at_another() {
    let port = free_port();
    let idp = Idp::start(port);
    let a = portcullis(&idp.issuer, port, |_| {}).await;
    let b = replica_of(&a).await;
    let at_a = Visitor::new(&a);
    assert_eq!(at_a.sign_in("ana").await.status, 200);
    let asked = at_a.post("/login/device/code", "client_id=portcullis-cli").await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let codes: Value = serde_json::from_str(&asked.body).unwrap();
    let (device, user) = (
        codes["device_code"].as_str().unwrap(),
        codes["user_code"].as_str().unwrap(),
    );

    let page = at_a.get("/login/device").await;
    let check = format!("csrf={}&user_code={user}", csrf_of(&page.body));
    let shown = at_a.post("/login/device/check", &check).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(
        shown.body.contains("less than a minute ago (<time datetime=\""),
        "{}",
        shown.body
    );
    assert!(
        shown.body.contains("UTC</time>) from <strong>127.0.0.1</strong>"),
        "{}",
        shown.body
    );
    let decision = format!("csrf={}&user_code={user}&decision=allow", csrf_of(&page.body));
    let allowed = at_a.post("/login/device", &decision).await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let poll = format!(
        "grant_type=urn:ietf:params:oauth:grant-type:device_code&client_id=portcullis-cli&device_code={device}"
    );
    let token = Visitor::new(&b).post("/oauth/token", &poll).await;
    assert_eq!(token.status, 200, "{}", token.body);
    let answer: Value = serde_json::from_str(&token.body).unwrap();
    assert_eq!(answer["login"], "ana");
    let again = at_a.post("/oauth/token", &poll).await;
    assert!(again.body.contains("expired_token"), "used once: {}", again.body);
    b.stop().await;
    a.stop().await;
}

/// `portcullis serve` with `config` (written to `path`), as a replica's
/// operator starts it; what it says on stderr, once it has stopped.
fn serve(config: &portcullis::config::Config, path: &std::path::Path) -> String {
    std::fs::write(path, toml::to_string(config).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--config")
        .arg(path)
        .arg("serve")
        .env_remove("PORTCULLIS_CONFIG")
        .output()
        .expect("portcullis runs");
    assert!(!out.status.success(), "it stopped, refusing");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_with_another_approvals_key_than_the_stores_refuses_to_start_and_says_so() {
    let a = Portcullis::start().await;
    let other_key = a.dir.path().join("other-approvals.key");
    std::fs::write(&other_key, portcullis::config::approvals::generate_key()).unwrap();
    let mut config = a.config.clone();
    config.approvals.key_file = Some(other_key.clone());
    // A's own address: were the key let through, this start would stop at
    // the listener instead of serving on.
    config.listen = a.addr.to_string();
    let path = a.dir.path().join("replica.toml");
    let said = serve(&config, &path);
    let expected = format!(
        "portcullis: [approvals] key_file {} is not the approvals key this store was first started with",
        other_key.display()
    );
    assert!(said.lines().any(|l| l.starts_with(&expected)), "{said}");

    config.approvals.key_file = a.config.approvals.key_file.clone();
    let said = serve(&config, &path);
    assert!(said.contains("cannot listen on"), "the store's own key passes: {said}");
    a.stop().await;
}
