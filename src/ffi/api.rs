//! The exported `sd_` functions. Contract (also in the README's C section): every fallible function returns
//! `sd_result`; out-parameters are written only on `SD_OK`, with three exceptions: `*needed` also on
//! `SD_INSUFFICIENT_SIZE`, `sd_refresh_all`'s `*failures` whenever every device was tried, and `sd_get_device`'s
//! object (with `*needed`) also with a device's 3xx code;
//! the handle comes first, then inputs, then outputs; identities are a name (`const char *`, NULL when unused)
//! plus an ID (`int64_t`), and the name wins when given; strings in are UTF-8 and borrowed for the call; text out
//! goes into caller-owned buffers, NUL-terminated.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;
use std::time::Duration;

use super::boundary::{
    fail, fail_with, guard, last_error, put, require, required_text, text, write_quiet, write_text,
};
use super::log::{Registration, sd_log_callback};
use super::result::sd_result;
use crate::log_scope::{self, ScopeId};
use crate::{
    ComponentKind, Controller, CoverAction, CoverState, Identity, ModelLibrary, PrintMode, WakeFlag,
};

/// An open installation: configuration, one worker per device, the supervisor and the webhook listener.
///
/// Created by `sd_open` or `sd_open_yaml`, destroyed by `sd_close`. Every function taking a
/// `const sd_controller *` may be called from any thread at the same time; `sd_close` must not run while
/// another call on the same controller is in progress.
///
/// Methods:
/// - sd_open / sd_open_yaml: load a configuration and start everything.
/// - sd_close: stop every thread, free the controller, set the caller's pointer to NULL.
///
/// Naming rule (the same in Rust, Go, Python and sdctl): `sd_read_*`, `sd_refresh_*` and the spec's
/// `sd_get_device` do device I/O; every other getter returns the last known state at once.
///
/// | reads the device (I/O)                        | last known state (no I/O)                          |
/// |-----------------------------------------------|----------------------------------------------------|
/// | sd_get_device (object JSON, also on failure)  | sd_device, sd_devices                              |
/// | sd_read_device, sd_refresh_all                | sd_get_device_component, sd_component              |
/// | sd_read_device_online                         | sd_is_device_online, sd_output_state, sd_input_state, sd_meter, sd_cover, sd_sensor_value |
///
/// - sd_get_device: the spec's get_device — reads the device and writes its object; on failure the device's
///   error code AND the object (`"Online":false`, `"LastError"`).
/// - sd_read_device / sd_refresh_all / sd_read_device_online: read one device, every device in parallel, or
///   one device and say whether it answered.
/// - sd_device / sd_devices / sd_component / sd_get_device_component: objects as JSON (last known state),
///   covers and sensors included (`SD_KIND_COVER`, `SD_KIND_SENSOR`).
/// - Deprecated 0.1.0 names, kept with their 0.1.0 meaning: sd_get_devices (= sd_devices), sd_get_output_state,
///   sd_get_input_state, sd_get_meter, sd_get_device_online (= sd_is_device_online, no I/O).
/// - sd_output_state / sd_input_state / sd_meter / sd_cover / sd_sensor_value / sd_is_device_online: typed
///   hot-path getters (last known). A state or value the device has not reported is `SD_UNKNOWN` (or a
///   validity flag that is false), never `false` or 0.
/// - sd_change_output / sd_toggle_output: switch a relay; report the new state and whether it changed.
/// - sd_set_light: brightness, colour temperature, RGB, white and transition of a light (`sd_light_change`);
///   writes the light as JSON as the device reports it after.
/// - sd_open_cover / sd_close_cover / sd_stop_cover / sd_set_cover_position: move a cover.
/// - sd_pull_event: take the oldest webhook event as JSON.
/// - sd_discover: find devices on the local network (mDNS, each confirmed over HTTP) as a JSON array; with a
///   controller, each marked `"Configured"`. sd_discovered: the last result again, without discovering.
/// - sd_energy_history: a meter's own interval records over a time range as JSON (records and gaps);
///   sd_energy_history_last: the same again, without device I/O.
/// - sd_wake_fd / sd_wake_wait / sd_wake_clear: wait for webhook events.
/// - sd_webhook_address: where the webhook listener listens.
/// - sd_print_device_status / sd_print_model_library: the text listings.
pub struct sd_controller {
    _private: [u8; 0],
}

/// What `sd_controller` points to.
pub(super) struct Handle {
    pub(super) ctl: Controller,
    wake: Option<WakeFlag>,
    /// An event taken from the queue that did not fit the caller's buffer; delivered first next time.
    pending: Mutex<Option<String>>,
    /// The log scope of the controller's threads, entered on the caller's thread during each call.
    scope: ScopeId,
    /// The controller's own log callback. Declared after `ctl`, so it is removed only once every thread of
    /// the controller is joined.
    _log: Option<Registration>,
}

/// A controller borrowed for one call, with its log scope entered on the calling thread (records the call
/// produces there belong to the controller).
pub(super) struct Borrowed<'a> {
    handle: &'a Handle,
    _scope: log_scope::Entered,
}

impl std::ops::Deref for Borrowed<'_> {
    type Target = Handle;
    fn deref(&self) -> &Handle {
        self.handle
    }
}

