//! Content negotiation and response bodies: JSON, Tables,
//! PartialObjectMetadata, 406 for protobuf-only clients, gzip over 128 KiB.

use crate::body::{self, Body};
use crate::registry::ResourceType;
use crate::status::Status;
use crate::table::{self, IncludeObject};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::Value;
use std::io::Write;
use std::sync::Arc;

/// Bodies larger than this are gzipped for clients that accept it, as
/// kube-apiserver does.
const GZIP_THRESHOLD: usize = 128 * 1024;

/// The representation the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The object or list itself.
    Json,
    /// A `meta.k8s.io/v1` Table.
    Table(IncludeObject),
    /// `PartialObjectMetadata` (or `…List` for lists).
    Metadata,
}

/// Choose the representation from `Accept` (first acceptable entry wins).
/// `list` tells whether a `PartialObjectMetadataList` or a
/// `PartialObjectMetadata` is acceptable. 406 when nothing is.
pub fn negotiate(headers: &HeaderMap, include: Option<&str>, list: bool) -> Result<Shape, Status> {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    if accept.trim().is_empty() {
        return Ok(Shape::Json);
    }
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| *v);
        if !matches!(
            media.as_str(),
            "application/json" | "application/*" | "*/*" | "application/yaml"
        ) {
            continue;
        }
        let meta_v1 = param("g") == Some("meta.k8s.io") && param("v") == Some("v1");
        match param("as") {
            None => return Ok(Shape::Json),
            Some("Table") if meta_v1 => return Ok(Shape::Table(include_object(include))),
            Some("PartialObjectMetadataList") if meta_v1 && list => return Ok(Shape::Metadata),
            Some("PartialObjectMetadata") if meta_v1 && !list => return Ok(Shape::Metadata),
            Some(_) => continue,
        }
    }
    Err(Status::failure(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml",
    ))
}

fn include_object(value: Option<&str>) -> IncludeObject {
    match value {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

/// One object in the negotiated shape.
pub fn shape_object(rt: &ResourceType, object: &Arc<Value>, shape: Shape) -> Value {
    match shape {
        Shape::Json => (**object).clone(),
        // A Table of one object carries that object's resourceVersion.
        Shape::Table(include) => {
            let metadata = serde_json::json!({"resourceVersion": object["metadata"]["resourceVersion"]});
            table::table(rt, std::slice::from_ref(object), include, metadata)
        }
        Shape::Metadata => table::partial_object_metadata(object),
    }
}

/// A JSON response with `code`, gzipped when large and accepted.
pub fn json_bytes(code: StatusCode, bytes: Vec<u8>, request: &HeaderMap) -> Response<Body> {
    let gzip = bytes.len() > GZIP_THRESHOLD && accepts_gzip(request);
    let (bytes, encoding) = match gzip.then(|| gzip_bytes(&bytes)).flatten() {
        Some(zipped) => (zipped, Some("gzip")),
        None => (bytes, None),
    };
    let mut response = Response::new(body::full(Bytes::from(bytes)));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    if let Some(encoding) = encoding {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
        headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    response
}

/// Serialize `value` (an object, list or Table) as the response.
pub fn json<T: serde::Serialize + ?Sized>(code: StatusCode, value: &T, request: &HeaderMap) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => json_bytes(code, bytes, request),
        Err(e) => error(Status::internal(format!("encoding the response: {e}"))),
    }
}

/// A Status as the response (HTTP status = its code).
pub fn error(status: Status) -> Response<Body> {
    status.into_response::<Bytes>().map(body::full)
}

fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            e.split(';')
                .next()
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("gzip"))
        })
}

fn gzip_bytes(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).ok()?;
    encoder.finish().ok()
}

/// Add `Warning: 299 - "<text>"` headers.
pub fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for warning in warnings {
        let text = format!("299 - {}", crate::validate::quote(warning));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn kubectl_get_asks_for_a_table_first() {
        let headers = accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json");
        assert_eq!(
            negotiate(&headers, None, true).unwrap(),
            Shape::Table(IncludeObject::Metadata)
        );
        assert_eq!(
            negotiate(&headers, Some("Object"), true).unwrap(),
            Shape::Table(IncludeObject::Object)
        );
    }

    #[test]
    fn protobuf_alone_is_not_acceptable_but_with_json_it_is() {
        let err = negotiate(&accept("application/vnd.kubernetes.protobuf"), None, false).unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (406, "NotAcceptable"));
        let ok = negotiate(
            &accept("application/vnd.kubernetes.protobuf, application/json"),
            None,
            false,
        );
        assert_eq!(ok.unwrap(), Shape::Json);
    }

    #[test]
    fn metadata_lists_and_objects_are_told_apart() {
        let list = accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
        assert_eq!(negotiate(&list, None, true).unwrap(), Shape::Metadata);
        assert!(negotiate(&list, None, false).is_err());
    }

    #[test]
    fn large_bodies_are_gzipped_only_when_accepted() {
        let big = vec![b'a'; GZIP_THRESHOLD + 1];
        let mut headers = HeaderMap::new();
        assert!(json_bytes(StatusCode::OK, big.clone(), &headers)
            .headers()
            .get(header::CONTENT_ENCODING)
            .is_none());
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let zipped = json_bytes(StatusCode::OK, big, &headers);
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
    }
}
