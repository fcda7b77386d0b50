//! Turns one message's bytes into Kubernetes JSON, following a
//! [`Message`] description: the JSON a client would have sent had it used
//! `application/json` (zero scalars omitted unless kept, present nested
//! messages kept even when empty, as Go's `encoding/json` does for structs).

use super::schema::{Field, Message, Shape, Type};
use super::wire::{Reader, WireError, WireValue};
use base64::Engine;
use serde_json::{Map, Value};
use std::fmt;

/// Why an object's bytes do not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectError {
    /// The wire format itself is broken.
    Wire(WireError),
    /// A field arrived with a wire type its schema type cannot have.
    WrongWireType {
        /// The message holding the field.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
    },
    /// A `RawExtension` that is not JSON.
    RawExtension(String),
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectError::Wire(e) => e.fmt(f),
            ObjectError::WrongWireType { message, field } => {
                write!(f, "proto: wrong wireType for field {message}.{field}")
            }
            ObjectError::RawExtension(e) => write!(f, "decoding an embedded object: {e}"),
        }
    }
}

impl std::error::Error for ObjectError {}

impl From<WireError> for ObjectError {
    fn from(e: WireError) -> Self {
        ObjectError::Wire(e)
    }
}

/// Decode the fields of `message` from `bytes` into a JSON object. Fields
/// the description lacks are skipped.
pub fn object(bytes: &[u8], message: &'static Message) -> Result<Map<String, Value>, ObjectError> {
    let mut out = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some(wire) = reader.next_field()? {
        let Some(field) = message.field(wire.number) else {
            continue;
        };
        let wrong = || ObjectError::WrongWireType {
            message: message.name,
            field: field.name,
        };
        match field.shape {
            Shape::Single => single(&mut out, field, wire.value, wrong)?,
            Shape::Repeated => repeated(&mut out, field, wire.value, wrong)?,
            Shape::Map => map_entry(&mut out, field, wire.value, wrong)?,
        }
    }
    Ok(out)
}

/// One occurrence of a singular field: inline, merge, replace or drop.
fn single(
    out: &mut Map<String, Value>,
    field: &Field,
    wire: WireValue<'_>,
    wrong: impl Fn() -> ObjectError,
) -> Result<(), ObjectError> {
    let Some(value) = value(field.ty, wire, &wrong)? else {
        return Ok(());
    };
    match value {
        // An embedded Go struct: its fields are the parent's.
        Value::Object(inner) if field.inline => out.extend(inner),
        // Protobuf merges a repeated occurrence of a message field.
        Value::Object(inner) => match out.get_mut(field.name) {
            Some(Value::Object(existing)) => existing.extend(inner),
            _ => {
                out.insert(field.name.into(), Value::Object(inner));
            }
        },
        scalar if is_zero(&scalar) && !field.keep_zero => {
            // The last occurrence wins, so a later zero clears an earlier value.
            out.remove(field.name);
        }
        scalar => {
            out.insert(field.name.into(), scalar);
        }
    }
    Ok(())
}

/// One occurrence of a repeated field: one element, or a packed run of
/// varints.
fn repeated(
    out: &mut Map<String, Value>,
    field: &Field,
    wire: WireValue<'_>,
    wrong: impl Fn() -> ObjectError,
) -> Result<(), ObjectError> {
    let mut items = Vec::new();
    match (field.ty, wire) {
        (Type::Bool | Type::Int32 | Type::Int64, WireValue::Bytes(packed)) => {
            let mut reader = Reader::new(packed);
            while !reader.is_empty() {
                let v = reader.varint()?;
                items.extend(value(field.ty, WireValue::Varint(v), &wrong)?);
            }
        }
        _ => items.extend(value(field.ty, wire, &wrong)?),
    }
    let list = out.entry(field.name).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        list.extend(items);
    }
    Ok(())
}

