//! create, update, delete and deletecollection, and what every write shares:
//! preconditions, immutable fields, managedFields, no-op detection.

use super::options::{self, OptionsKind, WriteOptions};
use super::read::{in_version, page};
use super::respond::{self, Shape};
use super::{controllers, patch_api, Ctx};
use crate::body::Body;
use crate::status::{qualified_resource, Status, StatusDetails};
use crate::store::{meta_str, now_timestamp, set_meta, Change};
use crate::validate;
use bytes::Bytes;
use http::{Response, StatusCode};
use rand::Rng;
use serde_json::{json, Value};
use std::sync::Arc;

/// The written object as the response, in the negotiated shape, with any
/// field-validation warnings.
pub(super) fn written(
    ctx: &Ctx<'_>,
    code: StatusCode,
    object: Arc<Value>,
    warnings: &[String],
) -> Result<Response<Body>, Status> {
    let shape = respond::negotiate(ctx.headers, ctx.query.get("includeObject"), false)?;
    let object = in_version(ctx.rt, object);
    let mut response = match shape {
        Shape::Json => respond::json(code, &*object, ctx.headers),
        shape => respond::json(code, &respond::shape_object(ctx.rt, &object, shape), ctx.headers),
    };
    respond::add_warnings(&mut response, warnings);
    Ok(response)
}

/// 409 Conflict for a failed precondition (`what` is `UID` or
/// `ResourceVersion`), worded as kube-apiserver's storage layer.
pub(super) fn precondition_failed(ctx: &Ctx<'_>, name: &str, what: &str, wanted: &str, actual: &str) -> Status {
    let qualified = qualified_resource(ctx.rt.plural, ctx.rt.group);
    Status::failure(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {qualified} \"{name}\": Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"),
    )
    .with_details(StatusDetails { name: name.into(), group: ctx.rt.group.into(), kind: ctx.rt.plural.into(), ..Default::default() })
}

/// 409 Conflict for a failed delete precondition (`what` is `UID` or
/// `ResourceVersion`), worded as kube-apiserver 1.37's delete: the kind
/// (group-qualified) and both values.
fn delete_precondition_failed(ctx: &Ctx<'_>, name: &str, what: &str, wanted: &str, actual: &str) -> Status {
    let (kind, group) = (ctx.rt.kind, ctx.rt.group);
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let why = if what == "UID" {
        "deleted and then recreated"
    } else {
        "modified"
    };
    Status::failure(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {qualified} \"{name}\": the {what} in the precondition ({wanted}) does not match the {what} in record ({actual}). The object might have been {why}"),
    )
    .with_details(StatusDetails { name: name.into(), group: group.into(), kind: kind.into(), ..Default::default() })
}

/// A `metadata.resourceVersion` (or uid) the client sent is a precondition.
fn check_preconditions(ctx: &Ctx<'_>, current: &Value, sent: &Value) -> Result<(), Status> {
    let name = meta_str(current, "name");
    let uid = meta_str(sent, "uid");
    if !uid.is_empty() && uid != meta_str(current, "uid") {
        return Err(precondition_failed(ctx, name, "UID", uid, meta_str(current, "uid")));
    }
    let rv = meta_str(sent, "resourceVersion");
    if !rv.is_empty() && rv != meta_str(current, "resourceVersion") {
        return Err(Status::conflict(ctx.rt.group, ctx.rt.plural, name));
    }
    Ok(())
}

/// Turn `new` (a replacement for `old` from an update or a patch) into the
/// change to store: identity kept, status owned by the right endpoint,
/// immutable fields checked, controllers settled, managedFields recorded
/// (unless `apply` already did), and a no-op left alone.
pub(super) fn finish_update(
    ctx: &Ctx<'_>,
    old: &Value,
    mut new: Value,
    opts: &WriteOptions,
    apply: bool,
) -> Result<Change, Status> {
    check_preconditions(ctx, old, &new)?;
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        set_meta(&mut new, field, old["metadata"][field].clone());
    }
    let has_status = ctx.rt.subresource("status").is_some();
    let status_write = ctx.info.subresource == "status";
    if status_write {
        // Writes to /status change the status only.
        let status = new.get("status").cloned().unwrap_or(Value::Null);
        new = old.clone();
        if let Some(map) = new.as_object_mut() {
            map.insert("status".into(), status);
        }
    } else if has_status {
        // Writes to the main resource leave the status alone.
        match old.get("status") {
            Some(status) => set_field(&mut new, "status", status.clone()),
            None => remove_field(&mut new, "status"),
        }
    }
    if !status_write {
        crate::defaults::decode(ctx.rt.group, ctx.rt.kind, Some(old), &mut new);
        controllers::settle_decoded(ctx.rt, &mut new);
    }
    validate::update(ctx.rt.group, ctx.rt.kind, old, &new)?;
    if !apply {
        patch_api::record_update_subresource(
            ctx.rt,
            Some(old),
            &mut new,
            &opts.manager,
            &now_timestamp(),
            super::patching::subresource(ctx),
        );
    }
    if !status_write {
        controllers::settle_written(ctx.rt, Some(old), &mut new);
    }
    if unchanged(old, &new) {
        return Ok(Change::Keep);
    }
    Ok(Change::Put(new))
}

