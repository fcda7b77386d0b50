//! How the request path fills a row and writes it exactly once.
//!
//! The row is written when the response body ends or is dropped (the client
//! went away), so bytes out and truncation are known; for an upgraded
//! stream, when the stream closes, with bytes both ways. Bodies are counted
//! as their frames pass, never copied. "Ends" is before the client can see
//! the end: the row reaches the spool before the last frame of a body that
//! knows its length is released, and before the end of any other, so a
//! client never holds a whole answer whose row a crash could lose.

use super::refusal::Refusal;
use super::row::{bounded, clean_query, AuditRow};
use super::writer::AuditWriter;
use crate::body::{self, Body};
use crate::identity::Identity;
use bytes::Bytes;
use chrono::Utc;
use http::Response;
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// Bytes that went each way through an upgraded stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Client to cluster.
    pub up: u64,
    /// Cluster to client.
    pub down: u64,
}

/// Put in a 101 response's extensions by `forward`: resolves when the
/// spliced stream closes.
#[derive(Debug, Clone)]
pub struct StreamEnd(Arc<Mutex<Option<oneshot::Receiver<StreamStats>>>>);

impl StreamEnd {
    /// A pair: the sender goes to the splice task, the `StreamEnd` into the
    /// response.
    pub fn new() -> (oneshot::Sender<StreamStats>, StreamEnd) {
        let (tx, rx) = oneshot::channel();
        (tx, StreamEnd(Arc::new(Mutex::new(Some(rx)))))
    }

    fn take(&self) -> Option<oneshot::Receiver<StreamStats>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }
}

impl AuditRow {
    /// A row for a request that just arrived.
    pub fn arrived(id: uuid::Uuid, method: &http::Method, path: &str, query: Option<&str>) -> AuditRow {
        let mut row = AuditRow::new(id, Utc::now());
        row.method = method.to_string();
        row.path = bounded(path);
        row.query = query.map(clean_query).unwrap_or_default();
        row
    }

    /// Record who sent it.
    pub fn identify(&mut self, identity: &Identity) {
        self.principal_kind = identity.principal.kind.as_str().to_string();
        self.login = identity.principal.name.clone();
        self.credential_id = identity.credential_id.clone();
        if let Some(origin) = &identity.origin {
            self.via.clone_from(&origin.via);
        }
    }
}

/// A request body that counts its bytes into `count` as they pass.
#[derive(Debug)]
pub struct Counted<B> {
    inner: B,
    count: Arc<AtomicU64>,
}

