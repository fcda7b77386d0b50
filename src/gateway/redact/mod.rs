//! Redact: Secret values never leave the cluster unless a role reveals them.
//!
//! For a caller who may not see Secret values (every agent; a person or bot
//! none of whose grants in effect is of a role that `reveals_secrets`), every
//! response to a core/v1 `secrets` request — get, list (one namespace or
//! all), watch, Tables, PartialObjectMetadata, create, update, patch, apply,
//! delete, dry runs — has each `data` and `stringData` value replaced by
//! `<redacted, N bytes>` (N the decoded length), the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation removed,
//! the other annotations' values hidden but those that name things, and
//! `managedFields` left out (`crate::secrets::Target::Secrets`).
//! For an agent, a token minted by `serviceaccounts/<name>/token` is
//! replaced the same way.
//!
//! A `data` marker is text, so that `kubectl get -o yaml` shows it and the
//! API server refuses it (not base64) if a redacted object is written back.
//! A client that accepts protobuf is one of client-go's typed clients
//! (`kubectl describe`, `kubectl create secret`), which decodes `data` as
//! base64 and would fail on text: it gets each `data` marker base64-encoded
//! ([`Target::TypedSecrets`]). Other typed clients that ask for JSON only
//! (k8s-openapi's `Secret` in kube-rs) cannot decode redacted Secrets: read
//! them as untyped objects. The base64 marker is valid base64, which the
//! API server would store: such a caller's Secret writes are read whole and
//! refused if they carry a marker back ([`refuse_marker_written`]), and a
//! JSON Patch of a Secret, whose `copy`, `move` and `test` read values, is
//! refused to them ([`refuse_blind_read`]).
//!
//! How, in the forward stage:
//!
//! 1. [`plan`] decides, before anything is sent. A redacted request goes
//!    upstream with `Accept` narrowed to the client's JSON entries (see
//!    [`accept`]) and no `Accept-Encoding`, so the answer is always plain
//!    JSON; a client accepting no JSON gets 406 and nothing is sent.
//! 2. [`Transform::apply`] transforms the answer, reading it as the answer
//!    itself says, not only as the request looked: a watch (by its
//!    `Content-Type`, by the request, or because its first line is a watch
//!    event) is redacted event by event as it streams ([`watch`]); any
//!    other JSON answer is read whole (it is already capped at the response
//!    limit), redacted and sent with a fresh length. A Status passes
//!    unchanged.
//! 3. It fails closed: an answer that is not JSON, cannot be parsed, or
//!    holds a shape or kind the redactor does not know ([`crate::secrets`]) is
//!    refused with a 502 Status and an audit row marked `unredactable` (a
//!    watch already under way ends with an ERROR event), never passed on.
//!    Bodies are never logged.
//!
//! Every other response passes through [`Transform::Pass`] untouched: it
//! pays nothing.

pub mod accept;
pub mod watch;

use super::classify::RequestInfo;
use super::error::RequestError;
use super::limits::{ResponseDeadline, ResponseTooLarge};
use crate::body::{self, Body, BoxError};
use crate::identity::Identity;
use crate::secrets::{self, RedactError, Target};
use bytes::Bytes;
use bytes::BytesMut;
use http::header::{HeaderMap, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::response::Parts;
use http::Response;
use http_body_util::BodyExt;

/// What the forward stage does to one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// Relay as it is.
    Pass,
    /// Redact for `target`; a watch event by event.
    Redact {
        /// What the values are.
        target: Target,
        /// The response is a watch stream.
        watch: bool,
    },
}

/// Decide whether the answer to this request must be redacted and, if so,
/// prepare the request in `headers` (JSON, uncompressed). 406 when the
/// client accepts no JSON.
pub fn plan(
    info: &RequestInfo,
    identity: &Identity,
    reveal_secrets: bool,
    headers: &mut HeaderMap,
) -> Result<Transform, RequestError> {
    let Some(mut target) = target(info, identity, reveal_secrets) else {
        return Ok(Transform::Pass);
    };
    // A typed client cannot decode a text marker where it expects base64.
    if target == Target::Secrets && accept::accepts_protobuf(headers) {
        target = Target::TypedSecrets;
    }
    let json = accept::json_only(headers).map_err(|e| RequestError::NotAcceptable { message: e.to_string() })?;
    headers.insert(ACCEPT, json);
    headers.remove(ACCEPT_ENCODING);
    Ok(Transform::Redact {
        target,
        watch: info.verb == "watch",
    })
}

/// Refuse a write that would read Secret values its caller may not see:
/// a JSON Patch of a Secret, whose `copy`, `move` and `test` read values
/// (into an annotation, into a field whose refusal quotes them, or as a
/// yes/no). Only the patch types that set values pass, so a type this
/// check could misread is refused too. Before the hold stage, whose dry
/// run would put the copy into a stored preview.
pub fn refuse_blind_read(info: &RequestInfo, reveal_secrets: bool, headers: &HeaderMap) -> Result<(), RequestError> {
    if !reveal_secrets && info.is_secrets() && info.verb == "patch" && !sets_values_only(headers) {
        return Err(RequestError::SecretJsonPatch);
    }
    Ok(())
}

