//! The `Accept` a redacted request is sent with: JSON only, so that the
//! answer can always be parsed (protobuf cannot be redacted without its
//! schema), in the client's own order and with its `as=` parameters, so a
//! Table or PartialObjectMetadata request stays one.

use http::header::{HeaderMap, HeaderValue, ACCEPT};

/// The client accepts no JSON, so portcullis cannot answer a redacted
/// request in anything it accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "portcullis answers requests for Secrets in JSON only, so that it can hide their values: accept application/json"
)]
pub struct NotAcceptable;

/// The client's JSON entries (`application/json`, and the wildcards
/// `*/*`, `application/*` made explicit), comma-separated in its order;
/// protobuf, YAML and CBOR entries dropped. No `Accept` means JSON.
pub fn json_only(headers: &HeaderMap) -> Result<HeaderValue, NotAcceptable> {
    let mut present = false;
    let mut kept: Vec<String> = Vec::new();
    for value in headers.get_all(ACCEPT) {
        // A value that is not text names nothing portcullis can serve.
        let Ok(value) = value.to_str() else { continue };
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            present = true;
            if let Some(json) = as_json(entry) {
                kept.push(json);
            }
        }
    }
    if !present {
        return Ok(HeaderValue::from_static("application/json"));
    }
    if kept.is_empty() {
        return Err(NotAcceptable);
    }
    HeaderValue::from_str(&kept.join(",")).map_err(|_| NotAcceptable)
}

/// Does the client accept protobuf? Only client-go's typed clients do, and
/// they decode a Secret's `data` values as base64 bytes.
pub fn accepts_protobuf(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|entry| {
            entry
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case(PROTOBUF))
        })
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// `entry` as a JSON media range, if it accepts JSON.
fn as_json(entry: &str) -> Option<String> {
    let (media, params) = entry.split_once(';').map_or((entry, None), |(m, p)| (m, Some(p)));
    let media = media.trim().to_ascii_lowercase();
    if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
        return None;
    }
    Some(match params {
        Some(params) => format!("application/json;{}", params.trim()),
        None => "application/json".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(ACCEPT, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn rewritten(values: &[&str]) -> Result<String, NotAcceptable> {
        json_only(&accept(values)).map(|v| v.to_str().unwrap().to_string())
    }

    #[test]
    fn kubectls_table_request_keeps_its_json_table_entries_in_order() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(rewritten(&[table]).unwrap(), table);
    }

    #[test]
    fn protobuf_and_yaml_entries_are_dropped_and_wildcards_become_json() {
        let client_go = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io, application/vnd.kubernetes.protobuf, */*";
        assert_eq!(
            rewritten(&[client_go]).unwrap(),
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        );
        assert_eq!(
            rewritten(&["application/yaml", "application/*;q=0.5"]).unwrap(),
            "application/json;q=0.5"
        );
        assert_eq!(
            rewritten(&["APPLICATION/JSON;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"]).unwrap(),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        );
    }

    #[test]
    fn no_accept_means_json() {
        assert_eq!(rewritten(&[]).unwrap(), "application/json");
        assert_eq!(rewritten(&[""]).unwrap(), "application/json");
    }

    #[test]
    fn a_client_accepting_no_json_is_not_acceptable() {
        assert_eq!(rewritten(&["application/vnd.kubernetes.protobuf"]), Err(NotAcceptable));
        assert_eq!(rewritten(&["application/yaml, application/cbor"]), Err(NotAcceptable));
        assert_eq!(
            rewritten(&["application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"]),
            Err(NotAcceptable)
        );
    }
}
