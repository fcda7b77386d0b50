//! The threads that serve client connections: one single-threaded tokio
//! runtime per core, each accepting from its own duplicate of the
//! listening socket, as nginx's workers do.
//!
//! A connection's tasks (its HTTP/2 streams, the request pipeline, the
//! upstream keep-alive connection it takes turns on) then wake each other
//! on one thread: no other worker is unparked for them, and no worker
//! spins looking for work to steal. Measured side by side against tokio's
//! work-stealing runtime, a small GET cost 10 to 20% less CPU at 32 and 64
//! connections, with the same latency at half the rate
//! (`benches/RESULTS.md`). The price is that a connection's requests stay
//! on one core: a single busy connection cannot use a second one.
//!
//! Each thread accepts for itself, so no socket moves from one runtime's
//! reactor to another's. The threads take turns: only the thread whose
//! turn it is waits in `accept`, and with a connection passes the turn to
//! the next. Left to race for each connection, one thread took most of
//! them (all of a benchmark's 16, in one run) and the other core sat idle.
//! The cost: while the thread whose turn it is runs a long poll, a new
//! connection waits for it rather than going to the other thread.
//!
//! Everything else (the reconciler, the periodic sweeps) stays on the
//! runtime that started the app.

use super::{drain, Stopping};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Notify};

/// Connection threads, started and waiting for [`Shards::serve`]. Dropped
/// before, or after [`Shards::stop`], they end.
pub(super) struct Shards {
    /// Sending starts a thread's accepting; dropping ends it.
    begin: Vec<oneshot::Sender<()>>,
    /// Dropping a thread's sender makes it stop accepting, give its open
    /// requests a few seconds, and end.
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl Shards {
    /// `count` threads (at least one), each with its own runtime and its
    /// own duplicate of `listener`, registered with that runtime; each
    /// connection it accepts will be served by `serve` on that thread.
    pub(super) fn start<S, F>(count: usize, listener: std::net::TcpListener, serve: S) -> std::io::Result<Shards>
    where
        S: Fn(TcpStream, SocketAddr, Stopping) -> F + Clone + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        listener.set_nonblocking(true)?;
        let count = count.max(1);
        let turns = Arc::new(Turns {
            turn: AtomicUsize::new(0),
            yours: (0..count).map(|_| Notify::new()).collect(),
        });
        let mut shards = Shards {
            begin: Vec::new(),
            stops: Vec::new(),
            threads: Vec::new(),
        };
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let own = {
                let _registering_with = runtime.enter();
                TcpListener::from_std(listener.try_clone()?)?
            };
            let (begin, begun) = oneshot::channel::<()>();
            let (stop, stopped) = oneshot::channel::<()>();
            let (serve, turns) = (serve.clone(), turns.clone());
            let thread = std::thread::Builder::new()
                .name(format!("portcullis-conn-{index}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        if begun.await.is_ok() {
                            accept(own, index, &turns, serve, stopped).await;
                        }
                    });
                    // Tasks still running (connections past the drain) are
                    // dropped here; their requests' audit rows are queued as
                    // they drop.
                    runtime.shutdown_timeout(Duration::from_secs(1));
                })?;
            shards.begin.push(begin);
            shards.stops.push(stop);
            shards.threads.push(thread);
        }
        Ok(shards)
    }

    /// How many threads to start: one per core the process may use.
    pub(super) fn per_core() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Start accepting on every thread.
    pub(super) fn serve(&mut self) {
        for begin in self.begin.drain(..) {
            let _ = begin.send(());
        }
    }

    /// Stop accepting, give open requests a few seconds, drop the
    /// connections still open, and wait until every thread has ended.
    pub(super) async fn stop(mut self) {
        self.begin.clear();
        self.stops.clear();
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }
}

/// Whose turn it is to accept.
struct Turns {
    /// Counts accepted connections; modulo the threads, the one whose turn it is.
    turn: AtomicUsize,
    /// Each thread's signal that the turn may have come to it.
    yours: Box<[Notify]>,
}

impl Turns {
    /// Wait until it is `index`'s turn.
    async fn wait(&self, index: usize) {
        while self.turn.load(Ordering::Acquire) % self.yours.len() != index {
            self.yours[index].notified().await;
        }
    }

    /// `index` has accepted: the turn goes to the next thread.
    fn pass(&self, index: usize) {
        self.turn.fetch_add(1, Ordering::AcqRel);
        self.yours[(index + 1) % self.yours.len()].notify_one();
    }
}

