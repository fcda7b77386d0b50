//! The request path, as one type: [`Pipeline`]. The doors (`crate::doors`:
//! the raw Kubernetes API, MCP, the approval pages, the audit endpoint,
//! health) route and authenticate, then hand a cluster request to
//! [`Pipeline::through`], whose stages run in this order, each in a file
//! named after it:
//!
//! 1. [`classify`]: path and method → [`RequestInfo`](classify::RequestInfo),
//!    as kube-apiserver sees it.
//! 2. [`policy`]: grants in effect → the groups the cluster is sent.
//! 3. [`hold`]: a write whose caller's policy asks for a person's approval
//!    is dry-run and held, or run once approved, here.
//! 4. [`commit`]: a write (or a Secret reveal) is committed to the audit
//!    before the cluster sees it.
//! 5. [`forward`] (with [`upstream`] and [`limits`]): strip client identity
//!    headers, impersonate, send with the ServiceAccount token and our
//!    Audit-ID, stream the answer back under the size cap. The stages that
//!    wrap both the request and its answer there (impersonation, the size
//!    cap, redaction) are tower [`layers`] around the send.
//! 6. respond ([`trace`]): a refusal becomes its Status; one log line per
//!    request, and its audit row (`crate::audit::record`), written when the
//!    response ends. Every log line about a request carries its audit id.
//!
//! The raw Kubernetes API door calls these stages, and respond, as a
//! `tower::Service` ([`service::PipelineService`]), handing over what it
//! learnt as a typed request extension. An MCP tool's cluster requests
//! enter through [`Pipeline::call`] ([`call`]) with the identity the `/mcp`
//! door authenticated.

mod bindings;
pub mod call;
pub mod classify;
mod commit;
pub mod error;

