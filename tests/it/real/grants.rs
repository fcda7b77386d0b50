//! Grants on the real cluster: the reconciler's ClusterRoles and
//! RoleBindings are what kube-apiserver's RBAC honours, and a grant that
//! has ended stops applying on portcullis's side at once, while its binding
//! is still there to be cleaned up.

use crate::harness::{Portcullis, Raw, RawResponse, REAL_CLUSTER};
use crate::support::eventually;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::Api;
use portcullis::identity::Grant;
use portcullis::reconcile::desired::binding_name;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// A kube-rs client as the real cluster's admin (`system:masters`), from
/// the admin's kubeconfig.
pub async fn admin_kube() -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(super::shared().admin_kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A raw client to kube-apiserver itself, with no portcullis in between.
pub fn direct() -> Raw {
    let cluster = super::shared();
    Raw::with_ca(&cluster.ca_pem, cluster.url.clone())
}

/// The grant's RoleBinding in `namespace`, as the admin sees it.
pub async fn binding(namespace: &str, grant_id: &str) -> Option<RoleBinding> {
    Api::<RoleBinding>::namespaced(admin_kube().await, namespace)
        .get_opt(&binding_name(grant_id))
        .await
        .unwrap()
}

/// The API server's own 403 message for `user` listing `resource` (core
/// group) in `namespace`.
pub fn cannot_list(user: &str, resource: &str, namespace: &str) -> String {
    format!(
        r#"{resource} is forbidden: User "{user}" cannot list resource "{resource}" in API group "" in the namespace "{namespace}""#
    )
}

/// The API server's audit events of one request, once its last stage
/// (`ResponseComplete`) is logged.
pub async fn events_of(audit_id: &str) -> Vec<serde_json::Value> {
    let cluster = super::shared();
    eventually(&format!("the API server's audit events of {audit_id}"), async || {
        let events: Vec<serde_json::Value> = cluster
            .audit_events()
            .into_iter()
            .filter(|e| e["auditID"] == audit_id)
            .collect();
        events
            .iter()
            .any(|e| e["stage"] == "ResponseComplete")
            .then_some(events)
    })
    .await
}

/// Keep the grant's binding on the cluster whatever the reconciler does
/// (it deletes the binding as soon as the grant ends): a finalizer of the
/// test's own holds it, and RBAC still honours it, until [`release`].
fn hold(namespace: &str, grant_id: &str) {
    let held = r#"{"metadata":{"finalizers":["portcullis.test/held"]}}"#;
    let name = binding_name(grant_id);
    super::shared()
        .admin(&[
            "patch",
            "rolebinding",
            &name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            held,
        ])
        .unwrap();
}

fn release(namespace: &str, grant_id: &str) {
    let name = binding_name(grant_id);
    let released = r#"{"metadata":{"finalizers":null}}"#;
    super::shared()
        .admin(&[
            "patch",
            "rolebinding",
            &name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            released,
        ])
        .unwrap();
}

/// The API server's own answer: may `group` do `verb` on ConfigMaps in
/// `namespace` (by the bindings there)?
fn rbac_allows(group: &str, verb: &str, namespace: &str) -> String {
    let args = [
        "auth",
        "can-i",
        verb,
        "configmaps",
        "-n",
        namespace,
        "--as",
        "someone",
        "--as-group",
        group,
    ];
    super::shared()
        .admin(&args)
        .unwrap_or_else(|e| e.to_string())
        .trim()
        .to_string()
}

fn configmaps(namespace: &str) -> String {
    format!("/clusters/{REAL_CLUSTER}/api/v1/namespaces/{namespace}/configmaps")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_puts_the_roles_cluster_role_and_the_grants_role_binding_on_the_real_cluster() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("grants").unwrap();
    let (_, grants) = env.person_with_ttl("ana", &[("developer", Some(&ns))], HOUR);
    let grant = &grants[0];

    let role = Api::<ClusterRole>::all(admin_kube().await)
        .get("portcullis:developer")
        .await
        .unwrap();
    assert_eq!(
        role.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
        "portcullis"
    );
    let developer = portcullis::identity::roles::builtin()
        .into_iter()
        .find(|r| r.name == "developer")
        .unwrap();
    assert_eq!(
        serde_json::to_value(&role.rules).unwrap(),
        serde_json::json!(developer.rules),
        "the API server stored the role's rules as portcullis wrote them"
    );

    let bound = binding(&ns, &grant.id).await.expect("the grant's RoleBinding exists");
    assert_eq!(bound.metadata.labels.unwrap()["portcullis.dev/grant"], grant.id);
    assert_eq!(
        (bound.role_ref.kind.as_str(), bound.role_ref.name.as_str()),
        ("ClusterRole", "portcullis:developer")
    );
    let subjects = bound.subjects.unwrap();
    assert_eq!(subjects.len(), 1, "{subjects:?}");
    assert_eq!(
        (subjects[0].kind.as_str(), subjects[0].name.clone()),
        ("Group", grant.group())
    );
    // RBAC honours it: the API server itself says the grant's group may write there.
    assert_eq!(rbac_allows(&grant.group(), "create", &ns), "yes");
    env.stop().await;
}

/// `refused` is the API server's own 403 for ana, while the grant's binding
/// is still there and RBAC alone would let its group in.
async fn refused_while_bound(refused: &RawResponse, ns: &str, grant: &Grant) {
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    assert_eq!(refused.json()["message"], cannot_list("user:ana", "configmaps", ns));
    assert!(binding(ns, &grant.id).await.is_some(), "refused before any clean-up");
    assert_eq!(
        rbac_allows(&grant.group(), "list", ns),
        "yes",
        "the cluster's RBAC alone would let it in"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_grant_is_refused_on_the_next_request_while_its_binding_is_still_there() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("expired").unwrap();
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some(&ns))], HOUR);
    let grant = &grants[0];
    assert_eq!(env.raw().get(&configmaps(&ns), &token).await.status, 200);

    hold(&ns, &grant.id);

    // The grant's hour passes at once, however long the requests take.
    env.gateway.grant_clock().advance(HOUR);
    let refused = env.raw().get(&configmaps(&ns), &token).await;
    refused_while_bound(&refused, &ns, grant).await;
    let events = events_of(&crate::audit::audit_id(&refused)).await;
    for event in &events {
        let groups = &event["impersonatedUser"]["groups"];
        assert!(
            !groups.to_string().contains(&grant.group()),
            "the ended grant's group was not sent: {event}"
        );
    }
    release(&ns, &grant.id);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_is_refused_while_its_binding_is_still_there() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("revoked").unwrap();
    let (token, grants) = env.person_with_ttl("ana", &[("viewer", Some(&ns))], HOUR);
    let grant = &grants[0];
    assert_eq!(env.raw().get(&configmaps(&ns), &token).await.status, 200);

    hold(&ns, &grant.id);

    // Revoked in the store, as by another process: portcullis's grant cache
    // learns it within its lifetime.
    env.store.revoke_grant(&grant.id).unwrap();
    let refused = eventually("the revoked grant to stop applying", async || {
        let response = env.raw().get(&configmaps(&ns), &token).await;
        match response.status.as_u16() {
            200 => Err("still listed".to_string()),
            _ => Ok(response),
        }
    })
    .await;
    refused_while_bound(&refused, &ns, grant).await;
    release(&ns, &grant.id);
    env.stop().await;
}

