//! Logger set-up from the `Files` block (simplelog: console on stderr + optional file).
//!
//! Verbosity values map to `log` levels as follows:
//!
//! | value      | `log` level | what you see |
//! |------------|-------------|--------------|
//! | `none`     | off         | nothing |
//! | `error`    | Error       | failures only |
//! | `warning`  | Warn        | + devices unexpectedly offline, skipped webhooks, model mismatches |
//! | `summary`  | Info        | + open/close, online transitions |
//! | `detailed` | Debug       | + every device operation and rejected webhook request |
//! | `debug`    | Trace       | + request/response bodies (only when `AllowDebugLogging` is true) |
//! | `all`      | Trace       | same as `debug` |
//!
//! The library never installs a logger by itself: call [`init`] (as `sdctl` does) or install your own.

use std::fs::OpenOptions;

use log::LevelFilter;
use simplelog::{CombinedLogger, ConfigBuilder, SharedLogger, WriteLogger};

use crate::config::LogSettings;
use crate::error::{Error, Result};
pub use crate::verbosity::Verbosity;

/// Installs the process-wide logger described by `settings`.
///
/// Returns `Ok(false)` when another logger is already installed (the `log` crate allows one per process); the
/// existing one is kept. A log file that cannot be opened for appending is an error naming the file.
pub fn init(settings: &LogSettings) -> Result<bool> {
    let config = ConfigBuilder::new()
        .set_time_format_rfc3339()
        .set_thread_level(if settings.thread_ids {
            LevelFilter::Error
        } else {
            LevelFilter::Debug
        })
        .set_target_level(LevelFilter::Off)
        // The HTTP client logs request URLs at debug level, and Tasmota's protocol puts credentials in the
        // query: its records never reach our log sinks.
        .add_filter_ignore_str("ureq")
        .build();
    let mut loggers: Vec<Box<dyn SharedLogger>> = vec![WriteLogger::new(
        settings.console_verbosity.level(),
        config.clone(),
        std::io::stderr(),
    )];
    if let Some(path) = &settings.logfile {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::Logger(format!(
                    "cannot create the folder of log file {}: {e}",
                    path.display()
                ))
            })?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::Logger(format!("cannot open log file {}: {e}", path.display())))?;
        loggers.push(WriteLogger::new(
            settings.logfile_verbosity.level(),
            config,
            file,
        ));
    }
    let combined = CombinedLogger::new(loggers);
    let level = combined.level();
    if log::set_boxed_logger(Box::new(Escaping(combined))).is_err() {
        return Ok(false);
    }
    log::set_max_level(level);
    Ok(true)
}

/// Writes every record with its control characters escaped: messages carry text from devices, requests and
/// files, and a CR/LF or an escape sequence in them must not forge or hide log lines.
struct Escaping(Box<CombinedLogger>);

impl log::Log for Escaping {
    fn enabled(&self, m: &log::Metadata) -> bool {
        self.0.enabled(m)
    }

    fn log(&self, record: &log::Record) {
        if !self.0.enabled(record.metadata()) {
            return;
        }
        let text = record.args().to_string();
        let safe = crate::text::escape_controls(&text);
        self.0.log(
            &log::Record::builder()
                .args(format_args!("{safe}"))
                .metadata(record.metadata().clone())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        self.0.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_record_carrying_cr_lf_nul_or_escapes_stays_one_line() {
        use log::Log;
        let buf = Buffer::default();
        let inner: Vec<Box<dyn SharedLogger>> = vec![WriteLogger::new(
            LevelFilter::Trace,
            simplelog::Config::default(),
            buf.clone(),
        )];
        let logger = Escaping(CombinedLogger::new(inner));
        let forged = "unknown event \"x\r\n2026-01-01 [ERROR] forged\0\u{1b}[2J\"";
        logger.log(
            &log::Record::builder()
                .args(format_args!("{forged}"))
                .level(log::Level::Debug)
                .target("smartdev::webhook")
                .build(),
        );
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.matches('\n').count(), 1, "{out:?}");
        assert!(
            !out.contains('\r') && !out.contains('\0') && !out.contains('\u{1b}'),
            "{out:?}"
        );
        assert!(
            out.contains("x\\r\\n2026-01-01 [ERROR] forged\\u{0}\\u{1b}[2J"),
            "{out:?}"
        );
    }

    #[test]
    fn every_value_maps_to_a_level() {
        let pairs = [
            ("none", LevelFilter::Off),
            ("error", LevelFilter::Error),
            ("warning", LevelFilter::Warn),
            ("summary", LevelFilter::Info),
            ("detailed", LevelFilter::Debug),
            ("debug", LevelFilter::Trace),
            ("ALL", LevelFilter::Trace),
        ];
        for (s, level) in pairs {
            assert_eq!(s.parse::<Verbosity>().unwrap().level(), level, "{s}");
        }
        assert!("loud".parse::<Verbosity>().is_err());
    }

    #[test]
    fn unwritable_log_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("sd-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A directory cannot be opened as a log file.
        let settings = LogSettings {
            logfile: Some(dir.clone()),
            logfile_verbosity: Verbosity::Detailed,
            console_verbosity: Verbosity::None,
            thread_ids: false,
        };
        let e = init(&settings).unwrap_err().to_string();
        assert!(
            e.contains("cannot open log file") && e.contains(&dir.display().to_string()),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
