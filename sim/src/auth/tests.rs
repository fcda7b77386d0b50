use super::*;
use crate::rbac::{bootstrap_objects, StaticObjects};
use http::{HeaderName, HeaderValue};
use serde_json::json;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

fn authenticator() -> TokenAuthenticator {
    let mut tokens = HashMap::new();
    tokens.insert("admin-token".to_string(), user("admin", &["system:masters"]));
    tokens.insert(
        "sa-token".to_string(),
        user("system:serviceaccount:portcullis:portcullis", &[]),
    );
    TokenAuthenticator { tokens }
}

fn unauthorized(auth: Option<&str>) -> bool {
    let map = auth.map_or_else(HeaderMap::new, |a| headers(&[("authorization", a)]));
    match authenticator().authenticate(&map) {
        Err(status) => {
            assert_eq!(
                (status.code, status.reason.as_str(), status.message.as_str()),
                (401, "Unauthorized", "Unauthorized")
            );
            true
        }
        Ok(_) => false,
    }
}

#[test]
fn a_known_bearer_token_authenticates_with_any_scheme_case() {
    for auth in [
        "Bearer admin-token",
        "bearer admin-token",
        "BEARER admin-token",
        "  Bearer admin-token  ",
    ] {
        let user = authenticator()
            .authenticate(&headers(&[("Authorization", auth)]))
            .unwrap();
        assert_eq!(user.name, "admin", "{auth}");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
    }
    // Go's SplitN(auth, " ", 3): a third field is ignored.
    assert!(!unauthorized(Some("Bearer admin-token trailing")));
}

#[test]
fn anything_but_a_known_bearer_token_is_401_unauthorized() {
    assert!(unauthorized(None));
    assert!(unauthorized(Some("Basic YWRtaW46YWRtaW4=")));
    assert!(unauthorized(Some("Bearer nope")));
    assert!(unauthorized(Some("Bearer")));
    assert!(unauthorized(Some("Bearer  admin-token")));
    assert!(unauthorized(Some("admin-token")));
}

#[test]
fn a_service_account_token_gets_the_service_account_groups() {
    let user = authenticator()
        .authenticate(&headers(&[("authorization", "Bearer sa-token")]))
        .unwrap();
    assert_eq!(
        user.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:portcullis",
            "system:authenticated"
        ]
    );
}

#[test]
fn service_account_user_names_split_only_when_valid() {
    assert_eq!(
        split_service_account("system:serviceaccount:ns:name"),
        Some(("ns", "name"))
    );
    assert_eq!(
        split_service_account("system:serviceaccount:ns:a.b-c"),
        Some(("ns", "a.b-c"))
    );
    assert_eq!(split_service_account("system:serviceaccount:ns:a:b"), None);
    assert_eq!(split_service_account("system:serviceaccount:NS:name"), None);
    assert_eq!(split_service_account("system:serviceaccount::name"), None);
    assert_eq!(split_service_account("user:ana"), None);
}

fn masters() -> UserInfo {
    user("admin", &["system:masters", "system:authenticated"])
}

fn portcullis() -> UserInfo {
    user(
        "system:serviceaccount:portcullis:portcullis",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:portcullis",
            "system:authenticated",
        ],
    )
}

fn no_rbac() -> StaticObjects {
    StaticObjects::new(bootstrap_objects())
}

fn as_admin(pairs: &[(&str, &str)]) -> Result<Option<UserInfo>, Status> {
    impersonate(&masters(), &headers(pairs), &no_rbac())
}

#[test]
fn no_impersonation_headers_leave_the_requester_as_it_is() {
    assert_eq!(as_admin(&[("authorization", "Bearer x")]).unwrap(), None);
}

