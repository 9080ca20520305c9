//! The C ABI of light control: `sd_set_light` takes an `sd_light_change` whose `set_*` flags say which parts
//! to change (a zeroed struct changes nothing and is refused), and writes the output as the device reports it
//! afterwards as JSON, like `sd_component`.

use std::ffi::c_char;

use super::api::{handle, identity, json, sd_controller};
use super::boundary::{fail_with, guard, require, write_text};
use super::result::sd_result;
use crate::LightChange;

/// A change to a light: each value is used only when its `set_*` flag is true. Units: `brightness` and
/// `white` in % (0–100), `temperature` in K (within the light's range), `rgb` red/green/blue 0–255,
/// `transition` in s.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sd_light_change {
    /// Use `on`.
    pub set_on: bool,
    /// Switch on (true) or off.
    pub on: bool,
    /// Use `brightness`.
    pub set_brightness: bool,
    /// Brightness in %.
    pub brightness: f64,
    /// Use `temperature`.
    pub set_temperature: bool,
    /// Colour temperature in K.
    pub temperature: u32,
    /// Use `rgb`.
    pub set_rgb: bool,
    /// Red, green, blue.
    pub rgb: [u8; 3],
    /// Use `white`.
    pub set_white: bool,
    /// White channel in %.
    pub white: f64,
    /// Use `transition`.
    pub set_transition: bool,
    /// Transition in s.
    pub transition: f64,
}

impl sd_light_change {
    fn to_change(self) -> LightChange {
        let mut c = LightChange::new();
        c.on = self.set_on.then_some(self.on);
        c.brightness = self.set_brightness.then_some(self.brightness);
        c.temperature = self.set_temperature.then_some(self.temperature);
        c.rgb = self.set_rgb.then_some(self.rgb);
        c.white = self.set_white.then_some(self.white);
        c.transition = self.set_transition.then_some(self.transition);
        c
    }
}

/// Sets a light (the output by `name`, or by `id` when `name` is NULL) as `change` says and writes the output
/// as the device reported it right after, as JSON (`Brightness`, `ColorTemperature`, `Rgb`, `White`; `null`
/// what the light does not report). Out-of-range values give `SD_INVALID_PARAMETER` with the range in the
/// message, a capability the light lacks (colour on a dimmer) `SD_UNSUPPORTED` naming it and the model;
/// nothing is sent then. The size query (`buf` NULL, `len` 0) sets the light too: give a buffer of a few
/// hundred bytes at once.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `change` valid; `buf` valid for `len` bytes (or NULL with
/// `len` 0); `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_set_light(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    change: *const sd_light_change,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(change, "change");
        require!(needed, "needed");
        // SAFETY: forwarded contract.
        let who = match unsafe { identity(name, id) } {
            Ok(w) => w,
            Err(code) => return code,
        };
        // SAFETY: non-NULL (checked above) and valid by contract; the struct is plain data.
        let change = unsafe { *change }.to_change();
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let out = match h.ctl.set_light(who, change) {
            Ok(o) => o,
            Err(e) => return fail_with(&e),
        };
        let text = match json(&out) {
            Ok(t) => t,
            Err(code) => return code,
        };
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}
