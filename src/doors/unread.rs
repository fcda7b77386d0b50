//! A request body the pipeline may leave unread, taken back by the door so
//! that the client reads portcullis's refusal whole.
//!
//! When portcullis refuses a request before reading all of its body (a body
//! over the limit, a bad token), the client may still be sending it. Over
//! HTTP/2, hyper ends the stream with `RST_STREAM(NO_ERROR)` after the
//! complete refusal, as RFC 9113 §8.1 allows; yet clients that are still
//! uploading take that reset as a failure and never show the Status (curl
//! 7.88: "Stream error in the HTTP/2 framing layer"). Over HTTP/1.1, hyper
//! closes the connection, and the bytes the client still sends make the
//! kernel reset it, which can destroy the refusal before the client reads it
//! (kubectl: "write: broken pipe"). So, as nginx's lingering close does, the
//! door reads what is left and discards it, within a bound, before it
//! answers: the client finishes its upload and reads the Status like any
//! answer, and an HTTP/1.1 connection stays usable. Past the bound (a body
//! announced far over it, a slow client), the refusal goes at once, with the
//! reset or the close as before. Nothing is kept: discarded frames are
//! dropped as they come.

use bytes::Bytes;
use http::{header, Request};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a refused request's client is given to finish sending its body
/// before the refusal goes anyway.
pub(super) const DRAIN_TIME: Duration = Duration::from_secs(10);

/// How much of a refused request's body is read through, in body limits:
/// enough for a manifest a few times over the limit to be answered as a
/// plain refusal; a larger upload is cut short (reset or closed).
pub(super) const DRAIN_LIMITS: u64 = 4;

/// The request body as the pipeline reads it. Dropped before its end, it
/// goes back to the door's [`Unread`] instead of being discarded.
pub(super) struct Lent<B: Body> {
    body: Option<B>,
    back: Option<oneshot::Sender<Returned<B>>>,
    polled: bool,
}

/// A body that came back before its end.
struct Returned<B> {
    body: B,
    /// Someone asked for its data: over HTTP/1.1 hyper then sent
    /// `100 Continue`, so the client is sending.
    polled: bool,
}

/// The door's side of a [`Lent`] body: what is left of it, once the
/// pipeline drops it.
pub(super) struct Unread<B> {
    back: Option<oneshot::Receiver<Returned<B>>>,
    expects_continue: bool,
}

/// How [`Unread::drain`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Drained {
    /// Nothing was left to read: the body had ended, or had none.
    Nothing,
    /// Read to its end and discarded.
    Read,
    /// The client waits for `100 Continue` and has sent nothing.
    NotSent,
    /// More is left than the bound allows.
    TooLarge,
    /// The bound's time ran out.
    TooSlow,
    /// The client broke off the body.
    Broken,
}

/// Lend `request`'s body to the pipeline; the door keeps its [`Unread`].
/// A request without a body costs nothing more.
pub(super) fn lend<B: Body>(request: Request<B>) -> (Request<Lent<B>>, Unread<B>) {
    let expects_continue = request
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (parts, body) = request.into_parts();
    let (back, receiver) = match body.is_end_stream() {
        true => (None, None),
        false => {
            let (back, receiver) = oneshot::channel();
            (Some(back), Some(receiver))
        }
    };
    let lent = Lent {
        body: Some(body),
        back,
        polled: false,
    };
    let unread = Unread {
        back: receiver,
        expects_continue,
    };
    (Request::from_parts(parts, lent), unread)
}

impl<B: Body<Data = Bytes> + Unpin> Unread<B> {
    /// After a refusal: wait for the pipeline to give the body back, then
    /// read and discard what is left of it, unless more than `bytes` remain
    /// or it takes longer than `time`.
    pub(super) async fn drain(self, bytes: u64, time: Duration) -> Drained {
        let Some(back) = self.back else {
            return Drained::Nothing;
        };
        let expects_continue = self.expects_continue;
        let work = async move {
            // An error: the body ended in the pipeline's hands.
            let Ok(returned) = back.await else {
                return Drained::Nothing;
            };
            if expects_continue && !returned.polled {
                return Drained::NotSent;
            }
            if returned.body.size_hint().exact().is_some_and(|left| left > bytes) {
                return Drained::TooLarge;
            }
            discard(returned.body, bytes).await
        };
        let drained = tokio::time::timeout(time, work).await.unwrap_or(Drained::TooSlow);
        if !matches!(drained, Drained::Nothing | Drained::Read) {
            tracing::debug!(?drained, "answering before the client finished sending its body");
        }
        drained
    }
}

