//! The C ABI of firmware updates: `sd_check_firmware` (JSON like the other getters), `sd_update_firmware` and
//! `sd_update_firmware_progress` (the same with a callback per step, which `sd_update_firmware` calls).

use std::ffi::{CString, c_char, c_int, c_void};
use std::time::Duration;

use super::api::{handle, identity, json, sd_controller};
use super::boundary::{fail, fail_with, guard, require, write_text};
use super::result::sd_result;
use crate::{FirmwareChannel, UpdateOptions, UpdateProgress};

/// Firmware channel: the latest stable release.
pub const SD_FIRMWARE_STABLE: c_int = 0;
/// Firmware channel: the latest beta (Shelly only).
pub const SD_FIRMWARE_BETA: c_int = 1;

/// Asks the device which firmware it runs and which newer versions it can install (device I/O on every call,
/// the size query included), and writes it as JSON: `{"Device":"Kitchen","Current":"1.4.4","Stable":"1.5.0",
/// "Beta":null,"Checked":true}`. Unknown is `null`: `Stable`/`Beta` are `null` when nothing newer is on offer,
/// and always for Tasmota, which cannot tell (`"Checked":false`). A simulated device gives `SD_UNSUPPORTED`.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `buf` valid for `len` bytes (or NULL with `len` 0); `needed`
/// valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_check_firmware(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(needed, "needed");
        // SAFETY: forwarded contract.
        let who = match unsafe { identity(name, id) } {
            Ok(w) => w,
            Err(code) => return code,
        };
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let info = match h.ctl.check_firmware(who) {
            Ok(i) => i,
            Err(e) => return fail_with(&e),
        };
        let text = match json(&info) {
            Ok(t) => t,
            Err(code) => return code,
        };
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// Receives one step of a firmware update (`sd_update_firmware_progress`): the caller's `user_data`, the step
/// (`SD_UPDATE_STARTED`, `SD_UPDATE_DOWNLOADING`, `SD_UPDATE_RESTARTING`, `SD_UPDATE_BACK`), two versions
/// (UTF-8, NUL-terminated, NULL when unknown or not part of the step, valid only during the call) and, for
/// `SD_UPDATE_DOWNLOADING`, the percent of the image in (0–100; -1 when the device does not tell). Called on
/// the thread that called `sd_update_firmware_progress`, before it returns.
pub type sd_update_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        step: c_int,
        from: *const c_char,
        to: *const c_char,
        percent: c_int,
    ),
>;

/// Update step: the device accepted the request; `from` is the version it ran, `to` the one it will install.
pub const SD_UPDATE_STARTED: c_int = 1;
/// Update step: the device still answers and is downloading or installing (`from`, `to` NULL).
pub const SD_UPDATE_DOWNLOADING: c_int = 2;
/// Update step: the device stopped answering, it restarts (expected; `from`, `to` NULL).
pub const SD_UPDATE_RESTARTING: c_int = 3;
/// Update step: the device answers again; `to` is the version it runs now (`from` NULL).
pub const SD_UPDATE_BACK: c_int = 4;

/// Installs the latest firmware of `channel` (`SD_FIRMWARE_STABLE` or `SD_FIRMWARE_BETA`) and waits until the
/// device runs it, following it through its restart (which is expected and not logged as a warning). Blocks
/// for as long as the update takes: at most `timeout_seconds` (0 or less: 600 s). `allow_concurrent` non-zero
/// lets it run while another device updates; otherwise a second update is refused (`SD_FIRMWARE`). Any
/// failure to end with the new version is `SD_FIRMWARE` (nothing on offer, another update running, refused by
/// the device, not back in time, back with the old version, a download the device said failed), the message
/// says which; a device that cannot be reached at the start gives its usual code. Afterwards
/// `sd_check_firmware` or `sd_device` (`"Firmware"`) show the version it runs. `sd_update_firmware_progress` does the same and reports each step.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_update_firmware(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    channel: c_int,
    allow_concurrent: bool,
    timeout_seconds: f64,
) -> sd_result {
    // SAFETY: forwarded contract; no callback.
    unsafe {
        sd_update_firmware_progress(
            ctl,
            name,
            id,
            channel,
            allow_concurrent,
            timeout_seconds,
            None,
            std::ptr::null_mut(),
        )
    }
}

