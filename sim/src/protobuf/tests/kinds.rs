//! One test per kind family: the decoded JSON is what a JSON client would
//! have sent.

use super::{decoded, meta, object_meta, Pb};
use serde_json::json;

/// `IntOrString`: type 0 with an int, type 1 with a string.
fn int_value(v: i64) -> Pb {
    Pb::new().int(1, 0).int(2, v).str(3, "")
}
fn str_value(s: &str) -> Pb {
    Pb::new().int(1, 1).int(2, 0).str(3, s)
}
fn quantity(s: &str) -> Pb {
    Pb::new().str(1, s)
}

#[test]
fn configmap_data_binary_data_and_an_explicit_immutable_false_decode() {
    let object = meta("c")
        .entry(2, "k", "v")
        .msg(3, Pb::new().str(1, "bin").bytes(2, &[0, 1, 255]))
        .int(4, 0);
    assert_eq!(
        decoded("v1", "ConfigMap", object),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
               "data": {"k": "v"}, "binaryData": {"bin": "AAH/"}, "immutable": false})
    );
}

#[test]
fn object_meta_keeps_labels_annotations_owners_finalizers_and_a_set_timestamp() {
    let object = Pb::new().msg(
        1,
        Pb::new()
            .str(2, "web-")
            .str(3, "shop")
            .int(7, 0)
            .msg(8, Pb::new().int(1, 1_700_000_000).int(2, 0))
            .entry(11, "app", "web")
            .entry(12, "note", "")
            .msg(
                13,
                Pb::new()
                    .str(1, "Deployment")
                    .str(3, "web")
                    .str(4, "u-1")
                    .str(5, "apps/v1")
                    .int(6, 1),
            )
            .str(14, "example.com/guard"),
    );
    assert_eq!(
        decoded("v1", "ConfigMap", object)["metadata"],
        json!({"generateName": "web-", "namespace": "shop", "creationTimestamp": "2023-11-14T22:13:20Z",
               "labels": {"app": "web"}, "annotations": {"note": ""},
               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1", "controller": true}],
               "finalizers": ["example.com/guard"]})
    );
}

#[test]
fn secret_data_is_base64_and_string_data_and_type_stay_text() {
    let object = meta("s")
        .msg(2, Pb::new().str(1, "password").bytes(2, b"hunter2"))
        .entry(4, "user", "ana")
        .str(3, "Opaque");
    assert_eq!(
        decoded("v1", "Secret", object),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "ana"}, "type": "Opaque"})
    );
}

#[test]
fn a_pod_spec_decodes_containers_and_inline_volume_sources() {
    let container = Pb::new()
        .str(1, "app")
        .str(2, "nginx:1.27")
        .str(3, "sh")
        .str(4, "-c")
        .str(4, "run")
        .str(5, "/srv")
        .msg(6, Pb::new().str(1, "").int(2, 0).int(3, 8080).str(4, "TCP").str(5, ""))
        .msg(7, Pb::new().str(1, "MODE").str(2, "prod"))
        .msg(
            8,
            Pb::new()
                .entry_msg(1, "cpu", quantity("500m"))
                .entry_msg(2, "memory", quantity("64Mi")),
        )
        .msg(9, Pb::new().str(1, "conf").int(2, 1).str(3, "/etc/app"))
        .str(14, "IfNotPresent")
        .int(16, 0);
    let volumes = [
        Pb::new()
            .str(1, "conf")
            .msg(2, Pb::new().msg(19, Pb::new().msg(1, Pb::new().str(1, "app-config")))),
        Pb::new()
            .str(1, "scratch")
            .msg(2, Pb::new().msg(2, Pb::new().str(1, ""))),
        Pb::new()
            .str(1, "creds")
            .msg(2, Pb::new().msg(6, Pb::new().str(1, "app-secret").int(3, 0o400))),
    ];
    let mut spec = Pb::new();
    for v in volumes {
        spec = spec.msg(1, v);
    }
    let spec = spec.msg(2, container).str(3, "Always").int(4, 30).str(8, "").int(11, 0);
    let pod = decoded("v1", "Pod", meta("p").msg(2, spec).msg(3, Pb::new()));
    assert_eq!(
        pod["spec"],
        json!({
            "volumes": [
                {"name": "conf", "configMap": {"name": "app-config"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "creds", "secret": {"secretName": "app-secret", "defaultMode": 256}}
            ],
            "containers": [{
                "name": "app", "image": "nginx:1.27", "command": ["sh"], "args": ["-c", "run"],
                "workingDir": "/srv", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "prod"}],
                "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}},
                "volumeMounts": [{"name": "conf", "readOnly": true, "mountPath": "/etc/app"}],
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30
        })
    );
    assert_eq!(pod["status"], json!({}));
}

#[test]
fn negative_int32_and_packed_int64_lists_decode() {
    let context = Pb::new().bytes(4, &[1, 2, 0xe8, 0x07]);
    let spec = Pb::new().int(25, -5).msg(14, context);
    let pod = decoded("v1", "Pod", meta("p").msg(2, spec));
    assert_eq!(pod["spec"]["priority"], json!(-5));
    assert_eq!(
        pod["spec"]["securityContext"]["supplementalGroups"],
        json!([1, 2, 1000])
    );
}

#[test]
fn a_deployment_keeps_zero_replicas_and_drops_other_zeroes() {
    let template = Pb::new().msg(1, object_meta("").entry(11, "app", "web")).msg(
        2,
        Pb::new().msg(2, Pb::new().str(1, "web").str(2, "nginx").msg(8, Pb::new())),
    );
    let spec = Pb::new()
        .int(1, 0)
        .msg(2, Pb::new().entry(1, "app", "web"))
        .msg(3, template)
        .msg(
            4,
            Pb::new()
                .str(1, "RollingUpdate")
                .msg(2, Pb::new().msg(1, str_value("25%")).msg(2, int_value(1))),
        )
        .int(5, 0)
        .int(7, 0);
    assert_eq!(
        decoded("apps/v1", "Deployment", meta("web").msg(2, spec))["spec"],
        json!({
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {}}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}
        })
    );
}