/// One thread's work: in its turns, accept connections and serve them on
/// this thread, until `stopped`; then drain them.
async fn accept<S, F>(listener: TcpListener, index: usize, turns: &Turns, serve: S, stopped: oneshot::Receiver<()>)
where
    S: Fn(TcpStream, SocketAddr, Stopping) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let (stop, stopping) = tokio::sync::watch::channel(());
    tokio::pin!(stopped);
    loop {
        let accepted = async {
            turns.wait(index).await;
            listener.accept().await
        };
        let (tcp, peer) = tokio::select! {
            accepted = accepted => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stopped => break,
        };
        turns.pass(index);
        // Small answers must not wait for a delayed ACK (Nagle): without
        // this, request/response pairs stall ~40 ms.
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve(tcp, peer, stopping.clone()));
    }
    drop(listener);
    drop(stopping);
    drain(stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc, Mutex};

    fn listener() -> (std::net::TcpListener, SocketAddr) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        (listener, addr)
    }

    /// Tell the test which thread this connection is served on.
    fn report(served: &mpsc::Sender<String>) {
        let name = std::thread::current().name().unwrap_or_default().to_string();
        served.send(name).unwrap();
    }

    /// Two threads whose every connection reports the thread serving it,
    /// not yet serving; and where the reports arrive.
    fn reporting() -> (Shards, SocketAddr, mpsc::Receiver<String>) {
        let (listener, addr) = listener();
        let (served, names) = mpsc::channel();
        let serve = move |_tcp, _peer, _stopping| {
            let served = served.clone();
            async move { report(&served) }
        };
        (Shards::start(2, listener, serve).unwrap(), addr, names)
    }

    fn stop(shards: Shards) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(shards.stop());
    }

    /// While one thread is held busy by its connection, the next
    /// connection is accepted and served by the other, and a connection is
    /// served on the thread that accepted it.
    #[test]
    fn a_connection_is_accepted_by_another_thread_while_one_is_busy() {
        let (listener, addr) = listener();
        let (served, names) = mpsc::channel();
        let (release, held) = mpsc::channel::<()>();
        let held = Arc::new(Mutex::new(held));
        let first = Arc::new(AtomicUsize::new(0));
        let serve = move |_tcp, _peer, _stopping| {
            let (served, held, first) = (served.clone(), held.clone(), first.clone());
            async move {
                report(&served);
                if first.fetch_add(1, Ordering::SeqCst) == 0 {
                    // Block the whole thread, not only this task, until the
                    // test lets go.
                    let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(30));
                }
            }
        };
        let mut shards = Shards::start(2, listener, serve).unwrap();
        shards.serve();
        let _one = std::net::TcpStream::connect(addr).unwrap();
        let busy = names
            .recv_timeout(Duration::from_secs(10))
            .expect("the first connection is served");
        let _two = std::net::TcpStream::connect(addr).unwrap();
        let other = names
            .recv_timeout(Duration::from_secs(10))
            .expect("the second connection is served while the first thread is busy");
        release.send(()).unwrap();
        stop(shards);
        assert!(busy.starts_with("portcullis-conn-"), "{busy}");
        assert!(other.starts_with("portcullis-conn-"), "{other}");
        assert_ne!(busy, other);
    }

    /// Connections are spread over the threads in turn, even when each
    /// thread is idle and could take them all.
    #[test]
    fn the_threads_take_turns_accepting() {
        let (mut shards, addr, names) = reporting();
        shards.serve();
        let mut order = Vec::new();
        let mut open = Vec::new();
        for _ in 0..6 {
            open.push(std::net::TcpStream::connect(addr).unwrap());
            order.push(names.recv_timeout(Duration::from_secs(10)).expect("served"));
        }
        stop(shards);
        let expected = ["0", "1", "0", "1", "0", "1"].map(|i| format!("portcullis-conn-{i}"));
        assert_eq!(order, expected);
    }

    /// A connection still open when the app stops is dropped, so what it
    /// holds (a request's pending audit row) is let go before `stop`
    /// returns; and no thread accepts any more.
    #[test]
    fn stop_drops_what_is_still_running_and_closes_the_listener() {
        struct Dropped(Arc<AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let (listener, addr) = listener();
        let dropped = Arc::new(AtomicBool::new(false));
        let (started, running) = mpsc::channel();
        let flag = dropped.clone();
        let serve = move |_tcp, _peer, _stopping| {
            let held = Dropped(flag.clone());
            let started = started.clone();
            async move {
                let _held = held;
                report(&started);
                std::future::pending::<()>().await;
            }
        };
        let mut shards = Shards::start(2, listener, serve).unwrap();
        shards.serve();
        let _open = std::net::TcpStream::connect(addr).unwrap();
        running.recv_timeout(Duration::from_secs(10)).expect("served");
        assert!(!dropped.load(Ordering::SeqCst));
        stop(shards);
        assert!(dropped.load(Ordering::SeqCst), "dropped before stop returned");
        let refused = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    }

    /// Until `serve`, nothing is served: a connection waits in the
    /// listener's queue, and is served once the threads begin.
    #[test]
    fn connections_wait_until_serving_begins() {
        let (mut shards, addr, names) = reporting();
        let _early = std::net::TcpStream::connect(addr).unwrap();
        assert!(
            names.recv_timeout(Duration::from_millis(300)).is_err(),
            "served before serve()"
        );
        shards.serve();
        names.recv_timeout(Duration::from_secs(10)).expect("served once begun");
        stop(shards);
    }
}
