//! The one error type of the crate.

use std::fmt;
use std::path::PathBuf;

/// A single configuration problem: where it is (`SmartDevices.Devices[2].Outputs[0].Colour`) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Full key path in the document, or a device label for rules that span keys.
    pub path: String,
    /// What is wrong and, where possible, how to fix it.
    pub message: String,
}

impl Problem {
    /// Builds a problem from a path and a message.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Everything that can go wrong in smartdev. Every variant names what failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration (or a validation dictionary or schema extension) could not be read, parsed or validated.
    /// Holds every problem found, not only the first.
    Config {
        /// Where the configuration came from (file path or `<string>`).
        source: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
    /// The logger described by the `Files` block could not be set up.
    Logger(String),
    /// The model library could not be loaded or is inconsistent.
    ModelLibrary(String),
    /// The controller could not be initialised from valid settings (component counts, unknown model, duplicate
    /// names or IDs, ...). Holds every rule violation found.
    Init(Vec<Problem>),
    /// No device or component matches the identity.
    NotFound {
        /// `device`, `input`, `output`, `meter`, `temp_probe` or `model`.
        kind: &'static str,
        /// The identity as given (`ID 7` or `name 'Kitchen'`).
        identity: String,
        /// `; did you mean 'Kitchen'?` when a known name is close, else empty.
        hint: String,
    },
    /// A request argument is not usable (e.g. an unknown print mode).
    InvalidArgument(String),
    /// A device did not answer in time, after all retries.
    Timeout {
        /// Device label `Name (ID: n)`.
        device: String,
        /// The request that timed out.
        request: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The device is offline (a simulated device whose file says `Online: false`, or a device that failed its
    /// last contact), so the operation was not attempted.
    Offline {
        /// Device label `Name (ID: n)`.
        device: String,
    },
    /// The device could not be used: the connection failed (refused, reset, cut short, host not found), or it
    /// answered with an error, an unexpected status or an unreadable body.
    Device {
        /// Device label `Name (ID: n)`.
        device: String,
        /// What went wrong.
        message: String,
    },
    /// The device refused the credentials, or needs a password and none is configured. Not retried; the device
    /// is reachable, so it stays online.
    Auth {
        /// Device label `Name (ID: n)`.
        device: String,
        /// What to fix.
        message: String,
    },
    /// A Gen2+ device answered an RPC call with an error object.
    Rpc {
        /// Device label `Name (ID: n)`.
        device: String,
        /// The RPC method called.
        method: String,
        /// The device's error code (e.g. -105 "not found", 401 "unauthorized").
        code: i64,
        /// The device's error message.
        message: String,
    },
    /// The operation is not possible on this device (e.g. inputs on Tasmota).
    Unsupported {
        /// Device label `Name (ID: n)`.
        device: String,
        /// What is not supported.
        message: String,
    },
    /// A value the device has not reported: not read yet, or a component the device does not have in its
    /// current profile. Unknown is never reported as `false` or 0.
    Unknown {
        /// Device label `Name (ID: n)`.
        device: String,
        /// What is unknown, e.g. `the state of output 'Pump'`.
        what: String,
    },
    /// A simulation file could not be read or written. The file is left as it was.
    Simulation {
        /// Device label `Name (ID: n)`.
        device: String,
        /// The simulation file.
        file: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The device's driver panicked (a bug): the device is offline until its driver is rebuilt after a back-off
    /// (1 s, doubling per failure in a row, at most 5 minutes).
    WorkerFailed {
        /// Device label `Name (ID: n)`.
        device: String,
        /// The panic message.
        message: String,
    },
    /// The device at the configured address is another device: it reports another MAC address than the
    /// configured `MAC:` (or, with none configured, than the one the device had earlier in this process). It is
    /// never switched, moved or read as the configured device; the device stays offline until the right MAC
    /// answers at the address again.
    WrongDevice {
        /// Device label `Name (ID: n)`.
        device: String,
        /// The address that answered (host name or IP, with the port when one is configured).
        address: String,
        /// The MAC the device should have (`AA:BB:CC:DD:EE:FF`).
        expected: String,
        /// Whether `expected` is the configured `MAC` (else the MAC the device had earlier in this process).
        configured: bool,
        /// The MAC that answered (`AA:BB:CC:DD:EE:FF`).
        found: String,
    },
    /// The device sleeps between reports (a battery device reporting through the outbound WebSocket): it cannot
    /// take a command or be read now. Its snapshot keeps the last report (`Sleeping`, `LastSeen`); the device
    /// answers only while awake, which it decides.
    Sleeping {
        /// Device label `Name (ID: n)`.
        device: String,
        /// When it last reported (RFC 3339), if it did since open.
        last_seen: Option<String>,
    },
    /// A firmware update did not end with the device running the new version, or was not started: `failure`
    /// says why (nothing on offer, another update running, refused, not back in time, back with the old
    /// version), `message` says it in words.
    Firmware {
        /// Device label `Name (ID: n)`.
        device: String,
        /// Why, for code to decide on.
        failure: crate::firmware::UpdateFailure,
        /// Why, in words.
        message: String,
    },
    /// The device's TLS certificate was refused (a device reached over HTTPS): not the pinned one (`CertSha256`,
    /// or the one pinned at first use in the trust file), or not valid under `CaFile` (issuer, dates, host
    /// name). Nothing was sent to it; the device is offline until a trusted certificate answers. The message
    /// says how to accept a new certificate (`sdctl trust DEVICE`, [`crate::trust_certificate`]).
    Certificate {
        /// Device label `Name (ID: n)`.
        device: String,
        /// What was wrong and how to fix it.
        message: String,
        /// SHA-256 fingerprint (`AB:CD:…`) of the certificate the device presented, when one was seen.
        presented: Option<String>,
        /// The fingerprint that was expected (pinned or configured), when one was.
        expected: Option<String>,
    },
    /// The meter keeps no history of its own (a switch's or plug's meter, Tasmota, a simulated device): there
    /// is nothing to read back, so no history is given rather than an empty one that would look like no energy.
    NoHistory {
        /// Device label `Name (ID: n)`.
        device: String,
        /// Which meter, and what to do instead.
        message: String,
    },
    /// The controller has been closed.
    Closed,
    /// A local I/O failure outside device communication (reading a config file, spawning a thread).
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// Builds a `Config` error holding one problem.
    pub(crate) fn config_one(source: &str, path: &str, message: impl Into<String>) -> Self {
        Error::Config {
            source: source.to_string(),
            problems: vec![Problem::new(path, message)],
        }
    }

    /// The configuration or init problems this error carries (empty for other kinds).
    pub fn problems(&self) -> &[Problem] {
        match self {
            Error::Config { problems, .. } | Error::Init(problems) => problems,
            _ => &[],
        }
    }

    /// The device label this error is about, if any.
    pub fn device(&self) -> Option<&str> {
        match self {
            Error::Timeout { device, .. }
            | Error::Offline { device }
            | Error::Device { device, .. }
            | Error::Auth { device, .. }
            | Error::Rpc { device, .. }
            | Error::Unsupported { device, .. }
            | Error::Unknown { device, .. }
            | Error::Simulation { device, .. }
            | Error::WorkerFailed { device, .. }
            | Error::WrongDevice { device, .. }
            | Error::Sleeping { device, .. }
            | Error::Firmware { device, .. }
            | Error::Certificate { device, .. }
            | Error::NoHistory { device, .. } => Some(device),
            _ => None,
        }
    }

    /// The message without the leading `device <label>:`, for places that already name the device (its
    /// `LastError`, log lines about it).
    pub fn reason(&self) -> String {
        let full = self.to_string();
        if let Error::Offline { .. } = self {
            return "offline".into();
        }
        match self.device() {
            Some(d) => full
                .strip_prefix(&format!("device {d}: "))
                .map(str::to_string)
                .unwrap_or(full),
            None => full,
        }
    }

    /// True for errors caused by the configuration, settings or arguments rather than by a device.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::Config { .. }
                | Error::Logger(_)
                | Error::ModelLibrary(_)
                | Error::Init(_)
                | Error::NotFound { .. }
                | Error::InvalidArgument(_)
        )
    }
}

fn write_problems(f: &mut fmt::Formatter<'_>, problems: &[Problem]) -> fmt::Result {
    for p in problems {
        write!(f, "\n  - {p}")?;
    }
    Ok(())
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { source, problems } => {
                write!(f, "configuration {source}: {} problem(s)", problems.len())?;
                write_problems(f, problems)
            }
            Error::Logger(m) => write!(f, "logger: {m}"),
            Error::ModelLibrary(m) => write!(f, "model library: {m}"),
            Error::Init(problems) => {
                write!(f, "initialisation failed: {} problem(s)", problems.len())?;
                write_problems(f, problems)
            }
            Error::NotFound {
                kind,
                identity,
                hint,
            } => write!(f, "{kind} {identity} not found{hint}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Timeout {
                device,
                request,
                attempts,
            } => write!(
                f,
                "device {device}: {request} timed out after {}",
                attempts_text(*attempts)
            ),
            Error::Offline { device } => write!(f, "device {device} is offline"),
            Error::Device { device, message } => write!(f, "device {device}: {message}"),
            Error::Auth { device, message } => {
                write!(f, "device {device}: authentication failed: {message}")
            }
            Error::Rpc {
                device,
                method,
                code,
                message,
            } => write!(
                f,
                "device {device}: {method} failed with error {code}: {message}"
            ),
            Error::Unsupported { device, message } => {
                write!(f, "device {device}: not supported: {message}")
            }
            Error::Unknown { device, what } => write!(
                f,
                "device {device}: {what} is unknown: the device has not reported it (read it again when the device is online; if it persists, the device does not have it in its current profile)"
            ),
            Error::Simulation {
                device,
                file,
                message,
            } => write!(
                f,
                "device {device}: simulation file {}: {message}",
                file.display()
            ),
            Error::WorkerFailed { device, message } => {
                write!(f, "device {device}: worker failed: {message}")
            }
            Error::WrongDevice {
                device,
                address,
                expected,
                found,
                configured: true,
            } => write!(
                f,
                "device {device}: {address} answers as {found}, not the configured {expected} (another device took its address?); nothing was switched; check the MAC or the address in the configuration"
            ),
            Error::WrongDevice {
                device,
                address,
                expected,
                found,
                configured: false,
            } => write!(
                f,
                "device {device}: {address} answers as {found}, not {expected} as it did before (another device took its address?); nothing was switched; check the address in the configuration, or, if the device was replaced on purpose, give its MAC in the configuration and open again"
            ),
            Error::Sleeping { device, last_seen } => match last_seen {
                Some(at) => write!(
                    f,
                    "device {device} is asleep (a battery device; last report {at}): it takes no command until it wakes and reports"
                ),
                None => write!(
                    f,
                    "device {device} is asleep (a battery device; no report since open): it takes no command until it wakes and reports"
                ),
            },
            Error::Firmware {
                device, message, ..
            } => write!(f, "device {device}: firmware update: {message}"),
            Error::Certificate {
                device, message, ..
            } => write!(f, "device {device}: TLS certificate refused: {message}"),
            Error::NoHistory { device, message } => {
                write!(
                    f,
                    "device {device}: this device keeps no history: {message}"
                )
            }
            Error::Closed => f.write_str("controller is closed"),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `1 attempt`, `3 attempts`.
pub(crate) fn attempts_text(n: u32) -> String {
    if n == 1 {
        "1 attempt".into()
    } else {
        format!("{n} attempts")
    }
}
