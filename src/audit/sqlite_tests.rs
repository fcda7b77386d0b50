use super::*;
use crate::audit::store::{verify, VerifyReport};

fn open() -> (tempfile::TempDir, SqliteAuditStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteAuditStore::open(&dir.path().join("p.db")).unwrap();
    (dir, store)
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

#[test]
fn a_committed_row_reads_back_equal_and_chained() {
    let (_dir, mut store) = open();
    let rows = vec![row("ana", "get", 200), row("ben", "create", 201)];
    let chained = store.commit(&[], &rows).unwrap();
    let read = store.query(&Filter::default()).unwrap();
    assert_eq!(read, chained);
    assert_eq!(read[0].row, rows[0]);
    assert_eq!(read[1].prev_hash, read[0].hash);
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(2));
}

#[test]
fn filters_select_exactly_the_matching_rows() {
    let (_dir, mut store) = open();
    let rows = vec![
        row("ana", "get", 200),
        row("ana", "create", 201),
        row("ben", "list", 403),
        row("ben", "get", 404),
    ];
    store.commit(&[], &rows).unwrap();
    let ids = |filter: Filter| -> Vec<String> {
        let mut s = SqliteAuditStore {
            conn: Connection::open(store.conn.path().unwrap()).unwrap(),
            intents: HashSet::new(),
            left_by_a_crash: HashSet::new(),
            forwarded: Vec::new(),
            waited_on: None,
            committed_seq: 0,
        };
        s.query(&filter).unwrap().into_iter().map(|r| r.row.id).collect()
    };
    assert_eq!(
        ids(Filter {
            login: Some("ana".into()),
            ..Filter::default()
        }),
        [rows[0].id.clone(), rows[1].id.clone()]
    );
    assert_eq!(
        ids(Filter {
            outcome: Some(Outcome::Denied),
            ..Filter::default()
        }),
        [rows[2].id.clone()]
    );
    assert_eq!(
        ids(Filter {
            outcome: Some(Outcome::Allowed),
            ..Filter::default()
        }),
        [rows[0].id.clone(), rows[1].id.clone()]
    );
    assert!(ids(Filter {
        outcome: Some(Outcome::Refused),
        ..Filter::default()
    })
    .is_empty());
    assert_eq!(
        ids(Filter {
            outcome: Some(Outcome::Error),
            ..Filter::default()
        }),
        [rows[3].id.clone()]
    );
    assert_eq!(
        ids(Filter {
            outcome: Some(Outcome::Write),
            ..Filter::default()
        }),
        [rows[1].id.clone()]
    );
    assert_eq!(
        ids(Filter {
            limit: Some(2),
            ..Filter::default()
        }),
        [rows[2].id.clone(), rows[3].id.clone()]
    );
    let before_all = Filter {
        until: Some(rows[0].started_at),
        ..Filter::default()
    };
    assert!(ids(before_all).is_empty());
}

#[test]
fn verify_names_a_deleted_row_and_an_edited_row() {
    let (_dir, mut store) = open();
    let rows: Vec<AuditRow> = (0..5).map(|i| row(&format!("u{i}"), "get", 200)).collect();
    store.commit(&[], &rows).unwrap();
    store
        .conn
        .execute("UPDATE audit SET code = 500 WHERE seq = 4", [])
        .unwrap();
    let report = verify(&mut store).unwrap();
    assert_eq!(
        report.broken,
        Some(chain::Break::Edited {
            id: rows[3].id.clone(),
            seq: 4
        })
    );
    store.conn.execute("DELETE FROM audit WHERE seq = 2", []).unwrap();
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
    let (_dir, mut store) = open();
    let rows: Vec<AuditRow> = (0..4).map(|i| row(&format!("u{i}"), "get", 200)).collect();
    let chained = store.commit(&[], &rows).unwrap();
    store
        .conn
        .execute("UPDATE audit SET code = 500 WHERE seq = 2", [])
        .unwrap();
    store
        .conn
        .execute(
            "INSERT INTO audit_anchor (one, seq, hash) VALUES (1, 2, ?1) \
             ON CONFLICT (one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            [&chained[1].hash],
        )
        .unwrap();
    assert_eq!(
        verify(&mut store).unwrap().broken,
        Some(chain::Break::BeforeAnchor {
            id: rows[0].id.clone(),
            seq: 1,
            anchor: 2
        })
    );
}

