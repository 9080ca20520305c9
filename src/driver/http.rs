//! HTTP to devices: one shared ureq agent, explicit timeouts, the retry policy, and Online bookkeeping.
//!
//! Retried (up to `RetryCount` more times, `RetryDelay` apart): timeouts, connection failures (refused, reset,
//! DNS, truncated bodies) and HTTP 5xx/429. Not retried: other 4xx and malformed JSON — the device answered,
//! asking again will not help. A device that answered at all is reachable and stays online.

use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::Settings;
use crate::error::Error;
use crate::objects::Device;

/// Largest device response we read; real devices send a few KiB.
const MAX_BODY: u64 = 1024 * 1024;

/// Shared HTTP settings and agent for all devices of one controller.
#[derive(Clone)]
pub(crate) struct Http {
    agent: ureq::Agent,
    retries: u32,
    delay: Duration,
    debug_bodies: bool,
    closing: Arc<AtomicBool>,
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failure {
    Timeout,
    /// No usable answer (refused, reset, DNS, truncated).
    Connection(String),
    /// An HTTP status other than 200.
    Status(u16, String),
    /// A 200 whose body is not the expected JSON.
    Body(String),
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Timeout | Failure::Connection(_) => true,
            Failure::Status(code, _) => *code >= 500 || *code == 429,
            Failure::Body(_) => false,
        }
    }

    /// Whether the failure says the device could not be reached (as opposed to answering badly).
    fn unreachable(&self) -> bool {
        matches!(self, Failure::Timeout | Failure::Connection(_))
    }
}

/// A failed call after its attempts: the error to report and whether the device proved unreachable.
struct CallError {
    error: Error,
    unreachable: bool,
}

impl Http {
    /// Builds the agent from the settings. `closing` cuts retry waits short when the controller closes.
    pub(crate) fn new(settings: &Settings, closing: Arc<AtomicBool>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(settings.response_timeout))
            .http_status_as_error(false)
            .proxy(None)
            .max_idle_connections_per_host(1)
            .user_agent(format!("smartdev/{}", crate::VERSION))
            .build()
            .into();
        Http {
            agent,
            retries: settings.retry_count,
            delay: settings.retry_delay,
            debug_bodies: settings.allow_debug_logging,
            closing,
        }
    }

    /// Whether the controller is closing.
    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    fn once(&self, url: &str, body: Option<&Value>) -> Result<Value, Failure> {
        let result = match body {
            Some(b) => self.agent.post(url).send_json(b),
            None => self.agent.get(url).call(),
        };
        let mut resp = result.map_err(classify)?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(classify)?;
        if self.debug_bodies {
            log::trace!("{url} → {status}: {text}");
        }
        if status != 200 {
            let mut t = text;
            t.truncate(200);
            return Err(Failure::Status(status, t));
        }
        serde_json::from_str(&text).map_err(|e| {
            let mut t = text.clone();
            t.truncate(80);
            Failure::Body(format!("{e} in {t:?}"))
        })
    }

    /// Sends a request with the retry policy and records on `dev` whether it was reachable. `what` names the
    /// request in messages (e.g. `GET /status`); `attempts` overrides the number of attempts (1 for a quick
    /// first contact).
    pub(crate) fn request(
        &self,
        dev: &mut Device,
        url: &str,
        body: Option<&Value>,
        what: &str,
        attempts: Option<u32>,
    ) -> Result<Value, Error> {
        match self.call(dev, url, body, what, attempts) {
            Ok(v) => {
                dev.online = true;
                Ok(v)
            }
            Err(c) => {
                dev.online = !c.unreachable;
                Err(c.error)
            }
        }
    }

    /// Whether the device answers `url` at all (one attempt, Online left alone): the light liveness probe.
    pub(crate) fn answers(&self, dev: &Device, url: &str, what: &str) -> bool {
        self.call(dev, url, None, what, Some(1)).is_ok()
    }

    fn call(
        &self,
        dev: &Device,
        url: &str,
        body: Option<&Value>,
        what: &str,
        attempts: Option<u32>,
    ) -> Result<Value, CallError> {
        let max = attempts.unwrap_or(self.retries + 1).max(1);
        let mut n = 0;
        loop {
            n += 1;
            let started = Instant::now();
            match self.once(url, body) {
                Ok(v) => return Ok(v),
                Err(f) => {
                    log::debug!(
                        "device {}: {what} attempt {n}/{max} failed after {} ms: {f:?}",
                        dev.label(),
                        started.elapsed().as_millis()
                    );
                    if n >= max || !f.retryable() || self.closing() || !self.pause() {
                        return Err(self.final_error(dev, what, f, n));
                    }
                }
            }
        }
    }

    /// Waits `RetryDelay`, waking early (false) when the controller closes.
    fn pause(&self) -> bool {
        let end = Instant::now() + self.delay;
        while Instant::now() < end {
            if self.closing() {
                return false;
            }
            std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
        }
        true
    }

    fn final_error(&self, dev: &Device, what: &str, f: Failure, attempts: u32) -> CallError {
        let unreachable = f.unreachable();
        let device = dev.label();
        let error = match f {
            Failure::Timeout => Error::Timeout {
                device,
                request: what.to_string(),
                attempts,
            },
            Failure::Connection(m) => Error::Device {
                device,
                message: format!("{what}: {m} (after {attempts} attempt(s))"),
            },
            Failure::Status(code, body) => Error::Device {
                device,
                message: format!("{what}: HTTP {code} {body:?} (after {attempts} attempt(s))"),
            },
            Failure::Body(m) => Error::Device {
                device,
                message: format!("{what}: the answer is not valid JSON: {m}"),
            },
        };
        CallError { error, unreachable }
    }
}

fn classify(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::Io(io) => match io.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => Failure::Timeout,
            ErrorKind::ConnectionRefused => Failure::Connection("connection refused".into()),
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                Failure::Connection("connection reset".into())
            }
            ErrorKind::UnexpectedEof => Failure::Connection("the answer was cut short".into()),
            _ => Failure::Connection(io.to_string()),
        },
        ureq::Error::HostNotFound => Failure::Connection("host not found".into()),
        ureq::Error::ConnectionFailed => Failure::Connection("connection failed".into()),
        ureq::Error::BodyExceedsLimit(n) => Failure::Body(format!("answer larger than {n} bytes")),
        other => Failure::Connection(other.to_string()),
    }
}
