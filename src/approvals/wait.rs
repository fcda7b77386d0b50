//! Waiting for a decision, and expiry.
//!
//! A waiting call looks at the store again as soon as the store tells of a
//! change to held writes (on PostgreSQL: a decision made on another
//! replica, web or CLI, wakes a call waiting here at once), and polls it
//! anyway, for a change it was not told of (SQLite, where the CLI decides
//! in another process; a notification missed). Waiting holds no lock and
//! claims nothing: a caller that goes away simply stops polling. Overdue
//! held writes expire when anyone looks at them, and every 30 seconds on
//! one replica at a time.

use super::decide::DecideError;
use super::{HeldState, HeldWrite};
use crate::store::notify::{self, Change};
use crate::store::Store;
use chrono::Utc;
use std::future::Future;
use std::time::Duration;

/// How often a waiting call looks at the store untold.
const POLL: Duration = Duration::from_millis(200);
/// The job's name among the replicas ([`Store::exclusive`]).
const EXPIRY_JOB: &str = "held writes expiry";

/// Expire every open held write past its expiry, and finish every one a
/// process ended while running ([`HeldWrite::stranded`]: its outcome
/// unknown, so it never runs again and its body goes); each recorded once,
/// by whichever process notices first. Returns them.
pub fn expire_overdue(store: &Store) -> Result<Vec<HeldWrite>, DecideError> {
    let now = Utc::now();
    let mut expired = Vec::new();
    let actor = |held: &HeldWrite| {
        held.request
            .principal()
            .unwrap_or_else(|| crate::identity::Principal::bot("-"))
    };
    // Each on record before it takes effect, as a decision is.
    for held in store.list_open_held()? {
        if !held.overdue(now) {
            continue;
        }
        if super::decide::recorded_change(store, "expire", &actor(&held), &held, || store.expire_held(&held.id))? {
            expired.push(HeldWrite {
                state: HeldState::Expired,
                ..held
            });
        }
    }
    for held in store.stranded_held(now - super::RUN_BOUND)? {
        let outcome = crate::store::Outcome::interrupted();
        let finish = || store.finish_held(&held.id, &outcome, now, false);
        if super::decide::recorded_change(store, "interrupted", &actor(&held), &held, finish)? {
            tracing::warn!(held = %held.id, "an approved write left running by a process that ended is finished, its outcome unknown");
            expired.push(HeldWrite {
                state: HeldState::Executed,
                outcome: Some(outcome),
                ..held
            });
        }
    }
    Ok(expired)
}

/// Read held write `id`, expiring it first if it is overdue.
pub fn current(store: &Store, id: &str) -> Result<Option<HeldWrite>, DecideError> {
    let Some(held) = store.held(id)? else {
        return Ok(None);
    };
    let now = Utc::now();
    if held.overdue(now) || held.stranded(now) {
        expire_overdue(store)?;
        return Ok(store.held(id)?);
    }
    Ok(Some(held))
}

/// Wait up to `wait` for held write `id` to leave `pending` (and, when
/// another call is running it, `executing`); returns it as last seen.
pub async fn until_decided(store: &Store, id: &str, wait: Duration) -> Result<Option<HeldWrite>, DecideError> {
    until_decided_polling(store, id, wait, || tokio::time::sleep(POLL)).await
}

