//! The console's forms, each the signed-in person's own act: asking for
//! access and deciding a request (through `crate::access`, which checks and
//! audits them), revoking one of their own credentials or agents.

use super::super::{html, pages, Form};
use crate::access::{self, AccessAsk, AccessError, Requester};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::config::Config;
use crate::identity::Principal;
use crate::signin::revoke::RevokeError;
use crate::store::Store;
use http::{Response, StatusCode};

/// What a form did, for the request's audit row.
#[derive(Debug, Default)]
pub struct Noted {
    /// The portcullis resource acted on (`credentials`, `agents`), if the
    /// domain did not record the act itself.
    resource: &'static str,
    /// Its id.
    name: String,
    /// The credential revoked, to forget from the authenticator's cache.
    pub revoked_credential: Option<String>,
    /// The agent revoked, whose credentials the cache forgets too.
    pub revoked_agent: Option<String>,
    /// The cluster of a grant just approved, to bind before the answer.
    pub bind_cluster: Option<String>,
}

impl Noted {
    /// Put what was done into the request's audit row.
    pub fn note(&self, row: &mut AuditRow) {
        if !self.resource.is_empty() {
            row.verb = "revoke".into();
            row.api_group = "portcullis.dev".into();
            row.api_version = "v1".into();
            row.resource = self.resource.into();
            row.name = self.name.clone();
            row.write = true;
        }
    }
}

/// Why a form did nothing: the status, what the person reads, and the
/// audit's word when portcullis refused.
#[derive(Debug)]
pub struct Refused {
    code: StatusCode,
    message: String,
    refusal: Option<Refusal>,
}

impl Refused {
    fn new(code: StatusCode, message: impl Into<String>) -> Refused {
        Refused {
            code,
            message: message.into(),
            refusal: None,
        }
    }

    /// The page saying why; the refusal in the row.
    pub fn page(self, row: &mut AuditRow) -> Response<Body> {
        if let Some(why) = self.refusal {
            row.refuse(why);
        }
        html(self.code, pages::message("Not done", &self.message))
    }
}

impl From<AccessError> for Refused {
    fn from(error: AccessError) -> Refused {
        let (code, refusal) = match &error {
            AccessError::Invalid(_) => (StatusCode::BAD_REQUEST, None),
            AccessError::NotFound(_) => (StatusCode::NOT_FOUND, None),
            AccessError::NotPending { .. } => (StatusCode::CONFLICT, None),
            AccessError::NotAllowed(_) => (StatusCode::FORBIDDEN, Some(Refusal::NotApprover)),
            _ => (StatusCode::SERVICE_UNAVAILABLE, None),
        };
        Refused {
            code,
            message: error.to_string(),
            refusal,
        }
    }
}

/// Run form `action` (the path after `/console/`) as `login`. Blocking.
pub fn run(store: &Store, config: &Config, login: &str, action: &str, form: &Form) -> Result<Noted, Refused> {
    let parts: Vec<&str> = action.split('/').collect();
    match parts[..] {
        ["access"] => ask(store, config, login, form),
        ["access", id] => decide(store, config, login, id, form),
        ["credentials", id, "revoke"] => revoke_credential(store, login, id),
        ["agents", id, "revoke"] => revoke_agent(store, login, id),
        _ => Err(Refused::new(StatusCode::NOT_FOUND, "There is no such form.")),
    }
}

fn ask(store: &Store, config: &Config, login: &str, form: &Form) -> Result<Noted, Refused> {
    let field = |name: &str| form.get(name).map_or("", String::as_str).trim().to_string();
    let duration = humantime::parse_duration(&field("duration"))
        .map_err(|_| Refused::new(StatusCode::BAD_REQUEST, "Choose how long the access is for."))?;
    let namespace = Some(field("namespace")).filter(|ns| !ns.is_empty());
    let ask = AccessAsk {
        cluster: field("cluster"),
        role: field("role"),
        namespace,
        duration,
        reason: field("reason"),
    };
    let requester = Requester {
        principal: Principal::person(login),
        agent_id: None,
    };
    access::request_access(store, config, &requester, &ask)?;
    Ok(Noted::default())
}

fn decide(store: &Store, config: &Config, login: &str, id: &str, form: &Form) -> Result<Noted, Refused> {
    let reason = form.get("reason").map(|r| r.trim()).filter(|r| !r.is_empty());
    match form.get("decision").map(String::as_str) {
        Some("approve") => {
            let (_, grant) = access::approve(store, config, id, login, reason)?;
            return Ok(Noted {
                bind_cluster: Some(grant.cluster),
                ..Noted::default()
            });
        }
        Some("deny") => access::deny(store, id, login, reason).map(|_| Noted::default())?,
        _ => return Err(Refused::new(StatusCode::BAD_REQUEST, "Choose Approve or Deny.")),
    };
    Ok(Noted::default())
}

fn revoke_refused(error: RevokeError) -> Refused {
    match error {
        RevokeError::NotYours { what, .. } => Refused::new(StatusCode::NOT_FOUND, format!("You have no such {what}.")),
        RevokeError::Store(_) | RevokeError::Audit(_) => {
            tracing::error!(%error, "a person's revocation failed");
            Refused::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "portcullis cannot revoke it now: nothing was changed.",
            )
        }
    }
}

fn revoke_credential(store: &Store, login: &str, id: &str) -> Result<Noted, Refused> {
    crate::signin::revoke::own_credential(store, &Principal::person(login), id).map_err(revoke_refused)?;
    Ok(Noted {
        resource: "credentials",
        name: id.into(),
        revoked_credential: Some(id.into()),
        ..Noted::default()
    })
}

/// An agent session ends whole: its tokens, refresh tokens and narrowed
/// grants with it.
fn revoke_agent(store: &Store, login: &str, id: &str) -> Result<Noted, Refused> {
    crate::signin::revoke::own_agent(store, &Principal::person(login), id).map_err(revoke_refused)?;
    Ok(Noted {
        resource: "agents",
        name: id.into(),
        revoked_agent: Some(id.into()),
        ..Noted::default()
    })
}
