//! Gen2+ WebSocket RPC (`GET /rpc` with `Upgrade: websocket`): the server side of RFC 6455 (the framing is
//! the client's, `crate::driver::ws::frame`), request frames answered by the same dispatcher as `POST /rpc`
//! (with in-frame digest auth), and notifications pushed to every client that has sent a request with a `src`:
//! `NotifyStatus` with the changed fields whenever the emulated state changes (`NotifyFullStatus` when a
//! component appeared or went, as after a profile switch), `NotifyEvent` for fired events.
//!
//! Each connection has a reader thread (requests, pings, close; it writes an answer itself when nothing is
//! queued ahead of it, saving a hand-over per answer) and, from the first frame queued on, a writer thread
//! (notifications, and answers that found frames ahead of them, from a bounded queue: a client that does not
//! read loses notifications, never blocks the device; a client that only asks and leaves costs no writer). Both
//! run on the device's kept threads (`threads.rs`): a connection that ends leaves its threads to the next one.
//! Faults: [`WsHub::drop_all`] cuts every connection without a close frame;
//! [`WsHub::set_stalled`] makes connections stop reading and writing until released;
//! [`WsHub::set_hold_upgrades`] leaves upgrade requests unanswered.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use serde_json::{Map, Value, json};

use super::Fault;
use super::device::Device;
pub(crate) use super::duplex::Duplex;
use super::faults::Phase;
use super::lock::lock;
use super::server::{Request, Response};
use super::state::DeviceState;
pub(crate) use super::ws_hub::WsHub;
use super::ws_hub::{Client, Queue, StartWriter, Tally};
use super::{auth, notify, rpc};
use crate::driver::ws::accept_key;
use crate::driver::ws::frame::{self, Assembler, MAX_MESSAGE, Message, Opcode};

/// Frames waiting for a client's writer; notifications beyond it are dropped.
const QUEUE: usize = 64;
/// Connections per device (real devices allow a handful).
const MAX_CLIENTS: usize = 16;
/// How long a blocked write may take before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

impl WsHub {
    /// Called with the state lock held after every access to the state: notifies what changed (when it may
    /// have, `changed`).
    pub(crate) fn on_state(&self, dev: &Device, s: &DeviceState, changed: bool) {
        if !changed || !self.subscribed.load(Ordering::SeqCst) {
            return;
        }
        if !self.measured_values(dev, s) {
            return;
        }
        if let Some((method, params)) = notify::status_change(dev, s, &self.last) {
            self.broadcast(&dev.ident.id, method, &params);
        }
    }

    /// Whether changes are measured as values now: the text a subscription was measured with becomes them
    /// at its first change; with neither, the status now is kept as text (measured, nothing to say).
    fn measured_values(&self, dev: &Device, s: &DeviceState) -> bool {
        let mut said = lock(&self.said);
        let mut last = lock(&self.last);
        if last.is_some() {
            return true;
        }
        match said.take() {
            Some(text) => {
                *last = Some(notify::comparable_text(&text));
                true
            }
            None => {
                *said = Some(notify::status_text(dev, s));
                false
            }
        }
    }

    /// Whether a subscription has what its changes are measured against.
    pub(crate) fn is_measured(&self) -> bool {
        lock(&self.said).is_some() || lock(&self.last).is_some()
    }

    /// `text`, the status a subscribing `Shelly.GetStatus` answered, is what later changes are measured
    /// against when nothing is yet.
    pub(crate) fn measure_from_text(&self, text: &str) {
        let mut said = lock(&self.said);
        if said.is_none() && lock(&self.last).is_none() {
            *said = Some(text.to_string());
        }
    }

    /// A fired event (webhook form `input.button_push`, component id).
    pub(crate) fn on_event(&self, dev: &Device, event: &str, cid: usize) {
        if !self.subscribed.load(Ordering::SeqCst) {
            return;
        }
        self.broadcast(
            &dev.ident.id,
            "NotifyEvent",
            &notify::event(dev, event, cid),
        );
    }

