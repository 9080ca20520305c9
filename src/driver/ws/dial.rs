//! A WebSocket RPC connection made without blocking, for a poller: the TCP connect, the upgrade and one call
//! (the push channel's subscribing `Shelly.GetStatus`, answering a digest challenge), each step driven by
//! readiness events. At a device's first connection the call is preceded by `Shelly.GetDeviceInfo` in the
//! same write (open reads the device over this one connection: no `/shelly` over HTTP); that method needs no
//! authentication, and a device that refuses it anyway leaves the introduction to the driver. Nothing here waits: [`Dial::advance`] takes what the socket has, within the share it is
//! given, and returns. A device that stalls a step holds only its own `Dial`, until that step's deadline
//! (one timeout per step, as the blocking client has).

use std::collections::VecDeque;
use std::io::{self, Read as _, Write as _};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{self, MAX_HANDSHAKE, Noise};
use super::frame::{self, Assembler, MAX_MESSAGE, Message, Opcode};
use super::rpc::{self, CallError, FrameChallenge, Notification};
use crate::driver::rpc::status_doc::{DeviceInfo, StatusRead};

/// Where a dial is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// TCP connect in progress.
    Tcp,
    /// Upgrade request sent (or being sent); waiting for the answer head.
    Upgrade,
    /// Upgraded; the call is sent next (after the caller saw [`Progress::Calling`]).
    Ready,
    /// The call is sent; waiting for its answer.
    Call,
}

/// What one [`Dial::advance`] came to.
#[derive(Debug)]
pub(crate) enum Progress {
    /// Waiting for the socket (a readiness event brings the next step).
    Waiting,
    /// Stopped at its share with more to do: advance again next turn (no event will come for it).
    More,
    /// The upgrade is done and the call goes out at the next advance: the moment "just before the request".
    Calling,
    /// The call answered: its result read as a status (`None`: the result was no object).
    Done(Option<StatusRead>),
    /// WSS: TLS handshake records came in. Run [`super::secure::process`] on them, on any thread (the
    /// handshake's public-key crypto is the costly part of a dial), then give its result to
    /// [`Dial::processed`]; until then the dial waits and does not touch the connection.
    Crypto(super::secure::Shared),
    /// The dial failed (the text says why, for a log line).
    Failed(String),
}

/// What one advance may cost: bytes read and messages handled.
#[derive(Debug)]
pub(crate) struct Share {
    /// Bytes it may still read.
    pub(crate) bytes: usize,
    /// Messages it may still handle.
    pub(crate) messages: usize,
}

/// The connection once the call answered.
pub(crate) struct Dialed {
    /// The socket (non-blocking, still registered with the poller that drove it).
    pub(crate) stream: mio::net::TcpStream,
    /// WSS: the TLS state over it.
    pub(crate) tls: Option<super::secure::Shared>,
    /// Bytes read past the answer, and a message being joined.
    pub(crate) buf: Vec<u8>,
    pub(crate) asm: Assembler,
    /// The challenge in hand and its last `nc`.
    pub(crate) challenge: Option<(FrameChallenge, u32)>,
    /// Notifications that came before the answer (at most `rpc::MAX_QUEUED`; older ones dropped).
    pub(crate) queued: VecDeque<Notification>,
    /// `Shelly.GetDeviceInfo`'s result, when it was asked and answered.
    pub(crate) info: Option<Box<DeviceInfo>>,
}

/// The introduction sent before the call, and what became of it.
enum Intro {
    /// Not asked.
    No,
    /// To be sent with the call.
    Wanted,
    /// Asked with this id; no answer yet.
    Asked(u64),
    /// Answered: the result, or `None` when the device refused it.
    Answered(Option<Box<DeviceInfo>>),
}

/// One connection being made.
pub(crate) struct Dial {
    stream: mio::net::TcpStream,
    tls: Option<super::secure::Shared>,
    addr: SocketAddr,
    phase: Phase,
    /// The current step's deadline, and the timeout each step gets.
    deadline: Instant,
    step: Duration,
    /// Bytes still to write (the upgrade request, the call, pongs); never more than a few KiB.
    out: Vec<u8>,
    buf: Vec<u8>,
    asm: Assembler,
    host: String,
    accept: String,
    noise: Noise,
    src: String,
    password: Option<String>,
    challenge: Option<(FrameChallenge, u32)>,
    /// The id of the call in flight, the next one, and whether it already answered a fresh challenge.
    id: u64,
    next_id: u64,
    fresh: bool,
    queued: VecDeque<Notification>,
    dropped: u64,
    intro: Intro,
    /// The call's result, held while the introduction's answer is still to come.
    result: Option<Option<StatusRead>>,
    /// Handshake records handed out ([`Progress::Crypto`]) and not processed yet.
    processing: bool,
}

