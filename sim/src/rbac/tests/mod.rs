use super::*;
use crate::request_info::classify;
use http::Method;
use serde_json::json;

fn request(method: &str, path: &str) -> RequestInfo {
    let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
    classify(&method.parse::<Method>().unwrap(), path, query).expect("the path classifies")
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name}, "rules": rules})
}

fn role(namespace: &str, name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": namespace}, "rules": rules})
}

fn cluster_binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": subjects})
}

fn binding(namespace: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name, "namespace": namespace},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
           "subjects": subjects})
}

fn ana() -> Value {
    json!([{"kind": "User", "name": "user:ana"}])
}

/// One ClusterRole with `rules` bound cluster-wide to user:ana.
fn granting(rules: Value) -> StaticObjects {
    StaticObjects::new([cluster_role("r", rules), cluster_binding("b", "r", ana())])
}

fn ana_may(objects: &StaticObjects, method: &str, path: &str) -> bool {
    allowed(
        objects,
        &user("user:ana", &["system:authenticated"]),
        &request(method, path),
    )
}

#[test]
fn wildcards_match_every_verb_group_and_resource() {
    let objects = granting(json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]));
    assert!(ana_may(
        &objects,
        "DELETE",
        "/apis/apps/v1/namespaces/shop/deployments/web"
    ));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web/log"));
    assert!(ana_may(&objects, "GET", "/api/v1/nodes"));
    // Resource wildcards say nothing about non-resource paths.
    assert!(!ana_may(&objects, "GET", "/metrics"));
}

#[test]
fn verbs_and_groups_must_match_exactly() {
    let objects = granting(json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}]));
    assert!(ana_may(
        &objects,
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments/web"
    ));
    assert!(ana_may(&objects, "GET", "/apis/apps/v1/deployments"));
    assert!(!ana_may(
        &objects,
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments?watch=1"
    ));
    assert!(!ana_may(
        &objects,
        "PATCH",
        "/apis/apps/v1/namespaces/shop/deployments/web"
    ));
    assert!(!ana_may(
        &objects,
        "GET",
        "/apis/extensions/v1beta1/namespaces/shop/deployments/web"
    ));
}

#[test]
fn subresources_match_exactly_or_through_star_slash() {
    let objects = granting(json!([
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["get"]},
    ]));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web/log"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web/exec"));
    assert!(ana_may(
        &objects,
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments/web/scale"
    ));
    assert!(ana_may(
        &objects,
        "GET",
        "/apis/apps/v1/namespaces/shop/statefulsets/db/scale"
    ));
    assert!(!ana_may(
        &objects,
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments/web/status"
    ));
    assert!(!ana_may(
        &objects,
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments/web"
    ));
}

#[test]
fn a_resource_rule_does_not_reach_its_subresources_and_pods_star_is_not_a_wildcard() {
    let objects = granting(json!([{"apiGroups": [""], "resources": ["pods", "pods/*"], "verbs": ["get"]}]));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web"));
    // kube-apiserver knows only `*` and `*/<subresource>`: `pods/*` is literal.
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web/log"));
}

#[test]
fn resource_names_restrict_named_requests_and_never_match_collections() {
    let objects =
        granting(json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"], "verbs": ["*"]}]));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/configmaps/x"));
    assert!(ana_may(&objects, "PUT", "/api/v1/namespaces/shop/configmaps/x"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/shop/configmaps/y"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/shop/configmaps"));
    assert!(!ana_may(
        &objects,
        "GET",
        "/api/v1/namespaces/shop/configmaps?watch=true"
    ));
    assert!(!ana_may(&objects, "POST", "/api/v1/namespaces/shop/configmaps"));
    assert!(!ana_may(&objects, "DELETE", "/api/v1/namespaces/shop/configmaps"));
}

#[test]
fn non_resource_urls_match_exactly_or_by_star_prefix() {
    let objects = granting(json!([{"nonResourceURLs": ["/healthz", "/apis/*", "/logs*"], "verbs": ["get"]}]));
    assert!(ana_may(&objects, "GET", "/healthz"));
    assert!(!ana_may(&objects, "GET", "/healthz/etcd"));
    assert!(ana_may(&objects, "GET", "/apis/apps/v1"));
    assert!(!ana_may(&objects, "GET", "/apis"));
    assert!(ana_may(&objects, "GET", "/logs"));
    assert!(ana_may(&objects, "GET", "/logs/kube-apiserver.log"));
    assert!(!ana_may(&objects, "POST", "/healthz"));
    // Non-resource rules never allow resource requests.
    assert!(!ana_may(&objects, "GET", "/apis/apps/v1/deployments"));
}

#[test]
fn non_resource_rules_count_only_through_cluster_role_bindings() {
    let objects = StaticObjects::new([
        cluster_role("metrics", json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])),
        binding("shop", "b", "ClusterRole", "metrics", ana()),
    ]);
    assert!(!ana_may(&objects, "GET", "/metrics"));
}

#[test]
fn a_role_binding_grants_its_cluster_role_only_in_its_namespace() {
    let objects = StaticObjects::new([
        cluster_role(
            "reader",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
        ),
        binding("shop", "b", "ClusterRole", "reader", ana()),
    ]);
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods"));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods/web"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/bank/pods"));
    assert!(!ana_may(&objects, "GET", "/api/v1/pods"));
}

