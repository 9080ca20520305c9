//! One answer awaited by one thread: the waiter parks on a condvar at once (a channel's blocking receive spins
//! and yields first, which with 1,000 workers on 2 cores was a large share of their CPU). Used by the push
//! tunnel and the MQTT channel.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Where one answer goes: `Some(Some(x))` answered, `Some(None)` the channel ended first.
pub(crate) struct Answer<T> {
    slot: Mutex<Option<Option<T>>>,
    ready: Condvar,
}

impl<T> Default for Answer<T> {
    fn default() -> Self {
        Answer {
            slot: Mutex::new(None),
            ready: Condvar::new(),
        }
    }
}

impl<T> Answer<T> {
    /// The answer (`None`: the channel ended); only the first one counts.
    pub(crate) fn put(&self, value: Option<T>) {
        let mut g = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(value);
            self.ready.notify_one();
        }
    }

    /// The answer (`None`: the channel ended), or `Err` when `timeout` passed first.
    pub(crate) fn wait(&self, timeout: Duration) -> Result<Option<T>, ()> {
        let g = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        let (mut g, _) = self
            .ready
            .wait_timeout_while(g, timeout, |s| s.is_none())
            .unwrap_or_else(|e| e.into_inner());
        g.take().ok_or(())
    }
}
