//! The API server's own audit events (migration `0014_apiserver_audit.sql`),
//! kept for the join with portcullis's rows and the bypass check
//! (`crate::audit::apiserver`, `crate::audit::bypass`); and the forwarded
//! records those checks read beside the audit's rows and intents.
//!
//! Only what the join needs is here: never a request or response body.

use super::{Store, StoreError};
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;

/// One stage of one request, as the API server audited it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApiserverEvent {
    /// The audit id (portcullis's `Audit-ID` when it sent the request).
    pub audit_id: String,
    /// RequestReceived, ResponseStarted, ResponseComplete or Panic.
    pub stage: String,
    /// The cluster whose API server sent it.
    pub cluster: String,
    /// Kubernetes verb.
    pub verb: String,
    /// The request URI.
    pub request_uri: String,
    /// Who authenticated (portcullis's ServiceAccount, for its requests).
    pub user: String,
    /// Who was impersonated; empty if nobody.
    pub impersonated_user: String,
    /// The groups impersonated.
    pub impersonated_groups: Vec<String>,
    /// Where the request came from.
    pub source_ips: Vec<String>,
    /// The client's user agent.
    pub user_agent: String,
    /// The response code; 0 before there is one.
    pub code: u16,
    /// `authorization.k8s.io/decision`: allow or forbid.
    pub decision: String,
    /// `authorization.k8s.io/reason`: which binding allowed it, or why not.
    pub reason: String,
    /// `requestReceivedTimestamp`.
    pub received_at: DateTime<Utc>,
    /// `stageTimestamp`.
    pub stage_at: DateTime<Utc>,
}

/// What the bypass check decided about an audit id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// portcullis has a row or record with the same audit id.
    Matched,
    /// It has none: an alert was raised.
    Alert,
}

impl Checked {
    fn as_str(self) -> &'static str {
        match self {
            Checked::Matched => "matched",
            Checked::Alert => "alert",
        }
    }
}

/// Whether portcullis sent a request, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// It has no row, intent or record of it.
    No,
    /// It sent it impersonating this user (`user:<login>`, `bot:<name>`),
    /// or nobody (empty: its own requests).
    As(String),
    /// It sent it, but whom as is not known yet (a stream still open).
    Unknown,
}

/// The user portcullis impersonates for a row's principal.
fn kube_user(kind: &str, login: &str) -> String {
    match kind {
        "person" => format!("user:{login}"),
        "bot" => format!("bot:{login}"),
        _ => String::new(),
    }
}

const COLUMNS: &str = "audit_id, stage, cluster, verb, request_uri, user, impersonated_user, impersonated_groups, \
     source_ips, user_agent, code, decision, reason, received_at, stage_at";