/// One entry of a `map<string, T>`: a message {1 key, 2 value}. A missing
/// value is the type's zero, as protobuf defines.
fn map_entry(
    out: &mut Map<String, Value>,
    field: &Field,
    wire: WireValue<'_>,
    wrong: impl Fn() -> ObjectError,
) -> Result<(), ObjectError> {
    let WireValue::Bytes(entry) = wire else {
        return Err(wrong());
    };
    let (mut key, mut entry_value) = (String::new(), None);
    let mut reader = Reader::new(entry);
    while let Some(part) = reader.next_field()? {
        match (part.number, part.value) {
            (1, WireValue::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
            (1, _) => return Err(wrong()),
            (2, v) => entry_value = value(field.ty, v, &wrong)?,
            _ => {}
        }
    }
    let entry_value = entry_value.unwrap_or_else(|| zero(field.ty));
    let map = out.entry(field.name).or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = map {
        map.insert(key, entry_value);
    }
    Ok(())
}

/// The JSON of one wire value of type `ty`; `None` when the value means
/// "absent" (a zero `Time`, an empty `RawExtension`).
fn value(ty: Type, wire: WireValue<'_>, wrong: &dyn Fn() -> ObjectError) -> Result<Option<Value>, ObjectError> {
    let v = match (ty, wire) {
        (Type::String, WireValue::Bytes(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Type::Bool, WireValue::Varint(v)) => Value::Bool(v != 0),
        // int32 travels as a sign-extended 64-bit varint: truncating is
        // protobuf's own rule.
        (Type::Int32, WireValue::Varint(v)) => Value::from(i64::from(v as i32)),
        (Type::Int64, WireValue::Varint(v)) => Value::from(v as i64),
        (Type::Bytes, WireValue::Bytes(b)) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        (Type::Message(m), WireValue::Bytes(b)) => Value::Object(object(b, m)?),
        (Type::IntOrString, WireValue::Bytes(b)) => int_or_string(b, wrong)?,
        (Type::Quantity, WireValue::Bytes(b)) => Value::String(first_string(b, wrong)?),
        (Type::Time, WireValue::Bytes(b)) => return time(b, wrong),
        (Type::StringList, WireValue::Bytes(b)) => string_list(b, wrong)?,
        (Type::RawExtension, WireValue::Bytes(b)) => return raw_extension(b, wrong),
        _ => return Err(wrong()),
    };
    Ok(Some(v))
}

/// `IntOrString` {1 type (0 int, 1 string), 2 intVal, 3 strVal}.
fn int_or_string(bytes: &[u8], wrong: &dyn Fn() -> ObjectError) -> Result<Value, ObjectError> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    let mut reader = Reader::new(bytes);
    while let Some(part) = reader.next_field()? {
        match (part.number, part.value) {
            (1, WireValue::Varint(t)) => is_string = t == 1,
            (2, WireValue::Varint(v)) => int = i64::from(v as i32),
            (3, WireValue::Bytes(s)) => string = String::from_utf8_lossy(s).into_owned(),
            (1..=3, _) => return Err(wrong()),
            _ => {}
        }
    }
    Ok(if is_string {
        Value::String(string)
    } else {
        Value::from(int)
    })
}

/// Field 1 of a message, as a string (`Quantity`).
fn first_string(bytes: &[u8], wrong: &dyn Fn() -> ObjectError) -> Result<String, ObjectError> {
    let mut out = String::new();
    let mut reader = Reader::new(bytes);
    while let Some(part) = reader.next_field()? {
        match (part.number, part.value) {
            (1, WireValue::Bytes(s)) => out = String::from_utf8_lossy(s).into_owned(),
            (1, _) => return Err(wrong()),
            _ => {}
        }
    }
    Ok(out)
}

/// `Time` {1 seconds, 2 nanos} as RFC 3339 in UTC at second precision,
/// the way `metav1.Time` marshals; the zero time is absent.
fn time(bytes: &[u8], wrong: &dyn Fn() -> ObjectError) -> Result<Option<Value>, ObjectError> {
    let (mut seconds, mut nanos) = (0i64, 0i64);
    let mut reader = Reader::new(bytes);
    while let Some(part) = reader.next_field()? {
        match (part.number, part.value) {
            (1, WireValue::Varint(v)) => seconds = v as i64,
            (2, WireValue::Varint(v)) => nanos = i64::from(v as i32),
            (1 | 2, _) => return Err(wrong()),
            _ => {}
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    let at = chrono::DateTime::from_timestamp(seconds, 0).ok_or_else(wrong)?;
    Ok(Some(Value::String(at.format("%Y-%m-%dT%H:%M:%SZ").to_string())))
}

/// `ExtraValue` {1 repeated string items}.
fn string_list(bytes: &[u8], wrong: &dyn Fn() -> ObjectError) -> Result<Value, ObjectError> {
    let mut items = Vec::new();
    let mut reader = Reader::new(bytes);
    while let Some(part) = reader.next_field()? {
        match (part.number, part.value) {
            (1, WireValue::Bytes(s)) => items.push(Value::String(String::from_utf8_lossy(s).into_owned())),
            (1, _) => return Err(wrong()),
            _ => {}
        }
    }
    Ok(Value::Array(items))
}

/// `RawExtension` {1 raw}: the embedded object, JSON in practice.
fn raw_extension(bytes: &[u8], wrong: &dyn Fn() -> ObjectError) -> Result<Option<Value>, ObjectError> {
    let mut raw: &[u8] = &[];
    let mut reader = Reader::new(bytes);
    while let Some(part) = reader.next_field()? {
        match (part.number, part.value) {
            (1, WireValue::Bytes(b)) => raw = b,
            (1, _) => return Err(wrong()),
            _ => {}
        }
    }
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| ObjectError::RawExtension(e.to_string()))
}

/// Would Go's `omitempty` drop this scalar?
fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

/// The zero value of a map entry's type.
fn zero(ty: Type) -> Value {
    match ty {
        Type::String | Type::Bytes => Value::String(String::new()),
        Type::Quantity => Value::String("0".into()),
        Type::Bool => Value::Bool(false),
        Type::Int32 | Type::Int64 | Type::IntOrString => Value::from(0),
        Type::StringList => Value::Array(Vec::new()),
        Type::Message(_) => Value::Object(Map::new()),
        Type::Time | Type::RawExtension => Value::Null,
    }
}
