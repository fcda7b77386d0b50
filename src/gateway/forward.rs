//! Forward: send the request to the cluster as portcullis, impersonating the
//! caller, and relay the answer as it streams.
//!
//! Ordinary requests get the request timeout and the response cap; the API
//! server's long-running requests (watch, exec, attach, port-forward, proxy,
//! log follow) get neither, because both would cut a healthy stream: only
//! their answer's head must come within the request timeout.
//! Upgrades (exec, attach, port-forward) are spliced only after the cluster
//! answers 101; any other answer is relayed unchanged, so kubectl's fallback
//! from WebSocket to SPDY works and the upstream connection is never reused
//! for a half-upgraded exchange (CVE-2018-1002105).
//!
//! The send is the innermost service of one `ServiceBuilder` in
//! [`forward`]; impersonation (with the answer's timing), the size cap and
//! redaction wrap it as layers ([`super::layers`]).

use super::classify::RequestInfo;
use super::error::RequestError;
use super::layers::cap::CapLayer;
use super::layers::forward::ForwardLayer;
use super::layers::redact::RedactLayer;
use super::metrics::Metrics;
use super::upstream::{StreamSlot, Upstream};
use super::{headers, limits};
use crate::audit::record::{CountedIo, StreamEnd, StreamStats};
use crate::body::{self, Body};
use crate::config::Limits;
use crate::identity::Identity;
use http::{header, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tower::{ServiceBuilder, ServiceExt};

/// The extra key carrying the credential id to the cluster's audit log.
pub const CREDENTIAL_EXTRA: &str = "portcullis.dev/credential-id";
/// The extra key carrying an agent's session to the cluster's audit log.
pub const AGENT_EXTRA: &str = "portcullis.dev/agent-session";

/// Everything the forward stage needs about one request.
pub struct Call<'a> {
    /// The cluster.
    pub upstream: &'a Arc<Upstream>,
    /// Kubernetes path, raw.
    pub path: &'a str,
    /// What the request is.
    pub info: &'a RequestInfo,
    /// Who sends it.
    pub identity: &'a Identity,
    /// Groups of the grants in effect.
    pub groups: Vec<String>,
    /// Policy lets Secret values reach the caller (else they are redacted).
    pub reveal_secrets: bool,
    /// Sent as `Audit-ID`.
    pub audit_id: uuid::Uuid,
    /// Size and time limits.
    pub limits: &'a Limits,
    /// Where to count.
    pub metrics: &'a Metrics,
    /// Request body bytes sent upstream, for the audit row.
    pub sent: Arc<AtomicU64>,
    /// Field selector terms the query is narrowed by.
    pub narrowed_by: Option<Arc<str>>,
    /// For a long-running request, the groups whose grants could authorize
    /// it (see [`super::policy::Policy::groups_for`]); else all it is sent.
    pub stream_groups: Option<Vec<String>>,
    /// Where the request is recorded as forwarded, just before it leaves.
    pub recorder: Option<&'a crate::audit::writer::AuditWriter>,
    /// Sent by the hold stage for a write (its dry run, its read of the
    /// object): one of several requests under the write's audit id.
    pub for_write: bool,
}

impl<'a> Call<'a> {
    /// The forward stage's view of a request the policy stage has judged;
    /// `sent` counts its body bytes for the audit row.
    pub fn new(
        stages: &super::Stages<'a>,
        info: &'a RequestInfo,
        judged: super::policy::Judged,
        metrics: &'a Metrics,
        sent: Arc<AtomicU64>,
    ) -> Self {
        Call {
            upstream: stages.upstream,
            path: stages.path,
            info,
            identity: stages.identity,
            groups: judged.groups,
            reveal_secrets: judged.reveal_secrets,
            audit_id: stages.audit_id,
            limits: stages.limits,
            metrics,
            sent,
            narrowed_by: judged.narrowed_by,
            stream_groups: None,
            recorder: None,
            for_write: false,
        }
    }
}

/// Upgrade protocols portcullis relays.
const UPGRADE_PROTOCOLS: &[&str] = &["websocket", "spdy/3.1"];

