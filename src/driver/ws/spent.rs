//! Statuses the poller parsed go back to it to be freed. glibc keeps up to seven freed blocks of each size in
//! a cache per thread: a worker that freed the poller's parsed status kept about 4 KiB of the poller's blocks
//! for good (1,000 workers, 4 MiB), and freed the rest into the poller's arena under its lock. Freed on the
//! poller, they land in its one cache and are reused by its next parse (`bench_push`: RSS after a
//! `refresh_all` 43 → 39 KiB per device).

use std::sync::Mutex;

use serde_json::Value;

/// Values waiting are freed at the poller's next turn; this many wake it (a turn may be seconds away).
const WAKE_AT: usize = 64;
/// Beyond this many waiting, a value is freed where it is (a poller that stopped turning holds no more).
const MAX_WAITING: usize = 4096;

/// The poller's queue of values to free.
pub(crate) struct Spent {
    values: Mutex<Vec<Value>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl Spent {
    /// A queue whose `wake` wakes the poller that drains it.
    pub(crate) fn new(wake: Box<dyn Fn() + Send + Sync>) -> Spent {
        Spent {
            values: Mutex::new(Vec::new()),
            wake,
        }
    }

    /// A worker is done with `value`: the poller frees it.
    pub(crate) fn give(&self, value: Value) {
        let Ok(mut waiting) = self.values.lock() else {
            return;
        };
        if waiting.len() >= MAX_WAITING {
            drop(waiting);
            drop(value);
            return;
        }
        waiting.push(value);
        if waiting.len() == WAKE_AT {
            drop(waiting);
            (self.wake)();
        }
    }

    /// The poller: frees every value waiting (outside the lock, so no worker waits on the freeing).
    pub(crate) fn drain(&self) {
        let taken = match self.values.lock() {
            Ok(mut waiting) if !waiting.is_empty() => std::mem::take(&mut *waiting),
            _ => return,
        };
        drop(taken);
    }

    /// How many wait (for tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.values.lock().map_or(0, |w| w.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting() -> (Spent, Arc<AtomicUsize>) {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let spent = Spent::new(Box::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        (spent, wakes)
    }

    #[test]
    fn values_wait_for_the_drain_and_the_poller_is_woken_once_at_the_mark() {
        let (spent, wakes) = counting();
        for i in 0..WAKE_AT - 1 {
            spent.give(serde_json::json!({ "i": i }));
        }
        assert_eq!(spent.waiting(), WAKE_AT - 1);
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            0,
            "below the mark: no wake-up"
        );
        spent.give(Value::Null);
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "the mark wakes the poller");
        spent.give(Value::Null);
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "once per fill");
        spent.drain();
        assert_eq!(spent.waiting(), 0);
        for _ in 0..WAKE_AT {
            spent.give(Value::Null);
        }
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            2,
            "the next fill wakes it again"
        );
    }

    #[test]
    fn a_poller_that_stopped_draining_holds_no_more_than_the_bound() {
        let (spent, _) = counting();
        for _ in 0..MAX_WAITING + 100 {
            spent.give(serde_json::json!([1, 2, 3]));
        }
        assert_eq!(spent.waiting(), MAX_WAITING);
    }
}
