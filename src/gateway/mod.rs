//! The request path. Every request meets these stages in this order; each
//! file is named after its stage.
//!
//! 1. [`router`]: which door (`/clusters/<name>/…`, health, metrics); refuse
//!    ambiguous paths before anything else reads them.
//! 2. [`headers`]: refuse a client's `Impersonate-*` headers before
//!    authenticating, so no identity claim is ever weighed.
//! 3. authenticate ([`crate::identity::authenticate`]): bearer token →
//!    [`Identity`](crate::identity::Identity).
//! 4. [`classify`]: path and method → [`RequestInfo`](classify::RequestInfo), as kube-apiserver sees
//!    it.
//! 5. [`policy`]: grants in effect → the groups the cluster is sent.
//!    Then [`hold`]: a write whose caller's policy asks for a person's
//!    approval is dry-run and held, or run once approved, here.
//! 6. [`forward`] (with [`upstream`] and [`limits`]): strip client identity
//!    headers, impersonate, send with the ServiceAccount token and our
//!    Audit-ID, stream the answer back under the size cap.
//! 7. One log line per request, and its audit row (`crate::audit::record`),
//!    written when the response ends; a write's row is committed before it
//!    is forwarded. Every log line about a request carries its audit id.

pub mod call;
pub mod classify;
pub mod forward;
pub mod headers;
pub mod hold;
pub mod limits;
pub mod metrics;
pub mod policy;
pub mod query;
pub mod redact;
pub mod router;
pub mod upstream;

use crate::audit::row::{bounded, AuditRow};
use crate::audit::{Audit, AuditError};
use crate::body::{self, Body};
use crate::config::{Config, Limits};
use crate::identity::authenticate::{AuthError, Authenticator};
use crate::status::Status;
use crate::store::Store;
use http::{HeaderValue, Request, Response};
use hyper::body::Incoming;
use ipnet::IpNet;
use policy::{Decision, Policy};
use router::Route;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use upstream::{Upstream, UpstreamError};

/// The challenge sent with every 401.
const CHALLENGE: &str = "Bearer realm=\"portcullis\"";

/// A cluster request from an MCP tool has this long at most (a raw request
/// has the configured request timeout): an agent waiting on a tool should
/// hear back well within a model's patience.
const TOOL_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Everything a request needs, built once at start.
#[derive(Debug)]
pub struct Gateway {
    clusters: HashMap<String, Arc<Upstream>>,
    authenticator: Authenticator,
    policy: Policy,
    limits: Limits,
    /// `limits` with the shorter timeout of a tool's cluster request.
    tool_limits: Limits,
    trusted_proxies: Vec<IpNet>,
    audit: Audit,
    /// Held writes: the key, the wait, the store (`hold`, `/approvals`).
    approvals: Arc<crate::approvals::Approvals>,
    /// `/mcp`: the MCP server for AI agents.
    mcp: crate::mcp::Endpoint,
    /// Prometheus metrics.
    pub metrics: metrics::Metrics,
}

/// Why the gateway could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A cluster's client could not be built.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The audit could not start.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// `[approvals] key_file` is set but unusable.
    #[error(transparent)]
    Approvals(#[from] crate::approvals::seal::SealError),
}

/// What the request path learnt: the audit row being filled, which the log
/// line reads too.
#[derive(Debug)]
struct Trace {
    row: AuditRow,
    /// Request body bytes forwarded, counted by `forward`.
    sent: Arc<AtomicU64>,
    /// Probes and scrapes are not audited.
    audited: bool,
}

/// What the stages after authentication need about one request, whichever
/// door it came in by.
struct Stages<'a> {
    upstream: &'a Arc<Upstream>,
    /// Kubernetes path, raw.
    path: &'a str,
    identity: &'a crate::identity::Identity,
    audit_id: uuid::Uuid,
    limits: &'a Limits,
    /// See [`call::ToolCall::reveal_secret`].
    reveal_secret: bool,
}