/// Options for `sd_open` / `sd_open_yaml`. Initialise with `sd_open_options_init`, then set what you need.
#[repr(C)]
pub struct sd_open_options {
    /// A validation-dictionary extension file (YAML or JSON) defining custom attributes, or NULL.
    pub schema_path: *const c_char,
    /// The same as YAML text, or NULL.
    pub schema_yaml: *const c_char,
    /// A model library file used instead of the built-in one, or NULL.
    pub models_path: *const c_char,
    /// Receives this controller's log records and only those: its devices, its supervisor, its webhook
    /// listener, and what its calls log on the caller's thread. NULL: they go to the process-wide callback of
    /// `sd_set_log_callback`, if any (and a `Files` block in the configuration sets up file/stderr logging).
    /// Lifetime: called from library threads from the start of `sd_open` until `sd_close` returns, never
    /// after, and never after an `sd_open` that failed; `log_user` may be freed once `sd_close` returns.
    /// `sd_open` fails with `SD_LOGGER` when another logger owns the process (see `sd_set_log_callback`).
    pub log_callback: sd_log_callback,
    /// Passed to `log_callback` unchanged (never dereferenced by the library).
    pub log_user: *mut c_void,
    /// Highest level forwarded to `log_callback`: 0 off (the controller's records are then dropped), 1 error
    /// … 5 trace.
    pub log_level: c_int,
    /// Create the wake flag and its descriptor (for `sd_wake_*`). Default true.
    pub wake: bool,
}

/// Component kind: input.
pub const SD_KIND_INPUT: c_int = 0;
/// Component kind: output (relay).
pub const SD_KIND_OUTPUT: c_int = 1;
/// Component kind: energy meter.
pub const SD_KIND_METER: c_int = 2;
/// Component kind: temperature probe.
pub const SD_KIND_TEMP_PROBE: c_int = 3;
/// Component kind: cover (roller shutter, blind).
pub const SD_KIND_COVER: c_int = 4;
/// Component kind: sensor (humidity, voltage, a device's own temperature).
pub const SD_KIND_SENSOR: c_int = 5;

/// What a cover is doing, as last reported (`sd_cover_reading.state`). Numbers never change meaning.
#[repr(C)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sd_cover_state {
    /// Not reported yet (never read, or the device does not have this cover in its current profile).
    SD_COVER_UNKNOWN = 0,
    /// Fully open and still.
    SD_COVER_OPEN = 1,
    /// Fully closed and still.
    SD_COVER_CLOSED = 2,
    /// Moving towards open.
    SD_COVER_OPENING = 3,
    /// Moving towards closed.
    SD_COVER_CLOSING = 4,
    /// Still, somewhere between open and closed.
    SD_COVER_STOPPED = 5,
    /// Running its calibration.
    SD_COVER_CALIBRATING = 6,
}

impl From<Option<CoverState>> for sd_cover_state {
    fn from(s: Option<CoverState>) -> Self {
        match s {
            None => sd_cover_state::SD_COVER_UNKNOWN,
            Some(CoverState::Open) => sd_cover_state::SD_COVER_OPEN,
            Some(CoverState::Closed) => sd_cover_state::SD_COVER_CLOSED,
            Some(CoverState::Opening) => sd_cover_state::SD_COVER_OPENING,
            Some(CoverState::Closing) => sd_cover_state::SD_COVER_CLOSING,
            Some(CoverState::Stopped) => sd_cover_state::SD_COVER_STOPPED,
            Some(CoverState::Calibrating) => sd_cover_state::SD_COVER_CALIBRATING,
        }
    }
}

/// One cover as last read (`sd_cover`). Unknown is never reported as a value: `state` is
/// `SD_COVER_UNKNOWN`, and a `has_` flag is false when the device has not reported that value (the value is
/// then 0 / false and must not be used).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct sd_cover_reading {
    /// What the cover is doing.
    pub state: sd_cover_state,
    /// Position in % (0 closed, 100 open). Unknown while the cover is not calibrated.
    pub position: f64,
    /// Whether the cover knows its end positions (can be sent to a position).
    pub calibrated: bool,
    /// `position` is valid.
    pub has_position: bool,
    /// `calibrated` is valid.
    pub has_calibrated: bool,
}

/// One meter's readings. A `has_` flag is false when the device does not report that value (the value is
/// then 0 and must not be used).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sd_meter_reading {
    /// Active power in W (negative: energy flows back).
    pub power: f64,
    /// Voltage in V.
    pub voltage: f64,
    /// Current in A.
    pub current: f64,
    /// Power factor.
    pub power_factor: f64,
    /// Energy consumed in Wh.
    pub energy: f64,
    /// Energy returned in Wh.
    pub returned_energy: f64,
    /// `power` is valid.
    pub has_power: bool,
    /// `voltage` is valid.
    pub has_voltage: bool,
    /// `current` is valid.
    pub has_current: bool,
    /// `power_factor` is valid.
    pub has_power_factor: bool,
    /// `energy` is valid.
    pub has_energy: bool,
    /// `returned_energy` is valid.
    pub has_returned_energy: bool,
}

/// The controller behind a C pointer, for the length of one call.
///
/// # Safety
/// `ctl` must be non-NULL, returned by `sd_open` or `sd_open_yaml`, and not passed to `sd_close` before the
/// result is dropped (the C contract: `sd_close` never runs concurrently with other calls on the controller).
pub(super) unsafe fn handle<'a>(ctl: *const sd_controller) -> Borrowed<'a> {
    // SAFETY: non-NULL and a live leaked Box<Handle> by this function's contract.
    let handle = unsafe { &*ctl.cast::<Handle>() };
    Borrowed {
        handle,
        _scope: log_scope::enter(Some(handle.scope)),
    }
}

/// The identity from a name (wins when non-NULL) and an ID.
///
/// # Safety
/// `name` must be NULL or a valid C string.
pub(super) unsafe fn identity(name: *const c_char, id: i64) -> Result<Identity, sd_result> {
    // SAFETY: forwarded contract.
    Ok(match unsafe { text(name, "name") }? {
        Some(n) => Identity::Name(n.to_string()),
        None => Identity::Id(id),
    })
}

