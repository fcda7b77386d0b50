//! The shared control plane is what the tests claim it is.

use super::cluster::{PORTCULLIS_NAMESPACE, PORTCULLIS_SERVICE_ACCOUNT};
use crate::harness::Portcullis;
use crate::support::eventually;

#[test]
fn the_real_api_server_is_the_release_kubectl_pairs_with() {
    let cluster = super::shared();
    let version: serde_json::Value =
        serde_json::from_str(&cluster.admin(&["get", "--raw", "/version"]).unwrap()).unwrap();
    assert_eq!(version["gitVersion"], "v1.37.2", "{version}");
    assert_eq!(version["minor"], "37", "{version}");
}

#[test]
fn portcullis_service_account_holds_exactly_the_deployed_rbac() {
    let cluster = super::shared();
    let sa = format!("system:serviceaccount:{PORTCULLIS_NAMESPACE}:{PORTCULLIS_SERVICE_ACCOUNT}");
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i", "--as", &sa];
        all.extend_from_slice(args);
        cluster
            .admin(&all)
            .map(|out| out.trim().to_string())
            .unwrap_or_else(|_| "no".into())
    };
    assert_eq!(can(&["impersonate", "users"]), "yes");
    assert_eq!(can(&["impersonate", "groups"]), "yes");
    assert_eq!(can(&["list", "clusterroles.rbac.authorization.k8s.io"]), "yes");
    // It never reads or writes workloads as itself.
    assert_eq!(can(&["list", "pods", "-A"]), "no");
    assert_eq!(can(&["get", "secrets", "-A"]), "no");
    assert_eq!(can(&["impersonate", "serviceaccounts"]), "no");
}

#[test]
fn the_controller_manager_gives_a_new_namespace_its_default_service_account() {
    let cluster = super::shared();
    // `namespace()` returns only once the ServiceAccount exists.
    let ns = cluster.namespace("fixture").unwrap();
    let out = cluster
        .admin(&["get", "serviceaccount", "default", "-n", &ns, "-o", "name"])
        .unwrap();
    assert_eq!(out.trim(), "serviceaccount/default");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_through_portcullis_is_in_the_api_servers_audit_log_under_the_same_id() {
    let env = Portcullis::start_real().await;
    let cluster = super::shared();
    let ns = cluster.namespace("audit-id").unwrap();
    let token = env.person("ana", &[("viewer", Some(&ns))]);
    let response = env
        .raw()
        .get(&format!("/clusters/real/api/v1/namespaces/{ns}/configmaps"), &token)
        .await;
    assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
    let audit_id = response.headers["audit-id"].to_str().unwrap().to_string();
    let events = eventually("the API server's audit events for the request", async || {
        let events: Vec<serde_json::Value> = cluster
            .audit_events()
            .into_iter()
            .filter(|e| e["auditID"] == audit_id.as_str())
            .collect();
        events
            .iter()
            .any(|e| e["stage"] == "ResponseComplete")
            .then_some(events)
    })
    .await;
    let complete = events.iter().find(|e| e["stage"] == "ResponseComplete").unwrap();
    assert_eq!(complete["impersonatedUser"]["username"], "user:ana", "{complete}");
    assert_eq!(complete["responseStatus"]["code"], 200, "{complete}");
}
