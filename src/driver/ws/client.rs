//! The client side of RFC 6455 over a blocking `std::net::TcpStream`: the HTTP/1.1 Upgrade handshake (checking
//! `Sec-WebSocket-Accept`), masked frames out, bounded buffering in, pings answered, the close handshake.
//!
//! Received bytes wait in one buffer that never holds more than one frame's header, its payload (at most
//! `MAX_MESSAGE`, 1 MiB) and one read chunk: `frame::decode` refuses an oversized frame from its header. A read that times
//! out keeps what arrived, so a deadline never splits a frame. After any error the connection is broken and
//! every later call fails at once.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::accept_key;
use super::frame::{self, Assembler, MAX_MESSAGE, Message, Opcode, ProtocolError};

/// Largest handshake answer head.
pub(super) const MAX_HANDSHAKE: usize = 8 * 1024;
/// One read.
const CHUNK: usize = 8 * 1024;

/// Timeouts of one connection.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// The handshake answer, each write, and the wait for the peer's close frame.
    pub io: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            io: Duration::from_secs(5),
        }
    }
}

/// Why a WebSocket operation failed.
#[derive(Debug)]
pub enum WsError {
    /// Connecting, reading or writing failed (refused, reset, write timeout).
    Io(io::Error),
    /// The handshake answer was not a valid upgrade (status, headers, accept key, too long).
    Handshake(String),
    /// The peer broke RFC 6455 (we sent a close with the matching code).
    Protocol(ProtocolError),
    /// The peer closed the connection with a close frame.
    Closed {
        /// Its close code, if it sent one.
        code: Option<u16>,
        /// Its reason (clipped, control characters escaped).
        reason: String,
    },
    /// The connection ended without a close frame (peer gone, or cut in the middle of a frame).
    Dropped {
        /// Whether it ended inside a frame.
        mid_frame: bool,
    },
    /// An earlier error already ended this connection.
    Broken,
}

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WsError::Io(e) => write!(f, "WebSocket I/O failed: {e}"),
            WsError::Handshake(m) => write!(f, "WebSocket handshake failed: {m}"),
            WsError::Protocol(p) => write!(f, "the device sent {p}"),
            WsError::Closed { code, reason } => match code {
                Some(c) => write!(f, "the device closed the WebSocket ({c} {reason})"),
                None => f.write_str("the device closed the WebSocket"),
            },
            WsError::Dropped { mid_frame: true } => {
                f.write_str("the WebSocket connection ended in the middle of a frame")
            }
            WsError::Dropped { mid_frame: false } => f.write_str("the WebSocket connection ended"),
            WsError::Broken => f.write_str("the WebSocket connection is already broken"),
        }
    }
}

impl std::error::Error for WsError {}

/// Unpredictable bytes for keys and masks: std's randomly keyed SipHash over a counter.
pub(super) struct Noise {
    state: RandomState,
    counter: u64,
}

impl Noise {
    pub(super) fn new() -> Self {
        Noise {
            state: RandomState::new(),
            counter: 0,
        }
    }

    pub(super) fn next(&mut self) -> u64 {
        self.counter += 1;
        let mut h = self.state.build_hasher();
        h.write_u64(self.counter);
        h.finish()
    }
}

/// One open client connection.
pub struct Connection {
    stream: TcpStream,
    /// Bytes received and not yet decoded.
    buf: Vec<u8>,
    asm: Assembler,
    io_timeout: Duration,
    noise: Noise,
    broken: bool,
    /// Set once we sent a close frame.
    close_sent: bool,
    /// When the last pong arrived (heartbeats).
    last_pong: Option<Instant>,
}

impl Connection {
    /// Connects to `addr` and upgrades `path` (e.g. `/rpc`); `host` is the `Host` header value.
    pub fn connect(
        addr: SocketAddr,
        host: &str,
        path: &str,
        t: Timeouts,
    ) -> Result<Connection, WsError> {
        let stream = TcpStream::connect_timeout(&addr, t.connect).map_err(WsError::Io)?;
        let _ = stream.set_nodelay(true);
        stream
            .set_write_timeout(Some(t.io.max(Duration::from_millis(1))))
            .map_err(WsError::Io)?;
        let mut c = Connection {
            stream,
            buf: Vec::new(),
            asm: Assembler::default(),
            io_timeout: t.io,
            noise: Noise::new(),
            broken: false,
            close_sent: false,
            last_pong: None,
        };
        c.handshake(host, path)?;
        Ok(c)
    }