impl Gateway {
    /// Build the gateway: one upstream client per cluster, the audit writer
    /// and the MCP endpoint (whose tools call back into the gateway, hence
    /// the `Arc`). Must be called inside a Tokio runtime.
    pub fn new(config: &Config, store: Store) -> Result<Arc<Gateway>, GatewayError> {
        let clusters = config
            .clusters
            .iter()
            .map(|c| Upstream::new(c).map(|u| (c.name.clone(), u)))
            .collect::<Result<_, _>>()?;
        let metrics = metrics::Metrics::default();
        let audit = Audit::start(&config.audit, &store, metrics.audit_writer())?;
        let approvals = Arc::new(crate::approvals::Approvals::new(config, store.clone())?);
        let mut tool_limits = config.limits.clone();
        tool_limits.request_timeout = tool_limits.request_timeout.min(TOOL_REQUEST_TIMEOUT);
        Ok(Arc::new_cyclic(|gateway| Gateway {
            clusters,
            authenticator: Authenticator::new(store.clone()),
            policy: Policy::new(
                store.clone(),
                config.protected_namespaces.iter().cloned(),
                &crate::identity::roles::all(config),
            ),
            limits: config.limits.clone(),
            tool_limits,
            trusted_proxies: config.trusted_proxies.clone(),
            audit,
            approvals,
            mcp: crate::mcp::Endpoint::new(gateway.clone(), config, store),
            metrics,
        }))
    }

    /// The audit (to close it at shutdown, or query it).
    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    /// The clock grants are judged by (tests move it ahead).
    pub fn grant_clock(&self) -> &policy::GrantClock {
        self.policy.clock()
    }

