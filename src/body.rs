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
