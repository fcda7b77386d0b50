//! Groups from the identity provider (issue 18, item 7): a rule gives the
//! people signed in with a group a grant that works through portcullis,
//! ends with the sign-in session, and is gone at the next sign-in once the
//! person has left the group.

use super::{free_port, portcullis, Idp, Visitor};
use crate::approvals::{audit_rows, person_ok};
use crate::audit::rows;
use crate::harness::{Portcullis, CLUSTER};
use crate::rbac::{cli_ok, id_after};
use crate::support::eventually;
use portcullis::audit::query::Filter;
use portcullis::identity::{Grant, Principal};
use std::time::Duration;

const PODS: &str = "/clusters/sim/api/v1/namespaces/shop/pods";

const ADD_DEVS_AS_VIEWERS_OF_SHOP: [&str; 10] = [
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
];

/// root, an admin, with a credential of their own; the token.
fn root_admin(env: &Portcullis) -> String {
    let token = env.person("root", &[]);
    env.store.set_admin(&Principal::person("root"), true).unwrap();
    token
}

/// The admin root adds the rule `devs` → viewer in `shop`, signed in as
/// themselves; the rule's id and root's token.
fn devs_may_view_shop(env: &Portcullis) -> (String, String) {
    let root = root_admin(env);
    let out = person_ok(env, &root, &ADD_DEVS_AS_VIEWERS_OF_SHOP);
    (id_after(&out, "group rule "), root)
}

/// `login`'s grants in effect on the cluster.
fn grants_in_effect(env: &Portcullis, login: &str) -> Vec<Grant> {
    let now = env.gateway.grant_clock().now();
    let all = env.store.grants_of(&Principal::person(login), CLUSTER).unwrap();
    all.into_iter().filter(|g| g.in_effect(now)).collect()
}

/// A kubeconfig-style credential of `login`'s own, not the session's.
fn laptop_token(env: &Portcullis, login: &str) -> String {
    let person = Principal::person(login);
    env.store.issue_credential(&person, "laptop", None).unwrap().1
}

