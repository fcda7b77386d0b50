//! Held writes against the real kube-apiserver: what a person is shown is
//! the API server's own dry run (its validation's 422 is the answer at
//! once; a valid write's preview is what it then creates); approved, the
//! write runs once with its preconditions; changed underneath, the API
//! server's own 409 ends it. Whether a write reached the cluster for real
//! is read from the API server's audit log, not from portcullis.

use crate::approvals::{careful_bot_in, held_id, manifest, person_ok};
use crate::harness::{Portcullis, Raw};
use crate::support::eventually;
use http::Method;
use portcullis::approvals::{decide, HeldState};
use serde_json::{json, Value};

const BOT: &str = "bot:deployer";

/// portcullis in front of the real cluster, a namespace of the test's own,
/// the bot `deployer` holding `role` there with writes that need approval,
/// and ana, admin there, who decides. Returns the bot's token and ana's.
async fn careful_bot(prefix: &str, role: &str) -> (Portcullis, String, String, String) {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace(prefix).unwrap();
    let (bot, ana) = careful_bot_in(&env, &ns, role);
    (env, ns, bot, ana)
}

/// The requests with `verb` by `user` in `ns` the real API server
/// completed, as (sent as a dry run?, code).
fn completed(ns: &str, user: &str, verb: &str) -> Vec<(bool, u64)> {
    super::shared()
        .audit_events()
        .into_iter()
        .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == verb)
        .filter(|e| e["impersonatedUser"]["username"] == user && e["objectRef"]["namespace"] == ns)
        .map(|e| {
            let dry = e["requestURI"].as_str().unwrap_or_default().contains("dryRun=All");
            (dry, e["responseStatus"]["code"].as_u64().unwrap_or_default())
        })
        .collect()
}

/// How many `verb` requests by `user` reached the real cluster for real
/// (not dry runs), once the API server logged at least `at_least`.
async fn real_writes(ns: &str, user: &str, verb: &str, at_least: usize) -> usize {
    eventually(
        &format!("{at_least} {verb} by {user} in the API server's audit log"),
        async || {
            let n = completed(ns, user, verb).iter().filter(|(dry, _)| !dry).count();
            (n >= at_least).then_some(n)
        },
    )
    .await
}