fn kind_of(kind: c_int) -> Result<ComponentKind, sd_result> {
    match kind {
        SD_KIND_INPUT => Ok(ComponentKind::Input),
        SD_KIND_OUTPUT => Ok(ComponentKind::Output),
        SD_KIND_METER => Ok(ComponentKind::Meter),
        SD_KIND_TEMP_PROBE => Ok(ComponentKind::TempProbe),
        SD_KIND_COVER => Ok(ComponentKind::Cover),
        SD_KIND_SENSOR => Ok(ComponentKind::Sensor),
        other => Err(fail(
            sd_result::SD_INVALID_PARAMETER,
            format!(
                "kind {other} is not one of SD_KIND_INPUT (0), SD_KIND_OUTPUT (1), SD_KIND_METER (2), SD_KIND_TEMP_PROBE (3), SD_KIND_COVER (4), SD_KIND_SENSOR (5)"
            ),
        )),
    }
}

pub(super) fn json<T: serde::Serialize>(v: &T) -> Result<String, sd_result> {
    serde_json::to_string(v)
        .map_err(|e| fail(sd_result::SD_PANIC, format!("cannot render JSON: {e}")))
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(code) => return code,
        }
    };
}

macro_rules! lib {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return fail_with(&e),
        }
    };
}

/// The library version, e.g. `"0.2.0"` (static; never free it).
#[unsafe(no_mangle)]
pub extern "C" fn sd_version() -> *const c_char {
    guard(|| concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast())
}

/// The name of a result code (e.g. `"SD_TIMEOUT"`), static; `"SD_UNRECOGNISED"` for numbers that are not
/// codes (`"SD_UNKNOWN"` is the name of the code 307, a value the device has not reported).
#[unsafe(no_mangle)]
pub extern "C" fn sd_result_name(code: c_int) -> *const c_char {
    guard(|| {
        sd_result::ALL
            .iter()
            .find(|r| **r as c_int == code)
            .map_or(c"SD_UNRECOGNISED".as_ptr(), |r| r.name().as_ptr())
    })
}

/// Copies the message of the last failure on the calling thread into `buf` (NUL-terminated).
///
/// # Safety
/// `buf` must be NULL (with `len` 0) or valid for `len` bytes; `needed` must be valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_last_error_message(
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        let msg = last_error();
        // SAFETY: forwarded contract. Reporting must not overwrite the message it reports.
        unsafe { write_quiet(&msg, buf, len, needed) }
    })
}

/// Sets (or, with a NULL `callback` or `level` 0, removes) the process-wide log callback: library records up
/// to `level` (`SD_LOG_ERROR` … `SD_LOG_TRACE`) that belong to no controller with its own
/// `sd_open_options.log_callback` (controllers opened without one, and records outside any controller) go to
/// `callback(user, level, message)`. Lifetime: once this returns, a previous callback is never called again —
/// call it with NULL before freeing its `user` or unloading the code the callback lives in. `SD_LOGGER` when
/// another logger already owns the process (the host installed one, or a controller opened without a
/// callback set one up from its configuration's `Files` block).
#[unsafe(no_mangle)]
pub extern "C" fn sd_set_log_callback(
    callback: sd_log_callback,
    user: *mut c_void,
    level: c_int,
) -> sd_result {
    guard(|| {
        if super::log::install(callback, user, level) {
            sd_result::SD_OK
        } else {
            fail(
                sd_result::SD_LOGGER,
                "another logger is already installed in this process",
            )
        }
    })
}

/// Fills `opts` with the defaults (no schema, built-in models, no log callback, wake flag on).
///
/// # Safety
/// `opts` must be valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_open_options_init(opts: *mut sd_open_options) -> sd_result {
    guard(|| {
        require!(opts, "opts");
        let defaults = sd_open_options {
            schema_path: std::ptr::null(),
            schema_yaml: std::ptr::null(),
            models_path: std::ptr::null(),
            log_callback: None,
            log_user: std::ptr::null_mut(),
            log_level: super::log::SD_LOG_INFO,
            wake: true,
        };
        // SAFETY: checked above; valid by contract.
        unsafe { put(opts, defaults) };
        sd_result::SD_OK
    })
}

enum Source<'a> {
    File(&'a str),
    Yaml(&'a str),
}

/// Shared body of `sd_open` and `sd_open_yaml`.
///
/// # Safety
/// `opts` must be NULL or valid; its strings NULL or valid C strings; `out` valid.
unsafe fn open(
    source: Source,
    opts: *const sd_open_options,
    out: *mut *mut sd_controller,
) -> sd_result {
    require!(out, "ctl");
    // SAFETY: NULL or valid by contract.
    let opts = unsafe { opts.as_ref() };
    let mut builder = Controller::builder();
    let mut wake = true;
    // Everything the controller logs, from this thread and from the threads it starts, is in its scope.
    let scope = ScopeId::new();
    let _in = log_scope::enter(Some(scope));
    // Dropped (removed again) on every early return, so a failed open leaves no callback behind.
    let mut registration = None;
    if let Some(o) = opts {
        // First, so the records of everything below reach it.
        if let Some(callback) = o.log_callback {
            registration = super::log::register(scope, callback, o.log_user, o.log_level);
            if registration.is_none() {
                return fail(
                    sd_result::SD_LOGGER,
                    "log_callback cannot receive records: another logger already owns this process's log \
                     (a controller opened earlier set one up from its Files block, or the host installed one); \
                     give every controller a log_callback, or call sd_set_log_callback before opening any",
                );
            }
        }
        // SAFETY: the strings are NULL or valid C strings by contract.
        let (schema_path, schema_yaml, models_path) = unsafe {
            (
                tri!(text(o.schema_path, "schema_path")),
                tri!(text(o.schema_yaml, "schema_yaml")),
                tri!(text(o.models_path, "models_path")),
            )
        };
        if let Some(p) = schema_path {
            builder = lib!(builder.schema_file(p));
        }
        if let Some(y) = schema_yaml {
            builder = lib!(builder.schema_yaml(y, "<schema_yaml>"));
        }
        if let Some(m) = models_path {
            builder = lib!(builder.models_file(m));
        }
        wake = o.wake;
    }
    // Without a callback of its own, the controller logs as its Files block says.
    builder = builder.files_logging(opts.is_none_or(|o| o.log_callback.is_none()));
    let wake = wake.then(WakeFlag::new);
    if let Some(w) = &wake {
        builder = builder.wake(w.clone());
    }
    let ctl = lib!(match source {
        Source::File(p) => builder.open_file(p),
        Source::Yaml(y) => builder.open_yaml(y),
    });
    let h = Box::new(Handle {
        ctl,
        wake,
        pending: Mutex::new(None),
        scope,
        _log: registration,
    });
    // SAFETY: checked above; valid by contract. Ownership passes to the caller until sd_close.
    unsafe { put(out, Box::into_raw(h).cast::<sd_controller>()) };
    sd_result::SD_OK
}

/// Opens the installation described by the YAML file `config_path` (either layout). `opts` may be NULL.
/// On `SD_OK`, `*ctl` is the new controller; on failure it is untouched and `sd_last_error_message` lists
/// every problem (`SD_CONFIG`, `SD_INIT`, `SD_SIMULATION`, `SD_IO`, ...). Unreachable devices do not fail it.
///
/// # Safety
/// `config_path` must be a valid C string; `opts` NULL or valid; `ctl` valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_open(
    config_path: *const c_char,
    opts: *const sd_open_options,
    ctl: *mut *mut sd_controller,
) -> sd_result {
    guard(|| {
        // SAFETY: forwarded contract.
        let path = tri!(unsafe { required_text(config_path, "config_path") });
        // SAFETY: forwarded contract.
        unsafe { open(Source::File(path), opts, ctl) }
    })
}

