//! Forwards log records to C callbacks (better than stderr inside Go or Python hosts).
//!
//! Two kinds of callback: one per controller (`sd_open_options.log_callback`) and one for the process
//! (`sd_set_log_callback`). The `log` crate allows one logger per process, so ours routes each record by the
//! calling thread's log scope (`crate::log_scope`): a record from a thread of a controller that has a callback
//! goes to that callback only; every other record goes to the process-wide callback, if any. Removing a
//! callback waits for calls in progress, so once removal returns the callback is never called again.

use std::collections::HashMap;
use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use crate::log_scope::ScopeId;

/// Receives one log record: the caller's `user` pointer, the level (`SD_LOG_ERROR` … `SD_LOG_TRACE`) and the
/// message (UTF-8, NUL-terminated, valid only during the call). Called from any library thread, possibly
/// concurrently: it must be thread-safe and must not call back into the library.
pub type sd_log_callback =
    Option<unsafe extern "C" fn(user: *mut c_void, level: c_int, message: *const c_char)>;

/// Log level: errors.
pub const SD_LOG_ERROR: c_int = 1;
/// Log level: warnings.
pub const SD_LOG_WARN: c_int = 2;
/// Log level: summary information.
pub const SD_LOG_INFO: c_int = 3;
/// Log level: detailed operations.
pub const SD_LOG_DEBUG: c_int = 4;
/// Log level: everything.
pub const SD_LOG_TRACE: c_int = 5;

#[derive(Clone, Copy)]
struct Target {
    callback: unsafe extern "C" fn(*mut c_void, c_int, *const c_char),
    /// The caller's pointer, kept as an address: the library never dereferences it.
    user: usize,
    max: log::LevelFilter,
}

/// One callback slot. Delivery holds the read lock for the length of the call, so clearing (write lock) waits
/// for calls in progress.
#[derive(Default)]
struct Sink {
    target: RwLock<Option<Target>>,
}

impl Sink {
    fn set(&self, t: Option<Target>) {
        *self.target.write().unwrap_or_else(|e| e.into_inner()) = t;
    }

    fn max(&self) -> log::LevelFilter {
        let t = self.target.read().unwrap_or_else(|e| e.into_inner());
        t.map_or(log::LevelFilter::Off, |t| t.max)
    }

    fn deliver(&self, record: &log::Record) {
        let t = self.target.read().unwrap_or_else(|e| e.into_inner());
        let Some(t) = t.as_ref().filter(|t| record.level() <= t.max) else {
            return;
        };
        // One record, one line, no NUL: text from devices and requests may carry anything.
        let text = crate::text::escape_controls(&record.args().to_string()).into_owned();
        if let Ok(c) = CString::new(text) {
            // SAFETY: the caller registered this function for exactly this signature, and it stays callable
            // until its removal returns, which waits for this read lock; the message lives until the call
            // returns.
            unsafe {
                (t.callback)(
                    t.user as *mut c_void,
                    level_number(record.level()),
                    c.as_ptr(),
                )
            };
        }
    }
}

/// The process's logger: the process-wide sink plus one sink per controller that has a callback.
#[derive(Default)]
struct Router {
    global: Sink,
    scoped: RwLock<HashMap<ScopeId, Arc<Sink>>>,
}

static ROUTER: LazyLock<Router> = LazyLock::new(Router::default);

/// Whether `ROUTER` is the process's `log` logger.
static OURS: AtomicBool = AtomicBool::new(false);

impl Router {
    /// The sink a record of the calling thread belongs to.
    fn sink_here(&self) -> Option<Arc<Sink>> {
        let scope = crate::log_scope::current()?;
        let scoped = self.scoped.read().unwrap_or_else(|e| e.into_inner());
        scoped.get(&scope).cloned()
    }

    /// The highest level any sink wants (what `log::set_max_level` should let through).
    fn max(&self) -> log::LevelFilter {
        let scoped = self.scoped.read().unwrap_or_else(|e| e.into_inner());
        scoped
            .values()
            .map(|s| s.max())
            .fold(self.global.max(), std::cmp::max)
    }
}

/// Only the library's own records: dependencies' threads (ureq's resolver threads) may log after
/// sd_close returns, when the host may already be shutting down.
fn ours(m: &log::Metadata) -> bool {
    m.target().starts_with("smartdev")
}

impl log::Log for Router {
    fn enabled(&self, m: &log::Metadata) -> bool {
        if !ours(m) {
            return false;
        }
        let max = match self.sink_here() {
            Some(s) => s.max(),
            None => self.global.max(),
        };
        m.level() <= max
    }

    fn log(&self, record: &log::Record) {
        if !ours(record.metadata()) {
            return;
        }
        match self.sink_here() {
            Some(s) => s.deliver(record),
            None => self.global.deliver(record),
        }
    }

    fn flush(&self) {}
}

fn level_number(l: log::Level) -> c_int {
    match l {
        log::Level::Error => SD_LOG_ERROR,
        log::Level::Warn => SD_LOG_WARN,
        log::Level::Info => SD_LOG_INFO,
        log::Level::Debug => SD_LOG_DEBUG,
        log::Level::Trace => SD_LOG_TRACE,
    }
}

