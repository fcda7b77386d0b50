//! Printers for the named API groups' kinds besides workloads and events:
//! networking, policy, RBAC and coordination.

use super::columns::{
    age as age_cell, col, created_at, int, items, label_selector, name, text_or, wide, Builtin, Column, AGE,
    CREATED_AT, NAME,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// Printers for the kinds of the named API groups.
pub(super) fn named_group(group: &str, kind: &str) -> Option<Builtin> {
    let printer: Builtin = match (group, kind) {
        ("networking.k8s.io", "Ingress") => (ingress_columns(), ingress_cells),
        ("networking.k8s.io", "NetworkPolicy") => (
            vec![
                NAME,
                col(
                    "Pod-Selector",
                    "string",
                    "Selects the pods to which this NetworkPolicy object applies.",
                ),
                AGE,
            ],
            |o, now| {
                vec![
                    name(o),
                    json!(label_selector(&o["spec"]["podSelector"]).replace("<none>", "")),
                    age_cell(o, now),
                ]
            },
        ),
        ("policy", "PodDisruptionBudget") => (pdb_columns(), pdb_cells),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            (vec![NAME, CREATED_AT], |o, _| vec![name(o), created_at(o)])
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => (binding_columns(), binding_cells),
        ("coordination.k8s.io", "Lease") => (
            vec![
                NAME,
                col(
                    "Holder",
                    "string",
                    "HolderIdentity contains the identity of the holder of a current lease.",
                ),
                AGE,
            ],
            |o, now| {
                vec![
                    name(o),
                    json!(text_or(&o["spec"]["holderIdentity"], "")),
                    age_cell(o, now),
                ]
            },
        ),
        _ => return None,
    };
    Some(printer)
}

fn ingress_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Class", "string", "The name of the IngressClass cluster resource."),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ]
}

fn ingress_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let hosts: Vec<&str> = items(&o["spec"]["rules"])
        .iter()
        .filter_map(|r| r["host"].as_str())
        .collect();
    let address: Vec<&str> = items(&o["status"]["loadBalancer"]["ingress"])
        .iter()
        .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
        .collect();
    let ports = if items(&o["spec"]["tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name(o),
        json!(text_or(&o["spec"]["ingressClassName"], "<none>")),
        json!(if hosts.is_empty() {
            "*".to_string()
        } else {
            hosts.join(",")
        }),
        json!(address.join(",")),
        json!(ports),
        age_cell(o, now),
    ]
}

fn pdb_columns() -> Vec<Column> {
    vec![
        NAME,
        col(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
        ),
        col(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
        ),
        col(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ]
}

fn pdb_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let as_text = |v: &Value| match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => "N/A".into(),
    };
    vec![
        name(o),
        json!(as_text(&o["spec"]["minAvailable"])),
        json!(as_text(&o["spec"]["maxUnavailable"])),
        json!(int(&o["status"]["disruptionsAllowed"])),
        age_cell(o, now),
    ]
}

fn binding_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Role", "string", "Role references a role."),
        AGE,
        wide("Users", "string", "Users in the binding"),
        wide("Groups", "string", "Groups in the binding"),
        wide("ServiceAccounts", "string", "ServiceAccounts in the binding"),
    ]
}

fn binding_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let subjects = items(&o["subjects"]);
    let of_kind = |kind: &str| -> String {
        subjects
            .iter()
            .filter(|s| s["kind"] == kind)
            .map(|s| match (kind, s["namespace"].as_str()) {
                ("ServiceAccount", Some(ns)) => format!("{ns}/{}", s["name"].as_str().unwrap_or_default()),
                _ => s["name"].as_str().unwrap_or_default().to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let role = format!(
        "{}/{}",
        o["roleRef"]["kind"].as_str().unwrap_or_default(),
        o["roleRef"]["name"].as_str().unwrap_or_default()
    );
    vec![
        name(o),
        json!(role),
        age_cell(o, now),
        json!(of_kind("User")),
        json!(of_kind("Group")),
        json!(of_kind("ServiceAccount")),
    ]
}
