//! The signed-in person's console, at `/` and `/console`: their grants
//! (and where each came from), asking for access and their requests' state,
//! what waits on them (access requests to decide here, held writes on the
//! approval pages), their credentials and agents (revoke), and a kubeconfig
//! to download ([`kubeconfig`]); for admins, the audit joined to the API
//! server's ([`audit`]).
//!
//! Server-rendered ([`render`]), one small style sheet, no script. Every
//! form posts under the session's CSRF token; every act is the session's
//! person's, through `crate::access` (asking, deciding, each step audited
//! there) or on their own credentials and agents only (the request's audit
//! row names what was revoked).

pub mod audit;
mod audit_page;
pub mod kubeconfig;
pub mod render;
pub mod time;

use super::session::{self, Session};
use super::{html, pages, redirect, session_form};
use crate::access::{self, decide as access_decide, AccessState};
use crate::approvals::{decide, Approvals};
use crate::audit::row::AuditRow;
use crate::body::{self, Body};
use crate::config::Config;
use crate::gateway::router::Page;
use crate::identity::authenticate::Authenticator;
use crate::identity::Principal;
use crate::store::{AccessRequest, Store};
use chrono::Utc;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use render::View;

/// Serve a console page for the signed-in `s`.
pub async fn serve(
    approvals: &Approvals,
    authenticator: &Authenticator,
    web: &super::signin::Web,
    s: &Session,
    page: Page<'_>,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    let config = web.config();
    let action = match page {
        Page::ConsoleAction(action) => action.to_string(),
        _ => String::new(),
    };
    let method = request.method().clone();
    match (method, action.as_str()) {
        (Method::GET, "") => show(approvals, config, s).await,
        (Method::GET, "kubeconfig") => download(approvals, config, s).await,
        (Method::POST, _) => act(approvals, authenticator, web, s, &action, request, row).await,
        _ => html(
            StatusCode::NOT_FOUND,
            pages::message("Not found", "There is no such console page."),
        ),
    }
}

async fn show(approvals: &Approvals, config: &std::sync::Arc<Config>, s: &Session) -> Response<Body> {
    let (store, config, s2) = (approvals.store.clone(), config.clone(), s.clone());
    let csrf = approvals.key.as_ref().map(|k| session::csrf(k, s)).unwrap_or_default();
    match tokio::task::spawn_blocking(move || view(&store, &config, &s2)).await {
        Ok(Ok(mut view)) => {
            view.csrf = csrf;
            html(StatusCode::OK, render::console(&view))
        }
        _ => super::unavailable(),
    }
}

/// Everything the console shows `s`. Blocking (the store).
fn view(store: &Store, config: &Config, s: &Session) -> Result<View, String> {
    let person = Principal::person(&s.login);
    let now = Utc::now();
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let grants = store.list_grants().map_err(|e| err(&e))?;
    // Agents' grants may be derived ones (a narrowed role), not the person's own.
    let grants_by_id = grants.iter().map(|g| (g.id.clone(), g.clone())).collect();
    let requests = access::list(store).map_err(|e| err(&e))?;
    let mut mine: Vec<AccessRequest> = requests.iter().filter(|r| r.requester == person).cloned().collect();
    mine.reverse();
    mine.truncate(20);
    let to_decide = requests
        .into_iter()
        .filter(|r| r.state == AccessState::Pending && may_decide(store, r, &person, now))
        .collect();
    Ok(View {
        login: s.login.clone(),
        now,
        // The person's own: grants narrowed for an agent session show with it.
        grants: store.own_grants_in_effect(&person).map_err(|e| err(&e))?,
        rules: store.group_rules().map_err(|e| err(&e))?,
        clusters: config.clusters.iter().map(|c| c.name.clone()).collect(),
        roles: crate::identity::roles::all(config)
            .into_iter()
            .map(|r| r.name)
            .collect(),
        mine,
        to_decide,
        held: decide::waiting_on(store, &person).map_err(|e| err(&e))?,
        credentials: own_credentials(store, &person)?,
        session_credential: s.credential_id.clone(),
        agents: store.agent_sessions_of(&person).map_err(|e| err(&e))?,
        agent_grants: grants_by_id,
        admin: store.is_admin(&person).map_err(|e| err(&e))?,
        agent_names: super::agent_names(store),
        ..View::default()
    })
}