fn level_filter(level: c_int) -> log::LevelFilter {
    match level {
        i if i <= 0 => log::LevelFilter::Off,
        SD_LOG_ERROR => log::LevelFilter::Error,
        SD_LOG_WARN => log::LevelFilter::Warn,
        SD_LOG_INFO => log::LevelFilter::Info,
        SD_LOG_DEBUG => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

/// Makes our router the process's `log` logger; false when another logger owns the slot.
fn claim() -> bool {
    if OURS.load(Ordering::SeqCst) || log::set_logger(&*ROUTER).is_ok() {
        OURS.store(true, Ordering::SeqCst);
        true
    } else {
        false
    }
}

/// Lets through what the sinks want now (only when the slot is ours: another logger keeps its own level).
fn update_max_level() {
    if OURS.load(Ordering::SeqCst) {
        log::set_max_level(ROUTER.max());
    }
}

/// Sets the process-wide callback up to `level` (1 error … 5 trace; 0 or no callback turns it off). Returns
/// false when another logger already owns the process-wide slot. Once this returns, a previous callback is
/// never called again.
pub(crate) fn install(callback: sd_log_callback, user: *mut c_void, level: c_int) -> bool {
    let Some(callback) = callback else {
        ROUTER.global.set(None);
        update_max_level();
        return true;
    };
    if !claim() {
        return false;
    }
    ROUTER.global.set(Some(Target {
        callback,
        user: user as usize,
        max: level_filter(level),
    }));
    update_max_level();
    true
}

/// A controller's own callback, installed for its scope until this is dropped. Dropping waits for calls in
/// progress: afterwards the callback is never called again.
pub(crate) struct Registration {
    scope: ScopeId,
    sink: Arc<Sink>,
}

/// Sends the records of `scope` to `callback` (and no longer to the process-wide one). `None` when another
/// logger owns the process, so the callback could never be called.
pub(crate) fn register(
    scope: ScopeId,
    callback: unsafe extern "C" fn(*mut c_void, c_int, *const c_char),
    user: *mut c_void,
    level: c_int,
) -> Option<Registration> {
    if !claim() {
        return None;
    }
    let sink = Arc::new(Sink::default());
    sink.set(Some(Target {
        callback,
        user: user as usize,
        max: level_filter(level),
    }));
    ROUTER
        .scoped
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(scope, sink.clone());
    update_max_level();
    Some(Registration { scope, sink })
}

impl Drop for Registration {
    fn drop(&mut self) {
        {
            let mut scoped = ROUTER.scoped.write().unwrap_or_else(|e| e.into_inner());
            scoped.remove(&self.scope);
            if scoped.is_empty() {
                // Frees the table, so leak checkers see nothing of the library once every controller closed.
                scoped.shrink_to_fit();
            }
        }
        // A record that found the sink just before the removal may be delivering now: wait for it.
        self.sink.set(None);
        update_max_level();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_scope::{ScopeId, enter};
    use std::sync::Mutex;

    /// What each test callback received: (user address, message).
    static SEEN: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());

    unsafe extern "C" fn remember(user: *mut c_void, _level: c_int, message: *const c_char) {
        // SAFETY: the router passes a live NUL-terminated message.
        let text = unsafe { std::ffi::CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned();
        SEEN.lock().unwrap().push((user as usize, text));
    }

    fn emit(router: &Router, text: &str) {
        let args = format_args!("{text}");
        let record = log::Record::builder()
            .args(args)
            .level(log::Level::Info)
            .target("smartdev::test")
            .build();
        log::Log::log(router, &record);
    }

    fn seen_by(user: usize) -> Vec<String> {
        let seen = SEEN.lock().unwrap();
        seen.iter()
            .filter(|(u, _)| *u == user)
            .map(|(_, m)| m.clone())
            .collect()
    }

    // Drives a private router (the process's logger slot is left alone), so the test is independent of
    // whatever logger the test binary has.
    #[test]
    fn records_go_to_their_scope_only_and_never_after_removal() {
        let router = Router::default();
        let (a, b) = (ScopeId::new(), ScopeId::new());
        let sink = |user: usize| {
            Arc::new(Sink {
                target: RwLock::new(Some(Target {
                    callback: remember,
                    user,
                    max: log::LevelFilter::Info,
                })),
            })
        };
        let (ua, ub, ug) = (0xA000, 0xB000, 0x6000);
        router.global.set(Some(Target {
            callback: remember,
            user: ug,
            max: log::LevelFilter::Info,
        }));
        let sa = sink(ua);
        router.scoped.write().unwrap().insert(a, sa.clone());
        router.scoped.write().unwrap().insert(b, sink(ub));
        {
            let _in = enter(Some(a));
            emit(&router, "from a");
        }
        {
            let _in = enter(Some(b));
            emit(&router, "from b");
        }
        emit(&router, "from nowhere");
        assert_eq!(seen_by(ua), ["from a"]);
        assert_eq!(seen_by(ub), ["from b"]);
        assert_eq!(seen_by(ug), ["from nowhere"]);

        // Removed (what Registration::drop does): a's records now reach only the process-wide callback.
        router.scoped.write().unwrap().remove(&a);
        sa.set(None);
        {
            let _in = enter(Some(a));
            emit(&router, "late a");
        }
        sa.deliver(
            &log::Record::builder()
                .args(format_args!("stale"))
                .level(log::Level::Error)
                .target("smartdev")
                .build(),
        );
        assert_eq!(seen_by(ua), ["from a"]);
        assert_eq!(seen_by(ug), ["from nowhere", "late a"]);
        assert_eq!(router.max(), log::LevelFilter::Info);
    }
}
