//! `metadata.managedFields`: decoding, encoding and ordering entries as
//! apimachinery's `managedfields/internal` does.

use serde_json::{json, Map, Value};

use super::fieldset::FieldSet;

/// `operation: Apply`.
pub const APPLY: &str = "Apply";
/// `operation: Update`.
pub const UPDATE: &str = "Update";

/// One managedFields entry with its field set decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The field manager's name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The API version the fields were written in.
    pub api_version: String,
    /// When the entry last changed (RFC 3339); kube omits it when unknown.
    pub time: Option<String>,
    /// The subresource written through, empty for the main resource.
    pub subresource: String,
    /// The fields owned.
    pub set: FieldSet,
}

impl Entry {
    /// Whether this entry is the one of `manager` doing `operation`: the
    /// apiVersion counts for Update entries only, as in kube's manager
    /// identifier.
    pub fn is(&self, manager: &str, operation: &str, api_version: &str, subresource: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == APPLY || self.api_version == api_version)
    }

    /// How a conflict names this manager (apimachinery's `printManager`;
    /// the identifier carries no time).
    pub fn printable(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == UPDATE {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    /// The same entry ignoring its time, for no-op detection.
    fn without_time(&self) -> Entry {
        Entry {
            time: None,
            ..self.clone()
        }
    }
}

fn managed_fields(object: &Value) -> Option<&Vec<Value>> {
    object.get("metadata")?.get("managedFields")?.as_array()
}

/// Whether the object asks for its managedFields to be reset: a non-empty
/// list of empty entries (`[{}]`), as kube documents.
pub fn is_reset(object: &Value) -> bool {
    managed_fields(object)
        .is_some_and(|entries| !entries.is_empty() && entries.iter().all(|e| e.as_object().is_some_and(Map::is_empty)))
}

/// Decode the object's entries; an error if any entry is malformed.
pub fn decode(object: &Value) -> Result<Vec<Entry>, String> {
    let Some(entries) = managed_fields(object) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<Entry> = Vec::new();
    for raw in entries {
        let text = |name: &str| raw.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
        if raw.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1") {
            return Err(format!("invalid fieldsType in managedFields entry {raw}"));
        }
        let operation = text("operation");
        if operation != APPLY && operation != UPDATE {
            return Err(format!("invalid operation in managedFields entry {raw}"));
        }
        let set = FieldSet::from_fields_v1(raw.get("fieldsV1").unwrap_or(&json!({})))?;
        let entry = Entry {
            manager: text("manager"),
            operation,
            api_version: text("apiVersion"),
            time: raw.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: text("subresource"),
            set,
        };
        let same = out
            .iter_mut()
            .find(|e| e.is(&entry.manager, &entry.operation, &entry.api_version, &entry.subresource));
        match same {
            Some(existing) => existing.set = existing.set.union(&entry.set),
            None => out.push(entry),
        }
    }
    Ok(out)
}

/// Seconds since the epoch of an RFC 3339 time, 0 when absent or bad (as a
/// nil time sorts in kube).
fn seconds(time: &Option<String>) -> i64 {
    time.as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
        .unwrap_or(0)
}

/// Encode entries in kube's order: operation, time, manager, apiVersion,
/// subresource.
pub fn encode(mut entries: Vec<Entry>) -> Value {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|p, q| {
        (
            &p.operation,
            seconds(&p.time),
            &p.manager,
            &p.api_version,
            &p.subresource,
        )
            .cmp(&(
                &q.operation,
                seconds(&q.time),
                &q.manager,
                &q.api_version,
                &q.subresource,
            ))
    });
    Value::Array(
        entries
            .into_iter()
            .map(|e| {
                let mut entry = Map::new();
                entry.insert("manager".into(), Value::String(e.manager));
                entry.insert("operation".into(), Value::String(e.operation));
                entry.insert("apiVersion".into(), Value::String(e.api_version));
                if let Some(time) = e.time {
                    entry.insert("time".into(), Value::String(time));
                }
                entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
                entry.insert("fieldsV1".into(), e.set.to_fields_v1());
                if !e.subresource.is_empty() {
                    entry.insert("subresource".into(), Value::String(e.subresource));
                }
                Value::Object(entry)
            })
            .collect(),
    )
}

/// Whether two entry lists differ only in their times.
pub fn same_ignoring_time(a: &[Entry], b: &[Entry]) -> bool {
    let strip = |entries: &[Entry]| {
        let mut out: Vec<Entry> = entries
            .iter()
            .filter(|e| !e.set.is_empty())
            .map(Entry::without_time)
            .collect();
        out.sort_by(|p, q| (&p.manager, &p.operation, &p.subresource).cmp(&(&q.manager, &q.operation, &q.subresource)));
        out
    };
    strip(a) == strip(b)
}

/// Write the entries into `object.metadata.managedFields`, or remove the
/// field when there is none.
pub fn store(object: &mut Value, entries: Vec<Entry>) {
    let encoded = encode(entries);
    let Some(Value::Object(metadata)) = object.get_mut("metadata") else {
        return;
    };
    if encoded.as_array().is_some_and(Vec::is_empty) {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), encoded);
    }
}

/// A copy of the object without `metadata.managedFields`.
pub fn without_managed_fields(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(Value::Object(metadata)) = out.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    out
}
