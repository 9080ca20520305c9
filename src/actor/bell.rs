//! `Bell`: how a worker waits for its next command. A crossbeam receiver spins and yields before it sleeps
//! (with 1,000 workers on 2 cores a large share of their CPU), so a worker sleeps on its bell, which every send
//! and the last sender's drop ring. A ring while the worker runs is kept for its next wait (as `Thread::unpark`,
//! which needs a std thread; workers are started with pthread, `ffi/thread.rs`).

use std::sync::{Condvar, Mutex, MutexGuard};

/// A wake-up token and whether the worker sleeps.
#[derive(Default)]
pub(crate) struct Bell {
    state: Mutex<State>,
    woken: Condvar,
}

#[derive(Default)]
struct State {
    rung: bool,
    sleeping: bool,
}

impl Bell {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the worker, or makes its next wait return at once.
    pub(crate) fn ring(&self) {
        let mut s = self.lock();
        s.rung = true;
        // A system call only when someone sleeps.
        if s.sleeping {
            drop(s);
            self.woken.notify_one();
        }
    }

    /// Whether a ring waits to be taken.
    #[cfg(test)]
    pub(crate) fn is_rung(&self) -> bool {
        self.lock().rung
    }

    /// Sleeps until rung (at once when rung since the last wait).
    pub(crate) fn wait(&self) {
        let mut s = self.lock();
        while !s.rung {
            s.sleeping = true;
            s = self.woken.wait(s).unwrap_or_else(|e| e.into_inner());
            s.sleeping = false;
        }
        s.rung = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_ring_before_the_wait_is_kept_and_taken_once() {
        let bell = Bell::default();
        bell.ring();
        bell.ring();
        bell.wait();
        assert!(!bell.lock().rung, "one wait takes every ring before it");
    }

    /// Each round the waiter must see the ringer's count: a ring lost between its check and its sleep would
    /// leave it asleep (the test then hangs, caught by its deadline).
    #[test]
    fn no_ring_is_lost_however_it_falls() {
        let bell = Arc::new(Bell::default());
        let count = Arc::new(AtomicUsize::new(0));
        let (b, c) = (Arc::clone(&bell), Arc::clone(&count));
        let waiter = std::thread::spawn(move || {
            let mut seen = 0;
            while seen < 20_000 {
                let now = c.load(Ordering::SeqCst);
                if now == seen {
                    b.wait();
                } else {
                    seen = now;
                }
            }
        });
        for _ in 0..20_000 {
            count.fetch_add(1, Ordering::SeqCst);
            bell.ring();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !waiter.is_finished() {
            assert!(std::time::Instant::now() < deadline, "a ring was lost");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        waiter.join().unwrap();
    }
}
