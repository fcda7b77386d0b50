use super::*;
use crate::registry::find;
use crate::seed::demo_objects;
use chrono::TimeZone;

/// The seed's objects of one resource type, as the store would hand them.
fn seeded(group: &str, plural: &str, namespace: &str) -> (Vec<Arc<Value>>, &'static ResourceType) {
    let rt = find(group, "v1", plural).expect("served");
    let objects = demo_objects()
        .into_iter()
        .filter(|o| o["kind"] == rt.kind && o["metadata"]["namespace"].as_str().unwrap_or_default() == namespace)
        .filter(|o| o["apiVersion"].as_str().unwrap_or_default() == rt.api_version())
        .map(Arc::new)
        .collect();
    (objects, rt)
}

fn column_names(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter(|c| c["priority"] == 0)
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect()
}

fn row<'a>(table: &'a Value, name: &str) -> &'a [Value] {
    table["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["object"]["metadata"]["name"] == name))
        .and_then(|r| r["cells"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("row {name}"))
}

#[test]
fn pods_print_like_kubectl_get_pods() {
    let (pods, rt) = seeded("", "pods", "shop");
    let table = super::table(rt, &pods, IncludeObject::Metadata, json!({"resourceVersion": "7"}));
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["metadata"]["resourceVersion"], "7");
    assert_eq!(column_names(&table), ["Name", "Ready", "Status", "Restarts", "Age"]);
    let cells = row(&table, "web-6d4cf56db6-9hq7m");
    assert_eq!(
        cells[..4],
        [
            json!("web-6d4cf56db6-9hq7m"),
            json!("1/1"),
            json!("Running"),
            json!("0")
        ]
    );
    assert_eq!(cells[4], "3d4h");
    assert_eq!(
        cells[5..],
        [
            json!("10.244.0.13"),
            json!("sim-node-1"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    assert_eq!(row(&table, "web-6d4cf56db6-4xk2p")[3], "1 (120m ago)");
}

#[test]
fn pod_status_reports_the_waiting_reason_and_init_progress() {
    let now = Utc::now();
    let crash = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]},
    });
    let cells = workloads::pod_cells(&crash, now);
    assert_eq!(
        (cells[1].as_str(), cells[2].as_str(), cells[3].as_str()),
        (Some("1/2"), Some("CrashLoopBackOff"), Some("4"))
    );
    let init = json!({
        "metadata": {"name": "p", "creationTimestamp": null},
        "spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "i"}, {"name": "j"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "i", "state": {"terminated": {"exitCode": 0}}},
            {"name": "j", "state": {"running": {}}},
        ]},
    });
    let cells = workloads::pod_cells(&init, now);
    assert_eq!(cells[2], "Init:1/2");
    assert_eq!(cells[4], "<unknown>");
    let deleting =
        json!({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}});
    assert_eq!(workloads::pod_cells(&deleting, now)[2], "Terminating");
}

#[test]
fn deployments_and_services_print_their_real_columns() {
    let (deployments, rt) = seeded("apps", "deployments", "shop");
    let table = super::table(rt, &deployments, IncludeObject::None, json!({}));
    assert_eq!(
        column_names(&table),
        ["Name", "Ready", "Up-to-date", "Available", "Age"]
    );
    let cells = table["rows"][0]["cells"].as_array().expect("cells");
    assert_eq!(cells[..4], [json!("web"), json!("2/2"), json!(2), json!(2)]);
    assert_eq!(cells[5..], [json!("web"), json!("nginx:1.27.3"), json!("app=web")]);
    // includeObject=None: kube sends the row's object as null.
    assert!(table["rows"][0].get("object").is_some_and(Value::is_null));
    let types: Vec<&Value> = table["columnDefinitions"].as_array().expect("columns")[1..4]
        .iter()
        .map(|c| &c["type"])
        .collect();
    assert_eq!(
        types,
        [&json!("string"); 3],
        "kube 1.37 declares Ready, Up-to-date and Available strings"
    );

    let (services, rt) = seeded("", "services", "kube-system");
    let table = super::table(rt, &services, IncludeObject::Metadata, json!({}));
    assert_eq!(
        column_names(&table),
        ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"]
    );
    let cells = row(&table, "kube-dns");
    assert_eq!(
        cells[1..5],
        [
            json!("ClusterIP"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("53/UDP,53/TCP,9153/TCP")
        ]
    );
    assert_eq!(cells[6], "k8s-app=kube-dns");
}

#[test]
fn node_port_and_load_balancer_services_show_node_ports_and_pending_ips() {
    let svc = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5",
        "ports": [{"port": 443, "nodePort": 30443, "protocol": "TCP"}]}});
    let cells = cluster::builtin("", "Service")
        .expect("printer")
        .cells(&svc, Utc::now());
    assert_eq!(cells[3], "<pending>");
    assert_eq!(cells[4], "443:30443/TCP");
    assert_eq!(cells[6], "<none>");
}

