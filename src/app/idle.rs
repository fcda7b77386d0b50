//! A connection's activity, for closing it when it has stood idle.
//!
//! hyper closes an HTTP/1.1 connection that waits for its next request
//! longer than the header timeout, but it has no idle timeout for HTTP/2:
//! a client that asked once could keep its connection, and its place among
//! `[limits] connections`, for as long as it answered pings. So each
//! connection counts its requests here, the request's guard living as long
//! as its answer's body (a watch's, for hours), and the connection's outer
//! task looks now and then from outside the serving task; one with no
//! request open for `[limits] idle_timeout` (90 s, as kube-apiserver's) is
//! closed gracefully (a GOAWAY, which tells the client it may retry
//! anything it sent after).
//!
//! The serving task pays a few atomic operations a request and, each poll,
//! a look at a flag and its waker's registration (a compare-and-swap, no
//! clone when the waker is the same); no timer of its own.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// What the outer task reads of a connection, and its way of asking the
/// serving task to close it.
#[derive(Default)]
pub(super) struct Activity {
    /// Requests whose answer is not yet over.
    open: AtomicUsize,
    /// Requests begun and ended, each counted once at each: unchanged
    /// between two looks, with none open, means idle all that while.
    events: AtomicU64,
    closing: AtomicBool,
    waker: AtomicWaker,
}

impl Activity {
    /// A request begins; it ends when the guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.events.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Whether any request has begun yet.
    pub(super) fn asked(&self) -> bool {
        self.events.load(Ordering::Relaxed) > 0
    }

    /// The count to compare at the next look, if no request is open now.
    pub(super) fn quiet(&self) -> Option<u64> {
        let events = self.events.load(Ordering::Relaxed);
        (self.open.load(Ordering::Relaxed) == 0).then_some(events)
    }

    /// Ask the serving task to close the connection gracefully.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Resolves once [`Activity::close`] is called.
    pub(super) fn closing(&self) -> Closing<'_> {
        Closing(self)
    }
}

/// One request, open until dropped.
pub(super) struct InFlight(Arc<Activity>);

/// An answer's body holds its request's place until it is dropped.
impl crate::body::Guard for InFlight {}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.events.fetch_add(1, Ordering::Relaxed);
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// See [`Activity::closing`].
pub(super) struct Closing<'a>(&'a Activity);

impl Future for Closing<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.closing.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.0.waker.register(cx.waker());
        if self.0.closing.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_quiet_only_with_no_request_open_and_none_begun_or_ended_since_the_last_look() {
        let activity = Arc::new(Activity::default());
        assert!(!activity.asked());
        let look = activity.quiet().expect("nothing open yet");
        let request = activity.begin();
        assert!(activity.asked());
        assert_eq!(activity.quiet(), None, "a request is open");
        drop(request);
        let after = activity.quiet().expect("the request ended");
        assert_ne!(after, look, "a request came and went between the looks");
        assert_eq!(activity.quiet(), Some(after), "nothing since");
    }

    #[tokio::test]
    async fn closing_resolves_when_asked_even_if_already_waiting() {
        let activity = Arc::new(Activity::default());
        let waiting = {
            let activity = activity.clone();
            tokio::spawn(async move { activity.closing().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        activity.close();
        tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("woken")
            .unwrap();
        activity.closing().await;
    }
}
