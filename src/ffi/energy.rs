//! The C ABI of energy history: `sd_energy_history` (a JSON document in the caller's buffer, like every getter)
//! and `sd_energy_history_last` (the same document again without device I/O, after a size query).

use std::cell::RefCell;
use std::ffi::c_char;

use super::api::{handle, identity, json, sd_controller};
use super::boundary::{fail, fail_with, guard, require, write_text};
use super::result::sd_result;

thread_local! {
    /// The JSON of this thread's last `sd_energy_history`, for `sd_energy_history_last`.
    static LAST_HISTORY: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Reads a meter's own interval records over `[from, to)` (Unix seconds, UTC) from the device (device I/O) and
/// writes them as JSON: `{"Device":"Grid","Meter":"Grid A","Channels":["Grid A","Grid B","Grid C"],
/// "From":"2026-11-25T00:00:00Z","To":…,"Entries":[{"Kind":"Record","Start":"2026-11-25T00:00:00Z",
/// "Period":60,"Channels":[{"Energy":10.0,"ReturnedEnergy":0.0,"MinVoltage":230.1,"MaxVoltage":230.1,
/// "MinCurrent":2.7,"MaxCurrent":2.7},…]},{"Kind":"Gap","Start":…,"End":…},…]}`. Entries are in time order
/// and cover the range; a `"Gap"` is time the device has no record for and has no energy (never count it as
/// 0). Energy in Wh, voltage in V, current in A; what the device did not record is `null`. The meter is
/// named by `name` (non-NULL) or `id`; a 3-phase meter's records hold all its phases (`"Channels"`).
///
/// `SD_NO_HISTORY` for a meter that keeps none (a switch's or plug's meter, Tasmota, simulated devices);
/// `SD_INVALID_PARAMETER` when `from` is not before `to`. When `buf` is too small: `SD_INSUFFICIENT_SIZE` with
/// `*needed`; the document is kept for this thread, so call `sd_energy_history_last` with a buffer of
/// `*needed` bytes instead of reading the device again.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `buf` NULL (with `len` 0) or writable for `len` bytes; `needed`
/// valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_energy_history(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    from: i64,
    to: i64,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(needed, "needed");
        // A failed read leaves nothing for `sd_energy_history_last` to give as if it were this one's.
        LAST_HISTORY.with(|l| *l.borrow_mut() = None);
        // SAFETY: forwarded contract.
        let who = match unsafe { identity(name, id) } {
            Ok(w) => w,
            Err(code) => return code,
        };
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let history = match h.ctl.energy_history(who, from, to) {
            Ok(v) => v,
            Err(e) => return fail_with(&e),
        };
        let text = match json(&history) {
            Ok(t) => t,
            Err(code) => return code,
        };
        LAST_HISTORY.with(|l| *l.borrow_mut() = Some(text.clone()));
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// Writes this thread's last `sd_energy_history` document again (no device I/O). `SD_NOT_FOUND` when this
/// thread has read no history yet, or its last `sd_energy_history` failed.
///
/// # Safety
/// `buf` NULL (with `len` 0) or writable for `len` bytes; `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_energy_history_last(
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(needed, "needed");
        let Some(text) = LAST_HISTORY.with(|l| l.borrow().clone()) else {
            return fail(
                sd_result::SD_NOT_FOUND,
                "no energy history read yet on this thread: call sd_energy_history first (on the same thread)",
            );
        };
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}
