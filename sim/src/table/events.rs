//! The Event printer, shared by core/v1 and events.k8s.io/v1 Events.

use super::age;
use super::columns::{col, name, text_or, wide, Column, NAME};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn event_columns() -> Vec<Column> {
    vec![
        col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
        col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
        col("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
        col("Object", "string", "The object that this event is about."),
        wide("Subobject", "string", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement."),
        wide("Source", "string", "The component reporting this event. Should be a short machine understandable string."),
        col("Message", "string", "A human-readable description of the status of this operation."),
        wide("First Seen", "string", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
        wide("Count", "string", "The number of times this event has occurred."),
        Column { priority: 1, ..NAME },
    ]
}

/// core/v1 and events.k8s.io/v1 Events print alike; the latter's fields
/// are read under their new names.
pub(super) fn event_cells(event: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let v1 = event["apiVersion"] == "events.k8s.io/v1";
    let pick = |core: &str, new: &str| if v1 { &event[new] } else { &event[core] };
    let first = age::timestamp(pick("firstTimestamp", "deprecatedFirstTimestamp"))
        .or_else(|| age::timestamp(&event["eventTime"]));
    let last = age::timestamp(pick("lastTimestamp", "deprecatedLastTimestamp"))
        .or_else(|| age::timestamp(&event["series"]["lastObservedTime"]))
        .or(first);
    let ago = |t: Option<DateTime<Utc>>| {
        t.map_or("<unknown>".to_string(), |t| {
            age::human_duration((now - t).num_seconds())
        })
    };
    let count = event["series"]["count"]
        .as_i64()
        .or(pick("count", "deprecatedCount").as_i64())
        .filter(|c| *c > 0)
        .unwrap_or(1);
    let object = pick("involvedObject", "regarding");
    let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
    let target = match object["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let source = source_cell(event, pick("source", "deprecatedSource"), v1);
    vec![
        json!(ago(last)),
        json!(text_or(&event["type"], "")),
        json!(text_or(&event["reason"], "")),
        json!(target),
        json!(text_or(&object["fieldPath"], "")),
        json!(source),
        json!(text_or(pick("message", "note"), "").trim()),
        json!(ago(first)),
        json!(count),
        name(event),
    ]
}

/// The Source cell: `component, host`, each from the old `source` field or,
/// where that is empty, from the reporting controller and instance.
fn source_cell(event: &Value, source: &Value, v1: bool) -> String {
    let component = source["component"].as_str().filter(|c| !c.is_empty()).or(event[if v1 {
        "reportingController"
    } else {
        "reportingComponent"
    }]
    .as_str());
    let host = source["host"]
        .as_str()
        .filter(|h| !h.is_empty())
        .or(event["reportingInstance"].as_str());
    match (component, host) {
        (Some(c), Some(h)) if !h.is_empty() => format!("{c}, {h}"),
        (Some(c), _) => c.to_string(),
        _ => String::new(),
    }
}