impl Dial {
    /// Starts the TCP connect to `addr` (`host` is the `Host` header value); the call is `Shelly.GetStatus` with
    /// our `src`, answering challenges with `password`. Every step must finish within `step` of its start. With
    /// `tls` (WSS) the TLS handshake runs within the upgrade's step, the upgrade request waiting in rustls.
    /// Ask [`Dial::introduce`] before the first advance to read `Shelly.GetDeviceInfo` too.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        addr: SocketAddr,
        host: &str,
        src: &str,
        password: Option<&str>,
        step: Duration,
        now: Instant,
        tls: Option<rustls::ClientConnection>,
    ) -> io::Result<Dial> {
        let stream = mio::net::TcpStream::connect(addr)?;
        Ok(Dial {
            stream,
            tls: tls.map(|c| std::sync::Arc::new(std::sync::Mutex::new(c))),
            addr,
            phase: Phase::Tcp,
            deadline: now + step,
            step,
            out: Vec::new(),
            buf: Vec::new(),
            asm: Assembler::default(),
            host: host.to_string(),
            accept: String::new(),
            noise: Noise::new(),
            src: src.to_string(),
            password: password.map(str::to_string),
            challenge: None,
            id: 0,
            next_id: 1,
            fresh: false,
            queued: VecDeque::new(),
            dropped: 0,
            intro: Intro::No,
            result: None,
            processing: false,
        })
    }

    /// Sends `Shelly.GetDeviceInfo` in the same write as the call; the dial is done when both answered.
    pub(crate) fn introduce(&mut self) {
        self.intro = Intro::Wanted;
    }

    /// The socket, to register with the poller (readable and writable).
    pub(crate) fn stream_mut(&mut self) -> &mut mio::net::TcpStream {
        &mut self.stream
    }

    /// The address it connects to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the TCP connect is still under way.
    pub(crate) fn connecting(&self) -> bool {
        self.phase == Phase::Tcp
    }

    /// The records [`Progress::Crypto`] handed out were processed (`Err`: the handshake failed, a refused
    /// certificate among others); advance again next.
    pub(crate) fn processed(&mut self, result: Result<(), rustls::Error>) -> Result<(), String> {
        self.processing = false;
        let Some(conn) = &self.tls else {
            return Ok(());
        };
        // The next flight, or the alert telling the device why we stop.
        let sent = super::secure::send_pending(conn, &mut self.stream);
        result.map_err(|e| io_failed(&io::Error::new(io::ErrorKind::InvalidData, e)))?;
        sent.map_err(|e| io_failed(&e))
    }

    /// WSS: its TLS state.
    pub(crate) fn tls(&self) -> Option<&super::secure::Shared> {
        self.tls.as_ref()
    }

    /// Whether [`Progress::Crypto`]'s records are still being processed.
    pub(crate) fn processing(&self) -> bool {
        self.processing
    }

    /// When the current step times out.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Why the dial failed when its step's deadline passed.
    fn timed_out(&self) -> String {
        let secs = self.step.as_secs_f64();
        match self.phase {
            Phase::Tcp => format!("no TCP connection within {secs:.1} s"),
            Phase::Upgrade | Phase::Ready => {
                format!("WebSocket handshake failed: no answer within {secs:.1} s")
            }
            Phase::Call => format!("subscribing failed: no answer within {secs:.1} s"),
        }
    }

    /// Notifications dropped before the answer because too many came.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Takes the next steps the socket allows, within `share`; `scratch` is the read buffer.
    pub(crate) fn advance(
        &mut self,
        now: Instant,
        scratch: &mut [u8],
        share: &mut Share,
    ) -> Progress {
        match self.advance_inner(now, scratch, share) {
            Ok(p) => p,
            Err(why) => Progress::Failed(why),
        }
    }

    fn advance_inner(
        &mut self,
        now: Instant,
        scratch: &mut [u8],
        share: &mut Share,
    ) -> Result<Progress, String> {
        // The deadline is looked at only when the socket has nothing more: a poller that runs late (a loaded
        // machine) still takes an answer that came in time.
        if self.processing {
            return self.waiting(now);
        }
        if self.phase == Phase::Tcp {
            if !self.connected()? {
                return self.waiting(now);
            }
            let _ = self.stream.set_nodelay(true);
            let (request, accept) = client::upgrade_request(&mut self.noise, &self.host, "/rpc");
            self.out = request.into_bytes();
            self.accept = accept;
            self.phase = Phase::Upgrade;
            self.deadline = now + self.step;
        }
        if self.phase == Phase::Ready {
            self.send_call(now)?;
        }
        loop {
            if !self.flush()? {
                return self.waiting(now);
            }
            // What is buffered first: a whole answer may have come with the bytes before it.
            if let Some(p) = self.handle_buffered(share)? {
                return Ok(p);
            }
            // What that queued (the call again, pongs) goes out before waiting for more.
            if !self.out.is_empty() {
                continue;
            }
            if share.bytes == 0 || share.messages == 0 {
                return Ok(Progress::More);
            }
            if let Some(conn) = &self.tls
                && let Some(received) = super::secure::receive_handshake(conn, &mut self.stream)
            {
                match received {
                    Ok(0) => return Err(self.ended()),
                    Ok(n) => {
                        share.bytes = share.bytes.saturating_sub(n);
                        self.processing = true;
                        return Ok(Progress::Crypto(conn.clone()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.waiting(now),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_failed(&e)),
                }
            }
            let want = scratch.len().min(share.bytes);
            let read = match &self.tls {
                Some(conn) => super::secure::read(conn, &mut self.stream, &mut scratch[..want]),
                None => self.stream.read(&mut scratch[..want]),
            };
            match read {
                Ok(0) => return Err(self.ended()),
                Ok(n) => {
                    self.buf.extend_from_slice(&scratch[..n]);
                    share.bytes -= n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.waiting(now),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_failed(&e)),
            }
        }
    }

    /// Nothing more from the socket now: wait for it, unless the step's deadline has passed.
    fn waiting(&self, now: Instant) -> Result<Progress, String> {
        if now >= self.deadline {
            Err(self.timed_out())
        } else {
            Ok(Progress::Waiting)
        }
    }

    /// Whether the TCP connect finished (an error when it failed).
    fn connected(&mut self) -> Result<bool, String> {
        let refused = |e: io::Error| format!("cannot connect to {}: {e}", self.addr);
        if let Some(e) = self.stream.take_error().map_err(&refused)? {
            return Err(refused(e));
        }
        match self.stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(refused(e)),
        }
    }

    /// Writes what is pending; false when the socket cannot take it all now.
    fn flush(&mut self) -> Result<bool, String> {
        while !self.out.is_empty() {
            let written = match &self.tls {
                Some(conn) => super::secure::write(conn, &mut self.stream, &self.out),
                None => self.stream.write(&self.out),
            };
            match written {
                Ok(0) => return Err("the socket took no bytes".into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_failed(&e)),
            }
        }
        Ok(true)
    }

    /// Handles what the buffer holds for the current phase; `Some` when the dial got somewhere.
    fn handle_buffered(&mut self, share: &mut Share) -> Result<Option<Progress>, String> {
        match self.phase {
            Phase::Tcp | Phase::Ready => Ok(None),
            Phase::Upgrade => {
                let Some(end) = client::head_end(&self.buf) else {
                    if self.buf.len() > MAX_HANDSHAKE {
                        return Err(
                            "WebSocket handshake failed: the answer head is too long".into()
                        );
                    }
                    return Ok(None);
                };
                let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 4);
                client::check_answer(&head, &self.accept)
                    .map_err(|m| format!("WebSocket handshake failed: {m}"))?;
                self.phase = Phase::Ready;
                Ok(Some(Progress::Calling))
            }
            Phase::Call => self.handle_frames(share),
        }
    }

    /// Decodes the whole frames in the buffer while the share lasts; `Some(Done)` at the call's answer.
    fn handle_frames(&mut self, share: &mut Share) -> Result<Option<Progress>, String> {
        loop {
            if share.messages == 0 {
                return Ok(Some(Progress::More));
            }
            let f = match frame::decode(&self.buf, false, MAX_MESSAGE) {
                Ok(Some((f, used))) => {
                    self.buf.drain(..used);
                    f
                }
                Ok(None) => return Ok(None),
                Err(p) => return Err(self.protocol(p)),
            };
            let message = match self.asm.push(f) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(p) => return Err(self.protocol(p)),
            };
            share.messages -= 1;
            match message {
                Message::Text(text) => {
                    share.bytes = share.bytes.saturating_sub(text.len());
                    if let Some(result) = self.on_text(&text)? {
                        // A pong half written would leave the stream mid-frame for its next owner.
                        if !self.flush()? {
                            return Err("the socket did not take a control frame".into());
                        }
                        return Ok(Some(Progress::Done(result)));
                    }
                }
                Message::Binary(_) | Message::Pong(_) => {}
                Message::Ping(p) => self.queue_frame(Opcode::Pong, &p),
                Message::Close(code, _) => {
                    return Err(match code {
                        Some(c) => format!("the device closed the WebSocket ({c})"),
                        None => "the device closed the WebSocket".into(),
                    });
                }
            }
        }
    }

    /// One text message while the call is in flight: its answer (the result), a challenge (the call goes
    /// again), a notification (queued), or something skipped.
    fn on_text(&mut self, text: &str) -> Result<Option<Option<StatusRead>>, String> {
        // The call's answer is read straight into a status (no JSON tree); any other frame the usual way.
        if let Some(read) = StatusRead::from_answer(text, self.id) {
            self.result = Some(Some(read));
            return Ok(self.finished());
        }
        if let Intro::Asked(asked) = self.intro
            && let Some(info) = DeviceInfo::from_answer(text, asked)
        {
            self.intro = Intro::Answered(Some(info));
            return Ok(self.finished());
        }
        let Ok(Value::Object(frame)) = crate::untrusted_json::parse(text.as_bytes()) else {
            return Err(format!(
                "subscribing failed: {}",
                CallError::Malformed("not a JSON object".into())
            ));
        };
        if frame.contains_key("method") {
            rpc::queue_notification(&mut self.queued, &mut self.dropped, &frame);
            return Ok(None);
        }
        let id = frame.get("id").and_then(Value::as_u64);
        if let Intro::Asked(asked) = self.intro
            && id == Some(asked)
        {
            // Refused (a device that wants authentication for it after all): the driver introduces it.
            self.intro = Intro::Answered(
                rpc::take_result(frame)
                    .ok()
                    .map(|v| DeviceInfo::from_value(&v)),
            );
            return Ok(self.finished());
        }
        if id != Some(self.id) {
            // An answer to nothing we wait for: skipped.
            return Ok(None);
        }
        match rpc::take_result(frame) {
            Ok(v) => {
                self.result = Some(StatusRead::from_value(&v));
                Ok(self.finished())
            }
            Err(CallError::Rpc { code: 401, message }) => {
                rpc::on_challenge(
                    &message,
                    self.password.is_some(),
                    &mut self.fresh,
                    &mut self.challenge,
                )
                .map_err(|e| format!("subscribing failed: {e}"))?;
                self.send_call(Instant::now())?;
                Ok(None)
            }
            Err(e) => Err(format!("subscribing failed: {e}")),
        }
    }

    /// The call's result once it and the introduction (if asked) answered.
    fn finished(&mut self) -> Option<Option<StatusRead>> {
        if matches!(self.intro, Intro::Wanted | Intro::Asked(_)) {
            return None;
        }
        self.result.take()
    }

    /// Queues the call (answering the challenge in hand) and starts its step; the first time, after the
    /// introduction when one is wanted.
    fn send_call(&mut self, now: Instant) -> Result<(), String> {
        if let Intro::Wanted = self.intro {
            let id = self.next_id;
            self.next_id += 1;
            self.intro = Intro::Asked(id);
            let frame =
                rpc::request_frame(id, &self.src, "Shelly.GetDeviceInfo", None, None, &mut None);
            self.queue_frame(Opcode::Text, frame.to_string().as_bytes());
        }
        self.id = self.next_id;
        self.next_id += 1;
        let frame = rpc::request_frame(
            self.id,
            &self.src,
            "Shelly.GetStatus",
            None,
            self.password.as_deref(),
            &mut self.challenge,
        );
        self.queue_frame(Opcode::Text, frame.to_string().as_bytes());
        self.phase = Phase::Call;
        self.deadline = now + self.step;
        Ok(())
    }

    fn queue_frame(&mut self, opcode: Opcode, payload: &[u8]) {
        let mask = client::mask(&mut self.noise);
        self.out
            .extend(frame::encode(opcode, true, payload, Some(mask)));
    }

    /// A protocol error: the close with its code is sent if the socket takes it at once.
    fn protocol(&mut self, p: frame::ProtocolError) -> String {
        self.out.clear();
        self.queue_frame(Opcode::Close, &frame::close_payload(p.close_code(), ""));
        let _ = self.flush();
        format!("the device sent {p}")
    }

    fn ended(&self) -> String {
        match self.phase {
            Phase::Upgrade => {
                "WebSocket handshake failed: the connection ended before the answer".into()
            }
            _ if !self.buf.is_empty() => {
                "the WebSocket connection ended in the middle of a frame".into()
            }
            _ => "the WebSocket connection ended".into(),
        }
    }

    /// The connection, once [`Progress::Done`] came.
    pub(crate) fn into_dialed(self) -> Dialed {
        Dialed {
            stream: self.stream,
            tls: self.tls,
            buf: self.buf,
            asm: self.asm,
            challenge: self.challenge,
            queued: self.queued,
            info: match self.intro {
                Intro::Answered(info) => info,
                Intro::No | Intro::Wanted | Intro::Asked(_) => None,
            },
        }
    }
}

