//! The time grants are judged by, shared by everything that judges them
//! (the policy stage, which sends a grant's group, and the reconciler,
//! which binds it), so that both see a grant expire at the same moment.

use chrono::{DateTime, TimeDelta, Utc};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The system clock, unless moved ahead. Only tests move it, to see a grant
/// expire without waiting out its lifetime; nothing in portcullis does.
/// Clones share one clock.
#[derive(Debug, Clone, Default)]
pub struct GrantClock {
    ahead_ms: Arc<AtomicI64>,
    moved: Arc<Notify>,
}

impl GrantClock {
    /// Now, as grants are judged.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + TimeDelta::milliseconds(self.ahead_ms.load(Ordering::Relaxed))
    }

    /// Move this clock `by` further ahead of the system clock, and wake
    /// whoever waits for a grant to expire.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let _ = self
            .ahead_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |ahead| {
                Some(ahead.saturating_add(by))
            });
        self.moved.notify_waiters();
    }

    /// Resolves when the clock is next moved ahead. It counts from when it
    /// is called, not when it is first polled: take it before reading
    /// [`Self::now`] for a wait, and no move in between is missed.
    pub fn moved(&self) -> tokio::sync::futures::Notified<'_> {
        self.moved.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn moving_the_clock_ahead_is_seen_by_every_clone_and_wakes_a_waiter_taken_before() {
        let clock = GrantClock::default();
        let shared = clock.clone();
        let moved = shared.moved();
        let before = shared.now();
        clock.advance(Duration::from_secs(3600));
        tokio::time::timeout(Duration::from_secs(5), moved)
            .await
            .expect("the waiter is woken by the move");
        assert!(shared.now() - before >= TimeDelta::hours(1));
    }
}
