//! Redaction of one parsed JSON document: a Secret, a list of them, a Table,
//! PartialObjectMetadata (and its list), a watch event, or a TokenRequest.
//!
//! The request decides what the answer is about ([`Target`]), so objects
//! are redacted by their shape rather than trusted by their `kind`: a list
//! item without `kind` (as kube-apiserver writes them) is still a Secret.
//! Anything that does not have the expected shape is an error, never passed.

use super::RedactError;
use serde_json::{Map, Value};

/// The annotation `kubectl apply` fills with the whole applied object,
/// Secret values included.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What a response is about, and so what is hidden in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// core/v1 Secrets: `data` and `stringData` values, and the
    /// last-applied annotation. A `data` marker is written as text: readable
    /// in `kubectl get -o yaml`, and refused by the API server (not base64)
    /// if a redacted object is ever written back.
    Secrets,
    /// The same for a client that decodes `data` values as bytes (client-go
    /// typed clients such as `kubectl describe` and `kubectl create secret`,
    /// which also ask for protobuf): each `data` marker is base64-encoded, so
    /// that it decodes to `<redacted, N bytes>` instead of failing.
    TypedSecrets,
    /// A TokenRequest (`serviceaccounts/<name>/token`): `status.token`.
    Token,
}

/// What replaces a value of `len` bytes.
pub fn marker(len: usize) -> String {
    format!("<redacted, {len} bytes>")
}

/// Redact a whole response body. `None` when it passes unchanged: a Status
/// carries no object.
pub fn redact_json(body: &[u8], target: Target) -> Result<Option<Vec<u8>>, RedactError> {
    let mut document: Value = serde_json::from_slice(body).map_err(RedactError::not_json)?;
    if is_status(&document) {
        return Ok(None);
    }
    redact_document(&mut document, target)?;
    serde_json::to_vec(&document)
        .map(Some)
        .map_err(|_| RedactError::Serialize)
}

/// Redact one watch event (a line of a watch stream, without its newline).
/// `None` when it passes unchanged: an ERROR event carries a Status.
pub fn redact_event(line: &[u8], target: Target) -> Result<Option<Vec<u8>>, RedactError> {
    let mut event: Value = serde_json::from_slice(line).map_err(RedactError::not_json)?;
    let fields = event.as_object_mut().ok_or(RedactError::NotAnObject)?;
    match fields.get("type").and_then(Value::as_str) {
        Some("ERROR") => return Ok(None),
        Some(_) => {}
        None => return Err(RedactError::Shape("type")),
    }
    // A BOOKMARK's object is a Secret with metadata only: redacting it
    // changes nothing, and nothing is trusted by its event type.
    let object = fields.get_mut("object").ok_or(RedactError::Shape("object"))?;
    redact_document(object, target)?;
    serde_json::to_vec(&event).map(Some).map_err(|_| RedactError::Serialize)
}

/// Redact a parsed document (a Status is left as it is).
pub fn redact_document(document: &mut Value, target: Target) -> Result<(), RedactError> {
    if is_status(document) {
        return Ok(());
    }
    match target {
        Target::Secrets | Target::TypedSecrets => secrets_document(document, target),
        Target::Token => token_request(document),
    }
}

fn is_status(document: &Value) -> bool {
    document.get("kind").and_then(Value::as_str) == Some("Status")
        && document.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// A Secret, a list of them (SecretList, List, PartialObjectMetadataList),
/// a Table, or a PartialObjectMetadata.
fn secrets_document(document: &mut Value, target: Target) -> Result<(), RedactError> {
    let fields = document.as_object_mut().ok_or(RedactError::NotAnObject)?;
    if fields.get("kind").and_then(Value::as_str) == Some("Table") {
        return table(fields, target);
    }
    match fields.get_mut("items") {
        Some(Value::Array(items)) => items.iter_mut().try_for_each(|item| secret(item, target)),
        Some(Value::Null) => Ok(()),
        Some(_) => Err(RedactError::Shape("items")),
        None => secret_fields(fields, target),
    }
}

/// A Table's rows carry their object as PartialObjectMetadata, as the full
/// object (`includeObject=Object`), or not at all.
fn table(fields: &mut Map<String, Value>, target: Target) -> Result<(), RedactError> {
    let rows = match fields.get_mut("rows") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(rows)) => rows,
        Some(_) => return Err(RedactError::Shape("rows")),
    };
    for row in rows {
        match row.as_object_mut().ok_or(RedactError::Shape("rows"))?.get_mut("object") {
            None | Some(Value::Null) => {}
            Some(object) => secret(object, target)?,
        }
    }
    Ok(())
}