#[test]
fn a_service_port_target_is_a_number_or_a_name() {
    let spec = Pb::new()
        .msg(
            1,
            Pb::new()
                .str(1, "http")
                .str(2, "TCP")
                .int(3, 80)
                .msg(4, int_value(8080))
                .int(5, 0),
        )
        .msg(
            1,
            Pb::new()
                .str(1, "admin")
                .str(2, "TCP")
                .int(3, 81)
                .msg(4, str_value("admin")),
        )
        .entry(2, "app", "web")
        .str(3, "")
        .str(4, "ClusterIP")
        .str(7, "");
    assert_eq!(
        decoded("v1", "Service", meta("web").msg(2, spec))["spec"],
        json!({
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "admin", "protocol": "TCP", "port": 81, "targetPort": "admin"}
            ],
            "selector": {"app": "web"},
            "type": "ClusterIP"
        })
    );
}

#[test]
fn rbac_rules_keep_the_core_group_as_an_empty_string_and_bindings_keep_subjects() {
    let rule = Pb::new().str(1, "get").str(1, "list").str(2, "").str(3, "pods");
    assert_eq!(
        decoded("rbac.authorization.k8s.io/v1", "Role", meta("r").msg(2, rule))["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
    );
    let binding = meta("rb")
        .msg(
            2,
            Pb::new()
                .str(1, "User")
                .str(2, "rbac.authorization.k8s.io")
                .str(3, "ana")
                .str(4, ""),
        )
        .msg(
            2,
            Pb::new()
                .str(1, "ServiceAccount")
                .str(2, "")
                .str(3, "default")
                .str(4, "shop"),
        )
        .msg(
            3,
            Pb::new()
                .str(1, "rbac.authorization.k8s.io")
                .str(2, "ClusterRole")
                .str(3, "view"),
        );
    let decoded = decoded("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", binding);
    assert_eq!(
        (
            decoded["kind"].clone(),
            decoded["subjects"].clone(),
            decoded["roleRef"].clone()
        ),
        (
            json!("ClusterRoleBinding"),
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "ana"},
                   {"kind": "ServiceAccount", "name": "default", "namespace": "shop"}]),
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
        )
    );
}

#[test]
fn jobs_and_cron_jobs_decode_their_templates() {
    let pod_template = Pb::new().msg(1, object_meta("")).msg(
        2,
        Pb::new()
            .msg(2, Pb::new().str(1, "j").str(2, "busybox").str(3, "echo"))
            .str(3, "Never"),
    );
    let job_spec = Pb::new().int(7, 0).msg(6, pod_template);
    assert_eq!(
        decoded("batch/v1", "Job", meta("j").msg(2, job_spec.clone()))["spec"],
        json!({"backoffLimit": 0, "template": {"metadata": {}, "spec": {
            "containers": [{"name": "j", "image": "busybox", "command": ["echo"]}], "restartPolicy": "Never"}}})
    );
    let cron = Pb::new()
        .str(1, "*/5 * * * *")
        .str(3, "")
        .int(4, 0)
        .msg(5, Pb::new().msg(1, object_meta("nightly")).msg(2, job_spec));
    let decoded = decoded("batch/v1", "CronJob", meta("nightly").msg(2, cron));
    assert_eq!(decoded["spec"]["schedule"], json!("*/5 * * * *"));
    assert_eq!(decoded["spec"]["suspend"], json!(false));
    assert_eq!(decoded["spec"]["jobTemplate"]["metadata"], json!({"name": "nightly"}));
    assert_eq!(
        decoded["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        json!("Never")
    );
}

#[test]
fn a_disruption_budget_takes_a_percentage_and_a_priority_class_a_value() {
    let spec = Pb::new()
        .msg(1, str_value("50%"))
        .msg(2, Pb::new().entry(1, "app", "a"));
    assert_eq!(
        decoded("policy/v1", "PodDisruptionBudget", meta("pdb").msg(2, spec))["spec"],
        json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "a"}}})
    );
    let class = meta("high")
        .int(2, 1000)
        .int(3, 0)
        .str(4, "hi")
        .str(5, "PreemptLowerPriority");
    let decoded = decoded("scheduling.k8s.io/v1", "PriorityClass", class);
    assert_eq!(
        (
            decoded["value"].clone(),
            decoded["description"].clone(),
            decoded.get("globalDefault")
        ),
        (json!(1000), json!("hi"), None)
    );
}