/// Like `sd_open`, with the configuration given as YAML text (relative paths resolve against the current
/// directory).
///
/// # Safety
/// `yaml_text` must be a valid C string; `opts` NULL or valid; `ctl` valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_open_yaml(
    yaml_text: *const c_char,
    opts: *const sd_open_options,
    ctl: *mut *mut sd_controller,
) -> sd_result {
    guard(|| {
        // SAFETY: forwarded contract.
        let yaml = tri!(unsafe { required_text(yaml_text, "yaml_text") });
        // SAFETY: forwarded contract.
        unsafe { open(Source::Yaml(yaml), opts, ctl) }
    })
}

/// Stops every thread, frees the controller and sets `*ctl` to NULL. `ctl == NULL` or `*ctl == NULL` is a
/// no-op, so closing twice through the same variable is harmless. Must not run concurrently with other calls
/// on the same controller.
///
/// # Safety
/// `ctl` must be NULL or valid; `*ctl` NULL or a controller from `sd_open` that was not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_close(ctl: *mut *mut sd_controller) {
    guard(|| {
        if ctl.is_null() {
            return;
        }
        // SAFETY: valid by contract.
        let p = unsafe { std::ptr::replace(ctl, std::ptr::null_mut()) };
        if !p.is_null() {
            // SAFETY: `p` came from Box::into_raw in sd_open and is freed exactly once (the caller's pointer
            // is now NULL).
            let h = unsafe { Box::from_raw(p.cast::<Handle>()) };
            // The close's own records ("closed") still belong to the controller.
            let _in = log_scope::enter(Some(h.scope));
            h.ctl.close();
            // Removes the controller's callback after its threads are joined, waiting for a call in progress.
            drop(h);
        }
    })
}

/// Reads the device now (device I/O), so that `sd_device` and the other getters return what it says. A
/// device that cannot be read gives its error (`SD_TIMEOUT`, `SD_DEVICE`, ...), and is then marked offline.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_read_device(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        lib!(h.ctl.read_device(&who));
        sd_result::SD_OK
    })
}

/// Writes the device's object as JSON, as last read (no device I/O; same fields as the Rust API and
/// `sdctl --json`). Call `sd_read_device` first for a fresh reading. A device that cannot be reached has its
/// object too: `"Online":false` and `"LastError"` saying why (also right after `sd_read_device` failed).
/// `"Address"` is where the device is reached now (its `Hostname`, or where it was found after it moved; `null`
/// while unknown). The size query (`buf` NULL, `len` 0: `SD_INSUFFICIENT_SIZE` with `*needed`) never waits for a device either,
/// even while another thread reads it.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `buf` valid for `len` bytes (or NULL with `len` 0); `needed`
/// valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_device(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let dev = lib!(h.ctl.device(&who));
        let text = tri!(json(&dev));
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// The spec's `get_device`: reads the device now (device I/O, like `sd_read_device`), then writes its object
/// as JSON (like `sd_device`). Rust `get_device`, Go `GetDevice` and Python `get_device` mean the same.
///
/// When the read fails, the result is the device's error code (`SD_TIMEOUT`, `SD_DEVICE`, `SD_OFFLINE`,
/// `SD_AUTH`, ... — every 3xx code) AND `buf` holds the object as it stands after the failure (`"Online":false`
/// and `"LastError"` saying why, when it could not be reached), with `*needed` written; the message is in
/// `sd_last_error_message`. `SD_NOT_FOUND` and the 1xx argument codes write nothing.
///
/// The device is read on every call, also when the buffer is too small: the result is then
/// `SD_INSUFFICIENT_SIZE` with `*needed` (whatever the read gave; the message says how the read went). Do not
/// call `sd_get_device` again to fetch the object — that reads the device a second time: call `sd_device` with
/// a buffer of `*needed` bytes, which returns the object just read without device I/O (its `Online` and
/// `LastError` say whether the read succeeded). A size query (`buf` NULL, `len` 0) therefore reads too.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `buf` valid for `len` bytes (or NULL with `len` 0); `needed`
/// valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_device(
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
        if buf.is_null() && len > 0 {
            // Refused before the read: a misused buffer must not cost a device request.
            return fail(
                sd_result::SD_NULL_PARAMETER,
                "argument 'buf' is NULL but 'len' is not 0 (pass len 0 to ask for the size)",
            );
        }
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let (dev, read_error) = match h.ctl.get_device(&who) {
            Ok(d) => (d, None),
            Err(crate::GetDeviceError {
                error,
                device: Some(d),
            }) => (*d, Some(error)),
            Err(e) => return fail_with(&e.error),
        };
        let text = tri!(json(&dev));
        // SAFETY: forwarded contract (`needed` non-NULL and `buf`/`len` consistent, checked above).
        match unsafe { write_quiet(&text, buf, len, needed) } {
            sd_result::SD_OK => match read_error {
                None => sd_result::SD_OK,
                Some(e) => fail_with(&e),
            },
            code => {
                let read = match &read_error {
                    None => "the device was read".to_string(),
                    Some(e) => format!("the read failed ({:?}: {e})", sd_result::from_error(e)),
                };
                fail(
                    code,
                    format!(
                        "the buffer holds {len} bytes; the device object needs {} ({read}): call sd_device \
                         with a buffer of *needed bytes to get the object just read, without reading again",
                        text.len() + 1
                    ),
                )
            }
        }
    })
}

