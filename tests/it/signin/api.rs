//! The person API (`/api/portcullis/v1/…`) and the person commands on it:
//! only a person's own credential gets in, every call is an audit row,
//! the server decides as on the web pages, and no command names its
//! decider (`--by` is gone).

use crate::approvals::{audit_rows, careful_bot_in, held_id, manifest, person_ok, FLAGS};
use crate::approvals_secrets::session;
use crate::harness::Portcullis;
use http::Method;

const WHOAMI: &str = "/api/portcullis/v1/whoami";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_person_api_lets_only_a_person_in_and_answers_every_refusal_in_json_with_an_audit_row() {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot_in(&env, "shop", "developer");
    let grants = env
        .store
        .grants_of(&portcullis::identity::Principal::person("ana"), "sim")
        .unwrap();
    let agent = env.agent("ana", &[&grants[0]]);
    let raw = env.raw();
    let me = raw.get(WHOAMI, &ana).await;
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["login"], "ana");
    assert_eq!(me.json()["grants"][0]["role"], "admin");
    for (token, what) in [(&agent, "an agent's"), (&bot, "a bot's")] {
        let refused = raw.get(WHOAMI, token).await;
        assert_eq!(refused.status, 403, "{what}");
        assert_eq!(refused.headers["content-type"], "application/json");
        let error = refused.json()["error"].as_str().unwrap().to_string();
        assert_eq!(
            error,
            format!("the portcullis API is for people: this is {what} credential")
        );
    }
    let anonymous = raw.send(Method::GET, WHOAMI, &[], Vec::new()).await;
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.json()["error"].as_str().unwrap().contains("portcullis login"));
    assert_eq!(raw.get("/api/portcullis/v1/nothing", &ana).await.status, 404);

    let rows = audit_rows(&env).await;
    let api: Vec<_> = rows.iter().filter(|r| r.path == WHOAMI).collect();
    assert_eq!(api.len(), 4, "every call is a row: {api:?}");
    assert_eq!(api.iter().filter(|r| r.refused == "not_person").count(), 2);
    assert!(api.iter().any(|r| r.refused == "missing" && r.code == 401));
    assert!(api.iter().any(|r| r.login == "ana" && r.code == 200));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_deciding_a_held_write_they_may_not_decide_gets_the_refusal_the_web_page_gives() {
    let env = Portcullis::start().await;
    let (bot, _ana) = careful_bot_in(&env, "shop", "developer");
    let bob = env.person("bob", &[("developer", Some("shop"))]);
    let file = manifest(&env, FLAGS);
    let id = held_id(
        &env.kubectl(&bot, "shop")
            .fails(&["apply", "--server-side", "-f", file.as_str()]),
    );

    let cli = env.person_cli(&bob, &["approvals", "approve", &id]);
    assert!(!cli.status.success());
    let said = String::from_utf8_lossy(&cli.stderr).trim().to_string();
    let why = "person:bob is not admin of namespace shop on cluster sim";
    assert_eq!(said, format!("portcullis: not allowed: {why}"));

    let cookie = session(&env, &bob).await;
    let list = env
        .raw()
        .send(Method::GET, "/approvals", &[("cookie", &cookie)], Vec::new())
        .await;
    let page = String::from_utf8_lossy(&list.body).into_owned();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let form = format!("csrf={csrf}&decision=approve&confirm=yes");
    let headers = [
        ("cookie", cookie.as_str()),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let web = env
        .raw()
        .send(Method::POST, &format!("/approvals/{id}"), &headers, form.into_bytes())
        .await;
    assert_eq!(web.status, 403);
    assert!(
        String::from_utf8_lossy(&web.body).contains(why),
        "the same words on the page"
    );
    assert_eq!(
        env.store.held(&id).unwrap().unwrap().state,
        portcullis::approvals::HeldState::Pending
    );
    env.stop().await;
}

#[test]
fn no_person_command_takes_a_decider_by_name() {
    for args in [
        &["approvals", "approve", "x", "--by", "ana"][..],
        &["approvals", "deny", "x", "--by", "ana"],
        &["access", "approve", "x", "--by", "ana"],
        &["access", "deny", "x", "--by", "ana"],
        &[
            "group-rule",
            "add",
            "--group",
            "g",
            "--cluster",
            "c",
            "--role",
            "r",
            "--by",
            "ana",
        ],
        &["group-rule", "remove", "x", "--by", "ana"],
        &[
            "admin",
            "grant",
            "add",
            "--person",
            "bo",
            "--cluster",
            "c",
            "--role",
            "r",
            "--by",
            "ana",
        ],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("unexpected argument '--by'"), "{args:?}: {said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_who_they_are_and_lists_and_revokes_only_their_own_credentials() {
    let env = Portcullis::start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let (other, _) = env
        .store
        .issue_credential(&portcullis::identity::Principal::person("ana"), "laptop", None)
        .unwrap();
    let bob = env.person("bob", &[]);
    let me = person_ok(&env, &ana, &["whoami"]);
    assert!(me.starts_with("ana, user:ana on clusters"), "{me}");
    assert!(me.contains("viewer on sim in namespace shop"), "{me}");
    let listed = person_ok(&env, &ana, &["credential", "list"]);
    assert!(listed.contains("laptop") && !listed.contains(&ana), "{listed}");
    assert_eq!(
        person_ok(&env, &bob, &["credential", "list"]).lines().count(),
        2,
        "bob sees only his one"
    );

    let not_his = env.person_cli(&bob, &["credential", "revoke", &other.id]);
    assert!(String::from_utf8_lossy(&not_his.stderr).contains(&format!("you have no credential {}", other.id)));
    assert!(person_ok(&env, &ana, &["credential", "revoke", &other.id]).contains("revoked"));
    assert!(env
        .store
        .list_credentials(None)
        .unwrap()
        .iter()
        .any(|c| c.id == other.id && c.revoked_at.is_some()));

    let own = env.raw().get(WHOAMI, &bob).await.json()["credential"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    person_ok(&env, &bob, &["credential", "revoke", &own]);
    // Revoked by the server that answers: refused at once, not after its cache.
    assert_eq!(env.raw().get(WHOAMI, &bob).await.status, 401);
    env.stop().await;
}
