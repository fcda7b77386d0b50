//! OpenAPI v3: `/openapi/v3` (the index of group versions, each with a
//! content hash) and `/openapi/v3/<api|apis/group>/<version>`.
//!
//! kubectl 1.37 needs these for `create`, `apply`, `edit`, `patch` and
//! `replace` with `--validate=strict` (the default): it looks for a PATCH
//! operation tagged with the object's `x-kubernetes-group-version-kind` and
//! a `fieldValidation` parameter, and when it finds one it leaves
//! validation to the server (`?fieldValidation=Strict`). Without
//! `/openapi/v3` it falls back to `/openapi/v2` as protobuf, and with no
//! usable document at all it refuses to send anything. `kubectl explain`
//! reads the component schemas.
//!
//! # Differences from kube-apiserver
//!
//! - Operations carry their parameters and GVK tags, but component schemas
//!   describe only a kind's top-level fields (see `schemas`).
//! - PATCH operations do not list `application/strategic-merge-patch+json`.
//!   kubectl's client-side `apply` would otherwise compute strategic merge
//!   patches from these schemas, which lack the patch strategies and merge
//!   keys; without it kubectl uses the schemas compiled into it, which yields
//!   the same patches a real cluster receives. The server still accepts
//!   strategic merge patches.
//! - Only the `status`, `scale`, `ephemeralcontainers` and `finalize`
//!   subresources have paths; streams, proxies, `binding`, `eviction` and
//!   `token` do not.

use super::schemas::{self, reference};
use super::{bytes_response, groups, resources_of};
use crate::body::Body;
use crate::registry::{ResourceType, Subresource};
use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One group version's document, serialized once, with its hash.
struct Document {
    bytes: Bytes,
    hash: String,
}

/// All documents, keyed by `api/v1`, `apis/apps/v1`, …
fn documents() -> &'static BTreeMap<String, Document> {
    static DOCUMENTS: OnceLock<BTreeMap<String, Document>> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        let mut documents = BTreeMap::new();
        for (group, versions) in groups() {
            for version in versions {
                let bytes = Bytes::from(group_version_document(group, version).to_string());
                // kube-openapi's hash: upper-case hex SHA-512 of the document.
                let hash = format!("{:X}", Sha512::digest(&bytes));
                documents.insert(key(group, version), Document { bytes, hash });
            }
        }
        documents
    })
}

/// `api/v1` or `apis/<group>/<version>`.
fn key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL": …}, …}}`.
pub fn root() -> Value {
    let paths: Map<String, Value> = documents()
        .iter()
        .map(|(key, doc)| {
            let url = format!("/openapi/v3/{key}?hash={}", doc.hash);
            (key.clone(), json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// The `/openapi/v3` response.
pub(super) fn root_response() -> Response<Body> {
    super::json_response(&root())
}

/// `/openapi/v3/<key>`: the document, immutable when asked for by its
/// current hash, a 301 to the current hash when asked for by another one
/// (as kube-openapi does), `None` for an unknown group version.
pub(super) fn group_version_response(key: &str, query: Option<&str>) -> Option<Response<Body>> {
    let doc = documents().get(key)?;
    let hash = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "hash")
            .map(|(_, v)| v.into_owned())
    });
    let mut response = bytes_response(StatusCode::OK, "application/json", doc.bytes.clone());
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", doc.hash)) {
        headers.insert(header::ETAG, etag);
    }
    match hash {
        Some(asked) if asked == doc.hash => {
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            headers.insert(header::VARY, HeaderValue::from_static("Accept"));
        }
        Some(_) => {
            let location = format!("/openapi/v3/{key}?hash={}", doc.hash);
            let mut redirect = bytes_response(StatusCode::MOVED_PERMANENTLY, "text/html; charset=utf-8", Bytes::new());
            if let Ok(location) = HeaderValue::from_str(&location) {
                redirect.headers_mut().insert(header::LOCATION, location);
            }
            return Some(redirect);
        }
        None => {}
    }
    Some(response)
}

