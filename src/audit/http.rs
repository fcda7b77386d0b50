//! `GET /audit?<filters>`: the audit for admins, as JSON lines.
//!
//! Authenticated with a person's bearer token like any request; only people
//! marked admin (`portcullis person add --admin`) may read it, because rows
//! show everyone's activity. The filters are those of `portcullis audit`
//! (see [`super::query`]).

use super::query::Filter;
use super::Audit;
use crate::body::{self, Body};
use crate::identity::{Identity, PrincipalKind};
use crate::status::Status;
use http::{HeaderValue, Response};

/// Rows returned when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 1000;
/// The most rows one request may ask for.
pub const MAX_LIMIT: usize = 100_000;

/// Why `GET /audit` was refused before any query ran.
#[derive(Debug, thiserror::Error)]
pub enum AuditHttpError {
    /// The caller is not an admin person.
    #[error("{0} may not read the audit: only people marked admin may")]
    NotAdmin(String),
    /// The filters do not parse.
    #[error(transparent)]
    Filter(#[from] super::query::FilterError),
    /// The store failed.
    #[error("the audit cannot be read now: {0}")]
    Unavailable(String),
}

impl AuditHttpError {
    /// The Status a client gets.
    pub fn status(&self) -> Status {
        match self {
            AuditHttpError::NotAdmin(_) => Status::failure(403, "Forbidden", self.to_string()),
            AuditHttpError::Filter(_) => Status::bad_request(self.to_string()),
            AuditHttpError::Unavailable(_) => Status::unavailable(self.to_string()),
        }
    }
}

impl Audit {
    /// Answer `GET /audit?query` for an authenticated `identity`.
    pub async fn serve(&self, identity: &Identity, query: Option<&str>) -> Result<Response<Body>, AuditHttpError> {
        if !self.is_admin(identity).await? {
            return Err(AuditHttpError::NotAdmin(identity.principal.to_string()));
        }
        let mut filter = Filter::from_query(query.unwrap_or(""), chrono::Utc::now())?;
        filter.limit = Some(filter.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT));
        let rows = self
            .query(filter)
            .await
            .map_err(|e| AuditHttpError::Unavailable(e.to_string()))?;
        let mut lines = Vec::with_capacity(rows.len() * 512);
        for row in &rows {
            serde_json::to_writer(&mut lines, row).map_err(|e| AuditHttpError::Unavailable(e.to_string()))?;
            lines.push(b'\n');
        }
        let mut response = Response::new(body::full(lines));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/jsonl"),
        );
        Ok(response)
    }

    async fn is_admin(&self, identity: &Identity) -> Result<bool, AuditHttpError> {
        if identity.principal.kind != PrincipalKind::Person {
            return Ok(false);
        }
        let store = self.store.clone();
        let principal = identity.principal.clone();
        tokio::task::spawn_blocking(move || store.is_admin(&principal))
            .await
            .map_err(|e| AuditHttpError::Unavailable(e.to_string()))?
            .map_err(|e| AuditHttpError::Unavailable(e.to_string()))
    }
}
