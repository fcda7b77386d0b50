//! Subresources: `status` (get, update, patch), `scale` of workloads (an
//! `autoscaling/v1` Scale) and `serviceaccounts/<name>/token` (a
//! TokenRequest with a signed-looking token).

use super::options::{self, OptionsKind};
use super::read::in_version;
use super::{method_not_allowed, patching, respond, write, Ctx};
use crate::body::Body;
use crate::status::Status;
use crate::store::{meta_str, now_timestamp, set_meta};
use base64::Engine;
use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{json, Value};

/// Serve `<resource>/<name>/<subresource>`.
pub(super) fn handle(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let sub = ctx.info.subresource.as_str();
    let served = ctx.rt.subresource(sub).ok_or_else(Status::path_not_found)?;
    if !served.verbs.contains(&ctx.info.verb.as_str()) {
        return Err(method_not_allowed());
    }
    match (sub, ctx.info.verb.as_str()) {
        ("status", "get") => super::read::get(ctx),
        ("status", "update") => write::update(ctx, body),
        ("status", "patch") => patching::patch(ctx, body),
        ("scale", "get") => get_scale(ctx),
        ("scale", "update" | "patch") => write_scale(ctx, body),
        ("token", "create") if ctx.rt.plural == "serviceaccounts" => token(ctx, body),
        _ => Err(method_not_allowed()),
    }
}

/// The Scale view of a workload.
fn scale_of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let selector = object["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": object["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {"replicas": object["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector},
    })
}

fn get_scale(ctx: &Ctx<'_>) -> Result<Response<Body>, Status> {
    let (rt, name) = (ctx.rt, ctx.info.name.as_str());
    let object = ctx
        .store
        .get(rt, ctx.namespace(), name)
        .ok_or_else(|| Status::not_found(rt.group, rt.plural, name))?;
    Ok(respond::json(StatusCode::OK, &scale_of(&object), ctx.headers))
}

/// PUT or PATCH a Scale: the workload's `spec.replicas` changes.
fn write_scale(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let patch = ctx.info.verb == "patch";
    let opts = options::write_options(
        ctx,
        if patch {
            OptionsKind::Patch(false)
        } else {
            OptionsKind::Update
        },
    )?;
    let sent: Value = crate::protobuf::json_or_protobuf(crate::protobuf::is_protobuf(ctx.headers), body)
        .map_err(|e| Status::bad_request(format!("error decoding Scale: {e}")))?;
    let (rt, name) = (ctx.rt, ctx.info.name.as_str());
    let written = ctx.store.write(rt, ctx.namespace(), name, opts.dry_run, |current| {
        let current = current.ok_or_else(|| Status::not_found(rt.group, rt.plural, name))?;
        let scale = if patch {
            super::patch_api::merge_patch(&scale_of(current), &sent)
        } else {
            sent.clone()
        };
        let wanted = meta_str(&scale, "resourceVersion");
        if !wanted.is_empty() && wanted != meta_str(current, "resourceVersion") {
            return Err(Status::conflict(rt.group, rt.plural, name));
        }
        let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
        let mut new = (**current).clone();
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("replicas".into(), json!(replicas));
        }
        set_meta(
            &mut new,
            "resourceVersion",
            current["metadata"]["resourceVersion"].clone(),
        );
        write::finish_update(ctx, current, new, &opts, false)
    })?;
    Ok(respond::json(
        StatusCode::OK,
        &scale_of(&in_version(rt, written.object)),
        ctx.headers,
    ))
}

/// POST serviceaccounts/<name>/token: a TokenRequest for an existing
/// ServiceAccount, answered (201) and never stored.
fn token(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    let name = ctx.info.name.as_str();
    let namespace = ctx.namespace();
    let account = ctx
        .store
        .get(ctx.rt, namespace, name)
        .ok_or_else(|| Status::not_found("", "serviceaccounts", name))?;
    let request: Value = if body.is_empty() {
        json!({})
    } else {
        crate::protobuf::json_or_protobuf(crate::protobuf::is_protobuf(ctx.headers), body)
            .map_err(|e| Status::bad_request(format!("error decoding TokenRequest: {e}")))?
    };
    let seconds = request["spec"]["expirationSeconds"].as_i64().unwrap_or(3600).max(600);
    let audiences = match request["spec"]["audiences"].as_array() {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!(["https://kubernetes.default.svc.cluster.local"]),
    };
    let now = chrono::Utc::now();
    let expires = now + chrono::Duration::seconds(seconds);
    let subject = format!("system:serviceaccount:{namespace}:{name}");
    let claims = json!({
        "aud": audiences, "exp": expires.timestamp(), "iat": now.timestamp(), "nbf": now.timestamp(),
        "iss": "https://kubernetes.default.svc.cluster.local", "sub": subject,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": account["metadata"]["uid"]}},
    });
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let signature: [u8; 32] = rand::random();
    let token = format!(
        "{}.{}.{}",
        b64(br#"{"alg":"RS256","kid":"portcullis-sim"}"#),
        b64(claims.to_string().as_bytes()),
        b64(&signature)
    );
    let response = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_timestamp()},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": request["spec"]["boundObjectRef"]},
        "status": {"token": token, "expirationTimestamp": expires.format("%Y-%m-%dT%H:%M:%SZ").to_string()},
    });
    Ok(respond::json(StatusCode::CREATED, &response, ctx.headers))
}
