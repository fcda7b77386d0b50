use super::*;
use crate::audit::chain::{self, Anchor, Encoded, Link};
use crate::audit::export::ExportSink;
use crate::audit::query::Filter;
use crate::audit::row::ChainedRow;
use crate::audit::sqlite::SqliteAuditStore;
use std::sync::Mutex;

fn row() -> AuditRow {
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
    row.finish(Utc::now());
    row
}

/// A store that counts commits and can be told to fail, or to commit and
/// then fail (an answer lost with the connection).
#[derive(Default, Clone)]
struct Probe {
    commits: Arc<Mutex<Vec<(usize, usize)>>>,
    /// The ids of the rows committed, in order.
    ids: Arc<Mutex<Vec<String>>>,
    failing: Arc<std::sync::atomic::AtomicBool>,
    lose_next_answer: Arc<std::sync::atomic::AtomicBool>,
    /// Calls made (commits and checks), failed or not.
    tries: Arc<AtomicUsize>,
    /// The thread each commit ran on.
    threads: Arc<Mutex<Vec<Option<String>>>>,
    /// The count of those waiting on a commit, as the writer hands it.
    waited_on: Arc<Mutex<Option<Arc<AtomicUsize>>>>,
    /// That count at each commit.
    waiting_at_commit: Arc<Mutex<Vec<usize>>>,
    /// Recoveries tried, failed or not.
    recoveries: Arc<AtomicUsize>,
}

impl AuditStore for Probe {
    fn commit_encoded(&mut self, intents: &[AuditRow], rows: &[Encoded]) -> Result<Vec<Link>, AuditError> {
        self.tries.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(AuditError::Store("disk full".into()));
        }
        self.commits.lock().unwrap().push((intents.len(), rows.len()));
        let thread = std::thread::current().name().map(str::to_owned);
        self.threads.lock().unwrap().push(thread);
        if let Some(waited_on) = &*self.waited_on.lock().unwrap() {
            self.waiting_at_commit
                .lock()
                .unwrap()
                .push(waited_on.load(Ordering::SeqCst));
        }
        self.ids.lock().unwrap().extend(rows.iter().map(|r| r.row().id.clone()));
        if self.lose_next_answer.swap(false, Ordering::SeqCst) {
            return Err(AuditError::Store("connection closed".into()));
        }
        Ok(rows.iter().map(|r| chain::next(&mut Anchor::default(), r)).collect())
    }
    fn committed(&mut self, ids: &[String]) -> Result<std::collections::HashSet<String>, AuditError> {
        self.tries.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(AuditError::Store("disk full".into()));
        }
        let stored = self.ids.lock().unwrap();
        Ok(ids.iter().filter(|id| stored.contains(id)).cloned().collect())
    }
    fn yield_while_unwaited(&mut self, waited_on: Arc<AtomicUsize>) {
        *self.waited_on.lock().unwrap() = Some(waited_on);
    }
    fn forwarded(&mut self, _: Vec<Forwarded>) {}
    fn recover(&mut self) -> Result<Vec<ChainedRow>, AuditError> {
        self.recoveries.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(AuditError::Store("connection refused".into()));
        }
        Ok(Vec::new())
    }
    fn query(&mut self, _: &Filter) -> Result<Vec<ChainedRow>, AuditError> {
        Ok(Vec::new())
    }
    fn anchor(&mut self) -> Result<Anchor, AuditError> {
        Ok(Anchor::default())
    }
    fn head(&mut self) -> Result<Anchor, AuditError> {
        Ok(Anchor::default())
    }
    fn chain_page(&mut self, _: i64, _: usize) -> Result<Vec<ChainedRow>, AuditError> {
        Ok(Vec::new())
    }
    fn sweep(&mut self, _: DateTime<Utc>, _: usize) -> Result<usize, AuditError> {
        Ok(0)
    }
}

fn spawn(probe: &Probe, window: Duration) -> AuditWriter {
    let settings = WriterSettings {
        window,
        ..WriterSettings::default()
    };
    AuditWriter::spawn(Box::new(probe.clone()), None, settings, WriterMetrics::default())
}

// The window is tokio time: on a paused clock, a sleep ends exactly when
// asked, and never while a commit runs on its blocking thread, so what a
// test sees at a given moment does not depend on the machine's speed.

