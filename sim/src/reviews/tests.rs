use super::*;
use crate::rbac::{bootstrap_objects, StaticObjects};
use crate::request_info::classify;
use http::Method;
use std::collections::HashMap;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

/// Bootstrap policy plus `view` for user:ana in namespace shop.
fn objects() -> StaticObjects {
    StaticObjects::new(bootstrap_objects().into_iter().chain([json!({
        "kind": "RoleBinding", "metadata": {"name": "ana-view", "namespace": "shop"},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "user:ana"}]
    })]))
}

fn ana() -> UserInfo {
    user("user:ana", &["system:authenticated"])
}

fn post(path: &str, as_user: &UserInfo, body: Value) -> Result<Value, Status> {
    create(
        &objects(),
        as_user,
        &classify(&Method::POST, path, None).unwrap(),
        &body,
    )
}

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const LSAR: &str = "/apis/authorization.k8s.io/v1/namespaces/shop/localsubjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";

fn ssar(attributes: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": attributes})
}

#[test]
fn self_subject_review_shows_the_effective_user() {
    let mut who = user("user:ana", &["portcullis:grant:1", "system:authenticated"]);
    who.uid = "u-1".into();
    who.extra.insert("reason".into(), vec!["on call".into()]);
    let review = post("/apis/authentication.k8s.io/v1/selfsubjectreviews", &who, json!({})).unwrap();
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert_eq!(review["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "user:ana", "uid": "u-1", "groups": ["portcullis:grant:1", "system:authenticated"],
               "extra": {"reason": ["on call"]}})
    );
    assert!(review["metadata"]["creationTimestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
}

#[test]
fn self_subject_access_review_answers_allowed_with_the_rbac_reason() {
    let review = post(
        SSAR,
        &ana(),
        ssar(json!({"resourceAttributes": {"namespace": "shop", "verb": "list", "resource": "pods"}})),
    )
    .unwrap();
    assert_eq!(review["status"]["allowed"], true);
    assert_eq!(
        review["status"]["reason"],
        "RBAC: allowed by RoleBinding \"ana-view/shop\" of ClusterRole \"view\" to User \"user:ana\""
    );
    assert_eq!(review["spec"]["resourceAttributes"]["verb"], "list");
    let denied = post(
        SSAR,
        &ana(),
        ssar(json!({"resourceAttributes": {"namespace": "shop", "verb": "get", "resource": "secrets"}})),
    )
    .unwrap();
    // Denied without a reason: `kubectl auth can-i` prints a bare "no".
    assert_eq!(denied["status"], json!({"allowed": false}));
    let elsewhere = post(
        SSAR,
        &ana(),
        ssar(json!({"resourceAttributes": {"namespace": "bank", "verb": "list", "resource": "pods"}})),
    )
    .unwrap();
    assert_eq!(elsewhere["status"]["allowed"], false);
    let scale = ssar(
        json!({"resourceAttributes": {"namespace": "shop", "verb": "get", "group": "apps",
                                                    "resource": "deployments", "subresource": "scale", "name": "web"}}),
    );
    assert_eq!(post(SSAR, &ana(), scale).unwrap()["status"]["allowed"], true);
}

#[test]
fn self_subject_access_review_answers_non_resource_paths() {
    let review = post(
        SSAR,
        &ana(),
        ssar(json!({"nonResourceAttributes": {"path": "/version", "verb": "get"}})),
    )
    .unwrap();
    assert_eq!(review["status"]["allowed"], true);
    let review = post(
        SSAR,
        &ana(),
        ssar(json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}})),
    )
    .unwrap();
    assert_eq!(review["status"]["allowed"], false);
}

#[test]
fn an_access_review_needs_exactly_one_kind_of_attributes() {
    let status = post(SSAR, &ana(), ssar(json!({}))).unwrap_err();
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.group.as_str(), details.kind.as_str()),
        ("authorization.k8s.io", "SelfSubjectAccessReview")
    );
    assert_eq!(details.causes[0].field, "spec");
    let both =
        ssar(json!({"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/x", "verb": "get"}}));
    assert_eq!(post(SSAR, &ana(), both).unwrap_err().code, 422);
}

#[test]
fn a_malformed_review_body_is_400() {
    let status = post(SSAR, &ana(), json!("nope")).unwrap_err();
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    let status = post(SSAR, &ana(), ssar(json!({"resourceAttributes": {"verb": 7}}))).unwrap_err();
    assert_eq!(status.code, 400);
    assert!(
        status
            .message
            .starts_with("SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: "),
        "{}",
        status.message
    );
    // Go decodes null as the zero value.
    let nulls =
        ssar(json!({"resourceAttributes": {"namespace": "shop", "verb": "list", "resource": "pods", "name": null}}));
    assert_eq!(post(SSAR, &ana(), nulls).unwrap()["status"]["allowed"], true);
}

