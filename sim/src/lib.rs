//! An in-process Kubernetes API server simulator: the crate
//! `portcullis-sim`.
//!
//! portcullis's demo and every integration test put this behind portcullis
//! instead of a real cluster. It answers the way kube-apiserver does for what
//! portcullis, kubectl 1.37, client-go and kube-rs send: TLS with HTTP/2 and
//! HTTP/1.1, bearer tokens, impersonation, RBAC, discovery, Status errors,
//! Tables, watch, patches including server-side apply, dry run,
//! preconditions, logs, exec, attach and port-forward.
//!
//! # Nothing shared with portcullis
//!
//! The simulator depends on no portcullis code. It stands in for the cluster
//! that judges portcullis, so it must not share the proxy's reading of a
//! request: it classifies requests itself ([`request_info`], written from
//! kube-apiserver's `RequestInfoFactory`), and a classification bug in
//! portcullis shows as a disagreement instead of being repeated here.
//!
//! The few types both sides speak are duplicated on purpose rather than put
//! in a leaf crate both depend on: the Kubernetes `Status` wire shape
//! ([`status`]), the boxed body alias ([`body`]) and certificate minting
//! ([`tls`]). They are small and change only when Kubernetes' format does,
//! and a shared crate would be a third package whose changes reach the
//! proxy and its judge at once, which is the coupling this crate avoids.
//!
//! # Layout
//!
//! - `server`: TLS listener, the per-request pipeline (record, faults,
//!   authenticate, impersonate, classify, authorize, dispatch), Audit-ID.
//!   `request_info`: what a request is, as kube-apiserver works it out.
//! - `auth`: bearer tokens and impersonation. `rbac`: RBAC evaluation from
//!   stored Role/ClusterRole/…Binding objects. `reviews`: self/subject
//!   access reviews and selfsubjectreviews.
//! - `registry`, `registry_table`: the served resource types.
//!   `discovery`: `/version`, `/api`, `/apis`, OpenAPI stubs. `table`:
//!   `meta.k8s.io/v1` Tables.
//! - `store`: in-memory objects, resourceVersions, watch fan-out.
//!   `handlers`: the verbs. `defaults`: what decoding a write fills in.
//!   `patch`: merge, JSON and strategic merge patches
//!   and server-side apply. `validate`: names, immutable fields, strict
//!   field validation.
//! - `streams`: pods/log, exec, attach, port-forward over WebSocket and SPDY.
//! - `seed`: the demo cluster's objects. `faults`: fault injection.
//! - `status`, `body`, `tls`: the Status wire shape, the body type and
//!   generated certificates.
//!
//! # Known differences from kube-apiserver
//!
//! Listed in each module's documentation and collected in `docs/sim.md`.

pub mod auth;
pub mod body;
pub mod defaults;
pub mod discovery;
pub mod faults;
pub mod handlers;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod registry_table;
pub mod request_info;
pub mod reviews;
pub mod seed;
pub mod server;
pub mod status;
pub mod store;
pub mod streams;
pub mod table;
pub mod tls;
pub mod validate;

use std::collections::BTreeMap;

pub use server::{RecordedRequest, Sim, SimConfig};

/// An authenticated (or impersonated) user, as `user.Info` in Kubernetes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UserInfo {
    /// User name, e.g. `user:ana` or `system:serviceaccount:ns:name`.
    pub name: String,
    /// UID, possibly empty.
    pub uid: String,
    /// Groups, including `system:authenticated` where it applies.
    pub groups: Vec<String>,
    /// Extra attributes (keys lower-case).
    pub extra: BTreeMap<String, Vec<String>>,
}
