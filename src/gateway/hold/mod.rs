//! Hold: a write whose caller's policy asks for a person's approval is not
//! forwarded. It is dry-run, held with a preview, and run once a person
//! approves — for every door (kubectl's raw traffic and MCP tools alike),
//! since this stage sits in `Pipeline::through` after policy and before the
//! audit's commit and forward.
//!
//! - `intake`: the first call: dry run (a rejection is the answer), the
//!   current object, the preview, the held write stored with its body
//!   sealed.
//! - `run`: a repeated call (or one naming the approval): wait for the
//!   decision, then run the stored request once, with preconditions.
//! - `answer`: what the caller is told, as a `RequestError` carrying a
//!   [`HeldNotice`] or an [`ApprovalRefusal`]: a Status for kubectl, a tool
//!   error for MCP.
//!
//! Not held: reads; requests already carrying `dryRun=All`; exec, attach
//! and port-forward; the review resources, which store nothing; an agent's
//! write covered by an access request of its session that was approved
//! with a writing role.

pub(super) mod answer;
mod dry;
mod intake;
mod protobuf;
mod run;

pub use answer::{ApprovalRefusal, ApprovedRun, HeldNotice};
pub use intake::MAX_OPEN_HELD;

use super::classify::RequestInfo;
use super::error::RequestError;
use super::upstream::Upstream;
use super::{forward, Pipeline, Trace};
use crate::approvals::HeldWrite;
use crate::body::{self, Body};
use crate::config::Limits;
use crate::identity::{Identity, PrincipalKind};
use bytes::Bytes;
use http::{Request, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Put into a tool's request: the approval id (or MCP request state) the
/// call repeats with. A tool's call without it does not wait.
#[derive(Debug, Clone)]
pub struct ApprovalRef {
    /// The held write's id.
    pub id: String,
    /// Wait for the decision (not after a declined URL elicitation).
    pub wait: bool,
}

/// What the hold stage needs about one request.
pub(super) struct HoldCtx<'a> {
    pub upstream: &'a Arc<Upstream>,
    pub path: &'a str,
    pub identity: &'a Identity,
    pub info: &'a RequestInfo,
    pub groups: &'a [String],
    pub reveal_secrets: bool,
    pub audit_id: uuid::Uuid,
    pub limits: &'a Limits,
}

impl<'a> HoldCtx<'a> {
    /// The hold stage's view of a request the policy stage has judged.
    pub fn new(stages: &super::Stages<'a>, info: &'a RequestInfo, judged: &'a super::policy::Judged) -> Self {
        HoldCtx {
            upstream: stages.upstream,
            path: stages.path,
            identity: stages.identity,
            info,
            groups: &judged.groups,
            reveal_secrets: judged.reveal_secrets,
            audit_id: stages.audit_id,
            limits: stages.limits,
        }
    }
}

/// The hold stage's outcome.
pub(super) enum HoldStep<B> {
    /// Not held: forward as usual.
    Pass(Request<B>),
    /// Answered here (held, waiting, decided, or run after approval).
    Done(Response<Body>),
}

/// A request read whole, as the hold stage works on it.
pub(super) struct Buffered {
    pub parts: http::request::Parts,
    pub body: Bytes,
}