/// Forward `request` as described by `call`. The body is the listener's, or
/// an MCP tool's.
pub async fn forward<B>(call: Call<'_>, mut request: Request<B>) -> Result<Response<Body>, RequestError>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<crate::body::BoxError>,
{
    let upgrade = checked_upgrade(&call, &request)?;
    let streaming = upgrade.is_some() || is_streaming(call.info, request.uri().query());
    let slot = if streaming {
        let most = call.limits.streams_per_caller;
        // Before the headers are stripped: the token it came with is
        // checked again while it stays open.
        let token =
            crate::identity::authenticate::bearer_token(request.headers()).map(crate::identity::credential::digest);
        Some(
            call.upstream
                .open_stream(
                    call.identity,
                    most,
                    token,
                    call.stream_groups.as_ref().unwrap_or(&call.groups),
                )
                .map_err(|most| RequestError::TooManyStreams { most })?,
        )
    } else {
        None
    };
    let client_upgrade = upgrade.map(|_| hyper::upgrade::on(&mut request));
    // Before portcullis sets any header of its own (Accept in the redact
    // layer, identity in the forward layer), so that a header the client's
    // Connection names can never remove one of them.
    headers::strip_request(request.headers_mut(), upgrade.is_some());
    let upgrade = upgrade.is_some();
    let call = &call;
    // The request meets these top to bottom; the answer, bottom to top:
    // sent, timed, capped, then redacted.
    let stack = ServiceBuilder::new()
        .layer(RedactLayer::new(
            call.info,
            call.identity,
            call.reveal_secrets,
            call.limits.response_bytes,
        ))
        .layer(CapLayer::new(
            call.limits,
            streaming,
            upgrade,
            call.metrics.open_streams.clone(),
        ))
        .layer(ForwardLayer::new(call))
        .service_fn(move |request: Request<_>| send(call, request.map(body::boxed), upgrade, streaming));
    let response = stack.oneshot(request).await?;
    let Some(slot) = slot else {
        return Ok(response);
    };
    if let Some(client_upgrade) = client_upgrade {
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            return Ok(splice(
                client_upgrade,
                response,
                call.metrics.open_streams.clone(),
                slot,
            ));
        }
    }
    // The caller's place is held as long as the stream's body, which ends
    // early if the stream is ended.
    Ok(response.map(|body| body::boxed(body::Guarded::new(body, slot))))
}

/// The upgrade asked for (only exec, attach and port-forward may), with a
/// request body announced over the limit refused first.
fn checked_upgrade<B>(call: &Call<'_>, request: &Request<B>) -> Result<Option<&'static str>, RequestError> {
    let upgrade = upgrade_protocol(request)?;
    if upgrade.is_some() && !call.info.is_stream_subresource() {
        return Err(RequestError::UpgradeNotStream);
    }
    let limit = call.limits.request_body_bytes;
    if content_length(request.headers()).is_some_and(|len| len > limit) {
        return Err(body_too_large(limit));
    }
    Ok(upgrade)
}

/// Send upstream: the answer to an ordinary request within the request
/// timeout, and that of an upgrade or a long-running request (but a
/// proxied one's) as far as its head: a cluster that takes the request and
/// never answers would otherwise hold the caller's stream place for ever.
/// The body of a stream then has no timeout.
async fn send(
    call: &Call<'_>,
    request: Request<Body>,
    upgrade: bool,
    streaming: bool,
) -> Result<Response<Incoming>, RequestError> {
    let request = if super::redact::guards_markers(call.info, call.reveal_secrets) || super::bindings::guards(call.info)
    {
        read_and_checked(call, request).await?
    } else {
        request
    };
    record(call, upgrade || streaming);
    let within = call.limits.request_timeout;
    let sent = if upgrade {
        tokio::time::timeout(within, call.upstream.send_upgrade(request)).await
    } else if streaming && (call.info.subresource == "proxy" || call.info.verb == "proxy") {
        // A service's own answer, which may be slow to start as it likes
        // (a long poll): the API server bounds it no more than this.
        Ok(call.upstream.send_streaming(request).await)
    } else if streaming {
        tokio::time::timeout(within, call.upstream.send_streaming(request)).await
    } else {
        tokio::time::timeout(within, call.upstream.send(request)).await
    };
    sent.map_err(|_| timeout(call.upstream, call.limits))?
        .map_err(|e| send_error(call, &e))
}

/// On record that the request leaves now, as whom (batched with the rows):
/// the API server's event for it is then never taken for a bypass, even
/// while a watch or exec stays open with no row, and a request refused
/// before this point is never taken for one portcullis sent. A write's
/// hold stage may send a dry run and a read under its audit id first
/// (kind `write`); anything else is the one request under its id.
fn record(call: &Call<'_>, stream: bool) {
    use crate::audit::forwarded::Forwarded;
    let Some(recorder) = call.recorder else { return };
    let mut text = uuid::Uuid::encode_buffer();
    let id = call.audit_id.hyphenated().encode_lower(&mut text);
    let record = if (call.info.is_write() || call.for_write) && !stream {
        Forwarded::write(id, &call.upstream.name)
    } else {
        Forwarded::request(id, &call.upstream.name)
    };
    let principal = &call.identity.principal;
    recorder.forwarded(record.as_principal(principal.kind.as_str(), &principal.name));
}

/// A Secret write from a caller who sees values hidden, or a binding
/// write, read whole and refused if it carries a marker back (see
/// [`super::redact::refuse_marker_written`]) or names one of portcullis's
/// identities ([`super::bindings`]).
async fn read_and_checked(call: &Call<'_>, request: Request<Body>) -> Result<Request<Body>, RequestError> {
    let (parts, incoming) = request.into_parts();
    let bytes = super::hold::read_within(incoming, call.limits).await?;
    super::redact::refuse_marker_written(call.info, call.reveal_secrets, &bytes)?;
    super::bindings::refuse_identities(call.info, &parts.headers, &bytes)?;
    Ok(Request::from_parts(parts, body::full(bytes)))
}

/// The upgrade protocol asked for, if any; an unknown one is refused.
fn upgrade_protocol<B>(request: &Request<B>) -> Result<Option<&'static str>, RequestError> {
    let Some(value) = request.headers().get(header::UPGRADE) else {
        return Ok(None);
    };
    let wanted = value.to_str().unwrap_or("").trim().to_ascii_lowercase();
    UPGRADE_PROTOCOLS
        .iter()
        .find(|p| **p == wanted)
        .map(|p| Some(*p))
        .ok_or(RequestError::UpgradeProtocol { wanted })
}

