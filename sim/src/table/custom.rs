//! Printers for custom resources, from their CustomResourceDefinition's
//! `additionalPrinterColumns`.

use super::age;
use super::columns::{items, name, Cells, Column, Printer, AGE, NAME};
use crate::registry::ResourceType;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// A custom resource's printer from its seed CustomResourceDefinition
/// (parsed once, so its texts are `'static`):
/// Name, then `additionalPrinterColumns` (Age when it has none).
pub(super) fn custom_printer(resource: &ResourceType) -> Option<Printer> {
    let crd = crate::seed::custom_resource_definition(resource.group, resource.plural)?;
    let version = items(&crd["spec"]["versions"])
        .iter()
        .find(|v| v["name"] == resource.version)?;
    let defined = items(&version["additionalPrinterColumns"]);
    let mut columns = vec![NAME];
    let mut paths = Vec::new();
    if defined.is_empty() {
        columns.push(Column { kind: "date", ..AGE });
        paths.push(".metadata.creationTimestamp".to_string());
    }
    for c in defined {
        columns.push(Column {
            name: c["name"].as_str().unwrap_or_default(),
            kind: c["type"].as_str().unwrap_or("string"),
            format: c["format"].as_str().unwrap_or_default(),
            priority: c["priority"].as_u64().map_or(0, |p| p.min(u8::MAX.into()) as u8),
            description: c["description"].as_str().unwrap_or_default(),
        });
        paths.push(c["jsonPath"].as_str().unwrap_or_default().to_string());
    }
    Some(Printer {
        columns,
        cells: Cells::JsonPaths(paths),
    })
}

/// Cells of a custom resource: Name, then each JSON path's value typed as
/// its column says (`date` as an age), `null` when absent.
pub(super) fn custom_cells(columns: &[Column], paths: &[String], object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![name(object)];
    for (column, path) in columns.iter().skip(1).zip(paths) {
        let value = path
            .trim_start_matches('.')
            .split('.')
            .filter(|p| !p.is_empty())
            .fold(object, |v, key| &v[key]);
        cells.push(match (column.kind, value) {
            (_, Value::Null) => Value::Null,
            ("date", _) => json!(age::since(value, now).replace("<unknown>", "<invalid>")),
            ("integer", Value::Number(n)) => json!(n.as_i64().or(n.as_f64().map(|f| f as i64))),
            ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => value.clone(),
            ("string", other) => json!(other.to_string()),
            _ => Value::Null,
        });
    }
    cells
}