/// `check`'s answer within two seconds, else none (a slow store ends no
/// stream, and holds no sweep up).
async fn within_two_seconds(check: impl std::future::Future<Output = Option<bool>>) -> Option<bool> {
    tokio::time::timeout(std::time::Duration::from_secs(2), check)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
pub(crate) mod fixture;
pub mod forward;
pub mod headers;
pub mod hold;
mod keepalive;
pub mod layers;
pub mod limits;
pub mod metrics;
pub mod policy;
pub mod query;
pub mod redact;
pub mod router;
pub mod service;
pub mod trace;
pub mod upstream;
pub mod upstream_uri;

use crate::audit::{Audit, AuditError};
use crate::body::{self, Body};
use crate::config::{Config, Limits};
use crate::store::Store;
use http::{Request, Response};
use policy::Policy;
use std::collections::HashMap;
use std::sync::Arc;
pub use trace::Trace;
use upstream::{Upstream, UpstreamError};

/// A cluster request from an MCP tool has this long at most (a raw request
/// has the configured request timeout): an agent waiting on a tool should
/// hear back well within a model's patience.
const TOOL_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The request path: everything its stages need, built once at start. The
/// doors each hold an `Arc` of it; it holds nothing of theirs.
#[derive(Debug)]
pub struct Pipeline {
    /// Found by each request's cluster name: not SipHash, since the names
    /// are the config's and a miss is refused.
    clusters: HashMap<String, Arc<Upstream>, foldhash::fast::RandomState>,
    policy: Policy,
    limits: Limits,
    /// `limits` with the shorter timeout of a tool's cluster request.
    tool_limits: Limits,
    audit: Audit,
    /// Held writes: the key, the wait, the store (`hold`, `/approvals`).
    approvals: Arc<crate::approvals::Approvals>,
    /// Prometheus metrics.
    pub metrics: metrics::Metrics,
}

/// Why the pipeline could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A cluster's client could not be built.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The audit could not start.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// `[approvals] key_file` is set but unusable.
    #[error(transparent)]
    Approvals(#[from] crate::approvals::seal::SealError),
    /// `[oidc]` is set but unusable (its secret file, its CA bundle).
    #[error(transparent)]
    SignIn(#[from] crate::signin::SetupError),
    /// `[oauth]` is unusable (its client metadata CA bundle), or a CI
    /// issuer's.
    #[error("[oauth]: {0}")]
    OAuth(String),
}

/// What the stages after authentication need about one request, whichever
/// door it came in by.
pub struct Stages<'a> {
    /// The cluster.
    pub upstream: &'a Arc<Upstream>,
    /// Kubernetes path, raw.
    pub path: &'a str,
    /// Who sends it, as the door authenticated.
    pub identity: &'a crate::identity::Identity,
    /// The request's audit id.
    pub audit_id: uuid::Uuid,
    /// A raw request's limits, or a tool's.
    pub limits: &'a Limits,
    /// See [`call::ToolCall::reveal_secret`].
    pub reveal_secret: bool,
}

impl Pipeline {
    /// Build the pipeline: one upstream client per cluster, the policy, the
    /// audit writer and the held writes. Must be called inside a Tokio
    /// runtime.
    pub fn new(config: &Config, store: Store) -> Result<Pipeline, BuildError> {
        let clusters = config
            .clusters
            .iter()
            .map(|c| Upstream::new(c).map(|u| (c.name.clone(), u)))
            .collect::<Result<_, _>>()?;
        let metrics = metrics::Metrics::default();
        let audit = Audit::start(&config.audit, &config.data_dir, &store, metrics.audit_writer())?;
        let approvals = Arc::new(crate::approvals::Approvals::new(config, store.clone())?);
        let mut tool_limits = config.limits.clone();
        tool_limits.request_timeout = tool_limits.request_timeout.min(TOOL_REQUEST_TIMEOUT);
        let roles = crate::identity::roles::all(config);
        let policy = Policy::new(store, config.protected_namespaces.iter().cloned(), &roles)
            .keeping_grants_for(config.store.cache_ttl);
        Ok(Pipeline {
            clusters,
            policy,
            limits: config.limits.clone(),
            tool_limits,
            audit,
            approvals,
            metrics,
        })
    }

    /// The audit (to close it at shutdown, or query it).
    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    /// The held writes (for the approval pages).
    pub fn approvals(&self) -> &Arc<crate::approvals::Approvals> {
        &self.approvals
    }

    /// The grants stage (its cache is dropped when another replica changes
    /// grants).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The clock grants are judged by (tests move it ahead).
    pub fn grant_clock(&self) -> &policy::GrantClock {
        self.policy.clock()
    }

    /// The clusters, for periodic refresh.
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.clusters.values()
    }

    /// The cluster named `name`, or why it is not served.
    pub fn upstream(&self, name: &str) -> Result<&Arc<Upstream>, error::RequestError> {
        self.clusters.get(name).ok_or_else(|| call::unknown_cluster(name))
    }

    /// End every open long-running request (watch, followed log, exec,
    /// attach, port-forward) whose token no longer authenticates (revoked,
    /// expired, its person, bot or agent disabled) or one of whose grants
    /// that could authorize it is no longer in effect: the cluster checked
    /// it once, when it opened. Each token, and each credential's groups,
    /// is asked once, a few at a time, each within two seconds; what the
    /// store cannot answer in time ends nothing. Run every second, so a
    /// revocation ends a stream within the caches' life (`[store]
    /// cache_ttl`, two seconds by default) and a few.
    pub async fn end_revoked_streams(&self, authenticator: &crate::identity::authenticate::Authenticator) {
        use futures_util::StreamExt;
        const AT_ONCE: usize = 16;
        for upstream in self.upstreams() {
            let streams = upstream.live_streams();
            if streams.is_empty() {
                continue;
            }
            let mut tokens: Vec<[u8; 32]> = streams.iter().filter_map(|s| s.token).collect();
            tokens.sort_unstable();
            tokens.dedup();
            let works: HashMap<[u8; 32], Option<bool>, foldhash::fast::RandomState> =
                futures_util::stream::iter(tokens)
                    .map(|token| async move { (token, within_two_seconds(authenticator.still_works(token)).await) })
                    .buffer_unordered(AT_ONCE)
                    .collect()
                    .await;
            // Many streams share a credential and its groups (an
            // informer's watches): each pair is asked once.
            let mut first: HashMap<(&str, &[String]), usize, foldhash::fast::RandomState> = HashMap::default();
            for (at, stream) in streams.iter().enumerate() {
                first
                    .entry((stream.identity.credential_id.as_str(), stream.groups.as_slice()))
                    .or_insert(at);
            }
            let asked: Vec<Arc<upstream::LiveStream>> = first.values().map(|&at| streams[at].clone()).collect();
            let policy = &self.policy;
            let cluster = upstream.name.as_str();
            let answers: Vec<(Arc<upstream::LiveStream>, Option<bool>)> = futures_util::stream::iter(asked)
                .map(|stream| async move {
                    let still =
                        within_two_seconds(policy.still_granted(&stream.identity, cluster, &stream.groups)).await;
                    (stream, still)
                })
                .buffer_unordered(AT_ONCE)
                .collect()
                .await;
            let granted: HashMap<(&str, &[String]), Option<bool>, foldhash::fast::RandomState> = answers
                .iter()
                .map(|(stream, still)| {
                    (
                        (stream.identity.credential_id.as_str(), stream.groups.as_slice()),
                        *still,
                    )
                })
                .collect();
            for stream in &streams {
                let token_gone = stream.token.is_some_and(|t| works.get(&t) == Some(&Some(false)));
                let pair = (stream.identity.credential_id.as_str(), stream.groups.as_slice());
                if token_gone || granted.get(&pair) == Some(&Some(false)) {
                    stream.end();
                }
            }
        }
    }

    /// A raw request's size and time limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The stages after authentication, for a request from a door or from
    /// an MCP tool ([`call`]), in the order a request meets them. A request
    /// whose client goes away before it is answered (its future dropped)
    /// is recorded all the same ([`Unanswered`]).
    pub async fn through<B>(
        &self,
        stages: Stages<'_>,
        request: Request<B>,
        trace: &mut Trace,
    ) -> Result<Response<Body>, error::RequestError>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
        B::Error: Into<body::BoxError>,
    {
        let mut unanswered = self.unanswered(trace);
        let answered = self.stages(stages, request, unanswered.trace()).await;
        unanswered.answered();
        answered
    }

    /// A guard over `trace` while its request is not answered: dropped
    /// before [`Unanswered::answered`], it writes the request's row.
    pub fn unanswered<'a>(&'a self, trace: &'a mut Trace) -> Unanswered<'a> {
        Unanswered {
            trace,
            writer: self.audit.writer(),
            armed: true,
        }
    }

    async fn stages<B>(
        &self,
        stages: Stages<'_>,
        request: Request<B>,
        trace: &mut Trace,
    ) -> Result<Response<Body>, error::RequestError>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
        B::Error: Into<body::BoxError>,
    {
        let info = classify::stage(&stages, &request, trace);
        let judged = self.judge(&stages, &info, trace).await?;
        // Only writes can be held; the hold stage's future is boxed so that
        // reads do not carry its size.
        let request = if info.is_write() {
            redact::refuse_blind_read(&info, judged.reveal_secrets, request.headers())?;
            let ctx = hold::HoldCtx::new(&stages, &info, &judged);
            match Box::pin(self.hold(ctx, request, trace)).await? {
                hold::HoldStep::Pass(request) => request,
                hold::HoldStep::Done(response) => return Ok(response),
            }
        } else {
            request
        };
        self.commit(&info, judged.reveal_one, trace).await?;
        let mut call = forward::Call::new(&stages, &info, judged, &self.metrics, trace.sent.clone());
        call.recorder = Some(self.audit.writer());
        if forward::is_streaming(&info, request.uri().query()) {
            let cluster = &stages.upstream.name;
            let applying = self.policy.groups_for(stages.identity, cluster, &info.namespace).await;
            // Only those it was sent with (none into a protected namespace).
            call.stream_groups = applying.map(|mut groups| {
                groups.retain(|group| call.groups.contains(group));
                groups
            });
        }
        forward::forward(call, request).await
    }
}

