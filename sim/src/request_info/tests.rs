use super::*;
use http::Method;

/// (method, path?query, verb, group, version, namespace, resource,
/// subresource, name); group `-` marks a non-resource request.
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

fn info(method: &str, uri: &str) -> Result<RequestInfo, Unclassifiable> {
    let (path, query) = uri.split_once('?').map_or((uri, None), |(p, q)| (p, Some(q)));
    classify(&method.parse::<Method>().unwrap(), path, query)
}

fn check(rows: &[Row]) {
    for &(method, uri, verb, group, version, namespace, resource, subresource, name) in rows {
        let got = info(method, uri).unwrap_or_else(|e| panic!("{method} {uri}: {e}"));
        let context = format!("{method} {uri}: {got:?}");
        assert_eq!(got.verb, verb, "{context}");
        if group == "-" {
            assert!(!got.is_resource_request, "{context}");
            continue;
        }
        assert!(got.is_resource_request, "{context}");
        let prefix = if group.is_empty() { "api" } else { "apis" };
        assert_eq!(got.api_prefix, prefix, "{context}");
        assert_eq!(
            (
                got.api_group.as_str(),
                got.api_version.as_str(),
                got.namespace.as_str(),
                got.resource.as_str(),
                got.subresource.as_str(),
                got.name.as_str()
            ),
            (group, version, namespace, resource, subresource, name),
            "{context}"
        );
    }
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn paths_split_into_group_version_namespace_resource_name_and_subresource() {
    check(&[
        ("GET", "/api/v1/pods", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/namespaces/shop/pods/web", "get", "", "v1", "shop", "pods", "", "web"),
        ("GET", "/api/v1/namespaces/shop/pods/web/log", "get", "", "v1", "shop", "pods", "log", "web"),
        ("POST", "/api/v1/namespaces/shop/pods/web/exec", "create", "", "v1", "shop", "pods", "exec", "web"),
        ("GET", "/apis/apps/v1/namespaces/shop/deployments", "list", "apps", "v1", "shop", "deployments", "", ""),
        ("PUT", "/apis/apps/v1/namespaces/shop/deployments/web/scale", "update", "apps", "v1", "shop", "deployments", "scale", "web"),
        ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create", "authorization.k8s.io", "v1", "", "selfsubjectaccessreviews", "", ""),
        ("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", "get", "rbac.authorization.k8s.io", "v1", "", "clusterroles", "", "admin"),
        // Parts past the subresource are not interpreted.
        ("GET", "/api/v1/namespaces/shop/pods/web/proxy/a/b", "get", "", "v1", "shop", "pods", "proxy", "web"),
        // Trailing and leading slashes are trimmed.
        ("GET", "/api/v1/namespaces/shop/pods/", "list", "", "v1", "shop", "pods", "", ""),
    ]);
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn methods_give_verbs_and_a_nameless_delete_is_a_deletecollection() {
    check(&[
        ("POST", "/api/v1/namespaces/shop/configmaps", "create", "", "v1", "shop", "configmaps", "", ""),
        ("HEAD", "/api/v1/namespaces/shop/configmaps/a", "get", "", "v1", "shop", "configmaps", "", "a"),
        ("PUT", "/api/v1/namespaces/shop/configmaps/a", "update", "", "v1", "shop", "configmaps", "", "a"),
        ("PATCH", "/api/v1/namespaces/shop/configmaps/a", "patch", "", "v1", "shop", "configmaps", "", "a"),
        ("DELETE", "/api/v1/namespaces/shop/configmaps/a", "delete", "", "v1", "shop", "configmaps", "", "a"),
        ("DELETE", "/api/v1/namespaces/shop/configmaps", "deletecollection", "", "v1", "shop", "configmaps", "", ""),
        ("OPTIONS", "/api/v1/namespaces/shop/configmaps", "", "", "v1", "shop", "configmaps", "", ""),
    ]);
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn namespaces_are_a_resource_with_their_own_status_and_finalize() {
    check(&[
        ("GET", "/api/v1/namespaces", "list", "", "v1", "", "namespaces", "", ""),
        ("GET", "/api/v1/namespaces/shop", "get", "", "v1", "shop", "namespaces", "", "shop"),
        ("PUT", "/api/v1/namespaces/shop/status", "update", "", "v1", "shop", "namespaces", "status", "shop"),
        ("PUT", "/api/v1/namespaces/shop/finalize", "update", "", "v1", "shop", "namespaces", "finalize", "shop"),
        ("DELETE", "/api/v1/namespaces/shop", "delete", "", "v1", "shop", "namespaces", "", "shop"),
        // Any other word after the namespace is a namespaced resource.
        ("GET", "/api/v1/namespaces/shop/status/x", "get", "", "v1", "shop", "namespaces", "status", "shop"),
        ("GET", "/api/v1/namespaces/shop/events", "list", "", "v1", "shop", "events", "", ""),
    ]);
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn watch_and_proxy_in_the_path_are_verbs_and_proxy_has_no_subresource() {
    check(&[
        ("GET", "/api/v1/watch/pods", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/watch/namespaces/shop/pods/web", "watch", "", "v1", "shop", "pods", "", "web"),
        ("GET", "/apis/apps/v1/watch/namespaces/shop/deployments", "watch", "apps", "v1", "shop", "deployments", "", ""),
        ("GET", "/api/v1/proxy/namespaces/shop/services/web/a/b", "proxy", "", "v1", "shop", "services", "", "web"),
        ("POST", "/api/v1/proxy/nodes/n1", "proxy", "", "v1", "", "nodes", "", "n1"),
    ]);
    assert_eq!(info("GET", "/api/v1/watch"), Err(Unclassifiable::NoKind));
    assert_eq!(info("GET", "/apis/apps/v1/proxy/"), Err(Unclassifiable::NoKind));
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn short_or_foreign_paths_are_non_resource_requests_with_the_methods_verb() {
    check(&[
        ("GET", "/version", "get", "-", "", "", "", "", ""),
        ("GET", "/api", "get", "-", "", "", "", "", ""),
        ("GET", "/api/v1", "get", "-", "", "", "", "", ""),
        ("GET", "/apis/apps/v1", "get", "-", "", "", "", "", ""),
        ("POST", "/apis/apps", "post", "-", "", "", "", "", ""),
        ("GET", "/healthz/etcd/x", "get", "-", "", "", "", "", ""),
        ("GET", "/openapi/v3/apis/apps/v1", "get", "-", "", "", "", "", ""),
        ("DELETE", "/", "delete", "-", "", "", "", "", ""),
    ]);
    let version = info("GET", "/version").unwrap();
    assert_eq!(version.path, "/version");
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn the_query_decides_list_or_watch_as_go_and_apimachinery_decode_it() {
    check(&[
        ("GET", "/api/v1/pods?watch=true", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=1", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=yes", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=TRUE", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=false", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=FaLsE", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=fal%C5%BFe", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=0", "list", "", "v1", "", "pods", "", ""),
        // Only the first value counts.
        ("GET", "/api/v1/pods?watch=0&watch=1", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=1&watch=0", "watch", "", "v1", "", "pods", "", ""),
        // Keys and values are percent-decoded, `+` is a space.
        ("GET", "/api/v1/pods?%77atch=1", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=%30", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=+0", "watch", "", "v1", "", "pods", "", ""),
        // A pair with `;` is dropped, so is one with a bad escape: the next
        // `watch` is the first.
        ("GET", "/api/v1/pods?watch=0;x&watch=1", "watch", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=1;x", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=%zz&watch=0", "list", "", "v1", "", "pods", "", ""),
        ("GET", "/api/v1/pods?watch=%4", "list", "", "v1", "", "pods", "", ""),
        // Still a watch when other options do not decode.
        ("GET", "/api/v1/pods?watch=1&limit=x", "watch", "", "v1", "", "pods", "", ""),
        // A named get never reads the query.
        ("GET", "/api/v1/namespaces/shop/pods/web?watch=1", "get", "", "v1", "shop", "pods", "", "web"),
    ]);
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn a_metadata_name_field_selector_names_the_object_when_the_options_decode() {
    check(&[
        ("GET", "/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3Ddb", "list", "", "v1", "shop", "secrets", "", "db"),
        ("GET", "/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3D%3Ddb&watch=1", "watch", "", "v1", "shop", "secrets", "", "db"),
        // Terms are sorted; the first equality on metadata.name wins.
        ("GET", "/api/v1/secrets?fieldSelector=type%3Dx,metadata.name%3Db,metadata.name%3Da", "list", "", "v1", "", "secrets", "", "a"),
        // Inequality names nothing; another field names nothing.
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name!%3Ddb", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.namespace%3Dshop", "list", "", "v1", "", "secrets", "", ""),
        // Escaped commas and equals signs belong to the value.
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Da%5C%2Cb", "list", "", "v1", "", "secrets", "", "a,b"),
        // Not a valid path segment: no name.
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3D..", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Da%2Fb", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Da%25b", "list", "", "v1", "", "secrets", "", ""),
        // The list options do not decode: the selector is ignored.
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb&limit=ten", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb&limit=", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb&timeoutSeconds=1.5", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb,bad", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Dd%5Cb", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Dd%3Db", "list", "", "v1", "", "secrets", "", ""),
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb&labelSelector=a%20b%20c", "list", "", "v1", "", "secrets", "", ""),
        // Options that decode keep the name.
        ("GET", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb&limit=%2B5&labelSelector=app%3Dweb", "list", "", "v1", "", "secrets", "", "db"),
        // Only the first fieldSelector is decoded.
        ("GET", "/api/v1/secrets?fieldSelector=type%3Dx&fieldSelector=metadata.name%3Ddb", "list", "", "v1", "", "secrets", "", ""),
        // A delete with a selected name is still a deletecollection: only a
        // get reads the selector.
        ("DELETE", "/api/v1/secrets?fieldSelector=metadata.name%3Ddb", "deletecollection", "", "v1", "", "secrets", "", ""),
    ]);
}

#[test]
#[rustfmt::skip] // one request per line: the table reads as one
fn the_path_is_decoded_as_a_whole_before_it_is_split() {
    check(&[
        ("GET", "/api/v1/namespaces/kube%2Dsystem/%73ecrets/x", "get", "", "v1", "kube-system", "secrets", "", "x"),
        // An encoded slash separates segments, as in Go's URL.Path.
        ("GET", "/api/v1/namespaces/a%2Fb/pods", "get", "", "v1", "a", "b", "", "pods"),
        // `+` is not a space in a path.
        ("GET", "/api/v1/namespaces/shop/configmaps/a+b", "get", "", "v1", "shop", "configmaps", "", "a+b"),
        // Empty segments inside the path are kept.
        ("GET", "/api/v1//pods", "get", "", "v1", "", "", "", "pods"),
    ]);
    assert_eq!(info("GET", "/api/v1/namespaces/%zz/pods"), Err(Unclassifiable::BadEscape));
    assert_eq!(info("GET", "/api/v1/pods%2"), Err(Unclassifiable::BadEscape));
    assert_eq!(info("GET", "/api/v1/namespaces/shop/pods/a%2").map(|_| ()), Err(Unclassifiable::BadEscape));
}

#[test]
fn review_resources_are_told_apart_by_group_and_resource() {
    let review = |path: &str| info("POST", path).unwrap().is_review();
    assert!(review("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"));
    assert!(review(
        "/apis/authorization.k8s.io/v1/namespaces/shop/localsubjectaccessreviews"
    ));
    assert!(review("/apis/authentication.k8s.io/v1/tokenreviews"));
    assert!(!review("/apis/authentication.k8s.io/v1/subjectaccessreviews"));
    assert!(!review("/api/v1/namespaces/shop/configmaps"));
}

#[test]
fn query_parsing_follows_go_url_parse_query() {
    let pairs = parse_query("a=1&&b&c=x+y&d=%41&e=1;2&f=%zz&%3D=%26");
    let expected = [("a", "1"), ("b", ""), ("c", "x y"), ("d", "A"), ("=", "&")];
    assert_eq!(pairs, expected.map(|(k, v)| (k.to_string(), v.to_string())),);
    let many = |ampersands: usize| format!("dryRun=All{}", "&".repeat(ampersands));
    assert_eq!(parse_query(&many(9_999)), [("dryRun".to_string(), "All".to_string())]);
    assert!(parse_query(&many(10_000)).is_empty(), "past Go's limit: no parameters");
    assert_eq!(unescape_path("/a%20b+c"), Some("/a b+c".into()));
    assert_eq!(unescape_path("/a%G0"), None);
}