    fn handshake(&mut self, host: &str, path: &str) -> Result<(), WsError> {
        let (request, accept) = upgrade_request(&mut self.noise, host, path);
        self.stream
            .write_all(request.as_bytes())
            .map_err(WsError::Io)?;
        let deadline = Instant::now() + self.io_timeout;
        let end = loop {
            if let Some(p) = head_end(&self.buf) {
                break p;
            }
            if self.buf.len() > MAX_HANDSHAKE {
                return Err(WsError::Handshake("the answer head is too long".into()));
            }
            match self.fill(deadline) {
                Ok(true) => {}
                Ok(false) => return Err(WsError::Handshake("no answer in time".into())),
                Err(WsError::Dropped { .. }) => {
                    return Err(WsError::Handshake(
                        "the connection ended before the answer".into(),
                    ));
                }
                Err(e) => return Err(e),
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        check_answer(&head, &accept).map_err(WsError::Handshake)
    }

    /// Reads once into the buffer, waiting until `deadline`. `Ok(false)`: the deadline passed.
    fn fill(&mut self, deadline: Instant) -> Result<bool, WsError> {
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        // A zero timeout would mean "block forever".
        let wait = (deadline - now).max(Duration::from_millis(1));
        self.stream
            .set_read_timeout(Some(wait))
            .map_err(WsError::Io)?;
        let mut chunk = [0u8; CHUNK];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(WsError::Dropped {
                mid_frame: !self.buf.is_empty(),
            }),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(Instant::now() < deadline)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(WsError::Io(e)),
        }
    }

    fn write_frame(&mut self, opcode: Opcode, payload: &[u8]) -> Result<(), WsError> {
        let wire = frame::encode(opcode, true, payload, Some(mask(&mut self.noise)));
        // A partial write leaves the stream in the middle of a frame: nothing can follow it.
        self.stream.write_all(&wire).map_err(|e| {
            self.broken = true;
            WsError::Io(e)
        })
    }

    /// Sends one text message (one frame).
    pub fn send_text(&mut self, text: &str) -> Result<(), WsError> {
        if self.broken || self.close_sent {
            return Err(WsError::Broken);
        }
        if text.len() > MAX_MESSAGE {
            return Err(WsError::Protocol(
                ProtocolError::TooLarge(text.len() as u64),
            ));
        }
        self.write_frame(Opcode::Text, text.as_bytes())
    }

    /// Sends a ping (a heartbeat); its pong shows in [`Connection::last_pong`].
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), WsError> {
        if self.broken || self.close_sent {
            return Err(WsError::Broken);
        }
        self.write_frame(Opcode::Ping, &payload[..payload.len().min(125)])
    }

    /// When the last pong arrived.
    pub fn last_pong(&self) -> Option<Instant> {
        self.last_pong
    }

