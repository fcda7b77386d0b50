//! Expected values are kube-apiserver 1.37's answers to the same creates.

use super::*;

fn defaulted(group: &str, kind: &str, mut obj: Value) -> Value {
    decode(group, kind, None, &mut obj);
    obj
}

#[test]
fn a_pod_gets_kube_apiserver_s_spec_and_container_defaults() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox:1.36", "ports": [{"containerPort": 80}]},
        {"name": "d", "image": "nginx"}
    ]}});
    let pod = defaulted("", "Pod", pod);
    let spec = &pod["spec"];
    assert_eq!(
        (
            &spec["restartPolicy"],
            &spec["terminationGracePeriodSeconds"],
            &spec["dnsPolicy"]
        ),
        (&json!("Always"), &json!(30), &json!("ClusterFirst"))
    );
    assert_eq!(
        (&spec["securityContext"], &spec["schedulerName"]),
        (&json!({}), &json!("default-scheduler"))
    );
    assert_eq!(spec["enableServiceLinks"], true);
    let c = &spec["containers"][0];
    assert_eq!(
        (&c["imagePullPolicy"], &c["resources"]),
        (&json!("IfNotPresent"), &json!({}))
    );
    assert_eq!(
        (&c["terminationMessagePath"], &c["terminationMessagePolicy"]),
        (&json!("/dev/termination-log"), &json!("File"))
    );
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(
        spec["containers"][1]["imagePullPolicy"], "Always",
        "an untagged image is pulled always"
    );
    assert!(
        spec.get("serviceAccountName").is_none(),
        "admission, not defaulting, sets it"
    );
}

#[test]
fn pod_admission_sets_the_service_account_tolerations_and_priority() {
    let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    admit("", "Pod", &mut pod);
    let spec = &pod["spec"];
    assert_eq!(
        (&spec["serviceAccountName"], &spec["serviceAccount"]),
        (&json!("default"), &json!("default"))
    );
    assert_eq!(
        spec["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ])
    );
    assert_eq!(
        (&spec["priority"], &spec["preemptionPolicy"]),
        (&json!(0), &json!("PreemptLowerPriority"))
    );
}

#[test]
fn a_deployment_gets_its_strategy_limits_and_template_defaults() {
    let deployment = json!({"spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}});
    let spec = defaulted("apps", "Deployment", deployment)["spec"].clone();
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(
        (&spec["revisionHistoryLimit"], &spec["progressDeadlineSeconds"]),
        (&json!(10), &json!(600))
    );
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert!(
        spec["template"]["spec"].get("enableServiceLinks").is_none(),
        "only Pods get it"
    );
}

#[test]
fn stateful_sets_and_daemon_sets_get_their_update_strategies() {
    let template =
        json!({"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "postgres"}]}});
    let sts = defaulted(
        "apps",
        "StatefulSet",
        json!({"spec": {"serviceName": "db", "template": template}}),
    );
    assert_eq!(
        sts["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}})
    );
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        sts["spec"]["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    let ds = defaulted("apps", "DaemonSet", json!({"spec": {"template": template}}));
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(
        ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    assert!(ds["spec"].get("replicas").is_none());
}

#[test]
fn a_daemon_set_s_template_generation_follows_template_changes_only() {
    // As stored: defaulted when it was written.
    let mut old = json!({"metadata": {"generation": 3},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}});
    decode("apps", "DaemonSet", None, &mut old);
    old["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = json!("2");
    let mut same = old.clone();
    same["spec"]["minReadySeconds"] = json!(5);
    decode("apps", "DaemonSet", Some(&old), &mut same);
    assert_eq!(
        same["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
    let mut changed = old.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("b");
    decode("apps", "DaemonSet", Some(&old), &mut changed);
    assert_eq!(
        changed["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "4"
    );
}

#[test]
fn a_service_gets_its_type_affinity_policy_and_port_defaults() {
    let svc = json!({"spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
    let spec = defaulted("", "Service", svc)["spec"].clone();
    assert_eq!(
        (&spec["type"], &spec["sessionAffinity"], &spec["internalTrafficPolicy"]),
        (&json!("ClusterIP"), &json!("None"), &json!("Cluster"))
    );
    assert_eq!(
        spec["ports"],
        json!([
            {"port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"port": 443, "targetPort": 443, "protocol": "TCP"}
        ])
    );
    assert!(spec.get("externalTrafficPolicy").is_none());
    let node_port = defaulted("", "Service", json!({"spec": {"type": "NodePort"}}));
    assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Cluster");
}

#[test]
fn a_job_gets_its_completion_defaults_and_a_namespace_its_name_label() {
    let job = json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let spec = defaulted("batch", "Job", job)["spec"].clone();
    assert_eq!(
        (&spec["parallelism"], &spec["completions"], &spec["backoffLimit"]),
        (&json!(1), &json!(1), &json!(6))
    );
    assert_eq!(
        (&spec["completionMode"], &spec["suspend"]),
        (&json!("NonIndexed"), &json!(false))
    );
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
    let ns = defaulted("", "Namespace", json!({"metadata": {"name": "shop"}}));
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "shop");
}

#[test]
fn a_created_pod_s_update_entry_owns_its_defaults_as_kube_apiserver_records_them() {
    let rt = crate::registry::find("", "v1", "pods").expect("pods are served");
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}});
    decode("", "Pod", None, &mut pod);
    crate::patch::record_update(rt, None, &mut pod, "curl", "t");
    admit("", "Pod", &mut pod);
    // kube-apiserver 1.37's entry for this create, as it answered it.
    let recorded = json!({
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:command": {}, "f:image": {}, "f:imagePullPolicy": {},
                "f:name": {}, "f:resources": {}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
            "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}
        }
    });
    assert_eq!(pod["metadata"]["managedFields"][0]["fieldsV1"], recorded);
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
}
