//! The OAuth door: the discovery documents (`metadata`), the one token
//! endpoint (`token`: authorization codes, refresh tokens, and the CI token
//! exchange of `crate::ci`; and `portcullis login`'s loopback and device
//! codes, so there is one token endpoint), Dynamic Client Registration
//! (`register`) and revocation (`revoke`). The consent page, `/oauth/authorize`, is a page
//! of the web door (`crate::doors::web::consent`): it needs the person's
//! sign-in session.
//!
//! Only the two documents and the token endpoint answer cross-origin
//! requests (`Access-Control-Allow-Origin: *`, preflights included): a
//! browser-based client must read them, and none of them acts on a cookie.
//! Registration, token and revocation requests are rate-limited per
//! address, and refreshes per client instance too (the agent session the
//! refresh token is of, never a client_id the form merely names; the
//! consent page spends a client's budget only by fetching its metadata
//! document).

pub use crate::oauth::metadata;
pub mod register;
mod revoke;
mod token;

use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::{self, Body};
use crate::config::Config;
use crate::gateway::router::OAuthEndpoint;
use crate::identity::authenticate::Authenticator;
use crate::oauth::client::Clients;
use crate::oauth::error::OAuthError;
use crate::ratelimit::RateLimiter;
use crate::reconcile::Reconciler;
use crate::store::Store;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use metadata::{Document, Issuer};
use std::sync::{Arc, OnceLock};

/// What the OAuth door borrows from the other doors: the authenticator
/// (to drop revoked tokens from its cache), and the web door's sign-in
/// state (the command line's codes and devices, exchanged here too).
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    /// The credential cache.
    pub authenticator: &'a Authenticator,
    /// Held writes and the store, as the web door has them.
    pub approvals: &'a crate::approvals::Approvals,
    /// The web door's sign-in state.
    pub web: &'a crate::doors::web::Web,
}

/// The OAuth endpoints.
#[derive(Debug)]
pub struct OAuth {
    store: Store,
    issuer: Issuer,
    clients: Arc<Clients>,
    limiter: RateLimiter,
    reconciler: OnceLock<Arc<Reconciler>>,
    ci: crate::ci::Exchange,
}

impl OAuth {
    /// The endpoints over `store`, with the client resolver the consent
    /// page shares.
    pub fn new(config: &Config, store: Store, clients: Arc<Clients>) -> Result<OAuth, String> {
        let per_minute = config.oauth.requests_per_minute.max(1);
        Ok(OAuth {
            issuer: Issuer::new(&config.public_url),
            limiter: RateLimiter::new(per_minute, per_minute),
            ci: crate::ci::Exchange::new(config, store.clone()).map_err(|e| e.to_string())?,
            store,
            clients,
            reconciler: OnceLock::new(),
        })
    }

    /// Bind a new agent session's narrowed grants through `reconciler`
    /// before its first token is handed out.
    pub fn set_reconciler(&self, reconciler: Arc<Reconciler>) {
        let _ = self.reconciler.set(reconciler);
    }

    /// Serve one request to `endpoint`.
    pub async fn serve(
        &self,
        endpoint: OAuthEndpoint<'_>,
        doors: Shared<'_>,
        request: Request<Incoming>,
        row: &mut AuditRow,
    ) -> Response<Body> {
        let authenticator = doors.authenticator;
        row.verb = request.method().as_str().to_ascii_lowercase();
        row.api_group = "portcullis.dev".into();
        match endpoint {
            OAuthEndpoint::WellKnown(path) => self.document(path, request.method()),
            OAuthEndpoint::Token => {
                if request.method() == Method::OPTIONS {
                    return preflight();
                }
                let mut response = match self.limit("token", &format!("addr:{}", row.client)) {
                    Err(error) => refused(row, error),
                    Ok(()) => token::serve(self, doors, request, row).await,
                };
                cors(&mut response);
                response
            }
            OAuthEndpoint::Register => match self.limit("register", &by_address(&row.client)) {
                Err(error) => refused(row, error),
                Ok(()) => register::serve(&self.clients, request, row).await,
            },
            OAuthEndpoint::Revoke => match self.limit("revoke", &format!("addr:{}", row.client)) {
                Err(error) => refused(row, error),
                Ok(()) => revoke::serve(self, authenticator, request, row).await,
            },
        }
    }

    /// One of the discovery documents, or 404.
    fn document(&self, path: &str, method: &Method) -> Response<Body> {
        let Some(document) = self.issuer.document(path) else {
            return text(StatusCode::NOT_FOUND, "no such document");
        };
        if method == Method::OPTIONS {
            return preflight();
        }
        if method != Method::GET && method != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "use GET");
        }
        let body = match document {
            Document::ProtectedResource => self.issuer.protected_resource(),
            Document::AuthorizationServer => self.issuer.authorization_server(),
        };
        let mut response = Response::new(body::full(body.to_string()));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
        cors(&mut response);
        response
    }

    /// Rate limit `endpoint`'s requests by `who` (`addr:<address>` or
    /// `session:<agent id>`): each endpoint has its own budget per address
    /// and per client instance.
    fn limit(&self, endpoint: &str, who: &str) -> Result<(), OAuthError> {
        self.limiter
            .check(&format!("{endpoint}:{who}"))
            .map_err(|wait| OAuthError::rate_limited(wait.as_secs().max(1)))
    }
}

/// An OAuth error as its JSON, with `Cache-Control: no-store`.
pub(crate) fn error(error: &OAuthError) -> Response<Body> {
    let mut response = json(
        StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST),
        error.body(),
    );
    if error.status == 401 {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"portcullis\""),
        );
    }
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A refusal noted in the audit row, answered as its OAuth error.
fn refused(row: &mut AuditRow, e: OAuthError) -> Response<Body> {
    if e.status == 429 {
        row.refuse(Refusal::RateLimited);
    }
    error(&e)
}

/// A JSON answer that no cache keeps (RFC 6749 §5.1).
pub(crate) fn json(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(body::full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

fn text(status: StatusCode, message: &'static str) -> Response<Body> {
    let mut response = Response::new(body::full(message));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn cors(response: &mut Response<Body>) {
    response
        .headers_mut()
        .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
}

/// The answer to a CORS preflight of a document or the token endpoint.
fn preflight() -> Response<Body> {
    let mut response = Response::new(body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
    );
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    response
}

/// The key of registration's limit for a client address: an IPv6 host's
/// whole /64, which it usually holds, counts as one, since what it
/// registers is kept for weeks. (The token endpoint's and revocation's
/// limits stay per address: CI jobs on one node's /64 exchange tokens
/// each.)
fn by_address(client: &str) -> String {
    format!("addr:{}", crate::identity::authenticate::address_key(client))
}

#[cfg(test)]
mod tests {
    /// One IPv6 host usually holds a whole /64: its addresses share a
    /// budget, as failed authentications do.
    #[test]
    fn the_addresses_of_one_ipv6_64_share_a_limit_and_ipv4_addresses_do_not() {
        assert_eq!(
            super::by_address("2001:db8:1:2::1"),
            super::by_address("2001:db8:1:2:ffff::9")
        );
        assert_ne!(
            super::by_address("2001:db8:1:2::1"),
            super::by_address("2001:db8:1:3::1")
        );
        assert_ne!(super::by_address("192.0.2.1"), super::by_address("192.0.2.2"));
    }
}
