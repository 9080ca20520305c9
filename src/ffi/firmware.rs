//! The C ABI of firmware updates: `sd_check_firmware` (JSON like the other getters) and `sd_update_firmware`.

use std::ffi::{c_char, c_int};
use std::time::Duration;

use super::api::{handle, identity, json, sd_controller};
use super::boundary::{fail, fail_with, guard, require, write_text};
use super::result::sd_result;
use crate::{FirmwareChannel, UpdateOptions};

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

/// Installs the latest firmware of `channel` (`SD_FIRMWARE_STABLE` or `SD_FIRMWARE_BETA`) and waits until the
/// device runs it, following it through its restart (which is expected and not logged as a warning). Blocks
/// for as long as the update takes: at most `timeout_seconds` (0 or less: 600 s). `allow_concurrent` non-zero
/// lets it run while another device updates; otherwise a second update is refused (`SD_FIRMWARE`). Any
/// failure to end with the new version is `SD_FIRMWARE` (nothing on offer, another update running, refused by
/// the device, not back in time, back with the old version), the message says which; a device that cannot be
/// reached at the start gives its usual code. Afterwards `sd_check_firmware` or `sd_device` (`"Firmware"`)
/// show the version it runs.
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
        match h.ctl.update_firmware_with(who, &options, |_| {}) {
            Ok(_) => sd_result::SD_OK,
            Err(e) => fail_with(&e),
        }
    })
}