/// Fixed-width text, so that text order is time order (as the audit's).
fn text(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn time(r: &Row, index: usize) -> rusqlite::Result<DateTime<Utc>> {
    let value: String = r.get(index)?;
    DateTime::parse_from_rfc3339(&value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

fn list(r: &Row, index: usize) -> rusqlite::Result<Vec<String>> {
    let value: String = r.get(index)?;
    serde_json::from_str(&value)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

fn event(r: &Row) -> rusqlite::Result<ApiserverEvent> {
    Ok(ApiserverEvent {
        audit_id: r.get(0)?,
        stage: r.get(1)?,
        cluster: r.get(2)?,
        verb: r.get(3)?,
        request_uri: r.get(4)?,
        user: r.get(5)?,
        impersonated_user: r.get(6)?,
        impersonated_groups: list(r, 7)?,
        source_ips: list(r, 8)?,
        user_agent: r.get(9)?,
        code: r.get::<_, i64>(10)?.clamp(0, u16::MAX.into()) as u16,
        decision: r.get(11)?,
        reason: r.get(12)?,
        received_at: time(r, 13)?,
        stage_at: time(r, 14)?,
    })
}

impl Store {
    /// Keep `events` in one transaction (all or none), each stage of a
    /// request once: one already kept is skipped. Returns how many were new.
    pub fn store_apiserver_events(&self, events: &[ApiserverEvent]) -> Result<usize, StoreError> {
        let arrived = text(&Utc::now());
        self.sqlite(|c| {
            let tx = super::write_transaction(c)?;
            let mut added = 0;
            {
                let mut insert = tx.prepare_cached(&format!(
                    "INSERT OR IGNORE INTO apiserver_audit ({COLUMNS}, arrived_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
                ))?;
                for e in events {
                    let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
                    added += insert.execute(params![
                        e.audit_id,
                        e.stage,
                        e.cluster,
                        e.verb,
                        e.request_uri,
                        e.user,
                        e.impersonated_user,
                        json(&e.impersonated_groups),
                        json(&e.source_ips),
                        e.user_agent,
                        i64::from(e.code),
                        e.decision,
                        e.reason,
                        text(&e.received_at),
                        text(&e.stage_at),
                        arrived,
                    ])?;
                }
            }
            tx.commit()?;
            Ok(added)
        })
    }

    /// Every stage kept of request `audit_id`, in the order they happened.
    pub fn apiserver_events(&self, audit_id: &str) -> Result<Vec<ApiserverEvent>, StoreError> {
        self.sqlite(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM apiserver_audit WHERE audit_id = ?1 ORDER BY stage_at, stage"
            ))?;
            let rows = stmt.query_map(params![audit_id], event)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// Up to `limit` events not checked yet that arrived before `before`,
    /// oldest first.
    pub fn unchecked_apiserver_events(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<ApiserverEvent>, StoreError> {
        self.sqlite(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM apiserver_audit WHERE checked = '' AND arrived_at < ?1 \
                 ORDER BY arrived_at LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![text(&before), limit as i64], event)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    /// What was decided about `audit_id` before, if anything.
    pub fn apiserver_audit_checked(&self, audit_id: &str) -> Result<Option<Checked>, StoreError> {
        self.sqlite(|c| {
            let found: Option<String> = c
                .query_row(
                    "SELECT checked FROM apiserver_audit WHERE audit_id = ?1 AND checked <> '' \
                     ORDER BY checked = 'alert' DESC LIMIT 1",
                    params![audit_id],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(found.map(|f| if f == "alert" { Checked::Alert } else { Checked::Matched }))
        })
    }

    /// Note what was decided about every stage of `audit_id` kept so far.
    pub fn mark_apiserver_audit(&self, audit_id: &str, checked: Checked) -> Result<(), StoreError> {
        self.sqlite(|c| {
            c.execute(
                "UPDATE apiserver_audit SET checked = ?2 WHERE audit_id = ?1 AND checked = ''",
                params![audit_id, checked.as_str()],
            )?;
            Ok(())
        })
    }

    /// Did portcullis send request `audit_id`, and as whom: a row that is
    /// not an alert, a write's intent (each names its person or bot), or a
    /// forwarded record (portcullis's own requests impersonate nobody; a
    /// client's stream still open has no row yet to say whom).
    pub fn portcullis_sent_as(&self, audit_id: &str) -> Result<Sent, StoreError> {
        self.sqlite(|c| {
            let named: Option<(String, String)> = c
                .query_row(
                    "SELECT principal_kind, login FROM audit WHERE id = ?1 AND kind = '' \
                     UNION ALL SELECT json_extract(row, '$.principal_kind'), json_extract(row, '$.login') \
                     FROM audit_intents WHERE id = ?1 LIMIT 1",
                    params![audit_id],
                    |r| {
                        Ok((
                            r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                        ))
                    },
                )
                .optional()?;
            if let Some((kind, login)) = named {
                return Ok(Sent::As(kube_user(&kind, &login)));
            }
            let record: Option<String> = c
                .query_row(
                    "SELECT kind FROM audit_forwarded WHERE id = ?1",
                    params![audit_id],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(match record.as_deref() {
                Some("system") => Sent::As(String::new()),
                Some(_) => Sent::Unknown,
                None => Sent::No,
            })
        })
    }

    /// Record that request `id` (of `kind`: `request` or `system`) left for
    /// `cluster` at `at`.
    pub fn record_forwarded(&self, id: &str, cluster: &str, kind: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.sqlite(|c| {
            c.execute(
                "INSERT OR IGNORE INTO audit_forwarded (id, cluster, kind, at) VALUES (?1, ?2, ?3, ?4)",
                params![id, cluster, kind, text(&at)],
            )?;
            Ok(())
        })
    }

    /// Forget forwarded records and checked events from before `cutoff`
    /// (the audit's retention); returns how many went.
    pub fn sweep_apiserver_audit(&self, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
        let cutoff = text(&cutoff);
        self.sqlite(|c| {
            let records = c.execute("DELETE FROM audit_forwarded WHERE at < ?1", params![cutoff])?;
            let events = c.execute(
                "DELETE FROM apiserver_audit WHERE checked <> '' AND arrived_at < ?1",
                params![cutoff],
            )?;
            Ok(records + events)
        })
    }
}

/// How a cluster's API server audit and portcullis's requests to it
/// matched over a time (`portcullis admin audit coverage`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Requests the API server audited about portcullis (distinct ids).
    pub apiserver_requests: u64,
    /// Of those, matched to what portcullis sent.
    pub matched: u64,
    /// Of those, bypass alerts.
    pub alerts: u64,
    /// Of those, not checked yet (within the grace time).
    pub unchecked: u64,
    /// Requests portcullis sent, older than the grace time: forwarded
    /// records, its own requests, and the writes it forwarded.
    pub portcullis_requests: u64,
    /// Of those, with no API server event: lost by the webhook.
    pub missing: u64,
    /// Of the missing, portcullis's own requests (the reconciler's...).
    pub missing_own: u64,
}

const APISERVER_SIDE: &str = "SELECT COUNT(*), COALESCE(SUM(state = 'matched'), 0), \
     COALESCE(SUM(state = 'alert'), 0), COALESCE(SUM(state = ''), 0) FROM ( \
     SELECT CASE WHEN SUM(checked = 'alert') > 0 THEN 'alert' WHEN SUM(checked = 'matched') > 0 THEN 'matched' \
     ELSE '' END AS state FROM apiserver_audit WHERE cluster = ?1 AND arrived_at >= ?2 GROUP BY audit_id)";

const PORTCULLIS_SIDE: &str = "WITH sent (id, own) AS ( \
     SELECT id, kind = 'system' FROM audit_forwarded WHERE cluster = ?1 AND at >= ?2 AND at < ?3 \
     UNION SELECT id, 0 FROM audit WHERE cluster = ?1 AND kind = '' AND is_write = 1 AND refused = '' \
     AND started_at >= ?2 AND started_at < ?3), \
     lost (own) AS (SELECT own FROM sent WHERE NOT EXISTS \
     (SELECT 1 FROM apiserver_audit a WHERE a.audit_id = sent.id)) \
     SELECT (SELECT COUNT(*) FROM sent), (SELECT COUNT(*) FROM lost), (SELECT COUNT(*) FROM lost WHERE own)";

impl Store {
    /// Coverage of `cluster` since `since`: the API server's events that
    /// arrived since, and portcullis's requests sent between `since` and
    /// `settled` (now less the grace time: an event may still be on its way
    /// for a later one).
    pub fn apiserver_coverage(
        &self,
        cluster: &str,
        since: DateTime<Utc>,
        settled: DateTime<Utc>,
    ) -> Result<Coverage, StoreError> {
        let count = |r: &Row, i: usize| r.get::<_, i64>(i).map(|n| n.max(0) as u64);
        self.sqlite(|c| {
            let mut coverage = c.query_row(APISERVER_SIDE, params![cluster, text(&since)], |r| {
                Ok(Coverage {
                    apiserver_requests: count(r, 0)?,
                    matched: count(r, 1)?,
                    alerts: count(r, 2)?,
                    unchecked: count(r, 3)?,
                    ..Coverage::default()
                })
            })?;
            let times = params![cluster, text(&since), text(&settled)];
            (coverage.portcullis_requests, coverage.missing, coverage.missing_own) =
                c.query_row(PORTCULLIS_SIDE, times, |r| {
                    Ok((count(r, 0)?, count(r, 1)?, count(r, 2)?))
                })?;
            Ok(coverage)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, stage: &str) -> ApiserverEvent {
        ApiserverEvent {
            audit_id: id.into(),
            stage: stage.into(),
            cluster: "prod".into(),
            source_ips: vec!["10.0.0.1".into()],
            received_at: Utc::now(),
            stage_at: Utc::now(),
            ..ApiserverEvent::default()
        }
    }

    #[test]
    fn a_stage_delivered_twice_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let batch = [event("a", "RequestReceived"), event("a", "ResponseComplete")];
        assert_eq!(store.store_apiserver_events(&batch).unwrap(), 2);
        assert_eq!(store.store_apiserver_events(&batch).unwrap(), 0, "the same batch again");
        let kept = store.apiserver_events("a").unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].source_ips, ["10.0.0.1"]);
    }

    #[test]
    fn a_forwarded_record_is_what_portcullis_sent() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        assert_eq!(store.portcullis_sent_as("b").unwrap(), Sent::No);
        store.record_forwarded("b", "prod", "system", Utc::now()).unwrap();
        assert_eq!(store.portcullis_sent_as("b").unwrap(), Sent::As(String::new()));
        store.record_forwarded("c", "prod", "request", Utc::now()).unwrap();
        assert_eq!(store.portcullis_sent_as("c").unwrap(), Sent::Unknown);
        let intent = r#"{"id":"c","principal_kind":"bot","login":"deployer"}"#;
        store
            .sqlite(|c| Ok(c.execute("INSERT INTO audit_intents (id, row) VALUES ('c', ?1)", params![intent])?))
            .unwrap();
        assert_eq!(store.portcullis_sent_as("c").unwrap(), Sent::As("bot:deployer".into()));
        store.store_apiserver_events(&[event("b", "ResponseComplete")]).unwrap();
        assert_eq!(store.apiserver_audit_checked("b").unwrap(), None);
        store.mark_apiserver_audit("b", Checked::Matched).unwrap();
        assert_eq!(store.apiserver_audit_checked("b").unwrap(), Some(Checked::Matched));
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert!(store.unchecked_apiserver_events(later, 10).unwrap().is_empty());
        assert_eq!(store.sweep_apiserver_audit(later).unwrap(), 3);
    }

    #[test]
    fn coverage_counts_each_side_and_what_the_other_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let before = Utc::now() - chrono::TimeDelta::seconds(10);
        for (id, kind) in [("both", "request"), ("lost", "request"), ("own", "system")] {
            store.record_forwarded(id, "prod", kind, before).unwrap();
        }
        store.record_forwarded("elsewhere", "test", "request", before).unwrap();
        let batch = [
            event("both", "RequestReceived"),
            event("both", "ResponseComplete"),
            event("leaked", "ResponseComplete"),
            event("new", "ResponseComplete"),
        ];
        store.store_apiserver_events(&batch).unwrap();
        store.mark_apiserver_audit("both", Checked::Matched).unwrap();
        store.mark_apiserver_audit("leaked", Checked::Alert).unwrap();
        let since = before - chrono::TimeDelta::seconds(1);
        let coverage = store.apiserver_coverage("prod", since, Utc::now()).unwrap();
        let expected = Coverage {
            apiserver_requests: 3,
            matched: 1,
            alerts: 1,
            unchecked: 1,
            portcullis_requests: 3,
            missing: 2,
            missing_own: 1,
        };
        assert_eq!(coverage, expected);
        let within_grace = store.apiserver_coverage("prod", since, before).unwrap();
        assert_eq!((within_grace.portcullis_requests, within_grace.missing), (0, 0));
    }
}