#[test]
fn a_sweep_removes_only_old_rows_and_the_chain_still_verifies() {
    let (_dir, mut store) = open();
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
}

#[test]
fn intents_left_by_a_crash_become_rows_with_an_unknown_outcome_and_none_of_this_process() {
    let (dir, mut store) = open();
    let settled = row("ana", "create", 201);
    let orphan = row("ana", "delete", 200);
    store.commit(&[settled.clone(), orphan.clone()], &[]).unwrap();
    // The process crashes; the next one opens the store, ships the
    // spool's row of one write, and begins a write of its own.
    drop(store);
    let mut store = SqliteAuditStore::open(&dir.path().join("p.db")).unwrap();
    store.commit(&[], std::slice::from_ref(&settled)).unwrap();
    let in_flight = row("ben", "patch", 200);
    store.commit(std::slice::from_ref(&in_flight), &[]).unwrap();
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].row.id, orphan.id);
    assert_eq!(
        (recovered[0].row.code, recovered[0].row.reason.as_str()),
        (0, "Unknown")
    );
    assert!(store.recover().unwrap().is_empty());
    assert_eq!(store.query(&Filter::default()).unwrap().len(), 2);
    // The write in flight still gets its own row.
    let answered = store.commit(&[], std::slice::from_ref(&in_flight)).unwrap();
    assert_eq!(answered[0].row.code, 200);
    assert!(store.recover().unwrap().is_empty());
}

#[test]
fn an_intent_is_settled_by_its_row_in_the_same_commit_or_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let same = row("ana", "create", 201);
    let later = row("ana", "delete", 200);
    {
        let mut store = SqliteAuditStore::open(&path).unwrap();
        store
            .commit(std::slice::from_ref(&same), std::slice::from_ref(&same))
            .unwrap();
        store.commit(std::slice::from_ref(&later), &[]).unwrap();
    }
    // A new store (a restarted process) knows the intent left on disk, so
    // the row that arrives for it settles it.
    let mut store = SqliteAuditStore::open(&path).unwrap();
    store.commit(&[], std::slice::from_ref(&later)).unwrap();
    assert!(store.recover().unwrap().is_empty(), "no intent is left over");
    let ids: Vec<String> = store
        .query(&Filter::default())
        .unwrap()
        .into_iter()
        .map(|c| c.row.id)
        .collect();
    assert_eq!(ids, vec![same.id, later.id]);
}

#[test]
fn a_timestamp_is_written_as_chrono_writes_it_fixed_width() {
    use chrono::{NaiveDate, SecondsFormat, TimeZone};
    let at = |y, mo, d, h, mi, s, micros| {
        let time = NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_micro_opt(h, mi, s, micros)
            .unwrap();
        Utc.from_utc_datetime(&time)
    };
    for t in [
        at(2026, 12, 5, 2, 53, 7, 123_456),
        at(2026, 1, 1, 0, 0, 0, 0),
        at(1, 2, 3, 4, 5, 6, 7),
        at(9999, 12, 31, 23, 59, 59, 999_999),
        // A leap second and a year of five digits: chrono's own text.
        at(2016, 12, 31, 23, 59, 59, 1_500_000),
        at(10_000, 1, 1, 0, 0, 0, 0),
        Utc::now(),
    ] {
        assert_eq!(timestamp(&t), t.to_rfc3339_opts(SecondsFormat::Micros, true));
    }
    assert_eq!(timestamp(&at(2026, 1, 2, 3, 4, 5, 6)), "2026-01-02T03:04:05.000006Z");
}

