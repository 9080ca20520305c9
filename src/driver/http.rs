//! HTTP to devices: one shared ureq agent, explicit timeouts, the retry policy, and Online bookkeeping.
//!
//! Retried (up to `RetryCount` more times, `RetryDelay` apart): timeouts, connection failures (refused, reset,
//! DNS, truncated bodies) and HTTP 5xx/429 (429: a Gen2 device out of nonce slots). Not retried: other 4xx,
//! malformed JSON and 401 — the device answered; asking again will not help. A device that answered at all is
//! reachable and stays online. URLs are never logged (Tasmota credentials travel in the query).

use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::Settings;
use crate::error::Error;
use crate::objects::Device;

/// Largest device response we read; real devices send a few KiB.
const MAX_BODY: u64 = 1024 * 1024;

/// Shared HTTP settings and agent for all devices of one controller; each driver holds its own clone, whose
/// contact mode and reachability record are its own.
pub(crate) struct Http {
    agent: ureq::Agent,
    /// `ResponseTimeout`: also the bound of a request over the push connection.
    timeout: Duration,
    retries: u32,
    delay: Duration,
    debug_bodies: bool,
    closing: Arc<AtomicBool>,
    /// One attempt per request (the quick first contact at open).
    quick: AtomicBool,
    /// What the requests since the last [`Http::take_reach`] showed: 0 nothing, 1 answered, 2 unreachable.
    reach: AtomicU8,
}

impl Clone for Http {
    fn clone(&self) -> Self {
        Http {
            agent: self.agent.clone(),
            timeout: self.timeout,
            retries: self.retries,
            delay: self.delay,
            debug_bodies: self.debug_bodies,
            closing: self.closing.clone(),
            quick: AtomicBool::new(false),
            reach: AtomicU8::new(0),
        }
    }
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
    /// Whether sending it twice does no harm. Others get one attempt whatever `RetryCount` says: a lost
    /// answer to a create must not create twice.
    pub idempotent: bool,
    /// The answer is text, not JSON (a CSV download): a 200's UTF-8 body comes back as a JSON string.
    pub text: bool,
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
    /// An HTTP status other than 200, 401 and redirects.
    Status(u16, String),
    /// A 3xx answer; requests go only where the configuration says, so the target is reported, not followed.
    Redirect(u16, Option<String>),
    /// A 200 whose body is not the expected JSON.
    Body(String),
    /// An answer over [`MAX_BODY`]: not what a device sends.
    TooLarge,
    /// The device's TLS certificate was refused (HTTPS devices).
    Certificate(super::tls::Refusal),
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Timeout | Failure::Connection(_) => true,
            Failure::Status(code, _) => *code >= 500 || *code == 429,
            Failure::Redirect(..)
            | Failure::Body(_)
            | Failure::TooLarge
            | Failure::Certificate(_) => false,
        }
    }

    /// Whether the failure says the device could not be reached (as opposed to answering badly).
    fn unreachable(&self) -> bool {
        // A refused certificate counts as unreachable: whatever answered is not trusted to be the device.
        matches!(
            self,
            Failure::Timeout | Failure::Connection(_) | Failure::Certificate(_)
        )
    }
}

fn agent_config(settings: &Settings) -> ureq::config::Config {
    ureq::Agent::config_builder()
        .timeout_global(Some(settings.response_timeout))
        .http_status_as_error(false)
        // A device (or whatever answers at its address) must not send us elsewhere: a redirect is a device
        // error naming the target.
        .max_redirects(0)
        .proxy(None)
        .max_idle_connections_per_host(1)
        // Devices close every connection, so buffers are allocated (and zeroed) per request: ureq's
        // 128 KiB defaults cost more than the request itself. Device answers are a few KiB.
        .input_buffer_size(16 * 1024)
        .output_buffer_size(16 * 1024)
        .max_response_header_size(16 * 1024)
        .user_agent(format!("smartdev/{}", crate::VERSION))
        .build()
}