impl Buffered {
    /// The body's media type as sent (empty when none, or not text).
    pub fn content_type(&self) -> &str {
        self.parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

impl Pipeline {
    /// The hold stage: pass the request on, or answer it here.
    pub(super) async fn hold<B>(
        &self,
        ctx: HoldCtx<'_>,
        request: Request<B>,
        trace: &mut Trace,
    ) -> Result<HoldStep<B>, RequestError>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<body::BoxError>,
    {
        let bodiless = dry::bodiless(&request);
        // The row says what the API server will do: it ignores a delete's
        // `?dryRun` when the delete has a body, and runs it for real.
        trace.row.dry_run = dry::server_dry_run(ctx.info, bodiless);
        if !self.needs_approval(&ctx, bodiless).await? {
            return Ok(HoldStep::Pass(request));
        }
        if self.approvals.key.is_none() {
            return Err(RequestError::WritesNotHeld);
        }
        let (parts, incoming) = request.into_parts();
        // Boxed first: the body's error type is then exactly `BoxError`.
        let incoming: Body = body::boxed(incoming);
        let body = read_within(incoming, ctx.limits).await?;
        let request = Buffered { parts, body };
        refuse_unreadable_body(&request)?;
        crate::gateway::redact::refuse_marker_written(ctx.info, ctx.reveal_secrets, &request.body)?;
        // Refused before a person is asked, as it would be once approved.
        crate::gateway::bindings::refuse_identities(ctx.info, &request.parts.headers, &request.body)?;
        trace.row.held = true;
        let digest = digest(&ctx, &request);
        let approval = request.parts.extensions.get::<ApprovalRef>().cloned();
        let existing = match self.existing(&ctx, &digest, approval.as_ref(), &request).await? {
            Ok(existing) => existing,
            Err(refusal) => {
                // Nothing runs: an approval covers only the write approved.
                trace.row.held = false;
                return Err(RequestError::Approval(refusal));
            }
        };
        // kubectl repeats the same command; a tool repeats with the approval id.
        let waits = approval.as_ref().map_or(trace.row.tool.is_empty(), |a| a.wait);
        let response = match existing {
            Some(held) => self.resume(&ctx, held, waits, request, trace).await?,
            None => self.intake(&ctx, digest, request, trace).await?,
        };
        Ok(HoldStep::Done(response))
    }

    /// Does this request wait for a person? (`bodiless`: it has no body.)
    async fn needs_approval(&self, ctx: &HoldCtx<'_>, bodiless: bool) -> Result<bool, RequestError> {
        let info = ctx.info;
        let dry_run = dry::server_dry_run(info, bodiless);
        if !info.is_write() || info.is_stream_subresource() || info.is_review() || dry_run {
            return Ok(false);
        }
        let identity = ctx.identity;
        let agent_asks = identity.agent.as_ref().is_some_and(|a| a.writes_need_approval);
        let store = self.approvals.store.clone();
        let principal = identity.principal.clone();
        let bot_asks =
            principal.kind == PrincipalKind::Bot && blocking(move || store.writes_need_approval(&principal)).await?;
        if !(agent_asks || bot_asks) {
            return Ok(false);
        }
        Ok(!self.elevated(ctx).await?)
    }

    /// Is the agent's write covered by an access request of its session,
    /// approved with a writing role that allows this very write, whose
    /// grant is in effect? (The role, not only its scope: an approved
    /// `developer` must not let a Secret's or a RoleBinding's write through.)
    async fn elevated(&self, ctx: &HoldCtx<'_>) -> Result<bool, RequestError> {
        let Some(agent) = ctx.identity.agent.clone() else {
            return Ok(false);
        };
        let store = self.approvals.store.clone();
        let info = ctx.info;
        let (cluster, namespace) = (ctx.upstream.name.clone(), info.namespace.clone());
        let (group, verb, name) = (info.api_group.clone(), info.verb.clone(), info.name.clone());
        let resource = match info.subresource.as_str() {
            "" => info.resource.clone(),
            sub => format!("{}/{sub}", info.resource),
        };
        let writing = self.approvals.writing_roles.clone();
        blocking(move || {
            let now = chrono::Utc::now();
            let grants = store.list_grants()?;
            Ok(store.list_access_requests()?.into_iter().any(|r| {
                r.agent_id.as_deref() == Some(agent.id.as_str())
                    && r.state == crate::access::AccessState::Approved
                    && r.cluster == cluster
                    && writing
                        .get(&r.role)
                        .is_some_and(|role| role.allows_named(&group, &resource, &verb, Some(&name)))
                    && (r.namespace.is_none() || r.namespace.as_deref() == Some(namespace.as_str()))
                    && grants
                        .iter()
                        .any(|g| Some(&g.id) == r.grant_id.as_ref() && g.in_effect(now))
            }))
        })
        .await
    }

    /// The held write this call repeats: the one it names, or the newest
    /// one of the same intent whose end nobody was told yet. A named one
    /// must be the caller's, on this cluster, and the very write this call
    /// asks for (method, path, query, media type and body): the stored
    /// request is what runs, so a call asking for another write is refused
    /// rather than answered with the approved one's run.
    async fn existing(
        &self,
        ctx: &HoldCtx<'_>,
        digest: &str,
        approval: Option<&ApprovalRef>,
        request: &Buffered,
    ) -> Result<Result<Option<HeldWrite>, ApprovalRefusal>, RequestError> {
        let store = self.approvals.store.clone();
        let Some(approval) = approval.cloned() else {
            let digest = digest.to_string();
            return blocking(move || store.held_by_digest(&digest)).await.map(Ok);
        };
        let id = approval.id.clone();
        let found = blocking(move || store.held(&id)).await?;
        // Only the same requester (and agent) may run what was approved.
        let agent = ctx.identity.agent.as_ref().map(|a| a.id.as_str());
        let held = match found {
            Some(held)
                if held.request.requester == ctx.identity.principal.to_string()
                    && held.request.agent_id.as_deref() == agent
                    && held.request.cluster == ctx.upstream.name =>
            {
                held
            }
            _ => return Ok(Err(ApprovalRefusal::Unknown { id: approval.id })),
        };
        let differs = differences(ctx, request, digest, &held);
        if differs.is_empty() {
            Ok(Ok(Some(held)))
        } else {
            Ok(Err(ApprovalRefusal::Mismatch {
                id: held.id.clone(),
                summary: held.request.summary(),
                differs,
            }))
        }
    }

    /// Send one request of the hold stage's own (dry run, current object,
    /// the approved write) through the forward stage.
    async fn send(
        &self,
        ctx: &HoldCtx<'_>,
        info: &RequestInfo,
        request: Request<Body>,
        reveal_secrets: bool,
    ) -> Result<Response<Body>, RequestError> {
        let call = forward::Call {
            upstream: ctx.upstream,
            path: ctx.path,
            info,
            identity: ctx.identity,
            groups: ctx.groups.to_vec(),
            reveal_secrets,
            audit_id: ctx.audit_id,
            limits: ctx.limits,
            metrics: &self.metrics,
            sent: Arc::default(),
            narrowed_by: self.policy.outside_protected(info),
            stream_groups: None,
            recorder: Some(self.audit.writer()),
            for_write: true,
        };
        forward::forward(call, request).await
    }

    /// [`Self::send`], read whole under the response cap.
    async fn send_read(
        &self,
        ctx: &HoldCtx<'_>,
        info: &RequestInfo,
        request: Request<Body>,
        reveal_secrets: bool,
    ) -> Result<(http::response::Parts, Bytes), RequestError> {
        let response = self.send(ctx, info, request, reveal_secrets).await?;
        let (parts, body) = response.into_parts();
        let limit = usize::try_from(ctx.limits.response_bytes).unwrap_or(usize::MAX);
        let bytes = read_limited(body, limit).await.ok_or(RequestError::AnswerCutShort)?;
        Ok((parts, bytes))
    }
}

/// The intent: who, where, method, path, query, media type and body. The
/// same first call gets the same digest, so the same held write.
fn digest(ctx: &HoldCtx<'_>, request: &Buffered) -> String {
    let parts = &request.parts;
    let content_type = request.content_type();
    let agent = ctx.identity.agent.as_ref().map(|a| a.id.as_str()).unwrap_or_default();
    let mut hash = Sha256::new();
    for field in [
        ctx.upstream.name.as_str(),
        &ctx.identity.principal.to_string(),
        agent,
        parts.method.as_str(),
        ctx.path,
        parts.uri.query().unwrap_or_default(),
        content_type,
    ] {
        hash.update((field.len() as u64).to_be_bytes());
        hash.update(field.as_bytes());
    }
    match restart_without_time(parts, &request.body) {
        Some(restart) => hash.update(Sha256::digest(restart)),
        None => hash.update(Sha256::digest(&request.body)),
    }
    format!("{:x}", hash.finalize())
}

/// The time a rollout restart stamps in its patch (kubectl's, and the
/// `rollout_restart` tool's).
const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// A rollout restart's patch with its time left out: the same restart
/// asked again a second later is the same intent, so the held write it
/// waits on, and the approved body (with its own time) is what runs.
/// `None` for any other body.
fn restart_without_time(parts: &http::request::Parts, body: &[u8]) -> Option<&'static [u8]> {
    if parts.method != http::Method::PATCH || body.len() > 256 {
        return None;
    }
    let patch: serde_json::Value = serde_json::from_slice(body).ok()?;
    let only = |value: &serde_json::Value, key: &str| {
        let object = value.as_object().filter(|o| o.len() == 1)?;
        object.get(key).cloned()
    };
    let annotations = ["spec", "template", "metadata", "annotations"]
        .iter()
        .try_fold(patch, |value, key| only(&value, key))?;
    only(&annotations, RESTARTED_AT)?.as_str()?;
    Some(b"{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":\"\"}}}}}")
}

/// What of this call differs from the held write it names: `method`,
/// `path`, `query`, `content type`, then `body` (compared by the digest,
/// which covers everything else; a rollout restart's time is not).
fn differences(ctx: &HoldCtx<'_>, request: &Buffered, digest: &str, held: &HeldWrite) -> Vec<&'static str> {
    let parts = &request.parts;
    let stored = &held.request;
    let content_type = request.content_type();
    let mut differs = Vec::new();
    for (field, now, then) in [
        ("method", parts.method.as_str(), stored.method.as_str()),
        ("path", ctx.path, stored.path.as_str()),
        ("query", parts.uri.query().unwrap_or_default(), stored.query.as_str()),
        ("content type", content_type, stored.content_type.as_str()),
    ] {
        if now != then {
            differs.push(field);
        }
    }
    if differs.is_empty() && digest != held.digest {
        differs.push("body");
    }
    differs
}

/// Run blocking store work off the async threads; a failure is a 503.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::store::StoreError> + Send + 'static,
) -> Result<T, RequestError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| RequestError::StoreUnavailable)?
        .map_err(|error| {
            tracing::error!(%error, "held writes store failed");
            RequestError::StoreUnavailable
        })
}