/// `sd_update_firmware` (same arguments, same results) that also calls `callback(user_data, step, from, to,
/// percent)` for each step of the update, on the calling thread, before it returns: `SD_UPDATE_STARTED` (`from`
/// the version it ran, `to` the version it installs), possibly `SD_UPDATE_DOWNLOADING` (again for each new
/// percent a Gen2+ device tells over its push channel; `percent` -1 when unknown), `SD_UPDATE_RESTARTING`
/// (versions NULL), `SD_UPDATE_BACK` (`to` the version it runs now). `percent` is -1 for every other step.
/// Unknown versions are NULL, never "". The strings are valid only during the call: copy them to keep them. An update refused before it starts (nothing
/// on offer, another update running) calls nothing. A NULL `callback` makes this `sd_update_firmware`.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `callback` NULL or a function of that signature, callable
/// with `user_data` until this returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_update_firmware_progress(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    channel: c_int,
    allow_concurrent: bool,
    timeout_seconds: f64,
    callback: sd_update_callback,
    user_data: *mut c_void,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        let channel = match channel {
            SD_FIRMWARE_STABLE => FirmwareChannel::Stable,
            SD_FIRMWARE_BETA => FirmwareChannel::Beta,
            other => {
                return fail(
                    sd_result::SD_INVALID_PARAMETER,
                    format!(
                        "channel {other} is not SD_FIRMWARE_STABLE (0) or SD_FIRMWARE_BETA (1)"
                    ),
                );
            }
        };
        let timeout = if timeout_seconds.is_finite() && timeout_seconds > 0.0 {
            Duration::from_secs_f64(timeout_seconds.min(86_400.0))
        } else {
            UpdateOptions::DEFAULT_TIMEOUT
        };
        // SAFETY: forwarded contract.
        let who = match unsafe { identity(name, id) } {
            Ok(w) => w,
            Err(code) => return code,
        };
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let options = UpdateOptions {
            channel,
            allow_concurrent,
            timeout,
        };
        let tell = |p: &UpdateProgress| {
            if let Some(callback) = callback {
                let (step, from, to, percent) = step(p);
                let (from, to) = (c_version(from), c_version(to));
                let ptr = |v: &Option<CString>| v.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
                // SAFETY: the caller passed a function of this signature, callable with `user_data` until this
                // export returns; the strings live until the call returns.
                unsafe { callback(user_data, step, ptr(&from), ptr(&to), percent) };
            }
        };
        match h.ctl.update_firmware_with(who, &options, tell) {
            Ok(_) => sd_result::SD_OK,
            Err(e) => fail_with(&e),
        }
    })
}

/// A step's number, its `from`, `to` versions and its percent (-1: unknown or none).
fn step(p: &UpdateProgress) -> (c_int, Option<&str>, Option<&str>, c_int) {
    match p {
        UpdateProgress::Started { from, to } => {
            (SD_UPDATE_STARTED, from.as_deref(), to.as_deref(), -1)
        }
        UpdateProgress::Downloading { percent } => (
            SD_UPDATE_DOWNLOADING,
            None,
            None,
            percent.map_or(-1, c_int::from),
        ),
        UpdateProgress::Restarting => (SD_UPDATE_RESTARTING, None, None, -1),
        UpdateProgress::Back { version } => (SD_UPDATE_BACK, None, version.as_deref(), -1),
    }
}

/// A version as C text: control characters (NUL among them) escaped, since it comes from the device; an empty
/// one is unknown (NULL).
fn c_version(v: Option<&str>) -> Option<CString> {
    let v = v.filter(|v| !v.is_empty())?;
    CString::new(crate::text::escape_controls(v).into_owned()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_carry_their_versions_and_unknown_is_null() {
        let started = UpdateProgress::Started {
            from: Some("1.4.4".into()),
            to: None,
        };
        assert_eq!(step(&started), (SD_UPDATE_STARTED, Some("1.4.4"), None, -1));
        let back = UpdateProgress::Back {
            version: Some("1.5.0".into()),
        };
        assert_eq!(step(&back), (SD_UPDATE_BACK, None, Some("1.5.0"), -1));
        assert_eq!(
            step(&UpdateProgress::Restarting),
            (SD_UPDATE_RESTARTING, None, None, -1)
        );
        assert_eq!(
            step(&UpdateProgress::Downloading { percent: Some(40) }),
            (SD_UPDATE_DOWNLOADING, None, None, 40)
        );
        assert_eq!(
            step(&UpdateProgress::Downloading { percent: None }),
            (SD_UPDATE_DOWNLOADING, None, None, -1)
        );
        assert_eq!(c_version(None), None);
        assert_eq!(c_version(Some("")), None);
        // A NUL from the device is escaped, not a panic or a cut string.
        assert_eq!(
            c_version(Some("1.5\0x")).unwrap().to_str().unwrap(),
            "1.5\\u{0}x"
        );
    }
}
