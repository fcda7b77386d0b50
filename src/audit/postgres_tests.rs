use super::*;
use crate::audit::store::{verify, VerifyReport};
use crate::store::testing::{self, TestStore};
use std::time::{Duration, Instant};

/// A fresh database and the audit store on it.
fn open() -> (TestStore, PostgresAuditStore) {
    let db = testing::postgres();
    let store = PostgresAuditStore::open(pg(&db)).unwrap();
    (db, store)
}

fn pg(db: &TestStore) -> Arc<Postgres> {
    db.postgres_pool().expect("a PostgreSQL store")
}

/// Run `statement` on the database, as someone with access to it would.
fn tamper(db: &TestStore, statement: &str) {
    let pg = pg(db);
    let client = pg.client().unwrap();
    (&Pg(&client) as &dyn Db).execute(statement, params![]).unwrap();
}

fn row(login: &str, verb: &str, code: u16) -> AuditRow {
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
    row.login = login.into();
    row.verb = verb.into();
    row.resource = "pods".into();
    row.namespace = "shop".into();
    row.code = code;
    row.write = verb == "create";
    row.finish(Utc::now());
    row
}

/// Poll `check` until it holds (a lock goes some time after its
/// connection is dropped).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ids(rows: &[ChainedRow]) -> Vec<String> {
    rows.iter().map(|c| c.row.id.clone()).collect()
}

#[test]
fn a_committed_row_reads_back_equal_and_chained() {
    let (_db, mut store) = open();
    let mut rows = vec![row("ana", "get", 200), row("ben", "create", 201)];
    rows[1].via = "client:claude".into();
    rows[1].kind = "system".into();
    let chained = store.commit(&[], &rows).unwrap();
    let read = store.query(&Filter::default()).unwrap();
    assert_eq!(read, chained);
    assert_eq!(read[1].row, rows[1]);
    assert_eq!(read[1].prev_hash, read[0].hash);
    assert_eq!(
        store.head().unwrap(),
        Anchor {
            seq: 2,
            hash: read[1].hash.clone()
        }
    );
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(2));
}

#[test]
fn filters_select_exactly_the_matching_rows() {
    let (db, mut writer) = open();
    let mut rows = vec![
        row("ana", "get", 200),
        row("ana", "create", 201),
        row("ben", "list", 403),
        row("ben", "get", 404),
        row("cy", "get", 200),
    ];
    rows[4].discovery = true;
    rows[3].credential_prefix = "pcs_ab".into();
    writer.commit(&[], &rows).unwrap();
    let mut reader = PostgresAuditStore::open(pg(&db)).unwrap();
    let mut found = |filter: Filter| ids(&reader.query(&filter).unwrap());
    let all = |only: &[usize]| -> Vec<String> { only.iter().map(|&i| rows[i].id.clone()).collect() };
    let f = Filter::default;
    assert_eq!(
        found(Filter {
            login: Some("ana".into()),
            ..f()
        }),
        all(&[0, 1])
    );
    assert_eq!(
        found(Filter {
            outcome: Some(Outcome::Denied),
            ..f()
        }),
        all(&[2])
    );
    assert_eq!(
        found(Filter {
            outcome: Some(Outcome::Allowed),
            ..f()
        }),
        all(&[0, 1])
    );
    assert!(found(Filter {
        outcome: Some(Outcome::Refused),
        ..f()
    })
    .is_empty());
    assert_eq!(
        found(Filter {
            outcome: Some(Outcome::Error),
            ..f()
        }),
        all(&[3])
    );
    assert_eq!(
        found(Filter {
            outcome: Some(Outcome::Write),
            ..f()
        }),
        all(&[1])
    );
    assert_eq!(
        found(Filter {
            credential: Some("pcs_ab".into()),
            ..f()
        }),
        all(&[3])
    );
    assert_eq!(found(Filter { limit: Some(2), ..f() }), all(&[2, 3]));
    assert_eq!(
        found(Filter {
            discovery: true,
            limit: Some(2),
            ..f()
        }),
        all(&[3, 4])
    );
    assert_eq!(
        found(Filter {
            since: Some(rows[1].started_at),
            login: Some("ana".into()),
            ..f()
        }),
        all(&[1])
    );
    assert!(found(Filter {
        until: Some(rows[0].started_at),
        ..f()
    })
    .is_empty());
}