#[tokio::test]
async fn recovery_the_store_refused_at_start_is_tried_again_at_a_commit_after_a_pause_and_then_no_more() {
    let probe = Probe::default();
    // The store is down as the writer starts.
    probe.failing.store(true, Ordering::SeqCst);
    let pause = Duration::from_secs(6);
    let settings = WriterSettings {
        window: Duration::from_millis(10),
        recovery_retry: pause,
        ..WriterSettings::default()
    };
    let writer = AuditWriter::spawn(Box::new(probe.clone()), None, settings, WriterMetrics::default());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while probe.recoveries.load(Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "recovery was never tried");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let failed_at = std::time::Instant::now();
    probe.failing.store(false, Ordering::SeqCst);
    // Within its pause (6 s, far longer than a commit takes, even on a
    // loaded machine), a commit does not try it again.
    writer.append(row()).await;
    writer.flush().await;
    assert_eq!(probe.recoveries.load(Ordering::SeqCst), 1, "not within the pause");
    // After it, the first commit does.
    while failed_at.elapsed() < pause + Duration::from_millis(100) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writer.append(row()).await;
    writer.flush().await;
    assert_eq!(
        probe.recoveries.load(Ordering::SeqCst),
        2,
        "tried again before the commit"
    );
    writer.append(row()).await;
    writer.flush().await;
    assert_eq!(probe.recoveries.load(Ordering::SeqCst), 2, "done once it succeeded");
    writer.close().await;
}

#[tokio::test(start_paused = true)]
async fn reads_arriving_together_share_one_commit() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(200));
    for _ in 0..50 {
        writer.submit(row());
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(*probe.commits.lock().unwrap(), [(0, 50)]);
}

#[tokio::test(start_paused = true)]
async fn a_read_is_committed_within_the_window_without_a_flush() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(100));
    writer.submit(row());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(probe.commits.lock().unwrap().is_empty(), "not before the window");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(*probe.commits.lock().unwrap(), [(0, 1)]);
}

#[tokio::test(start_paused = true)]
async fn an_intent_is_committed_at_once_and_acknowledged() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_secs(60));
    // Paused tokio time: waiting for the window would show as 60 s here.
    let started = tokio::time::Instant::now();
    writer.commit_intent(row()).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no waiting for the read window"
    );
    assert_eq!(*probe.commits.lock().unwrap(), [(1, 0)]);
}

#[tokio::test(start_paused = true)]
async fn commits_run_on_the_audit_thread_not_on_the_request_paths_threads() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_secs(60));
    writer.commit_intent(row()).await.unwrap();
    writer.submit(row());
    writer.flush().await;
    let threads = probe.threads.lock().unwrap().clone();
    assert_eq!(
        threads,
        [Some("portcullis-audit".to_owned()), Some("portcullis-audit".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn the_store_is_told_who_waits_on_a_commit_so_that_only_a_commit_no_one_waits_on_yields() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(100));
    writer.submit(row());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(*probe.waiting_at_commit.lock().unwrap(), [0], "the window's commit");
    writer.commit_intent(row()).await.unwrap();
    writer.submit(row());
    writer.flush().await;
    assert_eq!(
        *probe.waiting_at_commit.lock().unwrap(),
        [0, 1, 1],
        "the intent's commit, then the flush's"
    );
    let waited_on = probe.waited_on.lock().unwrap().clone().unwrap();
    assert_eq!(waited_on.load(Ordering::SeqCst), 0, "no one waits once answered");
}

/// A writer whose queue holds four messages and whose window is short.
fn queue_of_four(probe: &Probe) -> AuditWriter {
    let settings = WriterSettings {
        capacity: 4,
        max_batch: 8,
        window: Duration::from_millis(5),
        ..WriterSettings::default()
    };
    AuditWriter::spawn(Box::new(probe.clone()), None, settings, WriterMetrics::default())
}

#[tokio::test(start_paused = true)]
async fn rows_waiting_for_room_in_a_full_queue_count_as_waiting_on_the_commit() {
    let probe = Probe::default();
    let writer = queue_of_four(&probe);
    // The writer's task cannot run meanwhile: all but four wait for room.
    for _ in 0..40 {
        writer.submit(row());
    }
    let waited_on = probe.waited_on.lock().unwrap().clone().unwrap();
    assert_eq!(waited_on.load(Ordering::SeqCst), 36);
    writer.close().await;
    let seen = probe.waiting_at_commit.lock().unwrap().clone();
    assert!(seen[0] > 0, "the first commit, while rows wait for room: {seen:?}");
    assert_eq!(waited_on.load(Ordering::SeqCst), 0);
}

/// Rows finished where no runtime runs, or on a thread with a runtime of
/// its own that ends before the writer has room for them, wait for room
/// on the writer's runtime: they were lost before, or went with the
/// thread's runtime.
#[tokio::test(start_paused = true)]
async fn rows_finished_off_the_writers_runtime_while_the_queue_is_full_are_still_committed() {
    let probe = Probe::default();
    let writer = queue_of_four(&probe);
    // The writer's task cannot run meanwhile: six of the ten wait for room.
    let plain = writer.clone();
    std::thread::spawn(move || {
        for _ in 0..5 {
            plain.submit(row());
        }
    })
    .join()
    .unwrap();
    let on_runtime = writer.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            for _ in 0..5 {
                on_runtime.submit(row());
            }
        });
    })
    .join()
    .unwrap();
    writer.close().await;
    let committed: usize = probe.commits.lock().unwrap().iter().map(|(_, rows)| rows).sum();
    assert_eq!(committed, 10);
}

