use super::*;
use http::Method;

#[test]
fn dry_run_and_writes_are_flagged_from_the_request() {
    let info = classify(
        &http::Method::POST,
        "/api/v1/namespaces/shop/configmaps",
        Some("dryRun=All&fieldManager=kubectl"),
    );
    let mut row = AuditRow::default();
    row.classify(&info);
    assert!(row.write && row.dry_run && !row.discovery);
    assert_eq!(
        (row.verb.as_str(), row.namespace.as_str(), row.resource.as_str()),
        ("create", "shop", "configmaps")
    );
    let discovery = classify(&http::Method::GET, "/apis/apps/v1", None);
    row.classify(&discovery);
    assert!(row.discovery && !row.write && !row.dry_run);
}

fn info(method: Method, path: &str) -> RequestInfo {
    let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
    classify(&method, path, query)
}

/// (method, path, verb, group, version, namespace, resource, subresource, name)
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);
const TABLE: &[Row] = &[
    ("GET", "/api/v1/namespaces", "list", "", "v1", "", "namespaces", "", ""),
    (
        "GET",
        "/api/v1/namespaces/shop",
        "get",
        "",
        "v1",
        "shop",
        "namespaces",
        "",
        "shop",
    ),
    (
        "PUT",
        "/api/v1/namespaces/shop/finalize",
        "update",
        "",
        "v1",
        "shop",
        "namespaces",
        "finalize",
        "shop",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/status",
        "get",
        "",
        "v1",
        "shop",
        "namespaces",
        "status",
        "shop",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods",
        "list",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods?watch=1",
        "watch",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods?watch=true&resourceVersion=10",
        "watch",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods?watch=false",
        "list",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    (
        "GET",
        "/api/v1/watch/namespaces/shop/pods",
        "watch",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods/web",
        "get",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "web",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods/web/log",
        "get",
        "",
        "v1",
        "shop",
        "pods",
        "log",
        "web",
    ),
    (
        "POST",
        "/api/v1/namespaces/shop/pods/web/exec",
        "create",
        "",
        "v1",
        "shop",
        "pods",
        "exec",
        "web",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/pods/web/exec",
        "get",
        "",
        "v1",
        "shop",
        "pods",
        "exec",
        "web",
    ),
    (
        "POST",
        "/api/v1/namespaces/shop/pods/web/portforward",
        "create",
        "",
        "v1",
        "shop",
        "pods",
        "portforward",
        "web",
    ),
    (
        "POST",
        "/api/v1/namespaces/shop/pods",
        "create",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    (
        "PUT",
        "/api/v1/namespaces/shop/configmaps/x",
        "update",
        "",
        "v1",
        "shop",
        "configmaps",
        "",
        "x",
    ),
    (
        "PATCH",
        "/apis/apps/v1/namespaces/shop/deployments/web",
        "patch",
        "apps",
        "v1",
        "shop",
        "deployments",
        "",
        "web",
    ),
    (
        "GET",
        "/apis/apps/v1/namespaces/shop/deployments/web/scale",
        "get",
        "apps",
        "v1",
        "shop",
        "deployments",
        "scale",
        "web",
    ),
    (
        "DELETE",
        "/api/v1/namespaces/shop/pods/web",
        "delete",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "web",
    ),
    (
        "DELETE",
        "/api/v1/namespaces/shop/pods",
        "deletecollection",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "",
    ),
    ("GET", "/api/v1/nodes", "list", "", "v1", "", "nodes", "", ""),
    ("GET", "/api/v1/secrets", "list", "", "v1", "", "secrets", "", ""),
    (
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
        "get",
        "rbac.authorization.k8s.io",
        "v1",
        "",
        "clusterroles",
        "",
        "view",
    ),
    (
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "create",
        "authorization.k8s.io",
        "v1",
        "",
        "selfsubjectaccessreviews",
        "",
        "",
    ),
    (
        "GET",
        "/api/v1/proxy/namespaces/shop/services/web/a/b",
        "proxy",
        "",
        "v1",
        "shop",
        "services",
        "",
        "web",
    ),
    (
        "GET",
        "/api/v1/namespaces/shop/services/web:80/proxy/metrics",
        "get",
        "",
        "v1",
        "shop",
        "services",
        "proxy",
        "web:80",
    ),
    // More segments than are kept on the stack, with and without `%`.
    (
        "GET",
        "/api/v1/namespaces/shop/pods/web/proxy/a/b/c/d/e/f/g",
        "get",
        "",
        "v1",
        "shop",
        "pods",
        "proxy",
        "web",
    ),
    (
        "GET",
        "/api/v1/namespaces/sh%6Fp/pods/w%65b/proxy/a/b/c/d/e/f/g",
        "get",
        "",
        "v1",
        "shop",
        "pods",
        "proxy",
        "web",
    ),
    (
        "HEAD",
        "/api/v1/namespaces/shop/pods/web",
        "get",
        "",
        "v1",
        "shop",
        "pods",
        "",
        "web",
    ),
];

#[test]
fn resource_paths_classify_like_kube_apiserver() {
    for &(method, path, verb, group, version, ns, resource, sub, name) in TABLE {
        let got = info(method.parse().unwrap(), path);
        assert!(got.is_resource_request, "{path}");
        assert_eq!(
            (
                got.verb.as_str(),
                got.api_group.as_str(),
                got.api_version.as_str(),
                got.namespace.as_str(),
                got.resource.as_str(),
                got.subresource.as_str(),
                got.name.as_str()
            ),
            (verb, group, version, ns, resource, sub, name),
            "{method} {path}"
        );
    }
}

#[test]
fn discovery_and_health_paths_are_non_resource() {
    for path in [
        "/",
        "/version",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/openapi/v3",
        "/healthz",
        "/metrics",
        "/livez",
    ] {
        let got = info(Method::GET, path);
        assert!(!got.is_resource_request, "{path}");
        assert_eq!(got.verb, "get");
        assert_eq!(got.path, path);
    }
}

#[test]
fn percent_encoded_segments_are_classified_as_the_api_server_decodes_them() {
    let secrets = info(Method::GET, "/api/v1/namespaces/kube%2Dsystem/%73ecrets/x");
    assert!(secrets.is_secrets());
    assert_eq!(
        (secrets.namespace.as_str(), secrets.name.as_str()),
        ("kube-system", "x")
    );
    let write = info(Method::DELETE, "/ap%69/v1/namespaces/shop/configmaps/a");
    assert!(write.is_write(), "{write:?}");
    let role = info(
        Method::GET,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Abasic-user",
    );
    assert_eq!(role.name, "system:basic-user");
}

#[test]
fn every_spelling_of_watch_the_api_server_takes_is_a_watch() {
    for query in ["watch", "watch=", "watch=yes", "watch=1&watch=0", "wat%63h=t"] {
        let got = info(Method::GET, &format!("/api/v1/namespaces/shop/secrets?{query}"));
        assert_eq!(got.verb, "watch", "{query}");
    }
    for query in ["watch=0", "watch=FALSE", "watch=0&watch=1", "watch=1;", "watch=%zz"] {
        let got = info(Method::GET, &format!("/api/v1/namespaces/shop/secrets?{query}"));
        assert_eq!(got.verb, "list", "{query}");
    }
}

#[test]
fn a_list_or_watch_selecting_one_name_names_it_and_dry_run_is_read_like_the_server() {
    let watch = info(
        Method::GET,
        "/api/v1/namespaces/shop/secrets?watch&fieldSelector=metadata.name%3Ddb",
    );
    assert_eq!((watch.verb.as_str(), watch.name.as_str()), ("watch", "db"));
    let list = info(Method::GET, "/api/v1/secrets?fieldSelector=metadata.name%3Ddb&limit=x");
    assert_eq!((list.verb.as_str(), list.name.as_str()), ("list", ""));
    let delete = info(
        Method::DELETE,
        "/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3Ddb",
    );
    assert_eq!((delete.verb.as_str(), delete.name.as_str()), ("deletecollection", ""));
    assert!(info(Method::POST, "/api/v1/namespaces/shop/configmaps?dryRun=All").dry_run);
    assert!(!info(Method::POST, "/api/v1/namespaces/shop/configmaps?dryRun=All;").dry_run);
    assert!(!info(Method::POST, "/api/v1/namespaces/shop/configmaps?dryRun=All&dryRun=x").dry_run);
}

#[test]
fn a_token_request_is_never_a_dry_run_as_the_api_server_issues_its_token_anyway() {
    let token = info(
        Method::POST,
        "/api/v1/namespaces/shop/serviceaccounts/deployer/token?dryRun=All",
    );
    assert!(token.is_token_request() && token.is_write() && !token.dry_run);
    let account = info(
        Method::PATCH,
        "/api/v1/namespaces/shop/serviceaccounts/deployer?dryRun=All",
    );
    assert!(!account.is_token_request() && account.dry_run);
    let elsewhere = info(
        Method::POST,
        "/apis/example.com/v1/namespaces/shop/serviceaccounts/deployer/token?dryRun=All",
    );
    assert!(!elsewhere.is_token_request() && elsewhere.dry_run);
}

#[test]
fn a_request_through_a_proxy_or_a_stream_subresource_is_never_a_dry_run_as_the_api_server_hands_it_on() {
    for path in [
        "/api/v1/namespaces/shop/services/web:80/proxy/admin/reset?dryRun=All",
        "/api/v1/namespaces/shop/pods/web/proxy/x?dryRun=All",
        "/api/v1/nodes/n1/proxy/run/shop/web/app?dryRun=All",
        "/api/v1/namespaces/shop/pods/web/exec?command=ls&dryRun=All",
    ] {
        let proxied = info(Method::POST, path);
        assert!(proxied.is_write() && !proxied.dry_run, "{path}: {proxied:?}");
    }
    assert!(info(Method::POST, "/api/v1/nodes/n1/proxy/x").is_proxy_subresource());
    // Another group's `proxy` is its own resource's subresource.
    let elsewhere = info(
        Method::POST,
        "/apis/example.com/v1/namespaces/shop/widgets/w/proxy?dryRun=All",
    );
    assert!(!elsewhere.is_proxy_subresource() && elsewhere.dry_run);
    assert!(info(Method::PATCH, "/api/v1/namespaces/shop/services/web?dryRun=All").dry_run);
}

#[test]
fn only_core_pods_exec_attach_and_port_forward_are_streams() {
    assert!(info(Method::POST, "/api/v1/namespaces/shop/pods/web/exec").is_stream_subresource());
    assert!(!info(Method::POST, "/apis/example.com/v1/namespaces/shop/pods/web/exec").is_stream_subresource());
}

#[test]
fn review_resources_are_recognised_in_both_groups() {
    assert!(info(Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").is_review());
    assert!(info(Method::POST, "/apis/authentication.k8s.io/v1/selfsubjectreviews").is_review());
    assert!(info(
        Method::POST,
        "/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews"
    )
    .is_review());
    assert!(!info(Method::POST, "/api/v1/namespaces/a/configmaps").is_review());
    assert!(!info(Method::GET, "/apis/authorization.k8s.io/v1").is_review());
}

#[test]
fn writes_and_streams_are_told_apart() {
    assert!(info(Method::PATCH, "/api/v1/namespaces/a/configmaps/x").is_write());
    assert!(info(Method::DELETE, "/api/v1/namespaces/a/configmaps").is_write());
    assert!(!info(Method::GET, "/api/v1/namespaces/a/configmaps").is_write());
    let exec = info(Method::POST, "/api/v1/namespaces/a/pods/p/exec");
    assert!(exec.is_stream_subresource() && exec.is_long_running());
    assert!(info(Method::GET, "/api/v1/namespaces/a/pods?watch=1").is_long_running());
    assert!(info(Method::GET, "/api/v1/namespaces/a/pods/p/log").is_long_running());
    assert!(!info(Method::GET, "/api/v1/namespaces/a/pods").is_long_running());
}

#[test]
fn what_the_row_reads_from_the_path_is_bounded_as_the_path_is() {
    let long = "n".repeat(10_000);
    let path = format!("/apis/{long}/{long}/namespaces/{long}/{long}/{long}/{long}");
    let info = classify(&Method::GET, &path, None);
    assert_eq!(info.namespace, long, "the request itself is classified whole");
    let mut row = AuditRow::default();
    row.classify(&info);
    for (field, value) in [
        ("api_group", &row.api_group),
        ("api_version", &row.api_version),
        ("namespace", &row.namespace),
        ("resource", &row.resource),
        ("name", &row.name),
        ("subresource", &row.subresource),
    ] {
        assert_eq!(value.len(), crate::audit::row::MAX_TEXT, "{field}");
    }
}