/// A failed read or write in words; a refused certificate says so.
fn io_failed(e: &io::Error) -> String {
    match crate::driver::tls::refusal_of(e) {
        Some(r) => format!("TLS certificate refused: {r}"),
        None => format!("WebSocket I/O failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::net::{TcpListener, TcpStream};

    const STEP: Duration = Duration::from_secs(5);

    /// Accepts one connection and answers its upgrade request with the right key (or `head` when given);
    /// returns the socket and what came after the request head. `None` when the answer could not be written.
    fn upgraded(l: &TcpListener, head: Option<String>) -> Option<(TcpStream, Vec<u8>)> {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(e) = client::head_end(&buf) {
                break e;
            }
            let n = s.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
        };
        let request = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let key = request
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap();
        let head = head.unwrap_or_else(|| {
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                super::super::accept_key(key)
            )
        });
        s.write_all(head.as_bytes()).ok()?;
        Some((s, buf))
    }

    /// A device that upgrades with the right key (or `head` when given), reads the call, then writes `frames`
    /// (each answer's `"id"` is the call's) and keeps the connection open until the test ends.
    fn device(
        head: Option<String>,
        frames: Vec<serde_json::Value>,
    ) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let Some((mut s, mut buf)) = upgraded(&l, head) else {
                return;
            };
            let mut chunk = [0u8; 4096];
            let call = loop {
                if let Ok(Some((f, _))) = frame::decode(&buf, true, MAX_MESSAGE) {
                    break f;
                }
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let call: serde_json::Value = serde_json::from_slice(&call.payload).unwrap();
            let mut wire = Vec::new();
            for mut f in frames {
                if f.get("id").is_some() {
                    f["id"] = call["id"].clone();
                }
                wire.extend(frame::encode(
                    Opcode::Text,
                    true,
                    f.to_string().as_bytes(),
                    None,
                ));
            }
            // In small pieces: a dial must join them.
            for piece in wire.chunks(7) {
                if s.write_all(piece).is_err() {
                    return;
                }
            }
            let _ = s.read(&mut chunk);
        });
        (addr, h)
    }

    /// A poll with `dial`'s socket registered for both readinesses.
    fn registered(dial: &mut Dial) -> mio::Poll {
        let poll = mio::Poll::new().unwrap();
        poll.registry()
            .register(
                dial.stream_mut(),
                mio::Token(0),
                mio::Interest::READABLE | mio::Interest::WRITABLE,
            )
            .unwrap();
        poll
    }

    /// Advances `dial` on readiness events until it is done or failed (a hang guard of 10 s).
    fn drive(dial: &mut Dial) -> Progress {
        drive_with(dial, |_, _| {
            panic!("a plain dial has no handshake to process")
        })
    }

    /// [`drive`], giving each [`Progress::Crypto`] to `crypto` (an error fails the dial with it).
    fn drive_with(
        dial: &mut Dial,
        mut crypto: impl FnMut(&mut Dial, super::super::secure::Shared) -> Result<(), String>,
    ) -> Progress {
        let mut poll = registered(dial);
        let mut events = mio::Events::with_capacity(8);
        let mut scratch = vec![0u8; 1024];
        for _ in 0..10_000 {
            let mut share = Share {
                bytes: 2048,
                messages: 4,
            };
            match dial.advance(Instant::now(), &mut scratch, &mut share) {
                Progress::Waiting => {
                    poll.poll(&mut events, Some(Duration::from_secs(10)))
                        .unwrap();
                    assert!(!events.is_empty(), "no readiness within 10 s");
                }
                Progress::More | Progress::Calling => {}
                Progress::Crypto(conn) => {
                    if let Err(why) = crypto(dial, conn) {
                        return Progress::Failed(why);
                    }
                }
                done => return done,
            }
        }
        panic!("the dial never finished");
    }

    fn start(addr: SocketAddr, password: Option<&str>) -> Dial {
        Dial::start(addr, "dev", "me", password, STEP, Instant::now(), None).unwrap()
    }

    /// A device that upgrades, reads `calls` request frames and answers them with what `answer` makes of them
    /// (in any order), then keeps the connection open until the test ends.
    fn device_of_calls(
        calls: usize,
        answer: impl FnOnce(&[serde_json::Value]) -> Vec<serde_json::Value> + Send + 'static,
    ) -> (SocketAddr, std::thread::JoinHandle<Vec<serde_json::Value>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, mut buf) = upgraded(&l, None).expect("the upgrade answer written");
            let mut chunk = [0u8; 4096];
            let mut got = Vec::new();
            while got.len() < calls {
                match frame::decode(&buf, true, MAX_MESSAGE) {
                    Ok(Some((f, used))) => {
                        buf.drain(..used);
                        got.push(serde_json::from_slice(&f.payload).unwrap());
                    }
                    _ => {
                        let n = s.read(&mut chunk).unwrap();
                        assert!(n > 0, "the client closed");
                        buf.extend_from_slice(&chunk[..n]);
                    }
                }
            }
            for f in answer(&got) {
                let wire = frame::encode(Opcode::Text, true, f.to_string().as_bytes(), None);
                s.write_all(&wire).unwrap();
            }
            let _ = s.read(&mut chunk);
            got
        });
        (addr, h)
    }

    /// A WSS dial to an emulated device pinned to `pin`, its handshake records processed on another thread
    /// each time the dial hands them out; the outcome and how many times it handed records out.
    fn wss_dial_with_crypto_elsewhere(pin: Option<&str>) -> (Progress, usize) {
        let mut spec = crate::emulator::DeviceSpec::new("ShellyPlus1PM");
        spec.tls = true;
        let emu =
            crate::emulator::Emulator::start(vec![spec], &crate::ModelLibrary::embedded()).unwrap();
        let pin = pin.map_or_else(|| emu.certificate_sha256(0).unwrap(), str::to_string);
        let tls = crate::driver::tls::client_config(crate::driver::tls::Trust::Pin(
            crate::driver::tls::parse_fingerprint(&pin).unwrap(),
        ))
        .unwrap();
        let conn =
            rustls::ClientConnection::new(tls.config(), "127.0.0.1".try_into().unwrap()).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", emu.port(0)).parse().unwrap();
        let mut dial =
            Dial::start(addr, "dev", "me", None, STEP, Instant::now(), Some(conn)).unwrap();
        let mut handed = 0;
        let p = drive_with(&mut dial, |dial, conn| {
            handed += 1;
            assert!(dial.processing());
            // Until processed, the dial waits and leaves the connection alone.
            let mut share = Share {
                bytes: 2048,
                messages: 4,
            };
            let p = dial.advance(Instant::now(), &mut [0u8; 1024], &mut share);
            assert!(matches!(p, Progress::Waiting), "{p:?}");
            let result = std::thread::spawn(move || super::super::secure::process(&conn))
                .join()
                .unwrap();
            dial.processed(result)
        });
        (p, handed)
    }

    /// WSS: the dial hands the handshake's records out to be processed elsewhere (the poller's helpers run
    /// that crypto) and goes on once told; the handshake and the call complete.
    #[test]
    fn a_wss_dial_hands_its_handshake_out_and_completes_once_told() {
        let (p, handed) = wss_dial_with_crypto_elsewhere(None);
        let Progress::Done(Some(status)) = p else {
            panic!("{p:?}");
        };
        let status = status.value();
        assert!(status.get("switch:0").is_some(), "{status}");
        // The server's first flight and its Finished at least.
        assert!(handed >= 2, "{handed}");
    }

    /// A certificate refused while processed elsewhere fails the dial with the reason, naming both prints.
    #[test]
    fn a_certificate_refused_off_the_poller_fails_the_dial_with_the_reason() {
        let wrong = "AB:".repeat(31) + "AB";
        let (p, _) = wss_dial_with_crypto_elsewhere(Some(&wrong));
        let Progress::Failed(why) = p else {
            panic!("{p:?}");
        };
        assert!(why.starts_with("TLS certificate refused"), "{why}");
        assert!(why.contains(&wrong), "{why}");
    }

    /// At open the dial reads the device information with the subscription: both calls go out in one write
    /// (before any answer), and the dial is done only when both answered, whatever their order.
    #[test]
    fn an_introduced_dial_reads_the_device_information_with_the_status() {
        let (addr, device) = device_of_calls(2, |calls| {
            vec![
                json!({"id": calls[1]["id"], "result": {"sys": {"uptime": 7}}}),
                json!({"method": "NotifyStatus", "params": {"ts": 1.0, "sys": {"uptime": 8}}}),
                json!({"id": calls[0]["id"], "result": {"model": "SNSW-001P16EU", "gen": 2}}),
            ]
        });
        let mut dial = start(addr, None);
        dial.introduce();
        let Progress::Done(Some(read)) = drive(&mut dial) else {
            panic!("not done")
        };
        assert_eq!(read.doc.sys.uptime.0, Some(7.0), "read typed");
        assert_eq!(read.value()["sys"]["uptime"], 7, "its text kept");
        let dialed = dial.into_dialed();
        let info = dialed.info.as_deref().expect("read");
        assert_eq!(info.model.0.as_deref(), Some("SNSW-001P16EU"));
        assert_eq!(info.generation.0, Some(2.0));
        assert_eq!(dialed.queued.len(), 1, "the notification between them");
        // The device waits for the connection to close.
        drop(dialed);
        let calls = device.join().unwrap();
        let methods: Vec<&str> = calls.iter().filter_map(|c| c["method"].as_str()).collect();
        assert_eq!(methods, ["Shelly.GetDeviceInfo", "Shelly.GetStatus"]);
        assert!(calls.iter().all(|c| c["src"] == "me"));
    }

    /// A device that refuses the introduction (an error answer) still gives its status: the driver introduces
    /// it later.
    #[test]
    fn a_refused_introduction_leaves_the_information_to_the_driver() {
        let (addr, device) = device_of_calls(2, |calls| {
            vec![
                json!({"id": calls[0]["id"], "error": {"code": 401, "message": "{\"auth_type\": \"digest\"}"}}),
                json!({"id": calls[1]["id"], "result": {"sys": {"uptime": 7}}}),
            ]
        });
        let mut dial = start(addr, None);
        dial.introduce();
        assert!(matches!(drive(&mut dial), Progress::Done(_)));
        assert!(dial.into_dialed().info.is_none());
        device.join().unwrap();
    }

    #[test]
    fn the_answer_in_pieces_after_notifications_and_what_follows_it_stay() {
        let (addr, _h) = device(
            None,
            vec![
                serde_json::json!({"method": "NotifyStatus", "params": {"switch:0": {"output": true}}}),
                serde_json::json!({"id": 0, "result": {"switch:0": {"output": false}}}),
                serde_json::json!({"method": "NotifyEvent", "params": {"events": []}}),
            ],
        );
        let mut dial = start(addr, None);
        let Progress::Done(Some(status)) = drive(&mut dial) else {
            panic!("not done");
        };
        assert_eq!(
            status.value()["switch:0"]["output"],
            serde_json::json!(false)
        );
        let d = dial.into_dialed();
        assert_eq!(d.queued.len(), 1, "the notification before the answer");
        assert!(
            !d.buf.is_empty(),
            "the frame after the answer is the poller's"
        );
    }

    #[test]
    fn a_wrong_upgrade_or_a_missing_password_fails_with_the_reason() {
        let (addr, _h) = device(Some("HTTP/1.1 404 Not Found\r\n\r\n".into()), vec![]);
        let Progress::Failed(why) = drive(&mut start(addr, None)) else {
            panic!("a 404 upgraded");
        };
        assert!(why.contains("404"), "{why}");
        let long = format!("HTTP/1.1 101 OK\r\nX: {}\r\n\r\n", "a".repeat(10_000));
        let (addr, _h) = device(Some(long), vec![]);
        let Progress::Failed(why) = drive(&mut start(addr, None)) else {
            panic!("a 10 kB head upgraded");
        };
        assert!(why.contains("too long"), "{why}");
        let challenge = serde_json::json!({"id": 0, "error": {"code": 401,
            "message": "{\"auth_type\": \"digest\", \"nonce\": 1, \"realm\": \"r\", \"algorithm\": \"SHA-256\"}"}});
        let (addr, _h) = device(None, vec![challenge]);
        let Progress::Failed(why) = drive(&mut start(addr, None)) else {
            panic!("subscribed without a password");
        };
        assert!(why.contains("requires a password"), "{why}");
    }

    /// Firmware 2.x out of nonce slots refuses the subscription with a 429 in the frame: the dial fails saying
    /// so in words (the poller then waits its back-off before the next attempt).
    #[test]
    fn a_429_to_the_subscription_says_the_device_is_busy() {
        let busy =
            serde_json::json!({"id": 0, "error": {"code": 429, "message": "Too many requests"}});
        let (addr, _h) = device(None, vec![busy]);
        let Progress::Failed(why) = drive(&mut start(addr, Some("pw"))) else {
            panic!("subscribed through a 429");
        };
        assert!(
            why.starts_with("subscribing failed: the device is busy (429 Too many requests"),
            "{why}"
        );
        assert!(why.contains("nonce slots"), "{why}");
    }

    #[test]
    fn each_step_has_its_own_deadline() {
        // A listener that takes the connection and never answers.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut dial = start(l.local_addr().unwrap(), None);
        let _ = drive_until_upgrade_sent(&mut dial);
        let mut scratch = [0u8; 64];
        let mut share = Share {
            bytes: 64,
            messages: 1,
        };
        // The clock is the caller's: a step's deadline passes without waiting for it.
        let late = dial.deadline() + Duration::from_millis(1);
        let Progress::Failed(why) = dial.advance(late, &mut scratch, &mut share) else {
            panic!("no timeout");
        };
        assert_eq!(why, "WebSocket handshake failed: no answer within 5.0 s");
        let _keep: Option<TcpStream> = l.accept().ok().map(|(s, _)| s);
    }

    /// A poller that runs late (a loaded machine) still takes an answer that came before the deadline.
    #[test]
    fn an_answer_that_came_in_time_is_taken_by_a_late_poller() {
        let (addr, _h) = device(
            None,
            vec![serde_json::json!({"id": 0, "result": {"sys": {}}})],
        );
        let mut dial = start(addr, None);
        let mut poll = registered(&mut dial);
        let mut events = mio::Events::with_capacity(8);
        let mut scratch = vec![0u8; 1024];
        let share = || Share {
            bytes: 1 << 20,
            messages: 64,
        };
        // Until the call is out.
        for _ in 0..10_000 {
            let p = dial.advance(Instant::now(), &mut scratch, &mut share());
            if dial.phase == Phase::Call && dial.out.is_empty() {
                break;
            }
            if matches!(p, Progress::Waiting) {
                poll.poll(&mut events, Some(Duration::from_secs(10)))
                    .unwrap();
            }
        }
        assert_eq!(dial.phase, Phase::Call);
        // The whole answer arrives (in 7-byte pieces); the poller comes back only after the step's deadline.
        let whole = serde_json::json!({"id": 1, "result": {"sys": {}}})
            .to_string()
            .len()
            + 2;
        let mut peeked = [0u8; 256];
        for _ in 0..1_000 {
            let waiting = dial.stream_mut().peek(&mut peeked).unwrap_or(0);
            if dial.buf.len() + waiting >= whole {
                break;
            }
            poll.poll(&mut events, Some(Duration::from_millis(10)))
                .unwrap();
        }
        let late = dial.deadline() + Duration::from_millis(1);
        let p = dial.advance(late, &mut scratch, &mut share());
        assert!(matches!(p, Progress::Done(_)), "{p:?}");
    }

    /// Advances until the TCP connect is done and the upgrade request is out.
    fn drive_until_upgrade_sent(dial: &mut Dial) -> Progress {
        let mut scratch = [0u8; 64];
        for _ in 0..10_000 {
            let mut share = Share {
                bytes: 64,
                messages: 1,
            };
            let p = dial.advance(Instant::now(), &mut scratch, &mut share);
            if dial.phase == Phase::Upgrade && dial.out.is_empty() {
                return p;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("never connected");
    }
}
