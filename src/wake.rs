//! The wake flag: a thread-safe event the library sets when a webhook arrives and the application clears.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A settable, clearable, waitable flag shared between the library and the application. Cheap to clone; clones
/// share the same flag.
#[derive(Clone, Debug, Default)]
pub struct WakeFlag {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl WakeFlag {
    /// A new, cleared flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag and wakes every waiter.
    pub fn set(&self) {
        let (lock, cv) = &*self.inner;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Clears the flag (the application does this after handling events).
    pub fn clear(&self) {
        let (lock, _) = &*self.inner;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// Whether the flag is set.
    pub fn is_set(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the flag is set or `timeout` passes; returns whether it is set.
    pub fn wait(&self, timeout: Duration) -> bool {
        let (lock, cv) = &*self.inner;
        let deadline = Instant::now() + timeout;
        let mut set = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !*set {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            set = cv
                .wait_timeout(set, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_wakes_a_waiter_and_clear_resets() {
        let flag = WakeFlag::new();
        let other = flag.clone();
        let t = std::thread::spawn(move || other.wait(Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(20));
        flag.set();
        assert!(t.join().unwrap());
        flag.clear();
        assert!(!flag.is_set());
        assert!(!flag.wait(Duration::from_millis(10)));
    }
}
