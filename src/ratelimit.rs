//! Token buckets by key: `/mcp`'s per agent (all its credentials: an OAuth
//! session makes one at each refresh), checked before the request body is
//! read; the OAuth endpoints' and the sign-in pages' per address or client;
//! failed authentications per address (`identity::authenticate`).
//!
//! A full bucket is the same as no bucket, so those are what a sweep drops.
//! Keys may be named by a client (an OAuth `client_id`, an address): a
//! bucket keeps only a keyed 64-bit digest of its key, so a long key costs
//! no more than a short one, and the map stays bounded by the sweep.

use dashmap::DashMap;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

/// Sweep the map when it holds more buckets than this.
const SWEEP_ABOVE: usize = 4096;

/// Token buckets, one per key (an agent, an address, a client).
#[derive(Debug)]
pub struct RateLimiter {
    /// Tokens added per second.
    rate: f64,
    /// Bucket size.
    burst: f64,
    buckets: DashMap<u64, Bucket>,
    /// Keys to digests, under a seed of this process's own (SipHash): no
    /// client can make two keys share a bucket.
    digest: std::collections::hash_map::RandomState,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// `per_minute` sustained, `burst` at once (each at least 1).
    pub fn new(per_minute: u32, burst: u32) -> Self {
        RateLimiter {
            rate: f64::from(per_minute.max(1)) / 60.0,
            burst: f64::from(burst.max(1)),
            buckets: DashMap::new(),
            digest: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Take one token for `key`, or say how long until one is there.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        self.check_at(key, Instant::now())
    }

    /// Give back the token taken for `key` by a [`Self::check`] that turned
    /// out not to count (the request it held room for was a good one).
    pub fn refund(&self, key: &str) {
        if let Some(mut bucket) = self.buckets.get_mut(&self.digest.hash_one(key)) {
            bucket.tokens = (bucket.tokens + 1.0).min(self.burst);
        }
    }

    fn check_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        if self.buckets.len() > SWEEP_ABOVE {
            self.sweep(now);
        }
        let mut bucket = self.buckets.entry(self.digest.hash_one(key)).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let refilled = self.refilled(&bucket, now);
        bucket.at = now;
        if refilled >= 1.0 {
            bucket.tokens = refilled - 1.0;
            Ok(())
        } else {
            bucket.tokens = refilled;
            Err(Duration::from_secs_f64((1.0 - refilled) / self.rate))
        }
    }

    /// `bucket`'s tokens at `now`.
    fn refilled(&self, bucket: &Bucket, now: Instant) -> f64 {
        (bucket.tokens + now.saturating_duration_since(bucket.at).as_secs_f64() * self.rate).min(self.burst)
    }

    fn sweep(&self, now: Instant) {
        self.buckets.retain(|_, b| self.refilled(b, now) < self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_allowed_then_refused_until_tokens_refill() {
        let limiter = RateLimiter::new(60, 3);
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiter.check_at("c1", start).is_ok());
        }
        let wait = limiter.check_at("c1", start).unwrap_err();
        assert!(
            wait <= Duration::from_secs(1) && wait > Duration::from_millis(900),
            "{wait:?}"
        );
        assert!(
            limiter.check_at("c2", start).is_ok(),
            "another credential has its own bucket"
        );
        assert!(
            limiter.check_at("c1", start + Duration::from_millis(1100)).is_ok(),
            "one token a second"
        );
        assert!(limiter.check_at("c1", start + Duration::from_millis(1200)).is_err());
    }

    #[test]
    fn a_refunded_token_is_there_again_and_never_past_the_burst() {
        let limiter = RateLimiter::new(60, 2);
        let start = Instant::now();
        limiter.check_at("a", start).unwrap();
        limiter.check_at("a", start).unwrap();
        assert!(limiter.check_at("a", start).is_err());
        limiter.refund("a");
        assert!(limiter.check_at("a", start).is_ok(), "given back");
        for _ in 0..5 {
            limiter.refund("a");
        }
        limiter.check_at("a", start).unwrap();
        limiter.check_at("a", start).unwrap();
        assert!(limiter.check_at("a", start).is_err(), "no more than the burst");
        limiter.refund("unknown");
        assert!(!limiter.buckets.contains_key(&limiter.digest.hash_one("unknown")));
    }

    #[test]
    fn a_sweep_drops_only_full_buckets() {
        let limiter = RateLimiter::new(60, 2);
        let start = Instant::now();
        limiter.check_at("busy", start).unwrap();
        limiter.check_at("quiet", start).unwrap();
        limiter.sweep(start + Duration::from_secs(10));
        assert!(limiter.buckets.is_empty(), "both refilled");
        limiter.check_at("busy", start).unwrap();
        limiter.sweep(start);
        assert_eq!(limiter.buckets.len(), 1);
    }

    #[test]
    fn a_long_key_has_its_bucket_and_another_key_its_own() {
        let limiter = RateLimiter::new(60, 1);
        let start = Instant::now();
        let long = "c".repeat(64 * 1024);
        assert!(limiter.check_at(&long, start).is_ok());
        assert!(limiter.check_at(&long, start).is_err(), "the same key, the same bucket");
        assert!(limiter.check_at(&long[1..], start).is_ok(), "another key, its own");
    }
}