fn own_credentials(store: &Store, person: &Principal) -> Result<Vec<crate::identity::Credential>, String> {
    store.live_credentials_of(person, Utc::now()).map_err(|e| e.to_string())
}

/// May `person` decide `request`, by their grants in effect?
fn may_decide(store: &Store, request: &AccessRequest, person: &Principal, now: chrono::DateTime<Utc>) -> bool {
    let Ok(grants) = store.grants_of(person, &request.cluster) else {
        return false;
    };
    let agent = request.agent_id.as_ref().and_then(|id| store.agent(id).ok().flatten());
    access_decide::authority(request, person, &grants, agent.as_ref(), now).is_ok()
}

/// `GET /console/kubeconfig`: contexts for the clusters the person holds a
/// grant on, as an attachment.
async fn download(approvals: &Approvals, config: &std::sync::Arc<Config>, s: &Session) -> Response<Body> {
    let (store, person) = (approvals.store.clone(), Principal::person(&s.login));
    let Ok(Ok(grants)) = tokio::task::spawn_blocking(move || store.list_grants()).await else {
        return super::unavailable();
    };
    let now = Utc::now();
    let mut clusters: Vec<String> = grants
        .into_iter()
        .filter(|g| g.subject == person && g.in_effect(now))
        .map(|g| g.cluster)
        .collect();
    clusters.sort();
    clusters.dedup();
    // No CA: portcullis's serving certificate is one clients already trust
    // (the server does not know the CA of a certificate it was handed).
    let text = kubeconfig::kubeconfig(&config.public_url, None, &clusters);
    let mut response = html(StatusCode::OK, String::new());
    *response.body_mut() = body::full(text);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"portcullis-kubeconfig.yaml\""),
    );
    response
}

/// A console form: checked against the session's CSRF token first.
async fn act(
    approvals: &Approvals,
    authenticator: &Authenticator,
    web: &super::signin::Web,
    s: &Session,
    action: &str,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    let Some(key) = approvals.key.as_ref() else {
        return super::unavailable();
    };
    let form = match session_form(key, s, request, row).await {
        Ok(form) => form,
        Err(refused) => return refused,
    };
    let (store, config, login) = (approvals.store.clone(), web.config().clone(), s.login.clone());
    let action = action.to_string();
    let done = tokio::task::spawn_blocking(move || forms::run(&store, &config, &login, &action, &form)).await;
    match done {
        Ok(Ok(noted)) => {
            if let Some(id) = &noted.revoked_credential {
                authenticator.forget(id);
            }
            if let Some(id) = &noted.revoked_agent {
                authenticator.forget_agent(id);
            }
            noted.note(row);
            if let (Some(cluster), Some(reconciler)) = (&noted.bind_cluster, web.reconciler()) {
                bind(reconciler, cluster).await;
            }
            redirect("/console", None)
        }
        Ok(Err(refused)) => refused.page(row),
        Err(_) => super::unavailable(),
    }
}

/// Bind an approved grant in `cluster` before the answer, as the person
/// API does, so the requester can use it at once; if the pass fails the
/// reconciler's next resync binds it.
async fn bind(reconciler: &crate::reconcile::Reconciler, cluster: &str) {
    match reconciler.pass_now(cluster).await {
        Ok(report) if report.outcome.ok() => {}
        Ok(report) => tracing::warn!(%cluster, errors = ?report.outcome.errors, "approved grant not bound yet"),
        Err(error) => tracing::warn!(%cluster, %error, "approved grant not bound yet"),
    }
}

mod forms;

/// The one place kubeconfig text is made: `portcullis kubeconfig` (the
/// command line) reuses it.
pub use kubeconfig::kubeconfig as kubeconfig_text;