/// On the real cluster, an `admin` of a namespace may bind anyone to what
/// they hold, the escalation check passes: through portcullis a binding
/// of their own name (which would outlive their grant) is refused, and
/// another binding, sent by kubectl as protobuf and re-sent by portcullis
/// after reading it, is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_cannot_bind_their_own_name_to_outlive_their_grant_but_binds_others() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("binds").unwrap();
    let (token, grants) = env.person_with_ttl("ana", &[("admin", Some(&ns))], HOUR);
    eventually("the grant bound", async || binding(&ns, &grants[0].id).await.is_some()).await;
    let kubectl = env.kubectl(&token, &ns);
    let err = kubectl.fails(&[
        "create",
        "rolebinding",
        "keep",
        "--clusterrole=admin",
        "--user=user:ana",
    ]);
    assert!(err.contains("names one of its identities"), "{err}");
    // The cluster's RBAC may take a moment to see the grant's binding.
    eventually("a binding of someone else written", async || {
        kubectl
            .run(&[
                "create",
                "rolebinding",
                "jane",
                "--clusterrole=view",
                "--user=jane@example.com",
            ])
            .status
            .success()
    })
    .await;
    let rolebindings = Api::<RoleBinding>::namespaced(admin_kube().await, &ns);
    let jane = rolebindings.get("jane").await.unwrap();
    assert_eq!(jane.subjects.unwrap()[0].name, "jane@example.com");
    assert!(rolebindings.get_opt("keep").await.unwrap().is_none());
    env.stop().await;
}