#[test]
fn configuration_namespaces_nodes_and_service_accounts() {
    let (config, rt) = seeded("", "configmaps", "shop");
    let table = super::table(rt, &config, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Data", "Age"]);
    assert_eq!(row(&table, "feature-flags")[1], 3);
    let (secrets, rt) = seeded("", "secrets", "shop");
    let table = super::table(rt, &secrets, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Type", "Data", "Age"]);
    assert_eq!(row(&table, "web-tls")[1..3], [json!("kubernetes.io/tls"), json!(2)]);
    let (namespaces, rt) = seeded("", "namespaces", "");
    let table = super::table(rt, &namespaces, IncludeObject::Metadata, json!({}));
    assert_eq!(row(&table, "shop")[1..], [json!("Active"), json!("12d")]);
    let (nodes, rt) = seeded("", "nodes", "");
    let table = super::table(rt, &nodes, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Status", "Roles", "Age", "Version"]);
    assert_eq!(
        row(&table, "sim-node-1")[..5],
        [
            json!("sim-node-1"),
            json!("Ready"),
            json!("control-plane"),
            json!("30d"),
            json!("v1.37.0")
        ]
    );
    let (accounts, rt) = seeded("", "serviceaccounts", "portcullis");
    let table = super::table(rt, &accounts, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Secrets", "Age"]);
    assert_eq!(row(&table, "portcullis")[1], 0);
}

#[test]
fn events_lead_with_last_seen_and_name_the_object() {
    let (events, rt) = seeded("", "events", "shop");
    let table = super::table(rt, &events, IncludeObject::Metadata, json!({}));
    assert_eq!(
        column_names(&table),
        ["Last Seen", "Type", "Reason", "Object", "Message"]
    );
    let backoff = table["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["cells"][2] == "BackOff"))
        .expect("BackOff event");
    let cells = backoff["cells"].as_array().expect("cells");
    assert_eq!(
        cells[..4],
        [
            json!("120m"),
            json!("Warning"),
            json!("BackOff"),
            json!("pod/web-6d4cf56db6-4xk2p")
        ]
    );
    assert_eq!(cells[5], "kubelet, sim-node-1");
    assert_eq!(cells[8], 2);
}

#[test]
fn rbac_kinds_print_created_at_or_their_role() {
    let (roles, rt) = seeded("rbac.authorization.k8s.io", "clusterroles", "");
    let table = super::table(rt, &roles, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Created At"]);
    assert_eq!(table["columnDefinitions"][1]["type"], "date");
    assert!(row(&table, "portcullis-impersonator")[1]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let (bindings, rt) = seeded("rbac.authorization.k8s.io", "clusterrolebindings", "");
    let table = super::table(rt, &bindings, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Role", "Age"]);
    let cells = row(&table, "portcullis-impersonator");
    assert_eq!(cells[1], "ClusterRole/portcullis-impersonator");
    assert_eq!(cells[5], "portcullis/portcullis");
}

#[test]
fn the_custom_kind_uses_its_crd_printer_columns() {
    let (crontabs, rt) = seeded("stable.example.com", "crontabs", "shop");
    let table = super::table(rt, &crontabs, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Spec", "Replicas", "Age"]);
    assert_eq!(
        row(&table, "nightly-report")[..],
        [json!("nightly-report"), json!("0 3 * * *"), json!(1), json!("9d")]
    );
    let (crds, rt) = seeded("apiextensions.k8s.io", "customresourcedefinitions", "");
    let table = super::table(rt, &crds, IncludeObject::Metadata, json!({}));
    assert_eq!(column_names(&table), ["Name", "Created At"]);
}

#[test]
fn jobs_and_cron_jobs_print_status_completions_and_schedule() {
    let now = Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).single().expect("time");
    let job = json!({"metadata": {"name": "backup", "creationTimestamp": "2026-05-01T11:00:00Z"},
        "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "b", "image": "busybox"}]}}},
        "status": {"succeeded": 1, "startTime": "2026-05-01T11:00:00Z", "completionTime": "2026-05-01T11:00:42Z",
            "conditions": [{"type": "Complete", "status": "True"}]}});
    let cells = workloads::job_cells(&job, now);
    assert_eq!(
        cells[..5],
        [
            json!("backup"),
            json!("Complete"),
            json!("1/1"),
            json!("42s"),
            json!("60m")
        ]
    );
    let cron = json!({"metadata": {"name": "nightly"}, "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}});
    let cells = workloads::cron_job_cells(&cron, now);
    assert_eq!(
        cells[1..6],
        [
            json!("0 3 * * *"),
            json!("<none>"),
            json!(false),
            json!(0),
            json!("<none>")
        ]
    );
}

#[test]
fn rows_carry_partial_object_metadata_with_annotations_or_the_object() {
    let (secrets, rt) = seeded("", "secrets", "shop");
    let table = super::table(rt, &secrets, IncludeObject::Metadata, json!({}));
    let object = &table["rows"][0]["object"];
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert_eq!(object["apiVersion"], "meta.k8s.io/v1");
    assert!(object.get("data").is_none());
    let db = table["rows"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["object"]["metadata"]["name"] == "db-credentials"))
        .expect("row");
    assert!(db["object"]["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string());
    let full = super::table(rt, &secrets, IncludeObject::Object, json!({}));
    assert_eq!(full["rows"][0]["object"]["kind"], "Secret");
    assert_eq!(partial_object_metadata(&json!({"kind": "X"}))["metadata"], json!({}));
}

#[test]
fn include_object_query_defaults_to_metadata() {
    assert_eq!(IncludeObject::from_query(None), IncludeObject::Metadata);
    assert_eq!(IncludeObject::from_query(Some("None")), IncludeObject::None);
    assert_eq!(IncludeObject::from_query(Some("Object")), IncludeObject::Object);
    assert_eq!(IncludeObject::from_query(Some("bogus")), IncludeObject::Metadata);
}
