//! Held writes with kubectl: a bot whose writes need approval is answered
//! at once with where to approve; a person decides (here with the CLI, as
//! themselves, through the server's API);
//! running the same command again runs the write exactly once.

use crate::harness::{Kubectl, Portcullis};
use crate::support::eventually;
use portcullis::approvals::HeldState;
use portcullis::identity::Principal;
use std::time::Duration;

/// A bot `deployer` with `role` in shop whose writes need approval, and
/// ana, admin of shop, who decides them. Returns the bot's kubectl and
/// ana's token.
pub fn careful_bot(env: &Portcullis, role: &str) -> (Kubectl, String) {
    let (bot, ana) = careful_bot_in(env, "shop", role);
    (env.kubectl(&bot, "shop"), ana)
}

/// [`careful_bot`] in namespace `ns` of `env`'s cluster (the simulated or
/// the real one); returns the bot's token and ana's.
pub fn careful_bot_in(env: &Portcullis, ns: &str, role: &str) -> (String, String) {
    let token = careful_bot_granted(env, Some(ns), role);
    let ana = env.person("ana", &[("admin", Some(ns))]);
    (token, ana)
}

/// The bot `deployer`, whose writes need approval, with `role` in
/// `namespace` (`None`: the whole cluster); its token.
fn careful_bot_granted(env: &Portcullis, namespace: Option<&str>, role: &str) -> String {
    let bot = Principal::bot("deployer");
    env.store.add_principal(&bot, true).unwrap();
    let grant = portcullis::cli::new_grant(
        &env.config,
        bot.clone(),
        env.cluster,
        role,
        namespace.map(String::from),
        Duration::from_secs(3600),
        "test",
    )
    .unwrap();
    env.store.add_grant(&grant).unwrap();
    env.store.issue_credential(&bot, "ci", None).unwrap().1
}

/// Every audit row, once the writer committed what it holds.
pub async fn audit_rows(env: &Portcullis) -> Vec<portcullis::audit::row::AuditRow> {
    env.gateway.audit().writer().flush().await;
    let filter = portcullis::audit::query::Filter {
        discovery: true,
        ..Default::default()
    };
    crate::audit::rows(env, filter).into_iter().map(|c| c.row).collect()
}

