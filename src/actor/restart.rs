//! When a worker whose driver panicked gets a fresh driver: after a back-off that doubles with each panic in a
//! row (1 s, 2 s, 4 s … capped), so a driver that panics on every answer never spins.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first wait after a panic.
const FIRST: Duration = Duration::from_secs(1);
/// The longest wait between restarts.
const CAP: Duration = Duration::from_secs(300);

/// A source of "now", injectable so tests step time instead of sleeping.
pub(crate) type Now = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The real clock.
pub(crate) fn real_now() -> Now {
    Arc::new(Instant::now)
}

/// Restart state of one worker.
pub(crate) struct Backoff {
    now: Now,
    /// The wait after the next panic.
    next_delay: Duration,
    /// While failed: when a restart may happen and why it failed.
    failed: Option<(Instant, String)>,
}

/// What the worker should do with a command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// The driver is healthy: run it.
    Run,
    /// The back-off has passed: build a fresh driver, then run it.
    Restart,
    /// Still waiting: answer with this failure (the panic message and the remaining wait).
    Wait(String),
}

impl Backoff {
    /// A healthy worker.
    pub(crate) fn new(now: Now) -> Self {
        Backoff {
            now,
            next_delay: FIRST,
            failed: None,
        }
    }

    /// Records a panic; returns the wait before the restart.
    pub(crate) fn panicked(&mut self, message: String) -> Duration {
        let delay = self.next_delay;
        self.next_delay = (delay * 2).min(CAP);
        self.failed = Some(((self.now)() + delay, message));
        delay
    }

    /// Records a successful operation: the next panic waits the first delay again.
    pub(crate) fn succeeded(&mut self) {
        if self.failed.is_none() {
            self.next_delay = FIRST;
        }
    }

    /// Whether a restart is allowed now.
    pub(crate) fn gate(&mut self) -> Gate {
        match &self.failed {
            None => Gate::Run,
            Some((at, message)) => {
                let now = (self.now)();
                if now >= *at {
                    self.failed = None;
                    Gate::Restart
                } else {
                    let left = at.saturating_duration_since(now);
                    Gate::Wait(format!(
                        "{message} (an internal error, please report it; the driver restarts in {:.1} s)",
                        left.as_secs_f64()
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A clock tests move by hand.
    pub(crate) fn manual() -> (Now, Arc<Mutex<Instant>>) {
        let t = Arc::new(Mutex::new(Instant::now()));
        let read = t.clone();
        (Arc::new(move || *read.lock().unwrap()), t)
    }

    #[test]
    fn waits_double_per_panic_in_a_row_are_capped_and_reset_by_success() {
        let (now, t) = manual();
        let mut b = Backoff::new(now);
        assert_eq!(b.gate(), Gate::Run);
        assert_eq!(b.panicked("boom".into()), FIRST);
        assert!(matches!(b.gate(), Gate::Wait(m) if m.contains("boom") && m.contains("1.0 s")));
        *t.lock().unwrap() += Duration::from_millis(999);
        assert!(matches!(b.gate(), Gate::Wait(_)));
        *t.lock().unwrap() += Duration::from_millis(1);
        assert_eq!(b.gate(), Gate::Restart);
        assert_eq!(b.gate(), Gate::Run);
        // It panics again before any success: the wait doubles, up to the cap.
        let waits: Vec<_> = (0..12).map(|_| b.panicked("x".into())).collect();
        assert_eq!(waits[0], Duration::from_secs(2));
        assert_eq!(waits[1], Duration::from_secs(4));
        assert_eq!(*waits.last().unwrap(), CAP);
        // A success after a restart starts over.
        *t.lock().unwrap() += CAP;
        assert_eq!(b.gate(), Gate::Restart);
        b.succeeded();
        assert_eq!(b.panicked("y".into()), FIRST);
    }
}
