//! Two installations in front of one real cluster (two tests sharing it, or
//! staging and production) never touch each other's RBAC objects.

use crate::harness::{Portcullis, REAL_CLUSTER};
use crate::support::eventually;
use portcullis::identity::Principal;

/// The names of the RoleBindings in `ns` labelled with installation `id`.
fn bindings_of(ns: &str, id: &str) -> Vec<String> {
    let selector = format!("portcullis.dev/instance={id}");
    let out = super::shared()
        .admin(&["get", "rolebindings", "-n", ns, "-l", &selector, "-o", "name"])
        .unwrap();
    out.lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn revoking_a_grant_in_one_installation_leaves_the_others_binding_and_shared_role() {
    let staging = Portcullis::start_real().await;
    let production = Portcullis::start_real().await;
    let (a, b) = (
        staging.reconciler.instance().to_string(),
        production.reconciler.instance().to_string(),
    );
    assert_ne!(a, b, "each store makes its own instance id");
    let ns = super::shared().namespace("instances").unwrap();
    let ana_staging = staging.person("ana", &[("viewer", Some(&ns))]);
    let ana_production = production.person("ana", &[("viewer", Some(&ns))]);
    assert_eq!(bindings_of(&ns, &a).len(), 1);
    assert_eq!(bindings_of(&ns, &b).len(), 1);

    // Both installations use portcullis:viewer, each with its own mark.
    let labels = super::shared()
        .admin(&[
            "get",
            "clusterrole",
            "portcullis:viewer",
            "-o",
            "jsonpath={.metadata.labels}",
        ])
        .unwrap();
    assert!(labels.contains(&format!("instance.portcullis.dev/{a}")), "{labels}");
    assert!(labels.contains(&format!("instance.portcullis.dev/{b}")), "{labels}");

    let grant = staging
        .store
        .grants_of(&Principal::person("ana"), REAL_CLUSTER)
        .unwrap()
        .pop()
        .expect("ana's grant in staging");
    staging.store.revoke_grant(&grant.id).unwrap();
    staging.reconcile().await;
    production.reconcile().await;

    assert!(bindings_of(&ns, &a).is_empty(), "staging removed its own binding");
    assert_eq!(bindings_of(&ns, &b).len(), 1, "production's binding is untouched");
    let path = format!("/clusters/{REAL_CLUSTER}/api/v1/namespaces/{ns}/configmaps");
    let still = production.raw().get(&path, &ana_production).await;
    assert_eq!(still.status, 200, "{}", String::from_utf8_lossy(&still.body));
    let refused = eventually("staging refuses the revoked grant", async || {
        let r = staging.raw().get(&path, &ana_staging).await;
        (r.status == 403).then_some(r)
    })
    .await;
    assert_eq!(refused.status, 403);
}
