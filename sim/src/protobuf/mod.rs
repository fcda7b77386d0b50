//! Protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`),
//! decoded into the Kubernetes JSON the rest of the simulator works on.
//!
//! kubectl 1.37's typed clientsets send protobuf for everything `kubectl
//! create <kind>` makes, for `create token`, `auth whoami` and `auth can-i`;
//! typed client-go clients also send `DeleteOptions` and `Scale` this way.
//! Answers stay JSON: those clients accept `application/json` too.
//!
//! # Layout
//!
//! - `wire`: the protobuf wire format (tags, varints, fixed, length-delimited).
//! - `schema`: per (apiVersion, kind) the message descriptions, field number
//!   → JSON name and type, from k8s.io/api's `generated.proto` files.
//! - `decode`: one message's bytes → a JSON object.
//! - this file: the Kubernetes envelope — the magic `k8s\0`, then a
//!   `runtime.Unknown` {1 typeMeta {1 apiVersion, 2 kind}, 2 raw,
//!   3 contentEncoding, 4 contentType} whose `raw` is the object.
//!
//! # Known differences from kube-apiserver
//!
//! - Only the kinds in `schema::KINDS` (plus `DeleteOptions`) decode;
//!   another built-in kind is refused with 400 and kube-apiserver's "no kind
//!   is registered" message, where kube-apiserver would accept it.
//! - Within a kind, fields the schema does not describe (affinity, probes'
//!   gRPC action, most volume sources, managedFields, …) are dropped
//!   silently, as for an unknown field, instead of being stored.
//! - Zero-valued non-pointer fields are dropped (`omitempty`), so fields
//!   that Go marshals without `omitempty` may be missing where a JSON client
//!   would have sent `0`, `""` or `false`; pointer fields keep their zeroes.
//!   A zero `metav1.Time` is dropped rather than written as `null`.
//! - `Time` is rendered at second precision (as `metav1.Time` is in JSON);
//!   `MicroTime` and `Duration` fields are not described.

mod decode;
pub mod schema;
pub mod wire;

#[cfg(test)]
mod tests;

use crate::status::Status;
use serde_json::Value;
use std::fmt;
use wire::{Reader, WireError, WireValue};

pub use decode::ObjectError;

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Why a protobuf body does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The body lacks the `k8s\0` prefix.
    NotProtobuf,
    /// The `runtime.Unknown` envelope is malformed.
    Envelope(WireError),
    /// The envelope's `contentEncoding` is set (no client sets it).
    ContentEncoding(String),
    /// The envelope's kind is not one the simulator decodes.
    UnknownKind {
        /// `apiVersion` from the envelope.
        api_version: String,
        /// `kind` from the envelope.
        kind: String,
    },
    /// The object's own bytes are malformed.
    Object {
        /// `apiVersion` from the envelope.
        api_version: String,
        /// `kind` from the envelope.
        kind: String,
        /// What went wrong.
        error: ObjectError,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::NotProtobuf => {
                f.write_str("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
            }
            DecodeError::Envelope(e) => e.fmt(f),
            DecodeError::ContentEncoding(encoding) => {
                write!(f, "unsupported content encoding {encoding:?} in a protobuf body")
            }
            DecodeError::UnknownKind { api_version, kind } => write!(
                f,
                "no kind {kind:?} is registered for version {api_version:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            ),
            DecodeError::Object { error, .. } => error.fmt(f),
        }
    }
}

impl std::error::Error for DecodeError {}

impl DecodeError {
    /// The envelope's (apiVersion, kind), once it was readable.
    pub fn type_meta(&self) -> Option<(&str, &str)> {
        match self {
            DecodeError::UnknownKind { api_version, kind } | DecodeError::Object { api_version, kind, .. } => {
                Some((api_version, kind))
            }
            _ => None,
        }
    }
}

/// Decode a Kubernetes protobuf body into the object's JSON, with
/// `apiVersion` and `kind` set from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    decode_object(body).map_err(|e| e.to_string())
}

/// As [`decode`], with a typed error.
pub fn decode_object(body: &[u8]) -> Result<Value, DecodeError> {
    let rest = body.strip_prefix(MAGIC.as_slice()).ok_or(DecodeError::NotProtobuf)?;
    let unknown = Unknown::parse(rest).map_err(DecodeError::Envelope)?;
    if !unknown.content_encoding.is_empty() {
        return Err(DecodeError::ContentEncoding(unknown.content_encoding));
    }
    let (api_version, kind) = (unknown.api_version, unknown.kind);
    let Some(message) = schema::lookup(&api_version, &kind) else {
        return Err(DecodeError::UnknownKind { api_version, kind });
    };
    match decode::object(unknown.raw, message) {
        Ok(mut object) => {
            object.insert("apiVersion".into(), Value::String(api_version));
            object.insert("kind".into(), Value::String(kind));
            Ok(Value::Object(object))
        }
        Err(error) => Err(DecodeError::Object {
            api_version,
            kind,
            error,
        }),
    }
}

/// Decode a protobuf create or update body for an endpoint serving
/// `endpoint_kind`: 400 BadRequest worded as kube-apiserver's
/// `transformDecodeError` words it when the body does not decode.
// The handlers take `Status` by value; the error path is cold.
#[allow(clippy::result_large_err)]
pub fn decode_request(endpoint_kind: &str, body: &[u8]) -> Result<Value, Status> {
    decode_object(body).map_err(|e| match e.type_meta() {
        Some((api_version, kind)) => {
            let version = api_version.rsplit('/').next().unwrap_or_default();
            Status::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {endpoint_kind}: {e}"
            ))
        }
        None => Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {endpoint_kind}): {e}"
        )),
    })
}

/// Does the request say its body is Kubernetes protobuf?
pub fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// Decode a body as protobuf when `protobuf` (see [`is_protobuf`]), else as
/// JSON: for the places (reviews, subresources, DeleteOptions) that took
/// only JSON before.
pub fn json_or_protobuf(protobuf: bool, body: &[u8]) -> Result<Value, String> {
    if protobuf {
        decode(body)
    } else {
        serde_json::from_slice(body).map_err(|e| e.to_string())
    }
}

/// Does kube-apiserver accept protobuf bodies for resources of `group`?
/// Built-in groups yes; custom resources (any other group) answer 415.
pub fn accepts_group(group: &str) -> bool {
    matches!(group, "" | "apps" | "batch" | "policy" | "autoscaling" | "extensions")
        || (group.ends_with(".k8s.io") && !group.ends_with(".x-k8s.io"))
}

/// `runtime.Unknown`, the envelope's message.
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

impl<'a> Unknown<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        let mut unknown = Unknown {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
        };
        let mut reader = Reader::new(bytes);
        while let Some(field) = reader.next_field()? {
            match (field.number, field.value) {
                (1, WireValue::Bytes(type_meta)) => {
                    let mut inner = Reader::new(type_meta);
                    while let Some(tm) = inner.next_field()? {
                        match (tm.number, tm.value) {
                            (1, WireValue::Bytes(v)) => unknown.api_version = lossy(v),
                            (2, WireValue::Bytes(v)) => unknown.kind = lossy(v),
                            _ => {}
                        }
                    }
                }
                (2, WireValue::Bytes(raw)) => unknown.raw = raw,
                (3, WireValue::Bytes(v)) => unknown.content_encoding = lossy(v),
                _ => {}
            }
        }
        Ok(unknown)
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
