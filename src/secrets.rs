//! Secret values hidden in parsed JSON: a Secret, a list of them
//! (SecretList, a `v1` List, PartialObjectMetadataList), a Table (with or
//! without objects), PartialObjectMetadata, watch events, or a TokenRequest.
//!
//! Pure functions over Kubernetes documents, below every module that hides
//! values: the response path (`gateway::redact`) and the previews of held
//! writes (`approvals::preview`) use the same redactor.
//!
//! The request decides what the answer is about ([`Target`]); each document
//! is then recognised by its `kind`, strictly. A list item without `kind`
//! (as kube-apiserver writes them) is a Secret; a kind portcullis does not
//! know how to hide values in (a ConfigMap in a `v1` List, a Table whose row
//! holds a Pod) is an error, and so is anything without the expected shape:
//! never passed. A body of several JSON values is a watch's events.
//!
//! A response's bytes go first to the fast redactor (`fast`), which copies
//! what passes as it came and builds no tree; anything it does not read
//! exactly as the parsed redactor here would, it declines, and the parsed
//! redactor decides (errors included).

mod fast;
mod scan;

use crate::body::BoxError;
use serde_json::{Map, Value};

/// Why a response that had to be redacted could not be. Messages never
/// carry any part of the body.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// The body is not JSON (protobuf, compressed, cut short, …).
    #[error("the response is not JSON (line {line}, column {column})")]
    NotJson {
        /// Where parsing stopped.
        line: usize,
        /// Where parsing stopped.
        column: usize,
    },
    /// The body is JSON but not an object.
    #[error("the response is not a JSON object")]
    NotAnObject,
    /// A field does not have the shape Kubernetes gives it.
    #[error("the response's `{0}` does not have the expected shape")]
    Shape(&'static str),
    /// An object of a kind portcullis cannot hide values in.
    #[error("the response holds an object of kind {0:?}, which portcullis does not redact")]
    UnknownKind(String),
    /// The body is in a format portcullis cannot read (YAML, protobuf, …).
    #[error("the response is {0:?}, not JSON")]
    ContentType(String),
    /// A `data` value is not base64.
    #[error("a Secret's data value is not base64")]
    NotBase64,
    /// The body is compressed, though portcullis asked for no compression.
    #[error("the response is compressed ({0})")]
    Encoded(String),
    /// The body (or one watch event) exceeds the response limit.
    #[error("the response exceeds portcullis's limit of {0} bytes")]
    TooLarge(u64),
    /// The cluster's answer did not arrive whole.
    #[error("the response could not be read")]
    Incomplete(#[source] BoxError),
    /// Serialising the redacted document failed.
    #[error("the redacted response could not be serialised")]
    Serialize,
}

impl RedactError {
    fn not_json(error: serde_json::Error) -> Self {
        // The error's text may quote the body: keep only where it stopped.
        RedactError::NotJson {
            line: error.line(),
            column: error.column(),
        }
    }
}

/// The annotation `kubectl apply` fills with the whole applied object,
/// Secret values included.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Annotations whose values name things rather than hold them, kept on a
/// Secret whose values are hidden: the end of a WatchList's initial events
/// (on its bookmark: informers wait for it), the Secret's ServiceAccount,
/// the Helm release or the cert-manager Certificate and issuer it belongs
/// to. Every other
/// annotation's value is hidden too: tools copy the applied object, values
/// and all, into annotations of their own (kapp's `kapp.k14s.io/original`,
/// as kubectl does into [`LAST_APPLIED`]), and no list of such keys is
/// ever complete.
const NAMING_ANNOTATIONS: &[&str] = &[
    "k8s.io/initial-events-end",
    "kubernetes.io/service-account.name",
    "kubernetes.io/service-account.uid",
    "meta.helm.sh/release-name",
    "meta.helm.sh/release-namespace",
    "cert-manager.io/certificate-name",
    "cert-manager.io/issuer-name",
    "cert-manager.io/issuer-kind",
    "cert-manager.io/issuer-group",
];

/// Is the annotation `name`'s value kept on a Secret whose values are
/// hidden?
pub fn names_only(name: &[u8]) -> bool {
    NAMING_ANNOTATIONS.iter().any(|kept| kept.as_bytes() == name)
}

/// What a response is about, and so what is hidden in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// core/v1 Secrets: `data` and `stringData` values, the last-applied
    /// annotation, the values of the other annotations but those that
    /// name things, and `managedFields` (which fields a dry-run write
    /// changed would tell whether a guessed value is the one stored). A
    /// `data` marker is written as text: readable
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

/// Redact one watch event (a line of a watch stream, without its newline).
/// `None` when it passes unchanged: an ERROR event carries a Status.
/// A line that is a whole object instead (a watch answered with one
/// document) is redacted as that object.
pub fn redact_event(line: &[u8], target: Target) -> Result<Option<Vec<u8>>, RedactError> {
    if let Some(redacted) = fast::event(line, target) {
        return Ok(Some(redacted));
    }
    parsed_event(line, target)
}

/// [`redact_event`] on the event parsed whole: the one that decides
/// whatever the fast redactor declines.
fn parsed_event(line: &[u8], target: Target) -> Result<Option<Vec<u8>>, RedactError> {
    let mut event: Value = serde_json::from_slice(line).map_err(RedactError::not_json)?;
    if event.get("kind").is_some() {
        if is_status(&event) {
            return Ok(None);
        }
        redact_document(&mut event, target)?;
        return serde_json::to_vec(&event).map(Some).map_err(|_| RedactError::Serialize);
    }
    if redact_event_value(&mut event, target)? {
        return serde_json::to_vec(&event).map(Some).map_err(|_| RedactError::Serialize);
    }
    Ok(None)
}

/// Redact a parsed watch event in place; false when it is an ERROR event,
/// which carries a Status and is left as it is.
fn redact_event_value(event: &mut Value, target: Target) -> Result<bool, RedactError> {
    let fields = event.as_object_mut().ok_or(RedactError::NotAnObject)?;
    let error = match fields.get("type").and_then(Value::as_str) {
        Some(kind) => kind == "ERROR",
        None => return Err(RedactError::Shape("type")),
    };
    let object = fields.get_mut("object").ok_or(RedactError::Shape("object"))?;
    if error {
        // Only a Status may pass unread.
        return if is_status(object) {
            Ok(false)
        } else {
            Err(RedactError::Shape("object"))
        };
    }
    // A BOOKMARK's object is a Secret with metadata only: redacting it
    // changes nothing, and nothing is trusted by its event type.
    redact_document(object, target)?;
    Ok(true)
}

/// Is this parsed JSON value a watch event rather than an object? An event
/// has `type` and `object` and, unlike every Kubernetes object, no `kind`.
pub fn is_event(value: &Value) -> bool {
    value.get("kind").is_none() && value.get("type").is_some() && value.get("object").is_some()
}

/// Does this first line of a body look like a watch event? Cheap for an
/// object: only a line whose first key is `type` or `object` (as every
/// watch event's is, and no Kubernetes object's) is scanned, without
/// building it, for `type` and `object` and no `kind`.
pub fn starts_like_event(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Shape {
        kind: Option<serde::de::IgnoredAny>,
        #[serde(rename = "type")]
        kind_of_event: Option<serde::de::IgnoredAny>,
        object: Option<serde::de::IgnoredAny>,
    }
    let text = line.trim_ascii_start();
    let first_key = text
        .strip_prefix(b"{")
        .map(<[u8]>::trim_ascii_start)
        .and_then(|rest| rest.strip_prefix(b"\""));
    let likely = first_key.is_some_and(|key| key.starts_with(b"type\"") || key.starts_with(b"object\""));
    likely
        && serde_json::from_slice::<Shape>(line)
            .is_ok_and(|shape| shape.kind.is_none() && shape.kind_of_event.is_some() && shape.object.is_some())
}

/// Redact a whole body that may hold several JSON values: one object, or
/// the events of a watch that ended (possibly served as plain JSON).
/// `None` when it passes unchanged (a single Status).
pub fn redact_json(body: &[u8], target: Target) -> Result<Option<Vec<u8>>, RedactError> {
    if let Some(redacted) = fast::document(body, target) {
        return Ok(Some(redacted));
    }
    parsed_json(body, target)
}

/// [`redact_json`] on the body parsed whole: the one that decides whatever
/// the fast redactor declines (see [`fast`]).
fn parsed_json(body: &[u8], target: Target) -> Result<Option<Vec<u8>>, RedactError> {
    let mut values = Vec::new();
    for value in serde_json::Deserializer::from_slice(body).into_iter::<Value>() {
        values.push(value.map_err(RedactError::not_json)?);
    }
    match values.as_mut_slice() {
        [] => Err(RedactError::NotAnObject),
        [document] if !is_event(document) => {
            if is_status(document) {
                if !hide_admission_words(document) {
                    return Ok(None);
                }
                return serde_json::to_vec(document)
                    .map(Some)
                    .map_err(|_| RedactError::Serialize);
            }
            redact_document(document, target)?;
            serde_json::to_vec(document)
                .map(Some)
                .map_err(|_| RedactError::Serialize)
        }
        events => {
            let mut out = Vec::with_capacity(body.len());
            for event in events {
                if !is_event(event) {
                    return Err(RedactError::Shape("watch event"));
                }
                redact_event_value(event, target)?;
                serde_json::to_writer(&mut out, event).map_err(|_| RedactError::Serialize)?;
                out.push(b'\n');
            }
            Ok(Some(out))
        }
    }
}

/// Redact a parsed document (a Status is left as it is). Its shape is
/// recognised by `kind`, strictly: anything else is an error.
pub fn redact_document(document: &mut Value, target: Target) -> Result<(), RedactError> {
    if is_status(document) {
        return Ok(());
    }
    match target {
        Target::Secrets | Target::TypedSecrets => secrets_document(document, target),
        Target::Token => token_request(document),
    }
}

/// What an admission message's own words become.
pub const ADMISSION_WORDS_HIDDEN: &str =
    "<hidden: an admission check's words may quote Secret values; the audit row's id finds the request>";

/// The reasons a Status may give (`metav1.StatusReason`): a webhook's
/// refusal passes its own Status through, and its `reason` is free text.
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// Rebuild a Status that carries an admission check's words (a webhook's
/// refusal, whose Status the API server passes on as the webhook wrote it;
/// a ValidatingAdmissionPolicy's, whose message is the policy's own text
/// built from the object as it likes, values and all; a webhook call that
/// failed, quoting what the webhook answered): its message keeps the API
/// server's words up to which check it was, the rest hidden, its reason
/// only if it is one of Kubernetes's, and its details (the check's own)
/// go. The API server's own messages (not found, forbidden by RBAC,
/// invalid fields) name keys and objects, never values, and pass. True
/// when it changed anything.
pub fn hide_admission_words(status: &mut Value) -> bool {
    let Some(message) = status.get("message").and_then(Value::as_str) else {
        return false;
    };
    let from_admission = message.contains("admission webhook")
        || message.contains("calling webhook")
        || message.contains("AdmissionPolicy");
    if !from_admission {
        return false;
    }
    let said = ["denied the request: ", "denied request: "]
        .iter()
        .find_map(|said| message.find(said).map(|at| at + said.len()))
        .or_else(|| webhook_named(message));
    let kept = said.map_or("", |end| &message[..end]);
    let hidden = format!("{kept}{ADMISSION_WORDS_HIDDEN}");
    let reason = status
        .get("reason")
        .and_then(Value::as_str)
        .filter(|r| REASONS.contains(r))
        .unwrap_or_default()
        .to_string();
    let code = status.get("code").cloned().unwrap_or(Value::Null);
    *status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": hidden,
        "reason": reason,
        "code": code,
    });
    true
}

