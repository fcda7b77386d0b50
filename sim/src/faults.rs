//! Fault injection: make the simulated cluster fail on purpose.
//!
//! A test adds [`FaultRule`]s; each request is checked against them after it
//! has been recorded and before authentication, so a fault looks like a
//! cluster (or network) failing, whoever asked. A rule may fire a limited
//! number of `times` and is then forgotten.

use crate::body::{self, Body, BoxError};
use crate::status::Status;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// What a matching request gets instead of (or on top of) its answer.
// `Status` is the largest variant; rules are few and cloned rarely.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer this Status (HTTP status = its code).
    Status(Status),
    /// Wait this long, then serve the request normally.
    Delay(Duration),
    /// Serve normally but end the body with an error after `after_bytes`
    /// bytes, so the client sees a broken response.
    CutBody {
        /// Bytes delivered before the cut.
        after_bytes: usize,
    },
    /// Drop the request without answering (HTTP/1.1: the connection is
    /// closed; HTTP/2: the stream is reset).
    CloseConnection,
    /// Serve normally, but without `Content-Length` and in frames of at most
    /// `frame_bytes`, so a client learns the size only by reading to the end
    /// (as with the API server's streamed list encoding).
    Unsized {
        /// Largest frame.
        frame_bytes: usize,
    },
    /// Answer these bytes verbatim.
    Body {
        /// Content-Type header.
        content_type: String,
        /// The body.
        body: Bytes,
        /// HTTP status code.
        code: u16,
    },
}

/// Which requests a fault applies to, and what it does.
#[derive(Debug, Clone)]
pub struct FaultRule {
    /// Only this method (any when `None`).
    pub method: Option<http::Method>,
    /// Only paths starting with this (every path when empty).
    pub path_prefix: String,
    /// Fire at most this many times (forever when `None`).
    pub times: Option<usize>,
    /// What to do.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule firing `action` for every request under `path_prefix`.
    pub fn new(path_prefix: impl Into<String>, action: FaultAction) -> Self {
        FaultRule {
            method: None,
            path_prefix: path_prefix.into(),
            times: None,
            action,
        }
    }

    fn matches(&self, method: &http::Method, path: &str) -> bool {
        self.method.as_ref().is_none_or(|m| m == method) && path.starts_with(&self.path_prefix)
    }
}

/// The active fault rules.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<(u64, FaultRule)>>,
    /// Rule count, read without the lock so requests pay nothing when no
    /// fault is set.
    active: AtomicUsize,
    next_id: AtomicU64,
}

impl Faults {
    /// Add a rule; returns its id for [`Faults::remove`].
    pub fn add(&self, rule: FaultRule) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        rules.push((id, rule));
        self.active.store(rules.len(), Ordering::SeqCst);
        id
    }

    /// Remove the rule `id` (no-op if it is gone).
    pub fn remove(&self, id: u64) {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        rules.retain(|(i, _)| *i != id);
        self.active.store(rules.len(), Ordering::SeqCst);
    }

    /// Remove every rule.
    pub fn clear(&self) {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        rules.clear();
        self.active.store(0, Ordering::SeqCst);
    }

    /// The action of the first rule matching this request, counting it as
    /// fired.
    pub fn check(&self, method: &http::Method, path: &str) -> Option<FaultAction> {
        if self.active.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let index = rules.iter().position(|(_, r)| r.matches(method, path))?;
        let rule = &mut rules[index].1;
        let action = rule.action.clone();
        if let Some(times) = rule.times.as_mut() {
            *times = times.saturating_sub(1);
            if *times == 0 {
                rules.remove(index);
            }
        }
        self.active.store(rules.len(), Ordering::SeqCst);
        Some(action)
    }
}

/// The fault that ended a cut body.
#[derive(Debug, thiserror::Error)]
#[error("fault injection: body cut after {0} bytes")]
pub struct BodyCut(pub usize);

/// `body`, ended with an error after `after_bytes` bytes.
pub fn cut_body(body: Body, after_bytes: usize) -> Body {
    let mut remaining = after_bytes;
    let mut done = false;
    let stream = body.into_data_stream().filter_map(move |chunk| {
        let item = if done {
            None
        } else {
            match chunk {
                Ok(bytes) if bytes.len() < remaining => {
                    remaining -= bytes.len();
                    Some(Ok(bytes))
                }
                Ok(bytes) => {
                    done = true;
                    Some(Ok(bytes.slice(..remaining)))
                }
                Err(e) => Some(Err(e)),
            }
        };
        std::future::ready(item)
    });
    let cut: futures_util::stream::BoxStream<'static, Result<Bytes, BoxError>> = stream
        .chain(futures_util::stream::once(async move {
            Err::<Bytes, BoxError>(Box::new(BodyCut(after_bytes)))
        }))
        .boxed();
    body::from_stream(cut)
}

/// Re-emit `body` in frames of at most `frame_bytes`.
pub fn unsized_body(body: Body, frame_bytes: usize) -> Body {
    let frame_bytes = frame_bytes.max(1);
    let stream = body.into_data_stream().flat_map(move |chunk| {
        let frames: Vec<Result<Bytes, BoxError>> = match chunk {
            Ok(bytes) => (0..bytes.len())
                .step_by(frame_bytes)
                .map(|at| Ok(bytes.slice(at..(at + frame_bytes).min(bytes.len()))))
                .collect(),
            Err(e) => vec![Err(e)],
        };
        futures_util::stream::iter(frames)
    });
    body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_with_times_fires_that_often_then_disappears() {
        let faults = Faults::default();
        let mut rule = FaultRule::new("/api", FaultAction::CloseConnection);
        rule.times = Some(2);
        rule.method = Some(http::Method::GET);
        faults.add(rule);
        assert!(faults.check(&http::Method::POST, "/api/v1").is_none());
        assert!(faults.check(&http::Method::GET, "/apis").is_some());
        assert!(faults.check(&http::Method::GET, "/api/v1").is_some());
        assert!(faults.check(&http::Method::GET, "/api/v1").is_none());
    }

    #[test]
    fn removed_and_cleared_rules_no_longer_fire() {
        let faults = Faults::default();
        let id = faults.add(FaultRule::new("", FaultAction::CloseConnection));
        faults.remove(id);
        assert!(faults.check(&http::Method::GET, "/").is_none());
        faults.add(FaultRule::new("", FaultAction::CloseConnection));
        faults.clear();
        assert!(faults.check(&http::Method::GET, "/").is_none());
    }

    #[tokio::test]
    async fn a_cut_body_delivers_the_bytes_then_fails() {
        let cut = cut_body(body::full("0123456789"), 4);
        let mut stream = cut.into_data_stream();
        let mut got = Vec::new();
        let mut failed = false;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(b) => got.extend_from_slice(&b),
                Err(_) => failed = true,
            }
        }
        assert_eq!(got, b"0123");
        assert!(failed);
    }
}
