//! What kube-apiserver fills into an object as it decodes a create or an
//! update (the `SetDefaults_*` functions of each API group), before the
//! field manager records the write: so a writer's Update entry in
//! managedFields owns the defaulted fields too, as in a real cluster.
//! [`admit`] is what admission and the registries add afterwards, which
//! no one owns.
//!
//! Covered: pods and pod templates (containers, volumes), Services,
//! Namespaces, Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs.
//!
//! # Known differences from kube-apiserver
//!
//! - ServiceAccount admission sets the ServiceAccount but does not mount
//!   its projected token volume (`kube-api-access-…`).
//! - A Job's selector and its `controller-uid` labels are not generated.

mod pod;

use serde_json::{json, Map, Value};

/// Decode-time defaults of `obj`, about to replace `old` (if any).
pub fn decode(group: &str, kind: &str, old: Option<&Value>, obj: &mut Value) {
    match (group, kind) {
        ("", "Pod") => {
            if let Some(spec) = map(obj, "spec") {
                pod::spec(spec);
                spec.entry("enableServiceLinks").or_insert(json!(true));
            }
        }
        ("", "Service") => service(obj),
        ("", "Namespace") => namespace(obj),
        ("", "PodTemplate") => template(obj.get_mut("template")),
        ("apps", "Deployment") => workload(obj, deployment),
        ("apps", "ReplicaSet") => workload(obj, replicas),
        ("apps", "StatefulSet") => workload(obj, stateful_set),
        ("apps", "DaemonSet") => {
            workload(obj, daemon_set);
            template_generation(old, obj);
        }
        ("batch", "Job") => workload(obj, job),
        ("batch", "CronJob") => {
            let job_spec = obj
                .get_mut("spec")
                .and_then(|s| s.get_mut("jobTemplate"))
                .and_then(|t| t.get_mut("spec"));
            if let Some(spec) = job_spec.and_then(Value::as_object_mut) {
                job(spec);
                template(spec.get_mut("template"));
            }
        }
        _ => {}
    }
}

/// What admission adds to a new object after the write was recorded.
pub fn admit(group: &str, kind: &str, obj: &mut Value) {
    if (group, kind) == ("", "Pod") {
        pod::admit(obj);
    }
}

/// `obj[key]` as a map, created if missing.
fn map<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let entry = obj.as_object_mut()?.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

fn template(template: Option<&mut Value>) {
    if let Some(spec) = template.and_then(|t| t.get_mut("spec")).and_then(Value::as_object_mut) {
        pod::spec(spec);
    }
}

/// A workload: its own spec defaults, then its pod template's.
fn workload(obj: &mut Value, own: fn(&mut Map<String, Value>)) {
    if let Some(spec) = map(obj, "spec") {
        own(spec);
        template(spec.get_mut("template"));
    }
}

fn insert_missing(map: &mut Map<String, Value>, defaults: Vec<(&str, Value)>) {
    for (key, value) in defaults {
        map.entry(key).or_insert(value);
    }
}

fn replicas(spec: &mut Map<String, Value>) {
    spec.entry("replicas").or_insert(json!(1));
}

fn deployment(spec: &mut Map<String, Value>) {
    replicas(spec);
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        strategy.entry("type").or_insert(json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                insert_missing(
                    rolling,
                    vec![("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))],
                );
            }
        }
    }
    insert_missing(
        spec,
        vec![
            ("revisionHistoryLimit", json!(10)),
            ("progressDeadlineSeconds", json!(600)),
        ],
    );
}

fn stateful_set(spec: &mut Map<String, Value>) {
    replicas(spec);
    update_strategy(spec, vec![("partition", json!(0)), ("maxUnavailable", json!(1))]);
    insert_missing(
        spec,
        vec![
            ("podManagementPolicy", json!("OrderedReady")),
            ("revisionHistoryLimit", json!(10)),
            ("persistentVolumeClaimRetentionPolicy", json!({})),
        ],
    );
    if let Some(policy) = spec["persistentVolumeClaimRetentionPolicy"].as_object_mut() {
        insert_missing(
            policy,
            vec![("whenDeleted", json!("Retain")), ("whenScaled", json!("Retain"))],
        );
    }
}

fn daemon_set(spec: &mut Map<String, Value>) {
    update_strategy(spec, vec![("maxUnavailable", json!(1)), ("maxSurge", json!(0))]);
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
}

/// `updateStrategy` of a StatefulSet or DaemonSet: `RollingUpdate` with
/// `rolling` filled in.
fn update_strategy(spec: &mut Map<String, Value>, rolling: Vec<(&str, Value)>) {
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    let Some(strategy) = strategy.as_object_mut() else {
        return;
    };
    strategy.entry("type").or_insert(json!("RollingUpdate"));
    if strategy["type"] == "RollingUpdate" {
        let entry = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
        if let Some(entry) = entry.as_object_mut() {
            insert_missing(entry, rolling);
        }
    }
}

/// The DaemonSet strategy's `deprecated.daemonset.template.generation`:
/// the generation the template last changed at.
fn template_generation(old: Option<&Value>, obj: &mut Value) {
    const KEY: &str = "deprecated.daemonset.template.generation";
    let generation = match old {
        None => 1,
        Some(old) if old["spec"]["template"] != obj["spec"]["template"] => {
            old["metadata"]["generation"].as_i64().unwrap_or(0) + 1
        }
        Some(old) => match old["metadata"]["annotations"][KEY].as_str() {
            Some(kept) => kept.parse().unwrap_or(1),
            None => return,
        },
    };
    let annotations = map(obj, "metadata").map(|m| m.entry("annotations").or_insert_with(|| json!({})));
    if let Some(annotations) = annotations.and_then(Value::as_object_mut) {
        annotations.insert(KEY.into(), json!(generation.to_string()));
    }
}

fn job(spec: &mut Map<String, Value>) {
    insert_missing(
        spec,
        vec![
            ("parallelism", json!(1)),
            ("completions", json!(1)),
            ("backoffLimit", json!(6)),
            ("completionMode", json!("NonIndexed")),
            ("suspend", json!(false)),
            ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ],
    );
    if !spec.contains_key("selector") {
        spec.entry("manualSelector").or_insert(json!(false));
    }
}

fn service(obj: &mut Value) {
    let Some(spec) = map(obj, "spec") else { return };
    spec.entry("type").or_insert(json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert(json!("None"));
    let kind = spec["type"].as_str().unwrap_or_default().to_string();
    if spec["sessionAffinity"] == "ClientIP" {
        spec.entry("sessionAffinityConfig")
            .or_insert(json!({"clientIP": {"timeoutSeconds": 10800}}));
    }
    if kind != "ExternalName" {
        spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        spec.entry("externalTrafficPolicy").or_insert(json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        spec.entry("allocateLoadBalancerNodePorts").or_insert(json!(true));
    }
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
        port.entry("protocol").or_insert(json!("TCP"));
        if let Some(number) = port.get("port").cloned() {
            port.entry("targetPort").or_insert(number);
        }
    }
}

/// Every namespace carries its name as the label
/// `kubernetes.io/metadata.name`.
fn namespace(obj: &mut Value) {
    let name = obj["metadata"]["name"].clone();
    let labels = map(obj, "metadata").map(|m| m.entry("labels").or_insert_with(|| json!({})));
    if let Some(labels) = labels.and_then(Value::as_object_mut) {
        labels.insert("kubernetes.io/metadata.name".into(), name);
    }
}

#[cfg(test)]
mod tests;
