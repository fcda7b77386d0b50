//! `POST /oauth/revoke`: token revocation (RFC 7009). A refresh token ends
//! its whole agent session; an access token is revoked alone. An unknown
//! token is answered 200 like a known one (§2.2).

use super::{error, json, OAuth};
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::identity::authenticate::Authenticator;
use crate::identity::credential;
use crate::oauth::error::OAuthError;
use crate::oauth::tokens::{self, Revoked};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

/// Revoke the token the form names.
pub async fn serve(
    oauth: &OAuth,
    authenticator: &Authenticator,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    row.verb = "delete".into();
    row.resource = "tokens".into();
    if request.method() != Method::POST {
        return error(&OAuthError::invalid_request("revoke with POST"));
    }
    let within = crate::body::SMALL_BODY_WITHIN;
    let Ok(bytes) = crate::body::read_whole(request.into_body(), 16 * 1024, within).await else {
        return error(&OAuthError::invalid_request(
            "the request is too large, too slow or was cut short",
        ));
    };
    let Some(token) = form_urlencoded::parse(&bytes)
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
    else {
        return error(&OAuthError::invalid_request("token is missing"));
    };
    let store = oauth.store.clone();
    let digest = credential::digest(&token);
    let ended = tokio::task::spawn_blocking(move || tokens::revoke(&store, &token)).await;
    match ended {
        Ok(Ok(revoked)) => {
            // Only what was revoked leaves the credential cache: forgetting
            // also voids the cache fills in flight, which an unknown token
            // must not be able to do for everyone's.
            match revoked {
                Revoked::Session(session) => {
                    authenticator.forget_agent(&session);
                    authenticator.forget_digest(&digest);
                    row.session = session;
                }
                Revoked::Credential => authenticator.forget_digest(&digest),
                Revoked::Nothing => {}
            }
            json(StatusCode::OK, "{}".into())
        }
        Ok(Err(e)) => error(&e),
        Err(_) => error(&OAuthError::unavailable()),
    }
}
