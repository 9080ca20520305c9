//! Which controller a log record belongs to.
//!
//! The `log` crate has one logger per process, but the C API gives each controller its own log callback. So
//! every thread carries an optional scope: a controller's worker, supervisor and webhook threads inherit the
//! scope of the thread that opened it (they are started through [`spawn`]), and the C API enters a
//! controller's scope on the caller's thread for the length of each call. The process-wide logger
//! (`ffi/log.rs`) reads [`current`] to route each record. The Rust API never enters a scope, so for it nothing
//! changes.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::{Builder, JoinHandle};

/// One controller's log scope. Never reused within a process, so a stale ID cannot reach a newer controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ScopeId(u64);

impl ScopeId {
    /// A scope no thread has carried yet.
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ScopeId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

thread_local! {
    static CURRENT: Cell<Option<ScopeId>> = const { Cell::new(None) };
}

/// The scope of the calling thread (`None` outside every controller, and while the thread shuts down).
pub(crate) fn current() -> Option<ScopeId> {
    CURRENT.try_with(Cell::get).ok().flatten()
}

/// The calling thread's records belong to a scope until this is dropped; then the previous scope is back.
/// Not `Send`: it must be dropped on the thread that entered.
#[must_use = "the scope ends when this is dropped"]
pub(crate) struct Entered {
    previous: Option<ScopeId>,
    _same_thread: PhantomData<*const ()>,
}

/// Makes `scope` the calling thread's scope (`None`: no scope) until the result is dropped.
pub(crate) fn enter(scope: Option<ScopeId>) -> Entered {
    let previous = CURRENT.try_with(|c| c.replace(scope)).ok().flatten();
    Entered {
        previous,
        _same_thread: PhantomData,
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.previous));
    }
}

/// Starts a thread that carries the calling thread's scope for its whole life. Every thread a controller
/// starts goes through here (or, for the workers started with pthread, [`carry`]), so its records reach that
/// controller's log sink.
pub(crate) fn spawn<F, T>(builder: Builder, f: F) -> std::io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    builder.spawn(carry(f))
}

/// `f`, to run on another thread in the calling thread's scope (for threads started without `spawn`).
pub(crate) fn carry<F, T>(f: F) -> impl FnOnce() -> T + Send + 'static
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let scope = current();
    move || {
        let _in = enter(scope);
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_ends_with_its_guard_and_nests() {
        let (a, b) = (ScopeId::new(), ScopeId::new());
        assert_ne!(a, b);
        assert_eq!(current(), None);
        {
            let _a = enter(Some(a));
            assert_eq!(current(), Some(a));
            {
                let _b = enter(Some(b));
                assert_eq!(current(), Some(b));
                let _none = enter(None);
                assert_eq!(current(), None);
            }
            assert_eq!(current(), Some(a));
        }
        assert_eq!(current(), None);
    }

    #[test]
    fn threads_started_through_spawn_inherit_the_scope_and_others_do_not() {
        let s = ScopeId::new();
        let _in = enter(Some(s));
        let inherited = spawn(Builder::new(), current).unwrap().join().unwrap();
        assert_eq!(inherited, Some(s));
        let plain = std::thread::spawn(current).join().unwrap();
        assert_eq!(plain, None);
    }
}