#[test]
fn a_cluster_role_binding_grants_everywhere() {
    let objects = granting(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/pods"));
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/bank/pods"));
    assert!(ana_may(&objects, "GET", "/api/v1/pods"));
}

#[test]
fn a_role_binding_uses_the_role_of_its_own_namespace() {
    let objects = StaticObjects::new([
        role(
            "bank",
            "r",
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
        ),
        role(
            "shop",
            "r",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        ),
        binding("shop", "b", "Role", "r", ana()),
    ]);
    assert!(ana_may(&objects, "GET", "/api/v1/namespaces/shop/configmaps/x"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/shop/secrets/x"));
    assert!(!ana_may(&objects, "GET", "/api/v1/namespaces/bank/secrets/x"));
}

#[test]
fn service_account_subjects_match_the_service_account_user() {
    let read = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
    let objects = StaticObjects::new([
        cluster_role("reader", read),
        // Namespace given: matches that ServiceAccount wherever it is bound.
        binding(
            "shop",
            "explicit",
            "ClusterRole",
            "reader",
            json!([{"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]),
        ),
        // Namespace omitted in a RoleBinding: the binding's namespace.
        binding(
            "bank",
            "implicit",
            "ClusterRole",
            "reader",
            json!([{"kind": "ServiceAccount", "name": "ci"}]),
        ),
        // Namespace omitted in a ClusterRoleBinding: matches nobody.
        cluster_binding("nobody", "reader", json!([{"kind": "ServiceAccount", "name": "ci"}])),
    ]);
    let tools_ci = user("system:serviceaccount:tools:ci", &["system:serviceaccounts"]);
    let bank_ci = user("system:serviceaccount:bank:ci", &[]);
    let pod = |ns: &str| request("GET", &format!("/api/v1/namespaces/{ns}/pods/p"));
    assert!(allowed(&objects, &tools_ci, &pod("shop")));
    assert!(!allowed(&objects, &tools_ci, &pod("bank")));
    assert!(allowed(&objects, &bank_ci, &pod("bank")));
    assert!(!allowed(&objects, &bank_ci, &pod("shop")));
    assert!(!allowed(
        &objects,
        &user("system:serviceaccount:tools:cid", &[]),
        &pod("shop")
    ));
    assert!(!allowed(&objects, &user("ci", &[]), &pod("bank")));
}

#[test]
fn group_subjects_match_any_of_the_users_groups() {
    let objects = StaticObjects::new([
        cluster_role(
            "r",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
        ),
        cluster_binding("b", "r", json!([{"kind": "Group", "name": "portcullis:grant:7"}])),
    ]);
    let list = request("GET", "/api/v1/pods");
    assert!(allowed(&objects, &user("user:bo", &["x", "portcullis:grant:7"]), &list));
    assert!(!allowed(&objects, &user("portcullis:grant:7", &["x"]), &list));
}

#[test]
fn system_masters_is_allowed_without_any_binding() {
    let decision = authorize(
        &StaticObjects::default(),
        &user("admin", &["system:masters"]),
        &request("DELETE", "/api/v1/nodes/n1"),
    );
    assert_eq!(
        decision,
        Decision {
            allowed: true,
            reason: String::new()
        }
    );
}

#[test]
fn the_allowed_reason_names_binding_role_and_subject() {
    let objects = StaticObjects::new([
        cluster_role(
            "view",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
        ),
        binding(
            "shop",
            "ci-view",
            "ClusterRole",
            "view",
            json!([{"kind": "ServiceAccount", "name": "ci"}]),
        ),
    ]);
    let decision = authorize(
        &objects,
        &user("system:serviceaccount:shop:ci", &[]),
        &request("GET", "/api/v1/namespaces/shop/pods/p"),
    );
    assert_eq!(
        decision.reason,
        "RBAC: allowed by RoleBinding \"ci-view/shop\" of ClusterRole \"view\" to ServiceAccount \"ci/shop\""
    );
    let bootstrap = StaticObjects::new(bootstrap_objects());
    let decision = authorize(
        &bootstrap,
        &user("u", &["system:authenticated"]),
        &request("GET", "/version"),
    );
    assert_eq!(
        decision.reason,
        "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""
    );
}

#[test]
fn a_binding_to_a_missing_role_is_reported_in_the_403() {
    let objects = StaticObjects::new([
        cluster_binding("b1", "gone", ana()),
        binding("shop", "b2", "Role", "absent", ana()),
        binding("shop", "b3", "Role", "absent", ana()),
    ]);
    let ana = user("user:ana", &[]);
    let denied = check(&objects, &ana, &request("GET", "/api/v1/namespaces/shop/pods")).unwrap_err();
    assert_eq!(
        denied.message,
        "pods is forbidden: User \"user:ana\" cannot list resource \"pods\" in API group \"\" in the namespace \"shop\": RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"absent\" not found]"
    );
    let denied = check(&objects, &ana, &request("GET", "/api/v1/nodes")).unwrap_err();
    assert!(denied
        .message
        .ends_with(": RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"));
    // Bindings for someone else add nothing.
    let other = check(&objects, &user("user:bo", &[]), &request("GET", "/api/v1/nodes")).unwrap_err();
    assert!(other.message.ends_with("at the cluster scope"), "{}", other.message);
}

mod policy;
