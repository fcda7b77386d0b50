//! The bootstrap policy, the 403 wording, rules reviews and speed.

use super::*;

#[test]
fn bootstrap_view_cannot_read_secrets_but_edit_and_admin_can() {
    let mut objects = bootstrap_objects();
    for (name, role) in [("v", "view"), ("e", "edit"), ("a", "admin")] {
        objects.push(binding(
            "shop",
            name,
            "ClusterRole",
            role,
            json!([{"kind": "User", "name": name}]),
        ));
    }
    let objects = StaticObjects::new(objects);
    let may = |who: &str, method: &str, path: &str| {
        allowed(&objects, &user(who, &["system:authenticated"]), &request(method, path))
    };
    let secret = "/api/v1/namespaces/shop/secrets/db";
    assert!(!may("v", "GET", secret));
    assert!(may("e", "GET", secret) && may("a", "GET", secret));
    assert!(may("v", "GET", "/api/v1/namespaces/shop/pods/web/log"));
    assert!(may("v", "GET", "/apis/apps/v1/namespaces/shop/deployments"));
    assert!(!may("v", "PATCH", "/apis/apps/v1/namespaces/shop/deployments/web"));
    assert!(may("e", "PATCH", "/apis/apps/v1/namespaces/shop/deployments/web/scale"));
    assert!(may("e", "POST", "/api/v1/namespaces/shop/pods/web/exec"));
    assert!(!may(
        "e",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings"
    ));
    assert!(may(
        "a",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings"
    ));
    assert!(!may("a", "GET", "/api/v1/namespaces/bank/secrets/db"));
    assert!(!may("a", "GET", "/api/v1/nodes"));
}

#[test]
fn bootstrap_lets_every_authenticated_user_discover_and_review_itself() {
    let objects = StaticObjects::new(bootstrap_objects());
    let someone = user("user:zoe", &["system:authenticated"]);
    for path in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps/v1",
        "/version",
        "/openapi/v3",
        "/healthz",
        "/livez",
        "/readyz",
    ] {
        assert!(allowed(&objects, &someone, &request("GET", path)), "{path}");
    }
    assert!(!allowed(&objects, &someone, &request("GET", "/metrics")));
    for path in [
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    ] {
        assert!(allowed(&objects, &someone, &request("POST", path)), "{path}");
    }
    assert!(!allowed(
        &objects,
        &someone,
        &request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews")
    ));
    assert!(!allowed(
        &objects,
        &someone,
        &request("GET", "/api/v1/namespaces/default/pods")
    ));
    let anonymous = user("system:anonymous", &["system:unauthenticated"]);
    assert!(allowed(&objects, &anonymous, &request("GET", "/version")));
    assert!(!allowed(&objects, &anonymous, &request("GET", "/api")));
}

#[test]
fn bootstrap_cluster_admin_binding_names_system_masters() {
    let objects = bootstrap_objects();
    let binding = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == "cluster-admin")
        .expect("cluster-admin binding");
    assert_eq!(
        binding["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}])
    );
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
    // And the role behind it allows everything to anyone bound to it.
    let objects = StaticObjects::new(bootstrap_objects().into_iter().chain([cluster_binding(
        "ana-admin",
        "cluster-admin",
        ana(),
    )]));
    assert!(ana_may(&objects, "DELETE", "/api/v1/nodes/n1"));
    assert!(ana_may(&objects, "GET", "/metrics"));
}

#[test]
fn forbidden_messages_match_kube_apiserver() {
    let ana = user("user:ana", &[]);
    let cases = [
        ("DELETE", "/api/v1/namespaces/shop/pods/web",
         "pods \"web\" is forbidden: User \"user:ana\" cannot delete resource \"pods\" in API group \"\" in the namespace \"shop\"",
         ("web", "", "pods")),
        ("GET", "/api/v1/namespaces/shop/pods",
         "pods is forbidden: User \"user:ana\" cannot list resource \"pods\" in API group \"\" in the namespace \"shop\"",
         ("", "", "pods")),
        ("GET", "/apis/apps/v1/namespaces/shop/deployments/web/scale",
         "deployments.apps \"web\" is forbidden: User \"user:ana\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"shop\"",
         ("web", "apps", "deployments")),
        ("GET", "/api/v1/nodes",
         "nodes is forbidden: User \"user:ana\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
         ("", "", "nodes")),
        ("GET", "/metrics", "forbidden: User \"user:ana\" cannot get path \"/metrics\"", ("", "", "")),
        ("GET", "/api/v1/namespaces/shop",
         "namespaces \"shop\" is forbidden: User \"user:ana\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"shop\"",
         ("shop", "", "namespaces")),
    ];
    for (method, path, message, (name, group, kind)) in cases {
        let status = forbidden(&ana, &request(method, path));
        assert_eq!(status.message, message);
        assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        let details = status.details.expect("details");
        assert_eq!(
            (details.name.as_str(), details.group.as_str(), details.kind.as_str()),
            (name, group, kind)
        );
    }
}

#[test]
fn forbidden_quotes_names_the_way_go_does() {
    assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
    assert_eq!(go_quote("tab\there\u{1}é"), "\"tab\\there\\x01é\"");
    let status = forbidden(&user("we\"ird", &[]), &request("GET", "/api/v1/nodes"));
    assert!(status.message.contains("User \"we\\\"ird\""), "{}", status.message);
}

#[test]
fn rules_review_lists_cluster_then_namespace_rules() {
    let objects = StaticObjects::new([
        cluster_role("disc", json!([{"nonResourceURLs": ["/api"], "verbs": ["get"]}])),
        cluster_role(
            "cm",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"], "verbs": ["get"]}]),
        ),
        cluster_binding("disc", "disc", ana()),
        binding("shop", "cm", "ClusterRole", "cm", ana()),
        binding("shop", "broken", "Role", "missing", ana()),
    ]);
    let ana = user("user:ana", &[]);
    let review = rules_review(&objects, &ana, "shop");
    assert_eq!(
        review.non_resource_rules,
        vec![json!({"verbs": ["get"], "nonResourceURLs": ["/api"]})]
    );
    assert_eq!(
        review.resource_rules,
        vec![json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"]})]
    );
    assert_eq!(
        review.evaluation_error,
        "role.rbac.authorization.k8s.io \"missing\" not found"
    );
    let (resource_rules, non_resource_rules) = rules_for(&objects, &ana, "bank");
    assert!(resource_rules.is_empty());
    assert_eq!(non_resource_rules.len(), 1);
}

#[test]
fn among_many_bindings_only_the_callers_own_group_allows() {
    let mut objects = bootstrap_objects();
    for i in 0..50 {
        objects.push(binding(
            "shop",
            &format!("b{i}"),
            "ClusterRole",
            "view",
            json!([{"kind": "Group", "name": format!("portcullis:grant:{i}")}]),
        ));
    }
    let objects = StaticObjects::new(objects);
    let info = request("GET", "/apis/apps/v1/namespaces/shop/deployments/web");
    // Speed is measured by `benches/sim.rs`, not asserted here.
    assert!(allowed(
        &objects,
        &user("user:ana", &["portcullis:grant:49", "system:authenticated"]),
        &info
    ));
    assert!(!allowed(
        &objects,
        &user("user:ana", &["portcullis:grant:50", "system:authenticated"]),
        &info
    ));
}
