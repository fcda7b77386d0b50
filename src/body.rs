//! The one body type used on both sides of the proxy.
//!
//! A boxed body lets a handler answer with a fixed buffer, a relayed upstream
//! body or a stream of watch events through the same type, without copying.

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Empty, Full, StreamBody};

/// Errors carried by bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed HTTP body of `Bytes` frames.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// A body holding `bytes` in one frame.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

/// An empty body.
pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A body whose data frames come from `stream` as they are produced.
pub fn from_stream<S>(stream: S) -> Body
where
    S: futures_util::Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
    use futures_util::StreamExt;
    StreamBody::new(stream.map(|chunk| chunk.map(http_body::Frame::data))).boxed_unsync()
}

/// How long a small request body (a form, an OAuth or person API call)
/// may take to arrive whole.
pub const SMALL_BODY_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a request body was not read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// It is over the limit.
    TooLarge,
    /// It did not arrive whole within the time allowed.
    TimedOut,
    /// It broke off (the client went away, or sent a malformed frame).
    Cut,
}

/// A request body read whole: at most `limit` bytes, within `within`. A
/// client that sends all but its last byte, or a byte a minute, must not
/// hold the buffer, and its connection, for ever.
pub async fn read_whole<B>(body: B, limit: usize, within: std::time::Duration) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes>,
{
    tokio::time::timeout(within, read_limited(body, limit))
        .await
        .unwrap_or(Err(ReadError::TimedOut))
}

/// `body` read whole, at most `limit` bytes, however long it takes (the
/// caller bounds the time). By hand: `http_body_util::Limited` over a
/// boxed error trips a higher-ranked lifetime check in async code.
pub async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut out = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(ReadError::Cut);
        };
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(ReadError::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

/// Box any compatible body.
pub fn boxed<B>(body: B) -> Body
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

pin_project_lite::pin_project! {
    /// `body`, unchanged, holding `guard` until the body is dropped: what
    /// must last as long as an answer does (a connection's open request, a
    /// caller's stream slot) rides with it.
    pub struct Guarded<B, G> {
        #[pin]
        body: B,
        guard: G,
    }
}

impl<B, G> Guarded<B, G> {
    /// `body` holding `guard`.
    pub fn new(body: B, guard: G) -> Self {
        Guarded { body, guard }
    }
}

/// What a [`Guarded`] body holds; it may end the body early.
pub trait Guard {
    /// Has what the answer rides on been ended (a stream whose credential
    /// was revoked)? Registers `cx` to be woken when it is. The body then
    /// ends as if its sender had ended it.
    fn poll_ended(&self, _cx: &mut std::task::Context<'_>) -> bool {
        false
    }
}

impl<B: http_body::Body, G: Guard> http_body::Body for Guarded<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.project();
        if this.guard.poll_ended(cx) {
            return std::task::Poll::Ready(None);
        }
        this.body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A body of `chunk`, then breaking off with an error or never ending.
    fn body_of(chunk: &'static [u8], then_error: bool) -> Body {
        use futures_util::StreamExt;
        let data = futures_util::stream::once(async move { Ok::<_, BoxError>(Bytes::from_static(chunk)) });
        let end = match then_error {
            true => futures_util::stream::once(async { Err::<Bytes, BoxError>("reset".into()) }).boxed(),
            false => futures_util::stream::pending().boxed(),
        };
        from_stream(data.chain(end))
    }

    #[tokio::test]
    async fn a_body_is_read_whole_within_its_limit_and_time_or_says_why_not() {
        let within = Duration::from_millis(200);
        assert_eq!(read_whole(full("{}"), 2, within).await, Ok(Bytes::from_static(b"{}")));
        assert_eq!(read_whole(full("{}"), 1, within).await, Err(ReadError::TooLarge));
        assert_eq!(
            read_whole(body_of(b"{", false), 10, within).await,
            Err(ReadError::TimedOut)
        );
        assert_eq!(read_whole(body_of(b"{", true), 10, within).await, Err(ReadError::Cut));
    }
}
