//! `/clusters/<name>/…`: the raw Kubernetes API door. An unknown cluster
//! and a client's `Impersonate-*` headers are refused before the token is
//! read, so no identity claim is ever weighed; then the pipeline.

use super::Doors;
use crate::body::Body;
use crate::gateway::error::RequestError;
use crate::gateway::{Stages, Trace};
use http::{Request, Response};
use hyper::body::Incoming;

impl Doors {
    /// A request for cluster `cluster` at Kubernetes path `path`.
    pub(super) async fn cluster_request(
        &self,
        cluster: String,
        path: &str,
        request: Request<Incoming>,
        audit_id: uuid::Uuid,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        let upstream = self.pipeline.upstream(&cluster)?;
        // Refused before authenticating: an identity claim is never weighed.
        if let Some(name) = crate::gateway::headers::has_impersonation(request.headers()) {
            let header = name.to_string();
            return Err(RequestError::IdentityHeader { header });
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
            limits: self.pipeline.limits(),
            reveal_secret: false,
        };
        self.pipeline.through(stages, request, trace).await
    }
}
