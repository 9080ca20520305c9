//! HTTP to devices: one shared ureq agent, explicit timeouts, the retry policy, and Online bookkeeping.
//!
//! Retried (up to `RetryCount` more times, `RetryDelay` apart): timeouts, connection failures (refused, reset,
//! DNS, truncated bodies) and HTTP 5xx/429 (429: a Gen2 device out of nonce slots). Not retried: other 4xx,
//! malformed JSON and 401 — the device answered; asking again will not help. A device that answered at all is
//! reachable and stays online. URLs are never logged (Tasmota credentials travel in the query).

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

/// One request to a device.
pub(crate) struct Request<'a> {
    /// Full URL.
    pub url: &'a str,
    /// JSON body: POST when present, GET otherwise.
    pub body: Option<&'a Value>,
    /// Names the request in messages (`GET /status`, `RPC Switch.Set`); never contains credentials.
    pub what: &'a str,
    /// Extra headers (e.g. `Authorization`).
    pub headers: Vec<(&'static str, String)>,
}

/// A device's answer.
pub(crate) enum Reply {
    /// 200 with a JSON body.
    Json(Value),
    /// 401: credentials are needed or were refused; the `WWW-Authenticate` value when sent.
    Unauthorized(Option<String>),
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failure {
    Timeout,
    /// No usable answer (refused, reset, DNS, truncated).
    Connection(String),
    /// An HTTP status other than 200 and 401.
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

impl Http {
    /// Builds the agent from the settings. `closing` cuts retry waits short when the controller closes.
    pub(crate) fn new(settings: &Settings, closing: Arc<AtomicBool>) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(settings.response_timeout))
            .http_status_as_error(false)
            .proxy(None)
            .max_idle_connections_per_host(1)
            // Devices close every connection, so buffers are allocated (and zeroed) per request: ureq's
            // 128 KiB defaults cost more than the request itself. Device answers are a few KiB.
            .input_buffer_size(16 * 1024)
            .output_buffer_size(16 * 1024)
            .max_response_header_size(16 * 1024)
            .user_agent(format!("smartdev/{}", crate::VERSION))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::default(),
            super::resolve::LiteralFirst::default(),
        );
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

    /// Interrupts every request in flight and refuses new ones (closing the controller): a worker blocked on a
    /// silent device returns at once instead of after its timeout.
    pub(crate) fn shutdown(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.agent.clone().shutdown();
    }

    fn once(&self, req: &Request) -> Result<Reply, Failure> {
        let result = match req.body {
            Some(b) => {
                let mut r = self.agent.post(req.url);
                for (k, v) in &req.headers {
                    r = r.header(*k, v);
                }
                r.send_json(b)
            }
            None => {
                let mut r = self.agent.get(req.url);
                for (k, v) in &req.headers {
                    r = r.header(*k, v);
                }
                r.call()
            }
        };
        let mut resp = result.map_err(classify)?;
        let status = resp.status().as_u16();
        let challenge = resp
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(classify)?;
        if self.debug_bodies {
            log::trace!("{} → {status}: {text}", req.what);
        }
        match status {
            200 => serde_json::from_str(&text).map(Reply::Json).map_err(|e| {
                let mut t = text.clone();
                t.truncate(80);
                Failure::Body(format!("{e} in {t:?}"))
            }),
            401 => Ok(Reply::Unauthorized(challenge)),
            _ => {
                let mut t = text;
                t.truncate(200);
                Err(Failure::Status(status, t))
            }
        }
    }

    /// Sends a request with the retry policy and records on `dev` whether it was reachable. A 401 is a reply,
    /// not an error: drivers that authenticate handle it. `attempts` overrides the number of attempts (1 for a
    /// quick first contact).
    pub(crate) fn send(
        &self,
        dev: &mut Device,
        req: &Request,
        attempts: Option<u32>,
    ) -> Result<Reply, Error> {
        match self.call(dev, req, attempts) {
            Ok(r) => {
                dev.online = true;
                Ok(r)
            }
            Err((error, unreachable)) => {
                dev.online = !unreachable;
                Err(error)
            }
        }
    }

    /// [`Http::send`] for requests that need no credentials: a 401 becomes an authentication error.
    pub(crate) fn request(
        &self,
        dev: &mut Device,
        url: &str,
        body: Option<&Value>,
        what: &str,
        attempts: Option<u32>,
    ) -> Result<Value, Error> {
        let req = Request {
            url,
            body,
            what,
            headers: Vec::new(),
        };
        match self.send(dev, &req, attempts)? {
            Reply::Json(v) => Ok(v),
            Reply::Unauthorized(_) => Err(Error::Auth {
                device: dev.label(),
                message: format!("{what}: the device requires a password; set Password for it"),
            }),
        }
    }

    /// Whether the device answers `url` at all (one attempt, Online left alone): the light liveness probe.
    pub(crate) fn answers(&self, dev: &Device, url: &str, what: &str) -> bool {
        let req = Request {
            url,
            body: None,
            what,
            headers: Vec::new(),
        };
        self.call(dev, &req, Some(1)).is_ok()
    }

    fn call(
        &self,
        dev: &Device,
        req: &Request,
        attempts: Option<u32>,
    ) -> Result<Reply, (Error, bool)> {
        let max = attempts.unwrap_or(self.retries + 1).max(1);
        let mut n = 0;
        loop {
            n += 1;
            let started = Instant::now();
            match self.once(req) {
                Ok(r) => return Ok(r),
                Err(f) => {
                    log::debug!(
                        "device {}: {} attempt {n}/{max} failed after {} ms: {f:?}",
                        dev.label(),
                        req.what,
                        started.elapsed().as_millis()
                    );
                    if n >= max || !f.retryable() || self.closing() || !self.pause() {
                        let unreachable = f.unreachable();
                        return Err((final_error(dev, req.what, f, n), unreachable));
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
}

fn final_error(dev: &Device, what: &str, f: Failure, attempts: u32) -> Error {
    let device = dev.label();
    match f {
        Failure::Timeout => Error::Timeout {
            device,
            request: what.to_string(),
            attempts,
        },
        Failure::Connection(m) => Error::Device {
            device,
            message: format!("{what}: {m} (after {attempts} attempt(s))"),
        },
        Failure::Status(429, _) => Error::Device {
            device,
            message: format!(
                "{what}: the device is busy (HTTP 429 Too many requests) (after {attempts} attempt(s))"
            ),
        },
        Failure::Status(code, body) => Error::Device {
            device,
            message: format!("{what}: HTTP {code} {body:?} (after {attempts} attempt(s))"),
        },
        Failure::Body(m) => Error::Device {
            device,
            message: format!("{what}: the answer is not valid JSON: {m}"),
        },
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
        other => Failure::Connection(redact(&other.to_string())),
    }
}

/// Hides a `password=` query value that a library message might quote.
fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("password=") {
        out.push_str(&rest[..i + 9]);
        out.push_str("***");
        rest = &rest[i + 9..];
        let end = rest
            .find(|c: char| c == '&' || c.is_whitespace() || c == '"')
            .unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_in_messages_are_hidden() {
        assert_eq!(
            super::redact("bad uri http://h/cm?cmnd=x&user=admin&password=s3cret&x=1 here"),
            "bad uri http://h/cm?cmnd=x&user=admin&password=***&x=1 here"
        );
    }
}
