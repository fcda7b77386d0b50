//! What kube-apiserver takes as a dry run of a delete. It reads a delete's
//! options (`dryRun` among them) from the body whenever the request has
//! one, and from the query only when it has none: a `dryRun=All` in the
//! query of a delete with a body is ignored, and the object deleted for
//! real. (Create, update and patch read `dryRun` from the query alone.)

use super::Buffered;
use crate::gateway::classify::RequestInfo;
use bytes::Bytes;
use http::{header, Request};
use serde_json::Value;

fn deletes(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "delete" | "deletecollection")
}

/// Has `request` no body at all? Only when its body says so or it sends
/// `Content-Length: 0`: a body of unknown length may have bytes.
pub(super) fn bodiless<B: http_body::Body>(request: &Request<B>) -> bool {
    request.body().is_end_stream()
        || request
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() == b"0")
}

/// Will the API server store nothing? The query's `dryRun=All` says so,
/// except for a delete with a body (`bodiless` false), whose query the
/// server ignores: that one is taken as the real write it is.
pub(super) fn server_dry_run(info: &RequestInfo, bodiless: bool) -> bool {
    info.dry_run && (bodiless || !deletes(info))
}

/// The body the hold stage's dry run sends (its query has `dryRun=All`): a
/// delete's options say `dryRun` themselves, or, when portcullis cannot
/// edit them (protobuf), the dry run goes without them, so its query counts.
pub(super) fn body(info: &RequestInfo, request: &Buffered) -> Bytes {
    let body = &request.body;
    if !deletes(info) || body.is_empty() {
        return body.clone();
    }
    match super::run::parse_body(request.content_type(), body) {
        Ok(Some(Value::Object(mut options))) => {
            options.insert("dryRun".into(), Value::from(vec!["All"]));
            serde_json::to_vec(&options).map(Bytes::from).unwrap_or_default()
        }
        _ => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::classify::classify;
    use crate::gateway::hold::buffered;
    use http::Method;
    use serde_json::json;

    const CM: &str = "/api/v1/namespaces/shop/configmaps/flags";

    #[test]
    fn a_delete_whose_body_the_server_reads_is_no_dry_run_whatever_its_query_says() {
        let delete = classify(&Method::DELETE, CM, Some("dryRun=All"));
        assert!(server_dry_run(&delete, true));
        assert!(
            !server_dry_run(&delete, false),
            "the body's options count, not the query"
        );
        let collection = classify(
            &Method::DELETE,
            "/api/v1/namespaces/shop/configmaps",
            Some("dryRun=All"),
        );
        assert!(!server_dry_run(&collection, false));
        let patch = classify(&Method::PATCH, CM, Some("dryRun=All"));
        assert!(server_dry_run(&patch, false), "a patch's body is the object");
    }

    #[test]
    fn a_request_is_bodiless_only_when_it_says_so() {
        let empty = Request::delete(CM).body(http_body_util::Empty::<Bytes>::new()).unwrap();
        assert!(bodiless(&empty));
        let full = Request::delete(CM)
            .body(http_body_util::Full::new(Bytes::from("{}")))
            .unwrap();
        assert!(!bodiless(&full));
        let streamed = Request::delete(CM)
            .header(header::CONTENT_LENGTH, "0")
            .body(crate::body::boxed(http_body_util::Full::new(Bytes::new())))
            .unwrap();
        assert!(bodiless(&streamed));
    }

    #[test]
    fn the_dry_run_of_a_delete_asks_for_it_in_the_options_it_sends() {
        let info = classify(&Method::DELETE, CM, None);
        let options = buffered(
            Method::DELETE,
            CM,
            "application/json",
            br#"{"propagationPolicy":"Background"}"#,
        );
        let sent: Value = serde_json::from_slice(&body(&info, &options)).unwrap();
        assert_eq!(sent, json!({"propagationPolicy": "Background", "dryRun": ["All"]}));
        let yaml = buffered(Method::DELETE, CM, "application/yaml", b"gracePeriodSeconds: 0\n");
        let sent: Value = serde_json::from_slice(&body(&info, &yaml)).unwrap();
        assert_eq!(sent, json!({"gracePeriodSeconds": 0, "dryRun": ["All"]}));
        let protobuf = buffered(
            Method::DELETE,
            CM,
            "application/vnd.kubernetes.protobuf",
            b"k8s\x00\x0a",
        );
        assert!(body(&info, &protobuf).is_empty(), "unreadable options are left out");
        let none = buffered(Method::DELETE, CM, "", b"");
        assert!(body(&info, &none).is_empty());
        let patch = buffered(Method::PATCH, CM, "application/merge-patch+json", br#"{"data":{}}"#);
        let info = classify(&Method::PATCH, CM, None);
        assert_eq!(
            body(&info, &patch),
            Bytes::from_static(br#"{"data":{}}"#),
            "a patch is sent as it is"
        );
    }
}