    /// The next text message, waiting until `deadline` (`Ok(None)` then). Pings are answered and pongs noted on
    /// the way; binary messages are skipped (Shelly sends none). A close from the peer is answered and
    /// returned as [`WsError::Closed`].
    pub fn recv(&mut self, deadline: Instant) -> Result<Option<String>, WsError> {
        if self.broken {
            return Err(WsError::Broken);
        }
        let r = self.recv_inner(deadline);
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    fn recv_inner(&mut self, deadline: Instant) -> Result<Option<String>, WsError> {
        loop {
            match frame::decode(&self.buf, false, MAX_MESSAGE) {
                Ok(Some((f, used))) => {
                    self.buf.drain(..used);
                    match self.asm.push(f) {
                        Ok(Some(m)) => {
                            if let Some(text) = self.on_message(m)? {
                                return Ok(Some(text));
                            }
                        }
                        Ok(None) => {}
                        Err(p) => return Err(self.fail(p)),
                    }
                    continue;
                }
                Ok(None) => {}
                Err(p) => return Err(self.fail(p)),
            }
            if !self.fill(deadline)? {
                return Ok(None);
            }
        }
    }

    fn on_message(&mut self, m: Message) -> Result<Option<String>, WsError> {
        match m {
            Message::Text(t) => Ok(Some(t)),
            Message::Binary(_) => Ok(None),
            Message::Ping(p) => {
                if !self.close_sent {
                    self.write_frame(Opcode::Pong, &p)?;
                }
                Ok(None)
            }
            Message::Pong(_) => {
                self.last_pong = Some(Instant::now());
                Ok(None)
            }
            Message::Close(code, reason) => {
                if !self.close_sent {
                    // Echo the code (RFC 6455 §5.5.1); the write may fail on a peer that already left.
                    let payload = code
                        .map(|c| frame::close_payload(c, ""))
                        .unwrap_or_default();
                    let _ = self.write_frame(Opcode::Close, &payload);
                    self.close_sent = true;
                }
                let _ = self.stream.shutdown(Shutdown::Both);
                let reason =
                    crate::text::escape_controls(&crate::text::clip(&reason, 120)).into_owned();
                Err(WsError::Closed { code, reason })
            }
        }
    }

    /// Sends the close for a protocol error and ends the connection.
    fn fail(&mut self, p: ProtocolError) -> WsError {
        if !self.close_sent {
            let _ = self.write_frame(Opcode::Close, &frame::close_payload(p.close_code(), ""));
            self.close_sent = true;
        }
        let _ = self.stream.shutdown(Shutdown::Both);
        WsError::Protocol(p)
    }

    /// The close handshake: sends close 1000, waits (up to the I/O timeout) for the peer's close, then shuts
    /// the socket down. Messages still arriving meanwhile are dropped.
    pub fn close(mut self) {
        if !self.broken
            && !self.close_sent
            && self
                .write_frame(Opcode::Close, &frame::close_payload(1000, ""))
                .is_ok()
        {
            self.close_sent = true;
            let deadline = Instant::now() + self.io_timeout;
            while let Ok(Some(_)) = self.recv_inner(deadline) {}
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// A second handle on the socket, for another thread to shut it down (a blocked `recv` then returns).
    pub fn shutdown_handle(&self) -> io::Result<TcpStream> {
        self.stream.try_clone()
    }

    /// Whether an error ended this connection.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Bytes held for decoding (never more than a frame header (14 bytes), 1 MiB and one read of 8 KiB).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// The upgrade request for `path` on `host` with a fresh key, and the `Sec-WebSocket-Accept` it must get.
pub(super) fn upgrade_request(noise: &mut Noise, host: &str, path: &str) -> (String, String) {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&noise.next().to_le_bytes());
    raw[8..].copy_from_slice(&noise.next().to_le_bytes());
    let key = BASE64.encode(raw);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    (request, accept_key(&key))
}

/// Where an answer head ends (the index of its blank line), if it has arrived.
pub(super) fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Masks for frames a client sends.
pub(super) fn mask(noise: &mut Noise) -> [u8; 4] {
    let m = noise.next().to_le_bytes();
    [m[0], m[1], m[2], m[3]]
}

/// Checks a handshake answer head against the expected accept key.
pub(super) fn check_answer(head: &str, accept: &str) -> Result<(), String> {
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let mut parts = status.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if version != "HTTP/1.1" {
        return Err(format!(
            "not an HTTP/1.1 answer: {}",
            crate::text::quote(status, 60)
        ));
    }
    if code != "101" {
        return Err(format!(
            "the device answered {} instead of 101 Switching Protocols",
            crate::text::quote(code, 10)
        ));
    }
    let headers: Vec<(String, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim()))
        .collect();
    let get = |name: &str| {
        let mut it = headers.iter().filter(|(k, _)| k == name);
        match (it.next(), it.next()) {
            (Some((_, v)), None) => Ok(Some(*v)),
            (None, _) => Ok(None),
            (Some(_), Some(_)) => Err(format!("the {name} header came twice")),
        }
    };
    if !get("upgrade")?.is_some_and(|v| v.eq_ignore_ascii_case("websocket")) {
        return Err("no Upgrade: websocket header".into());
    }
    let connection = get("connection")?.unwrap_or("");
    if !connection
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
    {
        return Err("no Connection: Upgrade header".into());
    }
    if get("sec-websocket-accept")? != Some(accept) {
        return Err("a wrong Sec-WebSocket-Accept".into());
    }
    if get("sec-websocket-extensions")?.is_some() || get("sec-websocket-protocol")?.is_some() {
        return Err("an extension or subprotocol we did not ask for".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                        Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

    #[test]
    fn handshake_answers_are_checked() {
        let accept = accept_key("dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(check_answer(GOOD, &accept), Ok(()));
        let bad = |head: &str| check_answer(head, &accept).unwrap_err();
        assert!(bad(&GOOD.replace("101", "404")).contains("404"));
        assert!(bad(&GOOD.replace("s3pP", "AAAA")).contains("Accept"));
        assert!(bad(&GOOD.replace("Upgrade: websocket", "Upgrade: h2c")).contains("Upgrade"));
        assert!(
            bad(&GOOD.replace("Connection: Upgrade", "Connection: close")).contains("Connection")
        );
        assert!(
            bad(&format!(
                "{GOOD}\r\nSec-WebSocket-Extensions: permessage-deflate"
            ))
            .contains("extension")
        );
        assert!(bad(&format!("{GOOD}\r\nSec-WebSocket-Accept: {accept}")).contains("twice"));
        assert!(bad("HTTP/1.0 101 x").contains("HTTP/1.1"));
    }
}
