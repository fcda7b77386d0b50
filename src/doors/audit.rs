//! `GET /audit?<filters>`: the audit for admins, as JSON lines.
//!
//! Authenticated with a person's bearer token like any request; who may
//! read it and which rows a query selects are the audit's own
//! ([`crate::audit::read`]). This door only writes the rows out. Asked for
//! one audit id (`?id=`), each row carries the API server's events of the
//! same request beside it (`apiserver`: its stages, response code, the
//! user it impersonated and its RBAC decision and reason); a request the
//! API server saw but portcullis has no row of is a line of its own.

use crate::audit::read::AuditReadError;
use crate::audit::row::ChainedRow;
use crate::audit::Audit;
use crate::body::{self, Body};
use crate::identity::Identity;
use crate::store::ApiserverEvent;
use http::{HeaderValue, Response};
use serde::Serialize;

/// A row with the API server's events of the same request.
#[derive(Serialize)]
struct Joined<'a> {
    #[serde(flatten)]
    row: Option<&'a ChainedRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    apiserver: Vec<&'a ApiserverEvent>,
}

/// Answer `GET /audit?query` for an authenticated `identity`.
pub async fn serve(audit: &Audit, identity: &Identity, query: Option<&str>) -> Result<Response<Body>, AuditReadError> {
    let (rows, full) = audit.page_as(identity, query).await?;
    let id = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(name, value)| name == "id" && !value.is_empty())
        .map(|(_, value)| value.into_owned());
    let events = match &id {
        Some(id) => audit.apiserver_events(id).await?,
        None => Vec::new(),
    };
    let mut lines = Vec::with_capacity(rows.len() * 512);
    let unavailable = |e: serde_json::Error| AuditReadError::Unavailable(e.to_string());
    for row in &rows {
        if id.is_some() {
            // An id is the client's to choose: another cluster's request
            // under the same id is not this row's.
            let joined = Joined {
                row: Some(row),
                id: None,
                apiserver: events.iter().filter(|event| event.cluster == row.row.cluster).collect(),
            };
            serde_json::to_writer(&mut lines, &joined).map_err(unavailable)?;
        } else {
            serde_json::to_writer(&mut lines, row).map_err(unavailable)?;
        }
        lines.push(b'\n');
    }
    if rows.is_empty() && !events.is_empty() {
        let joined = Joined {
            row: None,
            id: id.as_deref(),
            apiserver: events.iter().collect(),
        };
        serde_json::to_writer(&mut lines, &joined).map_err(unavailable)?;
        lines.push(b'\n');
    }
    let mut response = Response::new(body::full(lines));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl"),
    );
    // Rows past the limit are not dropped in silence: the reader pages on
    // with `after=<the last row's seq>`.
    if full {
        headers.insert("portcullis-more-rows", HeaderValue::from_static("true"));
    }
    // Who did what: never kept by a cache on the way, never sniffed.
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}
