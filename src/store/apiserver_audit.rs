//! The API server's own audit events (migration `0014_apiserver_audit.sql`),
//! kept for the join with portcullis's rows and the bypass check
//! (`crate::audit::apiserver`, `crate::audit::bypass`); and the forwarded
//! records those checks read beside the audit's rows and intents.
//!
//! Only what the join needs is here: never a request or response body.

use super::sql::{params, Db, OptionalExt, Row, SqlError};
use super::{Store, StoreError};
use chrono::{DateTime, SecondsFormat, Utc};
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
    fn parse(text: &str) -> Checked {
        if text == "alert" {
            Checked::Alert
        } else {
            Checked::Matched
        }
    }

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

/// How many requests portcullis sent a cluster under one audit id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sends {
    /// One: a read, or portcullis's own request.
    One,
    /// A write's: each began within this many milliseconds of the first.
    Within(u64),
}

/// Which rows (aliased `a`) stand for a request portcullis sent: a request
/// row marked as standing for its forwarded record, or one whose record
/// is kept. (Every request is recorded as it leaves; a row alone proves
/// nothing, as one refused before it left names its id to anyone.)
const SENT: &str = "a.kind = '' AND (a.forwarded \
     OR EXISTS (SELECT 1 FROM audit_forwarded f WHERE f.id = a.id AND f.cluster = a.cluster))";

/// `"user"` quoted: unquoted, PostgreSQL reads it as the current role.
const COLUMNS: &str = "audit_id, stage, cluster, verb, request_uri, \"user\", impersonated_user, impersonated_groups, \
     source_ips, user_agent, code, decision, reason, received_at, stage_at";

