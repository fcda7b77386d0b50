//! Forms posted to the pages: read within a size limit, and for a
//! signed-in person checked against the session's CSRF token.

use super::{html, pages, session, Session};
use crate::approvals::seal;
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::Body;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use std::collections::HashMap;

/// The largest form accepted.
const FORM_LIMIT: usize = 16 * 1024;

/// A form's fields by name.
pub(super) type Form = HashMap<String, String>;

/// A signed-in person's form: read, and its CSRF token checked against the
/// session; else the page that refuses it (a forged form's refusal goes
/// into `row`).
pub(crate) async fn session_form(
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Result<Form, Response<Body>> {
    let fields = session_form_fields(key, s, request, row).await?;
    Ok(fields.into_iter().collect())
}

/// [`session_form`], keeping every field in order, a repeated name's
/// values included (a list of checkboxes).
pub(crate) async fn session_form_fields(
    key: &seal::Key,
    s: &Session,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Result<Vec<(String, String)>, Response<Body>> {
    let Some(fields) = read_fields(request).await else {
        return Err(html(
            StatusCode::BAD_REQUEST,
            pages::message("Refused", "The form could not be read."),
        ));
    };
    let csrf = fields
        .iter()
        .find(|(name, _)| name == "csrf")
        .map_or("", |(_, v)| v.as_str());
    if !session::csrf_ok(key, s, csrf) {
        row.refuse(Refusal::Csrf);
        return Err(html(
            StatusCode::FORBIDDEN,
            pages::message("Refused", "The form expired; reload the page."),
        ));
    }
    Ok(fields)
}

/// The form a request posts, or `None` when it is too large or unreadable.
pub(super) async fn read_form(request: Request<Incoming>) -> Option<Form> {
    Some(read_fields(request).await?.into_iter().collect())
}

/// The fields a request posts, in order, or `None` when it is too large or
/// unreadable.
async fn read_fields(request: Request<Incoming>) -> Option<Vec<(String, String)>> {
    let within = crate::body::SMALL_BODY_WITHIN;
    let bytes: Bytes = crate::body::read_whole(request.into_body(), FORM_LIMIT, within)
        .await
        .ok()?;
    Some(form_urlencoded::parse(&bytes).into_owned().collect())
}

/// A form field's value, empty when it was not sent.
pub(super) fn field<'f>(form: &'f Form, name: &str) -> &'f str {
    form.get(name).map_or("", String::as_str)
}
