//! The first call of a held write: dry run, current object, preview, store.

use super::{blocking, request_with, Buffered, HoldCtx};
use crate::approvals::preview::{self, Preview, PreviewError};
use crate::approvals::{HeldRequest, HeldState, HeldWrite, Precondition};
use crate::body::{self, Body};
use crate::gateway::classify::{classify, RequestInfo};
use crate::gateway::error::RequestError;
use crate::gateway::{Pipeline, Trace};
use crate::store::Inserted;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Response};
use serde_json::Value;

/// Headers of the original request that the dry run carries too.
const KEPT: &[header::HeaderName] = &[header::CONTENT_TYPE, header::USER_AGENT];

/// A request shown as asked: its JSON body, or any other body as its
/// text (a proxied form, say), so the person sees what will be sent.
fn asked(request: &Buffered) -> Value {
    if let Ok(value) = serde_json::from_slice(&request.body) {
        return value;
    }
    let content_type = request
        .parts
        .headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    serde_json::json!({
        "contentType": content_type,
        "body": String::from_utf8_lossy(&request.body),
    })
}

/// Is a write of `info` tried beforehand (a dry run), its YAML read as
/// JSON? Not a TokenRequest or a proxied request (see `intake`).
pub(super) fn is_tried(info: &RequestInfo) -> bool {
    !info.is_token_request() && !info.is_proxy_subresource()
}

/// `request` with a YAML body as its JSON (JSON is YAML, so the media
/// type stays); any other body as it is.
pub(super) fn as_json(request: Buffered) -> Buffered {
    let content_type = request.content_type().to_ascii_lowercase();
    if !content_type.contains("yaml") {
        return request;
    }
    match super::run::parse_body(&content_type, &request.body) {
        Ok(Some(value)) if !request.body.is_empty() => match serde_json::to_vec(&value) {
            Ok(json) => Buffered {
                parts: request.parts,
                body: Bytes::from(json),
            },
            Err(_) => request,
        },
        _ => request,
    }
}

/// The most held writes one requester has waiting for a decision (or to
/// run) at once.
pub const MAX_OPEN_HELD: usize = 20;

