use super::*;
use serde_json::json;

#[test]
fn a_missing_name_is_a_required_value() {
    let status = create("", "ConfigMap", &json!({"metadata": {}})).unwrap_err();
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(
        status.message,
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
    let cause = &status.details.unwrap().causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueRequired", "metadata.name")
    );
}

#[test]
fn an_invalid_name_is_named_with_the_group_qualified_kind() {
    let spec =
        json!({"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}}});
    let status = create(
        "apps",
        "Deployment",
        &json!({"metadata": {"name": "Web_1"}, "spec": spec}),
    )
    .unwrap_err();
    assert!(
        status.message.starts_with("Deployment.apps \"Web_1\" is invalid: metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain"),
        "{}",
        status.message
    );
}

#[test]
fn names_follow_the_rule_of_their_kind() {
    assert!(name_errors("", "ConfigMap", "a.b-c").is_empty());
    assert!(!name_errors("", "Namespace", "a.b").is_empty());
    assert!(!name_errors("", "Service", "1web").is_empty());
    assert!(name_errors("rbac.authorization.k8s.io", "ClusterRole", "system:basic-user").is_empty());
    assert!(!name_errors("rbac.authorization.k8s.io", "Role", "a/b").is_empty());
}

#[test]
fn a_job_template_is_immutable() {
    let old = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never"}}}});
    let new = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}});
    let status = update("batch", "Job", &old, &new).unwrap_err();
    assert!(status
        .message
        .starts_with("Job.batch \"j\" is invalid: spec.template: Invalid value: "));
    assert!(status.message.ends_with(": field is immutable"), "{}", status.message);
}

#[test]
fn a_service_cluster_ip_may_not_change() {
    let old = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.10"}});
    let new = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.11"}});
    let status = update("", "Service", &old, &new).unwrap_err();
    assert_eq!(
        status.message,
        "Service \"s\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.11\"}: may not change once set"
    );
}

#[test]
fn strict_validation_names_each_unknown_field() {
    let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labelz": {}}, "spec": {"replicas": 1, "foo": 1}});
    let status = check_fields(FieldValidation::Strict, "apps", "Deployment", &mut obj.clone()).unwrap_err();
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        status.message,
        "strict decoding error: unknown field \"metadata.labelz\", unknown field \"spec.foo\""
    );
    let warnings = check_fields(FieldValidation::Warn, "apps", "Deployment", &mut obj.clone()).unwrap();
    assert_eq!(
        warnings,
        ["unknown field \"metadata.labelz\"", "unknown field \"spec.foo\""]
    );
    assert!(
        check_fields(FieldValidation::Ignore, "apps", "Deployment", &mut obj.clone())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn unknown_fields_are_dropped_unless_strict_and_unset_validation_warns() {
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labelz": {}}, "bogus": 1, "data": {}});
    let warnings = check_fields(FieldValidation::Ignore, "", "ConfigMap", &mut obj).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(
        obj,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}})
    );
    assert_eq!(field_validation("CreateOptions", None).unwrap(), FieldValidation::Warn);
}

#[test]
fn only_all_is_a_dry_run_value() {
    assert!(dry_run_errors(&["All".into()]).is_empty());
    let status = options("CreateOptions", &dry_run_errors(&["foo".into()])).unwrap_err();
    assert_eq!(
        status.message,
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"foo\"]: supported values: \"All\""
    );
}

#[test]
fn a_propagation_policy_is_foreground_background_or_orphan() {
    assert!(propagation_policy_errors(None).is_empty());
    assert!(propagation_policy_errors(Some("Orphan")).is_empty());
    let status = options("DeleteOptions", &propagation_policy_errors(Some("Sideways"))).unwrap_err();
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": \
         supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
}