/// Must a write's body be read whole and checked for markers first? (A
/// Secret write from a caller who sees values hidden: rare, and small.)
pub fn guards_markers(info: &RequestInfo, reveal_secrets: bool) -> bool {
    !reveal_secrets && info.is_secrets() && info.is_write()
}

/// Refuse a Secret write that carries a marker back where a value was: a
/// caller who read the Secret redacted and writes it back whole. The text
/// marker is no base64 and the cluster refuses it, but the base64-encoded
/// one that typed clients get (and the raw bytes of a protobuf body) it
/// would store as the value, and the real value would be gone.
pub fn refuse_marker_written(info: &RequestInfo, reveal_secrets: bool, body: &[u8]) -> Result<(), RequestError> {
    // base64 of "<redacted": every encoded marker starts with it, aligned.
    const ENCODED: &[u8] = b"PHJlZGFjdGVk";
    const RAW: &[u8] = b"<redacted, ";
    let carries = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    if guards_markers(info, reveal_secrets) && (carries(ENCODED) || carries(RAW)) {
        return Err(RequestError::SecretMarkerWritten);
    }
    Ok(())
}

/// Is the request's body a patch that only sets values, never reads them:
/// a merge, strategic merge or apply patch? Read from the header's bytes
/// as kube-apiserver reads them (exactly, up to the first `;`), so that no
/// spelling it takes as a JSON Patch passes: a type read as text failed on
/// a byte above 0x7f, which the cluster keeps after the `;`.
fn sets_values_only(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return false;
    };
    let media = value.as_bytes().split(|&b| b == b';').next().unwrap_or_default();
    matches!(
        media,
        b"application/merge-patch+json"
            | b"application/strategic-merge-patch+json"
            | b"application/apply-patch+yaml"
            | b"application/apply-patch+cbor"
    )
}

/// Does the answer to this request hide values? (For the audit row's
/// `redacted` flag.)
pub fn hides_values(info: &RequestInfo, identity: &Identity, reveal_secrets: bool) -> bool {
    target(info, identity, reveal_secrets).is_some()
}

fn target(info: &RequestInfo, identity: &Identity, reveal_secrets: bool) -> Option<Target> {
    if reveal_secrets {
        return None;
    }
    if info.is_secrets() {
        return Some(Target::Secrets);
    }
    (info.is_token_request() && identity.is_agent()).then_some(Target::Token)
}

impl Transform {
    /// Apply to the cluster's answer (`parts`, `body`); `limit` bounds one
    /// watch event, and an answer read whole (an ordinary request's body is
    /// capped before it comes here too; a stream's is not).
    ///
    /// How the body is read is decided from the answer itself, not only
    /// from the request: `application/json;stream=watch`, or a request
    /// classified as a watch, is read event by event; any other JSON answer
    /// is read whole unless its first line turns out to be a watch event
    /// (kube-apiserver serves JSON watches as plain `application/json`), and
    /// then it is read event by event from there. Anything not JSON is
    /// refused.
    pub async fn apply<B>(self, mut parts: Parts, body: B, limit: u64) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let Transform::Redact { target, watch } = self else {
            return Response::from_parts(parts, body::boxed(body));
        };
        hide_warnings(&mut parts.headers);
        // The length changes; hyper sets the new one.
        parts.headers.remove(CONTENT_LENGTH);
        if let Some(encoding) = parts.headers.remove(CONTENT_ENCODING) {
            let encoding = String::from_utf8_lossy(encoding.as_bytes()).into_owned();
            return refused(&RedactError::Encoded(encoding));
        }
        match framing(&parts, watch) {
            Err(error) => refused(&error),
            Ok(Framing::Watch) => {
                Response::from_parts(parts, body::boxed(watch::RedactedWatch::new(body, target, limit)))
            }
            Ok(Framing::Json) => match read_json(body, target, limit).await {
                Read::Whole(Ok(redacted)) => Response::from_parts(parts, body::full(redacted)),
                Read::Whole(Err(error)) => refused(&error),
                Read::Watch(events) => Response::from_parts(parts, body::boxed(events)),
            },
        }
    }
}

/// The one warning that stands for the answer's own: an admission check's
/// warning (a webhook's, a ValidatingAdmissionPolicy's `Warn`) is its own
/// text, built from the object as it likes, values and all.
const WARNINGS_HIDDEN: &str =
    "299 - \"portcullis: this answer's warnings are hidden, as an admission check's may quote Secret values\"";

/// Replace the answer's `Warning` headers, if it has any, with one saying so.
pub fn hide_warnings(headers: &mut HeaderMap) {
    if headers.remove(http::header::WARNING).is_some() {
        headers.insert(http::header::WARNING, http::HeaderValue::from_static(WARNINGS_HIDDEN));
    }
}