/// A `Request<Body>` with `method`, `uri` and headers.
fn request_with(
    method: http::Method,
    uri: &str,
    headers: &[(http::HeaderName, http::HeaderValue)],
    body: Bytes,
) -> Result<Request<Body>, RequestError> {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.body(body::full(body)).map_err(|_| RequestError::Unrebuildable)
}

/// portcullis parses a held write's body when it runs it (to add its
/// preconditions): one it would refuse then (YAML anchors or aliases, too
/// deep) is refused now, before the dry run and before a person is asked.
fn refuse_unreadable_body(request: &Buffered) -> Result<(), RequestError> {
    run::parse_body(request.content_type(), &request.body)
        .map(drop)
        .map_err(RequestError::UnreadableHeldBody)
}

/// A request's body read whole (to check or hold it before it is sent),
/// within the request body limit and the request timeout: a client that
/// sends all but its last byte must not hold its buffer for ever.
pub(super) async fn read_within(body: Body, limits: &Limits) -> Result<Bytes, RequestError> {
    let limit = usize::try_from(limits.request_body_bytes).unwrap_or(usize::MAX);
    match crate::body::read_whole(body, limit, limits.request_timeout).await {
        Ok(bytes) => Ok(bytes),
        // A body broken off is answered as before: as one not taken whole.
        Err(crate::body::ReadError::TooLarge | crate::body::ReadError::Cut) => Err(RequestError::RequestTooLarge {
            limit: limits.request_body_bytes,
        }),
        Err(crate::body::ReadError::TimedOut) => Err(RequestError::BodyTimedOut {
            timeout: limits.request_timeout,
        }),
    }
}