/// The admin's view of an object, straight from the API server.
fn admin_get(kind: &str, name: &str, ns: &str) -> Value {
    serde_json::from_str(
        &super::shared()
            .admin(&["get", kind, name, "-n", ns, "-o", "json"])
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_api_servers_422_at_the_dry_run_is_the_answer_and_nothing_is_held() {
    let (env, ns, bot_token, _) = careful_bot("held-invalid", "developer").await;
    let bot = env.kubectl(&bot_token, &ns);
    let invalid = manifest(
        &env,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  \"bad key!\": x\n",
    );
    let refused = bot.fails(&["apply", "--server-side", "-f", &invalid]);
    assert!(
        refused.contains("is invalid")
            && refused.contains("a valid config key must consist of alphanumeric characters"),
        "the API server's validation answers: {refused}"
    );
    // The same through the raw API: the API server's Status, as it wrote it.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}});
    let path = format!("/clusters/real/apis/apps/v1/namespaces/{ns}/deployments");
    let auth = format!("Bearer {bot_token}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let response = env
        .raw()
        .send(Method::POST, &path, &headers, deployment.to_string().into_bytes())
        .await;
    let status = response.json();
    assert_eq!(
        (response.status.as_u16(), &status["reason"]),
        (422, &json!("Invalid")),
        "{status}"
    );
    assert_eq!(status["details"]["kind"], "Deployment", "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"], "spec.template.spec.containers",
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"], "FieldValueRequired",
        "{status}"
    );

    assert!(env.store.list_held().unwrap().is_empty(), "nothing is held");
    let applies = eventually("the dry runs in the API server's audit log", async || {
        let seen = completed(&ns, BOT, "patch");
        (!seen.is_empty()).then_some(seen)
    })
    .await;
    assert_eq!(applies, [(true, 422)], "only the dry run reached the API server");
    assert_eq!(completed(&ns, BOT, "create"), [(true, 422)]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_create_previews_the_real_dry_run_and_runs_once_creating_what_was_shown() {
    let (env, ns, bot_token, ana) = careful_bot("held-create", "developer").await;
    let bot = env.kubectl(&bot_token, &ns);
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: registry.example/web:1\n";
    let file = manifest(&env, yaml);
    let apply = ["apply", "--server-side", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    let preview = env.store.held(&id).unwrap().unwrap().request.preview;
    // The API server's defaults are in it: the dry run is the real one.
    let shown = &preview.result;
    assert_eq!(
        shown["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );
    assert_eq!(shown["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%", "{shown}");
    assert_eq!(shown["spec"]["progressDeadlineSeconds"], 600, "{shown}");
    assert_eq!(
        real_writes(&ns, BOT, "patch", 0).await,
        0,
        "only the dry run reached the API server"
    );
    assert!(super::shared().admin(&["get", "deployment", "web", "-n", &ns]).is_err());

    person_ok(&env, &ana, &["approvals", "approve", &id]);
    assert!(bot.ok(&apply).contains("deployment.apps/web serverside-applied"));
    let created = admin_get("deployment", "web", &ns);
    assert_eq!(created["spec"], shown["spec"], "the object created is the one shown");
    assert_eq!(created["metadata"]["labels"], shown["metadata"]["labels"]);
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!((held.state, held.outcome.unwrap().code), (HeldState::Executed, 201));
    assert_eq!(real_writes(&ns, BOT, "patch", 1).await, 1);
    // The same command once more is a new write to approve, never a rerun.
    assert_ne!(held_id(&bot.fails(&apply)), id);
    assert_eq!(real_writes(&ns, BOT, "patch", 1).await, 1, "ran exactly once");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_update_runs_with_the_resource_version_the_real_dry_run_saw() {
    let (env, ns, bot_token, ana_token) = careful_bot("held-update", "developer").await;
    let bot = env.kubectl(&bot_token, &ns);
    env.kubectl(&ana_token, &ns)
        .ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    let version = admin_get("configmap", "flags", &ns)["metadata"]["resourceVersion"].clone();
    let file = manifest(
        &env,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  checkout: \"on\"\n",
    );
    let apply = ["apply", "--server-side", "--force-conflicts", "-f", file.as_str()];
    let id = held_id(&bot.fails(&apply));
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(held.request.precondition.resource_version.as_deref(), version.as_str());
    assert!(
        held.request.preview.diff.contains("+   checkout: on"),
        "{}",
        held.request.preview.diff
    );

    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    assert!(bot.ok(&apply).contains("configmap/flags serverside-applied"));
    let now = admin_get("configmap", "flags", &ns);
    assert_eq!(now["data"]["checkout"], "on");
    assert_ne!(now["metadata"]["resourceVersion"], version);
    assert_eq!(real_writes(&ns, BOT, "patch", 1).await, 1);
    env.stop().await;
}

/// PATCH `flags` in `ns` by server-side apply, forced, with `token`: the
/// same request each time, so the repeat is the held write's.
async fn apply_flags(raw: &Raw, ns: &str, token: &str, prefix: &str) -> crate::harness::RawResponse {
    let path = format!("{prefix}/api/v1/namespaces/{ns}/configmaps/flags?fieldManager=deployer&force=true");
    let body = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: {ns}\ndata:\n  checkout: \"on\"\n"
    );
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/apply-patch+yaml"),
    ];
    raw.send(Method::PATCH, &path, &headers, body.into_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_apply_changed_underneath_ends_with_the_real_api_servers_own_409_status() {
    let (env, ns, bot, ana_token) = careful_bot("held-conflict", "developer").await;
    let ana = env.kubectl(&ana_token, &ns);
    ana.ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    let before = admin_get("configmap", "flags", &ns)["metadata"]["resourceVersion"].clone();
    let held = apply_flags(&env.raw(), &ns, &bot, "/clusters/real").await;
    assert_eq!(held.status, 403, "{}", String::from_utf8_lossy(&held.body));
    let id = held_id(held.json()["message"].as_str().unwrap());
    ana.ok(&["label", "configmap", "flags", "changed=meanwhile"]);
    decide::approve(&env.store, &id, "ana", None, None).unwrap();

    let conflict = apply_flags(&env.raw(), &ns, &bot, "/clusters/real").await;
    assert_eq!(conflict.status, 409, "{}", String::from_utf8_lossy(&conflict.body));
    // What the API server answers anyone applying over a stale version,
    // sent straight to it as the admin: the same Status, word for word.
    let cluster = super::shared();
    let direct = Raw::with_ca(&cluster.ca_pem, cluster.url.clone());
    let stale = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n  namespace: {ns}\n  resourceVersion: {before}\ndata:\n  checkout: \"on\"\n");
    let auth = format!("Bearer {}", cluster.admin_token);
    let path = format!("/api/v1/namespaces/{ns}/configmaps/flags?fieldManager=deployer&force=true");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/apply-patch+yaml"),
    ];
    let own = direct.send(Method::PATCH, &path, &headers, stale.into_bytes()).await;
    assert_eq!(own.status, 409);
    assert_eq!(conflict.json(), own.json());
    assert_eq!(conflict.json()["reason"], "Conflict");

    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!((held.state, held.outcome.unwrap().code), (HeldState::Executed, 409));
    let now = admin_get("configmap", "flags", &ns);
    assert_eq!(
        (&now["data"]["checkout"], &now["metadata"]["labels"]["changed"]),
        (&json!("off"), &json!("meanwhile"))
    );
    let patches = eventually("the approved run in the API server's audit log", async || {
        let seen = completed(&ns, BOT, "patch");
        seen.iter().any(|(dry, _)| !dry).then_some(seen)
    })
    .await;
    assert_eq!(patches, [(true, 200), (false, 409)], "one dry run, one run, refused");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_delete_runs_with_the_uid_shown_and_a_replaced_object_answers_the_api_servers_409() {
    let (env, ns, bot_token, ana_token) = careful_bot("held-delete", "developer").await;
    let bot = env.kubectl(&bot_token, &ns);
    let ana = env.kubectl(&ana_token, &ns);
    for name in ["kept", "gone"] {
        ana.ok(&["create", "configmap", name, "--from-literal=a=b"]);
    }
    let uid = |name: &str| {
        admin_get("configmap", name, &ns)["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (kept_uid, gone_uid) = (uid("kept"), uid("gone"));
    let kept = held_id(&bot.fails(&["delete", "configmap", "kept"]));
    let gone = held_id(&bot.fails(&["delete", "configmap", "gone"]));
    let precondition = |id: &str| env.store.held(id).unwrap().unwrap().request.precondition.uid;
    assert_eq!(
        (precondition(&kept), precondition(&gone)),
        (Some(kept_uid.clone()), Some(gone_uid))
    );
    // `kept` is deleted and made anew meanwhile: the object shown is gone.
    ana.ok(&["delete", "configmap", "kept"]);
    ana.ok(&["create", "configmap", "kept", "--from-literal=a=new"]);
    for id in [&kept, &gone] {
        decide::approve(&env.store, id, "ana", None, None).unwrap();
    }
    let refused = bot.fails(&["delete", "configmap", "kept"]);
    assert!(
        refused.contains(&format!(
            "the UID in the precondition ({kept_uid}) does not match the UID in record"
        )),
        "the API server's own 409: {refused}"
    );
    assert_eq!(
        admin_get("configmap", "kept", &ns)["data"]["a"],
        "new",
        "the new object stays"
    );
    assert!(bot.ok(&["delete", "configmap", "gone"]).contains("\"gone\" deleted"));
    assert!(super::shared().admin(&["get", "configmap", "gone", "-n", &ns]).is_err());
    let outcome = |id: &str| env.store.held(id).unwrap().unwrap().outcome.unwrap().code;
    assert_eq!((outcome(&kept), outcome(&gone)), (409, 200));
    assert_eq!(real_writes(&ns, BOT, "delete", 2).await, 2, "each ran once");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_write_previews_the_real_dry_run_without_a_value() {
    let (env, ns, bot_token, ana) = careful_bot("held-secret", "admin").await;
    let (old, new) = (super::secrets::distinctive(), super::secrets::distinctive());
    super::secrets::plant(&ns, "api", &old);
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api\ndata:\n  password: {}\n",
        super::secrets::b64(&new)
    );
    let file = manifest(&env, &yaml);
    let bot = env.kubectl(&bot_token, &ns);
    let id = held_id(&bot.fails(&["apply", "--server-side", "--force-conflicts", "-f", &file]));
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(
        held.request.preview.result["data"]["password"],
        "<redacted, 24 bytes, changed>"
    );
    let shown = person_ok(&env, &ana, &["approvals", "show", &id]);
    assert!(shown.contains("password: <redacted, 24 bytes, changed>"), "{shown}");
    let stored = serde_json::to_string(&held.request.preview).unwrap() + &shown;
    super::secrets::assert_hidden("the preview", stored.as_bytes(), &[&old, &new]);

    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    // The bot's admin grant reveals Secrets to it: only the preview, shown
    // to whoever approves, hides them.
    let ran = bot.ok(&["apply", "--server-side", "--force-conflicts", "-f", &file]);
    assert!(ran.contains("serverside-applied"), "{ran}");
    let stored = admin_get("secret", "api", &ns);
    assert_eq!(
        stored["data"]["password"],
        super::secrets::b64(&new),
        "the cluster has the approved value"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_whose_body_overrides_its_dry_run_query_is_held_and_its_dry_run_deletes_nothing() {
    let (env, ns, bot, ana_token) = careful_bot("held-dry-delete", "developer").await;
    env.kubectl(&ana_token, &ns)
        .ok(&["create", "configmap", "flags", "--from-literal=a=b"]);
    // kube-apiserver reads a delete's options from its body when it has
    // one: this `dryRun=All` in the query is ignored, the delete is real.
    let path = format!("/clusters/real/api/v1/namespaces/{ns}/configmaps/flags?dryRun=All");
    let auth = format!("Bearer {bot}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let body = br#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}"#.to_vec();
    let response = env.raw().send(Method::DELETE, &path, &headers, body).await;
    let message = response.json()["message"].as_str().unwrap_or_default().to_string();
    assert_eq!(response.status, 403, "{message}");
    assert!(
        message.contains("this write waits for a person's approval"),
        "{message}"
    );
    // The hold stage's own dry run deleted nothing either, and the object
    // shown is the one there.
    let uid = admin_get("configmap", "flags", &ns)["metadata"]["uid"].clone();
    let held = env.store.held(&held_id(&message)).unwrap().unwrap();
    assert_eq!(held.request.precondition.uid.as_deref(), uid.as_str());
    let deletes = eventually("the dry run in the API server's audit log", async || {
        let seen = completed(&ns, BOT, "delete");
        (!seen.is_empty()).then_some(seen)
    })
    .await;
    assert_eq!(deletes, [(true, 200)]);
    env.stop().await;
}

/// What an operator adds for the custom role `patcher`: portcullis may bind
/// and write `portcullis:patcher` (see deploy/rbac.yaml, part 2).
const PATCHER_ALLOWED: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: portcullis-rbac-manager-patcher
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [bind, escalate]
  resourceNames: [\"portcullis:patcher\"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: portcullis-rbac-manager-patcher
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: portcullis-rbac-manager-patcher
subjects:
- kind: ServiceAccount
  name: portcullis
  namespace: portcullis
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_patch_of_an_object_the_asker_cannot_read_runs_only_on_the_version_the_real_dry_run_changed() {
    // The custom role's ClusterRole, allowed to portcullis as deploy/rbac.yaml
    // tells an operator to: bind and escalate on its name.
    let allowed = std::env::temp_dir().join(format!("portcullis-patcher-{}.yaml", std::process::id()));
    std::fs::write(&allowed, PATCHER_ALLOWED).unwrap();
    let applied = super::shared().admin(&["apply", "-f", &allowed.display().to_string()]);
    std::fs::remove_file(&allowed).unwrap();
    applied.unwrap();
    let env = Portcullis::start_real_with(|config| config.roles.push(crate::approvals::patcher())).await;
    let ns = super::shared().namespace("held-unread").unwrap();
    let (bot_token, ana_token) = careful_bot_in(&env, &ns, "patcher");
    env.kubectl(&ana_token, &ns)
        .ok(&["create", "configmap", "flags", "--from-literal=checkout=off"]);
    let version = || admin_get("configmap", "flags", &ns)["metadata"]["resourceVersion"].clone();
    let auth = format!("Bearer {bot_token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/merge-patch+json"),
    ];
    let path = format!("/clusters/real/api/v1/namespaces/{ns}/configmaps/flags");
    let forbidden = env.raw().get(&path, &bot_token).await;
    assert_eq!(forbidden.status, 403, "the bot cannot read it");
    let patch = async |value: &str| {
        let body = format!(r#"{{"data":{{"checkout":"{value}"}}}}"#).into_bytes();
        env.raw().send(Method::PATCH, &path, &headers, body).await
    };

    let asked = patch("on").await;
    let id = held_id(&asked.json()["message"].to_string());
    let held = env.store.held(&id).unwrap().unwrap();
    assert_eq!(
        held.request.precondition.resource_version.as_deref(),
        version().as_str()
    );
    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    assert_eq!(patch("on").await.status, 200);
    assert_eq!(admin_get("configmap", "flags", &ns)["data"]["checkout"], "on");

    let id = held_id(&patch("off").await.json()["message"].to_string());
    super::shared()
        .admin(&["label", "configmap", "flags", "changed=meanwhile", "-n", &ns])
        .unwrap();
    decide::approve(&env.store, &id, "ana", None, None).unwrap();
    let conflict = patch("off").await;
    assert_eq!(conflict.status, 409, "{}", String::from_utf8_lossy(&conflict.body));
    assert_eq!(conflict.json()["reason"], "Conflict");
    assert_eq!(admin_get("configmap", "flags", &ns)["data"]["checkout"], "on");
    // The API server's own log: each dry run, the first write, and the
    // second refused by the API server itself.
    let patches = eventually("the patches in the API server's audit log", async || {
        let seen = completed(&ns, BOT, "patch");
        (seen.len() >= 4).then_some(seen)
    })
    .await;
    assert_eq!(patches, [(true, 200), (false, 200), (true, 200), (false, 409)]);
    env.stop().await;
    super::shared()
        .admin(&[
            "delete",
            "clusterrolebinding,clusterrole",
            "portcullis-rbac-manager-patcher",
        ])
        .unwrap();
}