/// The OpenAPI 3.0 document of one group version.
pub fn group_version_document(group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    let mut components: Map<String, Value> = schemas::common().into_iter().collect();
    for r in resources_of(group, version) {
        components.insert(
            schemas::schema_name(r.group, r.version, r.kind),
            schemas::kind_schema(r),
        );
        if r.subresource("scale").is_some() {
            components.insert(schemas::SCALE.to_string(), schemas::scale());
        }
        add_paths(&mut paths, r);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": super::GIT_VERSION},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}},
        },
        "security": [{"BearerToken": []}],
    })
}

/// The paths of one resource and its object-shaped subresources.
fn add_paths(paths: &mut Map<String, Value>, r: &ResourceType) {
    let prefix = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let collection = if r.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
    } else {
        format!("{prefix}/{}", r.plural)
    };
    let target = Target::of(r);
    let id = |verb: &str, suffix: &str| format!("{verb}{}{scope}{}{suffix}", group_version_id(r), r.kind);

    let ops = collection_ops(r, &target, scope, &|verb| id(verb, ""));
    insert_path(paths, collection.clone(), ops, r.namespaced, false);
    if !r.stored {
        return;
    }
    if r.namespaced && r.verbs.contains(&"list") {
        let all = format!("{prefix}/{}", r.plural);
        let id = format!("list{}{}ForAllNamespaces", group_version_id(r), r.kind);
        let ops = Map::from_iter([("get".to_string(), operation(&id, "list", &target, LIST_PARAMS, None))]);
        insert_path(paths, all, ops, false, false);
    }
    let item = format!("{collection}/{{name}}");
    insert_path(
        paths,
        item.clone(),
        object_ops(r.verbs, &target, &|verb| id(verb, "")),
        r.namespaced,
        true,
    );
    for s in r.subresources.iter().filter(|s| object_shaped(r, s)) {
        let target = Target::of_subresource(r, s);
        let suffix = capitalize(s.name);
        let ops = object_ops(s.verbs, &target, &|verb| id(verb, &suffix));
        insert_path(paths, format!("{item}/{}", s.name), ops, r.namespaced, true);
    }
}

/// list/create/deletecollection on the collection.
fn collection_ops(r: &ResourceType, target: &Target, scope: &str, id: &dyn Fn(&str) -> String) -> Map<String, Value> {
    let mut ops = Map::new();
    if r.verbs.contains(&"list") {
        ops.insert("get".into(), operation(&id("list"), "list", target, LIST_PARAMS, None));
    }
    if r.verbs.contains(&"create") {
        ops.insert(
            "post".into(),
            operation(&id("create"), "post", target, WRITE_PARAMS, Some(body(target))),
        );
    }
    if r.verbs.contains(&"deletecollection") {
        let id = format!("delete{}Collection{scope}{}", group_version_id(r), r.kind);
        ops.insert(
            "delete".into(),
            operation(&id, "deletecollection", target, DELETE_PARAMS, None),
        );
    }
    ops
}

/// get/put/patch/delete on one object (or one subresource of it).
fn object_ops(verbs: &[&str], target: &Target, id: &dyn Fn(&str) -> String) -> Map<String, Value> {
    let mut ops = Map::new();
    if verbs.contains(&"get") {
        ops.insert("get".into(), operation(&id("read"), "get", target, &[], None));
    }
    if verbs.contains(&"update") {
        ops.insert(
            "put".into(),
            operation(&id("replace"), "put", target, WRITE_PARAMS, Some(body(target))),
        );
    }
    if verbs.contains(&"patch") {
        ops.insert(
            "patch".into(),
            operation(&id("patch"), "patch", target, PATCH_PARAMS, Some(patch_body())),
        );
    }
    if verbs.contains(&"delete") {
        ops.insert(
            "delete".into(),
            operation(&id("delete"), "delete", target, DELETE_PARAMS, None),
        );
    }
    ops
}

/// Subresources whose object is a stored kind (`status`, `scale`, …).
fn object_shaped(r: &ResourceType, s: &Subresource) -> bool {
    s.kind == r.kind || s.name == "scale"
}