    /// A `NotifyEvent` of the device itself (`notify::sys_event`).
    pub(crate) fn on_sys(&self, dev: &Device, params: &Value) {
        if self.subscribed.load(Ordering::SeqCst) {
            self.broadcast(&dev.ident.id, "NotifyEvent", params);
        }
    }
}

/// Whether a request asks for a WebSocket upgrade.
pub(crate) fn is_upgrade(req: &Request) -> bool {
    req.header("upgrade")
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Answers an upgrade request on `/rpc` and starts the connection's threads; anything wrong gets a 400.
pub(crate) fn accept(dev: Arc<Device>, req: &Request, mut stream: Duplex) {
    let key = req.header("sec-websocket-key").unwrap_or("");
    let connection_ok = req.header("connection").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
    });
    let valid = req.method == "GET"
        && req.path == "/rpc"
        && connection_ok
        && req.header("sec-websocket-version") == Some("13")
        && key.len() == 24;
    let full = dev.ws.connections() >= MAX_CLIENTS || dev.ws.stopping.load(Ordering::SeqCst);
    if !valid || full {
        let status = if valid {
            "503 Service Unavailable"
        } else {
            "400 Bad Request"
        };
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        return;
    }
    if dev.ws.hold_upgrades.load(Ordering::SeqCst) {
        // Kept open and never answered, until released or the client gives up.
        if stream.tcp.set_nonblocking(true).is_ok() {
            lock(&dev.ws.held).push(stream.tcp);
        }
        return;
    }
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    );
    let _ = stream.tcp.set_read_timeout(None);
    let _ = stream.tcp.set_write_timeout(Some(WRITE_TIMEOUT));
    if stream.write_all(answer.as_bytes()).is_err() {
        return;
    }
    let (Ok(reader), Ok(cut)) = (stream.try_clone(), stream.tcp.try_clone()) else {
        return;
    };
    let (tx, rx) = crossbeam_channel::bounded(QUEUE);
    let port = dev.port();
    let out = Arc::new(Mutex::new(stream));
    let src = Arc::new(Mutex::new(None));
    // The writer starts at the first frame queued (a notification, an answer behind one, a flood).
    let start_writer: StartWriter = {
        let (d, o, flood_to) = (Arc::clone(&dev), Arc::clone(&out), Arc::clone(&src));
        Box::new(move |tally| {
            if d.ws.stopping.load(Ordering::SeqCst) {
                return;
            }
            let dev = Arc::clone(&d);
            // Without a thread (stopping, or none could start) queued frames are never written: the client
            // times out, as against a device that hangs.
            let _ = d.ws.threads.run(
                || format!("sd-emu-ws-{port}"),
                move || write_loop(&dev, &o, &rx, &tally, &flood_to),
            );
        })
    };
    let queue = Queue::new(tx, start_writer);
    let id = dev.ws.next_id.fetch_add(1, Ordering::Relaxed);
    {
        let mut clients = lock(&dev.ws.clients);
        // Checked under the lock `drop_all` takes after `Refuse` is set: an upgrade that was under way when
        // the port began refusing is cut too, not left as the one live connection of a refusing device.
        if matches!(dev.net.phase(Instant::now()), Phase::Refuse(_)) {
            let _ = cut.shutdown(Shutdown::Both);
            return;
        }
        clients.push(Client {
            id,
            queue: queue.clone(),
            stream: cut,
            src: Arc::clone(&src),
        });
    }
    let d = Arc::clone(&dev);
    let reader = dev.ws.threads.run(
        || format!("sd-emu-ws-{port}"),
        move || {
            read_loop(&d, reader, &Sink { out, queue }, &src);
            d.ws.remove(id);
        },
    );
    if reader.is_err() {
        // No thread for it (stopping, or none could start): the connection is not served.
        dev.ws.remove(id);
    }
}

