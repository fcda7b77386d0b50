//! Bindings: portcullis's people, bots and grants are given access by
//! grants, which end; never by a RoleBinding or ClusterRoleBinding someone
//! writes for them.
//!
//! Impersonated as `user:<login>`, `bot:<name>` and `portcullis:grant:<id>`,
//! a caller whose grant lets them write bindings (`admin` of a namespace,
//! `cluster-admin`) could bind those names themselves, and keep the access
//! once their grant had ended: portcullis would go on sending the same
//! name. So a binding write through portcullis that names one of them, or
//! `system:authenticated` (which the API server adds to each), is refused. Its body is read whole (a binding is small). As JSON or YAML
//! (kubectl's apply and patch, kube-rs), every string in it is looked at,
//! whatever its key: the API server reads keys in ways a narrower check
//! could miss. As protobuf (`kubectl create rolebinding`), every string
//! the API server decodes is a run of the body's bytes as they are, so the
//! bytes are searched. A JSON Patch's `copy` and `move` could bring a name
//! in from elsewhere in the object, so they are refused too; a body in any
//! other encoding (CBOR, whose strings may come in pieces) is refused.
//!
//! The reconciler writes the bindings of grants with its own client, not
//! through here.

use super::classify::RequestInfo;
use super::error::RequestError;
use crate::document::{self, Bounds};
use http::header::CONTENT_TYPE;
use http::HeaderMap;
use serde_json::Value;

/// The names portcullis impersonates: its people, its bots, its grants'
/// groups. (Its roles' ClusterRoles, `portcullis:<role>`, may be bound.)
const IMPERSONATED: &[&str] = &["user:", "bot:", "portcullis:grant:"];

/// The group the API server adds to everyone portcullis impersonates, a
/// person with no grant in effect included.
const EVERYONE: &str = "system:authenticated";

/// Is this a write of a RoleBinding or ClusterRoleBinding with a body?
pub fn guards(info: &RequestInfo) -> bool {
    info.is_resource_request
        && info.api_group == "rbac.authorization.k8s.io"
        && matches!(info.resource.as_str(), "rolebindings" | "clusterrolebindings")
        && info.subresource.is_empty()
        && matches!(info.verb.as_str(), "create" | "update" | "patch")
}

/// Refuse a binding write (see [`guards`]) whose `body` names one of
/// portcullis's identities, or that cannot be read to know.
pub fn refuse_identities(info: &RequestInfo, headers: &HeaderMap, body: &[u8]) -> Result<(), RequestError> {
    if !guards(info) {
        return Ok(());
    }
    // As Go's mime.ParseMediaType reads it for a create or an update: in
    // any letter case, spaces trimmed (a patch's type the API server reads
    // exactly, and refuses what is not one of its own).
    let media = headers
        .get(CONTENT_TYPE)
        .map(|value| value.as_bytes().split(|&b| b == b';').next().unwrap_or_default())
        .unwrap_or_default()
        .trim_ascii()
        .to_ascii_lowercase();
    let json_patch = match media.as_slice() {
        b"application/vnd.kubernetes.protobuf" => {
            return match named_in_bytes(body) {
                Some(name) => Err(RequestError::BindsIdentity { name }),
                None => Ok(()),
            }
        }
        b"application/json-patch+json" => true,
        b"application/json"
        | b"application/yaml"
        | b"application/merge-patch+json"
        | b"application/strategic-merge-patch+json"
        | b"application/apply-patch+yaml" => false,
        _ => {
            return Err(RequestError::BindingUnreadable {
                why: format!(
                    "is sent as {:?}: send it as JSON or YAML",
                    String::from_utf8_lossy(&media)
                ),
            })
        }
    };
    let document = document::parse_json_or_yaml(body, Bounds::body(body.len()))
        .map_err(|error| RequestError::BindingUnreadable { why: error.to_string() })?;
    if json_patch && copies(&document) {
        return Err(RequestError::BindingUnreadable {
            why: "is a JSON Patch with a copy or move operation, which could bring a name in from elsewhere: \
                  add the subjects themselves"
                .into(),
        });
    }
    match named(&document) {
        Some(name) => Err(RequestError::BindsIdentity { name: name.into() }),
        None => Ok(()),
    }
}

/// The first string in `value` that is one of portcullis's names.
fn named(value: &Value) -> Option<&str> {
    match value {
        Value::String(text) => {
            (IMPERSONATED.iter().any(|prefix| text.starts_with(prefix)) || text == EVERYONE).then_some(text.as_str())
        }
        Value::Array(items) => items.iter().find_map(named),
        Value::Object(map) => map.values().find_map(named),
        _ => None,
    }
}

/// One of portcullis's names found anywhere in `body`, with what follows
/// it as far as a name of its goes (for the message: the next byte may be
/// the next field's tag, `"` for one).
fn named_in_bytes(body: &[u8]) -> Option<String> {
    IMPERSONATED.iter().chain([&EVERYONE]).find_map(|prefix| {
        let at = body.windows(prefix.len()).position(|w| w == prefix.as_bytes())?;
        let name = &body[at..];
        let end = name
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || b"._-:@".contains(b)))
            .unwrap_or(name.len());
        Some(String::from_utf8_lossy(&name[..end.min(100)]).into_owned())
    })
}

