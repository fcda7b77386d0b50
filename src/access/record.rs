//! Access request steps in the audit: one row each, in the same hash chain
//! as requests, so `portcullis audit --resource accessrequests` lists them.
//!
//! These steps happen in the CLI (a separate process) as often as in the
//! server, so each row goes into the hash chain at once (through
//! [`crate::audit::commit_event`], and a decision's through
//! [`crate::audit::begin_event`], its intent before the decision), and into
//! the JSON lines export through the running server's writer.
//!
//! A row reads like a request on a resource of portcullis's own:
//! api group `portcullis.dev`, resource `accessrequests`, the request id as
//! name, verb `request`, `approve`, `deny` or `expire`; the actor as
//! principal (the requester for `request` and `expire`); the agent, if one
//! asked, as session; role, duration and grant in the query.

use super::AccessRequest;
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::audit::AuditError;
use crate::identity::Principal;
use crate::store::Store;
use chrono::Utc;

/// One step of a request's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Asked.
    Request,
    /// Approved (a grant was made).
    Approve,
    /// Denied.
    Deny,
    /// Expired undecided.
    Expire,
}

impl Step {
    fn verb(self) -> &'static str {
        match self {
            Step::Request => "request",
            Step::Approve => "approve",
            Step::Deny => "deny",
            Step::Expire => "expire",
        }
    }
}

/// Commit the row of `step` by `actor` on `request`; `refused` is set when
/// the actor was not allowed (the row then has code 403).
pub fn step(
    store: &Store,
    step: Step,
    actor: &Principal,
    request: &AccessRequest,
    refused: Option<Refusal>,
) -> Result<(), AuditError> {
    crate::audit::commit_event(store, row(step, actor, request, None, refused))
}

/// A decision of `actor` on `request` about to be made: its row's intent
/// is on record before the decision (see [`crate::audit::Recorded`]).
pub fn begin(
    store: &Store,
    step: Step,
    actor: &Principal,
    request: &AccessRequest,
) -> Result<crate::audit::Recorded, AuditError> {
    crate::audit::begin_event(store, row(step, actor, request, None, None))
}

/// The row of `step` by `actor` on `request`, and of the grant it made.
pub fn row(
    step: Step,
    actor: &Principal,
    request: &AccessRequest,
    grant: Option<&str>,
    refused: Option<Refusal>,
) -> AuditRow {
    let mut row = row_of(step, actor, request, refused);
    if let Some(grant) = grant.filter(|_| request.grant_id.is_none()) {
        let mut query = form_urlencoded::Serializer::new(std::mem::take(&mut row.query));
        query.append_pair("grant", grant);
        row.query = query.finish();
    }
    row
}

fn row_of(step: Step, actor: &Principal, request: &AccessRequest, refused: Option<Refusal>) -> AuditRow {
    let now = Utc::now();
    let mut row = AuditRow::new(crate::audit::id::new(), now);
    row.cluster = request.cluster.clone();
    row.principal_kind = actor.kind.as_str().into();
    row.login = actor.name.clone();
    row.session = request
        .agent_id
        .clone()
        .filter(|_| matches!(step, Step::Request))
        .unwrap_or_default();
    row.path = format!("/access/{}", request.id);
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("role", &request.role);
    query.append_pair("duration", &humantime::format_duration(request.duration).to_string());
    if let Some(grant) = &request.grant_id {
        query.append_pair("grant", grant);
    }
    row.query = query.finish();
    row.verb = step.verb().into();
    row.api_group = "portcullis.dev".into();
    row.api_version = "v1".into();
    row.resource = "accessrequests".into();
    row.namespace = request.namespace.clone().unwrap_or_default();
    row.name = request.id.clone();
    row.code = match (refused, step) {
        (Some(_), _) => 403,
        (None, Step::Request) => 201,
        (None, _) => 200,
    };
    if let Some(why) = refused {
        row.reason = "Forbidden".into();
        row.refuse(why);
    }
    // An approval changes who can do what: it is a write.
    row.write = step == Step::Approve && refused.is_none();
    row.finish(now);
    row
}