/// Long-running in the API server's sense, except that a log that does not
/// follow is an ordinary bounded response.
pub(super) fn is_streaming(info: &RequestInfo, query: Option<&str>) -> bool {
    if info.subresource == "log" {
        return super::query::Query::parse(query).flag("follow");
    }
    info.is_long_running()
}

/// Answer 101 to the client and splice the two upgraded connections. The
/// response carries a [`StreamEnd`] that resolves, with the bytes each way,
/// when the stream closes (for its audit row).
fn splice<B>(
    client: hyper::upgrade::OnUpgrade,
    mut response: Response<B>,
    open: Gauge,
    slot: StreamSlot,
) -> Response<Body> {
    let upstream = hyper::upgrade::on(&mut response);
    let (ended, end) = StreamEnd::new();
    let relay = async move {
        let (client, upstream) = tokio::join!(client, upstream);
        let (Ok(client), Ok(upstream)) = (client, upstream) else {
            tracing::warn!("an upgraded stream could not be established");
            return;
        };
        open.inc();
        // Counted as read, so that a stream cut by either side still reports
        // its bytes (the copies only report them on success).
        let (mut client, mut upstream) = (
            CountedIo::new(TokioIo::new(client)),
            CountedIo::new(TokioIo::new(upstream)),
        );
        let ended_early = std::future::poll_fn(|cx| {
            if body::Guard::poll_ended(&slot, cx) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        });
        // An ended stream drops both connections: the shell or the
        // forwarded port closes.
        let result = tokio::select! {
            result = relay(&mut client, &mut upstream) => result,
            () = ended_early => Ok(()),
        };
        open.dec();
        if let Err(error) = result {
            tracing::debug!(%error, "upgraded stream ended with an error");
        }
        let _ = ended.send(StreamStats {
            up: client.read,
            down: upstream.read,
        });
        drop(slot);
    };
    tokio::spawn(crate::logs::in_current_request(relay));
    let (mut parts, _) = response.into_parts();
    headers::strip_response(&mut parts.headers, true);
    parts.extensions.insert(end);
    Response::from_parts(parts, body::empty())
}

/// Copy each way until either side ends, then close both, as kube-apiserver's
/// own upgrade proxy does. Waiting for the other side instead (a half-close)
/// would let a silent upstream keep a stream whose client is gone, and with
/// it the caller's stream slot and connection place; the streaming protocols
/// (WebSocket, SPDY) end their channels inside the stream, never by a
/// half-closed TCP connection.
async fn relay<C, U>(client: &mut C, upstream: &mut U) -> std::io::Result<()>
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut upstream_read, mut upstream_write) = tokio::io::split(upstream);
    let up = async {
        tokio::io::copy(&mut client_read, &mut upstream_write).await?;
        upstream_write.shutdown().await
    };
    let down = async {
        tokio::io::copy(&mut upstream_read, &mut client_write).await?;
        client_write.shutdown().await
    };
    tokio::select! {
        ended = up => ended,
        ended = down => ended,
    }
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

fn body_too_large(limit: u64) -> RequestError {
    RequestError::RequestTooLarge { limit }
}

fn timeout(upstream: &Upstream, limits: &Limits) -> RequestError {
    RequestError::UpstreamTimeout {
        cluster: upstream.name.clone(),
        timeout: limits.request_timeout,
    }
}

