//! A watch stream, redacted event by event as it arrives.
//!
//! A watch is newline-delimited JSON. Each complete line is redacted and
//! sent on at once; only the unfinished tail of a frame waits for the next
//! one, so nothing but a single event (at most the response limit) is ever
//! held. An event that cannot be redacted ends the stream with an ERROR
//! event carrying a 502 Status, the way kube-apiserver reports a failed
//! watch; the event and everything after it are never sent.

use crate::body::BoxError;
use crate::secrets::{redact_event, RedactError, Target};
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// A watch response body whose events are redacted one by one.
pub struct RedactedWatch<B> {
    inner: B,
    target: Target,
    /// The longest event held while waiting for its end.
    limit: usize,
    /// The start of an event whose newline has not arrived yet.
    partial: BytesMut,
    /// Bytes read before the stream was known to be a watch.
    read_ahead: Option<Bytes>,
    ended: bool,
}

impl<B> RedactedWatch<B> {
    /// Redact the events of `inner` for `target`; an event longer than
    /// `limit` bytes ends the stream.
    pub fn new(inner: B, target: Target, limit: u64) -> Self {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        RedactedWatch {
            inner,
            target,
            limit,
            partial: BytesMut::new(),
            read_ahead: None,
            ended: false,
        }
    }

    /// Start with `read` (what was read of `inner` before it turned out to
    /// be a watch), then go on with `inner`.
    pub fn after(mut self, read: Bytes) -> Self {
        self.read_ahead = Some(read);
        self
    }

    /// Redact the complete events in `data`, keeping its unfinished tail.
    /// `None` when no event was completed.
    fn feed(&mut self, data: &[u8]) -> Option<Bytes> {
        let mut out = Vec::with_capacity(data.len() + 64);
        let mut rest = data;
        while let Some(end) = super::newline(rest) {
            let (line, after) = (&rest[..end], &rest[end + 1..]);
            rest = after;
            let done = if self.partial.is_empty() {
                self.event(line, &mut out)
            } else {
                self.partial.extend_from_slice(line);
                let whole = std::mem::take(&mut self.partial);
                self.event(&whole, &mut out)
            };
            if let Err(error) = done {
                return Some(self.fail(out, &error));
            }
        }
        if self.partial.len() + rest.len() > self.limit {
            return Some(self.fail(out, &RedactError::TooLarge(self.limit as u64)));
        }
        self.partial.extend_from_slice(rest);
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    /// The stream ended: its last event may lack a newline.
    fn finish(&mut self) -> Option<Bytes> {
        self.ended = true;
        let tail = std::mem::take(&mut self.partial);
        let mut out = Vec::new();
        match self.event(&tail, &mut out) {
            Ok(()) => (!out.is_empty()).then(|| Bytes::from(out)),
            Err(error) => Some(self.fail(out, &error)),
        }
    }

    fn event(&self, line: &[u8], out: &mut Vec<u8>) -> Result<(), RedactError> {
        if line.trim_ascii().is_empty() {
            return Ok(());
        }
        match redact_event(line, self.target)? {
            Some(redacted) => out.extend_from_slice(&redacted),
            None => out.extend_from_slice(line),
        }
        out.push(b'\n');
        Ok(())
    }

    /// End the stream after `out` with an ERROR event.
    fn fail(&mut self, mut out: Vec<u8>, error: &RedactError) -> Bytes {
        tracing::warn!(%error, "a watch of Secrets could not be redacted: stream ended");
        self.ended = true;
        self.partial = BytesMut::new();
        let event = serde_json::json!({"type": "ERROR", "object": super::refusal(error).status()});
        out.extend_from_slice(event.to_string().as_bytes());
        out.push(b'\n');
        Bytes::from(out)
    }
}

impl<B> Body for RedactedWatch<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(read) = this.read_ahead.take() {
                if let Some(out) = this.feed(&read) {
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                continue;
            }
            let data = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => return Poll::Ready(this.finish().map(|out| Ok(Frame::data(out)))),
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
            };
            if let Some(out) = this.feed(&data) {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        // Redaction changes lengths: nothing is known in advance.
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use serde_json::Value;

    const SECRET: &str = r#"{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":"czNjcjN0"}}}"#;

    fn frames(chunks: Vec<Vec<u8>>) -> impl Body<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        let frames = chunks
            .into_iter()
            .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(c))));
        StreamBody::new(futures_util::stream::iter(frames))
    }

    async fn events(chunks: Vec<Vec<u8>>, limit: u64) -> Vec<Value> {
        let body = RedactedWatch::new(frames(chunks), Target::Secrets, limit);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert!(bytes.ends_with(b"\n"), "every event ends with a newline");
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn an_event_split_across_frames_is_redacted_whole() {
        let stream = format!("{SECRET}\n{SECRET}\n");
        let chunks: Vec<Vec<u8>> = stream.as_bytes().chunks(7).map(<[u8]>::to_vec).collect();
        let events = events(chunks, 1 << 20).await;
        assert_eq!(events.len(), 2);
        for event in events {
            assert_eq!(event["object"]["data"]["password"], "<redacted, 6 bytes>");
        }
    }

    #[tokio::test]
    async fn events_are_sent_as_they_complete_not_at_the_end() {
        let mut body = RedactedWatch::new(
            frames(vec![format!("{SECRET}\n{}", &SECRET[..20]).into_bytes()]),
            Target::Secrets,
            1 << 20,
        );
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(first.ends_with(b"\n") && first.windows(8).any(|w| w == b"redacted"));
        assert!(!body.partial.is_empty(), "the unfinished event waits for its end");
    }

    #[tokio::test]
    async fn the_last_event_may_lack_its_newline_and_bookmarks_pass() {
        let bookmark =
            r#"{"type":"BOOKMARK","object":{"kind":"Secret","apiVersion":"v1","metadata":{"resourceVersion":"12"}}}"#;
        let events = events(vec![format!("{bookmark}\n\n{SECRET}").into_bytes()], 1 << 20).await;
        assert_eq!(events[0]["type"], "BOOKMARK");
        assert_eq!(events[0]["object"]["metadata"]["resourceVersion"], "12");
        assert_eq!(events[1]["object"]["data"]["password"], "<redacted, 6 bytes>");
    }

    #[tokio::test]
    async fn a_malformed_event_ends_the_stream_with_an_error_event() {
        let stream = format!("{SECRET}\n{{\"type\":\"ADDED\",\"object\":{{\"data\":\"s3cr3t\"}}}}\n{SECRET}\n");
        let events = events(vec![stream.into_bytes()], 1 << 20).await;
        assert_eq!(events.len(), 2, "nothing after the error is sent: {events:?}");
        assert_eq!(events[1]["type"], "ERROR");
        assert_eq!(
            (
                events[1]["object"]["code"].as_u64(),
                events[1]["object"]["reason"].as_str()
            ),
            (Some(502), Some("BadGateway"))
        );
        assert!(!events[1].to_string().contains("s3cr3t"));
    }

    #[tokio::test]
    async fn an_event_longer_than_the_limit_ends_the_stream() {
        let events = events(
            vec![SECRET.as_bytes()[..60].to_vec(), SECRET.as_bytes()[60..].to_vec()],
            64,
        )
        .await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["type"], "ERROR");
    }
}