/// Wait until listing shop's pods with `token` answers `code`.
async fn pods_answer(env: &Portcullis, token: &str, code: u16) {
    eventually(&format!("listing pods to answer {code}"), async || {
        let status = env.raw().get(PODS, token).await.status.as_u16();
        if status == code {
            Ok(())
        } else {
            Err(status)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signed_in_with_a_ruled_group_holds_its_grant_until_they_sign_in_without_the_group() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let (rule, root) = devs_may_view_shop(&env);
    let listed = person_ok(&env, &root, &["group-rule", "list"]);
    assert!(listed.contains(&rule) && listed.contains("devs"), "{listed}");

    assert_eq!(Visitor::new(&env).sign_in("ana").await.status, 200);
    let held = grants_in_effect(&env, "ana");
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (
            held[0].granted_by.as_str(),
            held[0].role.as_str(),
            held[0].namespace.as_deref()
        ),
        (format!("rule:{rule}").as_str(), "viewer", Some("shop"))
    );
    // Bound before the sign-in answered (the test's resync is an hour
    // away): the first request finds it.
    let token = laptop_token(&env, "ana");
    assert_eq!(env.raw().get(PODS, &token).await.status, 200);

    // Signing in again keeps the one grant (an agent given it keeps it).
    assert_eq!(Visitor::new(&env).sign_in("ana").await.status, 200);
    assert_eq!(grants_in_effect(&env, "ana")[0].id, held[0].id);

    idp.set_groups("ana", &[]).await;
    assert_eq!(Visitor::new(&env).sign_in("ana").await.status, 200);
    assert!(grants_in_effect(&env, "ana").is_empty());
    pods_answer(&env, &token, 403).await;

    let audited: Vec<String> = rows(
        &env,
        Filter {
            resource: Some("grants".into()),
            ..Filter::default()
        },
    )
    .into_iter()
    .map(|r| format!("{} {} {}", r.row.verb, r.row.login, r.row.name))
    .collect();
    let id = &held[0].id;
    assert_eq!(
        audited,
        [
            format!("grant ana {id}"),
            format!("extend ana {id}"),
            format!("revoke ana {id}")
        ]
    );
    let rule_rows = rows(
        &env,
        Filter {
            resource: Some("grouprules".into()),
            ..Filter::default()
        },
    );
    assert_eq!(
        (rule_rows[0].row.verb.as_str(), rule_rows[0].row.login.as_str()),
        ("create", "root")
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_grant_ends_with_the_sign_in_session_and_with_its_rule() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let (rule, root) = devs_may_view_shop(&env);
    assert_eq!(Visitor::new(&env).sign_in("carol").await.status, 200);
    let grant = grants_in_effect(&env, "carol").pop().expect("carol is in devs");
    let carol = Principal::person("carol");
    let session_credential = env.store.list_credentials(Some(&carol)).unwrap().pop().unwrap();
    let session_ends = session_credential.expires_at.unwrap();
    assert!(
        (session_ends - grant.expires_at).num_seconds().abs() <= 5,
        "the grant ends with the session: {} vs {session_ends}",
        grant.expires_at
    );
    env.reconcile().await;
    let token = laptop_token(&env, "carol");
    pods_answer(&env, &token, 200).await;

    env.gateway
        .grant_clock()
        .advance(env.config.sessions.lifetime + Duration::from_secs(60));
    pods_answer(&env, &token, 403).await;

    let out = person_ok(&env, &root, &["group-rule", "remove", &rule]);
    assert!(out.contains("1 grant(s) revoked"), "{out}");
    assert!(env
        .store
        .grants_of(&carol, CLUSTER)
        .unwrap()
        .iter()
        .all(|g| g.revoked_at.is_some()));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_manages_group_rules_through_the_api_and_others_get_a_json_refusal_on_record() {
    let env = Portcullis::start().await;
    let ana = env.person("ana", &[("admin", Some("shop"))]);
    let refused = env.person_cli(&ana, &ADD_DEVS_AS_VIEWERS_OF_SHOP);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("person:ana is not an admin"), "{said}");
    let raw = env.raw().get("/api/portcullis/v1/group-rules", &ana).await;
    assert_eq!(raw.status, 403);
    assert_eq!(raw.json()["code"], 403);
    assert!(env.store.group_rules().unwrap().is_empty());

    let root = root_admin(&env);
    let listed = env.raw().get("/api/portcullis/v1/group-rules", &root).await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.json()["rules"], serde_json::json!([]));
    let rule = id_after(&person_ok(&env, &root, &ADD_DEVS_AS_VIEWERS_OF_SHOP), "group rule ");
    assert_eq!(env.store.group_rules().unwrap()[0].created_by, "root");
    let unknown = env.person_cli(&root, &["group-rule", "remove", "no-such-rule"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no group rule no-such-rule"));

    let rows = audit_rows(&env).await;
    let api: Vec<_> = rows
        .iter()
        .filter(|r| r.path.starts_with("/api/portcullis/v1/group-rules"))
        .collect();
    assert_eq!(
        api.iter()
            .filter(|r| r.login == "ana" && r.code == 403 && r.refused == "not_admin")
            .count(),
        2,
        "{api:?}"
    );
    let changes = rows.iter().filter(|r| r.resource == "grouprules");
    let changes: Vec<_> = changes
        .map(|r| (r.verb.as_str(), r.login.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(changes, [("create", "root", rule.as_str())]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_bootstraps_group_rules_on_the_store_recorded_as_the_cli() {
    let env = Portcullis::start().await;
    let mut args = vec!["admin"];
    args.extend(ADD_DEVS_AS_VIEWERS_OF_SHOP);
    let rule = id_after(&cli_ok(&env, &args), "group rule ");
    assert!(cli_ok(&env, &["admin", "group-rule", "list"]).contains(&rule));
    assert_eq!(env.store.group_rules().unwrap()[0].created_by, "cli");
    let out = cli_ok(&env, &["admin", "group-rule", "remove", &rule]);
    assert!(out.contains("0 grant(s) revoked"), "{out}");
    let recorded: Vec<_> = rows(
        &env,
        Filter {
            resource: Some("grouprules".into()),
            ..Filter::default()
        },
    )
    .into_iter()
    .map(|r| (r.row.verb, r.row.principal_kind, r.row.login))
    .collect();
    let by_cli = |verb: &str| (verb.to_string(), "operator".to_string(), "cli".to_string());
    assert_eq!(recorded, [by_cli("create"), by_cli("delete")]);
    env.stop().await;
}

/// `visitor` (signed in) logs the command line in the way `portcullis
/// login` does, with a loopback code and its PKCE verifier; the answer.
async fn cli_login(visitor: &Visitor) -> serde_json::Value {
    let verifier = "v".repeat(50);
    let challenge = portcullis::doors::web::cli_login::challenge_of(&verifier);
    let redirect = "http://127.0.0.1:1/cb";
    let query = format!("redirect_uri={redirect}&code_challenge={challenge}&code_challenge_method=S256&state=s1");
    let page = visitor.get(&format!("/login/cli?{query}")).await;
    let csrf = page.body.split("name=\"csrf\" value=\"").nth(1).unwrap();
    let csrf = csrf.split('"').next().unwrap();
    let allowed = visitor.post("/login/cli", &format!("csrf={csrf}&{query}")).await;
    let code = allowed.body.split("code=").nth(1).unwrap().split('&').next().unwrap();
    let token = visitor
        .post(
            "/oauth/token",
            &format!("grant_type=authorization_code&client_id=portcullis-cli&code={code}&code_verifier={verifier}&redirect_uri={redirect}"),
        )
        .await;
    assert_eq!(token.status, 200, "{}", token.body);
    serde_json::from_str(&token.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_line_login_applies_the_group_rules_as_they_are_now_and_signing_out_ends_their_grants() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let visitor = Visitor::new(&env);
    assert_eq!(visitor.sign_in("ana").await.status, 200);
    assert!(grants_in_effect(&env, "ana").is_empty(), "no rule yet");

    let (rule, _root) = devs_may_view_shop(&env);
    let answer = cli_login(&visitor).await;
    let held = grants_in_effect(&env, "ana");
    assert_eq!(held.len(), 1, "the rule added since the web sign-in: {held:?}");
    assert_eq!(held[0].granted_by, format!("rule:{rule}"));
    // Bound before the command line got its token.
    let pods = env.raw().get(PODS, answer["token"].as_str().unwrap()).await;
    assert_eq!(pods.status, 200);

    let console = visitor.get("/console").await;
    let csrf = console.body.split("name=\"csrf\" value=\"").nth(1).unwrap();
    let csrf = csrf.split('"').next().unwrap().to_string();
    let out = visitor.post("/logout", &format!("csrf={csrf}")).await;
    assert_eq!(out.status, 303, "{}", out.body);
    assert!(
        grants_in_effect(&env, "ana").is_empty(),
        "the grant depended on the one session, which ended"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blank_namespace_or_admin_for_the_whole_cluster_is_refused_not_made_a_cluster_wide_rule() {
    let env = Portcullis::start().await;
    let root = root_admin(&env);
    let add = |role: &'static str, namespace: Option<&'static str>| {
        let mut args = vec![
            "group-rule",
            "add",
            "--group",
            "devs",
            "--cluster",
            CLUSTER,
            "--role",
            role,
        ];
        args.extend(namespace.map(|ns| ["--namespace", ns]).into_iter().flatten());
        let out = env.person_cli(&root, &args);
        assert!(!out.status.success(), "{role} {namespace:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // `$NS` unset in a script: the rule must not become the whole cluster's.
    let said = add("viewer", Some(""));
    assert!(said.contains("`namespace` is blank or not a text"), "{said}");
    let said = add("admin", None);
    assert!(said.contains("role admin is granted in a namespace only"), "{said}");
    assert!(env.store.group_rules().unwrap().is_empty());
    let auth = format!("Bearer {root}");
    let body = serde_json::json!({"group": "devs", "cluster": CLUSTER, "role": "viewer", "namespace": 5});
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let raw = env
        .raw()
        .send(
            http::Method::POST,
            "/api/portcullis/v1/group-rules",
            &headers,
            body.to_string().into_bytes(),
        )
        .await;
    assert_eq!(raw.status, 400, "{:?}", raw.json());
    assert!(env.store.group_rules().unwrap().is_empty());
    env.stop().await;
}