/// Writes every device's object as a JSON array, as last read (no device I/O).
///
/// # Safety
/// As for `sd_device`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_devices(
    ctl: *const sd_controller,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let text = tri!(json(&h.ctl.devices()));
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// Writes one component (`SD_KIND_INPUT`, `SD_KIND_OUTPUT`, `SD_KIND_METER`, `SD_KIND_TEMP_PROBE`,
/// `SD_KIND_COVER`, `SD_KIND_SENSOR`) as JSON, as last read (no device I/O). Values not reported yet are `null`
/// (a cover's `State` is then `null`, never `"closed"`; a sensor's `Value` is `null`, never 0). The same as
/// `sd_get_device_component`.
///
/// # Safety
/// As for `sd_device`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_component(
    ctl: *const sd_controller,
    kind: c_int,
    name: *const c_char,
    id: i64,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { component_json(ctl, kind, name, id, buf, len, needed) })
}

/// The spec's `get_device_component`: one component (`SD_KIND_*`) as JSON, as last read (no device I/O) —
/// the same as `sd_component`, under the name the spec gives (Rust `get_device_component`, Go
/// `GetDeviceComponent`, Python `get_device_component`).
///
/// # Safety
/// As for `sd_device`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_device_component(
    ctl: *const sd_controller,
    kind: c_int,
    name: *const c_char,
    id: i64,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { component_json(ctl, kind, name, id, buf, len, needed) })
}

/// The body of `sd_component` and `sd_get_device_component`.
///
/// # Safety
/// As for `sd_device`.
unsafe fn component_json(
    ctl: *const sd_controller,
    kind: c_int,
    name: *const c_char,
    id: i64,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    require!(ctl, "ctl");
    let kind = tri!(kind_of(kind));
    // SAFETY: forwarded contract.
    let who = tri!(unsafe { identity(name, id) });
    // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
    let h = unsafe { handle(ctl) };
    let c = lib!(h.ctl.component(kind, &who));
    let text = tri!(json(&c));
    // SAFETY: forwarded contract.
    unsafe { write_text(&text, buf, len, needed) }
}

/// Switches an output on (`desired` true) or off. On `SD_OK`, `*state` is the new state as the device reports
/// it and `*did_change` is true exactly when it changed.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `state` and `did_change` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_change_output(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    desired: bool,
    state: *mut bool,
    did_change: *mut bool,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(state, "state");
        require!(did_change, "did_change");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let c = lib!(h.ctl.change_output(&who, desired));
        // SAFETY: checked above; valid by contract.
        unsafe {
            put(state, c.state);
            put(did_change, c.did_change);
        }
        sd_result::SD_OK
    })
}

/// Switches an output to the opposite state; outputs as for `sd_change_output`.
///
/// # Safety
/// As for `sd_change_output`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_toggle_output(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    state: *mut bool,
    did_change: *mut bool,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(state, "state");
        require!(did_change, "did_change");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let c = lib!(h.ctl.toggle_output(&who));
        // SAFETY: checked above; valid by contract.
        unsafe {
            put(state, c.state);
            put(did_change, c.did_change);
        }
        sd_result::SD_OK
    })
}

/// Reads every device at once. On `SD_OK` all were refreshed; otherwise the code and message are those of the
/// first failure. `*failures` (when not NULL) is the documented exception to "out-parameters only on `SD_OK`":
/// whenever every device was tried it is written with how many failed — 0 with `SD_OK`, at least 1 with a
/// device's error code. It is left untouched when the call itself is refused (`SD_NULL_PARAMETER`, ...).
///
/// # Safety
/// `ctl` valid; `failures` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_refresh_all(
    ctl: *const sd_controller,
    failures: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let report = lib!(h.ctl.refresh_all());
        if !failures.is_null() {
            // SAFETY: non-NULL and valid by contract.
            unsafe { put(failures, report.failures.len()) };
        }
        match report.failures.first() {
            None => sd_result::SD_OK,
            Some(f) => {
                let code = fail_with(&f.error);
                let more = report.failures.len() - 1;
                if more > 0 {
                    let _ = fail(
                        code,
                        format!("{} (and {more} more device(s) failed)", f.error),
                    );
                }
                code
            }
        }
    })
}

/// Reads the device now; `*online` is whether it answered. A device that cannot be reached is not an error
/// here: the result is `SD_OK` with `*online` false.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `online` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_read_device_online(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    online: *mut bool,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(online, "online");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        match h.ctl.read_device(&who) {
            Ok(d) => {
                // SAFETY: checked above.
                unsafe { put(online, d.online) };
                sd_result::SD_OK
            }
            Err(
                e @ (crate::Error::NotFound { .. }
                | crate::Error::Closed
                | crate::Error::InvalidArgument(_)),
            ) => fail_with(&e),
            Err(_) => {
                let now = lib!(h.ctl.is_device_online(&who));
                // SAFETY: checked above.
                unsafe { put(online, now) };
                sd_result::SD_OK
            }
        }
    })
}

