//! The HTTP/1.1 keep-alive connections to one cluster that ordinary
//! requests take turns on.
//!
//! hyper_util's pooled client cost a small GET about 8,000 instructions
//! (a checkout keyed by a hashed scheme and authority, a connection-info
//! envelope, and a task spawned for each request to put its connection
//! back once the body was read). Here the connections are a list behind a
//! lock: a request takes the most recently used one that is ready, and puts
//! it back as soon as the response head has come. hyper refuses a second
//! request on a connection whose response body is still being read
//! (`is_ready` is false until then), so a connection put back busy is
//! skipped until it is done, and one that closed is dropped.
//!
//! Each thread that sends keeps its own list: a connection's task runs on
//! the thread that made it (`app::shards`), so a request taking a
//! connection made on its own thread wakes no other.

use super::upstream::Bounded;
use crate::body::Body;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tower::ServiceExt;

/// Why a request did not get its response.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection to the cluster could be made (TCP or TLS).
    #[error("cannot connect to the cluster: {0}")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed while the request was sent or its response
    /// head read (the request body's own error among its causes).
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// What hyper_util's client (watches, upgrades) reported.
    #[error(transparent)]
    Client(#[from] hyper_util::client::legacy::Error),
}

impl SendError {
    /// Was no connection made?
    pub fn is_connect(&self) -> bool {
        match self {
            SendError::Connect(_) => true,
            SendError::Http(_) => false,
            SendError::Client(error) => error.is_connect(),
        }
    }
}

/// How many lists a cluster's connections are kept in. The threads that
/// send are the connection threads (one per core) and the main runtime's
/// workers; where there are more than this, threads share lists (correct,
/// only less local).
const LISTS: usize = 16;

/// A number of this thread's own, given the first time it asks, so that
/// each sending thread has a list of its own while there are no more of
/// them than [`LISTS`].
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|slot| *slot)
}

/// A connection waiting for its next request.
struct Idle {
    sender: SendRequest<Body>,
    /// When it was last put back.
    since: Instant,
}

/// One cluster's keep-alive connections.
pub struct KeepAlive {
    connector: Bounded,
    /// Where connections go: the cluster's server URL.
    server: Uri,
    /// One list per sending thread (by [`thread_slot`]), least recently
    /// put back first.
    idle: Box<[Mutex<Vec<Idle>>]>,
    most_idle: usize,
    idle_timeout: Duration,
}

impl KeepAlive {
    /// Connections to `server` through `connector` (TCP, then TLS offering
    /// only HTTP/1.1), each sending thread keeping at most `most_idle` of
    /// them, none idle for longer than `idle_timeout`.
    pub fn new(connector: Bounded, server: Uri, most_idle: usize, idle_timeout: Duration) -> Self {
        KeepAlive {
            connector,
            server,
            idle: (0..LISTS).map(|_| Mutex::new(Vec::new())).collect(),
            most_idle,
            idle_timeout,
        }
    }

    /// Send `request` (its URI absolute, to this cluster) on a kept
    /// connection, or a new one. A request the cluster never saw because a
    /// kept connection had closed meanwhile goes again on another.
    pub async fn send(&self, mut request: Request<Body>) -> Result<Response<Incoming>, SendError> {
        // Origin form, as a client sends to a server that is no proxy.
        if let Some(path) = request.uri().path_and_query().cloned() {
            *request.uri_mut() = Uri::from(path);
        }
        loop {
            let (mut sender, kept) = match self.take() {
                Some(sender) => (sender, true),
                // Boxed: a connection is made rarely, and its TLS handshake's
                // future would otherwise be carried, and copied, by every
                // request's future up to the pipeline (benches/RESULTS.md).
                None => (Box::pin(self.connect()).await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.put(sender);
                    return Ok(response);
                }
                Err(mut error) => match error.take_message() {
                    Some(unsent) if kept => request = unsent,
                    _ => return Err(SendError::Http(error.into_error())),
                },
            }
        }
    }

    /// The most recently used connection that is ready; closed ones and
    /// ones idle too long are dropped on the way.
    fn take(&self) -> Option<SendRequest<Body>> {
        let mut idle = self.list().lock().unwrap_or_else(|p| p.into_inner());
        self.prune(&mut idle);
        let ready = idle.iter().rposition(|c| c.sender.is_ready())?;
        Some(idle.remove(ready).sender)
    }