#[test]
fn groups_and_extra_values_arrive_verbatim_and_extra_keys_are_percent_decoded() {
    let user = as_admin(&[
        ("IMPERSONATE-USER", "user:ana"),
        ("Impersonate-Group", "Domain Admins"),
        ("impersonate-group", "portcullis:grant:7"),
        ("Impersonate-Extra-Example.com%2Fteam", "a%41b"),
        ("Impersonate-Extra-example.com%2fteam", "second"),
        ("Impersonate-Extra-Reason", "on call"),
        ("Impersonate-Extra-Bad%zz", "x"),
        ("Impersonate-Uid", "u-1"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(user.name, "user:ana");
    assert_eq!(user.uid, "u-1");
    assert_eq!(
        user.groups,
        ["Domain Admins", "portcullis:grant:7", "system:authenticated"]
    );
    assert_eq!(user.extra["example.com/team"], ["a%41b", "second"]);
    assert_eq!(user.extra["reason"], ["on call"]);
    assert_eq!(user.extra["bad%zz"], ["x"]);
    assert_eq!(user.extra.len(), 3);
}

#[test]
fn system_authenticated_is_added_only_when_no_auth_group_is_given() {
    let groups = |pairs: &[(&str, &str)]| as_admin(pairs).unwrap().unwrap().groups;
    assert_eq!(groups(&[("impersonate-user", "u")]), ["system:authenticated"]);
    assert_eq!(
        groups(&[
            ("impersonate-user", "u"),
            ("impersonate-group", "system:authenticated"),
            ("impersonate-group", "g")
        ]),
        ["system:authenticated", "g"]
    );
    assert_eq!(
        groups(&[
            ("impersonate-user", "u"),
            ("impersonate-group", "system:unauthenticated")
        ]),
        ["system:unauthenticated"]
    );
    assert_eq!(
        groups(&[("impersonate-user", "system:anonymous")]),
        ["system:unauthenticated"]
    );
}

#[test]
fn a_service_account_impersonated_without_groups_gets_its_groups() {
    let user = as_admin(&[("impersonate-user", "system:serviceaccount:shop:ci")])
        .unwrap()
        .unwrap();
    assert_eq!(user.name, "system:serviceaccount:shop:ci");
    assert_eq!(
        user.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:shop",
            "system:authenticated"
        ]
    );
    let user = as_admin(&[
        ("impersonate-user", "system:serviceaccount:shop:ci"),
        ("impersonate-group", "g"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(user.groups, ["g", "system:authenticated"]);
}

#[test]
fn a_group_extra_or_uid_without_a_user_is_400_bad_request() {
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("impersonate-group", "devs")], "requested [{Group  devs    }] without impersonating a user"),
        (
            &[("impersonate-group", "a"), ("impersonate-group", "b"), ("impersonate-uid", "u1")],
            "requested [{Group  a    } {Group  b    } {UID  u1  authentication.k8s.io/v1  }] without impersonating a user",
        ),
        (
            &[("impersonate-extra-scopes", "view")],
            "requested [{UserExtra  view  authentication.k8s.io/v1  scopes}] without impersonating a user",
        ),
        (
            &[("impersonate-user", ""), ("impersonate-group", "devs")],
            "requested [{Group  devs    }] without impersonating a user",
        ),
    ];
    for (pairs, message) in cases {
        let status = as_admin(pairs).unwrap_err();
        assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
        assert_eq!(status.message, message);
    }
}

fn as_portcullis(extra_objects: &[serde_json::Value], pairs: &[(&str, &str)]) -> Result<Option<UserInfo>, Status> {
    let objects = StaticObjects::new(bootstrap_objects().into_iter().chain(extra_objects.iter().cloned()));
    impersonate(&portcullis(), &headers(pairs), &objects)
}

#[test]
fn impersonating_without_rbac_is_403_naming_the_resource() {
    let cases: [(&[(&str, &str)], &str); 2] = [
        (
            &[("impersonate-user", "user:ana")],
            "users \"user:ana\" is forbidden: User \"system:serviceaccount:portcullis:portcullis\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
        ),
        (
            &[("impersonate-user", "system:serviceaccount:shop:ci")],
            "serviceaccounts \"ci\" is forbidden: User \"system:serviceaccount:portcullis:portcullis\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"shop\"",
        ),
    ];
    for (pairs, message) in cases {
        let status = as_portcullis(&[], pairs).unwrap_err();
        assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        assert_eq!(status.message, message);
    }
}

fn impersonator(rules: serde_json::Value) -> [serde_json::Value; 2] {
    [
        json!({"kind": "ClusterRole", "metadata": {"name": "imp"}, "rules": rules}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "imp"},
               "roleRef": {"kind": "ClusterRole", "name": "imp"},
               "subjects": [{"kind": "ServiceAccount", "name": "portcullis", "namespace": "portcullis"}]}),
    ]
}