#[tokio::test(start_paused = true)]
async fn an_intent_behind_rows_in_their_window_is_committed_at_once_with_them() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_secs(60));
    writer.submit(row());
    tokio::time::sleep(Duration::from_millis(10)).await;
    // The row's window is open and rows alone do not wake the writer; the
    // intent, which someone waits on, does.
    let started = tokio::time::Instant::now();
    writer.commit_intent(row()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "no waiting for the window");
    assert_eq!(*probe.commits.lock().unwrap(), [(1, 1)]);
}

#[tokio::test(start_paused = true)]
async fn a_half_full_queue_is_committed_before_the_window_ends() {
    let probe = Probe::default();
    let settings = WriterSettings {
        window: Duration::from_secs(60),
        capacity: 8,
        max_batch: 4,
        ..WriterSettings::default()
    };
    let writer = AuditWriter::spawn(Box::new(probe.clone()), None, settings, WriterMetrics::default());
    writer.submit(row());
    tokio::time::sleep(Duration::from_millis(10)).await;
    // In its window now: five more rows fill the queue past half.
    for _ in 0..5 {
        writer.submit(row());
    }
    let started = tokio::time::Instant::now();
    until("a full batch committed", || !probe.commits.lock().unwrap().is_empty()).await;
    assert!(started.elapsed() < Duration::from_secs(5), "no waiting for the window");
    assert_eq!(probe.commits.lock().unwrap()[0], (0, 4), "a batch at most max_batch");
}

#[tokio::test(start_paused = true)]
async fn a_failed_commit_refuses_the_intent_and_keeps_the_rows() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(20));
    probe.failing.store(true, Ordering::SeqCst);
    writer.submit(row());
    let refused = writer.commit_intent(row()).await.unwrap_err();
    assert!(matches!(refused, AuditError::StoreUnreachable), "{refused}");
    probe.failing.store(false, Ordering::SeqCst);
    writer.flush().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rows: usize = probe.commits.lock().unwrap().iter().map(|(_, rows)| rows).sum();
    assert_eq!(rows, 1, "the read row was retried, not lost");
}

#[tokio::test]
async fn a_full_queue_makes_rows_wait_and_close_commits_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let store = SqliteAuditStore::open(&path).unwrap();
    let settings = WriterSettings {
        capacity: 4,
        max_batch: 8,
        window: Duration::from_millis(5),
        ..WriterSettings::default()
    };
    let writer = AuditWriter::spawn(Box::new(store), None, settings, WriterMetrics::default());
    for _ in 0..300 {
        writer.submit(row());
    }
    writer.close().await;
    let mut reader = SqliteAuditStore::open(&path).unwrap();
    assert_eq!(reader.query(&Filter::default()).unwrap().len(), 300);
}

