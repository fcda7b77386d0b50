//! Two installations of portcullis in front of one cluster (staging and
//! production, or two tests): each labels what it manages with its own
//! instance id, reconciles only its own bindings, and shares the
//! ClusterRoles without taking them from the other.

use crate::harness::{Portcullis, CLUSTER};
use crate::rbac::{bindings, bound, cli_ok};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, Patch, PatchParams};
use portcullis::config::roles::Role;
use portcullis::identity::Principal;
use serde_json::json;
use std::time::Duration;

/// The ClusterRoles, as the cluster's admin sees them.
async fn cluster_roles(env: &Portcullis) -> Api<ClusterRole> {
    Api::all(crate::support::kube_client(env.sim(), env.sim().admin_token()).await)
}

/// The label keys of `role` that mark an installation's use of it.
async fn marks(env: &Portcullis, role: &str) -> Vec<String> {
    let role = cluster_roles(env).await.get(role).await.unwrap();
    let mut marks: Vec<String> = role
        .metadata
        .labels
        .unwrap_or_default()
        .into_keys()
        .filter(|k| k.starts_with("instance.portcullis.dev/"))
        .collect();
    marks.sort();
    marks
}

fn mark(env: &Portcullis) -> String {
    format!("instance.portcullis.dev/{}", env.reconciler.instance())
}

/// The field managers holding fields of `role`.
fn managers(role: ClusterRole) -> Vec<String> {
    let entries = role.metadata.managed_fields.unwrap_or_default();
    entries.into_iter().filter_map(|m| m.manager).collect()
}

/// (applied, removed) of a pass.
fn counts(report: &portcullis::reconcile::pass::PassReport) -> (usize, usize) {
    (report.outcome.applied, report.outcome.removed)
}

/// Grant `ana` `role` in shop for an hour in `env`'s store, without a pass.
fn stored_grant(env: &Portcullis, role: &str) -> String {
    let ana = Principal::person("ana");
    let _ = env.store.add_principal(&ana, false);
    let hour = Duration::from_secs(3600);
    let grant = portcullis::cli::new_grant(&env.config, ana, CLUSTER, role, Some("shop".into()), hour, "t").unwrap();
    env.store.add_grant(&grant).unwrap();
    grant.id
}

/// The binding of grant `id` as portcullis wrote it before instance ids:
/// labelled managed-by only (and applied by field manager `portcullis`).
fn unmarked_binding(id: &str) -> serde_json::Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("portcullis-grant-{id}"), "namespace": "shop",
                     "labels": {"app.kubernetes.io/managed-by": "portcullis", "portcullis.dev/grant": id}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "portcullis:viewer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": format!("portcullis:grant:{id}")}]
    })
}