/// Add a path item with its path-level parameters.
fn insert_path(
    paths: &mut Map<String, Value>,
    path: String,
    mut ops: Map<String, Value>,
    namespaced: bool,
    named: bool,
) {
    if ops.is_empty() {
        return;
    }
    let mut parameters = Vec::new();
    if named {
        parameters.push(param("name", "path", "name of the object"));
    }
    if namespaced {
        parameters.push(param(
            "namespace",
            "path",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    parameters.push(param(
        "pretty",
        "query",
        "If 'true', then the output is pretty printed.",
    ));
    ops.insert("parameters".into(), Value::Array(parameters));
    paths.insert(path, Value::Object(ops));
}

/// What an operation's body and response are.
struct Target {
    schema: String,
    gvk: Value,
}

impl Target {
    fn of(r: &ResourceType) -> Target {
        Target {
            schema: schemas::schema_name(r.group, r.version, r.kind),
            gvk: json!({"group": r.group, "version": r.version, "kind": r.kind}),
        }
    }

    fn of_subresource(r: &ResourceType, s: &Subresource) -> Target {
        if s.kind == r.kind {
            return Target::of(r);
        }
        Target {
            schema: schemas::schema_name(s.group, s.version, s.kind),
            gvk: json!({"group": s.group, "version": s.version, "kind": s.kind}),
        }
    }
}

/// One operation object.
fn operation(id: &str, action: &str, target: &Target, params: &[&str], body: Option<Value>) -> Value {
    let mut op = Map::new();
    op.insert("operationId".into(), json!(id));
    let parameters: Vec<Value> = params.iter().map(|name| query_param(name)).collect();
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    if let Some(body) = body {
        op.insert("requestBody".into(), body);
    }
    let ok = json!({"description": "OK", "content": {"application/json": {"schema": reference(&target.schema)}}});
    op.insert(
        "responses".into(),
        json!({"200": ok, "401": {"description": "Unauthorized"}}),
    );
    op.insert("x-kubernetes-action".into(), json!(action));
    op.insert("x-kubernetes-group-version-kind".into(), target.gvk.clone());
    Value::Object(op)
}

/// The request body of create and replace.
fn body(target: &Target) -> Value {
    json!({"content": {"*/*": {"schema": reference(&target.schema)}}, "required": true})
}

/// The request body of patch: see the module documentation for why
/// strategic merge patch is not listed.
fn patch_body() -> Value {
    let patch = json!({"schema": reference(schemas::PATCH)});
    json!({
        "content": {
            "application/apply-patch+yaml": patch,
            "application/json-patch+json": patch,
            "application/merge-patch+json": patch,
        },
        "required": true,
    })
}

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMS: &[&str] = &["dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"];

/// A path or query parameter of type string.
fn param(name: &str, location: &str, description: &str) -> Value {
    let mut value = json!({"name": name, "in": location, "description": description, "schema": {"type": "string", "uniqueItems": true}});
    if location == "path" {
        value["required"] = json!(true);
    }
    value
}

/// A query parameter with kube-apiserver's type and description.
fn query_param(name: &str) -> Value {
    let (kind, description) = match name {
        "fieldValidation" => ("string", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present."),
        "dryRun" => ("string", "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed"),
        "fieldManager" => ("string", "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint."),
        "force" => ("boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests."),
        "allowWatchBookmarks" | "watch" | "orphanDependents" | "sendInitialEvents" => ("boolean", ""),
        "limit" | "timeoutSeconds" | "gracePeriodSeconds" => ("integer", ""),
        _ => ("string", ""),
    };
    json!({"name": name, "in": "query", "description": description, "schema": {"type": kind, "uniqueItems": true}})
}

/// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`, `StableExampleComV1`: the
/// middle of kube-apiserver's operation ids.
fn group_version_id(r: &ResourceType) -> String {
    let group = if r.group.is_empty() {
        "core"
    } else {
        r.group.trim_end_matches(".k8s.io")
    };
    let group: String = group.split(['.', '-']).map(capitalize).collect();
    format!("{group}{}", capitalize(r.version))
}

/// `status` → `Status`.
fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
