//! Pacing shared by the channels that multiplex devices (`push.rs`, `mqtt.rs`): token buckets for per-device
//! rates, and the reconnect back-off with jitter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// A token bucket.
pub(crate) struct Bucket {
    pub(crate) tokens: f64,
    at: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    pub(crate) fn new(rate: f64, burst: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
            rate,
            burst,
        }
    }

    pub(crate) fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
    }

    /// Takes a token if there is one.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the next token is there.
    pub(crate) fn next(&self) -> Instant {
        self.holding(1.0)
    }

    /// When it holds `n` tokens.
    pub(crate) fn holding(&self, n: f64) -> Instant {
        let missing = (n - self.tokens).max(0.0);
        self.at + Duration::from_secs_f64(missing / self.rate)
    }
}

/// The wait before reconnect attempt `failures` + 1: `first` doubling up to `cap`, plus up to a quarter more at
/// random (so clients dropped together do not reconnect in step).
pub(crate) fn backoff(
    failures: u32,
    first: Duration,
    cap: Duration,
    jitter: &RandomState,
    salt: u64,
) -> Duration {
    let base = first.saturating_mul(1u32 << failures.min(16)).min(cap);
    let mut h = jitter.build_hasher();
    h.write_u32(failures);
    h.write_u64(salt);
    let quarter = base.as_millis() as u64 / 4;
    base + Duration::from_millis(h.finish() % quarter.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(2.0, 3.0, t0);
        assert!((0..3).all(|_| b.take(t0)));
        assert!(!b.take(t0));
        assert_eq!(b.next(), t0 + Duration::from_millis(500));
        assert!(b.take(t0 + Duration::from_millis(500)));
        assert!(!b.take(t0 + Duration::from_millis(600)));
        let later = t0 + Duration::from_secs(60);
        assert!((0..3).all(|_| b.take(later)), "refilled to its burst");
        assert!(!b.take(later));
    }
}
