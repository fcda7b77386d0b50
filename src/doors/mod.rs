//! The doors: where a request comes in, in front of the request path
//! ([`Pipeline`]). [`Doors::handle`] routes a request by its raw path
//! (`crate::gateway::router`) to one of them:
//!
//! - [`kube`]: `/clusters/<name>/…`, the raw Kubernetes API: refuse a
//!   client's `Impersonate-*` headers, authenticate, then the pipeline;
//! - `/mcp` ([`crate::mcp`]): the MCP server for agents, whose tools send
//!   their cluster requests through [`Pipeline::call`];
//! - `/login`, `/login/callback`, `/logout`, `/approvals…` ([`web`]):
//!   sign-in (with the identity provider, `crate::signin`) and the approval
//!   pages for people, deciding through `crate::approvals`;
//! - `/api/portcullis/v1/…` ([`api`]): the JSON API people's command line
//!   uses, as the authenticated person, deciding through `crate::access`
//!   and `crate::approvals`;
//! - `/audit` ([`audit`]): the audit for admins, read through
//!   `crate::audit::read`;
//! - `/healthz`, `/readyz`, `/metrics` ([`health`]).
//!
//! Every door sits inside the record layer
//! (`crate::gateway::layers::record`, ending in `crate::gateway::trace`):
//! one log line and one audit row per request, probes and scrapes aside. The doors hold an `Arc` of the pipeline; the
//! pipeline holds nothing of theirs.

pub mod api;
pub mod apiserver_audit;
pub mod audit;
mod health;
mod kube;
pub mod oauth;
mod unread;
pub mod web;

use crate::audit::row::{bounded, AuditRow};
use crate::body::Body;
use crate::config::Config;
use crate::gateway::error::RequestError;
use crate::gateway::layers::record::RecordLayer;
use crate::gateway::router::{self, Route};
use crate::gateway::trace::refuse;
use crate::gateway::{metrics, BuildError, Pipeline, Trace};
use crate::identity::authenticate::{AuthError, Authenticator};
use crate::store::Store;
use http::{Request, Response};
use hyper::body::Incoming;
use ipnet::IpNet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tower::{ServiceBuilder, ServiceExt};

/// Every door, over one pipeline.
#[derive(Debug)]
pub struct Doors {
    pipeline: Arc<Pipeline>,
    authenticator: Authenticator,
    trusted_proxies: Vec<IpNet>,
    /// How people sign in to the pages (`[oidc]`, `[sessions]`).
    web: web::Web,
    /// `/mcp`: the MCP server for AI agents.
    mcp: crate::mcp::Endpoint,
    /// `/api/portcullis/v1/…`: the person API.
    api: api::Api,
    /// `/.well-known/…`, `/oauth/token`, `/oauth/register`, `/oauth/revoke`.
    oauth: oauth::OAuth,
    /// Who an OAuth client is (shared by the consent page and the token
    /// endpoint).
    clients: Arc<crate::oauth::client::Clients>,
    /// `/apiserver-audit/<cluster>`: the API servers' audit events.
    apiserver_audit: apiserver_audit::Webhook,
}

impl Doors {
    /// Build the pipeline and the doors in front of it. Must be called
    /// inside a Tokio runtime.
    pub fn new(config: &Config, store: Store) -> Result<Doors, BuildError> {
        let pipeline = Arc::new(Pipeline::new(config, store.clone())?);
        let clients = Arc::new(crate::oauth::client::Clients::new(config, store.clone()).map_err(BuildError::OAuth)?);
        let ignored = pipeline.metrics.apiserver_audit_ignored.clone();
        Ok(Doors {
            apiserver_audit: apiserver_audit::Webhook::new(config, store.clone(), ignored),
            oauth: oauth::OAuth::new(config, store.clone(), clients.clone()).map_err(BuildError::OAuth)?,
            clients: clients.clone(),
            mcp: crate::mcp::Endpoint::new(pipeline.clone(), config, store.clone()),
            pipeline,
            authenticator: Authenticator::new(store.clone())
                .limiting_failures(config.limits.failed_authentications_per_minute)
                .keeping_lookups_for(config.store.cache_ttl),
            trusted_proxies: config.trusted_proxies.clone(),
            web: web::Web::new(config, store.clone(), clients)?,
            api: api::Api::new(config, store.clone()),
        })
    }

    /// Approved grants are bound through `reconciler` before the person API
    /// or the console answers (it is built after the doors, on the
    /// pipeline's clock).
    pub fn bind_with(&self, reconciler: Arc<crate::reconcile::Reconciler>) {
        self.web.set_reconciler(reconciler.clone());
        self.oauth.set_reconciler(reconciler.clone());
        self.api.set_reconciler(reconciler);
    }