/// A custom role reading pods' logs, with `verbs`.
fn log_reader(name: &str, verbs: &[&str]) -> Role {
    Role {
        name: name.into(),
        rules: vec![json!({"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": verbs})],
        reveals_secrets: false,
        namespaced: false,
        max_duration: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_installations_bind_only_their_own_grants_and_revoking_in_one_leaves_the_others_binding() {
    let staging = Portcullis::start().await;
    let production = Portcullis::start_beside(&staging, |_| {}).await;
    assert_ne!(staging.reconciler.instance(), production.reconciler.instance());
    let (ana, ana_grants) = staging.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let (bo, bo_grants) = production.person_with_ttl("bo", &[("viewer", Some("shop"))], Duration::from_secs(3600));
    let (ana_grant, bo_grant) = (&ana_grants[0].id, &bo_grants[0].id);
    assert!(bound(&staging, "shop", ana_grant).await && bound(&staging, "shop", bo_grant).await);
    let instance_of = |binding: RoleBinding| binding.metadata.labels.unwrap()["portcullis.dev/instance"].clone();
    let api = bindings(&staging, "shop").await;
    let bo_binding = api.get(&format!("portcullis-grant-{bo_grant}")).await.unwrap();
    assert_eq!(instance_of(bo_binding), production.reconciler.instance().id());

    // Each pass sees only its own bindings: neither removes the other's.
    for env in [&staging, &production] {
        let report = env.reconcile().await;
        assert_eq!(
            (report.outcome.applied, report.outcome.removed),
            (0, 0),
            "{:?}",
            report.outcome
        );
    }
    staging.store.revoke_grant(ana_grant).unwrap();
    let report = staging.reconcile().await;
    assert_eq!(report.outcome.removed, 1, "{:?}", report.outcome);
    assert!(!bound(&staging, "shop", ana_grant).await);
    assert!(
        bound(&staging, "shop", bo_grant).await,
        "production's binding is not staging's to remove"
    );
    production.kubectl(&bo, "shop").ok(&["get", "pods"]);
    let err = staging.kubectl(&ana, "shop").fails(&["get", "pods"]);
    assert!(err.contains("forbidden"), "{err}");
    production.stop().await;
    staging.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_only_one_installation_uses_goes_when_it_stops_while_a_shared_one_keeps_the_others_mark() {
    let roles = [
        log_reader("shared-logs", &["get"]),
        log_reader("own-logs", &["get", "list"]),
    ];
    let mut staging = Portcullis::start_with(|c| c.roles.extend(roles.clone())).await;
    let production = Portcullis::start_beside(&staging, |c| c.roles.push(roles[0].clone())).await;
    let mut both = vec![mark(&production), mark(&staging)];
    both.sort();
    assert_eq!(marks(&staging, "portcullis:shared-logs").await, both);
    assert_eq!(marks(&staging, "portcullis:own-logs").await, [mark(&staging)]);
    assert_eq!(
        marks(&staging, "portcullis:viewer").await,
        both,
        "the built-in roles are shared"
    );

    // Staging drops both custom roles; its id survives the restart.
    let before = staging.reconciler.instance().clone();
    staging.config.roles.clear();
    staging.restart().await;
    assert_eq!(*staging.reconciler.instance(), before);
    // The restarted loop's first pass may be the one that does it.
    staging.reconcile().await;
    let api = cluster_roles(&staging).await;
    assert!(api.get_opt("portcullis:own-logs").await.unwrap().is_none());
    let shared = api.get("portcullis:shared-logs").await.unwrap();
    assert_eq!(marks(&staging, "portcullis:shared-logs").await, [mark(&production)]);
    let verbs = &shared.rules.as_ref().unwrap()[0].verbs;
    assert_eq!(verbs, &["get"], "production's rules are kept");
    let staging_manager = staging.reconciler.instance().field_manager();
    assert!(!managers(shared).contains(&staging_manager));
    assert_eq!(counts(&production.reconcile().await), (0, 0), "production is in step");
    production.stop().await;
    staging.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_two_installations_define_differently_is_reported_not_fought_over() {
    let staging = Portcullis::start_with(|c| c.roles.push(log_reader("logs", &["get"]))).await;
    let mut production = Portcullis::start_beside(&staging, |_| {}).await;
    let api = cluster_roles(&staging).await;
    let version = async || api.get("portcullis:logs").await.unwrap().metadata.resource_version;
    let unmarked = version().await;
    let other_rules = log_reader("logs", &["get", "list", "watch"]);
    production.config.roles.push(other_rules);
    production.restart().await;
    let conflict = format!(
        "installation {} defines it with other rules",
        staging.reconciler.instance()
    );
    let mut marked = None;
    for _ in 0..3 {
        let report = production.reconciler.pass_now(CLUSTER).await.unwrap();
        let errors = report.outcome.errors.join("; ");
        assert!(errors.contains(&conflict), "{errors}");
        assert_eq!(report.outcome.roles_in_step, report.outcome.roles_wanted - 1);
        assert_eq!(
            counts(&staging.reconcile().await),
            (0, 0),
            "staging has nothing to take back"
        );
        // Marked once, then left alone by both: no flip-flop.
        let now = version().await;
        assert_ne!(now, unmarked);
        assert_eq!(*marked.get_or_insert(now.clone()), now);
    }
    let role = api.get("portcullis:logs").await.unwrap();
    assert_eq!(role.rules.as_ref().unwrap()[0].verbs, ["get"], "staging's rules stay");
    assert!(role.metadata.labels.unwrap().contains_key(&mark(&production)));
    let status = cli_ok(&production, &["admin", "cluster", "status"]);
    assert!(status.contains(&conflict), "{status}");
    production.stop().await;
    staging.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_from_before_instance_ids_are_adopted_only_by_the_installation_whose_grant_they_bind() {
    let env = Portcullis::start().await;
    let (kept, revoked) = (stored_grant(&env, "viewer"), stored_grant(&env, "developer"));
    env.store.revoke_grant(&revoked).unwrap();
    let api = bindings(&env, "shop").await;
    let someone_elses = "0197a000-0000-7000-8000-000000000000";
    for id in [kept.as_str(), revoked.as_str(), someone_elses] {
        let params = PatchParams::apply("portcullis").force();
        let name = format!("portcullis-grant-{id}");
        api.patch(&name, &params, &Patch::Apply(unmarked_binding(id)))
            .await
            .unwrap();
    }

    let report = env.reconcile().await;
    assert_eq!(report.outcome.removed, 1, "{:?}", report.outcome);
    let adopted = api.get(&format!("portcullis-grant-{kept}")).await.unwrap();
    let labels = adopted.metadata.labels.unwrap();
    assert_eq!(labels["portcullis.dev/instance"], env.reconciler.instance().id());
    assert!(
        !bound(&env, "shop", &revoked).await,
        "its own revoked grant's binding is removed"
    );
    assert!(
        bound(&env, "shop", someone_elses).await,
        "another installation's grant: left to it"
    );
    env.kubectl(
        &env.store
            .issue_credential(&Principal::person("ana"), "t", None)
            .unwrap()
            .1,
        "shop",
    )
    .ok(&["get", "pods"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_status_shows_the_instance_id_made_by_the_store_or_configured() {
    let env = Portcullis::start().await;
    let status = cli_ok(&env, &["admin", "cluster", "status"]);
    let line = format!("instance {} (made by the store)", env.reconciler.instance());
    assert!(status.starts_with(&line), "{status}");
    assert_eq!(env.reconciler.instance().id(), env.store.instance_id().unwrap());

    let named = Portcullis::start_beside(&env, |c| c.reconcile.instance = Some("staging".into())).await;
    assert_eq!(named.reconciler.instance().id(), "staging");
    let status = cli_ok(&named, &["admin", "cluster", "status"]);
    assert!(
        status.starts_with("instance staging ([reconcile] instance)"),
        "{status}"
    );
    let (_, grants) = named.person_with_ttl("ana", &[("viewer", Some("shop"))], Duration::from_secs(60));
    let binding = bindings(&env, "shop")
        .await
        .get(&format!("portcullis-grant-{}", grants[0].id))
        .await
        .unwrap();
    assert_eq!(binding.metadata.labels.unwrap()["portcullis.dev/instance"], "staging");
    named.stop().await;
    env.stop().await;
}

/// A grant's binding deleted and made again bound to another role (a
/// namespace's admin may) is put back: `roleRef` cannot change, so the
/// pass deletes it and makes it anew rather than fail on every pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_made_again_bound_to_another_role_is_put_back() {
    let env = Portcullis::start().await;
    let id = stored_grant(&env, "viewer");
    env.reconcile().await;
    let api: Api<RoleBinding> = Api::namespaced(
        crate::support::kube_client(env.sim(), env.sim().admin_token()).await,
        "shop",
    );
    let name = format!("portcullis-grant-{id}");
    assert_eq!(api.get(&name).await.unwrap().role_ref.name, "portcullis:viewer");
    // Made again bound to admin: with portcullis's labels, then without
    // them, so that no list of its own finds it.
    for keep_labels in [true, false] {
        let mut remade = api.get(&name).await.unwrap();
        api.delete(&name, &Default::default()).await.unwrap();
        remade.role_ref.name = "portcullis:admin".into();
        if !keep_labels {
            remade.metadata.labels = None;
        }
        (remade.metadata.resource_version, remade.metadata.uid) = (None, None);
        remade.metadata.managed_fields = None;
        api.create(&Default::default(), &remade).await.unwrap();
        let report = env.reconcile().await;
        assert!(report.outcome.errors.is_empty(), "{:?}", report.outcome.errors);
        assert_eq!(
            api.get(&name).await.unwrap().role_ref.name,
            "portcullis:viewer",
            "{keep_labels}"
        );
    }
    env.stop().await;
}
