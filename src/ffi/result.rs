//! `sd_result`: the one result code of the C API, with explicit numbers that are never reused.

use crate::Error;

/// Result of every fallible `sd_` function. `SD_OK` is 0; numbers are grouped (1xx argument and usage, 2xx
/// configuration and start-up, 3xx devices, 4xx local system) and never change meaning.
#[repr(C)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sd_result {
    /// Success.
    SD_OK = 0,
    /// A required pointer argument was NULL.
    SD_NULL_PARAMETER = 100,
    /// An argument is not acceptable (invalid UTF-8, unknown kind or mode, negative size, ...).
    SD_INVALID_PARAMETER = 101,
    /// The caller's buffer is too small; `*needed` holds the size required (including the final NUL).
    SD_INSUFFICIENT_SIZE = 102,
    /// No device, component or model matches the identity.
    SD_NOT_FOUND = 103,
    /// No webhook event is queued.
    SD_NO_EVENT = 104,
    /// Reserved: the controller was closed. The C API does not return it, because `sd_close` sets the caller's
    /// pointer to NULL (a later call gets `SD_NULL_PARAMETER`; using a copy of a closed pointer is undefined
    /// behaviour). The Go and Python bindings report their own "closed" error.
    SD_CLOSED = 105,
    /// A Rust panic was caught at the API boundary; the message is in `sd_last_error_message`.
    SD_PANIC = 106,
    /// The configuration (or a dictionary extension) could not be read or failed validation.
    SD_CONFIG = 200,
    /// Valid settings could not be turned into an installation (component counts, unknown model, ...).
    SD_INIT = 201,
    /// The logger could not be set up.
    SD_LOGGER = 202,
    /// The model library could not be loaded.
    SD_MODEL_LIBRARY = 203,
    /// A device did not answer in time, after all retries.
    SD_TIMEOUT = 300,
    /// The device is marked offline and the operation was not attempted (a simulated device whose file says
    /// `Online: false`). A real device that cannot be reached gives `SD_TIMEOUT` or `SD_DEVICE`.
    SD_OFFLINE = 301,
    /// The device could not be used, after all retries: the connection failed (refused, reset, answer cut
    /// short, host not found), or the device answered with an error or an unusable answer (HTTP error status,
    /// a redirect, invalid JSON, an RPC error). The message says which.
    SD_DEVICE = 302,
    /// The operation is not possible on this device.
    SD_UNSUPPORTED = 303,
    /// A simulation file is unreadable.
    SD_SIMULATION = 304,
    /// The device's driver panicked (a bug); the device is offline until its driver is rebuilt after a back-off.
    SD_WORKER_FAILED = 305,
    /// The device refused the credentials.
    SD_AUTH = 306,
    /// The value is unknown: the device has not reported it (not read yet, or the device does not have that
    /// component in its current profile). Never reported as `false`.
    SD_UNKNOWN = 307,
    /// Another device answers at the device's address (its MAC is not the configured one, or not the one the
    /// device had earlier): nothing was switched or read from it; the device is offline until the right MAC
    /// answers again. The message names both MACs and the address.
    SD_WRONG_DEVICE = 308,
    /// The device sleeps between reports (a battery device reporting through the outbound WebSocket): the
    /// command was not sent; its snapshot keeps the last report (`Sleeping`, `LastSeen`).
    SD_SLEEPING = 309,
    /// A firmware update did not end with the new version, or was not started (nothing on offer, another
    /// update running, refused by the device, not back in time, back with the old version); the message says
    /// which.
    SD_FIRMWARE = 310,
    /// The device's TLS certificate was refused (HTTPS devices): not the pinned one, or not valid under the
    /// configured CA. The message names the fingerprints and how to accept a new certificate (`sdctl trust`).
    SD_CERTIFICATE = 311,
    /// The meter keeps no energy history of its own (a switch's or plug's meter, Tasmota, a simulated device):
    /// there is no history to read, rather than an empty one that would look like no energy.
    SD_NO_HISTORY = 312,
    /// A local I/O failure (a file, a socket, a thread).
    SD_IO = 400,
}

impl sd_result {
    /// Every code, for `sd_result_name` (a new variant must be added here and to `name`).
    pub(crate) const ALL: [sd_result; 26] = [
        sd_result::SD_OK,
        sd_result::SD_NULL_PARAMETER,
        sd_result::SD_INVALID_PARAMETER,
        sd_result::SD_INSUFFICIENT_SIZE,
        sd_result::SD_NOT_FOUND,
        sd_result::SD_NO_EVENT,
        sd_result::SD_CLOSED,
        sd_result::SD_PANIC,
        sd_result::SD_CONFIG,
        sd_result::SD_INIT,
        sd_result::SD_LOGGER,
        sd_result::SD_MODEL_LIBRARY,
        sd_result::SD_TIMEOUT,
        sd_result::SD_OFFLINE,
        sd_result::SD_DEVICE,
        sd_result::SD_UNSUPPORTED,
        sd_result::SD_SIMULATION,
        sd_result::SD_WORKER_FAILED,
        sd_result::SD_AUTH,
        sd_result::SD_UNKNOWN,
        sd_result::SD_WRONG_DEVICE,
        sd_result::SD_SLEEPING,
        sd_result::SD_FIRMWARE,
        sd_result::SD_CERTIFICATE,
        sd_result::SD_NO_HISTORY,
        sd_result::SD_IO,
    ];

