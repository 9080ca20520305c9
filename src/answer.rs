//! One answer awaited by one thread: the waiter parks on a condvar at once (a channel's blocking receive spins
//! and yields first, which with 1,000 workers on 2 cores was a large share of their CPU). Used by the push
//! tunnel and the MQTT channel.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Where one answer goes.
pub(crate) struct Answer<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    slot: Slot<T>,
    /// Someone waits on the condvar: only then does an answer cost a system call to wake it (one waiting
    /// for its bell instead, `driver/ws/pre_read.rs`, is woken by that).
    waiting: bool,
}

/// Whether the answer came, and whether the waiter took it.
enum Slot<T> {
    Waiting,
    /// `Some(x)` answered, `None` the channel ended first.
    Ready(Option<T>),
    /// Taken: a later `put` (the request's own end, after its answer) neither counts nor wakes anyone.
    Taken,
}

impl<T> Default for Answer<T> {
    fn default() -> Self {
        Answer {
            state: Mutex::new(State {
                slot: Slot::Waiting,
                waiting: false,
            }),
            ready: Condvar::new(),
        }
    }
}

impl<T> Answer<T> {
    /// The answer (`None`: the channel ended); only the first one counts (true when this one did).
    pub(crate) fn put(&self, value: Option<T>) -> bool {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Slot::Waiting = g.slot {
            g.slot = Slot::Ready(value);
            let waiting = g.waiting;
            // Unlocked first: a waiter woken while the lock is still held sleeps again on the lock (a futex
            // wait and wake, and a context switch, more per answer). It finds the answer under the lock either
            // way, so no wake-up is lost.
            drop(g);
            if waiting {
                self.ready.notify_one();
            }
            return true;
        }
        false
    }

    /// The answer (`None`: the channel ended), or `Err` when `timeout` passed first (or it was taken).
    pub(crate) fn wait(&self, timeout: Duration) -> Result<Option<T>, ()> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Set under the lock the wait releases: an answer put after this sees it.
        g.waiting = true;
        let (mut g, _) = self
            .ready
            .wait_timeout_while(g, timeout, |s| matches!(s.slot, Slot::Waiting))
            .unwrap_or_else(|e| e.into_inner());
        g.waiting = false;
        match std::mem::replace(&mut g.slot, Slot::Taken) {
            Slot::Ready(v) => Ok(v),
            Slot::Waiting => {
                g.slot = Slot::Waiting;
                Err(())
            }
            Slot::Taken => Err(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// However the answer and the wait fall (the answer before the wait, during it, at once after a wake-up),
    /// the waiter gets it. A lost wake-up would leave the waiter asleep for its hour-long timeout: the test then
    /// hangs, caught by its deadline.
    #[test]
    fn every_answer_reaches_its_waiter() {
        for round in 0..2_000u32 {
            let answer = Arc::new(Answer::default());
            let putter = {
                let a = Arc::clone(&answer);
                std::thread::spawn(move || {
                    if round % 3 == 0 {
                        std::thread::yield_now();
                    }
                    a.put(Some(round));
                })
            };
            assert_eq!(answer.wait(Duration::from_secs(3600)), Ok(Some(round)));
            putter.join().unwrap();
        }
        let ended = Answer::<u32>::default();
        ended.put(None);
        // Only the first answer counts.
        ended.put(Some(1));
        assert_eq!(ended.wait(Duration::from_secs(3600)), Ok(None));
        let unanswered = Answer::<u32>::default();
        assert_eq!(unanswered.wait(Duration::from_millis(1)), Err(()));
        // Still open after a timeout: a late answer is kept for the next wait.
        unanswered.put(Some(2));
        assert_eq!(unanswered.wait(Duration::from_secs(3600)), Ok(Some(2)));
        // Once taken, a later put (the request's end) changes nothing.
        unanswered.put(None);
        assert!(matches!(unanswered.state.lock().unwrap().slot, Slot::Taken));
    }
}