fn secret(object: &mut Value, target: Target) -> Result<(), RedactError> {
    secret_fields(object.as_object_mut().ok_or(RedactError::NotAnObject)?, target)
}

/// One Secret (or its PartialObjectMetadata, which has no values).
fn secret_fields(fields: &mut Map<String, Value>, target: Target) -> Result<(), RedactError> {
    forget_last_applied(fields)?;
    let data_marker = match target {
        Target::TypedSecrets => base64_marker,
        _ => marker,
    };
    redact_values(fields, "data", decoded_len, data_marker)?;
    redact_values(fields, "stringData", |text| Ok(text.len()), marker)
}

fn base64_marker(len: usize) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(marker(len))
}

fn forget_last_applied(fields: &mut Map<String, Value>) -> Result<(), RedactError> {
    let metadata = match fields.get_mut("metadata") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(metadata)) => metadata,
        Some(_) => return Err(RedactError::Shape("metadata")),
    };
    match metadata.get_mut("annotations") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(annotations)) => {
            annotations.remove(LAST_APPLIED);
            Ok(())
        }
        Some(_) => Err(RedactError::Shape("metadata.annotations")),
    }
}

/// Replace each value of the map `field` with its `marker`; `len` measures
/// a value (a null value is empty, as Go writes a nil byte slice).
fn redact_values(
    fields: &mut Map<String, Value>,
    field: &'static str,
    len: fn(&str) -> Result<usize, RedactError>,
    marker: fn(usize) -> String,
) -> Result<(), RedactError> {
    let values = match fields.get_mut(field) {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(values)) => values,
        Some(_) => return Err(RedactError::Shape(field)),
    };
    for value in values.values_mut() {
        let bytes = match value {
            Value::String(text) => len(text)?,
            Value::Null => 0,
            _ => return Err(RedactError::Shape(field)),
        };
        *value = Value::String(marker(bytes));
    }
    Ok(())
}

/// The decoded length of standard base64 (padded or not), computed without
/// decoding: the value itself is never copied.
fn decoded_len(text: &str) -> Result<usize, RedactError> {
    let bytes = text.as_bytes();
    let body = bytes
        .strip_suffix(b"==")
        .or_else(|| bytes.strip_suffix(b"="))
        .unwrap_or(bytes);
    let padded = body.len() != bytes.len();
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    // Padding only ever completes a whole group of four characters.
    let whole_groups = bytes.len() & 3 == 0;
    if !body.iter().all(alphabet) || body.len() % 4 == 1 || (padded && !whole_groups) {
        return Err(RedactError::NotBase64);
    }
    Ok(body.len() / 4 * 3 + (body.len() % 4).saturating_sub(1))
}

/// A TokenRequest's `status.token`, the only value in it.
fn token_request(document: &mut Value) -> Result<(), RedactError> {
    let fields = document.as_object_mut().ok_or(RedactError::NotAnObject)?;
    let status = match fields.get_mut("status") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(status)) => status,
        Some(_) => return Err(RedactError::Shape("status")),
    };
    match status.get_mut("token") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(token)) => {
            *token = marker(token.len());
            Ok(())
        }
        Some(_) => Err(RedactError::Shape("status.token")),
    }
}

#[cfg(test)]
#[path = "object_tests.rs"]
mod tests;