/// [`until_decided`], looking again when told of a change or when `poll`
/// completes.
async fn until_decided_polling<P: Future<Output = ()>>(
    store: &Store,
    id: &str,
    wait: Duration,
    mut poll: impl FnMut() -> P,
) -> Result<Option<HeldWrite>, DecideError> {
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribed before the first look, so no change after it goes unheard.
    let mut changes = store.changes();
    loop {
        let (store2, id2) = (store.clone(), id.to_string());
        let held = tokio::task::spawn_blocking(move || current(&store2, &id2))
            .await
            .map_err(|e| DecideError::NotAllowed(format!("the store could not be read: {e}")))??;
        let open = held
            .as_ref()
            .is_some_and(|h| matches!(h.state, HeldState::Pending | HeldState::Executing));
        if !open || tokio::time::Instant::now() >= deadline {
            return Ok(held);
        }
        let told = async {
            match changes.as_mut() {
                Some(changes) => notify::wait_for(changes, Change::moves_held_writes).await,
                None => std::future::pending().await,
            }
        };
        let _ = tokio::time::timeout_at(deadline, async {
            tokio::select! {
                () = told => {}
                () = poll() => {}
            }
        })
        .await;
    }
}

/// Expire overdue held writes every 30 seconds (run by the server), on
/// one replica at a time.
pub async fn expire_periodically(store: Store) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let store2 = store.clone();
        // Begun only once the lock is held.
        let expiry = async move { tokio::task::spawn_blocking(move || expire_overdue(&store2)).await };
        match store.exclusive(EXPIRY_JOB, expiry).await {
            Ok(Some(Ok(Ok(expired)))) if !expired.is_empty() => {
                tracing::info!(count = expired.len(), "held writes expired")
            }
            Ok(Some(Ok(Err(error)))) => tracing::warn!(%error, "cannot expire held writes"),
            Err(error) => tracing::warn!(%error, "cannot expire held writes"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use crate::store::{HeldRequest, Precondition, Preview};

    fn pending(id: &str) -> HeldWrite {
        let now = Utc::now();
        let request = HeldRequest {
            cluster: "c".into(),
            requester: "bot:ci".into(),
            agent_id: None,
            delegated: false,
            credential_id: "cred".into(),
            tool: String::new(),
            client: "127.0.0.1".into(),
            method: "DELETE".into(),
            path: "/api/v1/namespaces/shop/pods/web".into(),
            query: String::new(),
            content_type: String::new(),
            verb: "delete".into(),
            api_group: String::new(),
            resource: "pods".into(),
            namespace: "shop".into(),
            name: "web".into(),
            preview: Preview::default(),
            precondition: Precondition::default(),
        };
        HeldWrite {
            id: id.into(),
            digest: "d".into(),
            state: HeldState::Pending,
            request,
            created_at: now,
            expires_at: now + chrono::TimeDelta::minutes(10),
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            executed_at: None,
            outcome: None,
            answered: false,
        }
    }

    /// An expiry is on record before it takes effect: one the store fails
    /// to make still leaves its row (not made), never nothing.
    #[test]
    fn an_expiry_is_on_record_before_it_is_made() {
        let store = testing::sqlite();
        store.insert_held(&pending("late"), b"sealed").unwrap();
        let set = |sql: &str| {
            store
                .with(|c| Ok(c.execute(sql, crate::store::sql::params![])?))
                .unwrap()
        };
        set("UPDATE held_writes SET expires_at = '2000-01-01T00:00:00.000000Z'");
        set("CREATE TRIGGER refuse BEFORE UPDATE ON held_writes BEGIN SELECT RAISE(ABORT, 'refused'); END");
        assert!(expire_overdue(&store).is_err());
        let rows = crate::audit::open(&store)
            .unwrap()
            .query(&crate::audit::query::Filter::default())
            .unwrap();
        let expire: Vec<_> = rows.iter().map(|r| &r.row).filter(|r| r.verb == "expire").collect();
        assert_eq!(expire.len(), 1, "{expire:?}");
        assert_eq!((expire[0].code, expire[0].write), (500, false), "{expire:?}");
        set("DROP TRIGGER refuse");
        assert_eq!(expire_overdue(&store).unwrap().len(), 1);
        let rows = crate::audit::open(&store)
            .unwrap()
            .query(&crate::audit::query::Filter::default())
            .unwrap();
        let made = rows
            .iter()
            .map(|r| &r.row)
            .filter(|r| r.verb == "expire" && r.code == 200)
            .count();
        assert_eq!(made, 1);
    }

    /// A process that ended while it ran an approved write (SIGKILL, the
    /// OOM killer) left it executing: without this, every repeat of the
    /// call waited and was told it ran, with no outcome, for ever.
    #[test]
    fn a_write_left_executing_by_a_process_that_ended_is_finished_unknown_once_its_run_is_long_over() {
        for store in testing::both() {
            let b = store.backend;
            for id in ["stranded", "running"] {
                store.insert_held(&pending(id), b"sealed").unwrap();
                assert!(store
                    .decide_held(id, HeldState::Approved, "person:ana", None, Utc::now())
                    .unwrap());
                assert!(store.claim_held(id, Utc::now()).unwrap(), "{b}");
            }
            // As if the hour went by: "stranded" expired past the bound on
            // any run, "running" only just.
            let age = |id: &str, by: chrono::TimeDelta| {
                store
                    .with(|c| {
                        Ok(c.execute(
                            "UPDATE held_writes SET expires_at = ?2 WHERE id = ?1",
                            crate::store::sql::params![id, Utc::now() - by],
                        )?)
                    })
                    .unwrap();
            };
            age("stranded", crate::approvals::RUN_BOUND + chrono::TimeDelta::seconds(1));
            age("running", chrono::TimeDelta::seconds(1));
            let held = current(&store, "stranded").unwrap().unwrap();
            assert_eq!(held.state, HeldState::Executed, "{b}: looked at, it is finished");
            let outcome = held.outcome.unwrap();
            assert_eq!(outcome.code, 0, "{b}");
            assert!(
                outcome.body.contains("unknown: check the object"),
                "{b}: {}",
                outcome.body
            );
            assert_eq!(store.held_body("stranded").unwrap(), None, "{b}: its body goes");
            assert_eq!(
                store.held("running").unwrap().unwrap().state,
                HeldState::Executing,
                "{b}"
            );
            assert!(expire_overdue(&store).unwrap().is_empty(), "{b}: each is finished once");
            let told = store.held("stranded").unwrap().unwrap().answered;
            assert!(!told, "{b}: no one was told, so the same call repeated is told it");
            // An approved write past its expiry is not claimed, so none
            // runs after it and none is stranded before the bound.
            store.insert_held(&pending("late"), b"sealed").unwrap();
            assert!(store
                .decide_held("late", HeldState::Approved, "person:ana", None, Utc::now())
                .unwrap());
            age("late", chrono::TimeDelta::seconds(1));
            assert!(!store.claim_held("late", Utc::now()).unwrap(), "{b}");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_decision_through_another_replica_wakes_a_call_waiting_that_would_not_poll_again() {
        let a = testing::postgres();
        let b = Store::connect(a.postgres_pool().unwrap().config().clone()).unwrap();
        // b's listener listens before anything is held.
        let mut changes = b.changes().unwrap();
        assert_eq!(notify::next(&mut changes).await, Some(Change::Lost));
        a.insert_held(&pending("h1"), b"sealed").unwrap();
        let (looked, mut waiting) = tokio::sync::mpsc::unbounded_channel();
        let waiter = tokio::spawn(async move {
            // Its poll never completes: only word of the change can wake it.
            let poll = || {
                let _ = looked.send(());
                std::future::pending()
            };
            until_decided_polling(&b, "h1", Duration::from_secs(3600), poll).await
        });
        // It saw the write pending and waits.
        waiting.recv().await.unwrap();
        assert!(a
            .decide_held("h1", HeldState::Approved, "person:ana", None, Utc::now())
            .unwrap());
        // Untold, it would wait the hour out: 30 s only bounds a broken run.
        let held = tokio::time::timeout(Duration::from_secs(30), waiter).await;
        let held = held.expect("the waiting call was not woken").unwrap().unwrap().unwrap();
        assert_eq!(held.state, HeldState::Approved);
    }
}