impl<B> Counted<B> {
    /// Count `inner`'s data bytes into `count`.
    pub fn new(inner: B, count: Arc<AtomicU64>) -> Self {
        Counted { inner, count }
    }
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()).and_then(Frame::data_ref) {
            self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An upgraded connection that counts the bytes read from it.
#[derive(Debug)]
pub struct CountedIo<T> {
    inner: T,
    /// Bytes read so far.
    pub read: u64,
}

impl<T> CountedIo<T> {
    /// Count what is read from `inner`.
    pub fn new(inner: T) -> Self {
        CountedIo { inner, read: 0 }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CountedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.read += (buf.filled().len() - before) as u64;
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A row waiting for its response to end.
#[derive(Debug)]
struct Pending {
    writer: AuditWriter,
    row: AuditRow,
    sent: Arc<AtomicU64>,
}

impl Pending {
    fn write(mut self) {
        self.row.bytes_in = self.sent.load(Ordering::Relaxed);
        self.row.finish(Utc::now());
        self.writer.submit(self.row);
    }
}

/// A response portcullis made in place of the cluster's answer: why, for
/// the row's `refused` (set as a response extension by the stage that
/// refused, from the pipeline error's own refusal reason,
/// `gateway::error::RequestError::refused`).
#[derive(Debug, Clone, Copy)]
pub struct Refused(pub Refusal);

/// Attach `row` to `response` so that it is written exactly once: when the
/// body ends or is dropped, or, for an upgraded stream, when the stream
/// closes. `sent` counts the request body bytes forwarded.
pub fn attach(
    writer: &AuditWriter,
    mut row: AuditRow,
    sent: Arc<AtomicU64>,
    response: Response<Body>,
) -> Response<Body> {
    row.code = response.status().as_u16();
    if let Some(Refused(why)) = response.extensions().get::<Refused>() {
        row.refuse(*why);
    }
    let pending = Pending {
        writer: writer.clone(),
        row,
        sent,
    };
    if let Some(end) = response.extensions().get::<StreamEnd>().and_then(StreamEnd::take) {
        tokio::spawn(crate::logs::in_current_request(after_stream(pending, end)));
        return response;
    }
    // Nothing to relay (or HEAD, whose body is never sent): the server may
    // send the whole answer without polling the body.
    if http_body::Body::is_end_stream(response.body()) || pending.row.method == "HEAD" {
        pending.write();
        return response;
    }
    let sniff = pending.row.code >= 400 && pending.row.reason.is_empty();
    response.map(|inner| {
        body::boxed(Recorded {
            inner,
            pending: Some(pending),
            sniff,
        })
    })
}

async fn after_stream(pending: Pending, end: oneshot::Receiver<StreamStats>) {
    let mut open = OpenStream(Some(pending));
    // A stream that could not be established ends with nothing sent.
    let stats = end.await.unwrap_or_default();
    let Some(mut pending) = open.0.take() else { return };
    pending.row.bytes_out = stats.down;
    pending.sent.store(stats.up, Ordering::Relaxed);
    pending.write();
}

/// An upgraded stream's row while the stream is open. A shutdown drops the
/// connection threads' tasks still running after the drain (an exec open
/// during a rolling deploy) without polling them: its row is still
/// written, cut short.
struct OpenStream(Option<Pending>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        if let Some(mut pending) = self.0.take() {
            pending.row.truncated = true;
            pending.write();
        }
    }
}

/// The response body, counted; writes the row when it ends or is dropped.
struct Recorded {
    inner: Body,
    pending: Option<Pending>,
    /// Look for the Status reason in the first frame of an error response.
    sniff: bool,
}

impl http_body::Body for Recorded {
    type Data = Bytes;
    type Error = crate::body::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(pending) = this.pending.as_mut() {
            match &frame {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        pending.row.bytes_out += data.len() as u64;
                        if std::mem::take(&mut this.sniff) {
                            pending.row.reason = status_reason(data).unwrap_or_default();
                        }
                    }
                }
                Some(Err(_)) => pending.row.truncated = true,
                None => {}
            }
        }
        // The end, or the last frame of a body that knows it is the last
        // (a Content-Length answer, complete for the client at its last
        // byte): the row first.
        let ended = match &frame {
            None => true,
            Some(Ok(_)) => this.inner.is_end_stream(),
            Some(Err(_)) => false,
        };
        if ended {
            if let Some(pending) = this.pending.take() {
                pending.write();
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.write();
        }
    }
}

/// The `reason` of a Kubernetes Status in `data` (the start of an error
/// response), without parsing or copying the body.
fn status_reason(data: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"reason\":\"";
    let start = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = &data[start..];
    let end = rest.iter().position(|b| !b.is_ascii_alphanumeric())?;
    (rest.get(end) == Some(&b'"') && end > 0 && end <= 64).then(|| String::from_utf8_lossy(&rest[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn the_status_reason_is_found_in_an_error_body() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"x","reason":"Forbidden","code":403}"#;
        assert_eq!(status_reason(body).as_deref(), Some("Forbidden"));
        assert_eq!(status_reason(br#"{"reason":"Bad\"x"}"#), None);
        assert_eq!(status_reason(b"not json"), None);
    }

    #[tokio::test]
    async fn a_request_body_is_counted_as_it_passes() {
        let count = Arc::new(AtomicU64::new(0));
        let body = Counted::new(http_body_util::Full::new(Bytes::from_static(b"hello")), count.clone());
        assert_eq!(body.collect().await.unwrap().to_bytes().len(), 5);
        assert_eq!(count.load(Ordering::Relaxed), 5);
    }
}
