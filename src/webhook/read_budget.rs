//! How many device reads webhook events from one sender may cause: a token bucket per source address. Events
//! are queued regardless (within their device's own event rate, `queue.rs`); only the read of the device they
//! would trigger is skipped when a sender floods.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Reads per second one source may trigger, after a burst of [`BURST`].
pub(crate) const RATE: f64 = 5.0;
/// Reads a quiet source may trigger at once.
pub(crate) const BURST: f64 = 10.0;
/// Sources remembered; beyond this the map starts over (a flood of spoofed-looking sources cannot grow it).
const MAX_SOURCES: usize = 4096;

/// Per-source budgets.
#[derive(Default)]
pub(crate) struct ReadBudget {
    /// Per source: its bucket, and whether the log was already told that it is being limited.
    buckets: Mutex<HashMap<IpAddr, (TokenBucket, bool)>>,
}

/// A token bucket: up to `burst` at once, refilled at `rate` per second. Also the event queue's per-device
/// limit, so both budgets count the same way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokenBucket {
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A bucket holding a whole burst at `now`.
    pub(crate) fn full(burst: f64, now: Instant) -> Self {
        TokenBucket {
            tokens: burst,
            at: now,
        }
    }

    /// Refills for the time since the last call, then takes a token if there is one.
    pub(crate) fn take(&mut self, now: Instant, rate: f64, burst: f64) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.at = self.at.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        false
    }
}

impl ReadBudget {
    /// Whether an event from `source` at `now` may trigger a device read; takes a token if so.
    pub(crate) fn allow(&self, source: IpAddr, now: Instant) -> bool {
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() >= MAX_SOURCES && !b.contains_key(&source) {
            b.clear();
        }
        let (bucket, warned) = b
            .entry(source)
            .or_insert((TokenBucket::full(BURST, now), false));
        if bucket.take(now, RATE, BURST) {
            return true;
        }
        if !std::mem::replace(warned, true) {
            log::info!(
                "webhook events from {source} arrive faster than {RATE} per second: the device reads they trigger are limited (the events are still queued, within each device's rate of events)"
            );
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_the_rate_per_source() {
        let budget = ReadBudget::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t = Instant::now();
        let allowed = (0..100).filter(|_| budget.allow(a, t)).count();
        assert_eq!(allowed, BURST as usize);
        // Another sender is not affected.
        assert!(budget.allow(b, t));
        // One second later, RATE more.
        let later = t + Duration::from_secs(1);
        let allowed = (0..100).filter(|_| budget.allow(a, later)).count();
        assert_eq!(allowed, RATE as usize);
    }
}
