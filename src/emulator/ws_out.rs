//! A device's outbound WebSocket (Gen2+ `Ws` component) and, for battery devices, its sleep: the config
//! `Ws.SetConfig` sets (`enable`, `server`, `ssl_ca`; answered `restart_required: true` as the firmware does,
//! though the emulator applies it at once), the wake-up schedule (`DeviceSpec::sleep`, on the emulator clock),
//! and the client that connects out to the server at a wake-up, sends frames and closes (plain `ws://` only).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::driver::ws::frame::{self, Opcode};

/// How long connecting out, the upgrade and the close may each take.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// The `ws` config and the sleep schedule of one device.
#[derive(Debug)]
pub(crate) struct WsOut {
    /// Seconds between wake-ups of a sleeping device (`None`: always awake).
    pub period: Option<Duration>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    enable: bool,
    server: Option<String>,
    ssl_ca: String,
    /// A `Ws.SetConfig` changed something (reported in `sys.restart_required`).
    restart_required: bool,
    /// When a sleeping device wakes next (emulator clock).
    next_wake: Option<Instant>,
    /// Held awake (its button pressed for setup): answers HTTP, still reports at its wake-ups.
    held: bool,
    /// Reports sent to the server so far.
    reports: u64,
}

impl WsOut {
    /// A device waking every `period` from `now` (`None`: a device that never sleeps).
    pub(crate) fn new(period: Option<Duration>, now: Instant) -> WsOut {
        WsOut {
            period,
            inner: Mutex::new(Inner {
                enable: false,
                server: None,
                ssl_ca: "ca.pem".into(),
                restart_required: false,
                next_wake: period.map(|p| now + p),
                held: false,
                reports: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Ws.GetConfig`.
    pub(crate) fn config(&self) -> Value {
        let g = self.lock();
        json!({"enable": g.enable, "server": g.server, "ssl_ca": g.ssl_ca})
    }

    /// `Ws.SetConfig {config: {...}}`: the fields given change; answered as the firmware does.
    pub(crate) fn set_config(&self, params: &Map<String, Value>) -> Result<Value, String> {
        let Some(Value::Object(c)) = params.get("config") else {
            return Err("missing config".into());
        };
        let mut g = self.lock();
        if let Some(e) = c.get("enable") {
            g.enable = e.as_bool().ok_or("enable must be a boolean")?;
        }
        match c.get("server") {
            Some(Value::String(s)) => g.server = Some(s.clone()),
            Some(Value::Null) => g.server = None,
            Some(_) => return Err("server must be a string".into()),
            None => {}
        }
        if let Some(v) = c.get("ssl_ca") {
            g.ssl_ca = v.as_str().ok_or("ssl_ca must be a string")?.to_string();
        }
        g.restart_required = true;
        Ok(json!({"restart_required": true}))
    }

    /// Where the device connects when it wakes, when enabled.
    pub(crate) fn server(&self) -> Option<String> {
        let g = self.lock();
        g.server.clone().filter(|_| g.enable)
    }

    /// Whether a `Ws.SetConfig` asks for a restart.
    pub(crate) fn restart_required(&self) -> bool {
        self.lock().restart_required
    }

    /// Holds the device awake (`true`) or lets it sleep again (`false`).
    pub(crate) fn set_held(&self, held: bool) {
        self.lock().held = held;
    }

    /// Whether the device is held awake.
    pub(crate) fn held(&self) -> bool {
        self.lock().held
    }

    /// Reports sent so far.
    pub(crate) fn reports(&self) -> u64 {
        self.lock().reports
    }

    /// Whether the wake-up is due at `now`; if so, the next one is one period after `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        let mut g = self.lock();
        match (g.next_wake, self.period) {
            (Some(t), Some(p)) if t <= now => {
                g.next_wake = Some(now + p);
                true
            }
            _ => false,
        }
    }

    /// Connects to `server`, sends `frames` as text and closes; counts a report when all went out.
    pub(crate) fn report(&self, server: &str, frames: &[String]) -> Result<(), String> {
        send(server, frames)?;
        self.lock().reports += 1;
        Ok(())
    }
}

/// The blocking client: upgrade, masked text frames, close.
fn send(server: &str, frames: &[String]) -> Result<(), String> {
    let rest = server
        .strip_prefix("ws://")
        .ok_or_else(|| format!("{server}: only ws:// servers are emulated"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let mut s =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("{addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
    let _ = s.set_nodelay(true);
    let nonce: [u8; 16] = std::array::from_fn(|_| random_byte());
    let key = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(nonce)
    };
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let io = |e: std::io::Error| format!("{server}: {e}");
    s.write_all(head.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() > 8192 || s.read(&mut byte).map_err(io)? == 0 {
            return Err(format!("{server}: no upgrade"));
        }
        answer.push(byte[0]);
    }
    let answer = String::from_utf8_lossy(&answer);
    let accept = crate::driver::ws::accept_key(&key);
    if !answer.starts_with("HTTP/1.1 101") || !answer.contains(&accept) {
        let line = answer.lines().next().unwrap_or_default().to_string();
        return Err(format!("{server}: upgrade refused: {line}"));
    }
    let mask = || std::array::from_fn(|_| random_byte());
    for f in frames {
        s.write_all(&frame::encode(
            Opcode::Text,
            true,
            f.as_bytes(),
            Some(mask()),
        ))
        .map_err(io)?;
    }
    let close = frame::close_payload(1000, "");
    s.write_all(&frame::encode(Opcode::Close, true, &close, Some(mask())))
        .map_err(io)?;
    // Until the server's close (or it hangs up): the frames were read by then.
    let mut rest = [0u8; 512];
    while matches!(s.read(&mut rest), Ok(n) if n > 0) {}
    Ok(())
}

/// A byte from std's per-process random hash keys (no RNG crate for a key and masks).
fn random_byte() -> u8 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish() as u8
}