impl Pipeline {
    /// Dry-run the write; a rejection is the answer. Otherwise hold it and
    /// tell the caller where to approve.
    pub(super) async fn intake(
        &self,
        ctx: &HoldCtx<'_>,
        digest: String,
        request: Buffered,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        // Each held write keeps its request and preview (up to 256 KiB) for
        // the people who decide: one requester has only so many open.
        let (store, requester) = (self.approvals.store.clone(), ctx.identity.principal.to_string());
        if super::blocking(move || store.open_held_of(&requester)).await? >= MAX_OPEN_HELD {
            trace.row.held = false;
            return Err(RequestError::TooManyHeld { limit: MAX_OPEN_HELD });
        }
        // What cannot be tried beforehand: the person approves the request
        // as asked.
        let untried = if ctx.info.is_token_request() {
            // kube-apiserver issues a TokenRequest's token even in a dry
            // run, and the preview would keep it.
            Some("a TokenRequest cannot be tried beforehand (the cluster would issue its token): shown as asked")
        } else if ctx.info.is_proxy_subresource() {
            // The API server hands it on, `dryRun` and all, and what
            // answers there would run it: even the current object's GET
            // would reach it.
            Some("a request through a proxy cannot be tried beforehand (it would run where it goes): shown as asked")
        } else {
            None
        };
        // A YAML body is read here once, and its JSON is what is tried,
        // kept and run: the run adds its preconditions to JSON, and the
        // YAML tried as sent could read otherwise on the API server (YAML
        // 1.1's `yes`, `010`) than the JSON that then runs. What is not
        // tried goes on as sent (a proxied body is not the API server's).
        let request = match untried {
            None => as_json(request),
            Some(_) => request,
        };
        let (result, current, note, created) = if let Some(note) = untried {
            (asked(&request), None, note.to_string(), true)
        } else {
            let (mut parts, answer) = self.dry_run(ctx, &request).await?;
            if parts.status.is_client_error() || parts.status.is_server_error() {
                trace.row.dry_run = true;
                trace.row.held = false;
                // The dry run was read as one who sees values (to mark the
                // changed ones): its rejection goes back to this caller as
                // the redact layer would let it, a Status, or redacted, or
                // refused.
                let answer = if ctx.info.is_secrets() && !ctx.reveal_secrets {
                    crate::gateway::redact::hide_warnings(&mut parts.headers);
                    match crate::secrets::redact_json(&answer, crate::secrets::Target::Secrets) {
                        Ok(None) => answer,
                        Ok(Some(redacted)) => Bytes::from(redacted),
                        Err(error) => {
                            tracing::warn!(%error, "a held Secret write's dry-run rejection could not be redacted: refused");
                            return Err(RequestError::Unredactable {
                                cause: error.to_string(),
                            });
                        }
                    }
                } else {
                    answer
                };
                return Ok(Response::from_parts(parts, body::full(answer)));
            }
            let result: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
            let (current, note) = self.current_object(ctx).await?;
            (result, current, note, parts.status == http::StatusCode::CREATED)
        };
        let deleting = matches!(ctx.info.verb.as_str(), "delete" | "deletecollection");
        let precondition = match untried {
            // Nothing was tried: the run tries nothing either.
            Some(_) => Precondition::default(),
            None => precondition(ctx.info, current.as_ref(), &result, created),
        };
        // The run writes the precondition into the body: one that cannot
        // take it is refused now, before a person is asked, rather than
        // approved and then refused, or run unguarded.
        let query = request.parts.uri.query().unwrap_or_default();
        let (content_type, body) = (request.content_type(), request.body.clone());
        if let Err(error) = super::run::with_precondition(&precondition, content_type, query, body) {
            trace.row.held = false;
            return Err(error);
        }
        let write = preview::Write {
            secret: ctx.info.is_secrets(),
            deleting,
            subresource: !ctx.info.subresource.is_empty(),
        };
        let preview = preview::build(current, note, result, write).map_err(|e| {
            trace.row.held = false;
            let message = e.to_string();
            match e {
                PreviewError::TooLarge(_) => RequestError::PreviewTooLarge { message },
                // Fail closed: a preview that might show a value is never stored.
                PreviewError::Unredactable(_) | PreviewError::Leaked => {
                    tracing::warn!(error = %e, "a held Secret write's preview could not be redacted: refused");
                    RequestError::PreviewUnredactable { message }
                }
            }
        })?;
        let held = self.held_write(ctx, digest, &request, preview, precondition, trace);
        let sealed = match &self.approvals.key {
            Some(key) => key
                .seal(&held.id, &request.body)
                .map_err(|e| RequestError::Internal { cause: e.to_string() })?,
            None => return Err(RequestError::HoldUnavailable),
        };
        let (store, stored) = (self.approvals.store.clone(), held.clone());
        // Counted again with the insert: requests racing past the first
        // count (each dry run takes a while) cannot all be held.
        match blocking(move || store.insert_held_within(&stored, &sealed, MAX_OPEN_HELD)).await? {
            Inserted::New => {}
            // The same call, made at once beside this one, was held first:
            // both wait on that one.
            Inserted::Same(same) => return Err(self.answer(&same)),
            Inserted::AtLimit => {
                trace.row.held = false;
                return Err(RequestError::TooManyHeld { limit: MAX_OPEN_HELD });
            }
        }
        tracing::info!(held = %held.id, write = %crate::text::Escaped(&held.request.summary()), "write held for approval");
        Err(self.answer(&held))
    }