fn set_field(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert(key.into(), value);
    }
}

fn remove_field(obj: &mut Value, key: &str) {
    if let Some(map) = obj.as_object_mut() {
        map.remove(key);
    }
}

/// Equal but for resourceVersion and managedFields timestamps: the API
/// server then skips the write and keeps the resourceVersion.
fn unchanged(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
                for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                    entry.remove("time");
                }
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// `generateName` + 5 random characters from the API server's alphabet.
fn generate_name(obj: &mut Value) {
    let prefix = meta_str(obj, "generateName");
    if prefix.is_empty() || !meta_str(obj, "name").is_empty() {
        return;
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    let name = format!("{prefix}{suffix}");
    set_meta(obj, "name", Value::String(name));
}

/// A new object ready to store: checked, named, validated, settled and with
/// managedFields (`apply` when server-side apply recorded them already).
/// Returns the field-validation warnings.
pub(super) fn prepare_create(
    ctx: &Ctx<'_>,
    obj: &mut Value,
    opts: &WriteOptions,
    apply: bool,
) -> Result<Vec<String>, Status> {
    options::check_object(ctx, obj)?;
    generate_name(obj);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    validate::decode(ctx.rt.group, ctx.rt.kind, obj)?;
    let warnings = validate::check_fields(opts.validation, ctx.rt.group, ctx.rt.kind, obj)
        .map_err(|status| decoding_error(ctx, status, apply))?;
    // As kube-apiserver: decoded (and defaulted), then validated.
    crate::defaults::decode(ctx.rt.group, ctx.rt.kind, None, obj);
    validate::create(ctx.rt.group, ctx.rt.kind, obj)?;
    controllers::settle_decoded(ctx.rt, obj);
    if !apply {
        patch_api::record_update_subresource(ctx.rt, None, obj, &opts.manager, &now_timestamp(), None);
    }
    controllers::settle_written(ctx.rt, None, obj);
    Ok(warnings)
}

/// A strict decoding error of a create or update body, as the API server's
/// decoder wraps it: `<Kind> in version "<v>" cannot be handled as a
/// <Kind>: strict decoding error: …` (patches keep the bare message).
fn decoding_error(ctx: &Ctx<'_>, mut status: Status, patch: bool) -> Status {
    if !patch && status.code == 400 {
        let (kind, version) = (ctx.rt.kind, ctx.rt.version);
        status.message = format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {}",
            status.message
        );
    }
    status
}

/// POST a collection.
pub(super) fn create(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let opts = options::write_options(ctx, OptionsKind::Create)?;
    let mut obj = options::decode_body(ctx, body)?;
    let warnings = prepare_create(ctx, &mut obj, &opts, false)?;
    let name = meta_str(&obj, "name").to_string();
    let (group, plural) = (ctx.rt.group, ctx.rt.plural);
    let written = ctx
        .store
        .write(ctx.rt, ctx.namespace(), &name, opts.dry_run, |current| match current {
            Some(_) => Err(Status::already_exists(group, plural, &name)),
            None => Ok(Change::Put(obj)),
        })?;
    written_response(ctx, StatusCode::CREATED, written.object, &warnings)
}

fn written_response(
    ctx: &Ctx<'_>,
    code: StatusCode,
    object: Arc<Value>,
    warnings: &[String],
) -> Result<Response<Body>, Status> {
    written(ctx, code, object, warnings)
}