#[tokio::test]
async fn rows_another_process_commits_reach_the_export_in_chain_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let file = dir.path().join("audit.jsonl");
    // Committed outside the writer, as the CLI does (an access request's
    // step, an approval decision).
    let other = |row: &AuditRow| {
        SqliteAuditStore::open(&path)
            .unwrap()
            .commit(&[], std::slice::from_ref(row))
            .unwrap()
    };
    let before_start = row();
    other(&before_start);
    let sink = ExportSink::open(file.to_str().unwrap(), 1 << 20, 1).unwrap();
    let store = SqliteAuditStore::open(&path).unwrap();
    let writer = AuditWriter::spawn(
        Box::new(store),
        Some(sink),
        WriterSettings::default(),
        WriterMetrics::default(),
    );
    let (own, cli, own_again, cli_last) = (row(), row(), row(), row());
    writer.append(own.clone()).await;
    writer.flush().await;
    other(&cli);
    writer.append(own_again.clone()).await;
    writer.flush().await;
    other(&cli_last);
    writer.close().await;
    let exported: Vec<ChainedRow> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let ids: Vec<&str> = exported.iter().map(|r| r.row.id.as_str()).collect();
    assert_eq!(ids, [&own.id, &cli.id, &own_again.id, &cli_last.id]);
    let stored = SqliteAuditStore::open(&path).unwrap().chain_page(1, 10).unwrap();
    assert_eq!(exported, stored, "the export is the chain after the writer started");
}

#[tokio::test]
async fn a_spooled_writer_ships_what_a_crash_left_before_new_rows_and_leaves_the_spool_empty_when_closed() {
    use crate::audit::spool::Spool;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let settings = spool_settings(&dir);
    let crashed = Spool::open(&settings).unwrap();
    let answered = row();
    drop(crashed.append(&Encoded::new(answered.clone())));
    drop(crashed);

    let spool = Spool::open(&settings).unwrap();
    let store = SqliteAuditStore::open(&path).unwrap();
    let writer = spooled(Box::new(store), &spool);
    let next = row();
    writer.submit(next.clone());
    writer.close().await;
    let stored = SqliteAuditStore::open(&path).unwrap().chain_page(0, 10).unwrap();
    let ids: Vec<&str> = stored.iter().map(|r| r.row.id.as_str()).collect();
    assert_eq!(ids, [&answered.id, &next.id], "the crash's row first, each once");
    assert_eq!(spool.waiting(), 0);
    let files: Vec<_> = std::fs::read_dir(spool.slot())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".spool"))
        .collect();
    assert!(files.is_empty(), "the spool is empty after close: {files:?}");
}

/// Spool settings in `dir` (1 MiB bound and segments).
fn spool_settings(dir: &tempfile::TempDir) -> crate::audit::spool::SpoolSettings {
    crate::audit::spool::SpoolSettings {
        dir: dir.path().join("spool"),
        max_bytes: 1 << 20,
        segment_bytes: 1 << 20,
    }
}

/// A writer on `store` with `spool`.
fn spooled(store: Box<dyn AuditStore>, spool: &crate::audit::spool::Spool) -> AuditWriter {
    AuditWriter::spawn_spooled(
        store,
        None,
        Some(spool.clone()),
        WriterSettings::default(),
        WriterMetrics::default(),
    )
}

/// Let paused time run (each sleep moves the clock on) until `done`.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

fn ids(rows: &[&AuditRow]) -> Vec<String> {
    rows.iter().map(|r| r.id.clone()).collect()
}

#[tokio::test(start_paused = true)]
async fn while_the_store_does_not_commit_rows_wait_in_order_writes_are_refused_and_all_follow_once_it_is_back() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(20));
    let before = row();
    writer.submit(before.clone());
    writer.flush().await;
    probe.failing.store(true, Ordering::SeqCst);
    let during: Vec<AuditRow> = (0..300).map(|_| row()).collect();
    writer.submit(during[0].clone());
    writer.flush().await;
    let tries = probe.tries.load(Ordering::SeqCst);
    let refused = writer.commit_intent(row()).await.unwrap_err();
    assert!(matches!(refused, AuditError::StoreUnreachable), "{refused}");
    assert!(probe.tries.load(Ordering::SeqCst) > tries, "the write was tried");
    let tries = probe.tries.load(Ordering::SeqCst);
    for r in &during[1..] {
        writer.submit(r.clone());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(probe.tries.load(Ordering::SeqCst) > tries + 1, "tried again meanwhile");
    assert_eq!(*probe.ids.lock().unwrap(), std::slice::from_ref(&before.id));

    probe.failing.store(false, Ordering::SeqCst);
    writer.commit_intent(row()).await.unwrap();
    let expected = ids(&std::iter::once(&before).chain(&during).collect::<Vec<_>>());
    until("every row committed", || {
        probe.ids.lock().unwrap().len() >= expected.len()
    })
    .await;
    writer.close().await;
    assert_eq!(*probe.ids.lock().unwrap(), expected, "in order, each once");
}

