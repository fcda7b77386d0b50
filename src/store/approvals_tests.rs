use super::*;
use crate::identity::Principal;
use crate::store::testing;

fn held(id: &str, digest: &str) -> HeldWrite {
    let now = Utc::now();
    HeldWrite {
        id: id.into(),
        digest: digest.into(),
        state: HeldState::Pending,
        request: HeldRequest {
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
        },
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

/// Runs `f` on `n` threads released at the same moment; how many said yes.
fn racing(n: usize, f: impl Fn() -> bool + Sync) -> usize {
    racing_with(n, |_| f())
}

/// Runs `f(i)` for `i` in `0..n` on `n` threads released at the same
/// moment; how many said yes.
fn racing_with(n: usize, f: impl Fn(usize) -> bool + Sync) -> usize {
    testing::race(n, f).into_iter().filter(|&yes| yes).count()
}

#[test]
fn a_held_write_is_decided_once_and_claimed_by_exactly_one_of_the_callers_racing_for_it() {
    for store in testing::both() {
        let write = held("h1", "d1");
        store.insert_held(&write, b"sealed").unwrap();
        let decided = racing(4, || {
            store
                .decide_held("h1", HeldState::Approved, "ana", Some("ok"), Utc::now())
                .unwrap()
        });
        assert_eq!(decided, 1, "{}", store.backend);
        let claimed = racing(4, || store.claim_held("h1", Utc::now()).unwrap());
        assert_eq!(claimed, 1, "{}", store.backend);
        assert!(!store.expire_held("h1").unwrap(), "{}", store.backend);
        let outcome = Outcome {
            code: 200,
            body: "{}".into(),
        };
        store.finish_held("h1", &outcome, Utc::now(), true).unwrap();
        let done = store.held("h1").unwrap().unwrap();
        assert_eq!(
            (done.state, done.decided_by.as_deref(), done.outcome, done.answered),
            (HeldState::Executed, Some("ana"), Some(outcome), true),
            "{}",
            store.backend
        );
        assert_eq!(done.request, write.request, "{}", store.backend);
        assert_eq!(store.held_body("h1").unwrap(), None, "{}", store.backend);
        assert!(!store.claim_held("h1", Utc::now()).unwrap(), "{}", store.backend);
    }
}

#[test]
fn a_denied_held_write_loses_its_body_and_its_digest_is_free_once_a_caller_was_told() {
    for store in testing::both() {
        store.insert_held(&held("h1", "d1"), b"sealed").unwrap();
        store.insert_held(&held("h2", "d2"), b"other").unwrap();
        assert_eq!(
            store.held_body("h1").unwrap().as_deref(),
            Some(&b"sealed"[..]),
            "{}",
            store.backend
        );
        assert!(store
            .decide_held("h1", HeldState::Denied, "ana", None, Utc::now())
            .unwrap());
        assert!(!store
            .decide_held("h1", HeldState::Approved, "bob", None, Utc::now())
            .unwrap());
        assert_eq!(store.held_body("h1").unwrap(), None, "{}", store.backend);
        assert_eq!(
            store.held_by_digest("d1").unwrap().map(|h| h.state),
            Some(HeldState::Denied)
        );
        store.mark_held_answered("h1").unwrap();
        assert_eq!(store.held_by_digest("d1").unwrap(), None, "{}", store.backend);
        let open: Vec<String> = store.list_open_held().unwrap().into_iter().map(|h| h.id).collect();
        assert_eq!(open, ["h2"], "{}", store.backend);
        assert!(store.expire_held("h2").unwrap(), "{}", store.backend);
        assert_eq!(store.held_body("h2").unwrap(), None, "{}", store.backend);
        assert_eq!(store.list_held().unwrap().len(), 2, "{}", store.backend);
    }
}

#[test]
fn the_first_approvals_key_fingerprint_recorded_is_the_one_kept() {
    for store in testing::both() {
        assert_eq!(
            store.approvals_key_fingerprint("first").unwrap(),
            "first",
            "{}",
            store.backend
        );
        assert_eq!(
            store.approvals_key_fingerprint("second").unwrap(),
            "first",
            "{}",
            store.backend
        );
    }
}

#[test]
fn only_a_principal_switched_so_needs_approval_for_its_writes() {
    for store in testing::both() {
        store.add_principal(&Principal::bot("ci"), true).unwrap();
        store.add_principal(&Principal::bot("cron"), false).unwrap();
        assert!(
            store.writes_need_approval(&Principal::bot("ci")).unwrap(),
            "{}",
            store.backend
        );
        assert!(
            !store.writes_need_approval(&Principal::bot("cron")).unwrap(),
            "{}",
            store.backend
        );
        assert!(
            !store.writes_need_approval(&Principal::bot("nobody")).unwrap(),
            "{}",
            store.backend
        );
    }
}

/// A requester's held writes are counted and listed by a column of their
/// own, not by reading every held write's request and preview.
#[test]
fn a_requesters_held_writes_are_counted_open_and_listed_newest_first() {
    for store in testing::both() {
        let b = store.backend;
        let mut other = held("o1", "d0");
        other.request.requester = "bot:other".into();
        store.insert_held(&other, b"sealed").unwrap();
        for (id, digest) in [("h1", "d1"), ("h2", "d2"), ("h3", "d3")] {
            store.insert_held(&held(id, digest), b"sealed").unwrap();
        }
        assert_eq!(store.open_held_of("bot:ci").unwrap(), 3, "{b}");
        assert!(store
            .decide_held("h1", HeldState::Approved, "ana", None, Utc::now())
            .unwrap());
        assert!(store
            .decide_held("h2", HeldState::Denied, "ana", None, Utc::now())
            .unwrap());
        assert_eq!(
            store.open_held_of("bot:ci").unwrap(),
            2,
            "{b}: pending and approved count"
        );
        let mine: Vec<String> = store.held_of("bot:ci", 2).unwrap().into_iter().map(|h| h.id).collect();
        assert_eq!(mine.len(), 2, "{b}");
        assert!(mine.iter().all(|id| id.starts_with('h')), "{b}: {mine:?}");
        assert_eq!(store.held_of("bot:other", 10).unwrap().len(), 1, "{b}");
        // One the previous release made during a rolling upgrade: no
        // requester column, still listed for its requester and only them.
        store
            .with(|c| Ok(c.execute("UPDATE held_writes SET requester = '' WHERE id = 'o1'", params![])?))
            .unwrap();
        let others: Vec<String> = store
            .held_of("bot:other", 10)
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(others, ["o1"], "{b}");
        assert!(store.held_of("bot:ci", 10).unwrap().iter().all(|h| h.id != "o1"), "{b}");
    }
}

/// The cap is counted with the insert: eight threads racing past their
/// first count (each on a connection of its own on PostgreSQL, as
/// replicas are) still hold no more than the limit.
#[test]
fn held_writes_racing_to_the_limit_are_held_no_more_than_it() {
    for store in testing::both() {
        let b = store.backend;
        let limit = 3;
        let held_ones = racing_with(8, |i| {
            let write = held(&format!("h{i}"), &format!("d{i}"));
            store.insert_held_within(&write, b"sealed", limit).unwrap() == Inserted::New
        });
        assert_eq!(held_ones, limit, "{b}");
        assert_eq!(store.open_held_of("bot:ci").unwrap(), limit, "{b}");
        // Another requester is not counted against this one's.
        let mut other = held("o1", "d9");
        other.request.requester = "bot:other".into();
        assert_eq!(
            store.insert_held_within(&other, b"sealed", limit).unwrap(),
            Inserted::New,
            "{b}"
        );
    }
}

/// Migration 0023 fills the column for the held writes made before it.
#[test]
fn the_migration_gives_held_writes_made_before_it_their_requester() {
    let backfill = |migration: &str| {
        migration
            .lines()
            .find(|line| line.starts_with("UPDATE held_writes"))
            .unwrap()
            .to_string()
    };
    let updates = [
        (
            "sqlite",
            backfill(include_str!("migrations/0023_held_writes_requester.sql")),
        ),
        (
            "postgres",
            backfill(include_str!("migrations/postgres/0023_held_writes_requester.sql")),
        ),
    ];
    for (store, (backend, update)) in testing::both().into_iter().zip(updates) {
        assert_eq!(store.backend, backend);
        store.insert_held(&held("h1", "d1"), b"sealed").unwrap();
        store
            .with(|c| Ok(c.execute("UPDATE held_writes SET requester = ''", params![])?))
            .unwrap();
        assert_eq!(
            store.open_held_of("bot:ci").unwrap(),
            0,
            "{backend}: as the previous release left it"
        );
        store.with(|c| Ok(c.execute_batch(&update)?)).unwrap();
        assert_eq!(store.open_held_of("bot:ci").unwrap(), 1, "{backend}");
    }
}

/// A write past its expiry that the expiry job has not reached yet is not
/// decided: approving it would only have it refused its run.
#[test]
fn a_held_write_past_its_expiry_is_not_decided() {
    for store in testing::both() {
        let b = store.backend;
        let mut late = held("late", "d1");
        late.expires_at = Utc::now() - chrono::TimeDelta::seconds(1);
        store.insert_held(&late, b"sealed").unwrap();
        for state in [HeldState::Approved, HeldState::Denied] {
            assert!(
                !store.decide_held("late", state, "ana", None, Utc::now()).unwrap(),
                "{b}"
            );
        }
        assert_eq!(store.held("late").unwrap().unwrap().state, HeldState::Pending, "{b}");
        store.insert_held(&held("due", "d2"), b"sealed").unwrap();
        assert!(
            store
                .decide_held("due", HeldState::Approved, "ana", None, Utc::now())
                .unwrap(),
            "{b}"
        );
    }
}

/// Two identical calls at once (two workers of a bot, a client's retry)
/// make one held write: the second finds the first, open and unanswered,
/// in the insert's transaction, and waits on the same approval.
#[test]
fn the_same_write_asked_twice_at_once_is_held_once() {
    for store in testing::both() {
        let b = store.backend;
        let outcomes = testing::race(6, |i| {
            store
                .insert_held_within(&held(&format!("h{i}"), "same"), b"sealed", 20)
                .unwrap()
        });
        let new = outcomes.iter().filter(|o| **o == Inserted::New).count();
        assert_eq!(new, 1, "{b}: {outcomes:?}");
        let first = store.held_by_digest("same").unwrap().unwrap();
        for outcome in &outcomes {
            if let Inserted::Same(same) = outcome {
                assert_eq!(same.id, first.id, "{b}");
            }
        }
        assert_eq!(store.open_held_of("bot:ci").unwrap(), 1, "{b}");
        // Once it is answered (run, or its end told), the same write asks anew.
        store
            .with(|c| Ok(c.execute("UPDATE held_writes SET answered = TRUE", params![])?))
            .unwrap();
        assert_eq!(
            store.insert_held_within(&held("later", "same"), b"sealed", 20).unwrap(),
            Inserted::New,
            "{b}"
        );
    }
}