impl Http {
    /// Builds the agent from the settings. `closing` cuts retry waits short when the controller closes.
    pub(crate) fn new(settings: &Settings, closing: Arc<AtomicBool>) -> Self {
        let agent = ureq::Agent::with_parts(
            agent_config(settings),
            ureq::unversioned::transport::DefaultConnector::default(),
            super::resolve::LiteralFirst::default(),
        );
        Self::with_agent(agent, settings, closing)
    }

    /// Like [`Http::new`], for a device reached over HTTPS and verified by `tls` (`driver/tls.rs`). The agent
    /// is the device's own; the closing flag is the controller's.
    pub(crate) fn with_tls(
        settings: &Settings,
        closing: Arc<AtomicBool>,
        tls: Arc<super::tls::DeviceTls>,
    ) -> Self {
        use ureq::unversioned::transport::{Connector, TcpConnector};
        let connector =
            ().chain(TcpConnector::default())
                .chain(super::tls_transport::TlsConnector(tls));
        let agent = ureq::Agent::with_parts(
            agent_config(settings),
            connector,
            super::resolve::LiteralFirst::default(),
        );
        Self::with_agent(agent, settings, closing)
    }

    /// Like [`Http::new`], but every connection gets the next answer of `script` instead of a socket.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn canned(settings: &Settings, script: super::canned::Script) -> Self {
        let agent = ureq::Agent::with_parts(
            agent_config(settings),
            super::canned::CannedConnector(script),
            super::resolve::LiteralFirst::default(),
        );
        Self::with_agent(agent, settings, Arc::default())
    }

    fn with_agent(agent: ureq::Agent, settings: &Settings, closing: Arc<AtomicBool>) -> Self {
        Http {
            agent,
            timeout: settings.response_timeout,
            retries: settings.retry_count,
            delay: settings.retry_delay,
            debug_bodies: settings.allow_debug_logging,
            closing,
            quick: AtomicBool::new(false),
            reach: AtomicU8::new(0),
        }
    }

    /// One attempt per request from now on (`true`: the quick first contact), or the retry policy again.
    pub(crate) fn set_quick(&self, quick: bool) {
        self.quick.store(quick, Ordering::Relaxed);
    }

    /// Whether the device answered the requests since the last call (`None`: no request was made). The worker
    /// decides `Online` from this; the HTTP layer only reports.
    pub(crate) fn take_reach(&self) -> Option<bool> {
        match self.reach.swap(0, Ordering::Relaxed) {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        }
    }

    /// `ResponseTimeout`.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Records whether the device answered (an HTTP request, or a frame over the push connection).
    pub(crate) fn record_reach(&self, answered: bool) {
        self.reach
            .store(if answered { 1 } else { 2 }, Ordering::Relaxed);
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
        let location = resp
            .headers()
            .get("location")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        // Bytes, not a string: a body that is not UTF-8 is a bad answer, not a broken connection.
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(classify)?;
        if self.debug_bodies {
            log::trace!(
                "{} → {status}: {}",
                req.what,
                crate::text::quote(&String::from_utf8_lossy(&body), 4096)
            );
        }
        match status {
            200 if req.text => String::from_utf8(body)
                .map(|t| Reply::Json(Value::String(t)))
                .map_err(|_| Failure::Body("a text answer that is not UTF-8".into())),
            200 => crate::untrusted_json::parse(&body)
                .map(Reply::Json)
                .map_err(|e| {
                    Failure::Body(format!(
                        "{e} in {}",
                        crate::text::quote(&String::from_utf8_lossy(&body), 80)
                    ))
                }),
            401 => Ok(Reply::Unauthorized(challenge)),
            300..=399 => Err(Failure::Redirect(status, location)),
            _ => Err(Failure::Status(
                status,
                crate::text::clip(&String::from_utf8_lossy(&body), 200),
            )),
        }
    }

    /// Sends a request with the retry policy (one attempt in quick mode) and records whether the device was
    /// reachable (see [`Http::take_reach`]). A 401 is a reply, not an error: drivers that authenticate handle it.
    pub(crate) fn send(&self, dev: &Device, req: &Request) -> Result<Reply, Error> {
        let attempts = self.quick.load(Ordering::Relaxed).then_some(1);
        let (result, reached) = match self.call(dev, req, attempts) {
            Ok(r) => (Ok(r), true),
            Err((error, unreachable)) => (Err(error), !unreachable),
        };
        self.record_reach(reached);
        result
    }

    /// [`Http::send`] for requests that need no credentials: a 401 becomes an authentication error.
    pub(crate) fn request(
        &self,
        dev: &Device,
        url: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, Error> {
        let req = Request {
            url,
            body,
            what,
            headers: Vec::new(),
            idempotent: true,
            text: false,
        };
        match self.send(dev, &req)? {
            Reply::Json(v) => Ok(v),
            Reply::Unauthorized(_) => Err(super::auth_error(
                dev,
                what,
                super::AuthProblem::Missing { user: false },
            )),
        }
    }

    /// Whether the device answers `url` at all (one attempt, Online left alone): the light liveness probe.
    pub(crate) fn answers(&self, dev: &Device, url: &str, what: &str) -> bool {
        let req = Request {
            url,
            body: None,
            what,
            headers: Vec::new(),
            idempotent: true,
            text: false,
        };
        self.call(dev, &req, Some(1)).is_ok()
    }

    fn call(
        &self,
        dev: &Device,
        req: &Request,
        attempts: Option<u32>,
    ) -> Result<Reply, (Error, bool)> {
        let max = if req.idempotent {
            attempts.unwrap_or(self.retries + 1).max(1)
        } else {
            1
        };
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

    /// Attempts an idempotent request gets: one in quick mode, else `RetryCount` + 1 (the MQTT transports
    /// follow the same rule).
    pub(crate) fn attempts(&self) -> u32 {
        if self.quick.load(Ordering::Relaxed) {
            1
        } else {
            self.retries + 1
        }
    }

    /// Waits `RetryDelay`, waking early (false) when the controller closes.
    pub(crate) fn pause(&self) -> bool {
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
    let tries = crate::error::attempts_text(attempts);
    match f {
        Failure::Timeout => Error::Timeout {
            device,
            request: what.to_string(),
            attempts,
        },
        Failure::Connection(m) => Error::Device {
            device,
            message: format!("{what}: {m} (after {tries})"),
        },
        Failure::Status(429, _) => Error::Device {
            device,
            message: format!(
                "{what}: the device is busy (HTTP 429 Too many requests) (after {tries})"
            ),
        },
        Failure::Redirect(code, target) => Error::Device {
            device,
            message: format!(
                "{what}: the device answered HTTP {code}, a redirect to {}; smartdev does not follow redirects: check Hostname and Port",
                target.map_or("an unnamed place".to_string(), |t| crate::text::quote(
                    &redact(&t),
                    200
                ))
            ),
        },
        Failure::Status(code, body) => Error::Device {
            device,
            message: format!("{what}: HTTP {code} {body:?} (after {tries})"),
        },
        Failure::Body(m) => Error::Device {
            device,
            message: format!("{what}: the answer is not valid JSON: {m}"),
        },
        Failure::Certificate(r) => Error::Certificate {
            device,
            message: r.to_string(),
            presented: r.presented().map(str::to_string),
            expected: r.expected().map(str::to_string),
        },
        Failure::TooLarge => Error::Device {
            device,
            message: format!(
                "{what}: the answer is larger than {} KiB, far more than a device sends; check Hostname and Port",
                MAX_BODY / 1024
            ),
        },
    }
}

fn classify(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::Io(io) if super::tls::refusal_of(&io).is_some() => {
            Failure::Certificate(super::tls::refusal_of(&io).expect("checked"))
        }
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
        ureq::Error::BodyExceedsLimit(_) => Failure::TooLarge,
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