/// Read `body` to its end, dropping its frames, unless it carries more
/// than `bytes`.
async fn discard<B: Body<Data = Bytes> + Unpin>(mut body: B, bytes: u64) -> Drained {
    let mut left = bytes;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Drained::Broken;
        };
        let len = frame.data_ref().map_or(0, |data| data.len() as u64);
        match left.checked_sub(len) {
            Some(rest) => left = rest,
            None => return Drained::TooLarge,
        }
    }
    Drained::Read
}

impl<B: Body<Data = Bytes> + Unpin> Body for Lent<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        this.polled = true;
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        Poll::Ready(ready!(Pin::new(body).poll_frame(cx)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B: Body> Drop for Lent<B> {
    fn drop(&mut self) {
        let (Some(body), Some(back)) = (self.body.take(), self.back.take()) else {
            return;
        };
        if !body.is_end_stream() {
            // The door may have answered already: then nobody waits.
            let _ = back.send(Returned {
                body,
                polled: self.polled,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};
    use std::convert::Infallible;

    type Chunks = StreamBody<futures_util::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

    /// A body whose chunks the test sends, as a client uploading.
    fn uploading() -> (
        tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
        Request<Chunks>,
    ) {
        let (send, receive) = tokio::sync::mpsc::channel(4);
        let stream = futures_util::stream::unfold(receive, |mut receive| async move {
            receive.recv().await.map(|chunk| (chunk, receive))
        });
        let body = StreamBody::new(futures_util::StreamExt::boxed(stream));
        (send, Request::post("/").body(body).unwrap())
    }

    fn chunk(len: usize) -> Result<Frame<Bytes>, Infallible> {
        Ok(Frame::data(Bytes::from(vec![b'x'; len])))
    }

    const TIME: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn a_body_dropped_halfway_is_read_to_its_end_by_the_door() {
        let (client, request) = uploading();
        let (mut request, unread) = lend(request);
        client.send(chunk(10)).await.unwrap();
        let first = request.body_mut().frame().await.unwrap().unwrap();
        assert_eq!(first.data_ref().unwrap().len(), 10);
        drop(request);
        let uploader = tokio::spawn(async move {
            for _ in 0..3 {
                client.send(chunk(10)).await.unwrap();
            }
        });
        assert_eq!(unread.drain(30, TIME).await, Drained::Read);
        uploader.await.unwrap();
    }

    #[tokio::test]
    async fn more_than_the_bound_is_not_read_and_nothing_is_kept() {
        let (client, request) = uploading();
        let (request, unread) = lend(request);
        drop(request);
        tokio::spawn(async move { while client.send(chunk(10)).await.is_ok() {} });
        assert_eq!(unread.drain(25, TIME).await, Drained::TooLarge);
    }

    #[tokio::test]
    async fn a_body_announced_over_the_bound_is_not_read_at_all() {
        let request = Request::post("/")
            .body(Full::new(Bytes::from(vec![b'x'; 100])))
            .unwrap();
        let (request, unread) = lend(request);
        drop(request);
        assert_eq!(unread.drain(99, TIME).await, Drained::TooLarge);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_sending_is_answered_when_the_time_runs_out() {
        let (_client, request) = uploading();
        let (request, unread) = lend(request);
        drop(request);
        assert_eq!(unread.drain(1000, Duration::from_secs(10)).await, Drained::TooSlow);
    }

    #[tokio::test]
    async fn a_client_waiting_for_100_continue_is_answered_at_once() {
        let (_client, mut request) = uploading();
        request
            .headers_mut()
            .insert(header::EXPECT, "100-Continue".parse().unwrap());
        let (request, unread) = lend(request);
        drop(request);
        assert_eq!(unread.drain(1000, TIME).await, Drained::NotSent);
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_or_absent_leaves_nothing_to_drain() {
        let request = Request::post("/").body(Full::new(Bytes::from_static(b"{}"))).unwrap();
        let (mut request, unread) = lend(request);
        request.body_mut().frame().await.unwrap().unwrap();
        drop(request);
        assert_eq!(unread.drain(0, TIME).await, Drained::Nothing);
        let (request, unread) = lend(Request::get("/").body(http_body_util::Empty::<Bytes>::new()).unwrap());
        assert!(unread.back.is_none(), "no channel for a request without a body");
        drop(request);
        assert_eq!(unread.drain(0, TIME).await, Drained::Nothing);
    }
}