/// A request not answered yet, at a door or in the pipeline's stages. If
/// its future is dropped first (the client reset its stream or closed its
/// connection before any answer), its row is written here, with no code
/// and the reason `ClientWentAway`: a write may have reached the cluster
/// or not, a read may have, a refusal was not heard; either way the
/// request is on record, as every other. A trace lent to the stages
/// ([`Trace::lent`]) is theirs to write.
pub struct Unanswered<'a> {
    trace: &'a mut Trace,
    writer: &'a crate::audit::writer::AuditWriter,
    armed: bool,
}

impl Unanswered<'_> {
    /// The guarded trace, for the stages to fill in.
    pub fn trace(&mut self) -> &mut Trace {
        self.trace
    }

    /// The request is answered: its row is written with its answer.
    pub fn answered(mut self) {
        self.armed = false;
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if !self.armed || !self.trace.audited {
            return;
        }
        let mut row = (*self.trace.row).clone();
        row.bytes_in = self.trace.sent.load(std::sync::atomic::Ordering::Relaxed);
        // The code, if the cluster's answer was known already (a held
        // write that ran), else none.
        row.reason = "ClientWentAway".into();
        row.finish(chrono::Utc::now());
        self.writer.submit(row);
    }
}

#[cfg(test)]
mod tests {
    use super::error::RequestError;
    use super::fixture::{held_agent, person, Fixture};
    use super::*;
    use crate::audit::row::AuditRow;
    use crate::identity::Identity;
    use http::Method;