/// PUT one object.
pub(super) fn update(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let opts = options::write_options(ctx, OptionsKind::Update)?;
    let mut obj = options::decode_body(ctx, body)?;
    options::check_object(ctx, &mut obj)?;
    let url_name = ctx.info.name.as_str();
    let body_name = meta_str(&obj, "name");
    if body_name != url_name {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    let warnings = validate::check_fields(opts.validation, ctx.rt.group, ctx.rt.kind, &mut obj)
        .map_err(|status| decoding_error(ctx, status, false))?;
    let (group, plural) = (ctx.rt.group, ctx.rt.plural);
    let written = ctx
        .store
        .write(ctx.rt, ctx.namespace(), url_name, opts.dry_run, |current| {
            let current = current.ok_or_else(|| Status::not_found(group, plural, url_name))?;
            finish_update(ctx, current, obj, &opts, false)
        })?;
    written_response(ctx, StatusCode::OK, written.object, &warnings)
}

/// Kinds whose registry answers a delete with the deleted object rather
/// than a Success Status.
fn returns_deleted_object(group: &str, kind: &str) -> bool {
    group.is_empty()
        && matches!(
            kind,
            "Pod" | "Service" | "ServiceAccount" | "Namespace" | "PersistentVolume" | "PersistentVolumeClaim"
        )
}

/// `DeleteOptions` from the body (may be empty).
fn delete_options(ctx: &Ctx<'_>, body: &Bytes) -> Result<(WriteOptions, Value), Status> {
    let mut opts = options::write_options(ctx, OptionsKind::Delete)?;
    let body_options: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        crate::protobuf::json_or_protobuf(crate::protobuf::is_protobuf(ctx.headers), body)
            .map_err(|e| Status::bad_request(format!("decoding DeleteOptions: {e}")))?
    };
    let body_dry_run: Vec<String> = body_options["dryRun"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let policy = body_options["propagationPolicy"]
        .as_str()
        .or(ctx.query.get("propagationPolicy"));
    let mut errors = validate::dry_run_errors(&body_dry_run);
    errors.extend(validate::propagation_policy_errors(policy));
    validate::options("DeleteOptions", &errors)?;
    opts.dry_run |= !body_dry_run.is_empty();
    Ok((opts, body_options))
}

/// DELETE one object (DeleteOptions preconditions honoured).
pub(super) fn delete(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let (opts, body_options) = delete_options(ctx, body)?;
    let preconditions = &body_options["preconditions"];
    let name = ctx.info.name.as_str();
    let (group, plural) = (ctx.rt.group, ctx.rt.plural);
    let deleted = ctx
        .store
        .write(ctx.rt, ctx.namespace(), name, opts.dry_run, |current| {
            let current = current.ok_or_else(|| Status::not_found(group, plural, name))?;
            for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
                if let Some(wanted) = preconditions[field].as_str() {
                    let actual = meta_str(current, field);
                    if wanted != actual {
                        return Err(delete_precondition_failed(ctx, name, what, wanted, actual));
                    }
                }
            }
            Ok(Change::Delete)
        })?;
    if returns_deleted_object(ctx.rt.group, ctx.rt.kind) {
        return written(ctx, StatusCode::OK, deleted.object, &[]);
    }
    let status = Status::success(StatusDetails {
        name: name.into(),
        group: group.into(),
        kind: plural.into(),
        uid: meta_str(&deleted.object, "uid").into(),
        ..Default::default()
    });
    Ok(respond::json(StatusCode::OK, &status, ctx.headers))
}

/// DELETE a collection (selectors honoured): the list of deleted objects.
pub(super) fn delete_collection(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let (opts, _) = delete_options(ctx, body)?;
    let (items, metadata) = page(ctx)?;
    let mut deleted = Vec::with_capacity(items.len());
    for item in items {
        let (ns, name) = (meta_str(&item, "namespace"), meta_str(&item, "name"));
        // Gone meanwhile is fine: someone else deleted it.
        if let Ok(w) = ctx.store.write(ctx.rt, ns, name, opts.dry_run, |c| {
            c.map(|_| Change::Delete).ok_or_else(Status::path_not_found)
        }) {
            deleted.push(w.object);
        }
    }
    let body = super::read::list_body(ctx.rt, &deleted, metadata, Shape::Json);
    Ok(respond::json(StatusCode::OK, &body, ctx.headers))
}
