//! The bypass alarm: an API server event made with portcullis's
//! ServiceAccount, or impersonating one of its people or bots, that
//! portcullis has no row, intent or forwarded record of (same audit id)
//! once the grace time has passed went around portcullis (a leaked token,
//! someone else's impersonation). Each such request is one alert: a row of
//! kind `alert` in the hash chain (its id the API server's audit id), a
//! `warn` line with where it came from, and a count.
//!
//! A request is its cluster, its audit id and when the API server received
//! it: the API server takes a client's `Audit-ID` as it is, so someone
//! holding portcullis's token can send requests under an id portcullis
//! used, or one it refused (every answer names its id). Only a request
//! portcullis forwarded proves an id (a forwarded record, or a row that
//! stands for one). A read is one request under its id; a write's hold
//! stage may send a dry run and a read of the object first, all within the
//! time the write took; anything else under the id is an alert. The grant
//! groups a request impersonates must be its person's grants.
//!
//! The grace time runs from when the event reached portcullis, not from
//! the API server's clock, so a skewed clock raises no alert; the reuse
//! check compares the API server's times only with each other.

use super::row::{bounded, AuditRow};
use super::AuditError;
use crate::store::{ApiserverEvent, Checked, Sends, Sent, Store};
use chrono::{DateTime, SubsecRound, Utc};
use prometheus_client::metrics::counter::Counter;
use std::time::Duration;

/// Events looked at in one check; the rest wait for the next.
const PAGE: usize = 1000;

/// The `kind` of an alert row.
pub const ALERT: &str = "alert";
/// An alert's reason: portcullis never sent the request.
pub const BYPASS: &str = "Bypass";
/// An alert's reason: portcullis sent a request with this audit id, but
/// not impersonating whom the API server saw.
pub const IMPERSONATION: &str = "Impersonation";

/// A reason: portcullis sent a request with this audit id, and the API
/// server saw another under it, later than portcullis's own could have
/// been (its audit id reused around portcullis).
pub const REUSED: &str = "ReusedAuditID";

/// How much later than the first request under a write's audit id another
/// may begin and still be one portcullis sent, beyond the time the write
/// took: the network between portcullis and the API server, whose clocks
/// are each compared only with themselves.
const REUSE_SLACK: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

/// How long a request under the id of a write of portcullis's still under
/// way (no row yet) waits for the write's row; past it, the write is taken
/// to have lasted this long (a write whose process crashed before its row,
/// or whose client left during authentication, never writes one).
const WRITE_WAIT: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// The store's failure, as the audit says it.
fn store_error(error: crate::store::StoreError) -> AuditError {
    AuditError::Store(error.to_string())
}

/// Check every event that arrived more than `grace` before `now` and was
/// not checked yet, and those set aside for a write under way; returns the
/// alerts raised (each also counted in `alerts`).
pub fn check(store: &Store, grace: Duration, now: DateTime<Utc>, alerts: &Counter) -> Result<usize, AuditError> {
    let grace = chrono::TimeDelta::from_std(grace).unwrap_or(chrono::TimeDelta::MAX);
    let fresh = store
        .unchecked_apiserver_events(now - grace, PAGE)
        .map_err(store_error)?
        .into_iter()
        .map(|event| (event, false));
    // Set aside ones in a page of their own, so that however many there
    // are, they never hold up the others.
    let deferred = store.deferred_apiserver_events(PAGE).map_err(store_error)?;
    let deferred = deferred
        .into_iter()
        .map(|(event, arrived)| (event, arrived < now - WRITE_WAIT));
    let mut raised = 0;
    let mut seen = std::collections::HashSet::new();
    for (event, overdue) in fresh.chain(deferred) {
        // One request: its cluster, its audit id and when it was received.
        if !seen.insert((event.cluster.clone(), event.audit_id.clone(), event.received_at)) {
            continue;
        }
        match check_one(store, &event, overdue)? {
            Some(Checked::Alert) => {
                raised += 1;
                alerts.inc();
            }
            Some(Checked::Matched) => {}
            None => store.defer_apiserver_request(&event).map_err(store_error)?,
        }
    }
    Ok(raised)
}

