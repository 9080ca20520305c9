//! Forwards log records to a C callback (better than stderr inside Go or Python hosts).

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

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

struct Target {
    callback: unsafe extern "C" fn(*mut c_void, c_int, *const c_char),
    /// The caller's pointer, kept as an address: the library never dereferences it.
    user: usize,
    max: log::LevelFilter,
}

struct CallbackLogger {
    target: RwLock<Option<Target>>,
}

static LOGGER: CallbackLogger = CallbackLogger {
    target: RwLock::new(None),
};

fn level_number(l: log::Level) -> c_int {
    match l {
        log::Level::Error => SD_LOG_ERROR,
        log::Level::Warn => SD_LOG_WARN,
        log::Level::Info => SD_LOG_INFO,
        log::Level::Debug => SD_LOG_DEBUG,
        log::Level::Trace => SD_LOG_TRACE,
    }
}

impl log::Log for CallbackLogger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // Only the library's own records: dependencies' threads (tiny_http's accept thread) may log after
        // sd_close returns, when the host may already be shutting down.
        if !m.target().starts_with("smartdev") {
            return false;
        }
        let t = self.target.read().unwrap_or_else(|e| e.into_inner());
        t.as_ref().is_some_and(|t| m.level() <= t.max)
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let t = self.target.read().unwrap_or_else(|e| e.into_inner());
        let Some(t) = t.as_ref().filter(|t| record.level() <= t.max) else {
            return;
        };
        let text = record.args().to_string().replace('\0', " ");
        if let Ok(c) = CString::new(text) {
            // SAFETY: the caller registered this function for exactly this signature; the message lives
            // until the call returns.
            unsafe {
                (t.callback)(
                    t.user as *mut c_void,
                    level_number(record.level()),
                    c.as_ptr(),
                )
            };
        }
    }

    fn flush(&self) {}
}

/// Routes library log records to `callback` up to `level` (1 error … 5 trace; 0 or no callback turns
/// forwarding off). Returns false when another logger already owns the process-wide slot.
pub(crate) fn install(callback: sd_log_callback, user: *mut c_void, level: c_int) -> bool {
    let Some(callback) = callback else {
        // Waits for a record in progress: once this returns, the old callback is never called again.
        *LOGGER.target.write().unwrap_or_else(|e| e.into_inner()) = None;
        return true;
    };
    let max = match level {
        i if i <= 0 => log::LevelFilter::Off,
        SD_LOG_ERROR => log::LevelFilter::Error,
        SD_LOG_WARN => log::LevelFilter::Warn,
        SD_LOG_INFO => log::LevelFilter::Info,
        SD_LOG_DEBUG => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    *LOGGER.target.write().unwrap_or_else(|e| e.into_inner()) = Some(Target {
        callback,
        user: user as usize,
        max,
    });
    // The `log` crate has one logger per process: install ours once, later calls only retarget it.
    if OURS.load(Ordering::SeqCst) || log::set_logger(&LOGGER).is_ok() {
        OURS.store(true, Ordering::SeqCst);
        log::set_max_level(max);
        true
    } else {
        false
    }
}

static OURS: AtomicBool = AtomicBool::new(false);
