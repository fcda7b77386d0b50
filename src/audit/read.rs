//! Reading the audit on someone's behalf: only people marked admin
//! (`portcullis person add --admin`) may, because rows show everyone's
//! activity. The filters are those of `portcullis audit` (see
//! [`super::query`]); the door that serves it is `crate::doors::audit`.

use super::query::Filter;
use super::row::ChainedRow;
use super::Audit;
use crate::identity::{Identity, PrincipalKind};
use crate::status::Status;

/// Rows returned when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 1000;
/// The most rows one request may ask for.
pub const MAX_LIMIT: usize = 100_000;

/// Why reading the audit was refused, or failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditReadError {
    /// The caller is not an admin person (with their own credential).
    #[error("{0} may not read the audit: only people marked admin may, with their own credential")]
    NotAdmin(String),
    /// The filters do not parse.
    #[error(transparent)]
    Filter(#[from] super::query::FilterError),
    /// The store failed.
    #[error("the audit cannot be read now: {0}")]
    Unavailable(String),
}

impl AuditReadError {
    /// The Status a client gets.
    pub fn status(&self) -> Status {
        match self {
            AuditReadError::NotAdmin(_) => Status::failure(403, "Forbidden", self.to_string()),
            AuditReadError::Filter(_) => Status::bad_request(self.to_string()),
            AuditReadError::Unavailable(_) => Status::unavailable(self.to_string()),
        }
    }
}

impl Audit {
    /// The rows `query` (a URL query of filters) selects, for an
    /// authenticated `identity` that must be an admin person.
    pub async fn read_as(&self, identity: &Identity, query: Option<&str>) -> Result<Vec<ChainedRow>, AuditReadError> {
        Ok(self.page_as(identity, query).await?.0)
    }

    /// [`Audit::read_as`], and whether the rows reached their limit (more
    /// may match: page with `after`).
    pub async fn page_as(
        &self,
        identity: &Identity,
        query: Option<&str>,
    ) -> Result<(Vec<ChainedRow>, bool), AuditReadError> {
        if !self.is_admin(identity).await? {
            let who = match &identity.agent {
                Some(agent) => format!("{}'s agent {}", identity.principal, agent.name),
                None => identity.principal.to_string(),
            };
            return Err(AuditReadError::NotAdmin(who));
        }
        let mut filter = Filter::from_query(query.unwrap_or(""), chrono::Utc::now())?;
        let limit = filter.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
        filter.limit = Some(limit);
        let rows = self
            .query(filter)
            .await
            .map_err(|e| AuditReadError::Unavailable(e.to_string()))?;
        let full = rows.len() >= limit;
        Ok((rows, full))
    }

    async fn is_admin(&self, identity: &Identity) -> Result<bool, AuditReadError> {
        // An admin's agent acts for them but is not them: it never reads
        // everyone's activity (nor does a prompt that steers it).
        if identity.principal.kind != PrincipalKind::Person || identity.is_agent() {
            return Ok(false);
        }
        let store = self.store.clone();
        let principal = identity.principal.clone();
        tokio::task::spawn_blocking(move || store.is_admin(&principal))
            .await
            .map_err(|e| AuditReadError::Unavailable(e.to_string()))?
            .map_err(|e| AuditReadError::Unavailable(e.to_string()))
    }
}

impl Audit {
    /// The API server's events of request `audit_id` (every stage), for an
    /// admin who was just allowed to read its rows.
    pub async fn apiserver_events(&self, audit_id: &str) -> Result<Vec<crate::store::ApiserverEvent>, AuditReadError> {
        let (store, id) = (self.store.clone(), audit_id.to_string());
        tokio::task::spawn_blocking(move || store.apiserver_events(&id))
            .await
            .map_err(|e| AuditReadError::Unavailable(e.to_string()))?
            .map_err(|e| AuditReadError::Unavailable(e.to_string()))
    }
}