#[test]
fn verify_names_a_deleted_row_and_an_edited_row() {
    let (db, mut store) = open();
    let rows: Vec<AuditRow> = (0..5).map(|i| row(&format!("u{i}"), "get", 200)).collect();
    store.commit(&[], &rows).unwrap();
    tamper(&db, "UPDATE audit SET code = 500 WHERE seq = 4");
    let report = verify(&mut store).unwrap();
    assert_eq!(
        report.broken,
        Some(chain::Break::Edited {
            id: rows[3].id.clone(),
            seq: 4
        })
    );
    tamper(&db, "DELETE FROM audit WHERE seq = 2");
    let report = verify(&mut store).unwrap();
    assert_eq!(report.checked, 1);
    assert_eq!(
        report.broken,
        Some(chain::Break::Removed {
            id: rows[2].id.clone(),
            seq: 3,
            expected: 2
        })
    );
}

#[test]
fn verify_names_an_anchor_moved_past_rows_still_kept() {
    let (db, mut store) = open();
    let rows: Vec<AuditRow> = (0..4).map(|i| row(&format!("u{i}"), "get", 200)).collect();
    let chained = store.commit(&[], &rows).unwrap();
    // Row 2 edited, and the anchor moved onto it, so that verification
    // would start after it.
    tamper(&db, "UPDATE audit SET code = 500 WHERE seq = 2");
    tamper(
        &db,
        &format!(
            "INSERT INTO audit_anchor (one, seq, hash) VALUES (1, 2, '{}') \
             ON CONFLICT (one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            chained[1].hash
        ),
    );
    let report = verify(&mut store).unwrap();
    assert_eq!(
        report.broken,
        Some(chain::Break::BeforeAnchor {
            id: rows[0].id.clone(),
            seq: 1,
            anchor: 2
        })
    );
    // Past the chain's end: nothing would be checked at all.
    tamper(&db, "UPDATE audit_anchor SET seq = 99");
    assert!(verify(&mut store).unwrap().broken.is_some());
}

#[test]
fn a_sweep_removes_only_old_rows_and_the_chain_still_verifies() {
    let (_db, mut store) = open();
    let mut old = row("ana", "get", 200);
    old.started_at -= chrono::TimeDelta::days(40);
    old.ended_at -= chrono::TimeDelta::days(40);
    let rows = vec![old.clone(), old, row("ana", "get", 200)];
    let chained = store.commit(&[], &rows).unwrap();
    let cutoff = Utc::now() - chrono::TimeDelta::days(30);
    assert_eq!(store.sweep(cutoff, 1).unwrap(), 1);
    assert_eq!(store.sweep(cutoff, 100).unwrap(), 1);
    assert_eq!(store.sweep(cutoff, 100).unwrap(), 0);
    assert_eq!(
        store.anchor().unwrap(),
        Anchor {
            seq: 2,
            hash: chained[1].hash.clone()
        }
    );
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(1));
    let next = store.commit(&[], &[row("ben", "get", 200)]).unwrap();
    assert_eq!(next[0].seq, 4);
    assert_eq!(verify(&mut store).unwrap().checked, 2);
    // Everything swept: the chain goes on from the anchor.
    assert_eq!(store.sweep(Utc::now() + chrono::TimeDelta::days(1), 100).unwrap(), 2);
    assert_eq!(store.head().unwrap(), store.anchor().unwrap());
    assert_eq!(store.commit(&[], &[row("cy", "get", 200)]).unwrap()[0].seq, 5);
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(1));
}