#[tokio::test(start_paused = true)]
async fn rows_of_a_commit_whose_answer_was_lost_are_not_committed_again() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(20));
    let (lost, next) = (row(), row());
    probe.lose_next_answer.store(true, Ordering::SeqCst);
    writer.submit(lost.clone());
    writer.flush().await;
    writer.submit(next.clone());
    writer.close().await;
    assert_eq!(*probe.ids.lock().unwrap(), ids(&[&lost, &next]));
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_while_the_store_is_down_commits_the_rows_when_it_comes_back_in_time() {
    let probe = Probe::default();
    let writer = spawn(&probe, Duration::from_millis(20));
    probe.failing.store(true, Ordering::SeqCst);
    let waiting = row();
    writer.submit(waiting.clone());
    writer.flush().await;
    let closing = tokio::spawn({
        let writer = writer.clone();
        async move { writer.close().await }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!closing.is_finished(), "still trying to commit");
    probe.failing.store(false, Ordering::SeqCst);
    closing.await.unwrap();
    assert_eq!(*probe.ids.lock().unwrap(), ids(&[&waiting]));
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_while_the_store_stays_down_leaves_the_rows_in_the_spool_for_the_next_start() {
    use crate::audit::spool::Spool;
    let dir = tempfile::tempdir().unwrap();
    let settings = spool_settings(&dir);
    let probe = Probe::default();
    probe.failing.store(true, Ordering::SeqCst);
    let spool = Spool::open(&settings).unwrap();
    let writer = spooled(Box::new(probe.clone()), &spool);
    let waiting = row();
    writer.submit(waiting.clone());
    writer.close().await;
    assert!(probe.ids.lock().unwrap().is_empty());
    assert!(spool.waiting() > 0, "the row is still in the spool");
    drop((writer, spool));

    let next = Probe::default();
    let spool = Spool::open(&settings).unwrap();
    let writer = spooled(Box::new(next.clone()), &spool);
    writer.close().await;
    assert_eq!(*next.ids.lock().unwrap(), ids(&[&waiting]), "shipped at the next start");
    assert_eq!(spool.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_spool_refuses_requests_saying_the_store_cannot_be_reached_until_it_commits_again() {
    use crate::audit::spool::{Spool, SpoolSettings};
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(&SpoolSettings {
        dir: dir.path().join("spool"),
        max_bytes: 1,
        segment_bytes: 1 << 20,
    })
    .unwrap();
    let probe = Probe::default();
    probe.failing.store(true, Ordering::SeqCst);
    let writer = AuditWriter::spawn_spooled(
        Box::new(probe.clone()),
        None,
        Some(spool),
        WriterSettings::default(),
        WriterMetrics::default(),
    );
    writer.submit(row());
    writer.flush().await;
    let refused = writer.room().await.unwrap_err();
    assert!(
        matches!(refused, AuditError::SpoolFull { unreachable: true, .. }),
        "{refused}"
    );
    let message = refused.to_string();
    assert!(
        message.contains("the audit store cannot be reached") && message.contains("spool_max_bytes"),
        "{message}"
    );
    probe.failing.store(false, Ordering::SeqCst);
    writer.flush().await;
    until("served again", || probe.ids.lock().unwrap().len() == 1).await;
    writer.room().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn rows_a_crash_left_that_the_store_refused_at_start_ship_first_once_it_commits_without_a_restart() {
    use crate::audit::spool::Spool;
    let dir = tempfile::tempdir().unwrap();
    let settings = spool_settings(&dir);
    let crashed = Spool::open(&settings).unwrap();
    let answered = row();
    drop(crashed.append(&Encoded::new(answered.clone())));
    drop(crashed);

    let probe = Probe::default();
    probe.failing.store(true, Ordering::SeqCst);
    let spool = Spool::open(&settings).unwrap();
    let writer = spooled(Box::new(probe.clone()), &spool);
    let next = row();
    writer.submit(next.clone());
    writer.flush().await;
    assert!(probe.ids.lock().unwrap().is_empty());
    probe.failing.store(false, Ordering::SeqCst);
    until("both rows committed", || probe.ids.lock().unwrap().len() >= 2).await;
    assert_eq!(
        *probe.ids.lock().unwrap(),
        ids(&[&answered, &next]),
        "the crash's row first"
    );
    writer.close().await;
    assert_eq!(spool.waiting(), 0);
}
