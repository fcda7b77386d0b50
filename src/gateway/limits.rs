//! Limits on what flows through: the request body cap, and the response
//! body's size cap and deadline.
//!
//! Bodies are never buffered: the response wrapper counts frames as they
//! pass, so a watch or a large list reaches the client as the cluster sends
//! it. A cap found out midway ends the body with an error, which makes hyper
//! close the connection (HTTP/1.1) or reset the stream (HTTP/2): the client
//! sees a broken response rather than a silently short one.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::gauge::Gauge;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::time::{Instant, Sleep};

/// What a response body reports back (for metrics, logs and the audit).
#[derive(Debug, Default)]
pub struct BodyOutcome {
    /// Bytes relayed.
    pub bytes: AtomicU64,
    /// The body was cut (size cap or deadline).
    pub truncated: AtomicBool,
}

/// The response body exceeded the configured cap.
#[derive(Debug, thiserror::Error)]
#[error("the cluster's response exceeded portcullis's limit of {0} bytes")]
pub struct ResponseTooLarge(pub u64);

/// The response did not finish within the request timeout.
#[derive(Debug, thiserror::Error)]
#[error("the cluster's response did not finish within the request timeout")]
pub struct ResponseDeadline;

/// A response body with an optional size cap and deadline.
pub struct Capped<B> {
    inner: B,
    cap: Option<u64>,
    deadline: Option<Pin<Box<Sleep>>>,
    outcome: Arc<BodyOutcome>,
    /// Counts the stream as open until dropped (the client went away or
    /// it ended).
    _open: Option<super::metrics::Counted>,
}

impl<B> Capped<B> {
    /// Wrap `inner`; `cap` and `deadline` of `None` mean unlimited.
    pub fn new(inner: B, cap: Option<u64>, deadline: Option<Instant>, outcome: Arc<BodyOutcome>) -> Self {
        Capped {
            inner,
            cap,
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
            outcome,
            _open: None,
        }
    }

    /// Count this body in `open` for as long as it lives.
    pub fn guarded(mut self, open: Gauge) -> Self {
        self._open = Some(super::metrics::Counted::in_gauge(open));
        self
    }
}

impl<B> Body for Capped<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<crate::body::BoxError>,
{
    type Data = Bytes;
    type Error = crate::body::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                this.outcome.truncated.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err(ResponseDeadline.into())));
            }
        }
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
            Some(Ok(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            let total = this.outcome.bytes.fetch_add(data.len() as u64, Ordering::Relaxed) + data.len() as u64;
            if let Some(cap) = this.cap.filter(|cap| total > *cap) {
                this.outcome.truncated.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err(ResponseTooLarge(cap).into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Is `error` (or any of its causes) the request body limit?
pub fn is_body_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    fn chunks(n: usize, size: usize) -> impl Body<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        let frames = (0..n).map(move |_| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(vec![b'x'; size]))));
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_within_the_cap_passes_whole() {
        let outcome = Arc::new(BodyOutcome::default());
        let body = Capped::new(chunks(4, 10), Some(40), None, outcome.clone());
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 40);
        assert!(!outcome.truncated.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_cut_with_an_error() {
        let outcome = Arc::new(BodyOutcome::default());
        let body = Capped::new(chunks(5, 10), Some(40), None, outcome.clone());
        let err = body.collect().await.unwrap_err();
        assert!(err.to_string().contains("40 bytes"));
        assert!(outcome.truncated.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn no_cap_means_no_cap() {
        let outcome = Arc::new(BodyOutcome::default());
        let body = Capped::new(chunks(100, 1000), None, None, outcome.clone());
        assert_eq!(body.collect().await.unwrap().to_bytes().len(), 100_000);
        assert_eq!(outcome.bytes.load(Ordering::Relaxed), 100_000);
    }
}