/// Takes the oldest webhook event and writes it as JSON; `SD_NO_EVENT` when none is queued. An event that
/// does not fit the buffer is kept and returned by the next call.
///
/// # Safety
/// `ctl` valid; `buf` valid for `len` bytes (or NULL with `len` 0); `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_pull_event(
    ctl: *const sd_controller,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(needed, "needed");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let mut pending = h.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.is_none() {
            match h.ctl.pull_webhook_event() {
                Some(e) => *pending = Some(tri!(json(&e))),
                None => return fail(sd_result::SD_NO_EVENT, "no webhook event is queued"),
            }
        }
        let text = pending.as_deref().unwrap_or_default();
        // SAFETY: forwarded contract.
        let r = unsafe { write_text(text, buf, len, needed) };
        if r == sd_result::SD_OK {
            *pending = None;
        }
        r
    })
}

/// The wake flag's descriptor, or -1 when the controller has no wake flag. It is readable exactly while the
/// wake flag is set (level-triggered): a queued webhook event sets the flag, and only `sd_wake_clear` clears
/// it. Pulling every event does not, so poll keeps returning at once until `sd_wake_clear` is called. On
/// `POLLIN`: `sd_wake_clear`, then `sd_pull_event` until `SD_NO_EVENT`. Owned by the controller: never read
/// or close it; valid until `sd_close`.
///
/// # Safety
/// `ctl` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_wake_fd(ctl: *const sd_controller) -> c_int {
    guard(|| {
        if ctl.is_null() {
            let _ = fail(sd_result::SD_NULL_PARAMETER, "argument 'ctl' is NULL");
            return -1;
        }
        #[cfg(unix)]
        {
            // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
            let h = unsafe { handle(ctl) };
            h.wake.as_ref().and_then(WakeFlag::fd).unwrap_or(-1)
        }
        #[cfg(not(unix))]
        {
            -1
        }
    })
}

/// Clears the wake flag (the descriptor stops being readable). Call it before pulling events, so an event
/// arriving meanwhile sets the flag again and none is missed.
///
/// # Safety
/// `ctl` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_wake_clear(ctl: *const sd_controller) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        if let Some(w) = &h.wake {
            w.clear();
        }
        sd_result::SD_OK
    })
}

/// Waits until the wake flag is set (`SD_OK`) or `timeout_ms` passes (`SD_TIMEOUT`); a negative timeout
/// waits indefinitely. `SD_INVALID_PARAMETER` when the controller was opened without a wake flag.
///
/// # Safety
/// `ctl` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_wake_wait(ctl: *const sd_controller, timeout_ms: i64) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let Some(w) = &h.wake else {
            return fail(
                sd_result::SD_INVALID_PARAMETER,
                "the controller was opened with wake = false",
            );
        };
        let timeout = if timeout_ms < 0 {
            Duration::from_secs(u64::from(u32::MAX))
        } else {
            Duration::from_millis(timeout_ms as u64)
        };
        if w.wait(timeout) {
            sd_result::SD_OK
        } else {
            fail(
                sd_result::SD_TIMEOUT,
                format!("no webhook event within {timeout_ms} ms"),
            )
        }
    })
}

/// Writes the webhook listener's address (`"127.0.0.1:8787"`, the real port even when 0 was configured);
/// `SD_NOT_FOUND` when the listener is not running.
///
/// # Safety
/// `ctl` valid; `buf` valid for `len` bytes (or NULL with `len` 0); `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_webhook_address(
    ctl: *const sd_controller,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let Some(addr) = h.ctl.webhook_address() else {
            return fail(
                sd_result::SD_NOT_FOUND,
                "the webhook listener is not running (enable it in the configuration)",
            );
        };
        // SAFETY: forwarded contract.
        unsafe { write_text(&addr.to_string(), buf, len, needed) }
    })
}

/// Writes the status listing of every device (the `print_device_status` text).
///
/// # Safety
/// `ctl` valid; `buf` valid for `len` bytes (or NULL with `len` 0); `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_print_device_status(
    ctl: *const sd_controller,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let text = lib!(h.ctl.print_device_status(None));
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// Writes the model library listing. `mode` is `"brief"` or `"detailed"`; `model` limits it to one model
/// (NULL for all). `ctl` may be NULL to list the built-in library before opening anything.
///
/// # Safety
/// `ctl` NULL or valid; `mode` a valid C string; `model` NULL or a valid C string; `buf`/`needed` as usual.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_print_model_library(
    ctl: *const sd_controller,
    mode: *const c_char,
    model: *const c_char,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        // SAFETY: forwarded contract.
        let mode: PrintMode = lib!(tri!(unsafe { required_text(mode, "mode") }).parse());
        // SAFETY: forwarded contract.
        let model = tri!(unsafe { text(model, "model") });
        let text = if ctl.is_null() {
            lib!(ModelLibrary::embedded().print(mode, model))
        } else {
            // SAFETY: `ctl` is non-NULL in this branch and open by the caller's contract.
            let h = unsafe { handle(ctl) };
            lib!(h.ctl.print_model_library(mode, model))
        };
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// Shared body of the boolean state getters.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `state` valid.
unsafe fn component_state(
    ctl: *const sd_controller,
    kind: ComponentKind,
    name: *const c_char,
    id: i64,
    state: *mut bool,
) -> sd_result {
    require!(ctl, "ctl");
    require!(state, "state");
    // SAFETY: forwarded contract.
    let who = tri!(unsafe { identity(name, id) });
    // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
    let h = unsafe { handle(ctl) };
    let ctl = &h.ctl;
    let (on, name, device) = match kind {
        ComponentKind::Input => {
            let c = lib!(ctl.input(&who));
            (c.state, c.name, c.device_id)
        }
        _ => {
            let c = lib!(ctl.output(&who));
            (c.state, c.name, c.device_id)
        }
    };
    let Some(on) = on else {
        let device = lib!(ctl.device(device)).label();
        let what = format!("the state of {kind} '{name}'");
        return fail_with(&crate::Error::Unknown { device, what });
    };
    // SAFETY: checked above.
    unsafe { put(state, on) };
    sd_result::SD_OK
}