/// Decide about `event`'s request: matched, or (once) an alert, or not yet
/// (`None`: a write of portcullis's under way, whose row is still to come).
/// A later stage is looked at again: the API server names whom a request
/// impersonates only from its second stage on.
fn check_one(store: &Store, event: &ApiserverEvent, overdue: bool) -> Result<Option<Checked>, AuditError> {
    let before = store.apiserver_request_checked(event).map_err(store_error)?;
    let fullest = fullest(store, event)?;
    let reason = match before {
        Some(Checked::Alert) => None,
        _ => {
            let (sent, sends) = store
                .portcullis_sent(&event.audit_id, &event.cluster)
                .map_err(store_error)?;
            match verdict(sent.clone(), &fullest) {
                Some(reason) => Some(reason),
                None if !groups_theirs(store, &sent, &fullest)? => Some(IMPERSONATION),
                None => match reused(store, event, sends, overdue)? {
                    Some(true) => Some(REUSED),
                    Some(false) => None,
                    // A write under way: looked at again at a later turn.
                    None => return Ok(None),
                },
            }
        }
    };
    let Some(reason) = reason else {
        let decided = before.unwrap_or(Checked::Matched);
        store.mark_apiserver_request(event, decided).map_err(store_error)?;
        return Ok(Some(Checked::Matched));
    };
    warn(&fullest, reason);
    super::commit_event(store, alert_row(&fullest, reason))?;
    store
        .mark_apiserver_request(event, Checked::Alert)
        .map_err(store_error)?;
    Ok(Some(Checked::Alert))
}

/// Did the API server receive `event`'s request where no request portcullis
/// sent under its audit id could be (`sends`, as portcullis sent them): a
/// read's is the one request under it, and a write's began after the first
/// by no more than the write took.
/// `None` while a write is under way (its row, which says how long it
/// took, is not written yet), unless `overdue`.
fn reused(
    store: &Store,
    event: &ApiserverEvent,
    sends: Option<Sends>,
    overdue: bool,
) -> Result<Option<bool>, AuditError> {
    let waited = overdue.then(|| Sends::Within(WRITE_WAIT.num_milliseconds().max(0) as u64));
    let Some(sends) = sends.or(waited) else {
        return Ok(None);
    };
    let Some(first) = store
        .first_apiserver_request(&event.audit_id, &event.cluster)
        .map_err(store_error)?
    else {
        return Ok(Some(false));
    };
    Ok(Some(match sends {
        Sends::One => event.received_at != first,
        Sends::Within(took) => {
            let took = chrono::TimeDelta::try_milliseconds(i64::try_from(took).unwrap_or(i64::MAX))
                .unwrap_or(chrono::TimeDelta::MAX);
            let latest = took
                .checked_add(&REUSE_SLACK)
                .and_then(|after| first.checked_add_signed(after));
            latest.is_some_and(|latest| event.received_at > latest)
        }
    }))
}

/// Are the grant groups `event` impersonates the grants of whom portcullis
/// sent it as? Someone reusing the audit id of a person's request could
/// add the group of another's `cluster-admin` grant; the prefix alone
/// (in [`verdict`]) lets that through.
fn groups_theirs(store: &Store, sent: &Sent, event: &ApiserverEvent) -> Result<bool, AuditError> {
    let Sent::As(user) = sent else { return Ok(true) };
    let grants: Vec<&str> = event
        .impersonated_groups
        .iter()
        .filter_map(|g| g.strip_prefix("portcullis:grant:"))
        .collect();
    if grants.is_empty() {
        return Ok(true);
    }
    store.grants_belong_to(user, &grants).map_err(store_error)
}