    /// The clusters, for periodic refresh.
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.clusters.values()
    }

    /// Handle one request from `peer`. Never fails: every error becomes a
    /// Kubernetes Status, and every response carries the audit id.
    pub async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let audit_id = uuid::Uuid::now_v7();
        // Every log line about this request carries its audit id.
        let span = tracing::info_span!("request", %audit_id);
        self.handle_traced(request, peer, audit_id).instrument(span).await
    }

    async fn handle_traced(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        audit_id: uuid::Uuid,
    ) -> Response<Body> {
        let started = Instant::now();
        let uri = request.uri();
        let mut row = AuditRow::arrived(audit_id, request.method(), uri.path(), uri.query());
        row.client = headers::client_address(peer.ip(), request.headers(), &self.trusted_proxies).to_string();
        let mut trace = Trace {
            row,
            sent: Arc::default(),
            audited: true,
        };
        let result = self.route(request, audit_id, &mut trace).await;
        let response = self.respond(&mut trace, result);
        self.finish(trace, response, audit_id, started)
    }

    /// Turn a refusal into its Status response (a 401 with the challenge).
    fn respond(&self, trace: &mut Trace, result: Result<Response<Body>, Status>) -> Response<Body> {
        match result {
            Ok(response) => response,
            Err(status) => {
                trace.row.reason = status.reason.clone();
                let challenge = status.code == 401;
                let mut response = status.response();
                if challenge {
                    response
                        .headers_mut()
                        .insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
                }
                response
            }
        }
    }

    /// Stamp the audit id, log the request, and arrange for its audit row.
    fn finish(
        &self,
        trace: Trace,
        mut response: Response<Body>,
        audit_id: uuid::Uuid,
        started: Instant,
    ) -> Response<Body> {
        response
            .headers_mut()
            .insert("audit-id", headers::audit_id_value(audit_id));
        self.record(&trace, response.status().as_u16(), started);
        if !trace.audited {
            return response;
        }
        // Written when the body ends or an upgraded stream closes, so that
        // bytes and truncation are known.
        crate::audit::record::attach(self.audit.writer(), trace.row, trace.sent, response)
    }

    async fn route(
        &self,
        request: Request<Incoming>,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, Status> {
        let route = router::route(request.uri().path()).inspect_err(|_| trace.row.refused = "path".into())?;
        trace.audited = !matches!(route, Route::Healthz | Route::Readyz | Route::Metrics);
        // The doors other than the Kubernetes API are boxed: an async fn's
        // state is as large as its largest branch, and the MCP server's and
        // the pages' futures would otherwise be allocated and moved with
        // every kubectl request (memmove was a tenth of the proxy's CPU).
        match route {
            Route::Healthz => Ok(text(200, "ok".into())),
            Route::Readyz => Ok(self.readyz()),
            Route::Metrics => Ok(text(200, self.metrics.render())),
            Route::NotFound => Err(Status::path_not_found()),
            Route::Audit => Box::pin(self.audit_request(request, trace)).await,
            Route::Mcp => Box::pin(self.mcp_request(request, trace)).await,
            Route::Web(_) => {
                // The page borrows the path: route again from an owned copy,
                // so the request itself can be handed over.
                let path = request.uri().path().to_string();
                trace.row.path = bounded(&path);
                let Ok(Route::Web(page)) = router::route(&path) else {
                    return Err(Status::path_not_found());
                };
                let web =
                    crate::approvals::web::serve(&self.approvals, &self.authenticator, page, request, &mut trace.row);
                Ok(Box::pin(web).await)
            }
            Route::Cluster { name, path } => {
                trace.row.cluster = name.to_string();
                trace.row.path = bounded(path);
                let path = path.to_string();
                self.cluster_request(name.to_string(), &path, request, audit_id, trace)
                    .await
            }
        }
    }

    async fn cluster_request(
        &self,
        cluster: String,
        path: &str,
        request: Request<Incoming>,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, Status> {
        let upstream = self
            .clusters
            .get(&cluster)
            .ok_or_else(|| call::unknown_cluster(&cluster))?;
        // Refused before authenticating: an identity claim is never weighed.
        if let Some(name) = headers::has_impersonation(request.headers()) {
            trace.row.refused = "identity_header".into();
            return Err(Status::bad_request(format!(
                "portcullis refuses requests carrying {name}: your credential decides who you are; ask for a grant instead"
            )));
        }
        let identity = self
            .authenticator
            .authenticate(request.headers())
            .await
            .map_err(|e| self.unauthorized(e, trace))?;
        trace.row.identify(&identity);
        let stages = Stages {
            upstream,
            path,
            identity: &identity,
            audit_id,
            limits: &self.limits,
            reveal_secret: false,
        };
        self.through(stages, request, trace).await
    }

    /// The stages after authentication, for a request from the listener or
    /// from an MCP tool ([`call`]): classify, policy, commit a write to the
    /// audit, forward.
    async fn through<B>(
        &self,
        stages: Stages<'_>,
        request: Request<B>,
        trace: &mut Trace,
    ) -> Result<Response<Body>, Status>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
        B::Error: Into<body::BoxError>,
    {
        let Stages {
            upstream,
            path,
            identity,
            audit_id,
            limits,
            reveal_secret,
        } = stages;
        if let Some(agent) = &identity.agent {
            trace.row.session = agent.id.clone();
        }
        let info = classify::classify(request.method(), path, request.uri().query());
        trace.row.classify(&info);
        let (groups, reveal_secrets) = match self.policy.decide(identity, &upstream.name, &info).await {
            Ok(Decision::Allow { groups, reveal_secrets }) => (groups, reveal_secrets),
            Err(e) => {
                return Err(Status::unavailable(format!(
                    "portcullis cannot read grants now ({e}); try again"
                )))
            }
        };
        // `read_secret`: one get of one Secret, recorded as a reveal.
        let reveal_one = reveal_secret && info.is_secrets() && info.verb == "get" && !info.name.is_empty();
        trace.row.secret_revealed = reveal_one;
        let reveal_secrets = reveal_secrets || reveal_one;
        trace.row.redacted = redact::hides_values(&info, identity, reveal_secrets);
        // Hold: a write whose caller's policy asks for a person's approval
        // is dry-run and held here, or run here once approved.
        let hold = hold::HoldCtx {
            upstream,
            path,
            identity,
            info: &info,
            groups: &groups,
            reveal_secrets,
            audit_id,
            limits,
        };
        // Only writes can be held; the hold stage's future is boxed so that
        // reads do not carry its size.
        let request = if info.is_write() {
            match Box::pin(self.hold(hold, request, trace)).await? {
                hold::HoldStep::Pass(request) => request,
                hold::HoldStep::Done(response) => return Ok(response),
            }
        } else {
            request
        };
        // A write, or a Secret reveal, is on record before the cluster sees
        // it (the API server's blocking audit mode): no record, no request.
        if info.is_write() || reveal_one {
            self.audit
                .writer()
                .commit_intent(trace.row.clone())
                .await
                .map_err(|error| {
                    tracing::error!(%error, "the audit cannot commit: request refused");
                    trace.row.refused = "audit_unavailable".into();
                    Status::unavailable(
                        "portcullis cannot record this request in its audit now, so it was not sent; try again",
                    )
                })?;
        } else {
            // Backpressure: when the audit writer lags, new reads wait.
            self.audit.writer().room().await;
        }
        let sent = trace.sent.clone();
        let call = forward::Call {
            upstream,
            path,
            info: &info,
            identity,
            groups,
            reveal_secrets,
            audit_id,
            limits,
            metrics: &self.metrics,
            sent,
        };
        forward::forward(call, request).await
    }

    /// `GET /audit`: rows for admins, authenticated like any request.
    async fn audit_request(&self, request: Request<Incoming>, trace: &mut Trace) -> Result<Response<Body>, Status> {
        trace.row.verb = request.method().as_str().to_ascii_lowercase();
        if request.method() != http::Method::GET {
            return Err(Status::failure(405, "MethodNotAllowed", "the audit is read with GET"));
        }
        let identity = self
            .authenticator
            .authenticate(request.headers())
            .await
            .map_err(|e| self.unauthorized(e, trace))?;
        trace.row.identify(&identity);
        self.audit
            .serve(&identity, request.uri().query())
            .await
            .map_err(|error| {
                if matches!(error, crate::audit::http::AuditHttpError::NotAdmin(_)) {
                    trace.row.refused = "not_admin".into();
                }
                error.status()
            })
    }

    /// `/mcp`: the MCP server, for agent credentials. The bearer token is
    /// checked before anything reads the body; each tool call then goes
    /// through [`Gateway::call`].
    async fn mcp_request(&self, request: Request<Incoming>, trace: &mut Trace) -> Result<Response<Body>, Status> {
        trace.row.verb = request.method().as_str().to_ascii_lowercase();
        let identity = match self.authenticator.authenticate(request.headers()).await {
            Ok(identity) => identity,
            Err(error) => {
                let status = self.unauthorized(error, trace);
                trace.row.reason = status.reason.clone();
                return Ok(self.mcp.unauthorized(&status));
            }
        };
        trace.row.identify(&identity);
        if let Some(agent) = &identity.agent {
            trace.row.session = agent.id.clone();
        }
        Ok(self.mcp.serve(request, identity, &mut trace.row).await)
    }

    fn unauthorized(&self, error: AuthError, trace: &mut Trace) -> Status {
        trace.row.refused = error.reason().into();
        trace.row.credential_prefix = error.prefix().unwrap_or_default().into();
        self.metrics
            .rejected_credentials
            .get_or_create(&metrics::RejectLabels {
                reason: error.reason().into(),
            })
            .inc();
        if error == AuthError::StoreUnavailable {
            return Status::unavailable("portcullis cannot check credentials now; try again");
        }
        let message = match error {
            AuthError::Missing => {
                "Unauthorized: send a portcullis token as 'Authorization: Bearer <token>'".to_string()
            }
            other => format!("Unauthorized: {other}"),
        };
        Status::unauthorized(message)
    }

    fn readyz(&self) -> Response<Body> {
        let down: Vec<&str> = self
            .clusters
            .values()
            .filter(|u| !u.is_reachable())
            .map(|u| u.name.as_str())
            .collect();
        if down.is_empty() {
            text(200, "ok".into())
        } else {
            text(503, format!("unreachable clusters: {}\n", down.join(", ")))
        }
    }

    /// The request's log line (the audit id comes from its span) and
    /// metrics. The line is at debug: the audit row is the record of every
    /// request, and formatting and writing a line per request cost the
    /// proxy more than a sixth of its CPU on small GETs (benches/RESULTS.md).
    fn record(&self, trace: &Trace, code: u16, started: Instant) {
        use crate::text::Escaped;
        let row = &trace.row;
        if !row.cluster.is_empty() {
            self.metrics
                .requests
                .get_or_create(&metrics::RequestLabels {
                    cluster: row.cluster.clone(),
                    verb: row.verb.clone(),
                    code,
                })
                .inc();
        }
        // Escaped: the path (and the cluster and verb read from it) are the
        // client's, and a raw newline or escape sequence would forge a line.
        tracing::debug!(
            cluster = %Escaped(&row.cluster),
            principal = %format_args!("{}:{}", row.principal_kind, Escaped(&row.login)),
            client = %row.client,
            method = %Escaped(&row.method),
            path = %Escaped(&row.path),
            verb = %Escaped(&row.verb),
            code,
            refused = %row.refused,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request"
        );
    }
}

fn text(code: u16, body: String) -> Response<Body> {
    let mut response = Response::new(body::full(body));
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