/// Whether an output is on, as last read (no device I/O). `SD_UNKNOWN` when the device has not reported it
/// (not read yet, or the output does not exist in the device's current profile): unknown is never `false`.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `state` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_output_state(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    state: *mut bool,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { component_state(ctl, ComponentKind::Output, name, id, state) })
}

/// Whether an input is on, as last read (no device I/O). `SD_UNKNOWN` when the device has not reported it
/// (not read yet, or an input in button mode, which has no state): unknown is never `false`.
///
/// # Safety
/// As for `sd_output_state`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_input_state(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    state: *mut bool,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { component_state(ctl, ComponentKind::Input, name, id, state) })
}

/// A meter's readings as last read, with a validity flag per value.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `reading` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_meter(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    reading: *mut sd_meter_reading,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(reading, "reading");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let m = lib!(h.ctl.meter(&who));
        let r = sd_meter_reading {
            power: m.power.unwrap_or(0.0),
            voltage: m.voltage.unwrap_or(0.0),
            current: m.current.unwrap_or(0.0),
            power_factor: m.power_factor.unwrap_or(0.0),
            energy: m.energy.unwrap_or(0.0),
            returned_energy: m.returned_energy.unwrap_or(0.0),
            has_power: m.power.is_some(),
            has_voltage: m.voltage.is_some(),
            has_current: m.current.is_some(),
            has_power_factor: m.power_factor.is_some(),
            has_energy: m.energy.is_some(),
            has_returned_energy: m.returned_energy.is_some(),
        };
        // SAFETY: checked above.
        unsafe { put(reading, r) };
        sd_result::SD_OK
    })
}

/// A cover as last read (no device I/O): what it is doing, its position and whether it is calibrated, each
/// with a validity flag (`SD_COVER_UNKNOWN` / `has_` false until the device reports them).
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `cover` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_cover(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    cover: *mut sd_cover_reading,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(cover, "cover");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let c = lib!(h.ctl.cover(&who));
        let r = sd_cover_reading {
            state: c.state.into(),
            position: c.position.unwrap_or(0.0),
            calibrated: c.calibrated.unwrap_or(false),
            has_position: c.position.is_some(),
            has_calibrated: c.calibrated.is_some(),
        };
        // SAFETY: checked above.
        unsafe { put(cover, r) };
        sd_result::SD_OK
    })
}

/// A sensor's value as last read (no device I/O), in its unit (`°C`, `%RH` or `V`; the JSON of
/// `sd_component(SD_KIND_SENSOR, ...)` names it). `SD_UNKNOWN` when the device has not reported it (not read
/// yet, a sleeping device that has not woken up, or a `RequiresOutput` that was never on): never 0.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `value` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_sensor_value(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    value: *mut f64,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(value, "value");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let s = lib!(h.ctl.sensor(&who));
        let Some(v) = s.value else {
            let device = lib!(h.ctl.device(s.device_id)).label();
            let what = format!("the {} of sensor '{}'", s.quantity, s.name);
            return fail_with(&crate::Error::Unknown { device, what });
        };
        // SAFETY: checked above.
        unsafe { put(value, v) };
        sd_result::SD_OK
    })
}

/// Shared body of the cover operations.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string.
unsafe fn move_cover(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    action: CoverAction,
) -> sd_result {
    require!(ctl, "ctl");
    // SAFETY: forwarded contract.
    let who = tri!(unsafe { identity(name, id) });
    // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
    let h = unsafe { handle(ctl) };
    lib!(h.ctl.move_cover(&who, action));
    sd_result::SD_OK
}

/// Starts opening a cover fully (device I/O). `SD_OK` means the device took the command; the move takes the
/// motor's time, and `sd_cover` then shows `SD_COVER_OPENING` until the device reports the end.
///
/// One function per action rather than one `sd_move_cover(..., action, position)`: each call says what it
/// does where it is written, no out-of-range action value can be passed (a C enum argument may hold any
/// `int`), and a position is only taken where it means something (`sd_set_cover_position`). Not to be
/// confused with `sd_close`, which closes the controller.
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_open_cover(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { move_cover(ctl, name, id, CoverAction::Open) })
}

/// Starts closing a cover fully (device I/O); as for `sd_open_cover`. (`sd_close` closes the controller.)
///
/// # Safety
/// As for `sd_open_cover`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_close_cover(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { move_cover(ctl, name, id, CoverAction::Close) })
}

/// Stops a moving cover where it is (device I/O); as for `sd_open_cover`.
///
/// # Safety
/// As for `sd_open_cover`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_stop_cover(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { move_cover(ctl, name, id, CoverAction::Stop) })
}

/// Sends a cover to `position` % (0 closed … 100 open; device I/O); as for `sd_open_cover`.
/// `SD_INVALID_PARAMETER` for a position over 100 (nothing is sent); `SD_UNSUPPORTED` when the cover is not
/// calibrated (it does not know its end positions: calibrate it in the vendor app).
///
/// # Safety
/// As for `sd_open_cover`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_set_cover_position(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    position: u8,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { move_cover(ctl, name, id, CoverAction::Position(position)) })
}

/// Whether the device was online at its last contact (no device I/O; `sd_read_device_online` reads it now).
///
/// # Safety
/// `ctl` valid; `name` NULL or a valid C string; `online` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_is_device_online(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    online: *mut bool,
) -> sd_result {
    guard(|| {
        require!(ctl, "ctl");
        require!(online, "online");
        // SAFETY: forwarded contract.
        let who = tri!(unsafe { identity(name, id) });
        // SAFETY: `ctl` is non-NULL (checked above) and open by the caller's contract.
        let h = unsafe { handle(ctl) };
        let now = lib!(h.ctl.is_device_online(&who));
        // SAFETY: checked above.
        unsafe { put(online, now) };
        sd_result::SD_OK
    })
}