/// Why a request is an alert, if it is: portcullis never sent it
/// (`Bypass`), or it impersonates someone portcullis did not send it as, or
/// a group portcullis never sends (`Impersonation`: its audit id was reused
/// around portcullis, say with `system:masters` beside the user).
pub fn verdict(sent: Sent, event: &ApiserverEvent) -> Option<&'static str> {
    // Once the API server has authorized a request (a decision noted), it
    // has named whom it impersonates: naming nobody then is not what
    // portcullis sent. (Refused while impersonating, it names nobody.)
    let named = !event.impersonated_user.is_empty() || !event.decision.is_empty();
    match sent {
        Sent::No => Some(BYPASS),
        Sent::As(user) if named && event.impersonated_user != user => Some(IMPERSONATION),
        Sent::As(_) if event.impersonated_groups.iter().any(|g| !sent_group(g)) => Some(IMPERSONATION),
        Sent::As(_) | Sent::Unknown => None,
    }
}

/// A group portcullis impersonates: a grant's, or the one the API server
/// adds to every impersonated user.
fn sent_group(group: &str) -> bool {
    group.starts_with("portcullis:grant:") || group == "system:authenticated"
}

/// The latest stage kept of `event`'s request (it says the most: whom it
/// impersonated, its code).
fn fullest(store: &Store, event: &ApiserverEvent) -> Result<ApiserverEvent, AuditError> {
    let stages = store.apiserver_request_stages(event).map_err(store_error)?;
    let impersonating = stages.iter().rev().find(|e| !e.impersonated_user.is_empty());
    Ok(impersonating.or(stages.last()).unwrap_or(event).clone())
}

fn warn(event: &ApiserverEvent, reason: &str) {
    use crate::text::Escaped;
    tracing::warn!(
        cluster = %event.cluster,
        audit_id = %Escaped(&event.audit_id),
        user = %Escaped(&event.user),
        impersonated_user = %Escaped(&event.impersonated_user),
        source_ips = %Escaped(&event.source_ips.join(",")),
        user_agent = %Escaped(&event.user_agent),
        verb = %Escaped(&event.verb),
        request_uri = %Escaped(&event.request_uri),
        reason,
        "bypass alert: the API server saw a request portcullis never sent as it"
    );
}

/// The alert's row: the API server's request, under its audit id.
pub fn alert_row(event: &ApiserverEvent, reason: &str) -> AuditRow {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("user", &event.user);
    if !event.impersonated_user.is_empty() {
        query.append_pair("impersonatedUser", &event.impersonated_user);
    }
    query.append_pair("sourceIPs", &event.source_ips.join(","));
    query.append_pair("userAgent", &event.user_agent);
    let mut row = AuditRow {
        id: bounded(&event.audit_id),
        kind: ALERT.into(),
        started_at: event.received_at.trunc_subsecs(6),
        cluster: event.cluster.clone(),
        client: event.source_ips.first().cloned().unwrap_or_default(),
        path: bounded(&event.request_uri),
        query: bounded(&query.finish()),
        verb: event.verb.clone(),
        code: event.code,
        reason: reason.into(),
        ..AuditRow::default()
    };
    row.finish(event.stage_at.max(event.received_at));
    row
}

/// The reason of the alert a writer commits when the chain ends before a
/// row it committed itself.
pub const CUT_SHORT: &str = "AuditChainCutShort";

/// The alert for a chain whose head, `head`, is behind `committed`, a row
/// this process committed: rows were deleted from its end (which no hash
/// shows: the chain goes on from the row before them, and `verify` finds
/// it whole), or the store was restored from an older copy. Committed as
/// the next row, so the chain itself says so.
pub fn cut_short_row(head: i64, committed: i64) -> AuditRow {
    tracing::error!(
        head,
        committed,
        "the audit chain ends at row {head}, but this process committed row {committed}: rows were deleted from \
         its end, or the store was restored from an older copy"
    );
    let now = Utc::now();
    let mut row = AuditRow::new(crate::audit::id::new(), now);
    row.kind = ALERT.into();
    row.reason = CUT_SHORT.into();
    row.query = format!("head={head}&committed={committed}");
    row.finish(now);
    row
}

