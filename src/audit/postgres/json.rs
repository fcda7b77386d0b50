//! Rows and intents as PostgreSQL receives and returns them: JSON named
//! as the row's own serde fields, so no column list is repeated by
//! position.

use crate::audit::chain::{Encoded, Link};
use crate::audit::row::{AuditRow, ChainedRow};
use crate::audit::stamp::Stamp;
use crate::audit::AuditError;
use serde::Serialize;
use serde_json::{Map, Value};

/// The field of an intent's JSON that names its replica.
const REPLICA_FIELD: &str = "intent_replica";

/// Write `row` at its place in the chain as the JSON object of its
/// columns. The row's own JSON (the bytes the chain hashed) comes first, as
/// is; the keys given again after it are the ones PostgreSQL takes: `json`
/// (not `jsonb`) keeps every key of an object, and `json_populate_recordset`
/// uses the last of a name. So the times follow as the fixed-width text the
/// column holds (text order is time order), `write` as its column
/// `is_write` (the row's own `write` matches no column), and a count past
/// i64 at its maximum; nothing of the row is serialised again.
pub(super) fn record(out: &mut Vec<u8>, link: &Link, row: &Encoded) -> Result<(), AuditError> {
    let Some((b'}', fields)) = row.json().split_last() else {
        return Err(AuditError::Store("an audit row is not a JSON object".into()));
    };
    let forwarded = row.forwarded();
    let row = row.row();
    out.extend_from_slice(fields);
    field(out, "seq", &link.seq)?;
    field(out, "forwarded", &forwarded)?;
    field(out, "prev_hash", &link.prev_hash)?;
    field(out, "hash", &link.hash)?;
    field(out, "started_at", Stamp::micros(&row.started_at).as_str())?;
    field(out, "ended_at", Stamp::micros(&row.ended_at).as_str())?;
    field(out, "is_write", &row.write)?;
    // Left out of the row's JSON when empty; the columns are NOT NULL.
    for (name, text) in [("via", &row.via), ("kind", &row.kind)] {
        if text.is_empty() {
            field(out, name, "")?;
        }
    }
    // BIGINT columns: a count past i64 (never seen) is kept at its maximum.
    for (name, count) in [
        ("bytes_in", row.bytes_in),
        ("bytes_out", row.bytes_out),
        ("duration_ms", row.duration_ms),
    ] {
        if i64::try_from(count).is_err() {
            field(out, name, &i64::MAX)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// `,"name":value`, the value as serde_json writes it (strings escaped).
fn field<T: Serialize + ?Sized>(out: &mut Vec<u8>, name: &str, value: &T) -> Result<(), AuditError> {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    serde_json::to_writer(&mut *out, value).map_err(|e| AuditError::Store(e.to_string()))
}

/// A row read as `row_to_json` of the table.
pub(super) fn chained_row(text: &str) -> Result<ChainedRow, AuditError> {
    let unreadable = |e: serde_json::Error| AuditError::Store(format!("an audit row does not read back: {e}"));
    let mut value: Value = serde_json::from_str(text).map_err(unreadable)?;
    let fields = object(&mut value)?;
    if let Some(write) = fields.remove("is_write") {
        fields.insert("write".into(), write);
    }
    // Read only in the form written (see the SQLite store's `time_at`).
    let stored: Vec<String> = ["started_at", "ended_at"]
        .iter()
        .filter_map(|name| fields.get(*name)?.as_str().map(String::from))
        .collect();
    let row: ChainedRow = serde_json::from_value(value).map_err(unreadable)?;
    for (text, t) in stored.iter().zip([row.row.started_at, row.row.ended_at]) {
        if crate::audit::stamp::Stamp::micros(&t).as_str() != text {
            return Err(AuditError::Store(crate::audit::sqlite::not_as_written(text)));
        }
    }
    Ok(row)
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
