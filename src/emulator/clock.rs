//! The emulator's clock: the real one by default, or a manual one a test moves with [`EmuClock::advance`], so
//! energy growth, uptime, nonce lifetimes and throttle windows are tested by stepping time, not by sleeping.
//! Network behaviour (latency, faults) always runs on real time: it is about sockets.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A clock handed to [`super::Emulator::start_with_clock`]; clones share the same time.
#[derive(Clone, Debug)]
pub struct EmuClock(Option<Arc<Mutex<Manual>>>);

#[derive(Debug)]
struct Manual {
    instant: Instant,
    unix: f64,
}

impl Default for EmuClock {
    fn default() -> Self {
        Self::real()
    }
}

impl EmuClock {
    /// The wall clock.
    pub fn real() -> Self {
        EmuClock(None)
    }

    /// A clock that starts at the current time and moves only when [`EmuClock::advance`] is called.
    pub fn manual() -> Self {
        EmuClock(Some(Arc::new(Mutex::new(Manual {
            instant: Instant::now(),
            unix: crate::clock::unix_now(),
        }))))
    }

    /// Moves a manual clock forward by `by`; returns false (and does nothing) for the real clock.
    pub fn advance(&self, by: Duration) -> bool {
        match &self.0 {
            Some(m) => {
                let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
                m.instant += by;
                m.unix += by.as_secs_f64();
                true
            }
            None => false,
        }
    }

    /// Now, for durations (nonce lifetimes, throttle windows).
    pub(crate) fn instant(&self) -> Instant {
        match &self.0 {
            Some(m) => m.lock().unwrap_or_else(|e| e.into_inner()).instant,
            None => Instant::now(),
        }
    }

    /// Now, in Unix seconds (energy, uptime, reported times).
    pub(crate) fn unix(&self) -> f64 {
        match &self.0 {
            Some(m) => m.lock().unwrap_or_else(|e| e.into_inner()).unix,
            None => crate::clock::unix_now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let c = EmuClock::manual();
        let other = c.clone();
        let (i, u) = (c.instant(), c.unix());
        assert_eq!((c.instant(), c.unix()), (i, u));
        assert!(other.advance(Duration::from_millis(1500)));
        assert_eq!(c.instant(), i + Duration::from_millis(1500));
        assert!((c.unix() - u - 1.5).abs() < 1e-9);
        assert!(!EmuClock::real().advance(Duration::from_secs(1)));
    }
}
