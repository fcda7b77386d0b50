//! PATCH: merge, JSON, strategic merge patch and server-side apply, chosen
//! by Content-Type (415 for anything else). The patch engine itself is
//! `sim::patch`; this file wires it to options, preconditions and storage.

use super::options::{self, OptionsKind, WriteOptions};
use super::patch_api::{self, PatchError};
use super::write::{finish_update, prepare_create, written};
use super::Ctx;
use crate::body::Body;
use crate::status::Status;
use crate::store::{meta_str, now_timestamp, Change};
use crate::validate;
use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::Value;

/// The four patch types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

/// The types the PATCH route consumes (go-restful's first check).
const CONSUMED: [&[u8]; 5] = [
    b"application/json-patch+json",
    b"application/merge-patch+json",
    b"application/strategic-merge-patch+json",
    b"application/apply-patch+yaml",
    b"application/apply-patch+cbor",
];

/// The patch type of `content_type` (the header's bytes), read in kube's
/// two steps. go-restful takes the request when a comma-separated part,
/// cut at its `;` and trimmed of spaces, is exactly a type the route
/// consumes; else its generic 415. Then `PatchResource` cuts the header at
/// its first `;` only (so parameters may hold any byte) and compares
/// exactly: `application/json-patch+json ;x` passes the first step and
/// fails this one.
fn patch_type(content_type: Option<&[u8]>) -> Result<PatchType, Status> {
    let header = content_type.unwrap_or(b"application/json");
    let route_takes = header.split(|&b| b == b',').any(|part| {
        let media = part.split(|&b| b == b';').next().unwrap_or_default();
        CONSUMED.contains(&media.trim_ascii_start().trim_ascii_end())
    });
    if !route_takes {
        return Err(
            Status::failure(415, "UnsupportedMediaType", "415: Unsupported Media Type")
                .with_details(crate::status::StatusDetails::default()),
        );
    }
    let media = match header.iter().position(|&b| b == b';') {
        Some(at) if at > 0 => &header[..at],
        _ => header,
    };
    match media {
        b"application/merge-patch+json" => Ok(PatchType::Merge),
        b"application/json-patch+json" => Ok(PatchType::Json),
        b"application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        b"application/apply-patch+yaml" | b"application/apply-patch+cbor" => Ok(PatchType::Apply),
        _ => Err(Status::failure(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
             application/apply-patch+yaml",
        )),
    }
}

fn decode_patch(kind: PatchType, body: &Bytes) -> Result<Value, Status> {
    let parsed = match kind {
        PatchType::Apply => serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string()),
        _ => serde_json::from_slice::<Value>(body).map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| Status::bad_request(format!("error decoding patch: {e}")))
}

/// The Status of a patch engine error.
fn patch_error(error: PatchError) -> Status {
    error.to_status()
}

/// The subresource a write goes through, for managedFields.
pub(super) fn subresource<'a>(ctx: &'a Ctx<'_>) -> Option<&'a str> {
    Some(ctx.info.subresource.as_str()).filter(|s| !s.is_empty())
}

/// PATCH one object (or its `status`).
pub(super) fn patch(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let kind = patch_type(ctx.headers.get(http::header::CONTENT_TYPE).map(|v| v.as_bytes()))?;
    let opts = options::write_options(ctx, OptionsKind::Patch(kind == PatchType::Apply))?;
    let patch = decode_patch(kind, body)?;
    let name = ctx.info.name.as_str();
    let (group, plural) = (ctx.rt.group, ctx.rt.plural);
    let mut warnings = Vec::new();
    let written_object = ctx
        .store
        .write(ctx.rt, ctx.namespace(), name, opts.dry_run, |current| match current {
            None if kind == PatchType::Apply && ctx.info.subresource.is_empty() => {
                create_by_apply(ctx, &patch, &opts, &mut warnings)
            }
            None => Err(Status::not_found(group, plural, name)),
            Some(current) => {
                let mut patched = patched(ctx, kind, current, &patch, &opts)?;
                warnings = validate::check_fields(opts.validation, group, ctx.rt.kind, &mut patched)?;
                finish_update(ctx, current, patched, &opts, kind == PatchType::Apply)
            }
        })?;
    let code = if written_object.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    written(ctx, code, written_object.object, &warnings)
}

/// Server-side apply of an object that does not exist yet: it is created.
fn create_by_apply(
    ctx: &Ctx<'_>,
    config: &Value,
    opts: &WriteOptions,
    warnings: &mut Vec<String>,
) -> Result<Change, Status> {
    check_apply_config(ctx, config)?;
    let resource_version = meta_str(config, "resourceVersion");
    if !resource_version.is_empty() {
        return Err(Status::not_found(ctx.rt.group, ctx.rt.plural, &ctx.info.name));
    }
    let mut object =
        patch_api::apply_subresource(ctx.rt, None, config, &opts.manager, opts.force, &now_timestamp(), None)
            .map_err(patch_error)?;
    *warnings = prepare_create(ctx, &mut object, opts, true)?;
    Ok(Change::Put(object))
}

/// An apply configuration must name the URL's object.
fn check_apply_config(ctx: &Ctx<'_>, config: &Value) -> Result<(), Status> {
    let name = meta_str(config, "name");
    if name != ctx.info.name {
        return Err(Status::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            ctx.info.name
        )));
    }
    Ok(())
}

/// `current` with the patch applied (not yet stored).
fn patched(
    ctx: &Ctx<'_>,
    kind: PatchType,
    current: &Value,
    patch: &Value,
    opts: &WriteOptions,
) -> Result<Value, Status> {
    let result = match kind {
        PatchType::Merge => Ok(patch_api::merge_patch(current, patch)),
        PatchType::Json => patch_api::json_patch(current, patch),
        PatchType::Strategic => patch_api::strategic_merge_patch(ctx.rt, current, patch),
        PatchType::Apply => {
            check_apply_config(ctx, patch)?;
            let wanted = meta_str(patch, "resourceVersion");
            if !wanted.is_empty() && wanted != meta_str(current, "resourceVersion") {
                return Err(Status::conflict(ctx.rt.group, ctx.rt.plural, &ctx.info.name));
            }
            patch_api::apply_subresource(
                ctx.rt,
                Some(current),
                patch,
                &opts.manager,
                opts.force,
                &now_timestamp(),
                subresource(ctx),
            )
        }
    };
    result.map_err(patch_error)
}
