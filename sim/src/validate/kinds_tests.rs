//! Each expected message is kube-apiserver 1.37's answer to the same write.

use super::*;
use serde_json::json;

fn refused(result: Result<(), Status>) -> String {
    result.expect_err("refused").message
}

#[test]
fn a_label_key_with_a_space_is_invalid() {
    let cm = json!({"metadata": {"name": "cm-a", "labels": {"bad key": "x"}}});
    assert_eq!(
        refused(create("", "ConfigMap", &cm)),
        "ConfigMap \"cm-a\" is invalid: metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
    let fine = json!({"metadata": {"name": "cm-a", "labels": {"app.kubernetes.io/name": "web_1", "empty": ""}}});
    assert!(create("", "ConfigMap", &fine).is_ok());
}

#[test]
fn a_role_rule_without_verbs_is_a_required_value() {
    let role = json!({"metadata": {"name": "no-verbs"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": []}]});
    let status = create("rbac.authorization.k8s.io", "Role", &role).expect_err("refused");
    assert_eq!(
        status.message,
        "Role.rbac.authorization.k8s.io \"no-verbs\" is invalid: rules[0].verbs: Required value"
    );
    assert_eq!(status.details.expect("details").causes[0].message, "Required value");
}

#[test]
fn a_tls_secret_needs_its_keys_and_a_secret_s_type_is_immutable() {
    let tls = json!({"metadata": {"name": "s-tls"}, "type": "kubernetes.io/tls", "data": {}});
    assert_eq!(
        refused(create("", "Secret", &tls)),
        "Secret \"s-tls\" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]"
    );
    let old = json!({"metadata": {"name": "s-a"}, "type": "Opaque", "data": {"k": "dg=="}});
    let mut new = old.clone();
    new["type"] = json!("kubernetes.io/tls");
    assert_eq!(
        refused(update("", "Secret", &old, &new)),
        "Secret \"s-a\" is invalid: [type: Invalid value: \"kubernetes.io/tls\": field is immutable, data[tls.crt]: Required value, data[tls.key]: Required value]"
    );
}

#[test]
fn secret_data_that_is_not_base64_fails_to_decode() {
    let bad = json!({"metadata": {"name": "s-bad"}, "data": {"k": "!!!"}});
    let status = decode("", "Secret", &bad).expect_err("refused");
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        status.message,
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0"
    );
    assert!(decode("", "Secret", &json!({"data": {"k": "dg=="}})).is_ok());
}

#[test]
fn a_service_port_of_zero_is_out_of_range_and_so_is_its_defaulted_target() {
    let svc =
        json!({"metadata": {"name": "bad"}, "spec": {"ports": [{"port": 0, "targetPort": 0, "protocol": "TCP"}]}});
    assert_eq!(
        refused(create("", "Service", &svc)),
        "Service \"bad\" is invalid: [spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive]"
    );
}

#[test]
fn a_pod_needs_containers_and_an_update_may_change_only_images_and_a_few_fields() {
    let empty = json!({"metadata": {"name": "pod-empty"}, "spec": {"containers": []}});
    assert_eq!(
        refused(create("", "Pod", &empty)),
        "Pod \"pod-empty\" is invalid: spec.containers: Required value"
    );
    let old = json!({"metadata": {"name": "pod-a"}, "spec": {"restartPolicy": "Always",
        "containers": [{"name": "c", "image": "busybox:1.36"}]}});
    let mut image = old.clone();
    image["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    image["spec"]["activeDeadlineSeconds"] = json!(60);
    assert!(update("", "Pod", &old, &image).is_ok());
    let mut policy = old.clone();
    policy["spec"]["restartPolicy"] = json!("Never");
    let status = update("", "Pod", &old, &policy).expect_err("refused");
    assert!(status.message.starts_with(
        "Pod \"pod-a\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
    ));
    assert_eq!(status.details.expect("details").causes[0].reason, "FieldValueForbidden");
}

#[test]
fn a_workload_needs_a_selector_that_selects_its_template() {
    let template =
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let bare = json!({"metadata": {"name": "bad"}, "spec": {"template": template}});
    assert_eq!(
        refused(create("apps", "Deployment", &bare)),
        "Deployment.apps \"bad\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`]"
    );
    let old = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}}}});
    let mut moved = old.clone();
    moved["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    assert_eq!(
        refused(update("apps", "Deployment", &old, &moved)),
        "Deployment.apps \"web\" is invalid: [spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`, spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"other\"}}: field is immutable]"
    );
}
