//! Column definitions, the per-kind printer table and helpers the printers
//! share.

use super::age;
use super::{cluster, custom, events, workloads};
use crate::registry::ResourceType;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// One `TableColumnDefinition`.
#[derive(Debug, Clone)]
pub(super) struct Column {
    pub name: &'static str,
    /// `string`, `integer`, `boolean`, `date`, …
    pub kind: &'static str,
    /// `name` for the Name column, otherwise empty.
    pub format: &'static str,
    /// 0 shown by default, 1 only with `-o wide`.
    pub priority: u8,
    pub description: &'static str,
}

impl Column {
    /// The JSON column definition.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// A printed-by-default column.
pub(super) const fn col(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 0,
        description,
    }
}

/// A `-o wide` column.
pub(super) const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 1,
        description,
    }
}

pub(super) const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
};
pub(super) const AGE: Column = col(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
);
pub(super) const CREATED_AT: Column = col(
    "Created At",
    "date",
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
);
pub(super) const CONTAINERS: Column = wide("Containers", "string", "Names of each container in the template.");
pub(super) const IMAGES: Column = wide(
    "Images",
    "string",
    "Images referenced by each container in the template.",
);

/// Builds one row's cells from an object.
pub(super) type CellsFn = fn(&Value, DateTime<Utc>) -> Vec<Value>;

/// A built-in printer: a kind's columns and the function that fills them.
pub(super) type Builtin = (Vec<Column>, CellsFn);

/// A kind's columns and how to fill them.
pub(super) struct Printer {
    pub columns: Vec<Column>,
    pub cells: Cells,
}

/// How a printer fills cells.
pub(super) enum Cells {
    /// A built-in printer.
    Builtin(CellsFn),
    /// A custom resource's `additionalPrinterColumns` JSON paths.
    JsonPaths(Vec<String>),
}

impl Printer {
    /// The cells of `object`'s row, one per column.
    pub fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        match &self.cells {
            Cells::Builtin(cells) => cells(object, now),
            Cells::JsonPaths(paths) => custom::custom_cells(&self.columns, paths, object, now),
        }
    }
}

/// The printer for `resource`.
pub(super) fn printer(resource: &ResourceType) -> Printer {
    if let Some(printer) = builtin(resource.group, resource.kind) {
        return printer;
    }
    custom::custom_printer(resource).unwrap_or_else(|| Printer {
        columns: vec![NAME, CREATED_AT],
        cells: Cells::Builtin(|o, _| vec![name(o), o["metadata"]["creationTimestamp"].clone()]),
    })
}

/// Built-in printers by group and kind.
fn builtin(group: &str, kind: &str) -> Option<Printer> {
    let (columns, cells): (Vec<Column>, CellsFn) = match (group, kind) {
        ("", "Pod") => (workloads::pod_columns(), workloads::pod_cells),
        ("apps", "Deployment") => (workloads::deployment_columns(), workloads::deployment_cells),
        ("apps", "ReplicaSet") => (workloads::replica_set_columns(), workloads::replica_set_cells),
        ("apps", "StatefulSet") => (workloads::stateful_set_columns(), workloads::stateful_set_cells),
        ("apps", "DaemonSet") => (workloads::daemon_set_columns(), workloads::daemon_set_cells),
        ("apps", "ControllerRevision") => (workloads::revision_columns(), workloads::revision_cells),
        ("batch", "Job") => (workloads::job_columns(), workloads::job_cells),
        ("batch", "CronJob") => (workloads::cron_job_columns(), workloads::cron_job_cells),
        ("", "Event") | ("events.k8s.io", "Event") => (events::event_columns(), events::event_cells),
        _ => return cluster::builtin(group, kind),
    };
    Some(Printer {
        columns,
        cells: Cells::Builtin(cells),
    })
}

/// The Created At cell: the timestamp itself, which kubectl prints as is.
pub(super) fn created_at(object: &Value) -> Value {
    object["metadata"]["creationTimestamp"].clone()
}

/// The Name cell.
pub(super) fn name(object: &Value) -> Value {
    object["metadata"]["name"].clone()
}

/// The Age cell.
pub(super) fn age(object: &Value, now: DateTime<Utc>) -> Value {
    Value::String(age::since(&object["metadata"]["creationTimestamp"], now))
}

/// A string field, or `default` when missing or empty.
pub(super) fn text_or(value: &Value, default: &str) -> String {
    match value.as_str() {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => default.to_string(),
    }
}

/// An integer field, 0 when missing.
pub(super) fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// The elements of an array field (none when missing).
pub(super) fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// `field` of every element of `list`, joined with commas.
pub(super) fn join_field(list: &Value, field: &str) -> String {
    items(list)
        .iter()
        .filter_map(|item| item[field].as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// `k=v,k2=v2` of a string map, sorted by key; `<none>` when empty.
pub(super) fn labels(map: &Value) -> String {
    let Some(map) = map.as_object().filter(|m| !m.is_empty()) else {
        return "<none>".into();
    };
    // serde_json's map is ordered by key, as Go's label formatting is.
    map.iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

/// `metav1.FormatLabelSelector`: match labels and expressions, `<none>`
/// for an empty selector.
pub(super) fn label_selector(selector: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(map) = selector["matchLabels"].as_object() {
        parts.extend(
            map.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())),
        );
    }
    for expression in items(&selector["matchExpressions"]) {
        let key = expression["key"].as_str().unwrap_or_default();
        let values = items(&expression["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(",");
        parts.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

/// Containers and Images cells of a pod template.
pub(super) fn containers_and_images(template: &Value) -> [Value; 2] {
    let containers = &template["spec"]["containers"];
    [
        json!(join_field(containers, "name")),
        json!(join_field(containers, "image")),
    ]
}