    /// Who OAuth clients are (for the periodic sweep of unused ones).
    pub fn clients(&self) -> &Arc<crate::oauth::client::Clients> {
        &self.clients
    }

    /// Who a bearer token is (its cache is dropped when another replica
    /// changes credentials).
    pub fn authenticator(&self) -> &Authenticator {
        &self.authenticator
    }

    /// The request path behind the doors.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// Handle one request from `peer`. Never fails: every error becomes a
    /// Kubernetes Status, and every response carries the audit id.
    pub async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        // Before the request becomes a row: past the spool's hard cap it
        // waits, read by nobody, until the store commits again.
        self.pipeline.audit().writer().relief().await;
        let audit_id = crate::audit::id::new();
        // Every log line about this request carries its audit id.
        crate::logs::in_request(audit_id, self.handle_traced(request, peer, audit_id)).await
    }

    async fn handle_traced(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        audit_id: uuid::Uuid,
    ) -> Response<Body> {
        let doors = self;
        // Every request is one audit row and one log line, whichever door
        // answers it.
        let service = ServiceBuilder::new()
            .layer(RecordLayer::new(
                &self.pipeline,
                audit_id,
                peer.ip(),
                &self.trusted_proxies,
            ))
            .service_fn(move |request| doors.door(request, audit_id));
        let Ok(response) = service.oneshot(request).await;
        response
    }

    /// The door `request` is for, with the trace the record layer opened
    /// (taken from the request's extensions, given back in the answer's).
    async fn door(&self, mut request: Request<Incoming>, audit_id: uuid::Uuid) -> Result<Response<Body>, Infallible> {
        let mut trace = request.extensions_mut().remove::<Trace>().unwrap_or_else(|| {
            let uri = request.uri();
            Trace::new(AuditRow::arrived(audit_id, request.method(), uri.path(), uri.query()))
        });
        // A client that goes away in the door (while it authenticates, or
        // while a refused request's body is drained) leaves its row too.
        let mut unanswered = self.pipeline.unanswered(&mut trace);
        let result = self.route(request, audit_id, unanswered.trace()).await;
        unanswered.answered();
        let mut response = self.pipeline.respond(&mut trace, result);
        response.extensions_mut().insert(trace);
        Ok(response)
    }

    async fn route(
        &self,
        request: Request<Incoming>,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        let route = router::route(request.uri().path())?;
        trace.audited = !matches!(route, Route::Healthz | Route::Readyz | Route::Metrics);
        // Every door's future is boxed: an async fn's state is as large as
        // its largest branch, and holds its callee's future, so without a
        // box each caller up to the connection's task would carry the
        // door's kilobytes and copy them as it starts it (memmove was a
        // tenth of the proxy's CPU; benches/RESULTS.md). One allocation a
        // request costs less than those copies.
        match route {
            Route::Healthz => Ok(health::text(200, "ok".into())),
            Route::Readyz => Ok(health::readyz(&self.pipeline)),
            Route::Metrics => Ok(health::text(200, self.pipeline.metrics.render())),
            Route::NotFound => Err(RequestError::PathNotFound),
            Route::Audit => Box::pin(self.audit_request(request, trace)).await,
            // rmcp spawns its work in the current span: the request is one.
            Route::Mcp => Box::pin(crate::logs::in_request_span(audit_id, self.mcp_request(request, trace))).await,
            Route::ApiserverAudit(cluster) => {
                let cluster = cluster.to_string();
                let (request, unread) = unread::lend(request);
                let webhook = self.apiserver_audit.serve(&cluster, request, &mut trace.row);
                let response = Box::pin(webhook).await;
                if !response.status().is_success() {
                    self.drain(unread).await;
                }
                Ok(response)
            }
            Route::Web(_) => Box::pin(self.web_request(request, trace)).await,
            Route::OAuth(_) => Box::pin(self.oauth_request(request, trace)).await,
            Route::Api(rest) => {
                let rest = rest.to_string();
                trace.row.path = bounded(request.uri().path());
                let api = self.api.serve(&self.authenticator, &rest, request, &mut trace.row);
                Ok(Box::pin(api).await)
            }
            Route::Cluster { name, path } => {
                trace.row.cluster = name.to_string();
                trace.row.path = bounded(path);
                let path = path.to_string();
                Box::pin(self.cluster_request(path, request, audit_id, trace)).await
            }
        }
    }

    /// The approval pages, for people.
    async fn web_request(&self, request: Request<Incoming>, trace: &mut Trace) -> Result<Response<Body>, RequestError> {
        // The page borrows the path: route again from an owned copy, so the
        // request itself can be handed over.
        let path = request.uri().path().to_string();
        trace.row.path = bounded(&path);
        let Ok(Route::Web(page)) = router::route(&path) else {
            return Err(RequestError::PathNotFound);
        };
        let approvals = self.pipeline.approvals();
        let audit = self.pipeline.audit();
        let web = web::serve(
            approvals,
            audit,
            &self.authenticator,
            &self.web,
            page,
            request,
            &mut trace.row,
        );
        Ok(web.await)
    }

    /// The OAuth endpoints: metadata, token, registration, revocation.
    async fn oauth_request(
        &self,
        request: Request<Incoming>,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        let path = request.uri().path().to_string();
        trace.row.path = bounded(&path);
        let Ok(Route::OAuth(endpoint)) = router::route(&path) else {
            return Err(RequestError::PathNotFound);
        };
        let shared = oauth::Shared {
            authenticator: &self.authenticator,
            approvals: self.pipeline.approvals(),
            web: &self.web,
        };
        Ok(self.oauth.serve(endpoint, shared, request, &mut trace.row).await)
    }

    /// `GET /audit`: rows for admins, authenticated like any request.
    async fn audit_request(
        &self,
        request: Request<Incoming>,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        trace.row.verb = request.method().as_str().to_ascii_lowercase();
        if request.method() != http::Method::GET {
            return Err(RequestError::AuditNotGet);
        }
        let identity = self
            .authenticator
            .authenticate(request.headers(), &trace.row.client)
            .await
            .map_err(|e| self.unauthorized(e, trace))?;
        trace.row.identify(&identity);
        audit::serve(self.pipeline.audit(), &identity, request.uri().query())
            .await
            .map_err(RequestError::AuditQuery)
    }

    /// `/mcp`: the MCP server, for agent credentials. The bearer token is
    /// checked before anything reads the body; each tool call then goes
    /// through [`Pipeline::call`].
    async fn mcp_request(&self, request: Request<Incoming>, trace: &mut Trace) -> Result<Response<Body>, RequestError> {
        trace.row.verb = request.method().as_str().to_ascii_lowercase();
        let mcp = Some(crate::identity::Audience::Mcp);
        let asked = self
            .authenticator
            .authenticate_for(request.headers(), mcp, &trace.row.client);
        let identity = match asked.await {
            Ok(identity) => identity,
            Err(error) => {
                let error = self.unauthorized(error, trace);
                let status = refuse(trace, &error);
                trace.row.reason = status.reason.clone();
                // The MCP SDKs' OAuth flow sends its next request on this
                // connection at once. The lent body is dropped unread, which
                // hands it back to the drain.
                let (unread_body, unread) = unread::lend(request);
                drop(unread_body);
                self.drain(unread).await;
                return Ok(self.mcp.unauthorized(&status));
            }
        };
        trace.row.identify(&identity);
        if let Some(agent) = &identity.agent {
            trace.row.session = agent.id.clone();
        }
        // Refused before its body is read (not an agent, over its rate, a
        // session not its own, too large): the rest is read and dropped,
        // so the client reads the refusal and its connection stays usable.
        let (request, unread) = unread::lend(request);
        let response = self.mcp.serve(request, identity, &mut trace.row).await;
        if !trace.row.refused.is_empty() {
            self.drain(unread).await;
        }
        Ok(response)
    }

    /// After a refusal made before the request's body was read: read and
    /// discard what the client still sends of it (`unread`), up to
    /// [`unread::DRAIN_LIMITS`] times the body limit and for at most
    /// [`unread::DRAIN_TIME`]. Unread, hyper closes an HTTP/1.1 connection
    /// after the answer, and a client sending its next request on it sees
    /// it closed without an answer.
    async fn drain(&self, unread: unread::Unread<Incoming>) {
        let bound = self
            .pipeline
            .limits()
            .request_body_bytes
            .saturating_mul(unread::DRAIN_LIMITS);
        unread.drain(bound, unread::DRAIN_TIME).await;
    }

    /// A refused credential: counted, its prefix noted in the row.
    fn unauthorized(&self, error: AuthError, trace: &mut Trace) -> RequestError {
        trace.row.credential_prefix = error.prefix().unwrap_or_default().into();
        self.pipeline
            .metrics
            .rejected_credentials
            .get_or_create(&metrics::RejectLabels {
                reason: error.reason().into(),
            })
            .inc();
        RequestError::Unauthenticated(error)
    }
}