#[test]
fn rows_committed_with_their_carried_json_verify_and_read_back_equal() {
    let (_dir, mut store) = open();
    let mut odd = row("ana \"q\"\né", "get", 200);
    odd.via = "oauth:cli".into();
    odd.bytes_in = 1 << 40;
    let rows = [odd, row("ben", "create", 201)].map(Encoded::new);
    let links = store.commit_encoded(&[], &rows).unwrap();
    let read = store.query(&Filter::default()).unwrap();
    assert_eq!(read.len(), 2);
    for ((link, encoded), stored) in links.iter().zip(&rows).zip(&read) {
        assert_eq!(
            (stored.seq, &stored.prev_hash, &stored.hash),
            (link.seq, &link.prev_hash, &link.hash)
        );
        assert_eq!(serde_json::to_vec(&stored.row).unwrap(), encoded.json());
    }
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(2));
}

#[test]
fn a_batch_of_any_size_is_written_whole_with_every_forwarded_record_once() {
    use crate::audit::forwarded::Forwarded;
    let (_dir, mut store) = open();
    let mut written = Vec::new();
    // Sizes that take every statement size and a remainder of each kind.
    for size in [1, 2, 3, 7, 8, 9, 31, 32, 33, 70] {
        let rows: Vec<AuditRow> = (0..size).map(|i| row(&format!("p{i}"), "get", 200)).collect();
        let mut records: Vec<Forwarded> = rows.iter().map(|r| Forwarded::request(&r.id, "sim")).collect();
        // A record already there (sent again) stays once.
        records.extend(written.last().map(|r: &AuditRow| Forwarded::request(&r.id, "sim")));
        store.forwarded(records);
        let chained = store.commit(&[], &rows).unwrap();
        assert_eq!(chained.len(), size);
        written.extend(rows);
    }
    let read: Vec<AuditRow> = store
        .query(&Filter::default())
        .unwrap()
        .into_iter()
        .map(|c| c.row)
        .collect();
    assert_eq!(read, written);
    let forwarded: Vec<String> = {
        let mut stmt = store
            .conn
            .prepare("SELECT id FROM audit_forwarded ORDER BY id")
            .unwrap();
        let ids = stmt.query_map([], |r| r.get(0)).unwrap();
        ids.collect::<Result<_, _>>().unwrap()
    };
    let mut ids: Vec<String> = written.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    assert_eq!(forwarded, ids);
    assert_eq!(verify(&mut store).unwrap().broken, None);
}

#[test]
fn a_row_refused_mid_commit_fails_the_whole_commit_and_the_next_one_chains_on() {
    // FAIL, unlike ABORT, keeps the rows the statement wrote before the
    // refused one (the INSERT is `OR FAIL`, so SQLite keeps no journal to
    // undo them): the commit's transaction must still leave nothing.
    for raise in ["ABORT", "FAIL"] {
        let (_dir, mut store) = open();
        let first = row("ana", "get", 200);
        store.commit(&[], std::slice::from_ref(&first)).unwrap();
        store
            .conn
            .execute_batch(&format!(
                "CREATE TEMP TRIGGER refuse BEFORE INSERT ON audit WHEN NEW.login = 'eve' \
                 BEGIN SELECT RAISE({raise}, 'eve refused'); END"
            ))
            .unwrap();
        let refused = store.commit(&[], &[row("dee", "get", 200), row("eve", "get", 200)]);
        assert!(refused.unwrap_err().to_string().contains("eve refused"), "{raise}");
        let ids = |store: &mut SqliteAuditStore| -> Vec<String> {
            let read = store.query(&Filter::default()).unwrap();
            read.into_iter().map(|c| c.row.id).collect()
        };
        assert_eq!(ids(&mut store), std::slice::from_ref(&first.id), "{raise}");
        let next = row("fay", "get", 200);
        let chained = store.commit(&[], std::slice::from_ref(&next)).unwrap();
        assert_eq!(chained[0].seq, 2, "{raise}");
        assert_eq!(ids(&mut store), [first.id, next.id], "{raise}");
        assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(2), "{raise}");
    }
}