#[test]
fn intents_left_by_a_crashed_replica_become_rows_with_an_unknown_outcome() {
    let (db, mut crashed) = open();
    let settled = row("ana", "create", 201);
    let orphan = row("ana", "delete", 200);
    crashed.commit(&[settled.clone(), orphan.clone()], &[]).unwrap();
    crashed.commit(&[], std::slice::from_ref(&settled)).unwrap();
    // Its own intents are writes in flight, not a crash's.
    assert!(crashed.recover().unwrap().is_empty());
    drop(crashed);
    let mut next = PostgresAuditStore::open(pg(&db)).unwrap();
    let mut recovered = Vec::new();
    eventually("the crashed replica's lock is released", || {
        recovered = next.recover().unwrap();
        !recovered.is_empty()
    });
    assert_eq!(ids(&recovered), [orphan.id]);
    assert_eq!(
        (recovered[0].row.code, recovered[0].row.reason.as_str()),
        (0, "Unknown")
    );
    assert!(next.recover().unwrap().is_empty());
    assert_eq!(next.query(&Filter::default()).unwrap().len(), 2);
    assert_eq!(verify(&mut next).unwrap().broken, None);
}

#[test]
fn an_intent_is_settled_by_its_row_in_the_same_commit_or_after_a_reopen() {
    let (db, mut store) = open();
    let same = row("ana", "create", 201);
    let later = row("ana", "delete", 200);
    store
        .commit(std::slice::from_ref(&same), std::slice::from_ref(&same))
        .unwrap();
    store.commit(std::slice::from_ref(&later), &[]).unwrap();
    drop(store);
    // A restarted process ships its spool: the row settles the intent its
    // previous run left, so nothing is left to recover.
    let mut store = PostgresAuditStore::open(pg(&db)).unwrap();
    store.commit(&[], std::slice::from_ref(&later)).unwrap();
    let left = |db: &TestStore| -> i64 {
        let pg = pg(db);
        let client = pg.client().unwrap();
        let c: &dyn Db = &Pg(&client);
        c.query_row("SELECT COUNT(*) FROM audit_intents", params![], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(left(&db), 0);
    assert!(store.recover().unwrap().is_empty());
    assert_eq!(ids(&store.query(&Filter::default()).unwrap()), [same.id, later.id]);
}

#[test]
fn forwarded_records_are_kept_once_and_committed_names_only_ids_with_a_row() {
    let (db, mut store) = open();
    let sent = Forwarded::request("a1", "prod");
    store.forwarded(vec![sent.clone(), sent.clone(), Forwarded::system("s1", "prod")]);
    let intent = row("ana", "create", 201);
    let done = row("ana", "get", 200);
    store
        .commit(std::slice::from_ref(&intent), std::slice::from_ref(&done))
        .unwrap();
    store.forwarded(vec![sent]);
    store.commit(&[], &[]).unwrap();
    let pg = pg(&db);
    let client = pg.client().unwrap();
    let c: &dyn Db = &Pg(&client);
    let kinds: Vec<(String, String)> = c
        .query_map("SELECT id, kind FROM audit_forwarded ORDER BY id", params![], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(kinds, [("a1".into(), "request".into()), ("s1".into(), "system".into())]);
    let asked = [done.id.clone(), intent.id.clone(), "nothing".to_string()];
    assert_eq!(store.committed(&asked).unwrap(), HashSet::from([done.id]));
    // A bypass alert under a request's id does not make its row committed.
    let mut alert = row("ana", "watch", 200);
    alert.id = "a1".into();
    alert.kind = crate::audit::bypass::ALERT.into();
    store.commit(&[], &[alert]).unwrap();
    assert!(store.committed(&["a1".to_string()]).unwrap().is_empty());
}

#[test]
fn a_replicas_recovery_leaves_the_intents_of_a_live_replica_alone() {
    let (db, mut live) = open();
    let in_flight = row("ana", "create", 201);
    live.commit(std::slice::from_ref(&in_flight), &[]).unwrap();
    let mut starting = PostgresAuditStore::open(pg(&db)).unwrap();
    assert!(starting.recover().unwrap().is_empty());
    // The live replica's lock connection is lost (PostgreSQL restarted, or
    // the connection was cut): its next commit takes the lock back.
    let lock_pid: i32 = {
        let lock = &live.replica.as_ref().unwrap().lock;
        wait(lock.query_one("SELECT pg_backend_pid()", &[])).unwrap().get(0)
    };
    tamper(&db, &format!("SELECT pg_terminate_backend({lock_pid})"));
    eventually("the lock connection is closed", || {
        live.replica.as_ref().unwrap().lock.is_closed()
    });
    live.commit(&[], &[row("ana", "get", 200)]).unwrap();
    assert!(starting.recover().unwrap().is_empty());
    let finished = live.commit(&[], std::slice::from_ref(&in_flight)).unwrap();
    assert_eq!(finished[0].row.code, 201);
    assert_eq!(verify(&mut starting).unwrap(), VerifyReport::intact(2));
}

#[test]
fn replicas_committing_at_once_append_to_one_chain_that_verifies() {
    const REPLICAS: usize = 4;
    const BATCHES: usize = 30;
    let (db, _) = open();
    let committers: Vec<_> = (0..REPLICAS)
        .map(|r| {
            let pg = pg(&db);
            std::thread::spawn(move || {
                let mut store = PostgresAuditStore::open(pg).unwrap();
                let mut mine = Vec::new();
                for b in 0..BATCHES {
                    let rows: Vec<AuditRow> = (0..=b % 7).map(|_| row(&format!("r{r}"), "create", 201)).collect();
                    store.commit(&rows, &[]).unwrap();
                    let chained = store.commit(&[], &rows).unwrap();
                    assert!(chained.windows(2).all(|w| w[1].seq == w[0].seq + 1));
                    mine.extend(rows.into_iter().map(|row| row.id));
                }
                mine
            })
        })
        .collect();
    let committed: Vec<Vec<String>> = committers.into_iter().map(|t| t.join().unwrap()).collect();
    let mut store = PostgresAuditStore::open(pg(&db)).unwrap();
    let total: usize = committed.iter().map(Vec::len).sum();
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(total as u64));
    let chain = store.chain_page(0, total + 1).unwrap();
    let seqs: Vec<i64> = chain.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, (1..=total as i64).collect::<Vec<_>>(), "no gaps, no row lost");
    for (r, mine) in committed.iter().enumerate() {
        let in_chain: Vec<String> = chain
            .iter()
            .filter(|c| c.row.login == format!("r{r}"))
            .map(|c| c.row.id.clone())
            .collect();
        assert_eq!(&in_chain, mine, "replica {r}'s rows in its own commit order");
    }
    assert!(store.recover().unwrap().is_empty(), "every intent was settled");
}

#[test]
fn replicas_exporting_one_chain_export_each_row_once_from_where_the_export_began() {
    use crate::audit::export::{ExportSink, Exporter};
    let (db, mut a) = open();
    let before = a.commit(&[], &[row("ana", "get", 200)]).unwrap();
    let mut b = PostgresAuditStore::open(pg(&db)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sink = |name: &str| ExportSink::open(dir.path().join(name).to_str().unwrap(), 1 << 30, 1).unwrap();
    let mut export_a = Exporter::start(Some(sink("a.jsonl")), &mut a);
    let mut export_b = Exporter::start(Some(sink("b.jsonl")), &mut b);
    let mut committed = Vec::new();
    for i in 0..6 {
        let (store, export) = match i % 2 {
            0 => (&mut a, &mut export_a),
            _ => (&mut b, &mut export_b),
        };
        let chained = store
            .commit(&[], &[row("ana", "get", 200), row("ben", "get", 200)])
            .unwrap();
        committed.extend(ids(&chained));
        export.committed(store, &chained);
    }
    export_a.catch_up(&mut a);
    export_b.catch_up(&mut b);
    let exported = |name: &str| -> Vec<ChainedRow> {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    };
    let (from_a, from_b) = (exported("a.jsonl"), exported("b.jsonl"));
    assert!(!from_a.is_empty() && !from_b.is_empty(), "both replicas took turns");
    let mut all: Vec<ChainedRow> = from_a.into_iter().chain(from_b).collect();
    all.sort_by_key(|r| r.seq);
    assert_eq!(ids(&all), committed, "every row after the start once, none before");
    assert!(!ids(&all).contains(&before[0].row.id));
}

#[test]
fn a_row_with_a_nul_from_a_client_is_stored_marked_and_does_not_stop_the_commits_after_it() {
    let (_db, mut store) = open();
    let mut nul = row("ana", "get", 404);
    nul.namespace = "\0".into();
    nul.tool = "a\0b".into();
    // What PostgreSQL refuses to make text of: before the row was cleaned,
    // this commit failed, and the writer retried it for ever.
    let chained = store.commit(&[], &[nul, row("ben", "get", 200)]).unwrap();
    let read = store.query(&Filter::default()).unwrap();
    assert_eq!(read, chained);
    assert_eq!(read[0].row.namespace, "\u{fffd}");
    assert_eq!(read[0].row.tool, "a\u{fffd}b");
    assert_eq!(read[1].row.login, "ben");
    store.commit(&[], &[row("cai", "get", 200)]).unwrap();
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(3));
}

#[test]
fn rows_a_replicas_sink_failed_are_exported_at_a_later_turn_not_skipped() {
    use crate::audit::export::{ExportSink, Exporter};
    let (_db, mut a) = open();
    let dir = tempfile::tempdir().unwrap();
    // A disk that is full.
    let full = ExportSink::open("/dev/full", 1 << 20, 1).unwrap();
    let mut export = Exporter::start(Some(full), &mut a);
    let first = a
        .commit(&[], &[row("ana", "get", 200), row("ben", "get", 200)])
        .unwrap();
    export.committed(&mut a, &first);
    // The disk has room again.
    let path = dir.path().join("a.jsonl");
    export.replace_sink(ExportSink::open(path.to_str().unwrap(), 1 << 30, 1).unwrap());
    let second = a.commit(&[], &[row("cai", "get", 200)]).unwrap();
    export.committed(&mut a, &second);
    let text = std::fs::read_to_string(&path).unwrap();
    let exported: Vec<ChainedRow> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(
        ids(&exported),
        ids(&[first, second].concat()),
        "every row once, in chain order"
    );
}

/// Rows deleted from the chain's end are named by an alert before this
/// store's next rows, in the chain, on PostgreSQL too.
#[test]
fn rows_deleted_from_the_end_are_named_by_an_alert_in_the_chain() {
    let (db, mut store) = open();
    store
        .commit(
            &[],
            &[
                row("ana", "get", 200),
                row("ana", "delete", 200),
                row("ana", "get", 200),
            ],
        )
        .unwrap();
    tamper(&db, "DELETE FROM audit WHERE seq > 1");
    let next = row("ben", "get", 200);
    let chained = store.commit(&[], std::slice::from_ref(&next)).unwrap();
    assert_eq!(chained.len(), 1);
    assert_eq!((chained[0].seq, chained[0].row.id.as_str()), (3, next.id.as_str()));
    let read = store.query(&Filter::default()).unwrap();
    assert_eq!(read.len(), 3);
    assert_eq!(read[1].row.kind, crate::audit::bypass::ALERT);
    assert_eq!(read[1].row.reason, crate::audit::bypass::CUT_SHORT);
    assert_eq!(read[1].row.query, "head=1&committed=3");
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(3));
}

/// `after` pages forward on PostgreSQL too (its arguments are texts).
#[test]
fn after_pages_forward_from_a_place_in_the_chain() {
    let (_db, mut store) = open();
    let rows: Vec<AuditRow> = (0..5).map(|_| row("ana", "get", 200)).collect();
    store.commit(&[], &rows).unwrap();
    let mut seqs = |after, limit| -> Vec<i64> {
        let filter = Filter {
            after,
            limit,
            ..Filter::default()
        };
        store.query(&filter).unwrap().iter().map(|r| r.seq).collect()
    };
    assert_eq!(seqs(Some(1), Some(2)), [2, 3]);
    assert_eq!(seqs(Some(3), None), [4, 5]);
    assert_eq!(seqs(None, Some(2)), [4, 5]);
}
