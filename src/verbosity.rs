//! `Verbosity`, the `Files` block's log levels: a leaf shared by the settings (`config/settings.rs`, which hold
//! it) and the logger set-up (`logging.rs`, which reads the settings; the mapping table is there).

use std::str::FromStr;

use log::LevelFilter;

use crate::error::{Error, Result};

/// A verbosity value of the `Files` block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verbosity {
    /// Nothing.
    None,
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warning,
    /// Up to informational messages.
    Summary,
    /// Up to debug messages.
    Detailed,
    /// Everything, including request/response bodies when `AllowDebugLogging` is true.
    Debug,
    /// Same as `Debug`.
    All,
}

impl Verbosity {
    /// The `log` level this verbosity lets through.
    pub fn level(self) -> LevelFilter {
        match self {
            Verbosity::None => LevelFilter::Off,
            Verbosity::Error => LevelFilter::Error,
            Verbosity::Warning => LevelFilter::Warn,
            Verbosity::Summary => LevelFilter::Info,
            Verbosity::Detailed => LevelFilter::Debug,
            Verbosity::Debug | Verbosity::All => LevelFilter::Trace,
        }
    }
}

impl FromStr for Verbosity {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" => Verbosity::None,
            "error" => Verbosity::Error,
            "warning" => Verbosity::Warning,
            "summary" => Verbosity::Summary,
            "detailed" => Verbosity::Detailed,
            "debug" => Verbosity::Debug,
            "all" => Verbosity::All,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "verbosity '{other}' is unknown; use none, error, warning, summary, detailed, debug or all"
                )));
            }
        })
    }
}
