//! Unit tests: bodies built with a tiny test-only protobuf encoder (and one
//! captured from kubectl 1.37), decoded and compared with the JSON a client
//! would have sent.

mod kinds;

use super::*;
use serde_json::json;

/// A protobuf message under construction.
#[derive(Default, Clone)]
pub(crate) struct Pb(pub Vec<u8>);

impl Pb {
    pub fn new() -> Pb {
        Pb::default()
    }

    fn varint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(byte);
                return;
            }
            self.0.push(byte | 0x80);
        }
    }

    fn tag(&mut self, number: u32, wire: u8) {
        self.varint(u64::from(number) << 3 | u64::from(wire));
    }

    /// A varint field (bool, int32, int64; negative values sign-extended).
    pub fn int(mut self, number: u32, v: i64) -> Pb {
        self.tag(number, 0);
        self.varint(v as u64);
        self
    }

    /// A length-delimited field.
    pub fn bytes(mut self, number: u32, b: &[u8]) -> Pb {
        self.tag(number, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    /// A string field.
    pub fn str(self, number: u32, s: &str) -> Pb {
        self.bytes(number, s.as_bytes())
    }

    /// A nested message field.
    pub fn msg(self, number: u32, m: Pb) -> Pb {
        self.bytes(number, &m.0)
    }

    /// A `map<string, string>` entry.
    pub fn entry(self, number: u32, key: &str, value: &str) -> Pb {
        self.msg(number, Pb::new().str(1, key).str(2, value))
    }

    /// A `map<string, Message>` entry.
    pub fn entry_msg(self, number: u32, key: &str, value: Pb) -> Pb {
        self.msg(number, Pb::new().str(1, key).msg(2, value))
    }

    /// Fixed-width fields, as unknown fields may be.
    pub fn fixed64(mut self, number: u32, v: u64) -> Pb {
        self.tag(number, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// See [`Pb::fixed64`].
    pub fn fixed32(mut self, number: u32, v: u32) -> Pb {
        self.tag(number, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
}

/// `k8s\0` + `runtime.Unknown{typeMeta, raw, "", ""}`, as client-go writes it.
pub(crate) fn envelope(api_version: &str, kind: &str, object: Pb) -> Vec<u8> {
    let unknown = Pb::new()
        .msg(1, Pb::new().str(1, api_version).str(2, kind))
        .msg(2, object)
        .str(3, "")
        .str(4, "");
    [MAGIC.as_slice(), &unknown.0].concat()
}

/// ObjectMeta with only a name, written the way kubectl writes it (every
/// non-pointer scalar present, zero or not, and an empty creationTimestamp).
pub(crate) fn object_meta(name: &str) -> Pb {
    Pb::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .int(7, 0)
        .msg(8, Pb::new())
}

/// An object whose field 1 is `object_meta(name)`; the caller adds the rest.
pub(crate) fn meta(name: &str) -> Pb {
    Pb::new().msg(1, object_meta(name))
}

pub(crate) fn decoded(api_version: &str, kind: &str, object: Pb) -> Value {
    decode(&envelope(api_version, kind, object)).expect("the body decodes")
}

/// `kubectl create configmap c2 --from-literal=a=b`, captured with -v=9.
const KUBECTL_CONFIGMAP: &[u8] = &[
    0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x43, 0x6f, 0x6e, 0x66, 0x69, 0x67, 0x4d,
    0x61, 0x70, 0x12, 0x1c, 0x0a, 0x12, 0x0a, 0x02, 0x63, 0x32, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32,
    0x00, 0x38, 0x00, 0x42, 0x00, 0x12, 0x06, 0x0a, 0x01, 0x61, 0x12, 0x01, 0x62, 0x1a, 0x00, 0x22, 0x00,
];

#[test]
fn a_configmap_captured_from_kubectl_decodes_to_the_json_kubectl_would_send() {
    assert_eq!(
        decode(KUBECTL_CONFIGMAP).expect("decodes"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c2"}, "data": {"a": "b"}})
    );
}

#[test]
fn a_body_without_the_magic_prefix_is_not_protobuf() {
    let err = decode(br#"{"kind":"ConfigMap"}"#).expect_err("not protobuf");
    assert_eq!(
        err,
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    );
}

#[test]
fn an_unknown_kind_is_not_registered() {
    let err = decode(&envelope("v1", "Gadget", meta("g"))).expect_err("unknown kind");
    assert!(
        err.starts_with(r#"no kind "Gadget" is registered for version "v1""#),
        "{err}"
    );
}

#[test]
fn a_known_kind_in_another_version_is_not_registered() {
    let err = decode_object(&envelope("apps/v1beta1", "Deployment", meta("d"))).expect_err("unknown version");
    assert_eq!(err.type_meta(), Some(("apps/v1beta1", "Deployment")));
}

#[test]
fn a_truncated_body_is_a_malformed_envelope() {
    let mut body = envelope("v1", "ConfigMap", meta("c").entry(2, "a", "b"));
    body.truncate(body.len() - 7);
    let err = decode_object(&body).expect_err("truncated");
    assert!(matches!(err, DecodeError::Envelope(WireError::Truncated)), "{err:?}");
}

#[test]
fn a_field_with_the_wrong_wire_type_is_an_error() {
    let err = decode_object(&envelope("v1", "ConfigMap", Pb::new().int(1, 5))).expect_err("metadata as a varint");
    assert_eq!(err.to_string(), "proto: wrong wireType for field ConfigMap.metadata");
    assert_eq!(err.type_meta(), Some(("v1", "ConfigMap")));
}

#[test]
fn a_content_encoding_is_refused() {
    let unknown = Pb::new()
        .msg(1, Pb::new().str(1, "v1").str(2, "ConfigMap"))
        .msg(2, meta("c"))
        .str(3, "gzip");
    let body = [MAGIC.as_slice(), &unknown.0].concat();
    assert_eq!(decode_object(&body), Err(DecodeError::ContentEncoding("gzip".into())));
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped() {
    let object = meta("c")
        .int(90, 7)
        .fixed64(91, 1)
        .fixed32(92, 2)
        .str(93, "ignored")
        .msg(1, Pb::new().str(99, "ignored too"));
    assert_eq!(
        decoded("v1", "ConfigMap", object),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    );
}

#[test]
fn decode_request_words_errors_as_kube_apiserver_does() {
    let unknown = decode_request("ConfigMap", &envelope("v1", "Gadget", meta("g"))).expect_err("400");
    assert_eq!(unknown.code, 400);
    assert!(
        unknown
            .message
            .starts_with(r#"Gadget in version "v1" cannot be handled as a ConfigMap: no kind "Gadget""#),
        "{}",
        unknown.message
    );
    let garbage = decode_request("ConfigMap", b"nope").expect_err("400");
    assert!(
        garbage
            .message
            .starts_with("the object provided is unrecognized (must be of type ConfigMap): provided data"),
        "{}",
        garbage.message
    );
}

#[test]
fn the_protobuf_media_type_is_recognised_with_parameters_and_in_any_case() {
    let mut headers = http::HeaderMap::new();
    assert!(!is_protobuf(&headers));
    headers.insert(
        http::header::CONTENT_TYPE,
        "Application/Vnd.Kubernetes.Protobuf; charset=x".parse().unwrap(),
    );
    assert!(is_protobuf(&headers));
    headers.insert(http::header::CONTENT_TYPE, "application/json".parse().unwrap());
    assert!(!is_protobuf(&headers));
}

#[test]
fn json_or_protobuf_follows_the_flag() {
    assert_eq!(json_or_protobuf(false, br#"{"a":1}"#), Ok(json!({"a": 1})));
    assert_eq!(
        json_or_protobuf(true, KUBECTL_CONFIGMAP).map(|v| v["kind"].clone()),
        Ok(json!("ConfigMap"))
    );
    assert!(json_or_protobuf(true, br#"{"a":1}"#).is_err());
}

#[test]
fn built_in_groups_accept_protobuf_and_custom_resource_groups_do_not() {
    for group in [
        "",
        "apps",
        "batch",
        "policy",
        "rbac.authorization.k8s.io",
        "networking.k8s.io",
    ] {
        assert!(accepts_group(group), "{group}");
    }
    for group in ["stable.example.com", "gateway.networking.x-k8s.io"] {
        assert!(!accepts_group(group), "{group}");
    }
}

#[test]
fn a_raw_extension_is_the_embedded_json_document() {
    static HOLDER: schema::Message = schema::Message {
        name: "Holder",
        fields: &[schema::raw_extension(1, "object"), schema::raw_extension(2, "empty")],
    };
    let bytes = Pb::new()
        .msg(1, Pb::new().str(1, r#"{"kind":"Pod","spec":{}}"#))
        .msg(2, Pb::new());
    assert_eq!(
        Value::Object(decode::object(&bytes.0, &HOLDER).expect("decodes")),
        json!({"object": {"kind": "Pod", "spec": {}}})
    );
    let broken = Pb::new().msg(1, Pb::new().str(1, "{not json"));
    assert!(matches!(
        decode::object(&broken.0, &HOLDER),
        Err(ObjectError::RawExtension(_))
    ));
}
