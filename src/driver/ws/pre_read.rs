//! What wakes a worker for a status read sent before it runs (`Controller::refresh_all`, `tunnel.rs`
//! `PreRead`): the caller writes every device's `Shelly.GetStatus` over its push connection and queues the
//! worker's command without waking it; the answer's arrival wakes the worker, once, with the answer in hand.
//! The worker still decides what the answer means.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Wakes the worker once: when the answer came, but never before its command is in its inbox (a wake-up
/// before it would find nothing to do, and the command would then wait unwoken).
pub(crate) struct Wake {
    state: AtomicU8,
    ring: Box<dyn Fn() + Send + Sync>,
}

const IDLE: u8 = 0;
const ARMED: u8 = 1;
const FIRED_EARLY: u8 = 2;

impl Wake {
    pub(crate) fn new(ring: Box<dyn Fn() + Send + Sync>) -> Arc<Wake> {
        Arc::new(Wake {
            state: AtomicU8::new(IDLE),
            ring,
        })
    }

    /// The answer came (or the request ended without one).
    pub(crate) fn fire(&self) {
        if self
            .state
            .compare_exchange(IDLE, FIRED_EARLY, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            (self.ring)();
        }
    }

    /// The command is in the worker's inbox: from now on the answer wakes it (at once if it came already).
    pub(crate) fn arm(&self) {
        if self.state.swap(ARMED, Ordering::AcqRel) == FIRED_EARLY {
            (self.ring)();
        }
    }

    /// Wakes the worker now (no answer within the timeout: it gives the read up as over the socket).
    pub(crate) fn ring_now(&self) {
        (self.ring)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn counted() -> (Arc<Wake>, Arc<AtomicUsize>) {
        let rings = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&rings);
        let wake = Wake::new(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        (wake, rings)
    }

    /// One ring, however the answer and the queued command fall: the answer first rings at the arming, the
    /// command first rings at the answer.
    #[test]
    fn the_worker_is_woken_once_after_its_command_is_queued() {
        let (wake, rings) = counted();
        wake.fire();
        assert_eq!(rings.load(Ordering::SeqCst), 0, "not before the command");
        wake.arm();
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        let (wake, rings) = counted();
        wake.arm();
        assert_eq!(rings.load(Ordering::SeqCst), 0, "no answer yet");
        wake.fire();
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        // From two threads at once: exactly one ring.
        for _ in 0..2_000 {
            let (wake, rings) = counted();
            let w = Arc::clone(&wake);
            let t = std::thread::spawn(move || w.fire());
            wake.arm();
            t.join().unwrap();
            assert_eq!(rings.load(Ordering::SeqCst), 1);
        }
    }
}
