//! The API server's own audit events, received (its webhook backend in
//! batch mode: `audit.k8s.io/v1` `EventList` bodies, `crate::doors`) or
//! ingested from its log (JSON lines, `portcullis admin audit ingest`),
//! and kept for the join with portcullis's rows.
//!
//! Only what the join needs is read: the parser names the fields it keeps,
//! so `requestObject` and `responseObject` (which could hold Secret values)
//! are skipped while parsing, never held. Only events that concern
//! portcullis are kept: those of its ServiceAccount, and those
//! impersonating a `user:` or `bot:` name (someone else impersonating
//! portcullis's people); the rest are only counted.

use crate::config::ClusterConfig;
use crate::store::{ApiserverEvent, Store, StoreError};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::HashMap;

/// Longest audit id kept: the API server takes a client's `Audit-ID` as it
/// is, so it bounds what a client can make portcullis store.
const MAX_ID: usize = 128;

/// The stages an event can be at.
const STAGES: &[&str] = &["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"];

/// Why a batch was refused (nothing of it is kept).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// Not an `audit.k8s.io/v1` `EventList`, or an event without what the
    /// join needs.
    #[error("not an audit.k8s.io/v1 EventList: {0}")]
    Malformed(String),
    /// A JSON line that is not an `audit.k8s.io/v1` event.
    #[error("line {line}: not an audit.k8s.io/v1 event: {message}")]
    Line {
        /// From 1.
        line: usize,
        /// Why.
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
struct UserInfo {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

/// One event, as parsed: only the fields the join needs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(rename = "auditID")]
    audit_id: String,
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(rename = "requestURI", default)]
    request_uri: String,
    #[serde(default)]
    user: UserInfo,
    #[serde(default)]
    impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs", default)]
    source_ips: Vec<String>,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    response_status: Option<ResponseStatus>,
    #[serde(default)]
    annotations: HashMap<String, String>,
    request_received_timestamp: DateTime<Utc>,
    stage_timestamp: DateTime<Utc>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventList {
    kind: String,
    api_version: String,
    items: Vec<Event>,
}

/// What a batch brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ingested {
    /// Events about portcullis's requests or people, newly kept.
    pub kept: usize,
    /// Of those, already kept before (delivered again).
    pub duplicates: usize,
    /// Events of other users, counted and dropped.
    pub ignored: usize,
}

/// Parse a webhook body: one `EventList`, all of it well-formed or none.
pub fn parse_batch(body: &[u8]) -> Result<Vec<Event>, BatchError> {
    let list: EventList = serde_json::from_slice(body).map_err(|e| BatchError::Malformed(e.to_string()))?;
    if list.kind != "EventList" || list.api_version != "audit.k8s.io/v1" {
        return Err(BatchError::Malformed(format!(
            "kind {:?}, apiVersion {:?}",
            list.kind, list.api_version
        )));
    }
    for event in &list.items {
        check(event).map_err(BatchError::Malformed)?;
    }
    Ok(list.items)
}

/// Parse an audit log: one event a line (blank lines skipped), all of them
/// well-formed or none.
pub fn parse_lines(text: &str) -> Result<Vec<Event>, BatchError> {
    let mut events = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| BatchError::Line {
            line: index + 1,
            message,
        };
        let event: Event = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if event.kind != "Event" || event.api_version != "audit.k8s.io/v1" {
            return Err(bad(format!(
                "kind {:?}, apiVersion {:?}",
                event.kind, event.api_version
            )));
        }
        check(&event).map_err(bad)?;
        events.push(event);
    }
    Ok(events)
}

fn check(event: &Event) -> Result<(), String> {
    if event.audit_id.is_empty() || event.audit_id.len() > MAX_ID {
        return Err(format!("an auditID must have 1 to {MAX_ID} bytes"));
    }
    if !STAGES.contains(&event.stage.as_str()) {
        return Err(format!("unknown stage {:?}", event.stage));
    }
    Ok(())
}

/// Is `event` about portcullis: made with its ServiceAccount
/// `service_account`, or impersonating one of its people or bots?
pub fn concerns_portcullis(event: &Event, service_account: &str) -> bool {
    let impersonated = event.impersonated_user.as_ref().map(|u| u.username.as_str());
    event.user.username == service_account
        || impersonated.is_some_and(|name| name.starts_with("user:") || name.starts_with("bot:"))
}

/// Keep the events of `cluster` that concern portcullis, in one
/// transaction; the others are only counted.
pub fn ingest(store: &Store, cluster: &ClusterConfig, events: Vec<Event>) -> Result<Ingested, StoreError> {
    let total = events.len();
    let kept: Vec<ApiserverEvent> = events
        .into_iter()
        .filter(|e| concerns_portcullis(e, cluster.service_account()))
        .map(|e| kept(&cluster.name, e))
        .collect();
    let added = store.store_apiserver_events(&kept)?;
    Ok(Ingested {
        kept: kept.len(),
        duplicates: kept.len() - added,
        ignored: total - kept.len(),
    })
}

/// The parts of `event` that are kept.
fn kept(cluster: &str, event: Event) -> ApiserverEvent {
    // A NUL (a Status message may quote a client's `%00`) is kept marked,
    // not as is: PostgreSQL's text cannot hold one, and a batch it refused
    // would lose every event in it.
    let text = crate::audit::row::bounded_nul_free;
    let annotation = |key: &str| text(event.annotations.get(key).map(String::as_str).unwrap_or(""));
    let impersonated = event.impersonated_user.unwrap_or_default();
    ApiserverEvent {
        audit_id: event.audit_id,
        cluster: cluster.to_string(),
        verb: text(&event.verb),
        request_uri: text(&event.request_uri),
        user: text(&event.user.username),
        impersonated_user: text(&impersonated.username),
        impersonated_groups: impersonated.groups.iter().take(64).map(|g| text(g)).collect(),
        source_ips: event.source_ips.iter().take(16).map(|ip| text(ip)).collect(),
        user_agent: text(&event.user_agent),
        code: event.response_status.map(|s| s.code).unwrap_or(0),
        decision: annotation("authorization.k8s.io/decision"),
        reason: annotation("authorization.k8s.io/reason"),
        received_at: event.request_received_timestamp,
        stage_at: event.stage_timestamp,
        stage: event.stage,
    }
}

#[cfg(test)]
#[path = "apiserver_tests.rs"]
mod tests;
