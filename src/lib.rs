//! portcullis: an authenticating reverse proxy in front of the Kubernetes API
//! server.
//!
//! People, bots and (later) AI agents each get their own credential.
//! portcullis authenticates it, forwards the raw API traffic under Kubernetes
//! impersonation so the cluster's RBAC decides, and gives every request an
//! audit id the API server shares.
//!
//! # Request path
//!
//! Every request meets the same stages in this order (see [`gateway`], one
//! file per stage):
//!
//! 1. **route** (`gateway::router`): `/clusters/<name>/…`, `/mcp`,
//!    `/healthz`, `/readyz`, `/metrics`; ambiguous paths refused before
//!    anything else. An MCP tool's cluster requests enter at stage 4
//!    through `Pipeline::call` (`gateway::call`), with the agent's identity.
//! 2. **identity headers** (`gateway::headers`): a client's `Impersonate-*`
//!    is refused before authentication.
//! 3. **authenticate** (`identity::authenticate`): bearer token →
//!    `Identity`.
//! 4. **classify** (`gateway::classify`): `RequestInfo`, as kube-apiserver.
//! 5. **policy** (`gateway::policy`): grants in effect → groups to send;
//!    then **hold** (`gateway::hold`): a write whose caller's policy asks
//!    for a person's approval is dry-run and held (`approvals`), or run
//!    once approved, instead of going on.
//! 6. **forward** (`gateway::forward`, `gateway::upstream`,
//!    `gateway::limits`): strip client identity headers, impersonate, send
//!    with the ServiceAccount token and the Audit-ID, stream the answer back
//!    under the size cap; splice upgrades after a real 101.
//!    A write is committed to the audit before it is forwarded.
//! 7. **record**: one log line (and metrics) per request with the audit id,
//!    and its audit row (`audit::record`), written when the response ends
//!    or an upgraded stream closes.
//!
//! # Layout
//!
//! `config` (typed configuration), `app` (listener, TLS, serve), `status`
//! (Kubernetes Status), `gateway` (the request path, `Pipeline`), `doors`
//! (routing and authentication in front of it; the raw API, the approval
//! pages, `/audit`, health), `audit` (rows, writer, hash chain, queries,
//! reading for admins, export, retention), `identity` (people, bots,
//! credentials, grants, roles), `reconcile` (each cluster's RBAC objects
//! kept in step with the roles and grants), `access` (access requests),
//! `approvals` (held writes: sealing, preview, decisions, waiting),
//! `signin` (sign-in with the company's OpenID Connect provider),
//! `store` (SQLite), `text` (client text made safe to print), `logs` (log
//! lines, each with the request it is about), `cli` and
//! `demo` (the command line; `demo` only with the `demo` feature, on by
//! default). The simulated kube-apiserver is its own crate,
//! `portcullis-sim` (`sim/`), which depends on nothing here.
//!
//! Modules only import downwards, lowest first: wire types (`body`,
//! `status`, `document`, `secrets` (Secret values hidden in Kubernetes
//! documents), `text`, `tls`, `logs`, `ratelimit` (token buckets by key))
//! → `config` → `identity` → `store` → domain
//! (`audit`, `access`, `approvals`, `reconcile`, `signin`; no CLI, no
//! doors) →
//! `gateway` (the pipeline) → `doors` and `mcp` (the doors) → `app`, `cli` (one file per
//! noun) and `demo`. `tests/layers.rs` fails when an import goes up or
//! round in a circle.

pub mod access;
pub mod app;
pub mod approvals;
pub mod audit;
pub mod body;
pub mod ci;
pub mod cli;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
pub mod document;
pub mod doors;
pub mod gateway;
pub mod identity;
pub mod logs;
pub mod mcp;
pub mod oauth;
pub mod ratelimit;
pub mod reconcile;
pub mod secrets;
pub mod signin;
pub mod status;
pub mod store;
pub mod text;
pub mod tls;