#[test]
fn each_impersonated_group_extra_and_uid_needs_its_own_permission() {
    let users_only = impersonator(json!([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]));
    let ana = ("impersonate-user", "user:ana");
    assert!(as_portcullis(&users_only, &[ana]).unwrap().is_some());
    let status = as_portcullis(&users_only, &[ana, ("impersonate-group", "Domain Admins")]).unwrap_err();
    assert_eq!(
        status.message,
        "groups \"Domain Admins\" is forbidden: User \"system:serviceaccount:portcullis:portcullis\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
    );
    let status = as_portcullis(&users_only, &[ana, ("impersonate-extra-scopes", "view")]).unwrap_err();
    assert_eq!(
        status.message,
        "userextras.authentication.k8s.io \"view\" is forbidden: User \"system:serviceaccount:portcullis:portcullis\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope"
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.group.as_str(), details.kind.as_str()),
        ("view", "authentication.k8s.io", "userextras")
    );
    let status = as_portcullis(&users_only, &[ana, ("impersonate-uid", "u-1")]).unwrap_err();
    assert!(
        status
            .message
            .starts_with("uids.authentication.k8s.io \"u-1\" is forbidden:"),
        "{}",
        status.message
    );

    let everything = impersonator(json!([
        {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/scopes", "uids"], "verbs": ["impersonate"]},
    ]));
    let user = as_portcullis(
        &everything,
        &[
            ana,
            ("impersonate-group", "Domain Admins"),
            ("impersonate-extra-scopes", "view"),
            ("impersonate-uid", "u-1"),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(user.groups, ["Domain Admins", "system:authenticated"]);
    assert_eq!(user.uid, "u-1");
}

#[test]
fn resource_names_limit_who_may_be_impersonated() {
    let only_ana = impersonator(
        json!([{"apiGroups": [""], "resources": ["users"], "resourceNames": ["user:ana"], "verbs": ["impersonate"]}]),
    );
    assert!(as_portcullis(&only_ana, &[("impersonate-user", "user:ana")]).is_ok());
    let status = as_portcullis(&only_ana, &[("impersonate-user", "user:bo")]).unwrap_err();
    assert_eq!(status.code, 403);
}

#[test]
fn an_extra_key_with_a_slash_is_authorized_as_its_own_subresource() {
    let credential = impersonator(json!([
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/portcullis.dev/credential-id"], "verbs": ["impersonate"]},
    ]));
    let ana = ("impersonate-user", "user:ana");
    let user = as_portcullis(
        &credential,
        &[ana, ("Impersonate-Extra-Portcullis.dev%2fcredential-id", "c-1")],
    )
    .unwrap()
    .unwrap();
    assert_eq!(user.extra["portcullis.dev/credential-id"], ["c-1"]);
    let status = as_portcullis(
        &credential,
        &[ana, ("Impersonate-Extra-Portcullis.dev%2fagent-session", "s-1")],
    )
    .unwrap_err();
    assert!(
        status
            .message
            .contains("cannot impersonate resource \"userextras/portcullis.dev/agent-session\""),
        "{}",
        status.message
    );
}