    /// `method path` by `identity` through the stages after authentication.
    async fn through(
        f: &Fixture,
        identity: &Identity,
        method: Method,
        path: &str,
    ) -> (Result<Response<Body>, RequestError>, Trace) {
        let upstream = f.pipeline.upstream("c").unwrap();
        let audit_id = uuid::Uuid::now_v7();
        let mut trace = Trace::new(AuditRow::arrived(audit_id, &method, path, None));
        let stages = Stages {
            upstream,
            path,
            identity,
            audit_id,
            limits: f.pipeline.limits(),
            reveal_secret: false,
        };
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body::full(r#"{"kind":"ConfigMap"}"#))
            .unwrap();
        let result = f.pipeline.through(stages, request, &mut trace).await;
        (result, trace)
    }

    #[tokio::test]
    async fn a_write_the_hold_stage_refuses_never_reaches_the_cluster() {
        // No [approvals] key_file: a write that must wait cannot be held.
        let f = Fixture::new("").await;
        let path = "/api/v1/namespaces/shop/configmaps";
        let (result, trace) = through(&f, &held_agent(), Method::POST, path).await;
        assert!(matches!(result, Err(RequestError::WritesNotHeld)), "{result:?}");
        assert!(!trace.row.held);
        assert_eq!(f.connections(), 0);
    }

    #[tokio::test]
    async fn a_delete_with_a_body_is_recorded_as_the_real_write_the_server_makes_of_it_whatever_its_query() {
        let f = Fixture::new("").await;
        let path = "/api/v1/namespaces/shop/configmaps/a?dryRun=All";
        let (_, trace) = through(&f, &person(), Method::DELETE, path).await;
        assert!(
            !trace.row.dry_run,
            "kube-apiserver reads a delete's options from its body"
        );
        let (_, trace) = through(
            &f,
            &person(),
            Method::POST,
            "/api/v1/namespaces/shop/configmaps?dryRun=All",
        )
        .await;
        assert!(trace.row.dry_run, "a create's query is what the server reads");
    }

    #[tokio::test]
    async fn a_read_passes_every_stage_and_is_sent_to_the_cluster() {
        let f = Fixture::new("").await;
        let (result, _) = through(&f, &person(), Method::GET, "/api/v1/namespaces/shop/pods").await;
        // The fixture's cluster closes every connection: reaching it is
        // what fails the request.
        assert!(
            matches!(
                result,
                Err(RequestError::UpstreamUnavailable { .. } | RequestError::UpstreamFailed { .. })
            ),
            "{result:?}"
        );
        assert!(f.connections() >= 1);
    }

    #[tokio::test]
    async fn a_cluster_not_served_is_named_in_the_refusal() {
        let f = Fixture::new("").await;
        let refused = f.pipeline.upstream("other").unwrap_err();
        assert!(matches!(refused, RequestError::UnknownCluster { ref cluster } if cluster == "other"));
    }
}