#[test]
fn an_ingress_rule_carries_http_inline() {
    let backend = Pb::new().msg(4, Pb::new().str(1, "web").msg(2, Pb::new().str(1, "").int(2, 80)));
    let path = Pb::new().str(1, "/shop").str(3, "Prefix").msg(2, backend);
    let rule = Pb::new()
        .str(1, "shop.example")
        .msg(2, Pb::new().msg(1, Pb::new().msg(1, path)));
    let spec = Pb::new()
        .msg(2, Pb::new().str(1, "shop.example").str(2, "tls"))
        .msg(3, rule);
    assert_eq!(
        decoded("networking.k8s.io/v1", "Ingress", meta("shop").msg(2, spec))["spec"],
        json!({
            "tls": [{"hosts": ["shop.example"], "secretName": "tls"}],
            "rules": [{"host": "shop.example", "http": {"paths": [
                {"path": "/shop", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}
            ]}}]
        })
    );
}

#[test]
fn a_token_request_keeps_audiences_and_expiry_and_a_scale_its_replicas() {
    let request = meta("")
        .msg(2, Pb::new().str(1, "api").int(4, 1200))
        .msg(3, Pb::new().str(1, "").msg(2, Pb::new()));
    assert_eq!(
        decoded("authentication.k8s.io/v1", "TokenRequest", request),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {},
               "spec": {"audiences": ["api"], "expirationSeconds": 1200}, "status": {}})
    );
    let scale = meta("web").msg(2, Pb::new().int(1, 3));
    assert_eq!(
        decoded("autoscaling/v1", "Scale", scale)["spec"],
        json!({"replicas": 3})
    );
}

#[test]
fn access_reviews_carry_their_attributes() {
    let attributes = Pb::new()
        .str(1, "shop")
        .str(2, "get")
        .str(3, "")
        .str(4, "")
        .str(5, "pods")
        .str(6, "")
        .str(7, "");
    let review = meta("")
        .msg(2, Pb::new().msg(1, attributes))
        .msg(3, Pb::new().int(1, 0));
    let decoded = decoded("authorization.k8s.io/v1", "SelfSubjectAccessReview", review);
    assert_eq!(
        decoded["spec"],
        json!({"resourceAttributes": {"namespace": "shop", "verb": "get", "resource": "pods"}})
    );
    let rules = meta("").msg(2, Pb::new().str(1, "shop"));
    assert_eq!(
        super::decoded("authorization.k8s.io/v1", "SelfSubjectRulesReview", rules)["spec"],
        json!({"namespace": "shop"})
    );
    let subject = meta("").msg(
        2,
        Pb::new()
            .msg(2, Pb::new().str(1, "/metrics").str(2, "get"))
            .str(3, "ana")
            .str(4, "dev")
            .entry_msg(5, "scopes", Pb::new().str(1, "a").str(1, "b")),
    );
    assert_eq!(
        super::decoded("authorization.k8s.io/v1", "SubjectAccessReview", subject)["spec"],
        json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}, "user": "ana",
               "groups": ["dev"], "extra": {"scopes": ["a", "b"]}})
    );
    let whoami = meta("").msg(2, Pb::new().msg(1, Pb::new().str(1, "").str(2, "")));
    assert_eq!(
        super::decoded("authentication.k8s.io/v1", "SelfSubjectReview", whoami)["status"],
        json!({"userInfo": {}})
    );
}

#[test]
fn delete_options_decode_in_any_group_version_with_zero_grace_kept() {
    let options = Pb::new()
        .int(1, 0)
        .msg(2, Pb::new().str(1, "u-1").str(2, "42"))
        .str(4, "Foreground")
        .str(5, "All");
    assert_eq!(
        decoded("apps/v1", "DeleteOptions", options),
        json!({"apiVersion": "apps/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
               "preconditions": {"uid": "u-1", "resourceVersion": "42"},
               "propagationPolicy": "Foreground", "dryRun": ["All"]})
    );
}

#[test]
fn a_later_scalar_replaces_an_earlier_one_and_messages_merge() {
    let object = meta("first")
        .msg(1, Pb::new().str(1, "second").entry(11, "a", "b"))
        .str(3, "x");
    let secret = decoded("v1", "Secret", object.str(3, ""));
    assert_eq!(secret["metadata"], json!({"name": "second", "labels": {"a": "b"}}));
    assert_eq!(secret.get("type"), None);
}
