use super::*;
use crate::audit::chain::Encoded;
use crate::audit::sqlite::SqliteAuditStore;
use crate::audit::store::{verify, AuditStore};
use chrono::Utc;

fn row(login: &str) -> AuditRow {
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
    row.login = login.into();
    row.path = "/api/v1/namespaces/shop/configmaps".into();
    row.finish(Utc::now());
    row
}

fn settings(dir: &Path, segment_bytes: u64) -> SpoolSettings {
    SpoolSettings {
        dir: dir.to_path_buf(),
        max_bytes: 1 << 20,
        segment_bytes,
    }
}

/// The segment files in the spool's slot.
fn segment_files(spool: &Spool) -> Vec<PathBuf> {
    slot::segments(spool.slot())
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

fn ids(rows: &[AuditRow]) -> Vec<&str> {
    rows.iter().map(|r| r.id.as_str()).collect()
}

#[test]
fn a_row_is_one_line_of_its_own_json_and_reads_back_equal() {
    let mut tricky = row("ana\n\"quoted\"");
    tricky.query = "labelSelector=a%0Ab".into();
    let line = encode(&tricky).unwrap();
    assert_eq!(
        line.iter().filter(|b| **b == b'\n').count(),
        1,
        "newlines in text are escaped"
    );
    assert!(line.ends_with(b"\n") && line.starts_with(recover::ROW_START));
    assert_eq!(serde_json::from_slice::<AuditRow>(&line).unwrap(), tricky);
    assert_eq!(read_rows(&line), [tricky]);
}

#[test]
fn a_line_cut_by_a_crash_is_skipped_and_a_row_written_after_it_is_still_read() {
    let (first, cut, after, last) = (row("a"), row("b"), row("c"), row("d"));
    let mut bytes = encode(&first).unwrap();
    let cut_line = encode(&cut).unwrap();
    // A write that stopped half way (disk full), then another process's
    // line appended right after it, then a last line the crash cut short.
    bytes.extend_from_slice(&cut_line[..cut_line.len() / 2]);
    bytes.extend(encode(&after).unwrap());
    bytes.extend_from_slice(&encode(&last).unwrap()[..20]);
    assert_eq!(ids(&read_rows(&bytes)), [first.id.as_str(), after.id.as_str()]);
}

#[test]
fn rows_are_counted_until_shipped_and_past_the_bound_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path(), SEGMENT_BYTES);
    settings.max_bytes = 10;
    let spool = Spool::open(&settings).unwrap();
    spool.admit().unwrap();
    let ticket = spool.append(&Encoded::new(row("ana"))).unwrap();
    let waiting = spool.waiting();
    assert_eq!(waiting, encode(&row("ana")).unwrap().len() as u64);
    let refused = spool.admit().unwrap_err();
    assert!(
        matches!(refused, AuditError::SpoolFull { waiting: w, bound: 10, .. } if w == waiting),
        "{refused}"
    );
    assert!(refused.to_string().contains("spool_max_bytes"), "{refused}");
    spool.shipped([ticket]);
    assert_eq!(spool.waiting(), 0);
    spool.admit().unwrap();
}

#[test]
fn a_full_segment_is_rotated_and_deleted_once_its_rows_are_shipped() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(&settings(dir.path(), 1)).unwrap();
    let first = spool.append(&Encoded::new(row("a"))).unwrap();
    let second = spool.append(&Encoded::new(row("b"))).unwrap();
    spool.maintain();
    let files = segment_files(&spool);
    assert_eq!(files.len(), 2, "a new segment begun: {files:?}");
    assert_eq!(read_rows(&std::fs::read(&files[0]).unwrap()).len(), 2);
    spool.shipped([first]);
    spool.maintain();
    assert_eq!(
        segment_files(&spool).len(),
        2,
        "kept while a row in it is not committed"
    );
    spool.shipped([second]);
    spool.maintain();
    assert_eq!(segment_files(&spool), files[1..], "deleted once all its rows are");
    let third = spool.append(&Encoded::new(row("c"))).unwrap();
    spool.shipped([third]);
    spool.close();
    assert!(
        segment_files(&spool).is_empty(),
        "closed with everything shipped: empty"
    );
}