/// Writes what is queued (notifications; answers that found frames ahead of them), and flood frames while
/// the flood fault is on. Each frame is written whole under the connection's write lock.
fn write_loop(
    dev: &Device,
    out: &Mutex<Duplex>,
    rx: &Receiver<Vec<u8>>,
    tally: &Tally,
    src: &Mutex<Option<String>>,
) {
    let mut n = 0u64;
    // Ends when every sender is gone (the reader ended and the client left the hub).
    loop {
        let flood = dev.ws.flood.load(Ordering::SeqCst);
        let dst = if flood > 0 { lock(src).clone() } else { None };
        let (wire, queued) = match dst {
            // Flooding: what is queued (answers, notifications) first, else one more flood frame.
            Some(dst) => match rx.try_recv() {
                Ok(w) => (w, true),
                Err(TryRecvError::Empty) => {
                    n += 1;
                    dev.ws.flooded.fetch_add(1, Ordering::Relaxed);
                    (flood_frame(dev, &dst, n, flood), false)
                }
                Err(TryRecvError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(w) => (w, true),
                Err(_) => break,
            },
        };
        // An empty frame only wakes the writer (the flood began); it was not counted.
        if wire.is_empty() {
            continue;
        }
        dev.ws.wait_unstalled();
        let mut stream = lock(out);
        let written = stream.write_all(&wire);
        if queued {
            tally.written();
        }
        if written.is_err() {
            break;
        }
    }
    let _ = lock(out).shutdown();
}

/// Where the reader's frames go: written at once when nothing is queued ahead of them (no hand-over to the
/// writer thread for an answer), else queued behind what is, so frames leave in the order they were made.
struct Sink {
    out: Arc<Mutex<Duplex>>,
    queue: Queue,
}

impl Sink {
    /// Sends a frame; `false` when the connection failed writing it (it is then shut down).
    fn send(&self, dev: &Device, wire: Vec<u8>) -> bool {
        dev.ws.wait_unstalled();
        let mut stream = lock(&self.out);
        if !self.queue.drained() {
            drop(stream);
            self.queue.push(wire);
            return true;
        }
        if stream.write_all(&wire).is_ok() {
            return true;
        }
        let _ = stream.shutdown();
        false
    }
}

/// One flood frame: a `NotifyStatus` whose power changes every time, padded to about `bytes`.
fn flood_frame(dev: &Device, dst: &str, n: u64, bytes: usize) -> Vec<u8> {
    let mut fields = json!({"id": 0, "apower": n as f64 / 10.0});
    if bytes > 200 {
        fields["pad"] = json!("x".repeat(bytes - 200));
    }
    let frame = json!({"src": dev.ident.id, "dst": dst, "method": "NotifyStatus",
        "params": {"ts": n as f64 / 100.0, "switch:0": fields}});
    frame::encode(Opcode::Text, true, frame.to_string().as_bytes(), None)
}

fn read_loop(dev: &Device, mut stream: Duplex, sink: &Sink, src: &Mutex<Option<String>>) {
    let mut buf: Vec<u8> = Vec::new();
    let mut asm = Assembler::default();
    let mut chunk = [0u8; 8192];
    // When the bytes of the message being read came: requests that came together (pipelined in one write)
    // are answered together, one latency after they came, as over a network of that latency.
    let mut arrived = Instant::now();
    loop {
        dev.ws.wait_unstalled();
        let msg = loop {
            match frame::decode(&buf, true, MAX_MESSAGE) {
                Ok(Some((f, used))) => {
                    buf.drain(..used);
                    match asm.push(f) {
                        Ok(Some(m)) => break Ok(m),
                        Ok(None) => continue,
                        Err(p) => break Err(p),
                    }
                }
                Ok(None) => {}
                Err(p) => break Err(p),
            }
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => {
                    arrived = Instant::now();
                    buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        };
        let first = lock(src).is_none();
        let out =
            |opcode, payload: &[u8]| sink.send(dev, frame::encode(opcode, true, payload, None));
        match msg {
            Err(p) => {
                out(Opcode::Close, &frame::close_payload(p.close_code(), ""));
                return;
            }
            Ok(Message::Close(code, _)) => {
                let payload = code
                    .map(|c| frame::close_payload(c, ""))
                    .unwrap_or_default();
                out(Opcode::Close, &payload);
                return;
            }
            Ok(Message::Ping(p)) => {
                if !out(Opcode::Pong, &p) {
                    return;
                }
            }
            Ok(Message::Pong(_) | Message::Binary(_)) => {}
            Ok(Message::Text(t)) => {
                // Notifications made meanwhile go out after the answer (`Queue::answered`): on the wire no
                // change overtakes an answer older than it.
                sink.queue.answering();
                match answer(dev, &t, src, arrived) {
                    Reply::Frame(answer) => {
                        let sent = out(Opcode::Text, &answer);
                        sink.queue.answered(sent);
                        if !sent {
                            return;
                        }
                        let subscribed = first && lock(src).is_some();
                        if subscribed && dev.ws.flood.load(Ordering::SeqCst) > 0 {
                            // A writer told to flood waits for the subscription (or starts now).
                            sink.queue.wake();
                        }
                        // A flapping device: the subscription answered, then the connection ends.
                        if subscribed && dev.ws.hang_up.load(Ordering::SeqCst) {
                            out(Opcode::Close, &frame::close_payload(1001, ""));
                            return;
                        }
                    }
                    Reply::Cut(answer) => {
                        // The frame's header promises more than comes: the connection ends mid-frame.
                        let wire = frame::encode(Opcode::Text, true, &answer, None);
                        sink.send(dev, wire[..wire.len() / 2].to_vec());
                        sink.queue.answered(false);
                        return;
                    }
                    Reply::Silent => sink.queue.answered(true),
                }
            }
        }
    }
}

/// What a request frame gets back.
enum Reply {
    /// This response frame's payload.
    Frame(Vec<u8>),
    /// The request was carried out, then the connection ends halfway through its response frame.
    Cut(Vec<u8>),
    /// Nothing.
    Silent,
}

/// One request frame → its response frame (bytes), counted under `rpc <Method>` like HTTP calls, the port's
/// latency after it `arrived`; no answer under a blackhole fault, a broken frame under a malformed-JSON one, a response
/// cut off with the connection under a truncated-body one (after the request was carried out, as over HTTP).
fn answer(dev: &Device, text: &str, src: &Mutex<Option<String>>, arrived: Instant) -> Reply {
    let Ok(Value::Object(f)) = crate::untrusted_json::parse(text.as_bytes()) else {
        let e = json!({"id": null, "src": dev.ident.id, "error": {"code": -32700, "message": "Parse error"}});
        return Reply::Frame(Response::json_whole(200, &e).body);
    };
    let method = f.get("method").and_then(Value::as_str).unwrap_or("");
    let key = format!("rpc {method}");
    let (fault, latency) = dev.net.for_request(&key);
    dev.net.count(key);
    dev.ws.requests.fetch_add(1, Ordering::Relaxed);
    match fault {
        Fault::Blackhole => return Reply::Silent,
        Fault::MalformedJson => return Reply::Frame(b"{\"broken\":".to_vec()),
        _ => {}
    }
    dev.net.sleep(latency.saturating_sub(arrived.elapsed()));
    let body = match auth::guard_frame(&dev.auth, &f) {
        Some(error) => {
            let mut out = Map::new();
            out.insert("id".into(), f.get("id").cloned().unwrap_or(Value::Null));
            out.insert("src".into(), json!(dev.ident.id));
            if let Some(s) = f.get("src") {
                out.insert("dst".into(), s.clone());
            }
            out.insert("error".into(), error);
            Response::json_whole(200, &Value::Object(out)).body
        }
        None => {
            // Let through (authenticated, or open): from now on the client gets notifications.
            if let Some(s) = f.get("src").and_then(Value::as_str) {
                let mut g = lock(src);
                if g.is_none() {
                    *g = Some(crate::text::clip(s, 64));
                    drop(g);
                    dev.ws.subscribed.store(true, Ordering::SeqCst);
                    // The status now is what later changes are measured against: a `Shelly.GetStatus`
                    // measures with the status it answers (`rpc::answer_text`), any other request here.
                    if !rpc::is_status_call(&f) {
                        dev.measure_status();
                    }
                }
            }
            rpc::answer_text(dev, &f)
        }
    };
    if fault == Fault::TruncatedBody {
        Reply::Cut(body)
    } else {
        Reply::Frame(body)
    }
}
