//! The request path. Every request meets these stages in this order; each
//! file is named after its stage.
//!
//! 1. [`router`]: which door (`/clusters/<name>/…`, health, metrics); refuse
//!    ambiguous paths before anything else reads them.
//! 2. [`headers`]: refuse a client's `Impersonate-*` headers before
//!    authenticating, so no identity claim is ever weighed.
//! 3. [`authenticate`]: bearer token → [`Identity`].
//! 4. [`classify`]: path and method → [`RequestInfo`], as kube-apiserver sees
//!    it.
//! 5. [`policy`]: grants in effect → the groups the cluster is sent.
//! 6. [`forward`] (with [`upstream`] and [`limits`]): strip client identity
//!    headers, impersonate, send with the ServiceAccount token and our
//!    Audit-ID, stream the answer back under the size cap.
//! 7. One log line per request, carrying the audit id.

pub mod authenticate;
pub mod classify;
pub mod forward;
pub mod headers;
pub mod limits;
pub mod metrics;
pub mod policy;
pub mod router;
pub mod upstream;

use crate::body::{self, Body};
use crate::config::{Config, Limits};
use crate::identity::Identity;
use crate::status::Status;
use crate::store::Store;
use authenticate::{AuthError, Authenticator};
use classify::RequestInfo;
use http::{HeaderValue, Request, Response};
use hyper::body::Incoming;
use ipnet::IpNet;
use policy::{Decision, Policy};
use router::Route;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use upstream::Upstream;

/// The challenge sent with every 401.
const CHALLENGE: &str = "Bearer realm=\"portcullis\"";

/// Everything a request needs, built once at start.
#[derive(Debug)]
pub struct Gateway {
    clusters: HashMap<String, Arc<Upstream>>,
    authenticator: Authenticator,
    policy: Policy,
    limits: Limits,
    trusted_proxies: Vec<IpNet>,
    /// Prometheus metrics.
    pub metrics: metrics::Metrics,
}

/// What the request path learnt, for the log line (and later the audit row).
#[derive(Debug, Default)]
struct Trace {
    cluster: String,
    identity: Option<Identity>,
    info: Option<RequestInfo>,
    client: Option<std::net::IpAddr>,
    refused: Option<&'static str>,
}

impl Gateway {
    /// Build the gateway: one upstream client per cluster.
    pub fn new(config: &Config, store: Store) -> Result<Gateway, upstream::UpstreamError> {
        let clusters = config
            .clusters
            .iter()
            .map(|c| Upstream::new(c).map(|u| (c.name.clone(), u)))
            .collect::<Result<_, _>>()?;
        Ok(Gateway {
            clusters,
            authenticator: Authenticator::new(store.clone()),
            policy: Policy::new(store, config.protected_namespaces.iter().cloned()),
            limits: config.limits.clone(),
            trusted_proxies: config.trusted_proxies.clone(),
            metrics: metrics::Metrics::default(),
        })
    }

    /// The clusters, for periodic refresh.
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.clusters.values()
    }

    /// Handle one request from `peer`. Never fails: every error becomes a
    /// Kubernetes Status, and every response carries the audit id.
    pub async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let started = Instant::now();
        let audit_id = uuid::Uuid::now_v7();
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let mut trace = Trace::default();
        let mut response = match self.route(request, peer, audit_id, &mut trace).await {
            Ok(response) => response,
            Err(status) if status.code == 401 => {
                let mut response = status.response();
                response.headers_mut().insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
                response
            }
            Err(status) => status.response(),
        };
        if let Ok(value) = HeaderValue::from_str(&audit_id.to_string()) {
            response.headers_mut().insert("audit-id", value);
        }
        self.record(&trace, &method, &path, response.status().as_u16(), audit_id, started);
        response
    }

    async fn route(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, Status> {
        let route = router::route(request.uri().path()).inspect_err(|_| trace.refused = Some("path"))?;
        match route {
            Route::Healthz => Ok(text(200, "ok".into())),
            Route::Readyz => Ok(self.readyz()),
            Route::Metrics => Ok(text(200, self.metrics.render())),
            Route::NotFound => Err(Status::path_not_found()),
            Route::Cluster { name, path } => {
                trace.cluster = name.to_string();
                let path = path.to_string();
                self.cluster_request(name.to_string(), &path, request, peer, audit_id, trace).await
            }
        }
    }

    async fn cluster_request(
        &self,
        cluster: String,
        path: &str,
        request: Request<Incoming>,
        peer: SocketAddr,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, Status> {
        let upstream = self.clusters.get(&cluster).ok_or_else(|| {
            Status::failure(404, "NotFound", format!("cluster \"{cluster}\" is not served by this portcullis"))
        })?;
        trace.client = Some(headers::client_address(peer.ip(), request.headers(), &self.trusted_proxies));
        // Refused before authenticating: an identity claim is never weighed.
        if let Some(name) = headers::has_impersonation(request.headers()) {
            trace.refused = Some("identity_header");
            return Err(Status::bad_request(format!(
                "portcullis refuses requests carrying {name}: your credential decides who you are; ask for a grant instead"
            )));
        }
        let identity = self.authenticator.authenticate(request.headers()).await.map_err(|e| self.unauthorized(e, trace))?;
        trace.identity = Some(identity.clone());
        let info = classify::classify(request.method(), path, request.uri().query());
        trace.info = Some(info.clone());
        let groups = match self.policy.decide(&identity, &cluster, &info).await {
            Ok(Decision::Allow { groups }) => groups,
            Err(e) => return Err(Status::unavailable(format!("portcullis cannot read grants now ({e}); try again"))),
        };
        let call = forward::Call { upstream, path, info: &info, identity: &identity, groups, audit_id, limits: &self.limits, metrics: &self.metrics };
        forward::forward(call, request).await
    }

    fn unauthorized(&self, error: AuthError, trace: &mut Trace) -> Status {
        trace.refused = Some(error.reason());
        self.metrics
            .rejected_credentials
            .get_or_create(&metrics::RejectLabels { reason: error.reason().into() })
            .inc();
        if error == AuthError::StoreUnavailable {
            return Status::unavailable("portcullis cannot check credentials now; try again");
        }
        let message = match error {
            AuthError::Missing => "Unauthorized: send a portcullis token as 'Authorization: Bearer <token>'".to_string(),
            other => format!("Unauthorized: {other}"),
        };
        Status::unauthorized(message)
    }

    fn readyz(&self) -> Response<Body> {
        let down: Vec<&str> = self.clusters.values().filter(|u| !u.is_reachable()).map(|u| u.name.as_str()).collect();
        if down.is_empty() {
            text(200, "ok".into())
        } else {
            text(503, format!("unreachable clusters: {}\n", down.join(", ")))
        }
    }

    fn record(&self, trace: &Trace, method: &http::Method, path: &str, code: u16, audit_id: uuid::Uuid, started: Instant) {
        let verb = trace.info.as_ref().map_or("", |i| i.verb.as_str());
        if !trace.cluster.is_empty() {
            self.metrics
                .requests
                .get_or_create(&metrics::RequestLabels { cluster: trace.cluster.clone(), verb: verb.into(), code })
                .inc();
        }
        let principal = trace.identity.as_ref().map(|i| i.principal.to_string()).unwrap_or_default();
        tracing::info!(
            audit_id = %audit_id,
            cluster = %trace.cluster,
            principal = %principal,
            client = ?trace.client,
            %method,
            path,
            verb,
            code,
            refused = trace.refused.unwrap_or(""),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request"
        );
    }
}

fn text(code: u16, body: String) -> Response<Body> {
    let mut response = Response::new(body::full(body));
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}
