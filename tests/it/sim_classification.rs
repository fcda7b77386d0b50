//! portcullis and the simulated cluster classify requests independently
//! (`portcullis::gateway::classify` and `portcullis_sim::request_info`, the
//! latter written from kube-apiserver's RequestInfoFactory). Policy,
//! redaction and the audit act on portcullis's reading; the cluster's RBAC
//! acts on its own. Here they must agree on every request portcullis
//! forwards, so a divergence in either is seen.
//!
//! Left out on purpose, because portcullis's router refuses them before
//! classifying: encoded slashes, empty (`//`) and dot segments. Also left
//! out: a malformed `labelSelector` beside a `metadata.name` field selector
//! (kube-apiserver then ignores the field selector; portcullis does not
//! parse label selectors and still takes the name, which the cluster's 400
//! makes harmless), and paths the cluster cannot classify at all (a bad
//! `%` escape, `/api/v1/watch` with nothing after it).

use http::Method;
use portcullis::gateway::classify::classify;

const METHODS: [Method; 7] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
];

const PATHS: &[&str] = &[
    "/version",
    "/api",
    "/api/v1",
    "/apis",
    "/apis/apps",
    "/apis/apps/v1",
    "/healthz/etcd",
    "/openapi/v3/apis/apps/v1",
    "/api/v1/pods",
    "/api/v1/secrets",
    "/api/v1/namespaces",
    "/api/v1/namespaces/shop",
    "/api/v1/namespaces/shop/",
    "/api/v1/namespaces/shop/status",
    "/api/v1/namespaces/shop/finalize",
    "/api/v1/namespaces/shop/secrets",
    "/api/v1/namespaces/shop/secrets/db",
    "/api/v1/namespaces/shop/%73ecrets/db",
    "/api/v1/namespaces/kube%2Dsystem/secrets",
    "/api/v1/namespaces/shop/configmaps/a+b",
    "/api/v1/namespaces/shop/pods/web/log",
    "/api/v1/namespaces/shop/pods/web/exec",
    "/api/v1/namespaces/shop/pods/web/portforward",
    "/api/v1/namespaces/shop/pods/web/proxy/a/b",
    "/api/v1/namespaces/shop/services/web:80/proxy/x",
    "/api/v1/proxy/namespaces/shop/services/web/a/b",
    "/api/v1/watch/namespaces/shop/secrets",
    "/api/v1/watch/namespaces/shop/secrets/db",
    "/api/v1/watch/secrets",
    "/apis/apps/v1/namespaces/shop/deployments",
    "/apis/apps/v1/namespaces/shop/deployments/web/scale",
    "/apis/apps/v1/watch/deployments",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "/apis/authorization.k8s.io/v1/namespaces/shop/localsubjectaccessreviews",
    "/apis/authentication.k8s.io/v1/tokenreviews",
    "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web",
];

const QUERIES: &[Option<&str>] = &[
    None,
    Some(""),
    Some("watch=true"),
    Some("watch=1"),
    Some("watch"),
    Some("watch="),
    Some("watch=yes"),
    Some("watch=FALSE"),
    Some("watch=fal%C5%BFe"),
    Some("watch=0"),
    Some("watch=%30"),
    Some("%77atch=1"),
    Some("watch=+0"),
    Some("watch=0&watch=1"),
    Some("watch=1&watch=0"),
    Some("watch=0;x&watch=1"),
    Some("watch=1;x"),
    Some("watch=%zz&watch=1"),
    Some("watch=%4"),
    Some("watch=1&limit=x"),
    Some("resourceVersion=0&watch=1&allowWatchBookmarks=true"),
    Some("dryRun=All"),
    Some("fieldSelector=metadata.name%3Ddb"),
    Some("fieldSelector=metadata.name%3D%3Ddb&watch=1"),
    Some("fieldSelector=metadata.name!%3Ddb"),
    Some("fieldSelector=type%3Dx,metadata.name%3Db,metadata.name%3Da"),
    Some("fieldSelector=metadata.namespace%3Dshop"),
    Some("fieldSelector=metadata.name%3Da%5C%2Cb"),
    Some("fieldSelector=metadata.name%3D.."),
    Some("fieldSelector=metadata.name%3Da%25b"),
    Some("fieldSelector=metadata.name%3Ddb&limit=ten"),
    Some("fieldSelector=metadata.name%3Ddb&limit="),
    Some("fieldSelector=metadata.name%3Ddb&limit=%2B5"),
    Some("fieldSelector=metadata.name%3Ddb&timeoutSeconds=1.5"),
    Some("fieldSelector=metadata.name%3Ddb,bad"),
    Some("fieldSelector=metadata.name%3Dd%5Cb"),
    Some("fieldSelector=metadata.name%3Dd%3Db"),
    Some("fieldSelector=type%3Dx&fieldSelector=metadata.name%3Ddb"),
    Some("labelSelector=app%3Dweb&fieldSelector=metadata.name%3Ddb"),
];

/// What both readings have: everything RBAC, policy and the audit use.
fn portcullis_reading(method: &Method, path: &str, query: Option<&str>) -> [String; 9] {
    let i = classify(method, path, query);
    [
        i.is_resource_request.to_string(),
        i.verb,
        i.api_prefix,
        i.api_group,
        i.api_version,
        i.namespace,
        i.resource,
        i.subresource,
        i.name,
    ]
}

fn cluster_reading(method: &Method, path: &str, query: Option<&str>) -> [String; 9] {
    let i = portcullis_sim::request_info::classify(method, path, query)
        .unwrap_or_else(|e| panic!("the cluster cannot classify {method} {path}?{query:?}: {e}"));
    [
        i.is_resource_request.to_string(),
        i.verb,
        i.api_prefix,
        i.api_group,
        i.api_version,
        i.namespace,
        i.resource,
        i.subresource,
        i.name,
    ]
}

#[test]
fn portcullis_and_the_cluster_classify_every_forwarded_request_alike() {
    let mut compared = 0;
    let mut disagreements = Vec::new();
    for method in &METHODS {
        for path in PATHS {
            for query in QUERIES {
                let ours = portcullis_reading(method, path, *query);
                let cluster = cluster_reading(method, path, *query);
                if ours != cluster {
                    disagreements.push(format!(
                        "{method} {path}?{}\n  portcullis: {ours:?}\n  cluster:    {cluster:?}",
                        query.unwrap_or("")
                    ));
                }
                compared += 1;
            }
        }
    }
    assert_eq!(compared, METHODS.len() * PATHS.len() * QUERIES.len());
    assert!(
        disagreements.is_empty(),
        "{} of {compared} requests classified differently:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

#[test]
fn the_comparison_sees_the_spellings_that_matter_for_secrets() {
    // The table above must exercise what the two readings could get wrong
    // in a way that leaks: a watch taken for a list, a Secret path spelled
    // with escapes, a list narrowed to one object by a field selector.
    let get = |path: &str, query: &str| cluster_reading(&Method::GET, path, Some(query));
    assert_eq!(get("/api/v1/namespaces/shop/secrets", "watch=yes")[1], "watch");
    assert_eq!(get("/api/v1/namespaces/shop/secrets", "watch=0;x&watch=1")[1], "watch");
    assert_eq!(get("/api/v1/namespaces/shop/%73ecrets/db", "")[6], "secrets");
    assert_eq!(
        get("/api/v1/namespaces/shop/secrets", "fieldSelector=metadata.name%3Ddb")[8],
        "db"
    );
    assert_eq!(
        portcullis_reading(&Method::GET, "/api/v1/namespaces/shop/secrets", Some("watch=yes"))[1],
        "watch"
    );
}
