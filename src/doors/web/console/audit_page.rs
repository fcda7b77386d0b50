//! The audit page's HTML ([`super::audit`]): the search form, then the
//! rows, newest first, as a list that wraps on a phone, each with the API
//! server's stages of the same request. Every field is client- or
//! cluster-controlled text, and escaped.

use super::audit::{Search, OUTCOMES, PAGE_ROWS};
use super::render::links;
use super::time::time;
use crate::audit::row::AuditRow;
use crate::doors::web::pages::{escape, page_with_links};
use crate::store::ApiserverEvent;
use chrono::{DateTime, Utc};

/// What a search found.
#[derive(Debug, Default)]
pub struct Found {
    /// The rows, newest first, each with the API server's events of its
    /// audit id.
    pub rows: Vec<(AuditRow, Vec<ApiserverEvent>)>,
    /// When the search named an audit id portcullis has no row of: the
    /// API server's events of it.
    pub unmatched: Vec<ApiserverEvent>,
}

/// Who reads the page, what they searched, and now (for relative times).
#[derive(Debug)]
pub struct Shown<'a> {
    /// The admin's login.
    pub login: &'a str,
    /// Their session's CSRF token (for signing out).
    pub csrf: &'a str,
    /// The search, to fill the form again.
    pub search: &'a Search,
    /// Now.
    pub now: DateTime<Utc>,
}

/// The page: the form, then what was found or why the search is wrong.
pub fn page(shown: &Shown, found: Result<&Found, &str>) -> String {
    let results = match found {
        Ok(found) => results(found, shown.now),
        Err(why) => format!("<p class=\"del\" id=\"search-error\">{}</p>", escape(why)),
    };
    let body = format!("<h1>Audit</h1>{}{results}", form(shown.search));
    page_with_links("Audit", Some((shown.login, shown.csrf)), links(true), &body)
}

fn form(search: &Search) -> String {
    let input = |name: &str, label: &str, value: &str| {
        format!(
            "<label for=\"{name}\">{label}</label>\
             <input id=\"{name}\" name=\"{name}\" value=\"{}\" autocomplete=\"off\">",
            crate::doors::web::pages::attr(value)
        )
    };
    let outcomes: String = OUTCOMES
        .iter()
        .map(|o| {
            let selected = if search.outcome == *o { " selected" } else { "" };
            format!("<option{selected}>{o}</option>")
        })
        .collect();
    [
        "<form method=\"get\" action=\"/console/audit\">".to_string(),
        input("id", "Audit id", &search.id),
        input("login", "Person", &search.login),
        input("cluster", "Cluster", &search.cluster),
        input("since", "Since (a time, or a duration ago like 1h)", &search.since),
        input("until", "Until", &search.until),
        format!(
            "<label for=\"outcome\">Outcome</label><select id=\"outcome\" name=\"outcome\">\
             <option value=\"\">any</option>{outcomes}</select>"
        ),
        "<button type=\"submit\" id=\"search\">Search</button></form>".to_string(),
    ]
    .concat()
}

fn results(found: &Found, now: DateTime<Utc>) -> String {
    if found.rows.is_empty() {
        let unmatched = if found.unmatched.is_empty() {
            String::new()
        } else {
            format!(
                "<p>The API server saw this request, but portcullis has no row of it:</p>{}",
                stages(&found.unmatched)
            )
        };
        return format!("<h2>No row matches</h2>{unmatched}");
    }
    let more = if found.rows.len() >= PAGE_ROWS {
        " <span class=\"muted\">(the newest only: narrow the search for older ones)</span>"
    } else {
        ""
    };
    let items: String = found.rows.iter().map(|(row, events)| item(row, events, now)).collect();
    let count = match found.rows.len() {
        1 => "1 row".to_string(),
        n => format!("{n} rows"),
    };
    format!("<h2>{count}, newest first{more}</h2><ul class=\"items\" id=\"rows\">{items}</ul>")
}

