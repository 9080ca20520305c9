//! How many device reads webhook events from one sender may cause: a token bucket per source address. Events
//! are always queued; only the read of the device they would trigger is skipped when a sender floods.

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
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    /// Already told the log that this source is being limited.
    warned: bool,
}

impl ReadBudget {
    /// Whether an event from `source` at `now` may trigger a device read; takes a token if so.
    pub(crate) fn allow(&self, source: IpAddr, now: Instant) -> bool {
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() >= MAX_SOURCES && !b.contains_key(&source) {
            b.clear();
        }
        let bucket = b.entry(source).or_insert(Bucket {
            tokens: BURST,
            at: now,
            warned: false,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * RATE).min(BURST);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return true;
        }
        if !std::mem::replace(&mut bucket.warned, true) {
            log::info!(
                "webhook events from {source} arrive faster than {RATE} per second: the device reads they trigger are limited (the events are still queued)"
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