/// Check every so often (a fraction of the grace time, 5 s at most), and
/// sweep what the audit's retention lets go once an hour; on one replica
/// at a time, so an unknown request is one alert however many replicas
/// look.
pub async fn check_periodically(store: Store, grace: Duration, retention: Duration, alerts: Counter) {
    let every = (grace / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let mut tick = tokio::time::interval(every);
    let mut swept = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        let (store2, alerts) = (store.clone(), alerts.clone());
        let sweep = swept.elapsed() > Duration::from_secs(3600);
        // Begun only once the lock is held.
        let checking = async move {
            tokio::task::spawn_blocking(move || {
                if sweep {
                    let cutoff = Utc::now() - chrono::TimeDelta::from_std(retention).unwrap_or(chrono::TimeDelta::MAX);
                    store2.sweep_apiserver_audit(cutoff).map_err(store_error)?;
                }
                check(&store2, grace, Utc::now(), &alerts)
            })
            .await
        };
        let checked = match store.exclusive("bypass check", checking).await {
            Ok(Some(checked)) => checked,
            Ok(None) => continue,
            Err(error) => Ok(Err(AuditError::Store(error.to_string()))),
        };
        if sweep {
            swept = tokio::time::Instant::now();
        }
        match checked {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::error!(%error, "the bypass check failed; it runs again shortly"),
            Err(error) => tracing::error!(%error, "the bypass check stopped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// When the API server received each test request (the same for every
    /// stage of one).
    fn received() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap()
    }

    fn event(id: &str, stage: &str) -> ApiserverEvent {
        ApiserverEvent {
            audit_id: id.into(),
            stage: stage.into(),
            cluster: "prod".into(),
            user: "system:serviceaccount:portcullis:portcullis".into(),
            source_ips: vec!["203.0.113.5".into()],
            user_agent: "curl/8".into(),
            received_at: received(),
            stage_at: Utc::now(),
            ..ApiserverEvent::default()
        }
    }

    #[test]
    fn an_unknown_request_is_one_alert_row_however_many_stages() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let (forwarded, unknown) = ("0190a0b0-0000-7000-8000-00000000000a", "leaked-1");
        store
            .record_forwarded(forwarded, "prod", "request", Utc::now())
            .unwrap();
        let batch = [
            event(unknown, "RequestReceived"),
            event(unknown, "ResponseComplete"),
            event(forwarded, "ResponseComplete"),
        ];
        store.store_apiserver_events(&batch).unwrap();
        let alerts = Counter::default();
        let early = Utc::now() - chrono::TimeDelta::seconds(60);
        assert_eq!(
            check(&store, Duration::ZERO, early, &alerts).unwrap(),
            0,
            "within the grace"
        );
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 1);
        assert_eq!(alerts.get(), 1);
        store.store_apiserver_events(&[event(unknown, "Panic")]).unwrap();
        let again = Utc::now() + chrono::TimeDelta::seconds(2);
        assert_eq!(
            check(&store, Duration::ZERO, again, &alerts).unwrap(),
            0,
            "no second alert"
        );
        assert_eq!(
            store.apiserver_request_checked(&event(forwarded, "")).unwrap(),
            Some(Checked::Matched)
        );
        let mut audit = super::super::sqlite::SqliteAuditStore::open(store.path()).unwrap();
        let filter = super::super::query::Filter {
            kind: Some(ALERT.into()),
            ..Default::default()
        };
        let rows = super::super::store::AuditStore::query(&mut audit, &filter).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].row.id.as_str(), rows[0].row.client.as_str()),
            (unknown, "203.0.113.5")
        );
        assert!(
            rows[0].row.query.contains("userAgent=curl%2F8"),
            "{}",
            rows[0].row.query
        );
    }

    #[test]
    fn an_event_impersonating_someone_portcullis_did_not_send_it_as_is_an_alert() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        // Writes, recorded as forwarded.
        let sent = |id: &str, login: &str| AuditRow {
            id: id.into(),
            cluster: "prod".into(),
            principal_kind: "person".into(),
            login: login.into(),
            write: true,
            started_at: Utc::now().trunc_subsecs(6),
            ..AuditRow::default()
        };
        super::super::commit_event(&store, sent("as-ana", "ana")).unwrap();
        super::super::commit_event(&store, sent("reused", "ana")).unwrap();
        for id in ["as-ana", "reused"] {
            store.record_forwarded(id, "prod", "write", Utc::now()).unwrap();
        }
        store.record_forwarded("own", "prod", "system", Utc::now()).unwrap();
        // A watch still open, sent as ana: its row is written when it ends.
        store
            .with(|c| {
                Ok(c.execute(
                    "INSERT INTO audit_forwarded (id, cluster, kind, at, principal_kind, login) \
                     VALUES ('watching', 'prod', 'request', ?1, 'person', 'ana')",
                    crate::store::sql::params![Utc::now().to_rfc3339()],
                )?)
            })
            .unwrap();
        let impersonating = |id: &str, user: &str| ApiserverEvent {
            impersonated_user: user.into(),
            ..event(id, "ResponseComplete")
        };
        let batch = [
            event("as-ana", "RequestReceived"),
            impersonating("as-ana", "user:ana"),
            event("reused", "RequestReceived"),
            impersonating("reused", "user:bob"),
            impersonating("own", "bot:deployer"),
            impersonating("watching", "user:bob"),
        ];
        store.store_apiserver_events(&batch).unwrap();
        let alerts = Counter::default();
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 3);
        assert_eq!(
            store.apiserver_request_checked(&event("as-ana", "")).unwrap(),
            Some(Checked::Matched)
        );
        let mut audit = super::super::sqlite::SqliteAuditStore::open(store.path()).unwrap();
        let filter = super::super::query::Filter {
            kind: Some(ALERT.into()),
            ..Default::default()
        };
        let rows = super::super::store::AuditStore::query(&mut audit, &filter).unwrap();
        let found: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.row.id.as_str(), r.row.reason.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("reused", IMPERSONATION),
                ("own", IMPERSONATION),
                ("watching", IMPERSONATION)
            ]
        );
        assert!(
            rows[0].row.query.contains("impersonatedUser=user%3Abob"),
            "{}",
            rows[0].row.query
        );
    }

    /// Someone holding portcullis's ServiceAccount token sends requests
    /// under audit ids portcullis used, as the same person: each is kept
    /// as its own request (not dropped as a stage delivered again). Under a
    /// read's id, whose request is the only one, a second is an alert; under
    /// a write's, one begun later than the write could have sent it (its
    /// dry run and read of the object come within the time its row took,
    /// and raise none); under an id whose request portcullis refused before
    /// it left (the refusal hands it to anyone), any is a bypass; an id on
    /// another cluster is a bypass there; and a grant group of someone else
    /// is an impersonation however the rest matches.
    #[test]
    fn a_request_reusing_an_audit_id_portcullis_used_is_an_alert_and_portcullis_own_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        for (login, grant) in [("ana", "g1"), ("bob", "g-bob")] {
            let person = crate::identity::Principal::person(login);
            store.add_principal(&person, false).unwrap();
            store
                .add_grant(&crate::identity::Grant {
                    id: grant.into(),
                    subject: person,
                    cluster: "prod".into(),
                    namespace: Some("shop".into()),
                    role: "viewer".into(),
                    expires_at: Utc::now() + chrono::TimeDelta::hours(1),
                    granted_by: "t".into(),
                    created_at: Utc::now(),
                    revoked_at: None,
                })
                .unwrap();
        }
        let row = |id: &str, write: bool, refused: &str| AuditRow {
            id: id.into(),
            cluster: "prod".into(),
            principal_kind: "person".into(),
            login: "ana".into(),
            started_at: Utc::now().trunc_subsecs(6),
            duration_ms: 2_000,
            write,
            refused: refused.into(),
            ..AuditRow::default()
        };
        super::super::commit_event(&store, row("held", true, "")).unwrap();
        store.record_forwarded("held", "prod", "write", Utc::now()).unwrap();
        super::super::commit_event(&store, row("read", false, "")).unwrap();
        super::super::commit_event(&store, row("refused", false, "unknown")).unwrap();
        store.record_forwarded("read", "prod", "request", Utc::now()).unwrap();
        let request = |id: &str, after: i64, cluster: &str, stage: &str| ApiserverEvent {
            received_at: received() + chrono::TimeDelta::seconds(after),
            cluster: cluster.into(),
            impersonated_user: "user:ana".into(),
            impersonated_groups: vec!["portcullis:grant:g1".into(), "system:authenticated".into()],
            ..event(id, stage)
        };
        let as_bobs = ApiserverEvent {
            impersonated_groups: vec!["portcullis:grant:g-bob".into()],
            ..request("held", 1, "prod", "ResponseComplete")
        };
        let batch = [
            request("held", 0, "prod", "RequestReceived"),
            request("held", 0, "prod", "ResponseComplete"),
            request("held", 1, "prod", "ResponseComplete"),
            request("held", 600, "prod", "RequestReceived"),
            request("held", 600, "prod", "ResponseComplete"),
            request("held", 0, "test", "ResponseComplete"),
            request("read", 0, "prod", "ResponseComplete"),
            request("read", 1, "prod", "ResponseComplete"),
            ApiserverEvent {
                impersonated_user: String::new(),
                impersonated_groups: Vec::new(),
                ..request("refused", 0, "prod", "ResponseComplete")
            },
        ];
        assert_eq!(store.store_apiserver_events(&batch).unwrap(), 9, "every request kept");
        assert_eq!(store.store_apiserver_events(&batch).unwrap(), 0, "delivered again");
        let alerts = Counter::default();
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 4);
        let checked = |id, after, cluster| {
            store
                .apiserver_request_checked(&request(id, after, cluster, ""))
                .unwrap()
        };
        assert_eq!(checked("held", 0, "prod"), Some(Checked::Matched));
        assert_eq!(
            checked("held", 1, "prod"),
            Some(Checked::Matched),
            "the write's own second request"
        );
        assert_eq!(checked("held", 600, "prod"), Some(Checked::Alert));
        assert_eq!(checked("held", 0, "test"), Some(Checked::Alert));
        assert_eq!(checked("read", 0, "prod"), Some(Checked::Matched));
        assert_eq!(
            checked("read", 1, "prod"),
            Some(Checked::Alert),
            "a read is one request"
        );
        assert_eq!(checked("refused", 0, "prod"), Some(Checked::Alert));
        let mut audit = super::super::sqlite::SqliteAuditStore::open(store.path()).unwrap();
        let filter = super::super::query::Filter {
            kind: Some(ALERT.into()),
            ..Default::default()
        };
        let rows = super::super::store::AuditStore::query(&mut audit, &filter).unwrap();
        let mut found: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|r| (r.row.id.as_str(), r.row.cluster.as_str(), r.row.reason.as_str()))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [
                ("held", "prod", REUSED),
                ("held", "test", BYPASS),
                ("read", "prod", REUSED),
                ("refused", "prod", BYPASS)
            ]
        );
        assert_eq!(
            check(&store, Duration::ZERO, later, &alerts).unwrap(),
            0,
            "each alert once"
        );

        // Someone else's grant group beside ana's own request's user.
        store
            .store_apiserver_events(&[ApiserverEvent {
                received_at: received() + chrono::TimeDelta::milliseconds(1500),
                ..as_bobs
            }])
            .unwrap();
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 1);
        let rows = super::super::store::AuditStore::query(&mut audit, &filter).unwrap();
        assert!(
            rows.iter().any(|r| r.row.id == "held" && r.row.reason == IMPERSONATION),
            "{rows:?}"
        );

        // A write under way (recorded as it left, no row yet): its request
        // waits for the row, which says how long the write took.
        store.record_forwarded("writing", "prod", "write", Utc::now()).unwrap();
        let writing = request("writing", 0, "prod", "ResponseComplete");
        store.store_apiserver_events(std::slice::from_ref(&writing)).unwrap();
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 0);
        assert_eq!(store.apiserver_request_checked(&writing).unwrap(), None, "not yet");
        super::super::commit_event(&store, row("writing", true, "")).unwrap();
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 0);
        assert_eq!(
            store.apiserver_request_checked(&writing).unwrap(),
            Some(Checked::Matched)
        );

        // A write whose row never comes (its process crashed first): after
        // a while it is taken to have lasted that while.
        store
            .record_forwarded("abandoned", "prod", "write", Utc::now())
            .unwrap();
        let abandoned = [0, 1, 1200].map(|after| request("abandoned", after, "prod", "ResponseComplete"));
        store.store_apiserver_events(&abandoned).unwrap();
        assert_eq!(check(&store, Duration::ZERO, later, &alerts).unwrap(), 0);
        assert!(abandoned
            .iter()
            .all(|e| store.apiserver_request_checked(e).unwrap().is_none()));
        let much_later = Utc::now() + WRITE_WAIT + chrono::TimeDelta::seconds(1);
        assert_eq!(check(&store, Duration::ZERO, much_later, &alerts).unwrap(), 1);
        let decided: Vec<_> = abandoned
            .iter()
            .map(|e| store.apiserver_request_checked(e).unwrap())
            .collect();
        assert_eq!(
            decided,
            [Some(Checked::Matched), Some(Checked::Matched), Some(Checked::Alert)]
        );
    }

    #[test]
    fn a_verdict_names_a_bypass_and_a_changed_impersonation_only() {
        let as_ana = ApiserverEvent {
            impersonated_user: "user:ana".into(),
            ..ApiserverEvent::default()
        };
        let nobody = ApiserverEvent {
            stage: "RequestReceived".into(),
            ..ApiserverEvent::default()
        };
        let nobody_at_the_end = ApiserverEvent {
            stage: "ResponseComplete".into(),
            decision: "allow".into(),
            ..ApiserverEvent::default()
        };
        let refused_while_impersonating = ApiserverEvent {
            stage: "ResponseComplete".into(),
            ..ApiserverEvent::default()
        };
        let cases = [
            (Sent::No, &nobody, Some(BYPASS)),
            (Sent::No, &as_ana, Some(BYPASS)),
            (Sent::As("user:ana".into()), &as_ana, None),
            (Sent::As("user:bob".into()), &as_ana, Some(IMPERSONATION)),
            (Sent::As(String::new()), &as_ana, Some(IMPERSONATION)),
            // The first stage names nobody yet; once authorized, it must.
            (Sent::As("user:ana".into()), &nobody, None),
            (Sent::As("user:ana".into()), &nobody_at_the_end, Some(IMPERSONATION)),
            (Sent::As("user:ana".into()), &refused_while_impersonating, None),
            (Sent::As(String::new()), &nobody_at_the_end, None),
            (Sent::Unknown, &as_ana, None),
        ];
        for (sent, event, expected) in cases {
            assert_eq!(verdict(sent.clone(), event), expected, "{sent:?}");
        }
        let with = |groups: &[&str]| ApiserverEvent {
            impersonated_groups: groups.iter().map(|g| g.to_string()).collect(),
            ..as_ana.clone()
        };
        let ana = || Sent::As("user:ana".into());
        let cases = [
            (ana(), with(&["portcullis:grant:g1", "system:authenticated"]), None),
            (
                ana(),
                with(&["portcullis:grant:g1", "system:masters"]),
                Some(IMPERSONATION),
            ),
            (ana(), with(&["system:masters"]), Some(IMPERSONATION)),
        ];
        for (sent, event, expected) in cases {
            assert_eq!(
                verdict(sent.clone(), &event),
                expected,
                "{:?}",
                event.impersonated_groups
            );
        }
    }
}