#[test]
fn subject_access_review_asks_about_the_named_subject() {
    let admin = user("admin", &["system:masters"]);
    let sar =
        |spec: Value| json!({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1", "spec": spec});
    let about_ana = sar(
        json!({"user": "user:ana", "resourceAttributes": {"namespace": "shop", "verb": "get", "resource": "pods"}}),
    );
    assert_eq!(post(SAR, &admin, about_ana).unwrap()["status"]["allowed"], true);
    let about_group = sar(
        json!({"user": "x", "groups": ["system:masters"], "resourceAttributes": {"verb": "delete", "resource": "nodes"}}),
    );
    assert_eq!(post(SAR, &ana(), about_group).unwrap()["status"]["allowed"], true);
    // The requester's own rights do not matter, and no group is implied.
    let nobody = sar(json!({"user": "user:zoe", "nonResourceAttributes": {"path": "/api", "verb": "get"}}));
    assert_eq!(post(SAR, &admin, nobody).unwrap()["status"]["allowed"], false);
    let status = post(SAR, &admin, sar(json!({"resourceAttributes": {"verb": "get"}}))).unwrap_err();
    assert_eq!(
        status.message,
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );
}

#[test]
fn local_subject_access_review_stays_in_its_namespace() {
    let admin = user("admin", &["system:masters"]);
    let lsar = |ns: &str| {
        json!({"kind": "LocalSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
        "spec": {"user": "user:ana", "resourceAttributes": {"namespace": ns, "verb": "list", "resource": "pods"}}})
    };
    let review = post(LSAR, &admin, lsar("shop")).unwrap();
    assert_eq!(review["status"]["allowed"], true);
    assert_eq!(review["metadata"]["namespace"], "shop");
    let status = post(LSAR, &admin, lsar("bank")).unwrap_err();
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .ends_with("spec.resourceAttributes.namespace: Invalid value: \"bank\": must match metadata.namespace"),
        "{}",
        status.message
    );
    let mut moved = lsar("shop");
    moved["metadata"] = json!({"namespace": "bank"});
    assert_eq!(post(LSAR, &admin, moved).unwrap_err().code, 400);
}

#[test]
fn self_subject_rules_review_lists_what_the_user_may_do_in_a_namespace() {
    let rules = |ns: &str| json!({"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1", "spec": {"namespace": ns}});
    let review = post(SSRR, &ana(), rules("shop")).unwrap();
    assert_eq!(review["spec"], json!({}));
    assert_eq!(review["status"]["incomplete"], false);
    let resource_rules = review["status"]["resourceRules"].as_array().unwrap();
    assert!(
        resource_rules.contains(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                                            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}))
    );
    assert!(resource_rules
        .iter()
        .any(|r| r["resources"].as_array().unwrap().contains(&json!("pods/log"))));
    assert!(review["status"]["nonResourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["nonResourceURLs"][0] == "/api"));
    let bank = post(SSRR, &ana(), rules("bank")).unwrap();
    assert!(bank["status"]["resourceRules"].as_array().unwrap().len() < resource_rules.len());
    let status = post(SSRR, &ana(), rules("")).unwrap_err();
    assert_eq!((status.code, status.message.as_str()), (400, "no namespace on request"));
}

#[test]
fn token_review_authenticates_only_known_tokens() {
    let mut tokens = HashMap::new();
    tokens.insert("t0k".to_string(), user("user:ana", &[]));
    let tokens = TokenAuthenticator { tokens };
    let info = classify(&Method::POST, "/apis/authentication.k8s.io/v1/tokenreviews", None).unwrap();
    let review = |token: &str, audiences: Value| {
        let body = json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "spec": {"token": token, "audiences": audiences}});
        create_with_tokens(&objects(), &tokens, &ana(), &info, &body)
    };
    let known = review("t0k", json!(null)).unwrap();
    assert_eq!(
        known["status"],
        json!({"authenticated": true, "user": {"username": "user:ana", "groups": ["system:authenticated"]}, "audiences": [API_AUDIENCE]})
    );
    assert_eq!(review("other", json!(null)).unwrap()["status"], json!({"user": {}}));
    assert_eq!(review("t0k", json!(["vault"])).unwrap()["status"], json!({"user": {}}));
    assert_eq!(review("", json!(null)).unwrap_err().code, 400);
    // Without the authenticator every token is unknown.
    let body = json!({"spec": {"token": "t0k"}});
    assert_eq!(
        create(&objects(), &ana(), &info, &body).unwrap()["status"],
        json!({"user": {}})
    );
}

#[test]
fn a_resource_that_is_no_review_is_404() {
    let info = classify(&Method::POST, "/api/v1/namespaces/shop/configmaps", None).unwrap();
    assert_eq!(create(&objects(), &ana(), &info, &json!({})).unwrap_err().code, 404);
    assert!(!info.is_review());
}

#[test]
fn review_bodies_decode_by_content_type() {
    let info = classify(&Method::POST, SSAR, None).unwrap();
    let json_body = br#"{"spec":{"nonResourceAttributes":{"path":"/api","verb":"get"}}}"#;
    for content_type in [None, Some("application/json"), Some("application/json; charset=utf-8")] {
        let body = decode_body(&info, content_type, json_body).unwrap();
        assert_eq!(body["spec"]["nonResourceAttributes"]["path"], "/api");
    }
    let yaml = decode_body(
        &info,
        Some("application/yaml"),
        b"spec:\n  nonResourceAttributes: {path: /api, verb: get}\n",
    );
    assert_eq!(yaml.unwrap()["spec"]["nonResourceAttributes"]["verb"], "get");
    let status = decode_body(&info, Some("text/plain"), json_body).unwrap_err();
    assert_eq!((status.code, status.reason.as_str()), (415, "UnsupportedMediaType"));
    let status = decode_body(&info, None, b"{nope").unwrap_err();
    assert_eq!(status.code, 400);
    assert!(status
        .message
        .starts_with("SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview:"));
    let answer = create_from_body(
        &objects(),
        &TokenAuthenticator::default(),
        &ana(),
        &info,
        None,
        json_body,
    )
    .unwrap();
    assert_eq!(answer["status"]["allowed"], true);
}