/// A manifest file in the test's directory.
pub fn manifest(env: &Portcullis, yaml: &str) -> String {
    let path = env.dir.path().join(format!("m-{}.yaml", uuid::Uuid::new_v4()));
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

pub const FLAGS: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: shop\ndata:\n  checkout: \"on\"\n";

/// The held write id in a kubectl message (`…/approvals/<id> …`).
pub fn held_id(message: &str) -> String {
    let at = message.find("/approvals/").expect("an approval link") + "/approvals/".len();
    message[at..at + 36].to_string()
}

/// Writes by `login` that reached the cluster for real (not dry runs).
pub fn real_writes(env: &Portcullis, user: &str, verb: &str) -> usize {
    env.sim()
        .requests()
        .into_iter()
        .filter(|r| r.verb == verb && r.impersonated.as_ref().is_some_and(|u| u.name == user))
        .filter(|r| !r.query.as_deref().unwrap_or_default().contains("dryRun=All"))
        .count()
}

/// A person command run as the holder of `token`; its stdout.
pub fn person_ok(env: &Portcullis, token: &str, args: &[&str]) -> String {
    let out = env.person_cli(token, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_apply_runs_once_and_only_once_after_approval() {
    let env = Portcullis::start().await;
    let (bot, ana_token) = careful_bot(&env, "developer");
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let held = bot.fails(&apply);
    assert!(
        held.contains("Error from server (Forbidden): this write waits for a person's approval"),
        "{held}"
    );
    assert!(
        held.contains("run the same command again") && held.contains("expires at 20"),
        "{held}"
    );
    let id = held_id(&held);
    assert_eq!(
        real_writes(&env, "bot:deployer", "patch"),
        0,
        "only the dry run reached the cluster"
    );
    let ana = env.kubectl(&ana_token, "shop");
    assert!(ana.fails(&["get", "configmap", "flags"]).contains("NotFound"));
    let row = env.store.held(&id).unwrap().unwrap();
    assert_eq!(row.state, HeldState::Pending);
    assert!(
        row.request.preview.diff.contains("+   checkout: on"),
        "{}",
        row.request.preview.diff
    );

    assert!(person_ok(&env, &ana_token, &["approvals", "approve", &id]).contains("approved"));
    let ran = bot.ok(&apply);
    assert!(ran.contains("configmap/flags serverside-applied"), "{ran}");
    assert!(ana.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.checkout}"]) == "on");
    assert_eq!(env.store.held(&id).unwrap().unwrap().state, HeldState::Executed);
    assert_eq!(real_writes(&env, "bot:deployer", "patch"), 1);
    // The same command once more is a new write to approve, never a rerun.
    let again = bot.fails(&apply);
    assert_ne!(held_id(&again), id);
    assert_eq!(real_writes(&env, "bot:deployer", "patch"), 1, "ran exactly once");
    let rows = audit_rows(&env).await;
    let flags: Vec<_> = rows
        .iter()
        .map(|r| (r.verb.clone(), r.held, r.approved, r.code))
        .collect();
    assert!(
        rows.iter().any(|r| r.held && r.approved && r.code == 201),
        "the run is audited as approved: {flags:?}"
    );
    assert!(rows
        .iter()
        .any(|r| r.resource == "heldwrites" && r.verb == "approve" && r.login == "ana"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_write_answers_denied_with_the_reason_and_changes_nothing() {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot(&env, "developer");
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    person_ok(
        &env,
        &ana,
        &["approvals", "deny", &id, "--reason", "not during the sale"],
    );
    let denied = bot.fails(&apply);
    assert!(
        denied.contains("this write was denied by ana (not during the sale)"),
        "{denied}"
    );
    assert_eq!(env.store.held_body(&id).unwrap(), None, "a denied write keeps no body");
    assert_eq!(real_writes(&env, "bot:deployer", "patch"), 0);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_held_write_keeps_no_body_and_answers_expired() {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot(&env, "developer");
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    assert!(env.store.held_body(&id).unwrap().is_some());
    let past = chrono::Utc::now() - chrono::TimeDelta::minutes(1);
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    db.execute(
        "UPDATE held_writes SET expires_at = ?1 WHERE id = ?2",
        rusqlite::params![past, id],
    )
    .unwrap();
    let expired = bot.fails(&apply);
    assert!(
        expired.contains("(Expired): this write waited for approval and expired"),
        "{expired}"
    );
    assert_eq!(env.store.held(&id).unwrap().unwrap().state, HeldState::Expired);
    assert_eq!(
        env.store.held_body(&id).unwrap(),
        None,
        "an expired write keeps no body"
    );
    let refused = env.person_cli(&ana, &["approvals", "approve", &id]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is expired, not pending"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_changed_underneath_answers_409_and_the_held_write_ends_with_it() {
    let env = Portcullis::start().await;
    let (bot, ana_token) = careful_bot(&env, "developer");
    let ana = env.kubectl(&ana_token, "shop");
    ana.ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "--force-conflicts", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    assert!(env
        .store
        .held(&id)
        .unwrap()
        .unwrap()
        .request
        .precondition
        .resource_version
        .is_some());
    ana.ok(&["label", "configmap", "flags", "changed=meanwhile"]);
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    let conflict = bot.fails(&apply);
    assert!(conflict.contains("the object has been modified"), "{conflict}");
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(held.state, HeldState::Executed);
    assert_eq!(held.outcome.unwrap().code, 409);
    assert_eq!(
        ana.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.checkout}"]),
        "off"
    );
    env.stop().await;
}

/// A role that may patch ConfigMaps and not read them.
pub fn patcher() -> portcullis::identity::roles::Role {
    portcullis::identity::roles::Role {
        name: "patcher".into(),
        rules: vec![serde_json::json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]})],
        reveals_secrets: false,
        namespaced: false,
        max_duration: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_patch_of_an_object_the_asker_cannot_read_runs_only_on_the_version_its_dry_run_changed() {
    let env = Portcullis::start_with(|config| config.roles.push(patcher())).await;
    let (bot_token, ana_token) = careful_bot_in(&env, "shop", "patcher");
    let ana = env.kubectl(&ana_token, "shop");
    ana.ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    let forbidden = env.kubectl(&bot_token, "shop").fails(&["get", "configmap", "flags"]);
    assert!(forbidden.contains("Forbidden"), "{forbidden}");
    let checkout = || ana.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.checkout}"]);
    let version = || {
        ana.ok(&[
            "get",
            "configmap",
            "flags",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    // kubectl patch reads the object first; a client that patches without
    // reading (a library, an agent's tool) is the case here.
    let auth = format!("Bearer {bot_token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/merge-patch+json"),
    ];
    let path = format!("/clusters/{}/api/v1/namespaces/shop/configmaps/flags", env.cluster);
    let patch = async |value: &str| {
        let body = format!(r#"{{"data":{{"checkout":"{value}"}}}}"#).into_bytes();
        env.raw().send(http::Method::PATCH, &path, &headers, body).await
    };

    // Approved with nothing changed meanwhile, it runs.
    let asked = patch("on").await;
    assert_eq!(asked.status, 403, "held: {}", String::from_utf8_lossy(&asked.body));
    let id = held_id(&asked.json()["message"].to_string());
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(held.request.precondition.resource_version, Some(version()));
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    assert_eq!(patch("on").await.status, 200);
    assert_eq!(checkout(), "on");

    // Changed underneath, it does not: the person approved a change to
    // the object they were shown, not to whatever it has become.
    let id = held_id(&patch("off").await.json()["message"].to_string());
    ana.ok(&["label", "configmap", "flags", "changed=meanwhile"]);
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    let conflict = patch("off").await;
    assert_eq!(conflict.status, 409, "{}", String::from_utf8_lossy(&conflict.body));
    assert!(String::from_utf8_lossy(&conflict.body).contains("the object has been modified"));
    assert_eq!(checkout(), "on");
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!((held.state, held.outcome.unwrap().code), (HeldState::Executed, 409));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_first_call_twice_gives_one_held_request() {
    let env = Portcullis::start_with(|c| c.approvals.wait = Duration::ZERO).await;
    let (bot, _ana) = careful_bot(&env, "developer");
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let first = held_id(&bot.fails(&apply));
    let second = held_id(&bot.fails(&apply));
    assert_eq!(first, second);
    assert_eq!(env.store.list_held().unwrap().len(), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_rejection_is_answered_without_holding() {
    let env = Portcullis::start().await;
    let (bot, _ana) = careful_bot(&env, "developer");
    // A developer may not write Secrets: the dry run's 403 is the answer.
    let refused = bot.fails(&["create", "secret", "generic", "db", "--from-literal=a=b"]);
    assert!(
        refused.contains(r#"User "bot:deployer" cannot create resource "secrets""#),
        "{refused}"
    );
    assert!(env.store.list_held().unwrap().is_empty(), "nothing held");
    // Reviews, reads and explicit dry runs are never held.
    assert!(bot.ok(&["auth", "can-i", "create", "configmaps"]).contains("yes"));
    let file = manifest(&env, FLAGS);
    bot.ok(&["apply", "--server-side", "--dry-run=server", "-f", file.as_str()]);
    bot.ok(&["get", "configmaps"]);
    assert!(env.store.list_held().unwrap().is_empty(), "nothing held");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_asker_and_people_without_admin_cannot_approve() {
    let env = Portcullis::start().await;
    let (bot_token, _ana) = careful_bot_in(&env, "shop", "developer");
    let bot = env.kubectl(&bot_token, "shop");
    let bob = env.person("bob", &[("developer", Some("shop"))]);
    let file = manifest(&env, FLAGS);
    let id = held_id(&bot.fails(&["apply", "--server-side", "-f", file.as_str()]));
    // The bot asked: its credential cannot even reach the person API.
    let out = env.person_cli(&bot_token, &["approvals", "approve", &id]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the portcullis API is for people"), "{said}");
    let out = env.person_cli(&bob, &["approvals", "approve", &id]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("not allowed: person:bob is not admin of namespace shop"),
        "{said}"
    );
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(held.state, HeldState::Pending);
    let refused = audit_rows(&env).await;
    assert!(refused
        .iter()
        .any(|r| r.resource == "heldwrites" && r.refused == "not_approver" && r.login == "bob"));
    assert!(refused
        .iter()
        .any(|r| r.path.starts_with("/api/portcullis/v1/") && r.refused == "not_person" && r.login == "deployer"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_held_requests() {
    let mut env = Portcullis::start().await;
    let (bot, ana) = careful_bot(&env, "developer");
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    let token = env
        .store
        .issue_credential(&Principal::bot("deployer"), "again", None)
        .unwrap()
        .1;
    env.restart().await;
    person_ok(&env, &ana, &["approvals", "approve", &id]);
    let bot = env.kubectl(&token, "shop");
    assert!(bot.ok(&apply).contains("serverside-applied"));
    assert_eq!(env.store.held(&id).unwrap().unwrap().state, HeldState::Executed);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_shows_a_changed_secret_value_as_changed_without_its_value() {
    let env = Portcullis::start().await;
    let (bot, ana_token) = careful_bot(&env, "admin");
    let ana = env.kubectl(&ana_token, "shop");
    ana.ok(&[
        "create",
        "secret",
        "generic",
        "api",
        "--from-literal=key=hunter2",
        "--from-literal=user=admin",
    ]);
    let secret =
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api\n  namespace: shop\nstringData:\n  key: hunter3\n";
    let file = manifest(&env, secret);
    let id = held_id(&bot.fails(&["apply", "--server-side", "-f", file.as_str()]));
    let preview = env.store.held(&id).unwrap().unwrap().request.preview;
    assert_eq!(preview.result["data"]["key"], "<redacted, 7 bytes, changed>");
    assert_eq!(preview.result["data"]["user"], "<redacted, 5 bytes>");
    let shown = person_ok(&env, &ana_token, &["approvals", "show", &id]);
    assert!(shown.contains("key: <redacted, 7 bytes, changed>"), "{shown}");
    let stored = serde_json::to_string(&preview).unwrap() + &shown;
    for value in ["hunter2", "hunter3", "aHVudGVy"] {
        assert!(!stored.contains(value), "{value} leaked");
    }
    // The body itself is sealed at rest.
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    let body: Vec<u8> = db
        .query_row("SELECT body FROM held_writes WHERE id = ?1", [&id], |r| r.get(0))
        .unwrap();
    assert!(!body.windows(7).any(|w| w == b"hunter3"), "sealed");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_write_whose_caller_goes_away_midway_never_stays_running() {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot(&env, "developer");
    let file = manifest(&env, FLAGS);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    person_ok(&env, &ana, &["approvals", "approve", &id]);
    // The cluster is slow to answer both the run's dry run (the object is
    // created, so it is tried again) and the real write; the caller gives
    // up first.
    env.sim().faults().add(portcullis_sim::faults::FaultRule {
        method: Some(http::Method::PATCH),
        path_prefix: "/api/v1/namespaces/shop/configmaps/flags".into(),
        times: None,
        action: portcullis_sim::faults::FaultAction::Delay(Duration::from_secs(5)),
    });
    let call = || {
        std::process::Command::new(crate::support::kubectl_path())
            .arg("--kubeconfig")
            .arg(bot.kubeconfig())
            .args(apply)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let state = || env.store.held(&id).unwrap().unwrap().state;
    let real_writes = || {
        env.sim()
            .requests()
            .into_iter()
            .filter(|r| r.method == "PATCH" && r.path.ends_with("/configmaps/flags"))
            .filter(|r| !r.query.as_deref().unwrap_or_default().contains("dryRun"))
            .count()
    };
    // Gone while the dry run waits: nothing was sent, so the approval
    // stands for the next call.
    let mut caller = call();
    eventually("the repeated call to claim the approved write", async || {
        state() == HeldState::Executing
    })
    .await;
    caller.kill().unwrap();
    let _ = caller.wait();
    let after = eventually("the claimed write to leave executing", async || {
        Some(state()).filter(|s| *s != HeldState::Executing)
    })
    .await;
    assert_eq!(after, HeldState::Approved, "nothing was sent: still approved");
    assert_eq!(real_writes(), 0);
    // Gone once the write itself was sent: it may have run, so it is
    // finished with an unknown outcome, never run again.
    let mut caller = call();
    eventually("the approved write to reach the cluster", async || real_writes() == 1).await;
    caller.kill().unwrap();
    let _ = caller.wait();
    let after = eventually("the claimed write to leave executing", async || {
        Some(state()).filter(|s| *s != HeldState::Executing)
    })
    .await;
    assert_eq!(after, HeldState::Executed, "never left executing");
    let outcome = env.store.held(&id).unwrap().unwrap().outcome.unwrap();
    assert!(outcome.body.contains("unknown"), "{outcome:?}");
    env.stop().await;
}

/// kube-apiserver issues a TokenRequest's token even with `dryRun=All`
/// (`TokenREST.Create` never reads it), so such a request is a real write:
/// held for a careful bot like any other, without a dry run of its own
/// (which would issue a token for the preview), and audited as no dry run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_with_dry_run_is_held_as_the_real_write_it_is_and_its_run_keeps_no_token() {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot_in(&env, "shop", "admin");
    let auth = format!("Bearer {bot}");
    let path = format!(
        "/clusters/{}/api/v1/namespaces/shop/serviceaccounts/default/token?dryRun=All",
        env.cluster
    );
    let ask = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let send = async || {
        env.raw()
            .send(
                http::Method::POST,
                &path,
                &[("authorization", &auth), ("content-type", "application/json")],
                ask.to_string().into_bytes(),
            )
            .await
    };
    let answer = send().await;
    let body = String::from_utf8_lossy(&answer.body).to_string();
    assert_ne!(answer.status, 201, "{body}");
    let id = held_id(&body);
    let held = env.store.held(&id).unwrap().expect("the held write");
    assert_eq!(held.state, HeldState::Pending);
    let tokens = env
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/serviceaccounts/default/token"))
        .count();
    assert_eq!(tokens, 0, "neither the request nor a dry run of it reached the cluster");
    let rows = audit_rows(&env).await;
    let row = rows.iter().find(|r| r.subresource == "token").expect("its row");
    assert!(row.held && !row.dry_run && row.write, "{row:?}");
    // Approved and run: the bot gets its token, and the outcome portcullis
    // keeps of the run has it hidden (the store never keeps a token).
    assert!(person_ok(&env, &ana, &["approvals", "approve", &id]).contains("approved"));
    let ran = send().await;
    assert_eq!(ran.status, 201, "{}", String::from_utf8_lossy(&ran.body));
    let token = ran.json()["status"]["token"].as_str().unwrap().to_string();
    assert!(token.len() > 20, "a real token: {token}");
    let outcome = env.store.held(&id).unwrap().unwrap().outcome.unwrap();
    assert!(!outcome.body.contains(&token), "{outcome:?}");
    assert!(outcome.body.contains("redacted"), "{outcome:?}");
    env.stop().await;
}

/// A held write's YAML is read once, at intake, and its JSON is what the
/// dry run sends and what runs once approved: both send the same bytes
/// (a YAML 1.1 reader, the API server's, would read some plain scalars
/// otherwise than the JSON that runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_yaml_write_is_tried_and_run_as_the_same_json() {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot_in(&env, "shop", "developer");
    let auth = format!("Bearer {bot}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/yaml")];
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  enabled: yes\n";
    let path = format!("/clusters/{}/api/v1/namespaces/shop/configmaps", env.cluster);
    let send = async || {
        env.raw()
            .send(http::Method::POST, &path, &headers, yaml.as_bytes().to_vec())
            .await
    };
    let id = held_id(&String::from_utf8_lossy(&send().await.body));
    let json = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-yaml"}, "data": {"enabled": "yes"}
    });
    let length = serde_json::to_vec(&json).unwrap().len().to_string();
    let sent = |dry: bool| -> Vec<String> {
        env.sim()
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/namespaces/shop/configmaps"))
            .filter(|r| r.query.as_deref().unwrap_or_default().contains("dryRun") == dry)
            .map(|r| r.header("content-length").unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(sent(true), std::slice::from_ref(&length), "the dry run sent the JSON");
    assert!(person_ok(&env, &ana, &["approvals", "approve", &id]).contains("approved"));
    assert_eq!(send().await.status, 201);
    assert_eq!(sent(false), [length], "the run sent the same JSON");
    env.stop().await;
}

/// kube-apiserver hands a request through a pod's, service's or node's
/// `proxy` subresource on to what runs there, `dryRun=All` and all: such a
/// write is a real one, held for a careful bot with or without `dryRun`,
/// and nothing reaches the proxied service before a person approves (no
/// dry run, no read of a current object).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_a_proxy_subresource_is_held_and_never_tried_beforehand() {
    let env = Portcullis::start().await;
    let (bot, _ana) = careful_bot_in(&env, "shop", "admin");
    let auth = format!("Bearer {bot}");
    let asks = [
        ("?dryRun=All", "application/json", r#"{"all":true}"#),
        ("", "application/x-www-form-urlencoded", "all=true&confirm=yes"),
    ];
    for (i, (query, content_type, sent)) in asks.into_iter().enumerate() {
        let path = format!(
            "/clusters/{}/api/v1/namespaces/shop/services/web:80/proxy/admin/reset-{i}{query}",
            env.cluster
        );
        let headers = [("authorization", auth.as_str()), ("content-type", content_type)];
        let answer = env
            .raw()
            .send(http::Method::POST, &path, &headers, sent.as_bytes().to_vec())
            .await;
        let body = String::from_utf8_lossy(&answer.body).to_string();
        let id = held_id(&body);
        let held = env.store.held(&id).unwrap().expect("the held write");
        assert_eq!(held.state, HeldState::Pending, "{query}");
        let preview = &held.request.preview;
        assert!(preview.current_note.contains("proxy"), "{query}: {preview:?}");
        // Shown as it will be sent: JSON as itself, anything else as text.
        let (shown, expected) = match content_type {
            "application/json" => (preview.result.clone(), serde_json::from_str(sent).unwrap()),
            _ => (preview.result["body"].clone(), serde_json::Value::from(sent)),
        };
        assert_eq!(shown, expected, "{query}: {preview:?}");
    }
    let proxied = env
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/proxy/"))
        .count();
    assert_eq!(proxied, 0, "nothing reached the proxied service before an approval");
    let rows = audit_rows(&env).await;
    let rows: Vec<_> = rows.iter().filter(|r| r.subresource == "proxy").collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.held && !r.dry_run && r.write), "{rows:?}");
    env.stop().await;
}

/// Protobuf field `number` holding `bytes` (length-delimited, each length
/// under 128 so in one byte).
fn pb(number: u8, bytes: &[u8]) -> Vec<u8> {
    let length = u8::try_from(bytes.len())
        .ok()
        .filter(|l| *l < 128)
        .expect("a short field");
    [&[number << 3 | 2, length][..], bytes].concat()
}

/// `k8s\0` and `runtime.Unknown{typeMeta, raw}`, as a typed client-go
/// client configured for protobuf sends a body.
fn protobuf_body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [pb(1, api_version.as_bytes()), pb(2, kind.as_bytes())].concat();
    [b"k8s\0".to_vec(), pb(1, &type_meta), pb(2, raw)].concat()
}

/// A held write runs later only on the object approved, by a precondition
/// written into its body. A protobuf update or delete (kubectl's typed
/// commands, `certificate approve`, `drain --disable-eviction`, send them)
/// takes its own as an appended field, which the API server merges: held,
/// approved, and refused at its run if the object changed meanwhile. A
/// body that cannot take one (CBOR) is refused when asked, never run
/// unguarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_protobuf_update_or_delete_runs_only_on_the_object_approved_and_cbor_is_refused() {
    let env = Portcullis::start_with(|c| c.approvals.wait = Duration::ZERO).await;
    let (bot, ana_token) = careful_bot_in(&env, "shop", "developer");
    let ana = env.kubectl(&ana_token, "shop");
    ana.ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    let auth = format!("Bearer {bot}");
    let protobuf = [
        ("authorization", auth.as_str()),
        ("content-type", "application/vnd.kubernetes.protobuf"),
    ];
    let path = format!("/clusters/{}/api/v1/namespaces/shop/configmaps/flags", env.cluster);
    // ConfigMap{metadata{name, namespace}, data{checkout: on}}, no
    // resourceVersion of its own.
    let meta = [pb(1, b"flags"), pb(3, b"shop")].concat();
    let entry = [pb(1, b"checkout"), pb(2, b"on")].concat();
    let update = protobuf_body("v1", "ConfigMap", &[pb(1, &meta), pb(2, &entry)].concat());
    let delete = protobuf_body("v1", "DeleteOptions", &pb(4, b"Background"));
    let send =
        async |method: http::Method, body: &Vec<u8>| env.raw().send(method, &path, &protobuf, body.clone()).await;
    let checkout = || ana.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.checkout}"]);

    // Changed between the approval and the run: refused, nothing written.
    let id = held_id(&send(http::Method::PUT, &update).await.json()["message"].to_string());
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    ana.ok(&["label", "configmap", "flags", "changed=meanwhile"]);
    let conflict = send(http::Method::PUT, &update).await;
    assert_eq!(conflict.status, 409, "{}", String::from_utf8_lossy(&conflict.body));
    assert_eq!(checkout(), "off");
    // Unchanged: it runs.
    let id = held_id(&send(http::Method::PUT, &update).await.json()["message"].to_string());
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    let ran = send(http::Method::PUT, &update).await;
    assert_eq!(ran.status, 200, "{}", String::from_utf8_lossy(&ran.body));
    assert_eq!(checkout(), "on");

    // A delete approved for the object shown does not delete the one made
    // in its place meanwhile.
    let id = held_id(&send(http::Method::DELETE, &delete).await.json()["message"].to_string());
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    ana.ok(&["delete", "configmap", "flags"]);
    ana.ok(&["create", "configmap", "flags", "--from-literal=checkout=new"]);
    let conflict = send(http::Method::DELETE, &delete).await;
    assert_eq!(conflict.status, 409, "{}", String::from_utf8_lossy(&conflict.body));
    assert!(String::from_utf8_lossy(&conflict.body).contains("UID in the precondition"));
    assert_eq!(checkout(), "new");

    // CBOR cannot take a guard: refused when asked, nothing held.
    let before = env.store.list_held().unwrap().len();
    let cbor = [("authorization", auth.as_str()), ("content-type", "application/cbor")];
    let refused = env
        .raw()
        .send(http::Method::DELETE, &path, &cbor, b"\xa0".to_vec())
        .await;
    assert_eq!(refused.status, 415, "{}", refused.json());
    assert_eq!(env.store.list_held().unwrap().len(), before, "nothing more held");
    assert_eq!(checkout(), "new");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_the_api_server_would_not_read_past_go_s_query_limit_is_refused_not_passed_unheld() {
    let env = Portcullis::start().await;
    let (bot, _ana) = careful_bot_in(&env, "shop", "developer");
    let auth = format!("Bearer {bot}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"slipped"},"data":{"k":"v"}}"#;
    let create = |ampersands: usize| {
        let path = format!(
            "/clusters/{}/api/v1/namespaces/shop/configmaps?dryRun=All{}",
            env.cluster,
            "&".repeat(ampersands)
        );
        let raw = env.raw();
        async move { raw.send(http::Method::POST, &path, &headers, body.to_vec()).await }
    };
    // 10,000 parameters are what Go reads: a dry run, answered, not held.
    let read = create(9_999).await;
    assert_eq!(read.status, 201, "{:?}", String::from_utf8_lossy(&read.body));
    // Past them kube-apiserver would see no dryRun and store the object:
    // portcullis refuses rather than pass on an unheld write.
    let refused = create(10_000).await;
    assert_eq!(refused.status, 400);
    assert!(String::from_utf8_lossy(&refused.body).contains("more than 10000 parameters"));
    // 10,000 parameters and no dryRun: a write to hold, whose dry run
    // (portcullis adds dryRun=All) would be one parameter too many.
    let path = format!(
        "/clusters/{}/api/v1/namespaces/shop/configmaps?x{}",
        env.cluster,
        "&".repeat(9_999)
    );
    let held = env.raw().send(http::Method::POST, &path, &headers, body.to_vec()).await;
    assert_eq!(held.status, 400, "{}", String::from_utf8_lossy(&held.body));
    assert!(env.store.list_held().unwrap().is_empty(), "nothing held");
    assert_eq!(real_writes(&env, "bot:deployer", "create"), 0);
    let ampersands = |q: Option<&str>| q.unwrap_or_default().matches('&').count();
    let forwarded = env.sim().requests();
    assert!(
        forwarded.iter().all(|r| ampersands(r.query.as_deref()) < 10_000),
        "never forwarded"
    );
    let rows = audit_rows(&env).await;
    assert!(
        rows.iter()
            .any(|r| r.login == "deployer" && r.code == 400 && r.refused == "path"),
        "the refusal is on record: {:?}",
        rows.iter()
            .map(|r| (&r.path, r.code, &r.refused, &r.login))
            .collect::<Vec<_>>()
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_deletecollection_runs_only_on_the_objects_its_dry_run_listed() {
    let env = Portcullis::start_with(|c| c.approvals.wait = Duration::ZERO).await;
    let (bot, ana_token) = careful_bot(&env, "developer");
    let ana = env.kubectl(&ana_token, "shop");
    ana.ok(&["create", "configmap", "cache-a", "--from-literal=k=a"]);
    ana.ok(&["label", "configmap", "cache-a", "tier=cache"]);
    let delete = [
        "delete",
        "--raw",
        "/api/v1/namespaces/shop/configmaps?labelSelector=tier%3Dcache",
    ];
    let id = held_id(&bot.fails(&delete));
    let listed = env.store.held(&id).unwrap().unwrap().request.precondition.uids;
    assert_eq!(listed.map(|uids| uids.len()), Some(1), "the dry run's one object");
    // Made after the dry run, matched by the selector: not what was approved.
    ana.ok(&["create", "configmap", "cache-b", "--from-literal=k=b"]);
    ana.ok(&["label", "configmap", "cache-b", "tier=cache"]);
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    let conflict = bot.fails(&delete);
    assert!(conflict.contains("not the ones approved"), "{conflict}");
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!((held.state, held.outcome.unwrap().code), (HeldState::Executed, 409));
    assert_eq!(
        ana.ok(&["get", "configmaps", "-l", "tier=cache", "-o", "name"]),
        "configmap/cache-a\nconfigmap/cache-b\n"
    );
    assert_eq!(real_writes(&env, "bot:deployer", "deletecollection"), 0);

    // Asked again, the dry run lists both; approved as shown, it runs.
    let id = held_id(&bot.fails(&delete));
    let listed = env.store.held(&id).unwrap().unwrap().request.precondition.uids;
    assert_eq!(listed.map(|uids| uids.len()), Some(2));
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    bot.ok(&delete);
    assert_eq!(ana.ok(&["get", "configmaps", "-l", "tier=cache", "-o", "name"]), "");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_apply_that_would_create_does_not_change_an_object_made_since() {
    let env = Portcullis::start_with(|c| c.approvals.wait = Duration::ZERO).await;
    let (bot, ana_token) = careful_bot(&env, "developer");
    let ana = env.kubectl(&ana_token, "shop");
    let file = manifest(&env, FLAGS);
    // Forcing conflicts, the apply would take ana's field over.
    let apply = ["apply", "--server-side", "--force-conflicts", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    assert!(env.store.held(&id).unwrap().unwrap().request.precondition.creates);
    ana.ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    person_ok(&env, &ana_token, &["approvals", "approve", &id]);
    let conflict = bot.fails(&apply);
    assert!(conflict.contains("exists now"), "{conflict}");
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(held.outcome.unwrap().code, 409);
    assert_eq!(
        ana.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.checkout}"]),
        "off"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_to_a_namespace_object_is_decided_by_a_cluster_admin_not_the_namespaces_admin() {
    let env = Portcullis::start_with(|c| {
        c.approvals.wait = Duration::ZERO;
        c.roles.push(portcullis::identity::roles::Role {
            name: "namespace-labeller".into(),
            rules: vec![serde_json::json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "patch"]})],
            reveals_secrets: false,
            namespaced: false,
            max_duration: None,
        });
    })
    .await;
    let token = careful_bot_granted(&env, None, "namespace-labeller");
    let bot = env.kubectl(&token, "shop");
    let ana = env.person("ana", &[("admin", Some("shop"))]);
    let root = env.person("root", &[("cluster-admin", None)]);
    // Its labels set the namespace's pod security: the cluster's to decide.
    let label = [
        "label",
        "namespace",
        "shop",
        "pod-security.kubernetes.io/enforce=privileged",
    ];
    let id = held_id(&bot.fails(&label));
    let out = env.person_cli(&ana, &["approvals", "approve", &id]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("person:ana is not admin of the whole cluster"),
        "{said}"
    );
    assert_eq!(env.store.held(&id).unwrap().unwrap().state, HeldState::Pending);
    person_ok(&env, &root, &["approvals", "approve", &id]);
    bot.ok(&label);
    let labels = env
        .kubectl(&root, "shop")
        .ok(&["get", "namespace", "shop", "-o", "jsonpath={.metadata.labels}"]);
    assert!(labels.contains("privileged"), "{labels}");
    env.stop().await;
}
