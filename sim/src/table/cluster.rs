//! Printers for the core group's kinds besides pods and events: services,
//! nodes, configuration and the rest. The named groups' are in
//! [`super::apis`].

use super::apis;
use super::columns::{
    age as age_cell, col, created_at, int, items, labels, name, text_or, wide, Builtin, Cells, Column, Printer, AGE,
    CREATED_AT, NAME,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// Printers for the kinds in this file and in [`super::apis`], by group and
/// kind.
pub(super) fn builtin(group: &str, kind: &str) -> Option<Printer> {
    let (columns, cells) = match group {
        "" => core(kind)?,
        _ => apis::named_group(group, kind)?,
    };
    Some(Printer {
        columns,
        cells: Cells::Builtin(cells),
    })
}

/// Printers for the core group's kinds.
fn core(kind: &str) -> Option<Builtin> {
    let printer: Builtin = match kind {
        "Service" => (service_columns(), service_cells),
        "Node" => (node_columns(), node_cells),
        "Namespace" => (
            vec![NAME, col("Status", "string", "The status of the namespace"), AGE],
            |o, now| vec![name(o), json!(text_or(&o["status"]["phase"], "Active")), age_cell(o, now)],
        ),
        "ConfigMap" => (
            vec![NAME, col("Data", "string", "Data contains the configuration data."), AGE],
            |o, now| vec![name(o), json!(count(&o["data"]) + count(&o["binaryData"])), age_cell(o, now)],
        ),
        "Secret" => (
            vec![
                NAME,
                col("Type", "string", "Used to facilitate programmatic handling of secret data."),
                col("Data", "string", "Data contains the secret data."),
                AGE,
            ],
            |o, now| vec![name(o), json!(text_or(&o["type"], "Opaque")), json!(count(&o["data"])), age_cell(o, now)],
        ),
        "ServiceAccount" => (
            vec![NAME, col("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."), AGE],
            |o, now| vec![name(o), json!(items(&o["secrets"]).len()), age_cell(o, now)],
        ),
        "Endpoints" => (
            vec![NAME, col("Endpoints", "string", "The set of all endpoints is the union of all subsets."), AGE],
            |o, now| vec![name(o), json!(endpoints(o)), age_cell(o, now)],
        ),
        "PersistentVolumeClaim" => (pvc_columns(), pvc_cells),
        "ResourceQuota" => (
            vec![
                NAME,
                AGE,
                col("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
                col("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
            ],
            |o, now| vec![name(o), age_cell(o, now), json!(quota(o, false)), json!(quota(o, true))],
        ),
        "LimitRange" => (vec![NAME, CREATED_AT], |o, _| vec![name(o), created_at(o)]),
        _ => return None,
    };
    Some(printer)
}

/// Number of keys of a map field.
fn count(map: &Value) -> usize {
    map.as_object().map_or(0, |m| m.len())
}

fn service_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Type", "string", "type determines how the Service is exposed."),
        col("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly."),
        col("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
        col("Port(s)", "string", "The list of ports that are exposed by this service."),
        AGE,
        wide("Selector", "string", "Route service traffic to pods with label keys and values matching this selector."),
    ]
}

fn service_cells(svc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let spec = &svc["spec"];
    let kind = text_or(&spec["type"], "ClusterIP");
    let external = external_ips(svc, &kind);
    let ports: Vec<String> = items(&spec["ports"])
        .iter()
        .map(|p| {
            let protocol = text_or(&p["protocol"], "TCP");
            match p["nodePort"].as_i64().filter(|n| *n != 0) {
                Some(node_port) => format!("{}:{node_port}/{protocol}", int(&p["port"])),
                None => format!("{}/{protocol}", int(&p["port"])),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        name(svc),
        json!(kind),
        json!(text_or(&spec["clusterIP"], "<none>")),
        json!(external),
        json!(ports),
        age_cell(svc, now),
        json!(labels(&spec["selector"])),
    ]
}

/// The External-IP cell, by service type.
fn external_ips(svc: &Value, kind: &str) -> String {
    let spec = &svc["spec"];
    let listed: Vec<String> = items(&spec["externalIPs"])
        .iter()
        .filter_map(|ip| ip.as_str().map(String::from))
        .collect();
    match kind {
        "ExternalName" => text_or(&spec["externalName"], "<none>"),
        "LoadBalancer" => {
            let mut ips: Vec<String> = items(&svc["status"]["loadBalancer"]["ingress"])
                .iter()
                .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()).map(String::from))
                .collect();
            ips.extend(listed);
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ if listed.is_empty() => "<none>".into(),
        _ => listed.join(","),
    }
}

fn node_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", "Kubelet Version reported by the node."),
        wide("Internal-IP", "string", "List of addresses reachable to the node."),
        wide("External-IP", "string", "List of addresses reachable to the node."),
        wide(
            "OS-Image",
            "string",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        ),
        wide(
            "Kernel-Version",
            "string",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        ),
        wide(
            "Container-Runtime",
            "string",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ]
}

fn node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = &node["status"];
    let address = |kind: &str| {
        items(&status["addresses"])
            .iter()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let info = &status["nodeInfo"];
    vec![
        name(node),
        json!(node_state(node)),
        json!(node_roles(node)),
        age_cell(node, now),
        json!(text_or(&info["kubeletVersion"], "")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(text_or(&info["osImage"], "<unknown>")),
        json!(text_or(&info["kernelVersion"], "<unknown>")),
        json!(text_or(&info["containerRuntimeVersion"], "<unknown>")),
    ]
}

/// The Status cell: Ready, NotReady or Unknown, then SchedulingDisabled
/// for a cordoned node.
fn node_state(node: &Value) -> String {
    let mut state: Vec<&str> = Vec::new();
    if let Some(ready) = items(&node["status"]["conditions"])
        .iter()
        .find(|c| c["type"] == "Ready")
    {
        state.push(if ready["status"] == "True" { "Ready" } else { "NotReady" });
    }
    if state.is_empty() {
        state.push("Unknown");
    }
    if node["spec"]["unschedulable"] == true {
        state.push("SchedulingDisabled");
    }
    state.join(",")
}

/// The Roles cell: from `node-role.kubernetes.io/<role>` labels and the
/// older `kubernetes.io/role`, sorted.
fn node_roles(node: &Value) -> String {
    let mut roles: Vec<String> = node["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                    Some(role) if !role.is_empty() => Some(role.to_string()),
                    _ if k == "kubernetes.io/role" => v.as_str().map(String::from),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    }
}

/// The Endpoints cell: `ip:port` pairs, at most three, then `+ N more...`.
fn endpoints(o: &Value) -> String {
    let mut all = Vec::new();
    for subset in items(&o["subsets"]) {
        for address in items(&subset["addresses"]) {
            let ip = address["ip"].as_str().unwrap_or_default();
            let ports = items(&subset["ports"]);
            if ports.is_empty() {
                all.push(ip.to_string());
            }
            all.extend(ports.iter().map(|p| format!("{ip}:{}", int(&p["port"]))));
        }
    }
    match all.len() {
        0 => "<none>".into(),
        n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
        _ => all.join(","),
    }
}

fn pvc_columns() -> Vec<Column> {
    vec![
        NAME,
        col(
            "Status",
            "string",
            "phase represents the current phase of PersistentVolumeClaim.",
        ),
        col(
            "Volume",
            "string",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        col(
            "Capacity",
            "string",
            "capacity represents the actual resources of the underlying volume.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        col(
            "StorageClass",
            "string",
            "storageClassName is the name of the StorageClass required by the claim.",
        ),
        col(
            "VolumeAttributesClass",
            "string",
            "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
        ),
        AGE,
        wide(
            "VolumeMode",
            "string",
            "volumeMode defines what type of volume is required by the claim.",
        ),
    ]
}

fn pvc_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let bound = !o["spec"]["volumeName"].as_str().unwrap_or_default().is_empty();
    let modes: Vec<&str> = items(&o["status"]["accessModes"])
        .iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect();
    vec![
        name(o),
        json!(text_or(&o["status"]["phase"], "Pending")),
        json!(text_or(&o["spec"]["volumeName"], "")),
        json!(if bound {
            text_or(&o["status"]["capacity"]["storage"], "")
        } else {
            String::new()
        }),
        json!(if bound { modes.join(",") } else { String::new() }),
        json!(text_or(&o["spec"]["storageClassName"], "<unset>")),
        json!(text_or(&o["spec"]["volumeAttributesClassName"], "<unset>")),
        age_cell(o, now),
        json!(text_or(&o["spec"]["volumeMode"], "Filesystem")),
    ]
}

/// `requests.cpu: 0/1` style summary of a quota's request or limit keys.
fn quota(o: &Value, limits: bool) -> String {
    let Some(hard) = o["status"]["hard"].as_object().or(o["spec"]["hard"].as_object()) else {
        return String::new();
    };
    hard.iter()
        .filter(|(k, _)| {
            k.starts_with("limits.") == limits && (limits || k.starts_with("requests.") || !k.contains('.'))
        })
        .map(|(k, v)| {
            let used = o["status"]["used"][k.as_str()].as_str().unwrap_or("0");
            format!("{k}: {used}/{}", v.as_str().unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join(", ")
}
