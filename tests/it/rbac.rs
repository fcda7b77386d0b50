//! The reconciler against the simulated cluster: grants become bindings the
//! cluster's RBAC honours, and stop being bindings when they end; what
//! portcullis does not own is never touched.

use crate::harness::{Portcullis, CLUSTER};
use crate::support::eventually;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use portcullis::identity::Principal;
use std::time::Duration;

/// RoleBindings in `namespace`, as the cluster's admin sees them.
pub async fn bindings(env: &Portcullis, namespace: &str) -> Api<RoleBinding> {
    Api::namespaced(
        crate::support::kube_client(env.sim(), env.sim().admin_token()).await,
        namespace,
    )
}

/// Does the RoleBinding of grant `id` exist in `namespace`?
pub async fn bound(env: &Portcullis, namespace: &str, id: &str) -> bool {
    bindings(env, namespace)
        .await
        .get_opt(&format!("portcullis-grant-{id}"))
        .await
        .unwrap()
        .is_some()
}

/// Add person `login` with a credential; returns the token.
pub fn person(env: &Portcullis, login: &str) -> String {
    let person = Principal::person(login);
    env.store.add_principal(&person, false).unwrap();
    env.store.issue_credential(&person, "test", None).unwrap().1
}

/// Run the CLI; stdout on success, else panic with stderr.
pub fn cli_ok(env: &Portcullis, args: &[&str]) -> String {
    let out = env.cli(args);
    assert!(
        out.status.success(),
        "portcullis {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The id printed after `prefix` (`grant <id>:`, `access request <id> is`).
pub fn id_after(text: &str, prefix: &str) -> String {
    let rest = &text[text.find(prefix).unwrap_or_else(|| panic!("{prefix:?} in {text}")) + prefix.len()..];
    rest.split([' ', ':']).next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grant_add_binds_before_returning_and_the_role_applies_only_in_its_namespace() {
    let env = Portcullis::start().await;
    let token = person(&env, "ana");
    let out = cli_ok(
        &env,
        &[
            "admin",
            "grant",
            "add",
            "--person",
            "ana",
            "--cluster",
            CLUSTER,
            "--role",
            "developer",
            "--namespace",
            "shop",
            "--duration",
            "1h",
        ],
    );
    assert!(out.contains("cluster sim in step"), "{out}");
    let id = id_after(&out, "grant ");
    let binding = bindings(&env, "shop")
        .await
        .get(&format!("portcullis-grant-{id}"))
        .await
        .unwrap();
    let labels = binding.metadata.labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "portcullis");
    assert_eq!(labels["portcullis.dev/grant"], id);
    let instance = env.reconciler.instance();
    assert_eq!(labels["portcullis.dev/instance"], instance.id());
    assert_eq!(binding.role_ref.name, "portcullis:developer");
    assert_eq!(binding.subjects.unwrap()[0].name, format!("portcullis:grant:{id}"));
    let managers = binding.metadata.managed_fields.unwrap_or_default();
    let manager = format!("portcullis-{}", instance.id());
    assert!(
        managers.iter().any(|m| m.manager.as_deref() == Some(manager.as_str())),
        "applied by this installation's field manager {manager}"
    );

    let kubectl = env.kubectl(&token, "shop");
    kubectl.ok(&["create", "configmap", "flags", "--from-literal=dark=true"]);
    kubectl.ok(&["create", "deployment", "api", "--image=nginx"]);
    let err = kubectl.fails(&["get", "configmaps", "-n", "payments"]);
    assert!(err.contains(r#"configmaps is forbidden: User "user:ana" cannot list resource "configmaps" in API group "" in the namespace "payments""#), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grant_revoke_removes_the_binding_and_access_ends() {
    let env = Portcullis::start().await;
    let token = person(&env, "ana");
    let out = cli_ok(
        &env,
        &[
            "admin",
            "grant",
            "add",
            "--person",
            "ana",
            "--cluster",
            CLUSTER,
            "--role",
            "viewer",
            "--namespace",
            "shop",
            "--duration",
            "1h",
        ],
    );
    let id = id_after(&out, "grant ");
    let kubectl = env.kubectl(&token, "shop");
    kubectl.ok(&["get", "pods"]);
    let out = cli_ok(&env, &["admin", "grant", "revoke", &id]);
    assert!(out.contains("1 removed"), "{out}");
    assert!(!bound(&env, "shop", &id).await);
    let err = kubectl.fails(&["get", "pods"]);
    assert!(err.contains(r#"User "user:ana" cannot list resource "pods""#), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_grants_binding_is_removed_by_the_running_reconciler() {
    let env = Portcullis::start().await;
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    assert!(bound(&env, "shop", &grants[0].id).await);
    // The grant's hour passes at once on the clock grants are judged by. No
    // pass asked for: the reconciler wakes up when the grant expires.
    env.gateway.grant_clock().advance(Duration::from_secs(3600));
    let id = grants[0].id.clone();
    eventually("the expired grant's binding is gone", || async {
        !bound(&env, "shop", &id).await
    })
    .await;
    let err = env.kubectl(&token, "shop").fails(&["get", "pods"]);
    assert!(err.contains("forbidden"), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_deleted_by_hand_comes_back_at_the_next_resync() {
    let env = Portcullis::start_with(|c| c.reconcile.resync = Duration::from_secs(1)).await;
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let id = grants[0].id.clone();
    let api = bindings(&env, "shop").await;
    let name = format!("portcullis-grant-{id}");
    let uid = |binding: Option<RoleBinding>| binding.and_then(|b| b.metadata.uid);
    let deleted = uid(api.get_opt(&name).await.unwrap()).expect("bound at the grant");
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    // A resync may put it back before a look after the delete: the binding
    // back is one the reconciler made again, not the one deleted.
    eventually("the binding is back", || async {
        uid(api.get_opt(&name).await.unwrap()).is_some_and(|now| now != deleted)
    })
    .await;
    env.kubectl(&token, "shop").ok(&["get", "pods"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_labelled_binding_is_removed_and_unlabelled_objects_are_left_alone() {
    let env = Portcullis::start().await;
    let api = bindings(&env, "shop").await;
    let ours = format!(
        r#"{{"app.kubernetes.io/managed-by": "portcullis", "portcullis.dev/instance": "{}"}}"#,
        env.reconciler.instance()
    );
    let binding = |name: &str, labelled: bool| {
        let labels = if labelled { ours.as_str() } else { r#"{"team": "shop"}"# };
        serde_json::from_str::<RoleBinding>(&format!(
            r#"{{"metadata": {{"name": "{name}", "namespace": "shop", "labels": {labels}}},
                "roleRef": {{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "portcullis:admin"}},
                "subjects": [{{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "portcullis:grant:leftover"}}]}}"#
        ))
        .unwrap()
    };
    api.create(&PostParams::default(), &binding("portcullis-grant-leftover", true))
        .await
        .unwrap();
    api.create(&PostParams::default(), &binding("shop-team-admins", false))
        .await
        .unwrap();
    let roles: Api<ClusterRole> = Api::all(crate::support::kube_client(env.sim(), env.sim().admin_token()).await);
    let mut retired: ClusterRole = serde_json::from_str(
        r#"{"metadata": {"name": "portcullis:retired", "labels": {"app.kubernetes.io/managed-by": "portcullis"}}, "rules": []}"#,
    )
    .unwrap();
    roles.create(&PostParams::default(), &retired).await.unwrap();
    retired.metadata.name = Some("portcullis:by-hand".into());
    retired.metadata.labels = None;
    roles.create(&PostParams::default(), &retired).await.unwrap();

    let report = env.reconcile().await;
    assert_eq!(report.outcome.removed, 2, "{:?}", report.outcome);
    assert!(api.get_opt("portcullis-grant-leftover").await.unwrap().is_none());
    assert!(
        api.get_opt("shop-team-admins").await.unwrap().is_some(),
        "unlabelled: not portcullis's"
    );
    assert!(roles.get_opt("portcullis:retired").await.unwrap().is_none());
    assert!(
        roles.get_opt("portcullis:by-hand").await.unwrap().is_some(),
        "unlabelled: not portcullis's"
    );
    assert!(roles.get_opt("portcullis:viewer").await.unwrap().is_some());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_status_shows_reachability_the_last_reconcile_and_counts_in_step() {
    let env = Portcullis::start().await;
    env.person("ana", &[("viewer", Some("shop")), ("developer", Some("payments"))]);
    let out = cli_ok(&env, &["admin", "cluster", "status"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("sim "))
        .unwrap_or_else(|| panic!("{out}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[1], "yes", "{line}");
    assert!(
        fields[2].ends_with('Z') && fields[3].ends_with('Z'),
        "since and last reconcile: {line}"
    );
    assert_eq!(&fields[4..8], ["6/6", "2/2", "0", "-"], "{line}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_is_down_is_retried_and_reconciled_once_it_answers() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let env = Portcullis::start_with(|c| {
        c.reconcile.resync = Duration::from_secs(1);
        let mut down = c.clusters[0].clone();
        (down.name, down.server) = ("down".into(), format!("https://{closed}"));
        c.clusters.push(down);
    })
    .await;
    // Down from the start: portcullis serves the other cluster regardless.
    let down = env.reconciler.pass_now("down").await.unwrap();
    assert!(!down.outcome.reachable, "{:?}", down.outcome);
    let out = cli_ok(&env, &["admin", "cluster", "status"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("down "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains(" no ") && line.contains("listing portcullis's RBAC objects"),
        "{line}"
    );

    env.store.add_principal(&Principal::person("bo"), false).unwrap();
    let args = [
        "admin",
        "grant",
        "add",
        "--person",
        "bo",
        "--cluster",
        "down",
        "--role",
        "viewer",
        "--duration",
        "1h",
    ];
    let out = cli_ok(&env, &args);
    assert!(out.contains("binding pending: cluster down is unreachable"), "{out}");

    // The simulated cluster stops answering RBAC requests: a new grant waits.
    let rule = portcullis_sim::faults::FaultRule::new(
        "/apis/rbac.authorization.k8s.io",
        portcullis_sim::faults::FaultAction::CloseConnection,
    );
    let fault = env.sim().faults().add(rule);
    let ana = Principal::person("ana");
    env.store.add_principal(&ana, false).unwrap();
    let grant = portcullis::cli::new_grant(
        &env.config,
        ana,
        CLUSTER,
        "viewer",
        Some("shop".into()),
        Duration::from_secs(3600),
        "t",
    )
    .unwrap();
    env.store.add_grant(&grant).unwrap();
    env.reconciler.trigger(CLUSTER);
    let reconciler = env.reconciler.clone();
    let unreachable = || {
        let statuses = reconciler.status();
        async move {
            statuses
                .iter()
                .any(|s| s.cluster == CLUSTER && s.reachable == Some(false))
        }
    };
    eventually("the cluster is seen unreachable", unreachable).await;
    env.sim().faults().remove(fault);
    eventually("the grant is bound once the cluster answers", || async {
        bound(&env, "shop", &grant.id).await
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_made_protected_loses_the_bindings_of_grants_made_before() {
    let mut env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl("ana", &[("viewer", Some("payments"))], Duration::from_secs(3600));
    let id = &grants[0].id;
    assert!(bound(&env, "payments", id).await);
    env.config.protected_namespaces.push("payments".into());
    env.restart().await;
    // A pass in step (no error: new grants elsewhere still bind). The
    // restarted server's own first pass may have removed the binding
    // already: this one then wants none and finds none.
    let pass = env.reconcile().await;
    assert_eq!(pass.outcome.bindings_wanted, 0, "{:?}", pass.outcome);
    assert!(
        !bound(&env, "payments", id).await,
        "no binding is left in a protected namespace"
    );
    // The operator sees why in the grant list.
    let list = cli_ok(&env, &["admin", "grant", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with(id.as_str()))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.ends_with(" protected"), "{line}");
    env.stop().await;
}

/// A person whose grant lets them write bindings (`admin` of `shop`) cannot
/// bind portcullis's own names (`user:ana`, a grant's group) with kubectl:
/// the access would outlive the grant. Other bindings pass, and an agent's
/// such write is refused before any person is asked to approve it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_of_portcullis_identities_is_refused_and_other_bindings_are_written() {
    use crate::audit::{audit_id, row};
    let env = Portcullis::start().await;
    let (token, grants) = env.person_with_ttl("ana", &[("admin", Some("shop"))], Duration::from_secs(3600));
    let kubectl = env.kubectl(&token, "shop");
    let group = format!("portcullis:grant:{}", grants[0].id);
    for subject in [
        ["--user", "user:ana"],
        ["--user", "bot:ci"],
        ["--group", group.as_str()],
    ] {
        let err = kubectl.fails(&[
            "create",
            "rolebinding",
            "keep",
            "--clusterrole=admin",
            subject[0],
            subject[1],
        ]);
        assert!(err.contains("names one of its identities"), "{subject:?}: {err}");
    }
    let yaml =
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: keep\n  namespace: shop\n\
                roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: admin\n\
                subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: user:ana\n";
    let manifest = env.dir.path().join("keep.yaml");
    std::fs::write(&manifest, yaml).unwrap();
    let err = kubectl.fails(&["apply", "--server-side", "-f", manifest.to_str().unwrap()]);
    assert!(err.contains("names one of its identities"), "{err}");
    assert!(
        bindings(&env, "shop").await.get_opt("keep").await.unwrap().is_none(),
        "nothing was written"
    );
    kubectl.ok(&[
        "create",
        "rolebinding",
        "jane",
        "--clusterrole=view",
        "--user=jane@example.com",
    ]);
    assert!(bindings(&env, "shop").await.get_opt("jane").await.unwrap().is_some());

    let agent = env.agent("ana", &[&grants[0]]);
    let body = serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "keep"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "name": "user:ana"}]});
    let refused = env
        .raw()
        .send(
            http::Method::POST,
            &format!("/clusters/{CLUSTER}/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings"),
            &[
                ("authorization", &format!("Bearer {agent}")),
                ("content-type", "application/json"),
            ],
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    let row = row(&env, &audit_id(&refused)).await;
    assert_eq!((row.refused.as_str(), row.held), ("binds_identity", false));
    assert!(env.store.list_held().unwrap().is_empty(), "no person is asked");
    env.stop().await;
}
