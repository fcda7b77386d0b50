//! Write options from the query (`dryRun`, `fieldManager`, `force`,
//! `fieldValidation`) and request bodies, validated as kube-apiserver's
//! `Validate{Create,Update,Patch,Delete}Options` do.

use super::Ctx;
use crate::status::Status;
use crate::store::meta_str;
use crate::validate::{self, FieldValidation};
use bytes::Bytes;
use serde_json::Value;

/// The options of one write.
#[derive(Debug, Clone)]
pub(super) struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The field manager managedFields record.
    pub manager: String,
    /// How unknown fields are treated.
    pub validation: FieldValidation,
    /// `force=true` (apply only).
    pub force: bool,
}

/// Which options type a request carries, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OptionsKind {
    Create,
    Update,
    /// A patch; `true` for server-side apply.
    Patch(bool),
    Delete,
}

impl OptionsKind {
    fn name(self) -> &'static str {
        match self {
            OptionsKind::Create => "CreateOptions",
            OptionsKind::Update => "UpdateOptions",
            OptionsKind::Patch(_) => "PatchOptions",
            OptionsKind::Delete => "DeleteOptions",
        }
    }
}

/// Parse and validate the options of a write (422 Invalid naming the
/// options kind, like kube-apiserver).
pub(super) fn write_options(ctx: &Ctx<'_>, kind: OptionsKind) -> Result<WriteOptions, Status> {
    let dry_run_values = ctx.query.all("dryRun");
    let explicit_manager = ctx.query.get("fieldManager").unwrap_or_default();
    let mut errors = Vec::new();
    if let OptionsKind::Patch(apply) = kind {
        if !apply && ctx.query.has("force") {
            errors.push(validate::FieldError::new(
                validate::ErrorType::Forbidden,
                "force",
                String::new(),
                "may not be specified for non-apply patch",
            ));
        }
        if apply && explicit_manager.is_empty() {
            errors.push(validate::FieldError::new(
                validate::ErrorType::Required,
                "fieldManager",
                String::new(),
                "is required for apply patch",
            ));
        }
    }
    errors.extend(validate::field_manager_errors(explicit_manager));
    errors.extend(validate::dry_run_errors(&dry_run_values));
    validate::options(kind.name(), &errors)?;
    let validation = match kind {
        OptionsKind::Delete => FieldValidation::Ignore,
        _ => validate::field_validation(kind.name(), ctx.query.get("fieldValidation"))?,
    };
    Ok(WriteOptions {
        dry_run: !dry_run_values.is_empty(),
        manager: manager(explicit_manager, ctx.headers),
        validation,
        force: ctx.query.flag("force"),
    })
}

/// The explicit field manager, else the User-Agent's first segment
/// (`kubectl/v1.37.1 (linux/amd64) …` → `kubectl`), else `unknown`, as
/// kube-apiserver derives it.
fn manager(explicit: &str, headers: &http::HeaderMap) -> String {
    if !explicit.is_empty() {
        return explicit.to_string();
    }
    let agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let prefix: String = agent.split('/').next().unwrap_or_default().chars().take(128).collect();
    if prefix.is_empty() {
        "unknown".into()
    } else {
        prefix
    }
}

/// The media type of the request body, without parameters.
pub(super) fn content_type(ctx: &Ctx<'_>) -> String {
    ctx.headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("application/json")
        .trim()
        .to_ascii_lowercase()
}

/// Decode a JSON or YAML request body into an object (415 for other media
/// types, 400 when it does not parse).
pub(super) fn decode_body(ctx: &Ctx<'_>, body: &Bytes) -> Result<Value, Status> {
    let media = content_type(ctx);
    let parsed = match media.as_str() {
        "application/json" | "" => serde_json::from_slice::<Value>(body).map_err(|e| e.to_string()),
        "application/yaml" => serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string()),
        // kubectl's typed clients send protobuf; custom resources refuse it (415).
        crate::protobuf::MEDIA_TYPE if crate::protobuf::accepts_group(ctx.rt.group) => {
            return crate::protobuf::decode_request(ctx.rt.kind, body);
        }
        _ => {
            return Err(Status::failure(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
            ))
        }
    };
    let kind = ctx.rt.kind;
    match parsed {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(Status::bad_request(format!("the object provided is unrecognized (must be of type {kind})"))),
        Err(e) => Err(Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {e}"
        ))),
    }
}

/// Check an object's `apiVersion`/`kind` against the endpoint (filling them
/// in when absent) and its namespace against the path.
pub(super) fn check_object(ctx: &Ctx<'_>, obj: &mut Value) -> Result<(), Status> {
    let (rt, api_version) = (ctx.rt, ctx.rt.api_version());
    let group_kind_of = |v: &str| v.rsplit_once('/').map_or("", |(g, _)| g).to_string();
    let body_kind = obj["kind"].as_str().unwrap_or(rt.kind).to_string();
    let body_version = obj["apiVersion"].as_str().unwrap_or(&api_version).to_string();
    if body_kind != rt.kind || group_kind_of(&body_version) != rt.group {
        return Err(Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {body_kind} in version \"{body_version}\" cannot be handled as a {}",
            rt.kind, rt.kind
        )));
    }
    if let Some(map) = obj.as_object_mut() {
        map.insert("kind".into(), Value::String(rt.kind.into()));
        map.insert("apiVersion".into(), Value::String(api_version));
    }
    let namespace = ctx.namespace();
    let body_namespace = meta_str(obj, "namespace");
    if rt.namespaced {
        if !body_namespace.is_empty() && body_namespace != namespace {
            return Err(Status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        crate::store::set_meta(obj, "namespace", Value::String(namespace.to_string()));
    } else if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
    }
    Ok(())
}