#[test]
fn a_slot_held_by_a_live_spool_is_not_taken_and_its_rows_ship_once_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = Spool::open(&settings(dir.path(), SEGMENT_BYTES)).unwrap();
    let beside = Spool::open(&settings(dir.path(), SEGMENT_BYTES)).unwrap();
    assert_ne!(crashed.slot(), beside.slot(), "a live spool's slot is its own");
    assert!(beside.leftovers().is_empty());
    let lost = row("ana");
    drop(crashed.append(&Encoded::new(lost.clone()))); // its ticket never shipped: not committed
    let slot = crashed.slot().to_path_buf();
    drop(crashed); // as the kernel releases a killed process's lock

    let next = Spool::open(&settings(dir.path(), SEGMENT_BYTES)).unwrap();
    assert_eq!(next.slot(), slot, "the free slot is taken again");
    let leftovers = next.leftovers();
    assert_eq!(leftovers.len(), 1);
    assert_eq!(
        next.waiting(),
        encode(&lost).unwrap().len() as u64,
        "counted until shipped"
    );
    assert_eq!(read_rows(&std::fs::read(&leftovers[0]).unwrap()), [lost]);
}

#[test]
fn shipping_a_leftover_segment_skips_the_rows_already_committed_and_keeps_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteAuditStore::open(&dir.path().join("p.db")).unwrap();
    let rows: Vec<AuditRow> = (0..5).map(|i| row(&format!("p{i}"))).collect();
    // The writer had committed the first two when the process died.
    store.commit(&[], &rows[..2]).unwrap();
    let segment = dir.path().join("leftover.spool");
    let bytes: Vec<u8> = rows.iter().flat_map(|r| encode(r).unwrap()).collect();
    std::fs::write(&segment, bytes).unwrap();

    let (shipped, chained) = ship(&segment, &mut store).unwrap();
    assert_eq!(shipped, 3);
    assert_eq!(
        ids(&chained.into_iter().map(|c| c.row).collect::<Vec<_>>()),
        ids(&rows[2..])
    );
    let stored: Vec<AuditRow> = store.chain_page(0, 100).unwrap().into_iter().map(|c| c.row).collect();
    assert_eq!(stored, rows, "each row once, in the spool's order");
    assert_eq!(ship(&segment, &mut store).unwrap().0, 0, "shipping again adds nothing");
    let report = verify(&mut store).unwrap();
    assert_eq!((report.checked, report.broken), (5, None));
}

/// Replica A answered a write and died before committing its row; replica
/// B, finding A's intent, recorded it as unknown; A, back, ships its spool.
#[test]
fn a_spooled_row_whose_intent_another_replica_recorded_as_unknown_is_shipped_after_it() {
    for store in crate::store::testing::both() {
        let b = store.backend;
        let mut audit = crate::audit::open(&store).unwrap();
        let mut answered = row("ana");
        answered.verb = "create".into();
        answered.code = 201;
        let mut unknown = answered.clone();
        unknown.code = 0;
        unknown.reason = crate::audit::store::RECOVERED_REASON.into();
        let other = row("bo");
        audit.commit(&[], &[unknown, other.clone()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let segment = dir.path().join("leftover.spool");
        let bytes: Vec<u8> = [&answered, &other].iter().flat_map(|r| encode(r).unwrap()).collect();
        std::fs::write(&segment, bytes).unwrap();

        let (shipped, chained) = ship(&segment, audit.as_mut()).unwrap();
        assert_eq!(shipped, 1, "{b}: the answered row, not the one already there");
        assert_eq!(chained[0].row, answered, "{b}");
        let of_id: Vec<u16> = audit
            .chain_page(0, 100)
            .unwrap()
            .into_iter()
            .filter(|c| c.row.id == answered.id)
            .map(|c| c.row.code)
            .collect();
        assert_eq!(of_id, [0, 201], "{b}: the unknown outcome, then the real one");
        assert_eq!(
            ship(&segment, audit.as_mut()).unwrap().0,
            0,
            "{b}: shipping again adds nothing"
        );
        let report = verify(audit.as_mut()).unwrap();
        assert_eq!((report.checked, report.broken), (3, None), "{b}");
    }
}

#[tokio::test]
async fn past_the_hard_cap_new_requests_wait_until_committed_rows_leave_the_spool() {
    use futures_util::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path(), SEGMENT_BYTES);
    settings.max_bytes = 10;
    let spool = Spool::open(&settings).unwrap();
    let ticket = spool.append(&Encoded::new(row("ana"))).unwrap();
    assert!(spool.admit().is_err() && !spool.overwhelmed(), "refused, still read");
    // Rows up to the margin past the bound, as a long outage's refusals.
    spool.0.unshipped.fetch_add(HARD_CAP_MARGIN, Ordering::Relaxed);
    assert!(spool.overwhelmed());
    let mut waiting = Box::pin(spool.relief());
    assert!(
        (&mut waiting).now_or_never().is_none(),
        "a request waits past the hard cap"
    );
    spool.shipped([ticket]);
    assert!((&mut waiting).now_or_never().is_some(), "woken once rows are committed");
}