/// Does the JSON Patch `patch` have an operation that copies or moves?
/// (A patch that is not an array of operations the cluster refuses.)
fn copies(patch: &Value) -> bool {
    let Value::Array(operations) = patch else { return false };
    operations
        .iter()
        .any(|operation| matches!(operation.get("op").and_then(Value::as_str), Some("copy" | "move")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Method};

    fn write(method: Method, path: &str, content_type: &str, body: &str) -> Result<(), RequestError> {
        let info = super::super::classify::classify(&method, path, None);
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap());
        refuse_identities(&info, &headers, body.as_bytes())
    }

    const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings";
    const CLUSTER: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";

    #[test]
    fn a_binding_naming_a_person_a_bot_or_a_grant_group_is_refused_however_it_is_written() {
        let binding = |subject: &str| {
            format!(
                r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{{"name":"keep"}},
                "roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"admin"}},
                "subjects":[{subject}]}}"#
            )
        };
        for subject in [
            r#"{"kind":"User","name":"user:ana"}"#,
            r#"{"kind":"User","name":"bot:ci"}"#,
            r#"{"kind":"Group","name":"portcullis:grant:0192"}"#,
            // Everyone portcullis impersonates is in it.
            r#"{"kind":"Group","name":"system:authenticated"}"#,
            // Escaped, or under a key spelt otherwise: still the name.
            r#"{"kind":"User","name":"\u0075ser:ana"}"#,
            r#"{"kind":"User","Name":"user:ana"}"#,
        ] {
            let refused = write(Method::POST, BINDINGS, "application/json", &binding(subject));
            assert!(
                matches!(refused, Err(RequestError::BindsIdentity { .. })),
                "{subject}: {refused:?}"
            );
        }
        let yaml = "subjects:\n- kind: User\n  name: \"user:ana\"\n";
        for (method, path, content_type) in [
            (Method::PATCH, format!("{CLUSTER}/keep"), "application/apply-patch+yaml"),
            (
                Method::PATCH,
                format!("{BINDINGS}/keep"),
                "application/strategic-merge-patch+json",
            ),
            (Method::PUT, format!("{BINDINGS}/keep"), "application/yaml"),
        ] {
            let refused = write(method, &path, content_type, yaml);
            assert!(
                matches!(refused, Err(RequestError::BindsIdentity { .. })),
                "{path}: {refused:?}"
            );
        }
        // Protobuf, as `kubectl create rolebinding` sends it: the name's
        // bytes are in the body as they are.
        let protobuf = "k8s\0\n\u{1a}\n\u{18}rbac.authorization.k8s.io/v1\u{12}\u{0b}RoleBinding\u{12}\u{8}\n\u{4}User\u{1a}\u{8}user:ana\"\u{2}rb";
        let refused = write(Method::POST, BINDINGS, "application/vnd.kubernetes.protobuf", protobuf);
        assert!(
            matches!(&refused, Err(RequestError::BindsIdentity { name }) if name == "user:ana"),
            "{refused:?}"
        );
        let add = r#"[{"op":"add","path":"/subjects/-","value":{"kind":"User","name":"user:ana"}}]"#;
        let refused = write(
            Method::PATCH,
            &format!("{BINDINGS}/keep"),
            "application/json-patch+json",
            add,
        );
        assert!(
            matches!(refused, Err(RequestError::BindsIdentity { .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn a_binding_that_cannot_be_read_to_know_is_refused() {
        let path = format!("{BINDINGS}/keep");
        let copy = r#"[{"op":"copy","from":"/roleRef/name","path":"/subjects/0/name"}]"#;
        for (content_type, body) in [
            ("application/json-patch+json", copy),
            ("application/apply-patch+cbor", "\u{a1}"),
            ("application/cbor", "\u{a1}"),
            ("application/json", "{\"subjects\":"),
            // Go reads the tag's base64 as the name; serde_yaml would not.
            (
                "application/apply-patch+yaml",
                "subjects:\n- kind: User\n  name: !!binary dXNlcjphbmE=\n",
            ),
        ] {
            let refused = write(Method::PATCH, &path, content_type, body);
            assert!(
                matches!(refused, Err(RequestError::BindingUnreadable { .. })),
                "{content_type}: {refused:?}"
            );
        }
    }

    #[test]
    fn other_bindings_and_other_writes_pass() {
        let binding = r#"{"kind":"RoleBinding","metadata":{"name":"ci","annotations":{"note":"for the user: ana"}},
            "subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"shop"},{"kind":"User","name":"jane@example.com"}],
            "roleRef":{"kind":"ClusterRole","name":"view"}}"#;
        assert!(write(Method::POST, BINDINGS, "application/json", binding).is_ok());
        // portcullis's roles' ClusterRoles may be bound; the type is read
        // in any case, spaces trimmed, as the API server reads it.
        let its_role = r#"{"kind":"RoleBinding","metadata":{"name":"ci"},
            "subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"shop"}],
            "roleRef":{"kind":"ClusterRole","name":"portcullis:viewer"}}"#;
        assert!(write(Method::POST, BINDINGS, "Application/JSON ; charset=utf-8", its_role).is_ok());
        // Not a binding: nothing is read.
        for path in [
            "/api/v1/namespaces/shop/configmaps",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/roles",
        ] {
            assert!(
                write(Method::POST, path, "application/vnd.kubernetes.protobuf", "user:ana").is_ok(),
                "{path}"
            );
        }
        let protobuf = "k8s\0\n\u{4}User\u{1a}\u{10}jane@example.com";
        assert!(write(Method::POST, BINDINGS, "application/vnd.kubernetes.protobuf", protobuf).is_ok());
        assert!(write(Method::DELETE, &format!("{BINDINGS}/keep"), "application/cbor", "").is_ok());
    }
}