    /// The write sent with `dryRun=All`, read whole. Values are seen here
    /// only to mark the changed ones; the preview hides them all, and a
    /// rejection (a Status) carries none.
    pub(super) async fn dry_run(
        &self,
        ctx: &HoldCtx<'_>,
        request: &Buffered,
    ) -> Result<(http::response::Parts, Bytes), RequestError> {
        let query = request.parts.uri.query().unwrap_or_default();
        let dry_query = if query.is_empty() {
            "dryRun=All".to_string()
        } else {
            format!("{query}&dryRun=All")
        };
        let headers = kept_headers(&request.parts.headers, true);
        let dry = request_with(
            request.parts.method.clone(),
            &format!("{}?{dry_query}", ctx.path),
            &headers,
            super::dry::body(ctx.info, request),
        )?;
        self.send_read(ctx, ctx.info, dry, true).await
    }

    /// The object as it is now, read as the caller, or why there is none.
    async fn current_object(&self, ctx: &HoldCtx<'_>) -> Result<(Option<Value>, String), RequestError> {
        let info = ctx.info;
        if info.verb == "deletecollection" {
            let note =
                "it deletes the objects of the dry-run result, or nothing if its selector matches others when it runs";
            return Ok((None, note.into()));
        }
        if info.name.is_empty() || info.verb == "create" {
            return Ok((None, "a new object".into()));
        }
        let get_info = classify(&Method::GET, ctx.path, None);
        let accept = [(header::ACCEPT, HeaderValue::from_static("application/json"))];
        let get = request_with(Method::GET, ctx.path, &accept, Bytes::new())?;
        let (parts, body) = self.send_read(ctx, &get_info, get, true).await?;
        Ok(match parts.status.as_u16() {
            200 => (serde_json::from_slice(&body).ok(), String::new()),
            404 => (None, "it does not exist yet".into()),
            code => (None, format!("the asker cannot read it (the cluster answered {code})")),
        })
    }

    /// The held write, pending, expiring after the configured time.
    pub(super) fn held_write(
        &self,
        ctx: &HoldCtx<'_>,
        digest: String,
        request: &Buffered,
        preview: Preview,
        precondition: Precondition,
        trace: &Trace,
    ) -> HeldWrite {
        let now = chrono::Utc::now();
        let expiry = chrono::TimeDelta::from_std(self.approvals.expiry).unwrap_or(chrono::TimeDelta::minutes(15));
        HeldWrite {
            id: uuid::Uuid::now_v7().to_string(),
            digest,
            state: HeldState::Pending,
            request: held_request(ctx, request, preview, precondition, trace),
            created_at: now,
            expires_at: now + expiry,
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            executed_at: None,
            outcome: None,
            answered: false,
        }
    }
}

/// What is held: who asks, where, and exactly which request.
fn held_request(
    ctx: &HoldCtx<'_>,
    request: &Buffered,
    preview: Preview,
    precondition: Precondition,
    trace: &Trace,
) -> HeldRequest {
    let info = ctx.info;
    let content_type = request.content_type();
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    let agent = ctx.identity.agent.as_ref();
    HeldRequest {
        cluster: ctx.upstream.name.clone(),
        requester: ctx.identity.principal.to_string(),
        agent_id: agent.map(|a| a.id.clone()),
        delegated: agent.is_some_and(|a| a.grant_ids.is_some()),
        credential_id: ctx.identity.credential_id.clone(),
        tool: trace.row.tool.clone(),
        client: trace.row.client.clone(),
        method: request.parts.method.to_string(),
        path: ctx.path.to_string(),
        query: request.parts.uri.query().unwrap_or_default().to_string(),
        content_type: content_type.to_string(),
        verb: info.verb.clone(),
        api_group: info.api_group.clone(),
        resource,
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        preview,
        precondition,
    }
}

/// The original request's headers worth repeating; `json` asks for JSON
/// (the hold stage reads the answers itself).
pub(super) fn kept_headers(headers: &http::HeaderMap, json: bool) -> Vec<(header::HeaderName, HeaderValue)> {
    let mut kept: Vec<_> = KEPT
        .iter()
        .filter_map(|name| headers.get(name).map(|v| (name.clone(), v.clone())))
        .collect();
    if json {
        kept.push((header::ACCEPT, HeaderValue::from_static("application/json")));
    } else if let Some(accept) = headers.get(header::ACCEPT) {
        kept.push((header::ACCEPT, accept.clone()));
    }
    kept
}

