//! `GET /audit?<filters>`: the audit for admins, as JSON lines.
//!
//! Authenticated with a person's bearer token like any request; who may
//! read it and which rows a query selects are the audit's own
//! ([`crate::audit::read`]). This door only writes the rows out.

use crate::audit::read::AuditReadError;
use crate::audit::Audit;
use crate::body::{self, Body};
use crate::identity::Identity;
use http::{HeaderValue, Response};

/// Answer `GET /audit?query` for an authenticated `identity`.
pub async fn serve(audit: &Audit, identity: &Identity, query: Option<&str>) -> Result<Response<Body>, AuditReadError> {
    let rows = audit.read_as(identity, query).await?;
    let mut lines = Vec::with_capacity(rows.len() * 512);
    for row in &rows {
        serde_json::to_writer(&mut lines, row).map_err(|e| AuditReadError::Unavailable(e.to_string()))?;
        lines.push(b'\n');
    }
    let mut response = Response::new(body::full(lines));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl"),
    );
    Ok(response)
}