// ---- Deprecated names (renamed in 0.2.0 by the naming rule: sd_read_* do device I/O, other getters return the
// last known state). Each keeps the meaning it had in 0.1.0 and stays for at least one release; the header
// marks them deprecated, so the compiler names the replacement.

/// Deprecated (0.2.0): the 0.1.0 name of `sd_devices` — every device's object as a JSON array, as last read
/// (no device I/O). Same arguments, same meaning.
///
/// # Safety
/// As for `sd_devices`.
#[deprecated(
    since = "0.2.0",
    note = "renamed sd_devices (same arguments and meaning: last known state, no device I/O)"
)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_devices(
    ctl: *const sd_controller,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { sd_devices(ctl, buf, len, needed) })
}

/// Deprecated (0.2.0): the 0.1.0 name of `sd_output_state` — whether an output is on, as last read (no device
/// I/O). Same arguments, same meaning (`SD_UNKNOWN` when not reported).
///
/// # Safety
/// As for `sd_output_state`.
#[deprecated(
    since = "0.2.0",
    note = "renamed sd_output_state (same arguments and meaning: last known state, no device I/O)"
)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_output_state(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    state: *mut bool,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { component_state(ctl, ComponentKind::Output, name, id, state) })
}

/// Deprecated (0.2.0): the 0.1.0 name of `sd_input_state` — whether an input is on, as last read (no device
/// I/O). Same arguments, same meaning (`SD_UNKNOWN` when not reported).
///
/// # Safety
/// As for `sd_input_state`.
#[deprecated(
    since = "0.2.0",
    note = "renamed sd_input_state (same arguments and meaning: last known state, no device I/O)"
)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_input_state(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    state: *mut bool,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { component_state(ctl, ComponentKind::Input, name, id, state) })
}

/// Deprecated (0.2.0): the 0.1.0 name of `sd_meter` — a meter's readings as last read (no device I/O), with a
/// validity flag per value. Same arguments, same meaning.
///
/// # Safety
/// As for `sd_meter`.
#[deprecated(
    since = "0.2.0",
    note = "renamed sd_meter (same arguments and meaning: last known state, no device I/O)"
)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_meter(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    reading: *mut sd_meter_reading,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { sd_meter(ctl, name, id, reading) })
}

/// Deprecated (0.2.0): the 0.1.0 name of `sd_is_device_online` — whether the device was online at its last
/// contact, as last known (NO device I/O: what `sd_get_device_online` did in 0.1.0, so it stays a cheap
/// getter; `sd_read_device_online` reads the device now). Same arguments, same meaning.
///
/// # Safety
/// As for `sd_is_device_online`.
#[deprecated(
    since = "0.2.0",
    note = "renamed sd_is_device_online (same arguments and meaning: last known, no device I/O; sd_read_device_online reads the device)"
)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_get_device_online(
    ctl: *const sd_controller,
    name: *const c_char,
    id: i64,
    online: *mut bool,
) -> sd_result {
    // SAFETY: forwarded contract.
    guard(|| unsafe { sd_is_device_online(ctl, name, id, online) })
}

thread_local! {
    /// The JSON of this thread's last `sd_discover`, for `sd_discovered`.
    static LAST_DISCOVERY: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Longest `sd_discover` listening time: 10 minutes.
const MAX_DISCOVER_MS: u32 = 600_000;

/// Finds devices on the local network and writes them as a JSON array of objects (`MacAddress`
/// `"AA:BB:CC:DD:EE:FF"` or null, `Model`, `ReportedModel`, `Generation`, `Address`, `Port`, `Name`, `Hostname`,
/// `Firmware`, `AuthRequired`). Listens for mDNS announcements for `timeout_ms` (1 to 600000) on the
/// interfaces with a private or link-local address, then confirms each candidate with one HTTP request (2 s more
/// for each 32 candidates). Blocks the calling thread meanwhile. `ctl` may be NULL (no configuration needed); with a
/// controller, each object also has `"Configured"`: `false` or the configured device's name.
///
/// When `buf` is too small: `SD_INSUFFICIENT_SIZE` with `*needed`; the result is kept for this thread, so call
/// `sd_discovered` with a buffer of `*needed` bytes instead of discovering again.
///
/// # Safety
/// `ctl` NULL or valid; `buf` NULL (with `len` 0) or writable for `len` bytes; `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_discover(
    ctl: *const sd_controller,
    timeout_ms: u32,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        if timeout_ms == 0 || timeout_ms > MAX_DISCOVER_MS {
            return fail(
                sd_result::SD_INVALID_PARAMETER,
                format!(
                    "timeout_ms {timeout_ms} is out of range; use 1 to {MAX_DISCOVER_MS} milliseconds (3000 is usual)"
                ),
            );
        }
        let timeout = Duration::from_millis(u64::from(timeout_ms));
        let found = if ctl.is_null() {
            lib!(crate::discover(timeout))
        } else {
            // SAFETY: `ctl` is non-NULL in this branch and open by the caller's contract.
            let h = unsafe { handle(ctl) };
            lib!(h.ctl.discover(timeout))
        };
        let text = tri!(json(&found));
        LAST_DISCOVERY.with(|l| *l.borrow_mut() = Some(text.clone()));
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}

/// Writes this thread's last `sd_discover` result again (no network). `SD_NOT_FOUND` when this thread has not
/// discovered yet.
///
/// # Safety
/// `buf` NULL (with `len` 0) or writable for `len` bytes; `needed` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sd_discovered(
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> sd_result {
    guard(|| {
        let Some(text) = LAST_DISCOVERY.with(|l| l.borrow().clone()) else {
            return fail(
                sd_result::SD_NOT_FOUND,
                "no discovery yet on this thread: call sd_discover first (on the same thread)",
            );
        };
        // SAFETY: forwarded contract.
        unsafe { write_text(&text, buf, len, needed) }
    })
}