/// Where the name of the webhook a failed call names ends (`… calling
/// webhook "name": …`), just past its `": `.
fn webhook_named(message: &str) -> Option<usize> {
    const CALLING: &str = "calling webhook \"";
    let start = message.find(CALLING)? + CALLING.len();
    let close = message[start..].find('"')? + start + 1;
    Some(if message[close..].starts_with(": ") {
        close + 2
    } else {
        close
    })
}

fn is_status(document: &Value) -> bool {
    document.get("kind").and_then(Value::as_str) == Some("Status")
        && document.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

fn kind(fields: &Map<String, Value>) -> Result<&str, RedactError> {
    fields
        .get("kind")
        .and_then(Value::as_str)
        .ok_or(RedactError::Shape("kind"))
}

/// A Secret or its PartialObjectMetadata; a list of them (SecretList, a
/// `v1` List, PartialObjectMetadataList); or a Table. Any other kind in a
/// Secret response is refused: it is a shape portcullis does not know how
/// to hide values in.
fn secrets_document(document: &mut Value, target: Target) -> Result<(), RedactError> {
    let fields = document.as_object_mut().ok_or(RedactError::NotAnObject)?;
    match kind(fields)? {
        "Secret" | "PartialObjectMetadata" => secret_fields(fields, target),
        "SecretList" | "List" | "PartialObjectMetadataList" => list_items(fields, target),
        "Table" => table(fields, target),
        other => Err(RedactError::UnknownKind(bounded_kind(other))),
    }
}

/// A kind named in an error: short, printable (it comes from the cluster).
fn bounded_kind(kind: &str) -> String {
    kind.chars().filter(|c| c.is_ascii_alphanumeric()).take(64).collect()
}

/// A list's items: typed lists leave `kind` out of their items; a `v1`
/// List gives each item its own.
fn list_items(fields: &mut Map<String, Value>, target: Target) -> Result<(), RedactError> {
    match fields.get_mut("items") {
        Some(Value::Array(items)) => items.iter_mut().try_for_each(|item| secret(item, target)),
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(RedactError::Shape("items")),
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

/// A list item or a row's object: a Secret (its `kind` may be left out)
/// or its PartialObjectMetadata; any other kind is refused.
fn secret(object: &mut Value, target: Target) -> Result<(), RedactError> {
    let fields = object.as_object_mut().ok_or(RedactError::NotAnObject)?;
    match fields.get("kind").map(Value::as_str) {
        None | Some(Some("Secret" | "PartialObjectMetadata")) => secret_fields(fields, target),
        Some(Some(other)) => Err(RedactError::UnknownKind(bounded_kind(other))),
        Some(None) => Err(RedactError::Shape("kind")),
    }
}

/// One Secret (or its PartialObjectMetadata, which has no values).
fn secret_fields(fields: &mut Map<String, Value>, target: Target) -> Result<(), RedactError> {
    hide_metadata(fields)?;
    let data_marker = match target {
        Target::TypedSecrets => base64_marker,
        _ => marker,
    };
    hide_values(fields, "data", decoded_len, data_marker)?;
    hide_values(fields, "stringData", |text| Ok(text.len()), marker)
}

fn base64_marker(len: usize) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(marker(len))
}

/// A Secret's metadata without `managedFields` and the last-applied
/// annotation, and with the value of each other annotation that does not
/// name something ([`NAMING_ANNOTATIONS`]) replaced by its marker.
fn hide_metadata(fields: &mut Map<String, Value>) -> Result<(), RedactError> {
    let metadata = match fields.get_mut("metadata") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(metadata)) => metadata,
        Some(_) => return Err(RedactError::Shape("metadata")),
    };
    metadata.remove("managedFields");
    let annotations = match metadata.get_mut("annotations") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(annotations)) => annotations,
        Some(_) => return Err(RedactError::Shape("metadata.annotations")),
    };
    annotations.remove(LAST_APPLIED);
    for (name, value) in annotations.iter_mut() {
        if names_only(name.as_bytes()) {
            continue;
        }
        let Value::String(text) = value else {
            return Err(RedactError::Shape("metadata.annotations"));
        };
        *value = Value::String(marker(text.len()));
    }
    Ok(())
}

