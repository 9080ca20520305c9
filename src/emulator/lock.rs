//! `lock`: a mutex's guard even when a thread panicked holding it. The emulator's shared state stays usable
//! after a failed handler: a device must go on answering the tests that made it fail.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking the guard of a poisoned mutex too.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