fn send_error(call: &Call<'_>, error: &super::upstream::SendError) -> RequestError {
    let limit = call.limits.request_body_bytes;
    // The limit's own error does not always come back: the upstream client
    // may report the stream it reset, or the connection it closed, instead
    // (a 502 for a chunked body over the limit). What was read says it.
    if limits::is_body_limit(error) || call.sent.load(std::sync::atomic::Ordering::Relaxed) > limit {
        return body_too_large(limit);
    }
    let upstream = call.upstream;
    tracing::warn!(cluster = %upstream.name, error = %crate::text::with_causes(error), "upstream request failed");
    let cluster = upstream.name.clone();
    if error.is_connect() {
        return RequestError::UpstreamUnavailable { cluster };
    }
    RequestError::UpstreamFailed { cluster }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::classify::classify;
    use crate::gateway::fixture::{person, Fixture};
    use http::Method;

    fn upgrading(path: &str, protocol: &str) -> Request<Body> {
        Request::builder()
            .uri(path)
            .header(header::UPGRADE, protocol)
            .body(body::empty())
            .unwrap()
    }

    #[test]
    fn an_upgrade_to_another_protocol_than_websocket_or_spdy_is_refused() {
        let path = "/api/v1/namespaces/shop/pods/web/exec";
        let refused = upgrade_protocol(&upgrading(path, "h2c")).unwrap_err();
        assert!(matches!(refused, RequestError::UpgradeProtocol { ref wanted } if wanted == "h2c"));
        assert_eq!(
            upgrade_protocol(&upgrading(path, " WebSocket ")).unwrap(),
            Some("websocket")
        );
        assert_eq!(
            upgrade_protocol(&upgrading(path, "SPDY/3.1")).unwrap(),
            Some("spdy/3.1")
        );
        let plain = Request::builder().uri(path).body(body::empty()).unwrap();
        assert_eq!(upgrade_protocol(&plain).unwrap(), None);
    }

    #[test]
    fn watches_exec_and_followed_logs_stream_and_other_requests_do_not() {
        let get = |path: &str, query: Option<&str>| classify(&Method::GET, path, query);
        let pods = "/api/v1/namespaces/shop/pods";
        let log = "/api/v1/namespaces/shop/pods/web/log";
        assert!(is_streaming(&get(pods, Some("watch=true")), Some("watch=true")));
        assert!(is_streaming(&get(log, Some("follow=true")), Some("follow=true")));
        let exec = classify(&Method::POST, "/api/v1/namespaces/shop/pods/web/exec", None);
        assert!(is_streaming(&exec, None));
        assert!(!is_streaming(&get(log, None), None));
        assert!(!is_streaming(&get(pods, None), None));
    }

    #[tokio::test]
    async fn upgrades_are_only_for_exec_attach_and_port_forward_and_oversized_bodies_are_refused_first() {
        let f = Fixture::new("request_body_bytes = 10").await;
        let identity = person();
        let exec = classify(&Method::GET, "/api/v1/namespaces/shop/pods/web/exec", None);
        let pods = classify(&Method::GET, "/api/v1/namespaces/shop/pods", None);
        let call = |info| call(&f, info, &identity);
        let request = upgrading("/api/v1/namespaces/shop/pods", "websocket");
        assert!(matches!(
            checked_upgrade(&call(&pods), &request),
            Err(RequestError::UpgradeNotStream)
        ));
        let request = upgrading("/api/v1/namespaces/shop/pods/web/exec", "websocket");
        assert_eq!(checked_upgrade(&call(&exec), &request).unwrap(), Some("websocket"));
        let mut request = upgrading("/api/v1/namespaces/shop/pods/web/exec", "websocket");
        request
            .headers_mut()
            .insert(header::CONTENT_LENGTH, "11".parse().unwrap());
        assert!(matches!(
            checked_upgrade(&call(&exec), &request),
            Err(RequestError::RequestTooLarge { limit: 10 })
        ));
    }

    #[tokio::test]
    async fn a_request_body_announced_over_the_limit_is_refused_before_anything_is_sent() {
        let f = Fixture::new("request_body_bytes = 10").await;
        let identity = person();
        let info = classify(&Method::POST, "/api/v1/namespaces/shop/configmaps", None);
        let request = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/namespaces/shop/configmaps")
            .header(header::CONTENT_LENGTH, "11")
            .body(body::full("01234567890"))
            .unwrap();
        let refused = forward(call(&f, &info, &identity), request).await.unwrap_err();
        assert!(
            matches!(refused, RequestError::RequestTooLarge { limit: 10 }),
            "{refused:?}"
        );
        assert_eq!(f.connections(), 0);
    }

    fn call<'a>(f: &'a Fixture, info: &'a RequestInfo, identity: &'a Identity) -> Call<'a> {
        Call {
            upstream: f.pipeline.upstream("c").unwrap(),
            path: "/api/v1/namespaces/shop/configmaps",
            info,
            identity,
            groups: Vec::new(),
            reveal_secrets: false,
            audit_id: uuid::Uuid::now_v7(),
            limits: f.pipeline.limits(),
            metrics: &f.pipeline.metrics,
            sent: Arc::default(),
            narrowed_by: None,
            stream_groups: None,
            recorder: None,
            for_write: false,
        }
    }
}