/// How a response to be redacted is read.
enum Framing {
    /// One JSON document, unless it turns out to be watch events.
    Json,
    /// Newline-delimited watch events, redacted as they arrive.
    Watch,
}

/// Decide from the answer's `Content-Type` (and, for a success, whether
/// the request was a watch) how to read it.
fn framing(parts: &Parts, watch: bool) -> Result<Framing, RedactError> {
    let Some(value) = parts.headers.get(CONTENT_TYPE) else {
        return Ok(Framing::Json);
    };
    let value = value
        .to_str()
        .map_err(|_| RedactError::ContentType("unreadable".into()))?;
    let mut fields = value.split(';');
    let media = fields.next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case("application/json") {
        let shown: String = media.chars().filter(|c| c.is_ascii_graphic()).take(64).collect();
        return Err(RedactError::ContentType(shown));
    }
    let stream = fields.any(|field| {
        field
            .split_once('=')
            .is_some_and(|(k, v)| k.trim().eq_ignore_ascii_case("stream") && v.trim().eq_ignore_ascii_case("watch"))
    });
    Ok(if (stream || watch) && parts.status.is_success() {
        Framing::Watch
    } else {
        Framing::Json
    })
}

/// What reading a JSON answer found.
enum Read<B> {
    /// The whole body, redacted (or why it could not be).
    Whole(Result<Bytes, RedactError>),
    /// A watch stream after all, redacted from its first event on.
    Watch(watch::RedactedWatch<B>),
}

/// Read a JSON answer whole (to `limit`) and redact it; if its first line
/// is a watch event, hand the stream to the watch redactor instead, so a
/// watch portcullis did not expect is neither held whole nor passed. A
/// stream's answer is not capped on its way here (a watch runs on), so
/// the limit is kept here too: an error answer to a watch could be
/// endless.
async fn read_json<B>(mut body: B, target: Target, limit: u64) -> Read<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    // The announced length, if any, up to the cap (the body is capped).
    let announced = body.size_hint().exact().unwrap_or(0).min(limit);
    let mut buffer = BytesMut::with_capacity(usize::try_from(announced).unwrap_or(0));
    let mut sniffed = false;
    // How much of the buffer is known to hold no newline: each frame is
    // searched once, not the whole buffer again (a list that arrives in
    // hundreds of frames without a newline would cost their square).
    let mut searched = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Err(error) => return Read::Whole(Err(RedactError::Incomplete(error.into()))),
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    if (buffer.len() + data.len()) as u64 > limit {
                        return Read::Whole(Err(RedactError::TooLarge(limit)));
                    }
                    buffer.extend_from_slice(&data);
                }
            }
        }
        if sniffed {
            continue;
        }
        let from = std::mem::replace(&mut searched, buffer.len());
        if let Some(end) = newline(&buffer[from..]).map(|at| from + at) {
            sniffed = true;
            if secrets::starts_like_event(&buffer[..end]) {
                let events = watch::RedactedWatch::new(body, target, limit).after(buffer.freeze());
                return Read::Watch(events);
            }
        }
    }
    let bytes = buffer.freeze();
    // An empty body (a HEAD, a 204) holds no value.
    if bytes.is_empty() {
        return Read::Whole(Ok(bytes));
    }
    Read::Whole(secrets::redact_json(&bytes, target).map(|redacted| redacted.map(Bytes::from).unwrap_or(bytes)))
}

/// The first newline in `bytes`, looked for 32 bytes at a time: a list is
/// megabytes without one, and a watch event thousands of bytes.
fn newline(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    for chunk in bytes.chunks_exact(32) {
        // Branch-free, so that a chunk is checked as a vector.
        if chunk.iter().fold(false, |found, b| found | (*b == b'\n')) {
            break;
        }
        at += 32;
    }
    bytes[at..].iter().position(|b| *b == b'\n').map(|i| at + i)
}

/// Why a response that could not be redacted is refused.
fn refusal(error: &RedactError) -> RequestError {
    if let RedactError::TooLarge(_) = error {
        return RequestError::SecretsTooLarge {
            cause: error.to_string(),
        };
    }
    if let RedactError::Incomplete(cause) = error {
        if cause.is::<ResponseDeadline>() {
            return RequestError::SecretsTimedOut {
                cause: cause.to_string(),
            };
        }
        if let Some(too_large) = cause.downcast_ref::<ResponseTooLarge>() {
            return RequestError::SecretsTooLarge {
                cause: too_large.to_string(),
            };
        }
    }
    RequestError::Unredactable {
        cause: error.to_string(),
    }
}

fn refused(error: &RedactError) -> Response<Body> {
    tracing::warn!(%error, "a response carrying Secrets could not be redacted: refused");
    let error = refusal(error);
    let mut response = error.status().response();
    // The audit row says portcullis refused it, not only that it was a 502;
    // the reason is the pipeline's own.
    if let Some(reason) = error.refused() {
        response.extensions_mut().insert(crate::audit::record::Refused(reason));
    }
    response
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

#[cfg(test)]
#[path = "property_tests.rs"]
mod property_tests;