    /// The code for a library error (the one place that maps errors to codes).
    pub(crate) fn from_error(e: &Error) -> Self {
        match e {
            Error::Config { .. } => sd_result::SD_CONFIG,
            Error::Logger(_) => sd_result::SD_LOGGER,
            Error::ModelLibrary(_) => sd_result::SD_MODEL_LIBRARY,
            Error::Init(_) => sd_result::SD_INIT,
            Error::NotFound { .. } => sd_result::SD_NOT_FOUND,
            Error::InvalidArgument(_) => sd_result::SD_INVALID_PARAMETER,
            Error::Timeout { .. } => sd_result::SD_TIMEOUT,
            Error::Offline { .. } => sd_result::SD_OFFLINE,
            Error::Device { .. } | Error::Rpc { .. } => sd_result::SD_DEVICE,
            Error::Auth { .. } => sd_result::SD_AUTH,
            Error::Unsupported { .. } => sd_result::SD_UNSUPPORTED,
            Error::Unknown { .. } => sd_result::SD_UNKNOWN,
            Error::Simulation { .. } => sd_result::SD_SIMULATION,
            Error::WorkerFailed { .. } => sd_result::SD_WORKER_FAILED,
            Error::WrongDevice { .. } => sd_result::SD_WRONG_DEVICE,
            Error::Sleeping { .. } => sd_result::SD_SLEEPING,
            Error::Firmware { .. } => sd_result::SD_FIRMWARE,
            Error::Certificate { .. } => sd_result::SD_CERTIFICATE,
            Error::NoHistory { .. } => sd_result::SD_NO_HISTORY,
            Error::Closed => sd_result::SD_CLOSED,
            Error::Io { .. } => sd_result::SD_IO,
        }
    }

    /// The constant's name as text.
    pub(crate) fn name(self) -> &'static std::ffi::CStr {
        match self {
            sd_result::SD_OK => c"SD_OK",
            sd_result::SD_NULL_PARAMETER => c"SD_NULL_PARAMETER",
            sd_result::SD_INVALID_PARAMETER => c"SD_INVALID_PARAMETER",
            sd_result::SD_INSUFFICIENT_SIZE => c"SD_INSUFFICIENT_SIZE",
            sd_result::SD_NOT_FOUND => c"SD_NOT_FOUND",
            sd_result::SD_NO_EVENT => c"SD_NO_EVENT",
            sd_result::SD_CLOSED => c"SD_CLOSED",
            sd_result::SD_PANIC => c"SD_PANIC",
            sd_result::SD_CONFIG => c"SD_CONFIG",
            sd_result::SD_INIT => c"SD_INIT",
            sd_result::SD_LOGGER => c"SD_LOGGER",
            sd_result::SD_MODEL_LIBRARY => c"SD_MODEL_LIBRARY",
            sd_result::SD_TIMEOUT => c"SD_TIMEOUT",
            sd_result::SD_OFFLINE => c"SD_OFFLINE",
            sd_result::SD_DEVICE => c"SD_DEVICE",
            sd_result::SD_UNSUPPORTED => c"SD_UNSUPPORTED",
            sd_result::SD_SIMULATION => c"SD_SIMULATION",
            sd_result::SD_WORKER_FAILED => c"SD_WORKER_FAILED",
            sd_result::SD_AUTH => c"SD_AUTH",
            sd_result::SD_UNKNOWN => c"SD_UNKNOWN",
            sd_result::SD_WRONG_DEVICE => c"SD_WRONG_DEVICE",
            sd_result::SD_SLEEPING => c"SD_SLEEPING",
            sd_result::SD_FIRMWARE => c"SD_FIRMWARE",
            sd_result::SD_CERTIFICATE => c"SD_CERTIFICATE",
            sd_result::SD_NO_HISTORY => c"SD_NO_HISTORY",
            sd_result::SD_IO => c"SD_IO",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sd_result;

    /// `sd_result_name` finds every code through `ALL`; a code missing there would be named
    /// `SD_UNRECOGNISED` (SD_UNKNOWN was, when it was added).
    #[test]
    fn every_code_is_listed_once_under_its_own_name() {
        let names: Vec<_> = sd_result::ALL.iter().map(|r| r.name()).collect();
        for (r, n) in sd_result::ALL.iter().zip(&names) {
            assert!(n.to_str().unwrap().starts_with("SD_"), "{r:?}");
            assert_eq!(names.iter().filter(|m| *m == n).count(), 1, "{r:?}");
            assert_eq!(format!("{r:?}"), n.to_str().unwrap());
        }
        // SD_UNKNOWN was once left out, and named SD_UNKNOWN only by the fallback's accident.
        for r in [
            sd_result::SD_PANIC,
            sd_result::SD_MODEL_LIBRARY,
            sd_result::SD_UNKNOWN,
            sd_result::SD_IO,
        ] {
            assert!(sd_result::ALL.contains(&r), "{r:?}");
        }
    }
}