#[test]
fn a_dropped_store_closes_its_database_which_reopens_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let rows: Vec<AuditRow> = (0..40).map(|i| row(&format!("p{i}"), "get", 200)).collect();
    {
        let mut store = SqliteAuditStore::open(&path).unwrap();
        store.forwarded(rows.iter().map(|r| Forwarded::request(&r.id, "sim")).collect());
        store.commit(&[], &rows).unwrap();
        assert!(dir.path().join("p.db-wal").exists());
    }
    // The last connection to close removes the WAL: a statement left
    // unfinalized would have kept the connection open.
    assert!(!dir.path().join("p.db-wal").exists());
    let mut store = SqliteAuditStore::open(&path).unwrap();
    let check: String = store
        .conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(40));
    store.commit(&[], &[row("ana", "get", 200)]).unwrap();
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(41));
}

#[test]
fn a_query_by_kind_is_answered_from_the_index_that_holds_only_rows_of_a_kind() {
    let (_dir, mut store) = open();
    let mut alert = row("ana", "get", 200);
    alert.kind = "alert".into();
    store.commit(&[], &[row("ana", "get", 200), alert.clone()]).unwrap();
    let filter = Filter {
        kind: Some("alert".into()),
        ..Filter::default()
    };
    let found: Vec<AuditRow> = store.query(&filter).unwrap().into_iter().map(|r| r.row).collect();
    assert_eq!(found, vec![alert]);

    let (clause, args) = render(&filter.conditions());
    let sql = format!("EXPLAIN QUERY PLAN SELECT seq FROM audit {clause} ORDER BY seq DESC LIMIT 50");
    let mut explain = store.conn.prepare(&sql).unwrap();
    let plan: Vec<String> = explain
        .query_map(params_from_iter(args), |r| r.get(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(plan.iter().any(|step| step.contains("audit_by_kind")), "{plan:?}");
    let index: String = store
        .conn
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'audit_by_kind'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(index.ends_with("WHERE kind <> ''"), "{index}");
}

#[test]
fn sqlite_is_built_without_its_memory_statistics() {
    // `.cargo/config.toml` sets it for libsqlite3-sys's build: with the
    // statistics on, each of SQLite's allocations takes a global mutex.
    let (_dir, store) = open();
    let used: bool = store
        .conn
        .query_row("SELECT sqlite_compileoption_used('DEFAULT_MEMSTATUS=0')", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(
        used,
        "SQLite counts its memory: is LIBSQLITE3_FLAGS in .cargo/config.toml?"
    );
}

/// A store whose retention sweeps once, at the walk's first page after the
/// first row: as a sweep on another thread would, mid-verification.
struct SweptDuringTheWalk {
    store: SqliteAuditStore,
    cutoff: DateTime<Utc>,
    swept: bool,
}

impl AuditStore for SweptDuringTheWalk {
    fn commit_encoded(&mut self, intents: &[AuditRow], rows: &[Encoded]) -> Result<Vec<chain::Link>, AuditError> {
        self.store.commit_encoded(intents, rows)
    }
    fn forwarded(&mut self, records: Vec<crate::audit::forwarded::Forwarded>) {
        self.store.forwarded(records)
    }
    fn recover(&mut self) -> Result<Vec<ChainedRow>, AuditError> {
        self.store.recover()
    }
    fn query(&mut self, filter: &Filter) -> Result<Vec<ChainedRow>, AuditError> {
        self.store.query(filter)
    }
    fn anchor(&mut self) -> Result<Anchor, AuditError> {
        self.store.anchor()
    }
    fn head(&mut self) -> Result<Anchor, AuditError> {
        self.store.head()
    }
    fn chain_page(&mut self, after_seq: i64, limit: usize) -> Result<Vec<ChainedRow>, AuditError> {
        if after_seq != i64::MIN && !self.swept {
            self.swept = true;
            self.store.sweep(self.cutoff, 100)?;
        }
        self.store.chain_page(after_seq, limit)
    }
    fn sweep(&mut self, cutoff: DateTime<Utc>, max_rows: usize) -> Result<usize, AuditError> {
        self.store.sweep(cutoff, max_rows)
    }
}

#[test]
fn a_sweep_during_verification_is_no_break() {
    let (_dir, mut store) = open();
    let mut old = row("ana", "get", 200);
    old.started_at -= chrono::TimeDelta::days(40);
    old.ended_at -= chrono::TimeDelta::days(40);
    store.commit(&[], &[old.clone(), old, row("ben", "get", 200)]).unwrap();
    let mut swept = SweptDuringTheWalk {
        store,
        cutoff: Utc::now() - chrono::TimeDelta::days(30),
        swept: false,
    };
    assert_eq!(verify(&mut swept).unwrap(), VerifyReport::intact(1));
    assert!(swept.swept, "the sweep ran during the walk");
}

/// A bypass alert carries the audit id of the request it is about: the
/// request's own row, finished later, is not taken as committed by it (the
/// recheck of a failed commit and a spool's recovery would drop it).
#[test]
fn an_alert_under_a_requests_id_does_not_make_the_request_committed() {
    let (_dir, mut store) = open();
    let request = row("ana", "watch", 200);
    let mut alert = row("ana", "watch", 200);
    alert.id = request.id.clone();
    alert.kind = crate::audit::bypass::ALERT.into();
    store.commit(&[], &[alert]).unwrap();
    let asked = [request.id.clone()];
    assert!(store.committed(&asked).unwrap().is_empty());
    store.commit(&[], std::slice::from_ref(&request)).unwrap();
    assert_eq!(store.committed(&asked).unwrap(), HashSet::from([request.id]));
}

/// Rows deleted from the chain's end leave no broken hash: the chain goes
/// on from the row before them. The writer, which committed them, says so
/// in the chain with an alert before its next rows.
#[test]
fn rows_deleted_from_the_end_are_named_by_an_alert_in_the_chain() {
    let (_dir, mut store) = open();
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
    store.conn.execute("DELETE FROM audit WHERE seq > 1", []).unwrap();
    // An intent committed alone (a write about to be forwarded) adds no
    // row: the alert goes with the next rows, once.
    let intent = row("ben", "create", 201);
    store.commit(std::slice::from_ref(&intent), &[]).unwrap();
    let next = row("ben", "get", 200);
    store.commit(&[], std::slice::from_ref(&next)).unwrap();
    let read = store.query(&Filter::default()).unwrap();
    let kinds: Vec<(i64, &str, &str)> = read
        .iter()
        .map(|r| (r.seq, r.row.kind.as_str(), r.row.reason.as_str()))
        .collect();
    assert_eq!(kinds[1], (2, "alert", crate::audit::bypass::CUT_SHORT), "{kinds:?}");
    assert_eq!(read[1].row.query, "head=1&committed=3");
    assert_eq!(read[2].row.id, next.id);
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(3));
    // Said once: the next commit follows on.
    store.commit(&[], &[row("ben", "get", 200)]).unwrap();
    assert_eq!(store.query(&Filter::default()).unwrap().len(), 4);
}

/// `after` pages forward: the oldest rows after a place in the chain, as
/// many as the limit; without it the limit keeps the newest.
#[test]
fn after_pages_forward_from_a_place_in_the_chain() {
    let (_dir, mut store) = open();
    let rows: Vec<AuditRow> = (0..5).map(|_| row("ana", "get", 200)).collect();
    store.commit(&[], &rows).unwrap();
    let mut seqs = |filter: Filter| -> Vec<i64> { store.query(&filter).unwrap().iter().map(|r| r.seq).collect() };
    let page = |after, limit| Filter {
        after,
        limit,
        ..Filter::default()
    };
    assert_eq!(seqs(page(Some(1), Some(2))), [2, 3]);
    assert_eq!(seqs(page(Some(3), Some(10))), [4, 5]);
    assert_eq!(seqs(page(Some(3), None)), [4, 5]);
    assert_eq!(seqs(page(None, Some(2))), [4, 5]);
}
