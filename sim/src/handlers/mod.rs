//! The verbs on stored resources: get, list, watch, create, update, patch,
//! delete, deletecollection, and the `status`, `scale` and
//! `serviceaccounts/token` subresources.
//!
//! The server has already authenticated, authorized and classified the
//! request; [`handle`] finds the resource type, reads the body (at most
//! 3 MiB, else 413) and calls the verb's function. Each returns the answer or
//! a Status, and the Status becomes the response at this one edge.
//!
//! Implemented: `labelSelector` and `fieldSelector`; `limit`/`continue`
//! paging with `remainingItemCount`; watch with bookmarks,
//! `sendInitialEvents`, resume from a resourceVersion and 410; `dryRun=All`;
//! `fieldManager` and managedFields; `fieldValidation`; merge, JSON,
//! strategic merge and apply patches (through `sim::patch`); preconditions
//! on update and delete; Tables and PartialObjectMetadata; gzip; 406 for
//! protobuf-only clients; a Deployment, ReplicaSet or StatefulSet reports all
//! replicas ready, a Pod is Running, a Service gets a cluster IP.
//!
//! # Known differences from kube-apiserver
//!
//! - JSON (and YAML request bodies) only: a protobuf-only `Accept` gets 406
//!   and a protobuf body 415.
//! - A `continue` token pages through the current state, not a snapshot of
//!   the first page's resourceVersion, and never expires.
//! - `resourceVersion`/`resourceVersionMatch` on a list are accepted and
//!   ignored: lists are always current.
//! - A watch with a selector filters events by the object's new state only:
//!   an object leaving the selection arrives as MODIFIED (filtered out), not
//!   as DELETED. Each Table watch event carries its own column definitions.
//! - Deletes are immediate; `gracePeriodSeconds` and `propagationPolicy` are
//!   accepted and ignored. Pods, Services, ServiceAccounts, Namespaces,
//!   PersistentVolume(Claim)s answer with the deleted object, others with a
//!   Success Status, as their kube-apiserver registries do.

// Errors are `Status` by value, the contract between the simulator's
// parts; the error path is cold, so boxing would buy nothing.
#![allow(clippy::result_large_err)]

mod controllers;
mod options;
mod patch_api;
mod patching;
pub mod query;
mod read;
pub mod respond;
pub mod selectors;
mod subresources;
mod watch;
mod write;

use crate::body::{Body, BoxError};
use crate::registry::{self, ResourceType};
use crate::request_info::RequestInfo;
use crate::status::Status;
use crate::store::Store;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Limited};
use query::Query;
use std::sync::Arc;
use std::time::Duration;

pub use controllers::settle;

/// Largest request body accepted, as kube-apiserver's default.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Tunables of the verb handlers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK.
    pub bookmark_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            bookmark_interval: Duration::from_secs(5),
        }
    }
}

/// Everything a verb needs about its request.
pub(crate) struct Ctx<'a> {
    store: &'a Arc<Store>,
    settings: &'a Settings,
    rt: &'static ResourceType,
    info: &'a RequestInfo,
    query: Query,
    headers: &'a HeaderMap,
}

impl Ctx<'_> {
    /// The namespace objects of this request live in (empty when
    /// cluster-scoped).
    fn namespace(&self) -> &str {
        if self.rt.namespaced {
            &self.info.namespace
        } else {
            ""
        }
    }
}

/// Serve a resource request on a stored type.
pub async fn handle<B>(store: &Arc<Store>, settings: &Settings, req: Request<B>, info: &RequestInfo) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let rt = match resource_type(info) {
        Ok(rt) => rt,
        Err(status) => return respond::error(status),
    };
    let (parts, body) = req.into_parts();
    let body = match read_body(body).await {
        Ok(body) => body,
        Err(status) => return respond::error(status),
    };
    let ctx = Ctx {
        store,
        settings,
        rt,
        info,
        query: Query::parse(parts.uri.query()),
        headers: &parts.headers,
    };
    dispatch(&ctx, &body).unwrap_or_else(respond::error)
}

fn dispatch(ctx: &Ctx<'_>, body: &Bytes) -> Result<Response<Body>, Status> {
    match (ctx.info.subresource.as_str(), ctx.info.verb.as_str()) {
        ("", "get") => read::get(ctx),
        ("", "list") => read::list(ctx),
        ("", "watch") => watch::watch(ctx),
        ("", "create") => write::create(ctx, body),
        ("", "update") => write::update(ctx, body),
        ("", "patch") => patching::patch(ctx, body),
        ("", "delete") => write::delete(ctx, body),
        ("", "deletecollection") => write::delete_collection(ctx, body),
        _ => subresources::handle(ctx, body),
    }
}

/// 405 MethodNotAllowed, kube-apiserver's wording (and its empty details).
pub(crate) fn method_not_allowed() -> Status {
    Status::failure(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
    .with_details(crate::status::StatusDetails::default())
}

/// The stored type the request is about, checking verb and scope.
fn resource_type(info: &RequestInfo) -> Result<&'static ResourceType, Status> {
    let rt = registry::find(&info.api_group, &info.api_version, &info.resource)
        .filter(|rt| rt.stored)
        .ok_or_else(Status::path_not_found)?;
    let is_namespace = rt.group.is_empty() && rt.plural == "namespaces";
    if !rt.namespaced && !info.namespace.is_empty() && !is_namespace {
        return Err(Status::path_not_found());
    }
    if !info.subresource.is_empty() {
        return Ok(rt);
    }
    // No route answers a create on a name or an update or patch on a
    // collection: kube-apiserver's mux says 405 before any handler runs.
    let named_verb = matches!(info.verb.as_str(), "update" | "patch");
    if (info.verb == "create" && !info.name.is_empty()) || (named_verb && info.name.is_empty()) {
        return Err(method_not_allowed());
    }
    let collection_verb = matches!(info.verb.as_str(), "list" | "watch" | "deletecollection");
    if rt.namespaced && info.namespace.is_empty() && !collection_verb {
        return Err(if info.name.is_empty() {
            method_not_allowed()
        } else {
            Status::path_not_found()
        });
    }
    if !rt.verbs.contains(&info.verb.as_str()) {
        return Err(method_not_allowed());
    }
    Ok(rt)
}

async fn read_body<B>(body: B) -> Result<Bytes, Status>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Status::too_large(format!(
            "the request body is larger than the server accepts ({MAX_BODY} bytes)"
        ))),
        Err(e) => Err(Status::bad_request(format!("reading the request body: {e}"))),
    }
}

#[cfg(test)]
mod tests;
