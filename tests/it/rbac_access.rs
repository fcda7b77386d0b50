//! Access requests through the CLI, each person as themselves through the
//! server's API: asked, approved (the grant is bound and
//! works), denied, expired; the requester never decides its own.

use crate::approvals::person_ok;
use crate::harness::{Portcullis, CLUSTER};
use crate::rbac::{bound, cli_ok, id_after};
use crate::support::eventually;
use std::time::Duration;

/// bo (no grants) asks, from his terminal, to be developer in shop; ana
/// is admin of shop. Returns the request's id, bo's token and ana's.
fn ask(env: &Portcullis) -> (String, String, String) {
    let ana = env.person("ana", &[("admin", Some("shop"))]);
    let bo = env.person("bo", &[]);
    let out = person_ok(
        env,
        &bo,
        &[
            "access",
            "request",
            "--cluster",
            CLUSTER,
            "--role",
            "developer",
            "--namespace",
            "shop",
            "--duration",
            "2h",
            "--reason",
            "ship the hotfix",
        ],
    );
    (id_after(&out, "access request "), bo, ana)
}

fn state_of(env: &Portcullis, id: &str) -> String {
    let list = cli_ok(env, &["admin", "access", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{id} in {list}"));
    line.split_whitespace().nth(2).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_request_is_bound_and_works_and_every_step_is_audited() {
    let env = Portcullis::start().await;
    let (id, token, ana) = ask(&env);
    assert_eq!(state_of(&env, &id), "pending");
    let kubectl = env.kubectl(&token, "shop");
    assert_eq!(
        String::from_utf8_lossy(&kubectl.run(&["auth", "can-i", "create", "deployments.apps"]).stdout).trim(),
        "no"
    );

    let own = env.person_cli(&token, &["access", "approve", &id]);
    assert!(!own.status.success());
    assert!(
        String::from_utf8_lossy(&own.stderr).contains("cannot decide"),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    let out = person_ok(&env, &ana, &["access", "approve", &id]);
    assert!(out.contains("approved") && out.contains("cluster sim in step"), "{out}");
    let grant = id_after(&out, "grant ");
    assert!(bound(&env, "shop", &grant).await);
    assert_eq!(state_of(&env, &id), "approved");
    // Running servers read grants made by another process within seconds.
    let can_create = || async {
        String::from_utf8_lossy(&kubectl.run(&["auth", "can-i", "create", "deployments.apps"]).stdout).trim() == "yes"
    };
    eventually("bo may create deployments", can_create).await;

    let audit = cli_ok(&env, &["admin", "audit", "--resource", "accessrequests"]);
    let steps: Vec<(&str, &str)> = audit
        .lines()
        .filter(|l| l.contains(&id))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2], f[4])
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("person:bo", "request"),
            ("person:bo", "approve"),
            ("person:ana", "approve")
        ],
        "{audit}"
    );
    assert!(audit.contains("refused: not_approver"), "{audit}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_request_grants_nothing() {
    let env = Portcullis::start().await;
    let (id, token, ana) = ask(&env);
    let out = person_ok(&env, &ana, &["access", "deny", &id, "--reason", "use the pipeline"]);
    assert!(out.contains("denied"), "{out}");
    assert_eq!(state_of(&env, &id), "denied");
    let again = env.person_cli(&ana, &["access", "approve", &id]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("is denied, not pending"));
    assert!(env
        .store
        .grants_of(&portcullis::identity::Principal::person("bo"), CLUSTER)
        .unwrap()
        .is_empty());
    let kubectl = env.kubectl(&token, "shop");
    assert_eq!(
        String::from_utf8_lossy(&kubectl.run(&["auth", "can-i", "create", "deployments.apps"]).stdout).trim(),
        "no"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecided_request_expires_and_can_no_longer_be_approved() {
    let env = Portcullis::start_with(|c| c.access.request_ttl = Duration::from_secs(1)).await;
    let (id, _, ana) = ask(&env);
    eventually("the request to expire", async || state_of(&env, &id) == "expired").await;
    let late = env.person_cli(&ana, &["access", "approve", &id]);
    assert!(String::from_utf8_lossy(&late.stderr).contains("is expired, not pending"));
    let audit = cli_ok(
        &env,
        &["admin", "audit", "--resource", "accessrequests", "--verb", "expire"],
    );
    assert!(audit.contains(&id), "{audit}");
    env.stop().await;
}

/// Approve request `id` on the console, signed in with `token`; the
/// answer's status.
async fn approve_on_console(env: &Portcullis, token: &str, id: &str) -> u16 {
    let cookie = crate::approvals_secrets::session(env, token).await;
    let raw = env.raw();
    let page = raw
        .send(http::Method::GET, "/console", &[("cookie", &cookie)], Vec::new())
        .await;
    let html = String::from_utf8_lossy(&page.body).into_owned();
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the console has a form");
    let form = format!("csrf={csrf}&decision=approve&reason=on+call");
    let headers = [
        ("cookie", cookie.as_str()),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let path = format!("/console/access/{id}");
    raw.send(http::Method::POST, &path, &headers, form.into_bytes())
        .await
        .status
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_approved_on_the_console_is_bound_before_the_answer_and_works_at_once() {
    let env = Portcullis::start().await;
    let (id, token, ana) = ask(&env);
    assert_eq!(approve_on_console(&env, &ana, &id).await, 303);
    assert_eq!(state_of(&env, &id), "approved");
    let bo = portcullis::identity::Principal::person("bo");
    let grant = env.store.grants_of(&bo, CLUSTER).unwrap().pop().expect("bo's grant");
    assert!(
        bound(&env, "shop", &grant.id).await,
        "bound when the approval answers, not at the next resync"
    );
    let kubectl = env.kubectl(&token, "shop");
    let can_create = || async {
        String::from_utf8_lossy(&kubectl.run(&["auth", "can-i", "create", "deployments.apps"]).stdout).trim() == "yes"
    };
    // The first look, not a poll: bound before the answer, and no grants
    // of bo's cached from before it.
    assert!(can_create().await, "bo may create deployments at once");
    env.stop().await;
}