/// The dry run's `resourceVersion` for apply, update and patch of an object
/// that exists; the object's `uid` for delete. `created`: the dry run
/// answered 201, so the write makes the object (no version to hold it to).
fn precondition(info: &RequestInfo, current: Option<&Value>, result: &Value, created: bool) -> Precondition {
    let meta = |v: &Value, f: &str| {
        v.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .map(String::from)
    };
    match (info.verb.as_str(), current) {
        ("update" | "patch", Some(current)) => Precondition {
            resource_version: meta(result, "resourceVersion").or_else(|| meta(current, "resourceVersion")),
            ..Precondition::default()
        },
        // The asker cannot read it: the dry run changed an object that
        // exists (200, not 201), and its answer carries that object's
        // version (a dry run stores nothing, so the version is the one it
        // was applied to); the run changes that version or nothing.
        ("update" | "patch", None) if !created => Precondition {
            resource_version: meta(result, "resourceVersion").filter(|rv| !rv.is_empty()),
            ..Precondition::default()
        },
        ("delete", Some(current)) => Precondition {
            uid: meta(current, "uid"),
            ..Precondition::default()
        },
        // The asker cannot read it: the dry run's answer names the object it
        // would delete (the object itself, or for most kinds a Success
        // Status with its uid in `details`), so the run deletes that one or
        // nothing.
        ("delete", None) => Precondition {
            uid: meta(result, "uid")
                .or_else(|| result.pointer("/details/uid").and_then(Value::as_str).map(String::from))
                .filter(|uid| !uid.is_empty()),
            ..Precondition::default()
        },
        ("deletecollection", _) => Precondition {
            uids: Some(listed_uids(result)),
            ..Precondition::default()
        },
        ("update" | "patch", None) => Precondition {
            creates: true,
            ..Precondition::default()
        },
        _ => Precondition::default(),
    }
}

/// The uids of a list's items (a deletecollection's dry run), sorted.
pub(super) fn listed_uids(list: &Value) -> Vec<String> {
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut uids: Vec<String> = items
        .iter()
        .filter_map(|item| item.pointer("/metadata/uid").and_then(Value::as_str))
        .map(String::from)
        .collect();
    uids.sort_unstable();
    uids
}

#[cfg(test)]
mod tests {
    use super::super::buffered;
    use super::*;
    use serde_json::json;

    fn object(resource_version: &str, uid: &str) -> Value {
        json!({"metadata": {"resourceVersion": resource_version, "uid": uid}})
    }

