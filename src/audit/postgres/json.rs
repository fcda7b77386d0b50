//! Rows and intents as PostgreSQL receives and returns them: JSON named
//! as the row's own serde fields, so no column list is repeated by
//! position.

use crate::audit::chain::Link;
use crate::audit::row::{AuditRow, ChainedRow};
use crate::audit::sqlite::timestamp;
use crate::audit::AuditError;
use serde_json::{Map, Value};

/// The field of an intent's JSON that names its replica.
const REPLICA_FIELD: &str = "intent_replica";

/// A row at its place in the chain as the JSON object of its columns: the
/// row's own fields, but the times as the fixed-width text the column holds
/// (text order is time order) and `write` as its column `is_write`.
pub(super) fn record(link: &Link, row: &AuditRow) -> Result<Value, AuditError> {
    let mut value = serde_json::to_value(row).map_err(|e| AuditError::Store(e.to_string()))?;
    let fields = object(&mut value)?;
    fields.insert("seq".into(), link.seq.into());
    fields.insert("prev_hash".into(), link.prev_hash.clone().into());
    fields.insert("hash".into(), link.hash.clone().into());
    fields.insert("started_at".into(), timestamp(&row.started_at).into());
    fields.insert("ended_at".into(), timestamp(&row.ended_at).into());
    if let Some(write) = fields.remove("write") {
        fields.insert("is_write".into(), write);
    }
    // Left out of the row's JSON when empty; the columns are NOT NULL.
    for text in ["via", "kind"] {
        fields.entry(text).or_insert_with(|| "".into());
    }
    // BIGINT columns: a count past i64 (never seen) is kept at its maximum.
    for count in ["bytes_in", "bytes_out", "duration_ms"] {
        if fields.get(count).is_some_and(|n| n.as_i64().is_none()) {
            fields.insert(count.into(), i64::MAX.into());
        }
    }
    Ok(value)
}

/// A row read as `row_to_json` of the table.
pub(super) fn chained_row(text: &str) -> Result<ChainedRow, AuditError> {
    let unreadable = |e: serde_json::Error| AuditError::Store(format!("an audit row does not read back: {e}"));
    let mut value: Value = serde_json::from_str(text).map_err(unreadable)?;
    let fields = object(&mut value)?;
    if let Some(write) = fields.remove("is_write") {
        fields.insert("write".into(), write);
    }
    serde_json::from_value(value).map_err(unreadable)
}

fn object(value: &mut Value) -> Result<&mut Map<String, Value>, AuditError> {
    value
        .as_object_mut()
        .ok_or_else(|| AuditError::Store("an audit row is not a JSON object".into()))
}

/// The text of `row`'s intent: its JSON, naming `replica`.
pub(super) fn intent(row: &AuditRow, replica: Option<i32>) -> Result<String, AuditError> {
    let mut value = serde_json::to_value(row).map_err(|e| AuditError::Store(e.to_string()))?;
    object(&mut value)?.insert(REPLICA_FIELD.into(), replica.into());
    Ok(value.to_string())
}

/// An intent's replica (none: written before replicas, or by SQLite) and
/// its row.
pub(super) fn intent_of(text: &str) -> Result<(Option<i32>, AuditRow), AuditError> {
    let unreadable = |e: serde_json::Error| AuditError::Store(format!("an audit intent does not read back: {e}"));
    let mut value: Value = serde_json::from_str(text).map_err(unreadable)?;
    let replica = object(&mut value)?
        .remove(REPLICA_FIELD)
        .and_then(|n| n.as_i64())
        .and_then(|n| i32::try_from(n).ok());
    Ok((replica, serde_json::from_value(value).map_err(unreadable)?))
}