    /// Close the connections idle too long, and forget the closed ones:
    /// run every few seconds, so a quiet proxy does not hold connections
    /// open on the API server.
    pub fn reap(&self) {
        for list in &self.idle {
            self.prune(&mut list.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// This thread's list.
    fn list(&self) -> &Mutex<Vec<Idle>> {
        &self.idle[thread_slot() % LISTS]
    }

    fn prune(&self, idle: &mut Vec<Idle>) {
        let now = Instant::now();
        let fresh = idle
            .iter()
            .position(|c| now.duration_since(c.since) < self.idle_timeout)
            .unwrap_or(idle.len());
        idle.drain(..fresh);
        idle.retain(|c| !c.sender.is_closed());
    }

    /// Keep `sender` for a later request (the least recently used goes if
    /// there are too many).
    fn put(&self, sender: SendRequest<Body>) {
        let mut idle = self.list().lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= self.most_idle {
            idle.remove(0);
        }
        idle.push(Idle {
            sender,
            since: Instant::now(),
        });
    }

    async fn connect(&self) -> Result<SendRequest<Body>, SendError> {
        let io = self
            .connector
            .clone()
            .oneshot(self.server.clone())
            .await
            .map_err(SendError::Connect)?;
        let (sender, connection) = http1::handshake(io).await?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "cluster connection closed");
            }
        });
        Ok(sender)
    }

    /// How many connections are kept (ready or still busy), on every
    /// thread's list.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.idle
            .iter()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::upstream::{connector, Protocol};
    use bytes::Bytes;
    use http_body_util::{BodyExt, StreamBody};
    use hyper::body::Frame;
    use hyper_util::rt::TokioIo;
    use std::convert::Infallible;
    use std::sync::Arc;
    use tokio::sync::Notify;

    fn pool(most_idle: usize, idle_timeout: Duration) -> KeepAlive {
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, crate::tls::generate(&[]).unwrap().ca_pem).unwrap();
        let trust = crate::tls::CaFileTrust::open(&ca_file).unwrap();
        let never_used = connector(trust, Protocol::Http1);
        KeepAlive::new(
            never_used,
            "https://127.0.0.1:1".parse().unwrap(),
            most_idle,
            idle_timeout,
        )
    }

    /// A connection to a server in this process that answers `name` in two
    /// chunks, the second once `go` (if any) is notified, and the server's
    /// task (abort it to close the connection).
    async fn connection(
        name: &'static str,
        go: Option<Arc<Notify>>,
    ) -> (SendRequest<Body>, tokio::task::JoinHandle<()>) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let answer = hyper::service::service_fn(move |_| {
            let go = go.clone();
            let (head, tail) = name.split_at(1);
            let (chunks, mut body) = tokio::sync::mpsc::channel::<Bytes>(2);
            tokio::spawn(async move {
                let _ = chunks.send(Bytes::from(head)).await;
                if let Some(go) = go {
                    go.notified().await;
                }
                let _ = chunks.send(Bytes::from(tail)).await;
            });
            let frames = futures_util::stream::poll_fn(move |cx| {
                body.poll_recv(cx)
                    .map(|chunk| chunk.map(|b| Ok::<_, Infallible>(Frame::data(b))))
            });
            async move { Ok::<_, Infallible>(http::Response::new(StreamBody::new(frames))) }
        });
        let server = tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(server), answer)
                .await;
        });
        let (sender, connection) = http1::handshake(TokioIo::new(client)).await.unwrap();
        tokio::spawn(connection);
        (sender, server)
    }

    /// A connection whose answers come whole.
    async fn prompt(name: &'static str) -> (SendRequest<Body>, tokio::task::JoinHandle<()>) {
        connection(name, None).await
    }

    /// Put into `pool` a connection answering `name`, once it is ready;
    /// returns the server's task.
    async fn put_ready(pool: &KeepAlive, name: &'static str) -> tokio::task::JoinHandle<()> {
        let (sender, server) = prompt(name).await;
        eventually(|| sender.is_ready().then_some(())).await;
        pool.put(sender);
        server
    }

    fn get() -> Request<Body> {
        Request::get("/")
            .header("host", "test")
            .body(crate::body::empty())
            .unwrap()
    }

    async fn answer(sender: &mut SendRequest<Body>) -> Bytes {
        let response = sender.send_request(get()).await.unwrap();
        response.into_body().collect().await.unwrap().to_bytes()
    }

    /// Poll `condition` until it holds (the connection's own task moves
    /// it on), failing after ten seconds.
    async fn eventually<T>(mut condition: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(found) = condition() {
                return found;
            }
            assert!(Instant::now() < deadline, "the condition never held");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_connection_is_taken_again_once_its_body_is_read_and_dropped_once_closed() {
        let pool = pool(4, Duration::from_secs(90));
        let go = Arc::new(Notify::new());
        let (mut sender, server) = connection("hello", Some(go.clone())).await;
        let response = sender.send_request(get()).await.unwrap();
        pool.put(sender);
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"h");
        assert!(pool.take().is_none(), "busy while its body is still coming");
        assert_eq!(pool.kept(), 1);
        go.notify_one();
        let rest = body.collect().await.unwrap().to_bytes();
        assert_eq!(&rest[..], b"ello");
        let mut again = eventually(|| pool.take()).await;
        go.notify_one();
        assert_eq!(&answer(&mut again).await[..], b"hello");
        pool.put(again);
        server.abort();
        eventually(|| (pool.take().is_none() && pool.kept() == 0).then_some(())).await;
    }

    #[tokio::test]
    async fn the_most_recently_put_back_ready_connection_is_taken_first() {
        let pool = pool(4, Duration::from_secs(90));
        let (older, _a) = prompt("older").await;
        let (newer, _b) = prompt("newer").await;
        eventually(|| (older.is_ready() && newer.is_ready()).then_some(())).await;
        pool.put(older);
        pool.put(newer);
        assert_eq!(&answer(&mut pool.take().unwrap()).await[..], b"newer");
        assert_eq!(&answer(&mut pool.take().unwrap()).await[..], b"older");
        assert!(pool.take().is_none());
    }

    #[tokio::test]
    async fn the_least_recently_put_back_goes_when_too_many_are_kept() {
        let pool = pool(2, Duration::from_secs(90));
        let mut servers = Vec::new();
        for name in ["first", "second", "third"] {
            servers.push(put_ready(&pool, name).await);
        }
        assert_eq!(pool.kept(), 2);
        assert_eq!(&answer(&mut pool.take().unwrap()).await[..], b"third");
        assert_eq!(&answer(&mut pool.take().unwrap()).await[..], b"second");
    }

    #[tokio::test]
    async fn a_connection_is_taken_again_by_the_thread_that_put_it_back_and_not_by_another() {
        let pool = Arc::new(pool(4, Duration::from_secs(90)));
        let _server = put_ready(&pool, "here").await;
        let here = thread_slot() % LISTS;
        // A thread whose list is another: threads are numbered as they
        // first use a pool, so one may share this thread's list when other
        // tests' threads took numbers meanwhile.
        let taken_elsewhere = loop {
            let elsewhere = pool.clone();
            let (slot, taken) = std::thread::spawn(move || {
                let slot = thread_slot() % LISTS;
                (slot, slot != here && elsewhere.take().is_some())
            })
            .join()
            .unwrap();
            if slot != here {
                break taken;
            }
        };
        assert!(!taken_elsewhere, "another thread takes from its own list");
        assert_eq!(pool.kept(), 1);
        assert_eq!(&answer(&mut pool.take().unwrap()).await[..], b"here");
    }

    #[tokio::test]
    async fn a_connection_idle_too_long_is_not_taken() {
        let pool = pool(4, Duration::ZERO);
        let _server = put_ready(&pool, "idle").await;
        assert!(pool.take().is_none());
        assert_eq!(pool.kept(), 0);
    }

    #[tokio::test]
    async fn reaping_closes_the_connections_idle_too_long() {
        let pool = pool(4, Duration::ZERO);
        let server = put_ready(&pool, "idle").await;
        assert_eq!(pool.kept(), 1);
        pool.reap();
        assert_eq!(pool.kept(), 0);
        // The connection's last sender is gone: hyper closes it, and the
        // server sees it end.
        eventually(|| server.is_finished().then_some(())).await;
    }

    #[test]
    fn only_a_failed_connection_is_a_connect_error() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(SendError::Connect(Box::new(refused)).is_connect());
    }
}
