//! `POST /oauth/register`: Dynamic Client Registration (RFC 7591). The
//! checks are `crate::oauth::register`'s; this door reads the bounded body
//! and answers in RFC 7591's JSON, errors included.

use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::ReadError;
use crate::body::{self, Body};
use crate::oauth::client::Clients;
use crate::oauth::error::OAuthError;
use crate::oauth::register::{self, MAX_BODY};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;

/// Register the client the request describes: 201 with its client
/// information, or the OAuth error with its status.
pub async fn serve(clients: &Clients, request: Request<Incoming>, row: &mut AuditRow) -> Response<Body> {
    row.verb = "create".into();
    row.api_group = "portcullis.dev".into();
    row.api_version = "v1".into();
    row.resource = "oauthclients".into();
    if request.method() != Method::POST {
        let mut error = OAuthError::invalid_request("register a client with POST");
        error.status = 405;
        let mut response = answer(&error);
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let body = match read(request).await {
        Ok(body) => body,
        Err((refusal, error)) => {
            row.refuse(refusal);
            return answer(&error);
        }
    };
    match clients.register(&body).await {
        Ok(client) => {
            row.name = client.client_id.clone();
            json(StatusCode::CREATED, register::response(&client).to_string())
        }
        Err(error) => {
            row.refuse(match error.error {
                "invalid_redirect_uri" => Refusal::OAuthRedirectRefused,
                "temporarily_unavailable" => Refusal::CredentialsUnavailable,
                _ => Refusal::OAuthRegistrationRefused,
            });
            answer(&error)
        }
    }
}

/// The body, at most [`MAX_BODY`] bytes: reading stops past it.
async fn read(request: Request<Incoming>) -> Result<Bytes, (Refusal, OAuthError)> {
    let too_large = || {
        let error =
            OAuthError::invalid_client_metadata(format!("the registration request is over {} KiB", MAX_BODY / 1024));
        (Refusal::BodyTooLarge, error)
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY as u64) {
        return Err(too_large());
    }
    match crate::body::read_whole(request.into_body(), MAX_BODY, crate::body::SMALL_BODY_WITHIN).await {
        Ok(bytes) => Ok(bytes),
        Err(ReadError::TooLarge) => Err(too_large()),
        Err(ReadError::TimedOut) => Err((
            Refusal::BodyTimedOut,
            OAuthError::invalid_request("the registration request did not arrive in time"),
        )),
        Err(ReadError::Cut) => Err((
            Refusal::OAuthRegistrationRefused,
            OAuthError::invalid_request("the registration request broke off"),
        )),
    }
}

fn answer(error: &OAuthError) -> Response<Body> {
    json(
        StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST),
        error.body(),
    )
}

fn json(code: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(body::full(text));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