    /// The held write's YAML is read once, and its JSON tried, kept and
    /// run: the dry run and the run send the same document.
    #[test]
    fn a_yaml_body_is_tried_and_kept_as_the_json_it_reads_as() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  enabled: yes\n  mode: '010'\n";
        for content_type in ["application/apply-patch+yaml", "application/YAML"] {
            let read = as_json(buffered(
                Method::PATCH,
                "/api/v1/namespaces/shop/configmaps/flags",
                content_type,
                yaml.as_bytes(),
            ));
            let sent: Value = serde_json::from_slice(&read.body).unwrap();
            assert_eq!(sent["data"], json!({"enabled": "yes", "mode": "010"}), "{content_type}");
            assert_eq!(read.parts.headers[header::CONTENT_TYPE], content_type, "JSON is YAML");
        }
        for (content_type, body) in [
            ("application/merge-patch+json", "{\"data\": {\"a\": \"b\"}}"),
            ("application/vnd.kubernetes.protobuf", "k8s\u{0}"),
            ("application/apply-patch+yaml", ""),
        ] {
            assert_eq!(
                as_json(buffered(
                    Method::PATCH,
                    "/api/v1/namespaces/shop/configmaps/flags",
                    content_type,
                    body.as_bytes()
                ))
                .body,
                body.as_bytes(),
                "{content_type}"
            );
        }
    }

    #[test]
    fn an_update_is_held_to_the_resource_version_the_dry_run_saw() {
        let path = "/api/v1/namespaces/shop/configmaps/flags";
        let current = object("7", "u1");
        for method in [Method::PUT, Method::PATCH] {
            let info = classify(&method, path, None);
            let chosen = precondition(&info, Some(&current), &object("8", "u1"), false);
            assert_eq!(chosen.resource_version.as_deref(), Some("8"), "{method}");
            assert_eq!(chosen.uid, None);
            // A dry-run result without one falls back to the current object's.
            let chosen = precondition(&info, Some(&current), &json!({}), false);
            assert_eq!(chosen.resource_version.as_deref(), Some("7"), "{method}");
        }
    }

    #[test]
    fn a_delete_is_held_to_the_uid_of_the_object_that_was_shown() {
        let info = classify(&Method::DELETE, "/api/v1/namespaces/shop/configmaps/flags", None);
        let chosen = precondition(&info, Some(&object("7", "u1")), &object("8", "u2"), false);
        assert_eq!((chosen.uid.as_deref(), chosen.resource_version), (Some("u1"), None));
        // Not readable by the asker: the dry run's object.
        let chosen = precondition(&info, None, &object("8", "u2"), false);
        assert_eq!((chosen.uid.as_deref(), chosen.resource_version), (Some("u2"), None));
        let status = json!({"kind": "Status", "status": "Success", "details": {"name": "flags", "uid": "u3"}});
        assert_eq!(precondition(&info, None, &status, false).uid.as_deref(), Some("u3"));
        assert_eq!(
            precondition(&info, None, &json!({"kind": "Status"}), false),
            Precondition::default()
        );
    }

    #[test]
    fn an_update_of_an_object_the_asker_cannot_read_is_held_to_the_version_the_dry_run_changed() {
        let path = "/api/v1/namespaces/shop/configmaps/flags";
        for method in [Method::PUT, Method::PATCH] {
            let info = classify(&method, path, None);
            let chosen = precondition(&info, None, &object("8", "u1"), false);
            assert_eq!(chosen.resource_version.as_deref(), Some("8"), "{method}");
            assert_eq!(chosen.uid, None);
            assert_eq!(
                precondition(&info, None, &object("", "u1"), false),
                Precondition::default()
            );
        }
    }

    #[test]
    fn a_create_has_no_precondition_and_a_write_that_creates_must_create_again() {
        let create = classify(&Method::POST, "/api/v1/namespaces/shop/configmaps", None);
        assert_eq!(
            precondition(&create, Some(&object("7", "u1")), &object("8", "u2"), true),
            Precondition::default()
        );
        // An update or an apply the dry run answered 201: it creates, and
        // no version could hold it to that.
        for method in [Method::PUT, Method::PATCH] {
            let info = classify(&method, "/api/v1/namespaces/shop/configmaps/flags", None);
            let expected = Precondition {
                creates: true,
                ..Precondition::default()
            };
            assert_eq!(precondition(&info, None, &object("8", "u2"), true), expected);
        }
    }

    #[test]
    fn a_deletecollection_is_held_to_the_uids_its_dry_run_listed() {
        let info = classify(
            &Method::DELETE,
            "/api/v1/namespaces/shop/configmaps",
            Some("labelSelector=a"),
        );
        let listed =
            json!({"kind": "ConfigMapList", "items": [object("1", "u2"), object("2", "u1"), {"metadata": {}}]});
        let chosen = precondition(&info, None, &listed, false);
        assert_eq!(chosen.uids.unwrap(), ["u1", "u2"]);
        assert_eq!(
            (chosen.uid, chosen.resource_version, chosen.creates),
            (None, None, false)
        );
    }
}