/// Replace each value of the map `field` with its `marker`; `len` measures
/// a value (a null value is empty, as Go writes a nil byte slice).
fn hide_values(
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
    decoded_len_bytes(text.as_bytes())
}

fn decoded_len_bytes(bytes: &[u8]) -> Result<usize, RedactError> {
    let body = bytes
        .strip_suffix(b"==")
        .or_else(|| bytes.strip_suffix(b"="))
        .unwrap_or(bytes);
    if scan::alphabet_run(body) != body.len() {
        return Err(RedactError::NotBase64);
    }
    padded_len(body.len(), bytes.len())
}

/// The decoded length of base64 whose `body` characters (of `whole`, the
/// rest padding) are known to be of its alphabet.
fn padded_len(body: usize, whole: usize) -> Result<usize, RedactError> {
    // Padding only ever completes a whole group of four characters.
    if body % 4 == 1 || (body != whole && !whole.is_multiple_of(4)) {
        return Err(RedactError::NotBase64);
    }
    Ok(body / 4 * 3 + (body % 4).saturating_sub(1))
}

/// A TokenRequest's `status.token`, the only value in it.
fn token_request(document: &mut Value) -> Result<(), RedactError> {
    let fields = document.as_object_mut().ok_or(RedactError::NotAnObject)?;
    match kind(fields)? {
        "TokenRequest" => {}
        other => return Err(RedactError::UnknownKind(bounded_kind(other))),
    }
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
mod tests;