/// Fixed-width text, so that text order is time order (as the audit's).
fn text(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn time(r: &Row, index: usize) -> Result<DateTime<Utc>, SqlError> {
    let value: String = r.get(index)?;
    DateTime::parse_from_rfc3339(&value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| SqlError::decode(index, e))
}

fn list(r: &Row, index: usize) -> Result<Vec<String>, SqlError> {
    let value: String = r.get(index)?;
    serde_json::from_str(&value).map_err(|e| SqlError::decode(index, e))
}

fn event_row(r: &Row) -> Result<ApiserverEvent, SqlError> {
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

/// The user a write's intent impersonates (its row's JSON names the person
/// or bot), if `audit_id` has an intent for `cluster`: read here rather
/// than in SQL, whose JSON functions differ between SQLite and PostgreSQL.
fn intent_principal(c: &dyn Db, audit_id: &str, cluster: &str) -> Result<Option<String>, StoreError> {
    #[derive(serde::Deserialize)]
    struct Named {
        #[serde(default)]
        principal_kind: String,
        #[serde(default)]
        login: String,
        #[serde(default)]
        cluster: String,
    }
    let intent: Option<String> = c
        .query_row(
            "SELECT \"row\" FROM audit_intents WHERE id = ?1",
            params![audit_id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(intent) = intent else { return Ok(None) };
    let named: Named = serde_json::from_str(&intent).map_err(|e| SqlError::decode(0, e))?;
    Ok((named.cluster == cluster).then(|| kube_user(&named.principal_kind, &named.login)))
}

impl Store {
    /// Keep `events` in one transaction (all or none), each stage of a
    /// request once: one already kept (the same cluster, audit id, time
    /// received and stage: delivered again) is skipped. Another request
    /// under the same audit id is kept as its own. Returns how many were
    /// new.
    pub fn store_apiserver_events(&self, events: &[ApiserverEvent]) -> Result<usize, StoreError> {
        let arrived = text(&Utc::now());
        let insert = format!(
            "INSERT INTO apiserver_audit ({COLUMNS}, arrived_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) ON CONFLICT DO NOTHING"
        );
        let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
        self.write(|tx| {
            let mut added = 0;
            for e in events {
                added += tx.execute(
                    &insert,
                    params![
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
                    ],
                )?;
            }
            Ok(added)
        })
    }

    /// Every stage kept of request `audit_id`, in the order they happened.
    pub fn apiserver_events(&self, audit_id: &str) -> Result<Vec<ApiserverEvent>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!("SELECT {COLUMNS} FROM apiserver_audit WHERE audit_id = ?1 ORDER BY stage_at, stage"),
                params![audit_id],
                event_row,
            )?)
        })
    }

    /// Up to `limit` events not checked yet that arrived before `before`,
    /// oldest first.
    pub fn unchecked_apiserver_events(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<ApiserverEvent>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM apiserver_audit WHERE checked = '' AND arrived_at < ?1 \
                     ORDER BY arrived_at LIMIT ?2"
                ),
                params![text(&before), limit as i64],
                event_row,
            )?)
        })
    }

    /// What was decided about the requests audited under `audit_id`, if
    /// anything: an alert about any of them outranks a match.
    pub fn apiserver_audit_checked(&self, audit_id: &str) -> Result<Option<Checked>, StoreError> {
        self.with(|c| {
            let found: Option<String> = c
                .query_row(
                    "SELECT checked FROM apiserver_audit WHERE audit_id = ?1 AND checked IN ('matched', 'alert') \
                     ORDER BY checked = 'alert' DESC LIMIT 1",
                    params![audit_id],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(found.as_deref().map(Checked::parse))
        })
    }

    /// What was decided about `event`'s request before, if anything.
    pub fn apiserver_request_checked(&self, event: &ApiserverEvent) -> Result<Option<Checked>, StoreError> {
        self.with(|c| {
            let found: Option<String> = c
                .query_row(
                    "SELECT checked FROM apiserver_audit WHERE audit_id = ?1 AND cluster = ?2 AND received_at = ?3 \
                     AND checked IN ('matched', 'alert') ORDER BY checked = 'alert' DESC LIMIT 1",
                    params![event.audit_id, event.cluster, text(&event.received_at)],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(found.as_deref().map(Checked::parse))
        })
    }

    /// Note what was decided about every stage of `event`'s request kept
    /// so far.
    pub fn mark_apiserver_request(&self, event: &ApiserverEvent, checked: Checked) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE apiserver_audit SET checked = ?4 WHERE audit_id = ?1 AND cluster = ?2 AND received_at = ?3 \
                 AND checked IN ('', 'pending')",
                params![
                    event.audit_id,
                    event.cluster,
                    text(&event.received_at),
                    checked.as_str()
                ],
            )?;
            Ok(())
        })
    }

    /// Set `event`'s request aside until what it is matched with is known
    /// (a write of portcullis's under way), out of the way of the events
    /// still to be checked.
    pub fn defer_apiserver_request(&self, event: &ApiserverEvent) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE apiserver_audit SET checked = 'pending' WHERE audit_id = ?1 AND cluster = ?2 \
                 AND received_at = ?3 AND checked = ''",
                params![event.audit_id, event.cluster, text(&event.received_at)],
            )?;
            Ok(())
        })
    }

    /// Up to `limit` events set aside, oldest first, each with when it
    /// arrived.
    pub fn deferred_apiserver_events(&self, limit: usize) -> Result<Vec<(ApiserverEvent, DateTime<Utc>)>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!(
                    "SELECT {COLUMNS}, arrived_at FROM apiserver_audit WHERE checked = 'pending' \
                     ORDER BY arrived_at LIMIT ?1"
                ),
                params![limit as i64],
                |r| Ok((event_row(r)?, time(r, 15)?)),
            )?)
        })
    }

    /// Every stage kept of `event`'s request, in the order they happened.
    pub fn apiserver_request_stages(&self, event: &ApiserverEvent) -> Result<Vec<ApiserverEvent>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM apiserver_audit WHERE audit_id = ?1 AND cluster = ?2 AND received_at = ?3 \
                     ORDER BY stage_at, stage"
                ),
                params![event.audit_id, event.cluster, text(&event.received_at)],
                event_row,
            )?)
        })
    }

    /// When the API server received the first request it audited under
    /// `audit_id` on `cluster`.
    pub fn first_apiserver_request(&self, audit_id: &str, cluster: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.with(|c| {
            let first: Option<String> = c.query_row(
                "SELECT MIN(received_at) FROM apiserver_audit WHERE audit_id = ?1 AND cluster = ?2",
                params![audit_id, cluster],
                |r| r.get(0),
            )?;
            first
                .map(|t| {
                    DateTime::parse_from_rfc3339(&t)
                        .map(|t| t.with_timezone(&Utc))
                        .map_err(|e| StoreError::from(SqlError::decode(0, e)))
                })
                .transpose()
        })
    }

    /// Do the grants of every id in `grant_ids` belong to `kube_user`
    /// (`user:<login>` or `bot:<name>`), as the groups portcullis sends for
    /// them do? Ended grants count: the request may be from before.
    pub fn grants_belong_to(&self, kube_user: &str, grant_ids: &[&str]) -> Result<bool, StoreError> {
        let subject = match kube_user.split_once(':') {
            Some(("user", login)) => ("person", login),
            Some(("bot", name)) => ("bot", name),
            _ => return Ok(grant_ids.is_empty()),
        };
        self.with(|c| {
            for id in grant_ids {
                let theirs: i64 = c.query_row(
                    "SELECT COUNT(*) FROM grants WHERE id = ?1 AND kind = ?2 AND subject = ?3",
                    params![id, subject.0, subject.1],
                    |r| r.get(0),
                )?;
                if theirs == 0 {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }

    /// Did portcullis send request `audit_id` to `cluster`, and as whom: a
    /// row of a request it sent ([`SENT`]: a row of one refused before it
    /// left, whose id the refusal hands to anyone, is no such proof), a
    /// write's intent or a forwarded record (each names its person or bot;
    /// portcullis's own requests impersonate nobody; a record of the
    /// release before says nobody, so whom is not known). An id portcullis
    /// sent to another cluster is one it never sent here.
    ///
    /// With it, how many requests portcullis sent under the id, as far as
    /// it knows: a read, or one of its own, is one request; a write's hold
    /// stage may send a dry run and a read before it, all within the time
    /// its row took. How many is not known while a write is under way, or
    /// if portcullis never sent it.
    pub fn portcullis_sent(&self, audit_id: &str, cluster: &str) -> Result<(Sent, Option<Sends>), StoreError> {
        self.with(|c| {
            let row: Option<(String, String, bool, i64, String)> = c
                .query_row(
                    &format!(
                        "SELECT principal_kind, login, is_write, duration_ms, subresource FROM audit a \
                         WHERE id = ?1 AND cluster = ?2 AND {SENT} \
                         ORDER BY CASE WHEN code = 0 AND reason = 'Unknown' THEN 1 ELSE 0 END, seq LIMIT 1"
                    ),
                    params![audit_id, cluster],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()?;
            if let Some((kind, login, write, took, subresource)) = row {
                // A held write's stages send more than one request under
                // its id, within the time it took. A stream (exec, attach,
                // port-forward) or a request through a proxy is a POST,
                // so a write, and sends one however long it lasts: its
                // hours are no window for a reuse to hide in.
                let one = matches!(subresource.as_str(), "exec" | "attach" | "portforward" | "proxy");
                let sends = match write && !one {
                    true => Sends::Within(took.max(0) as u64),
                    false => Sends::One,
                };
                return Ok((Sent::As(kube_user(&kind, &login)), Some(sends)));
            }
            let intent = intent_principal(c, audit_id, cluster)?;
            let record: Option<(String, String, String)> = c
                .query_row(
                    "SELECT kind, principal_kind, login FROM audit_forwarded WHERE id = ?1 AND cluster = ?2",
                    params![audit_id, cluster],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            // A write's record (`write`) says nothing of how many until its
            // row comes; a stream's (an exec is a write too) is one request.
            let sends = record
                .as_ref()
                .and_then(|(kind, ..)| matches!(kind.as_str(), "system" | "request").then_some(Sends::One));
            if let Some(intent) = intent {
                return Ok((Sent::As(intent), sends));
            }
            let Some((kind, principal_kind, login)) = record else {
                return Ok((Sent::No, None));
            };
            let sent = if kind == "system" {
                Sent::As(String::new())
            } else if principal_kind.is_empty() {
                // A record of the release before says nobody.
                Sent::Unknown
            } else {
                Sent::As(kube_user(&principal_kind, &login))
            };
            Ok((sent, sends))
        })
    }

    /// Record that request `id` (of `kind`: `request` or `system`) left for
    /// `cluster` at `at`, as nobody in particular (the audit writer
    /// records the requests it forwards itself, with whom they were sent as).
    pub fn record_forwarded(&self, id: &str, cluster: &str, kind: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO audit_forwarded (id, cluster, kind, at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![id, cluster, kind, text(&at)],
            )?;
            Ok(())
        })
    }

    /// Forget forwarded records and checked events from before `cutoff`
    /// (the audit's retention); returns how many went.
    pub fn sweep_apiserver_audit(&self, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
        let cutoff = text(&cutoff);
        self.with(|c| {
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
    /// Requests the API server audited about portcullis (each audit id
    /// and time received: an id reused around portcullis is another).
    pub apiserver_requests: u64,
    /// Of those, matched to what portcullis sent.
    pub matched: u64,
    /// Of those, bypass alerts.
    pub alerts: u64,
    /// Of those, not checked yet (within the grace time).
    pub unchecked: u64,
    /// Requests portcullis sent, older than the grace time: forwarded
    /// records (or the rows that stand for them), its own requests, and
    /// the writes it forwarded.
    pub portcullis_requests: u64,
    /// Of those, with no API server event: lost by the webhook.
    pub missing: u64,
    /// Of the missing, portcullis's own requests (the reconciler's...).
    pub missing_own: u64,
}

/// Each request's state is its stages' worst ('alert' over 'matched' over
/// unchecked); counted with `COUNT(CASE …)`, an integer on both databases.
const APISERVER_SIDE: &str = "SELECT COUNT(*), COUNT(CASE WHEN state = 'matched' THEN 1 END), \
     COUNT(CASE WHEN state = 'alert' THEN 1 END), COUNT(CASE WHEN state = '' THEN 1 END) FROM ( \
     SELECT CASE WHEN COUNT(CASE WHEN checked = 'alert' THEN 1 END) > 0 THEN 'alert' \
     WHEN COUNT(CASE WHEN checked = 'matched' THEN 1 END) > 0 THEN 'matched' \
     ELSE '' END AS state FROM apiserver_audit WHERE cluster = ?1 AND arrived_at >= ?2 GROUP BY audit_id, received_at) AS requests";

const PORTCULLIS_SIDE: &str = "WITH sent (id, own) AS ( \
     SELECT id, kind = 'system' FROM audit_forwarded WHERE cluster = ?1 AND at >= ?2 AND at < ?3 \
     UNION SELECT id, FALSE FROM audit WHERE cluster = ?1 AND kind = '' AND forwarded \
     AND started_at >= ?2 AND started_at < ?3), \
     lost (own) AS (SELECT own FROM sent WHERE NOT EXISTS \
     (SELECT 1 FROM apiserver_audit a WHERE a.audit_id = sent.id AND a.cluster = ?1)) \
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
        self.with(|c| {
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
#[path = "apiserver_audit_tests.rs"]
mod tests;
