//! The rest of the differential sequence (after
//! [`super::differential_cases::CASES`]): impersonation and 403s, Secrets,
//! Services, ServiceAccounts, Pods, the apps group, and the clean-up.

use super::differential_cases::{
    get, get_as, patch, send, shape, with, Case, Hdrs, Read, APPLY, JSON, MERGE, NOBODY, PARTIAL_LIST, PROTOBUF,
    READER, STRATEGIC, TABLE,
};

const CM: &str = "/api/v1/namespaces/{ns}/configmaps";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const SSR: &str = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
const DEPLOY: &str = "/apis/apps/v1/namespaces/{ns}/deployments";
const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-a","labels":{"app":"web"}},
    "spec":{"containers":[{"name":"c","image":"busybox:1.36","command":["sleep","3600"]}]}}"#;
const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},
    "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
    "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}}}"#;
const APPLY_DEPLOYMENT: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  \
    selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    \
    spec:\n      containers:\n      - name: c\n        image: nginx:1.27\n";

const fn as_user(
    name: &'static str,
    method: &'static str,
    path: &'static str,
    headers: Hdrs,
    body: &'static str,
) -> Case {
    with(name, method, path, headers, body, Read::Values)
}

/// Impersonation, 403s, the other core kinds, apps and clean-up.
pub const MORE_CASES: &[Case] = &[
    // 401 and 403, and impersonation edge cases.
    get_as("auth-bad-token", CM, &[("authorization", "Bearer not-a-token")]),
    get_as("as-nobody-list", CM, NOBODY),
    get_as("as-nobody-get", "/api/v1/namespaces/{ns}/configmaps/cm-c", NOBODY),
    get_as("as-nobody-list-nodes", "/api/v1/nodes", NOBODY),
    get_as("as-nobody-all-namespaces", "/api/v1/configmaps", NOBODY),
    get_as(
        "as-nobody-subresource",
        "/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
        NOBODY,
    ),
    with("as-nobody-non-resource", "GET", "/metrics", NOBODY, "", Read::Text),
    shape("as-nobody-discovery", "/api", NOBODY),
    get_as("as-reader-list", CM, READER),
    get_as("as-reader-get", "/api/v1/namespaces/{ns}/configmaps/cm-c", READER),
    as_user(
        "as-reader-create",
        "POST",
        CM,
        &[("content-type", "application/json"), ("impersonate-user", "reader")],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-r"}}"#,
    ),
    as_user(
        "as-reader-delete",
        "DELETE",
        "/api/v1/namespaces/{ns}/configmaps/cm-c",
        READER,
        "",
    ),
    get_as("as-reader-pods-by-cluster-role", "/api/v1/namespaces/{ns}/pods", READER),
    get_as("as-reader-secrets", "/api/v1/namespaces/{ns}/secrets", READER),
    get_as(
        "as-group-member",
        CM,
        &[("impersonate-user", "someone"), ("impersonate-group", "readers")],
    ),
    get_as(
        "as-service-account",
        CM,
        &[("impersonate-user", "system:serviceaccount:{ns}:default")],
    ),
    get_as(
        "as-other-service-account",
        CM,
        &[("impersonate-user", "system:serviceaccount:{ns}:other")],
    ),
    get_as("as-group-without-user", CM, &[("impersonate-group", "readers")]),
    get_as("as-uid-without-user", CM, &[("impersonate-uid", "1234")]),
    get_as("as-anonymous", CM, &[("impersonate-user", "system:anonymous")]),
    as_user(
        "as-whoami-nobody",
        "POST",
        WHOAMI,
        &[("content-type", "application/json"), ("impersonate-user", "nobody")],
        SSR,
    ),
    as_user(
        "as-whoami-groups-uid-extra",
        "POST",
        WHOAMI,
        &[
            ("content-type", "application/json"),
            ("impersonate-user", "nobody"),
            ("impersonate-group", "team-a"),
            ("impersonate-group", "team-b"),
            ("impersonate-uid", "u-1"),
            ("impersonate-extra-scopes", "view"),
            ("impersonate-extra-example.com%2fteam", "blue"),
        ],
        SSR,
    ),
    as_user(
        "as-whoami-service-account",
        "POST",
        WHOAMI,
        &[
            ("content-type", "application/json"),
            ("impersonate-user", "system:serviceaccount:{ns}:default"),
        ],
        SSR,
    ),
    as_user(
        "as-nobody-access-review",
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        &[("content-type", "application/json"), ("impersonate-user", "nobody")],
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
            "spec":{"resourceAttributes":{"namespace":"{ns}","verb":"list","resource":"configmaps"}}}"#,
    ),
    as_user(
        "as-reader-access-review",
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        &[("content-type", "application/json"), ("impersonate-user", "reader")],
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
            "spec":{"resourceAttributes":{"namespace":"{ns}","verb":"list","resource":"configmaps"}}}"#,
    ),
    as_user(
        "as-reader-rules-review",
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &[("content-type", "application/json"), ("impersonate-user", "reader")],
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"{ns}"}}"#,
    ),
    get_as(
        "portcullis-impersonates-a-user",
        CM,
        &[("authorization", "Bearer {portcullis}"), ("impersonate-user", "reader")],
    ),
    get_as(
        "portcullis-impersonates-a-service-account",
        CM,
        &[
            ("authorization", "Bearer {portcullis}"),
            ("impersonate-user", "system:serviceaccount:{ns}:default"),
        ],
    ),
    get_as(
        "portcullis-impersonates-a-uid",
        CM,
        &[
            ("authorization", "Bearer {portcullis}"),
            ("impersonate-user", "reader"),
            ("impersonate-uid", "u-1"),
        ],
    ),
    get_as("portcullis-as-itself", CM, &[("authorization", "Bearer {portcullis}")]),
    // Secrets.
    send(
        "secret-create",
        "POST",
        "/api/v1/namespaces/{ns}/secrets",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s-a"},"stringData":{"password":"hunter2"}}"#,
    ),
    get("secret-get", "/api/v1/namespaces/{ns}/secrets/s-a"),
    get("secret-list", "/api/v1/namespaces/{ns}/secrets"),
    send(
        "secret-create-bad-base64",
        "POST",
        "/api/v1/namespaces/{ns}/secrets?dryRun=All",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s-bad"},"data":{"k":"!!!"}}"#,
    ),
    patch(
        "secret-change-type",
        "/api/v1/namespaces/{ns}/secrets/s-a?dryRun=All",
        MERGE,
        r#"{"type":"kubernetes.io/tls"}"#,
    ),
    send(
        "secret-create-tls-without-keys",
        "POST",
        "/api/v1/namespaces/{ns}/secrets?dryRun=All",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s-tls"},"type":"kubernetes.io/tls","data":{}}"#,
    ),
    get_as("secret-list-table", "/api/v1/namespaces/{ns}/secrets", TABLE),
    send("secret-delete", "DELETE", "/api/v1/namespaces/{ns}/secrets/s-a", ""),
    // Services.
    send(
        "svc-create",
        "POST",
        "/api/v1/namespaces/{ns}/services",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
            "spec":{"selector":{"app":"web"},"ports":[{"port":80,"targetPort":8080}]}}"#,
    ),
    get("svc-get", "/api/v1/namespaces/{ns}/services/web"),
    get("svc-list", "/api/v1/namespaces/{ns}/services"),
    get_as("svc-list-table", "/api/v1/namespaces/{ns}/services", TABLE),
    send(
        "svc-create-invalid-port",
        "POST",
        "/api/v1/namespaces/{ns}/services?dryRun=All",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"ports":[{"port":0}]}}"#,
    ),
    patch(
        "svc-patch-selector",
        "/api/v1/namespaces/{ns}/services/web",
        MERGE,
        r#"{"spec":{"selector":{"app":"web2"}}}"#,
    ),
    send("svc-delete", "DELETE", "/api/v1/namespaces/{ns}/services/web", ""),
    // ServiceAccounts.
    send(
        "sa-create",
        "POST",
        "/api/v1/namespaces/{ns}/serviceaccounts",
        r#"{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"app"}}"#,
    ),
    get("sa-get", "/api/v1/namespaces/{ns}/serviceaccounts/app"),
    with(
        "sa-token",
        "POST",
        "/api/v1/namespaces/{ns}/serviceaccounts/app/token",
        JSON,
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}}"#,
        Read::Shape,
    ),
    // TokenREST ignores dryRun: a "dry run" issues a real token (which is
    // why portcullis never takes it as one).
    with(
        "sa-token-dry-run",
        "POST",
        "/api/v1/namespaces/{ns}/serviceaccounts/app/token?dryRun=All",
        JSON,
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}}"#,
        Read::Shape,
    ),
    send("sa-delete", "DELETE", "/api/v1/namespaces/{ns}/serviceaccounts/app", ""),
    // Pods.
    send("pod-create", "POST", "/api/v1/namespaces/{ns}/pods", POD),
    get("pod-get", "/api/v1/namespaces/{ns}/pods/pod-a"),
    get("pod-list", "/api/v1/namespaces/{ns}/pods"),
    get("pod-get-status", "/api/v1/namespaces/{ns}/pods/pod-a/status"),
    get_as("pod-list-table", "/api/v1/namespaces/{ns}/pods", TABLE),
    get(
        "pod-list-field-phase",
        "/api/v1/namespaces/{ns}/pods?fieldSelector=status.phase%3DRunning",
    ),
    get(
        "pod-list-field-node",
        "/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%3D",
    ),
    patch(
        "pod-patch-label",
        "/api/v1/namespaces/{ns}/pods/pod-a",
        MERGE,
        r#"{"metadata":{"labels":{"x":"y"}}}"#,
    ),
    patch(
        "pod-patch-image",
        "/api/v1/namespaces/{ns}/pods/pod-a",
        STRATEGIC,
        r#"{"spec":{"containers":[{"name":"c","image":"busybox:1.37"}]}}"#,
    ),
    patch(
        "pod-patch-forbidden-field",
        "/api/v1/namespaces/{ns}/pods/pod-a?dryRun=All",
        MERGE,
        r#"{"spec":{"restartPolicy":"Never"}}"#,
    ),
    send(
        "pod-create-without-containers",
        "POST",
        "/api/v1/namespaces/{ns}/pods?dryRun=All",
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-empty"},"spec":{"containers":[]}}"#,
    ),
    get("pod-log", "/api/v1/namespaces/{ns}/pods/pod-a/log"),
    with(
        "pod-get-protobuf",
        "GET",
        "/api/v1/namespaces/{ns}/pods/pod-a",
        PROTOBUF,
        "",
        Read::Protobuf,
    ),
    send(
        "pod-delete",
        "DELETE",
        "/api/v1/namespaces/{ns}/pods/pod-a?gracePeriodSeconds=0",
        "",
    ),
    // Deployments: every verb, subresources, apply conflicts.
    send("deploy-create", "POST", DEPLOY, DEPLOYMENT),
    get("deploy-get", "/apis/apps/v1/namespaces/{ns}/deployments/web"),
    get("deploy-list", DEPLOY),
    get(
        "deploy-list-label",
        "/apis/apps/v1/namespaces/{ns}/deployments?labelSelector=app%3Dweb",
    ),
    get(
        "deploy-get-scale",
        "/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
    ),
    send(
        "deploy-update-scale",
        "PUT",
        "/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
        r#"{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web","namespace":"{ns}"},"spec":{"replicas":3}}"#,
    ),
    patch(
        "deploy-patch-scale",
        "/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
        MERGE,
        r#"{"spec":{"replicas":1}}"#,
    ),
    get(
        "deploy-get-status",
        "/apis/apps/v1/namespaces/{ns}/deployments/web/status",
    ),
    patch(
        "deploy-patch-image",
        "/apis/apps/v1/namespaces/{ns}/deployments/web",
        STRATEGIC,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]}}}}"#,
    ),
    patch(
        "deploy-apply",
        "/apis/apps/v1/namespaces/{ns}/deployments/web?fieldManager=alice&force=true",
        APPLY,
        APPLY_DEPLOYMENT,
    ),
    patch(
        "deploy-apply-conflict",
        "/apis/apps/v1/namespaces/{ns}/deployments/web?fieldManager=bob",
        APPLY,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n",
    ),
    patch(
        "deploy-apply-force",
        "/apis/apps/v1/namespaces/{ns}/deployments/web?fieldManager=bob&force=true",
        APPLY,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n",
    ),
    patch(
        "deploy-update-selector",
        "/apis/apps/v1/namespaces/{ns}/deployments/web?dryRun=All",
        MERGE,
        r#"{"spec":{"selector":{"matchLabels":{"app":"other"}}}}"#,
    ),
    send(
        "deploy-create-without-selector",
        "POST",
        "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bad"},
            "spec":{"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}"#,
    ),
    send(
        "deploy-create-dry-run",
        "POST",
        "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"dry"},
            "spec":{"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},
            "spec":{"containers":[{"name":"c","image":"nginx"}]}}}}"#,
    ),
    get_as("deploy-list-table", DEPLOY, TABLE),
    get_as("deploy-list-partial", DEPLOY, PARTIAL_LIST),
    with(
        "deploy-get-protobuf",
        "GET",
        "/apis/apps/v1/namespaces/{ns}/deployments/web",
        PROTOBUF,
        "",
        Read::Protobuf,
    ),
    get_as("deploy-as-nobody", DEPLOY, NOBODY),
    send(
        "deploy-delete",
        "DELETE",
        "/apis/apps/v1/namespaces/{ns}/deployments/web",
        "",
    ),
    // ReplicaSets, StatefulSets, DaemonSets.
    send(
        "rs-create",
        "POST",
        "/apis/apps/v1/namespaces/{ns}/replicasets",
        r#"{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"rs"},
            "spec":{"replicas":1,"selector":{"matchLabels":{"app":"rs"}},"template":{"metadata":{"labels":{"app":"rs"}},
            "spec":{"containers":[{"name":"c","image":"nginx"}]}}}}"#,
    ),
    get("rs-get", "/apis/apps/v1/namespaces/{ns}/replicasets/rs"),
    get("rs-get-scale", "/apis/apps/v1/namespaces/{ns}/replicasets/rs/scale"),
    send(
        "rs-delete",
        "DELETE",
        "/apis/apps/v1/namespaces/{ns}/replicasets/rs",
        "",
    ),
    send(
        "sts-create",
        "POST",
        "/apis/apps/v1/namespaces/{ns}/statefulsets",
        r#"{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db"},
            "spec":{"serviceName":"db","replicas":1,"selector":{"matchLabels":{"app":"db"}},"template":{"metadata":{"labels":{"app":"db"}},
            "spec":{"containers":[{"name":"c","image":"postgres"}]}}}}"#,
    ),
    get("sts-get", "/apis/apps/v1/namespaces/{ns}/statefulsets/db"),
    get_as("sts-list-table", "/apis/apps/v1/namespaces/{ns}/statefulsets", TABLE),
    send(
        "sts-delete",
        "DELETE",
        "/apis/apps/v1/namespaces/{ns}/statefulsets/db",
        "",
    ),
    send(
        "ds-create",
        "POST",
        "/apis/apps/v1/namespaces/{ns}/daemonsets",
        r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},
            "spec":{"selector":{"matchLabels":{"app":"agent"}},"template":{"metadata":{"labels":{"app":"agent"}},
            "spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#,
    ),
    get("ds-get", "/apis/apps/v1/namespaces/{ns}/daemonsets/agent"),
    send(
        "ds-delete",
        "DELETE",
        "/apis/apps/v1/namespaces/{ns}/daemonsets/agent",
        "",
    ),
    get("apps-list-empty", "/apis/apps/v1/namespaces/{ns}/statefulsets"),
    shape("ns-list-limit", "/api/v1/namespaces?limit=1", &[]),
    // Clean-up: the cluster-wide object and the namespace.
    send(
        "rbac-clusterrole-delete",
        "DELETE",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}-pod-reader",
        "",
    ),
    get(
        "rbac-clusterrole-gone",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}-pod-reader",
    ),
    send("ns-delete", "DELETE", "/api/v1/namespaces/{ns}", ""),
];
