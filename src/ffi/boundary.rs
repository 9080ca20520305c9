//! The C boundary's plumbing: the panic guard, the per-thread last error, and checked pointer helpers.
//! Every export runs inside [`guard`], so no panic and no bad pointer argument can take the process down.

use std::cell::RefCell;
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::result::sd_result;
use crate::Error;

thread_local! {
    /// The message of the last failure on this thread (`sd_last_error_message`).
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records the message of a failure for `sd_last_error_message` and returns its code.
pub(crate) fn fail(code: sd_result, message: impl Into<String>) -> sd_result {
    let message = message.into();
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
    code
}

/// Records a library error and returns its code.
pub(crate) fn fail_with(e: &Error) -> sd_result {
    fail(sd_result::from_error(e), e.to_string())
}

/// The last failure message on this thread.
pub(crate) fn last_error() -> String {
    LAST_ERROR.with(|e| e.borrow().clone())
}

/// What a function returns when its body panics.
pub(crate) trait OnPanic {
    /// The fallback value.
    fn on_panic() -> Self;
}

impl OnPanic for sd_result {
    fn on_panic() -> Self {
        sd_result::SD_PANIC
    }
}

impl OnPanic for () {
    fn on_panic() -> Self {}
}

impl OnPanic for i32 {
    fn on_panic() -> Self {
        -1
    }
}

impl OnPanic for *const c_char {
    fn on_panic() -> Self {
        std::ptr::null()
    }
}

/// Runs an export's body, turning a panic into the return type's fallback and a recorded message.
pub(crate) fn guard<R: OnPanic>(f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = crate::actor::worker::panic_message(&*payload);
            let _ = fail(
                sd_result::SD_PANIC,
                format!("internal error (panic): {msg}"),
            );
            R::on_panic()
        }
    }
}

/// Early-returns `SD_NULL_PARAMETER` (with a message naming the argument) when a pointer is NULL.
macro_rules! require {
    ($p:expr, $name:literal) => {
        if $p.is_null() {
            return crate::ffi::boundary::fail(
                crate::ffi::result::sd_result::SD_NULL_PARAMETER,
                concat!("argument '", $name, "' is NULL"),
            );
        }
    };
}
pub(crate) use require;

/// Borrows a C string as UTF-8.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string that stays valid for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, name: &str) -> Result<Option<&'a str>, sd_result> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map(Some).map_err(|_| {
        fail(
            sd_result::SD_INVALID_PARAMETER,
            format!("argument '{name}' is not valid UTF-8"),
        )
    })
}

/// Borrows a required C string as UTF-8.
///
/// # Safety
/// As for [`text`].
pub(crate) unsafe fn required_text<'a>(p: *const c_char, name: &str) -> Result<&'a str, sd_result> {
    // SAFETY: forwarded contract.
    match unsafe { text(p, name) }? {
        Some(s) => Ok(s),
        None => Err(fail(
            sd_result::SD_NULL_PARAMETER,
            format!("argument '{name}' is NULL"),
        )),
    }
}

/// Copies `s` and a final NUL into the caller's buffer, or reports the size needed (recording a message).
///
/// `*needed` is written on success and on `SD_INSUFFICIENT_SIZE`; `buf` may be NULL when `len` is 0 (a size
/// query).
///
/// # Safety
/// `buf` must be NULL or valid for `len` bytes; `needed` must be NULL or valid for one write.
pub(crate) unsafe fn write_text(
    s: &str,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    // SAFETY: forwarded contract.
    match unsafe { write_quiet(s, buf, len, needed) } {
        sd_result::SD_OK => sd_result::SD_OK,
        sd_result::SD_INSUFFICIENT_SIZE => fail(
            sd_result::SD_INSUFFICIENT_SIZE,
            format!("the buffer holds {len} bytes; {} are needed", s.len() + 1),
        ),
        sd_result::SD_NULL_PARAMETER if needed.is_null() => {
            fail(sd_result::SD_NULL_PARAMETER, "argument 'needed' is NULL")
        }
        code => fail(code, "argument 'buf' is NULL but 'len' is not 0"),
    }
}

/// [`write_text`] without recording a message (for `sd_last_error_message`, which must not overwrite the
/// message it reports).
///
/// # Safety
/// As for [`write_text`].
pub(crate) unsafe fn write_quiet(
    s: &str,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    if needed.is_null() || (buf.is_null() && len > 0) {
        return sd_result::SD_NULL_PARAMETER;
    }
    let want = s.len() + 1;
    // SAFETY: `needed` is non-NULL and valid by contract.
    unsafe { *needed = want };
    if want > len {
        return sd_result::SD_INSUFFICIENT_SIZE;
    }
    // SAFETY: `buf` is valid for `len >= want` bytes by contract; the source is a live &str.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        *buf.add(s.len()) = 0;
    }
    sd_result::SD_OK
}

/// Writes one value through an out-pointer.
///
/// # Safety
/// `out` must be valid for one write (NULL is checked by the caller).
pub(crate) unsafe fn put<T>(out: *mut T, value: T) {
    // SAFETY: the caller checked `out` and guarantees it is valid.
    unsafe { out.write(value) };
}
