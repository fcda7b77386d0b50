//! The audit's own thread, where the store's blocking calls run, at a lower
//! CPU priority than the request path.
//!
//! A commit takes a window's rows at once: at half of the proxy's best
//! rate, some 700 rows and a core for about 13 ms every 100 ms. On a
//! blocking thread of the same priority as the tokio workers, that burst
//! preempts the requests in flight and shows in their p99. With a nice
//! value 10 above the workers', the scheduler lets requests go first while
//! the cores are contended, and the commit takes what is left; when the
//! cores are saturated the queue's bound still holds requests back before
//! the writer falls behind. The nice value alone does not make a request's
//! task woken on the commit's core run at once, so a commit no one waits
//! on also yields its core between statements
//! ([`AuditStore::yield_while_unwaited`](crate::audit::store::AuditStore::yield_while_unwaited));
//! benches/RESULTS.md has the measurements.

use std::sync::mpsc;

/// How far below the request path's priority the audit thread runs (a nice
/// value on Linux, added to the process's).
pub const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

/// The audit thread. It ends when the last handle is dropped.
#[derive(Clone)]
pub(super) struct AuditThread {
    jobs: mpsc::Sender<Job>,
}

impl AuditThread {
    /// Start the thread; it lowers its own priority first.
    pub fn start() -> std::io::Result<AuditThread> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("portcullis-audit".into())
            .spawn(move || {
                lower_priority();
                for job in queue {
                    job();
                }
            })?;
        Ok(AuditThread { jobs })
    }

    /// Run `f` on the audit thread and wait for it.
    ///
    /// The wait is itself a tokio blocking task, so tokio knows a blocking
    /// call is in flight: a paused test clock does not jump over it, and a
    /// runtime shut down meanwhile waits for it as it waits for any
    /// blocking task, as when the calls ran on tokio's blocking threads.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let jobs = self.jobs.clone();
        let waited = tokio::task::spawn_blocking(move || {
            let (done, answer) = mpsc::sync_channel(1);
            jobs.send(Box::new(move || {
                let _ = done.send(f());
            }))
            .ok()?;
            // None if `f` panicked: its sender went with it.
            answer.recv().ok()
        })
        .await;
        match waited {
            Ok(Some(done)) => done,
            // The runtime was dropped without the graceful shutdown (which
            // flushes the writer first) before the wait began; this task
            // goes with it, as in a crash: writes were committed as intents
            // first, reads were spooled, and both are recovered at the next
            // start.
            Err(error) if error.is_cancelled() => std::future::pending().await,
            // The store's calls do not panic on any input; if one ever did,
            // the writer cannot go on without its store.
            Ok(None) | Err(_) => panic!("audit writer thread failed"),
        }
    }
}

/// Raise this thread's nice value by [`NICE`] (Linux's nice value is per
/// thread). Raising it needs no privilege; if it fails all the same, the
/// thread runs at the process's priority, as the audit did before.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let me = Some(rustix::thread::gettid());
        let lowered = getpriority_process(me).and_then(|now| setpriority_process(me, (now + NICE).min(19)));
        if let Err(error) = lowered {
            tracing::warn!(%error, "audit: could not lower the audit thread's priority");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    fn nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn work_runs_on_the_audit_thread_below_the_callers_priority() {
        let caller = tokio::task::spawn_blocking(nice).await.unwrap();
        let thread = AuditThread::start().unwrap();
        let (name, audit) = thread
            .run(|| (std::thread::current().name().map(str::to_owned), nice()))
            .await;
        assert_eq!(name.as_deref(), Some("portcullis-audit"));
        assert_eq!(audit, (caller + NICE).min(19));
    }

    #[tokio::test]
    async fn calls_run_one_after_another_in_the_order_they_were_made() {
        let thread = AuditThread::start().unwrap();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for i in 0..5 {
            let order = order.clone();
            thread.run(move || order.lock().unwrap().push(i)).await;
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn the_thread_ends_when_its_last_handle_is_dropped() {
        thread_local!(static HELD: std::cell::RefCell<Option<mpsc::Sender<()>>> = const { std::cell::RefCell::new(None) });
        let thread = AuditThread::start().unwrap();
        let (held, ended) = mpsc::channel::<()>();
        // Dropped with the audit thread's thread-locals, when it ends.
        thread
            .run(move || HELD.with(|slot| *slot.borrow_mut() = Some(held)))
            .await;
        let second = thread.clone();
        drop(thread);
        assert_eq!(
            ended.try_recv(),
            Err(mpsc::TryRecvError::Empty),
            "ended while a handle was left"
        );
        drop(second);
        let waited = ended.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(waited, Err(mpsc::RecvTimeoutError::Disconnected));
    }

    #[tokio::test]
    #[should_panic(expected = "audit writer thread failed")]
    async fn a_panicking_call_fails_the_writer_rather_than_hanging_it() {
        let thread = AuditThread::start().unwrap();
        thread.run(|| panic!("store call panicked")).await;
    }
}