/// Read `body` whole; `None` past `limit` bytes or on an error.
pub(super) async fn read_limited(body: Body, limit: usize) -> Option<Bytes> {
    crate::body::read_limited(body, limit).await.ok()
}

/// A buffered `method` on `uri` with `body`: the tests' request.
#[cfg(test)]
pub(super) fn buffered(method: http::Method, uri: &str, content_type: &str, body: impl AsRef<[u8]>) -> Buffered {
    let (parts, ()) = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(())
        .unwrap()
        .into_parts();
    Buffered {
        parts,
        body: Bytes::copy_from_slice(body.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::preview::Preview;
    use crate::approvals::Precondition;
    use crate::audit::row::AuditRow;
    use crate::gateway::classify::classify;
    use crate::gateway::fixture::{held_agent, person, Fixture};
    use http::Method;

    /// The hold stage's view of `method path?query` by `identity`.
    fn ctx<'a>(f: &'a Fixture, identity: &'a Identity, info: &'a RequestInfo, path: &'a str) -> HoldCtx<'a> {
        HoldCtx {
            upstream: f.pipeline.upstream("c").unwrap(),
            path,
            identity,
            info,
            groups: &[],
            reveal_secrets: false,
            audit_id: uuid::Uuid::now_v7(),
            limits: f.pipeline.limits(),
        }
    }

    #[tokio::test]
    async fn only_real_writes_of_an_agent_whose_writes_need_approval_wait_for_a_person() {
        let f = Fixture::new("").await;
        let (agent, ana) = (held_agent(), person());
        let path = "/api/v1/namespaces/shop/configmaps";
        let needs = |method: Method, path: &'static str, query: Option<&'static str>, identity| {
            let f = &f;
            async move {
                let info = classify(&method, path, query);
                f.pipeline
                    .needs_approval(&ctx(f, identity, &info, path), true)
                    .await
                    .unwrap()
            }
        };
        assert!(needs(Method::POST, path, None, &agent).await);
        assert!(!needs(Method::POST, path, Some("dryRun=All"), &agent).await);
        assert!(!needs(Method::GET, path, None, &agent).await);
        assert!(!needs(Method::POST, "/api/v1/namespaces/shop/pods/web/exec", None, &agent).await);
        assert!(!needs(Method::POST, path, None, &ana).await);
    }

    #[tokio::test]
    async fn a_call_differs_from_its_held_write_only_in_what_it_changed() {
        let f = Fixture::new("").await;
        let identity = held_agent();
        let path = "/api/v1/namespaces/shop/configmaps/flags";
        let info = classify(&Method::PUT, path, None);
        let ctx = ctx(&f, &identity, &info, path);
        let asked = buffered(Method::PUT, path, "application/json", r#"{"data":{"a":"1"}}"#);
        let held_digest = digest(&ctx, &asked);
        let trace = Trace::new(AuditRow::arrived(ctx.audit_id, &Method::PUT, path, None));
        let held = f.pipeline.held_write(
            &ctx,
            held_digest.clone(),
            &asked,
            Preview::default(),
            Precondition::default(),
            &trace,
        );
        let none: Vec<&str> = Vec::new();
        assert_eq!(differences(&ctx, &asked, &held_digest, &held), none);

        let other = buffered(
            Method::PATCH,
            &format!("{path}?fieldManager=x"),
            "application/merge-patch+json",
            "{}",
        );
        let other_digest = digest(&ctx, &other);
        assert_eq!(
            differences(&ctx, &other, &other_digest, &held),
            ["method", "query", "content type"]
        );

        let body = buffered(Method::PUT, path, "application/json", r#"{"data":{"a":"2"}}"#);
        let body_digest = digest(&ctx, &body);
        assert_ne!(body_digest, held_digest);
        assert_eq!(differences(&ctx, &body, &body_digest, &held), ["body"]);
    }

    /// A body that stops short of its end is given up at the request
    /// timeout, not waited on for ever with its buffer held.
    #[tokio::test(start_paused = true)]
    async fn a_body_read_whole_that_stalls_is_refused_at_the_request_timeout() {
        let first = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(http_body::Frame::data(
            Bytes::from_static(b"{\"kind\":"),
        ))]);
        let stalled = futures_util::StreamExt::chain(first, futures_util::stream::pending());
        let limits = Limits::default();
        let body = body::boxed(http_body_util::StreamBody::new(stalled));
        let started = tokio::time::Instant::now();
        let refused = read_within(body, &limits).await.unwrap_err();
        assert!(matches!(refused, RequestError::BodyTimedOut { timeout } if timeout == limits.request_timeout));
        assert_eq!(started.elapsed(), limits.request_timeout);
        assert_eq!(refused.status().code, 408);
        let whole = body::boxed(http_body_util::Full::new(Bytes::from_static(b"{}")));
        assert_eq!(&read_within(whole, &limits).await.unwrap()[..], b"{}");
    }

    /// kubectl rollout restart (and the tool) stamp the time in the patch:
    /// asked again a second later, it is the same write, waiting on the
    /// same approval. Any other change to the patch is another write.
    #[tokio::test]
    async fn a_rollout_restart_is_the_same_write_whatever_time_it_stamps() {
        let f = Fixture::new("").await;
        let identity = held_agent();
        let path = "/apis/apps/v1/namespaces/shop/deployments/web";
        let info = classify(&Method::PATCH, path, None);
        let ctx = ctx(&f, &identity, &info, path);
        let restart = |body: &str| {
            let request = buffered(Method::PATCH, path, "application/strategic-merge-patch+json", body);
            digest(&ctx, &request)
        };
        let at = |time: &str| {
            format!(
                r#"{{"spec":{{"template":{{"metadata":{{"annotations":{{"kubectl.kubernetes.io/restartedAt":"{time}"}}}}}}}}}}"#
            )
        };
        let first = restart(&at("2026-12-07T13:00:00Z"));
        assert_eq!(restart(&at("2026-12-07T13:00:01+01:00")), first);
        for other in [
            r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"x","a":"b"}}}}}"#,
            r#"{"spec":{"replicas":0,"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"x"}}}}}"#,
            r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":1}}}}}"#,
            r#"{"spec":{"template":{"metadata":{"annotations":{"other":"x"}}}}}"#,
        ] {
            assert_ne!(restart(other), first, "{other}");
        }
        let put = buffered(Method::PUT, path, "application/json", at("2026-12-07T13:00:00Z"));
        assert_ne!(digest(&ctx, &put), first, "only a patch");
    }
}
