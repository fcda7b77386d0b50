use super::*;
use crate::registry;

fn find<'a>(objects: &'a [Value], kind: &str, namespace: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"].as_str().unwrap_or_default() == namespace
        })
        .unwrap_or_else(|| panic!("{kind} {namespace}/{name} in the seed"))
}

#[test]
fn every_seed_document_parses_and_is_a_served_kind() {
    let count = |yaml: &str| yaml.matches("\n---\n").count() + usize::from(yaml.starts_with("---\n"));
    let documents = count(SEED_YAML) + count(DEPLOY_RBAC_YAML) + 1;
    let objects = demo_objects();
    assert_eq!(objects.len(), documents, "a document was skipped");
    for object in &objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let rt = registry::find_kind(group, kind(object))
            .unwrap_or_else(|| panic!("{api_version} {} is served", kind(object)));
        assert_eq!(
            rt.namespaced,
            !namespace(object).is_empty(),
            "{} {}",
            kind(object),
            name(object)
        );
        assert!(object["metadata"].get("resourceVersion").is_none());
    }
}

#[test]
fn the_demo_cluster_has_what_the_demo_shows() {
    let objects = demo_objects();
    for ns in ["default", "kube-system", "shop", "payments", "portcullis"] {
        find(&objects, "Namespace", "", ns);
        find(&objects, "ServiceAccount", ns, "default");
    }
    let node = find(&objects, "Node", "", "sim-node-1");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.37.0");
    let web = find(&objects, "Deployment", "shop", "web");
    assert_eq!(web["spec"]["replicas"], 2);
    let pods: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Pod" && o["metadata"]["labels"]["app"] == "web")
        .collect();
    assert_eq!(pods.len(), 2);
    assert!(pods.iter().all(|p| p["status"]["phase"] == "Running"));
    assert_eq!(find(&objects, "Secret", "shop", "web-tls")["type"], "kubernetes.io/tls");
    find(&objects, "Secret", "payments", "stripe-key");
    find(&objects, "CronTab", "shop", "nightly-report");
    find(&objects, "Deployment", "kube-system", "coredns");
    assert!(custom_resource_definition("stable.example.com", "crontabs").is_some());
}

#[test]
fn db_credentials_leak_their_values_through_last_applied_configuration() {
    let objects = demo_objects();
    let secret = find(&objects, "Secret", "shop", "db-credentials");
    let last_applied = secret["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("annotation");
    let applied: Value = serde_json::from_str(last_applied).expect("JSON");
    let password = applied["stringData"]["password"].as_str().expect("clear text password");
    use base64::Engine;
    let stored = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["password"].as_str().expect("data"))
        .expect("base64");
    assert_eq!(stored, password.as_bytes());
}

#[test]
fn owner_references_point_at_their_owners_uids() {
    let objects = demo_objects();
    let rs = find(&objects, "ReplicaSet", "shop", "web-6d4cf56db6");
    let deployment = find(&objects, "Deployment", "shop", "web");
    assert_eq!(
        rs["metadata"]["ownerReferences"][0]["uid"],
        deployment["metadata"]["uid"]
    );
    let pod = find(&objects, "Pod", "shop", "web-6d4cf56db6-9hq7m");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], rs["metadata"]["uid"]);
    let uids: std::collections::HashSet<&str> = objects.iter().filter_map(|o| o["metadata"]["uid"].as_str()).collect();
    assert_eq!(uids.len(), objects.len(), "uids are unique");
}

#[test]
fn portcullis_gets_exactly_the_shipped_deploy_rbac() {
    let objects = demo_objects();
    let binding = find(&objects, "ClusterRoleBinding", "", "portcullis-impersonator");
    assert_eq!(
        binding["subjects"][0],
        serde_json::json!({"kind": "ServiceAccount", "name": "portcullis", "namespace": "portcullis"})
    );
    let role = find(&objects, "ClusterRole", "", "portcullis-impersonator");
    let rules = role["rules"].as_array().expect("rules");
    assert!(rules.iter().all(|r| r["verbs"] == serde_json::json!(["impersonate"])));
    let extras = |key: &str| {
        rules.iter().any(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|res| res.iter().any(|x| x == key))
        })
    };
    assert!(extras("userextras/portcullis.dev/credential-id") && extras("userextras/portcullis.dev/agent-session"));
    let manager = find(&objects, "ClusterRoleBinding", "", "portcullis-rbac-manager");
    assert_eq!(manager["roleRef"]["name"], "portcullis-rbac-manager");
}

#[test]
fn relative_timestamps_resolve_against_load_time() {
    let now = DateTime::parse_from_rfc3339("2026-05-01T12:00:00Z")
        .expect("time")
        .with_timezone(&Utc);
    let objects = resolve(
        parse("metadata: {name: a, creationTimestamp: now-3d4h}\neventTime: now-90s\nnote: now-ish\n"),
        now,
    );
    assert_eq!(objects[0]["metadata"]["creationTimestamp"], "2026-04-28T08:00:00Z");
    assert_eq!(objects[0]["eventTime"], "2026-05-01T11:58:30.000000Z");
    assert_eq!(objects[0]["note"], "now-ish");
}
