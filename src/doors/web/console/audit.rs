//! `GET /console/audit`: the audit for admins, searched by audit id,
//! person, cluster, time and outcome; each row with the API server's
//! stages of the same request beside it (the join of issue 21).
//!
//! Read through [`Audit::read_as`] and [`Audit::apiserver_events`], as
//! `GET /audit` reads it: who may read it and how a search selects rows are
//! the audit's own. A read, so the form is a GET without a CSRF token.
//! Every field shown came from a client or a cluster and is escaped
//! ([`super::audit_page`]).

use super::super::{html, pages};
use super::audit_page::{self, Found, Shown};
use crate::audit::read::AuditReadError;
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::audit::Audit;
use crate::body::Body;
use crate::doors::web::session::Session;
use crate::identity::{Identity, Principal};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

/// The most rows one search shows: the newest.
pub const PAGE_ROWS: usize = 100;

/// A search as typed in the form (kept to fill the form again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// Audit id.
    pub id: String,
    /// Person's login (or bot's name).
    pub login: String,
    /// Cluster.
    pub cluster: String,
    /// From when: RFC 3339 or a duration ago (`1h`).
    pub since: String,
    /// Until when, likewise.
    pub until: String,
    /// `allowed`, `denied`, `refused`, `alert`, or empty for any.
    pub outcome: String,
}

/// The outcomes the form offers; `alert` is a row's kind, the others the
/// filter's outcomes.
pub const OUTCOMES: &[&str] = &["allowed", "denied", "refused", "alert"];

impl Search {
    /// The search in the page's URL query; unknown parameters are ignored.
    pub fn from_query(query: Option<&str>) -> Search {
        let mut search = Search::default();
        for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let value = value.trim().to_string();
            match &*name {
                "id" => search.id = value,
                "login" => search.login = value,
                "cluster" => search.cluster = value,
                "since" => search.since = value,
                "until" => search.until = value,
                "outcome" => search.outcome = value,
                _ => {}
            }
        }
        search
    }

    /// The search as the audit's filter query (`crate::audit::query`),
    /// at most [`PAGE_ROWS`] rows.
    pub fn filter_query(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        let fields = [
            ("id", &self.id),
            ("login", &self.login),
            ("cluster", &self.cluster),
            ("since", &self.since),
            ("until", &self.until),
        ];
        for (name, value) in fields {
            if !value.is_empty() {
                query.append_pair(name, value);
            }
        }
        match self.outcome.as_str() {
            "" => {}
            "alert" => {
                query.append_pair("kind", "alert");
            }
            outcome => {
                query.append_pair("outcome", outcome);
            }
        }
        query.append_pair("limit", &PAGE_ROWS.to_string());
        query.finish()
    }
}

/// Serve the audit page to the signed-in `s` (`csrf` their session's
/// token, for signing out); only admins may read it.
pub async fn serve(
    audit: &Audit,
    s: &Session,
    csrf: &str,
    request: Request<Incoming>,
    row: &mut AuditRow,
) -> Response<Body> {
    if request.method() != Method::GET {
        return html(
            StatusCode::METHOD_NOT_ALLOWED,
            pages::message("Not allowed", "The audit page is only read."),
        );
    }
    let search = Search::from_query(request.uri().query());
    let identity = Identity {
        principal: Principal::person(&s.login),
        credential_id: s.credential_id.clone(),
        agent: None,
        origin: None,
    };
    let shown = Shown {
        login: &s.login,
        csrf,
        search: &search,
        now: chrono::Utc::now(),
    };
    match find(audit, &identity, &search).await {
        Ok(found) => html(StatusCode::OK, audit_page::page(&shown, Ok(&found))),
        Err(AuditReadError::NotAdmin(_)) => {
            row.refuse(Refusal::NotAdmin);
            html(
                StatusCode::FORBIDDEN,
                pages::message("Forbidden", "Only people marked admin may read the audit."),
            )
        }
        Err(AuditReadError::Filter(error)) => html(
            StatusCode::BAD_REQUEST,
            audit_page::page(&shown, Err(&error.to_string())),
        ),
        Err(AuditReadError::Unavailable(_)) => {
            row.refuse(Refusal::AuditUnavailable);
            super::super::unavailable()
        }
    }
}

/// The rows `search` selects, newest first, each with the API server's
/// events of its audit id; and when the search names an audit id
/// portcullis has no row of, the API server's events of it alone.
async fn find(audit: &Audit, identity: &Identity, search: &Search) -> Result<Found, AuditReadError> {
    let mut rows = audit.read_as(identity, Some(&search.filter_query())).await?;
    rows.reverse();
    let mut found = Found::default();
    for chained in rows {
        // An id is the client's to choose: another cluster's request under
        // the same id is not this row's.
        let mut events = audit.apiserver_events(&chained.row.id).await?;
        events.retain(|event| event.cluster == chained.row.cluster);
        found.rows.push((chained.row, events));
    }
    if found.rows.is_empty() && !search.id.is_empty() {
        found.unmatched = audit.apiserver_events(&search.id).await?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::query::{Filter, Outcome};

    #[test]
    fn a_search_becomes_the_audits_own_filter_with_at_most_a_hundred_rows() {
        let search = Search::from_query(Some("id=a1&login=ana&cluster=sim&since=1h&outcome=refused&csrf=x"));
        let now = chrono::Utc::now();
        let filter = Filter::from_query(&search.filter_query(), now).unwrap();
        assert_eq!(filter.id.as_deref(), Some("a1"));
        assert_eq!(filter.login.as_deref(), Some("ana"));
        assert_eq!(filter.cluster.as_deref(), Some("sim"));
        assert_eq!(filter.since, Some(now - chrono::TimeDelta::hours(1)));
        assert_eq!(filter.outcome, Some(Outcome::Refused));
        assert_eq!(filter.limit, Some(PAGE_ROWS));
    }

    #[test]
    fn the_alert_outcome_searches_for_rows_of_kind_alert_and_an_empty_search_for_everything() {
        let now = chrono::Utc::now();
        let alerts = Search::from_query(Some("outcome=alert&login="));
        let filter = Filter::from_query(&alerts.filter_query(), now).unwrap();
        assert_eq!((filter.kind.as_deref(), filter.outcome), (Some("alert"), None));
        assert_eq!(filter.login, None);
        let everything = Filter::from_query(&Search::default().filter_query(), now).unwrap();
        assert_eq!(
            everything,
            Filter {
                limit: Some(PAGE_ROWS),
                ..Filter::default()
            }
        );
    }
}