/// One row: what, when, who, where, the answer, and the API server's
/// stages of it.
fn item(row: &AuditRow, events: &[ApiserverEvent], now: DateTime<Utc>) -> String {
    let mut what = row.resource.clone();
    if !row.subresource.is_empty() {
        what = format!("{what}/{}", row.subresource);
    }
    if !row.name.is_empty() {
        what = format!("{what} {}", row.name);
    }
    let namespace = if row.namespace.is_empty() {
        String::new()
    } else {
        format!(" / {}", escape(&row.namespace))
    };
    let refused = if row.refused.is_empty() {
        String::new()
    } else {
        format!(" · refused: <span class=\"del\">{}</span>", escape(&row.refused))
    };
    let kind = if row.kind.is_empty() {
        String::new()
    } else {
        format!(" · <span class=\"state\">{}</span>", escape(&row.kind))
    };
    format!(
        "<li id=\"row-{id}\"><b>{verb}</b> {what} · {at}{kind}<br>by <b>{login}</b> on {cluster}{namespace} \
         · code {code}{refused} · via {via}<br><code>{method} {path}</code><br>\
         <span class=\"muted\">audit id</span> <code>{id}</code>{stages}</li>",
        id = escape(&row.id),
        verb = escape(&row.verb),
        what = escape(&what),
        at = time(row.started_at, now),
        login = escape(&row.login),
        cluster = escape(&row.cluster),
        code = row.code,
        via = escape(&row.via),
        method = escape(&row.method),
        path = escape(&row.path),
        stages = if events.is_empty() {
            "<p class=\"muted\">No API server event of this request.</p>".to_string()
        } else {
            stages(events)
        },
    )
}

/// The API server's stages of one request: its answer, whom it saw, and
/// why its authorizer let the request through or not.
fn stages(events: &[ApiserverEvent]) -> String {
    let items: String = events
        .iter()
        .map(|e| {
            let who = if e.impersonated_user.is_empty() {
                format!("by {} (no impersonation)", escape(&e.user))
            } else {
                format!(
                    "as <b>{}</b> in {}",
                    escape(&e.impersonated_user),
                    escape(&e.impersonated_groups.join(", "))
                )
            };
            format!(
                "<li class=\"stage\"><b>{stage}</b> · code {code} · {who} · {decision}: {reason}</li>",
                stage = escape(&e.stage),
                code = e.code,
                decision = escape(if e.decision.is_empty() {
                    "no decision"
                } else {
                    &e.decision
                }),
                reason = escape(&e.reason),
            )
        })
        .collect();
    format!("<p>The API server's stages:</p><ul>{items}</ul>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> ApiserverEvent {
        ApiserverEvent {
            audit_id: "a1".into(),
            stage: "ResponseComplete".into(),
            cluster: "sim".into(),
            verb: "get".into(),
            request_uri: "/api/v1/pods".into(),
            user: "system:serviceaccount:portcullis:portcullis".into(),
            impersonated_user: "user:<b>ana</b>".into(),
            impersonated_groups: vec!["portcullis:grant:1".into()],
            source_ips: Vec::new(),
            user_agent: String::new(),
            code: 200,
            decision: "allow".into(),
            reason: "RBAC: allowed by RoleBinding \"grant-1/shop\"".into(),
            received_at: Utc::now(),
            stage_at: Utc::now(),
        }
    }

    #[test]
    fn every_field_of_a_row_and_of_its_stages_is_escaped() {
        let row = AuditRow {
            id: "a1".into(),
            verb: "get".into(),
            resource: "pods".into(),
            name: "<script>alert(1)</script>".into(),
            path: "/clusters/sim/<img src=x>".into(),
            login: "ana\"><i>".into(),
            refused: "<path>".into(),
            ..AuditRow::default()
        };
        let found = Found {
            rows: vec![(row, vec![event()])],
            unmatched: Vec::new(),
        };
        let html = results(&found, Utc::now());
        for raw in ["<script>", "<img", "<i>", "<path>", "<b>ana</b>"] {
            assert!(!html.contains(raw), "{raw} is escaped: {html}");
        }
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("allow: RBAC: allowed by RoleBinding &quot;grant-1/shop&quot;"));
    }

    #[test]
    fn an_audit_id_the_api_server_saw_without_a_portcullis_row_shows_its_stages_alone() {
        let found = Found {
            rows: Vec::new(),
            unmatched: vec![event()],
        };
        let html = results(&found, Utc::now());
        assert!(html.contains("portcullis has no row of it"), "{html}");
        assert!(html.contains("ResponseComplete"), "{html}");
    }
}
