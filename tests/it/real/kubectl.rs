//! kubectl 1.37 and kube-rs through portcullis in front of the real
//! kube-apiserver: a person with a grant does what the grant's role allows,
//! as the impersonated user with the grant's group, and outside it gets the
//! API server's own 403, relayed word for word.

use super::grants::{cannot_list, direct};
use crate::harness::{Kubectl, Portcullis, REAL_CLUSTER};
use crate::support::{eventually, kubectl_path};
use futures_util::{StreamExt, TryStreamExt};
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use portcullis::audit::query::Filter;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A merge patch of the `flags` ConfigMap.
const DARK_OFF: &str = r#"{"data":{"dark":"false"}}"#;

/// A ConfigMap kubectl applies server-side.
const APPLIED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n";

/// Who portcullis is to the API server.
const PORTCULLIS: &str = "system:serviceaccount:portcullis:portcullis";

/// kubectl left running (a watch), its output lines gathered as they come;
/// killed when dropped.
struct Running {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn start(kubectl: &Kubectl, args: &[&str]) -> Running {
        let stderr = std::fs::File::create(kubectl.dir().join("watch.stderr")).unwrap();
        let mut child = Command::new(kubectl_path())
            .arg("--kubeconfig")
            .arg(kubectl.kubeconfig())
            .arg("--cache-dir")
            .arg(kubectl.dir().join("cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("kubectl starts");
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Running { child, lines }
    }

    fn printed(&self, line: &str) -> bool {
        self.lines.lock().unwrap().iter().any(|l| l == line)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kubectl auth can-i …`'s answer (it exits 1 on "no").
fn can_i(kubectl: &Kubectl, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    String::from_utf8_lossy(&kubectl.run(&all).stdout).trim().to_string()
}

/// The API server's last stage of each write to ConfigMaps and Deployments
/// in `namespace`, once there are `count`.
async fn writes_in(namespace: &str, count: usize) -> Vec<serde_json::Value> {
    let is = |value: &serde_json::Value, among: &[&str]| among.contains(&value.as_str().unwrap_or_default());
    eventually("the API server's audit events of the writes", async || {
        let writes: Vec<serde_json::Value> = super::shared()
            .audit_events()
            .into_iter()
            .filter(|e| e["objectRef"]["namespace"] == namespace && e["stage"] == "ResponseComplete")
            .filter(|e| is(&e["objectRef"]["resource"], &["configmaps", "deployments"]))
            .filter(|e| is(&e["verb"], &["create", "patch", "delete"]))
            .collect();
        (writes.len() >= count).then_some(writes)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_gets_creates_applies_patches_and_deletes_as_the_person_with_a_grant() {
    let env = Portcullis::start_real().await;
    let cluster = super::shared();
    let ns = cluster.namespace("kubectl").unwrap();
    let token = env.person("ana", &[("developer", Some(&ns))]);
    let kubectl = env.kubectl(&token, &ns);

    let created = kubectl.ok(&["create", "configmap", "flags", "--from-literal=dark=true"]);
    assert_eq!(created.trim(), "configmap/flags created");
    let listed = kubectl.ok(&["get", "configmaps"]);
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{listed}");
    assert!(listed.lines().any(|l| l.starts_with("flags ")), "{listed}");
    assert_eq!(
        kubectl.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.dark}"]),
        "true"
    );

    let manifest = crate::approvals::manifest(&env, APPLIED);
    let applied = kubectl.ok(&["apply", "--server-side", "-f", &manifest]);
    assert_eq!(applied.trim(), "configmap/applied serverside-applied");
    let created = kubectl.ok(&["create", "deployment", "api", "--image=nginx"]);
    assert_eq!(created.trim(), "deployment.apps/api created");

    let patched = kubectl.ok(&["patch", "configmap", "flags", "--type=merge", "-p", DARK_OFF]);
    assert_eq!(patched.trim(), "configmap/flags patched");
    assert_eq!(
        kubectl.ok(&["get", "configmap", "flags", "-o", "jsonpath={.data.dark}"]),
        "false"
    );
    kubectl.ok(&["scale", "deployment", "api", "--replicas=3"]);
    assert_eq!(
        kubectl.ok(&["get", "deployment", "api", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );

    let deleted = kubectl.ok(&["delete", "configmap", "flags"]);
    assert!(deleted.starts_with(r#"configmap "flags" deleted"#), "{deleted}");
    let gone = kubectl.fails(&["get", "configmap", "flags"]);
    assert_eq!(
        gone.trim(),
        r#"Error from server (NotFound): configmaps "flags" not found"#
    );

    // The API server saw each write as portcullis acting for ana.
    for event in writes_in(&ns, 6).await {
        assert_eq!(event["user"]["username"], PORTCULLIS, "{event}");
        assert_eq!(event["impersonatedUser"]["username"], "user:ana", "{event}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubectl_watch_through_portcullis_prints_a_change_made_after_it_began() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("watch").unwrap();
    let token = env.person("ana", &[("developer", Some(&ns))]);
    let kubectl = env.kubectl(&token, &ns);
    kubectl.ok(&["create", "configmap", "watched", "--from-literal=v=1"]);

    let watch = Running::start(
        &kubectl,
        &[
            "get",
            "configmap",
            "watched",
            "--watch",
            "-o",
            r#"jsonpath={.data.v}{"\n"}"#,
        ],
    );
    eventually("the watch to print the object as it is", async || watch.printed("1")).await;
    // kubectl watches from the version it listed: the change comes as an event.
    kubectl.ok(&[
        "patch",
        "configmap",
        "watched",
        "--type=merge",
        "-p",
        r#"{"data":{"v":"2"}}"#,
    ]);
    eventually("the watch to print the change", async || watch.printed("2")).await;
    drop(watch);

    let watches = Filter {
        verb: Some("watch".into()),
        namespace: Some(ns.clone()),
        ..Filter::default()
    };
    let rows = eventually("the watch's audit row", async || {
        let rows = crate::audit::rows(&env, watches.clone());
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert_eq!((rows[0].row.code, rows[0].row.login.as_str()), (200, "ana"));
    env.stop().await;
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_gets_applies_lists_watches_and_deletes_through_portcullis() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("kube-rs").unwrap();
    let token = env.person("ana", &[("developer", Some(&ns))]);
    let api: Api<ConfigMap> = Api::namespaced(env.kube(&token), &ns);

    let created = api.create(&PostParams::default(), &configmap("made")).await.unwrap();
    assert!(created.metadata.uid.is_some());
    let got = api.get("made").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let applied = api
        .patch("applied", &PatchParams::apply("portcullis-tests"), &Patch::Apply(apply))
        .await
        .unwrap();
    let managers = applied.metadata.managed_fields.unwrap();
    assert!(
        managers
            .iter()
            .any(|m| m.manager.as_deref() == Some("portcullis-tests") && m.operation.as_deref() == Some("Apply")),
        "{managers:?}"
    );
    let list = api.list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = list.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["applied", "made"]);

    let from = list.metadata.resource_version.unwrap();
    let mut events = api
        .watch(&WatchParams::default().timeout(30), &from)
        .await
        .unwrap()
        .boxed();
    api.delete("made", &DeleteParams::default()).await.unwrap();
    let deleted = loop {
        match events.try_next().await.unwrap() {
            Some(WatchEvent::Deleted(cm)) => break cm,
            Some(_) => continue,
            None => panic!("the watch ended before the delete arrived"),
        }
    };
    assert_eq!(deleted.metadata.name.as_deref(), Some("made"));
    drop(events);
    assert!(api.get_opt("made").await.unwrap().is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_grant_the_api_servers_own_403_is_relayed_word_for_word() {
    let env = Portcullis::start_real().await;
    let cluster = super::shared();
    let (ns, other) = (
        cluster.namespace("granted").unwrap(),
        cluster.namespace("other").unwrap(),
    );
    let (token, grants) = env.person_with_ttl("ana", &[("developer", Some(&ns))], Duration::from_secs(3600));
    let kubectl = env.kubectl(&token, &ns);

    let elsewhere = kubectl.fails(&["get", "configmaps", "-n", &other]);
    let message = cannot_list("user:ana", "configmaps", &other);
    assert_eq!(elsewhere.trim(), format!("Error from server (Forbidden): {message}"));
    // developer reads ServiceAccounts but may not delete them.
    let verb = kubectl.fails(&["delete", "serviceaccount", "default"]);
    assert_eq!(
        verb.trim(),
        format!(
            r#"Error from server (Forbidden): serviceaccounts "default" is forbidden: User "user:ana" cannot delete resource "serviceaccounts" in API group "" in the namespace "{ns}""#
        )
    );

    // The very bytes the API server answers the same impersonated request.
    let path = format!("/api/v1/namespaces/{other}/configmaps");
    let through = env.raw().get(&format!("/clusters/{REAL_CLUSTER}{path}"), &token).await;
    let admin = format!("Bearer {}", cluster.admin_token);
    let group = grants[0].group();
    let headers = [
        ("authorization", admin.as_str()),
        ("impersonate-user", "user:ana"),
        ("impersonate-group", group.as_str()),
    ];
    let own = direct().send(Method::GET, &path, &headers, Vec::new()).await;
    assert_eq!((through.status.as_u16(), own.status.as_u16()), (403, 403));
    assert_eq!(through.headers["content-type"], own.headers["content-type"]);
    assert_eq!(
        String::from_utf8_lossy(&through.body),
        String::from_utf8_lossy(&own.body)
    );

    let kube_api: Api<ConfigMap> = Api::namespaced(env.kube(&token), &other);
    match kube_api.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
            assert_eq!(status.message, message);
        }
        other => panic!("expected the API server's 403, got {other:?}"),
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_whoami_shows_the_impersonated_user_and_grant_groups_and_can_i_answers_by_the_grants() {
    let env = Portcullis::start_real().await;
    let cluster = super::shared();
    let (ns, read_only) = (
        cluster.namespace("whoami").unwrap(),
        cluster.namespace("readonly").unwrap(),
    );
    let grants = [("developer", Some(ns.as_str())), ("viewer", Some(read_only.as_str()))];
    let (token, grants) = env.person_with_ttl("ana", &grants, Duration::from_secs(3600));
    let kubectl = env.kubectl(&token, &ns);

    let review: serde_json::Value = serde_json::from_str(&kubectl.ok(&["auth", "whoami", "-o", "json"])).unwrap();
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "user:ana", "{review}");
    let mut groups: Vec<&str> = user["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g.as_str())
        .collect();
    groups.sort();
    let mut expected = vec![grants[0].group(), grants[1].group(), "system:authenticated".to_string()];
    expected.sort();
    assert_eq!(groups, expected, "{review}");

    assert_eq!(can_i(&kubectl, &["create", "configmaps"]), "yes");
    assert_eq!(can_i(&kubectl, &["patch", "deployments.apps"]), "yes");
    assert_eq!(can_i(&kubectl, &["delete", "serviceaccounts"]), "no");
    assert_eq!(can_i(&kubectl, &["get", "secrets"]), "no");
    assert_eq!(can_i(&kubectl, &["list", "configmaps", "-n", &read_only]), "yes");
    assert_eq!(can_i(&kubectl, &["create", "configmaps", "-n", &read_only]), "no");
    let elsewhere = cluster.namespace("ungranted").unwrap();
    assert_eq!(can_i(&kubectl, &["list", "configmaps", "-n", &elsewhere]), "no");
    env.stop().await;
}
