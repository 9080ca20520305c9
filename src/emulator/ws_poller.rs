//! The emulator's poller (`sd-emu-ws`): one thread serves every upgraded connection of every emulated device
//! in the process, as a device's firmware serves its connections from one loop, and accepts the connections
//! of the ports that lend it their listeners (`accepting.rs`). A request frame
//! waits for its port's latency on a timer, not on a sleeping thread: with a thread per connection, each
//! request of 1,000 devices opened at once was three wake-ups (the hand-over, the frame, the latency's end) and
//! those wake-ups were most of the emulator's CPU (BENCHMARKS.md, step 36).
//!
//! Per connection and turn the work is bounded (64 KiB read, 16 flood frames), so one device's client cannot
//! starve another's. A connection's frames leave in the order they were made (`Outbox`); while 64 wait, its
//! requests are not read (a client that does not read slows only itself) and notifications are dropped. A
//! write blocked for 2 s ends the connection. The thread starts with the first connection or lent port and
//! ends when it has had neither for a while.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use serde_json::{Map, Value};

use super::Fault;
use super::accepting::{Head, HeadNext, Next, Port};
use super::device::Device;
use super::faults::NetControl;
use super::lock::lock;
use super::server::Service;
use super::ws_answer::{self, Prepared, Reply};
use super::ws_hub::{Doorbell, Outbox, QUEUE};
use crate::driver::ws::frame::{self, Assembler, MAX_MESSAGE, Message, Opcode};

/// The waker's token; connections have the tokens above it.
const WAKE: Token = Token(0);
/// Bytes read from one connection per turn.
const READ_BUDGET: usize = 64 * 1024;
/// Queued frames written together in one write, up to this many bytes.
const COALESCE: usize = 64 * 1024;
/// Flood frames made for one connection per turn.
const FLOOD_BUDGET: usize = 16;
/// A connection whose writes make no progress for this long is ended.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the thread stays without connections before it ends.
const LINGER: Duration = Duration::from_secs(2);
/// The poller only parses small frames and builds small answers.
const STACK: usize = 256 * 1024;
/// How long a port's thread waits for its listener back.
const RECLAIM_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection whose upgrade was answered, handed to the poller.
pub(super) struct Adopted {
    pub dev: Arc<Device>,
    /// Its id in the device's `WsHub`.
    pub id: u64,
    pub tcp: TcpStream,
    pub tls: Option<rustls::Connection>,
    pub outbox: Arc<Outbox>,
    /// The `src` of its first request let through (it is subscribed from then on).
    pub src: Arc<Mutex<Option<String>>>,
}

/// The running poller, as the port threads see it.
pub(super) struct Poller {
    shared: Arc<Shared>,
}

struct Shared {
    bell: Arc<Doorbell>,
    /// Ports register their listeners from their own threads.
    registry: Registry,
    adopted: Mutex<Vec<(u64, Adopted)>>,
    /// Listeners lent and asked back, taken together so that a port is never asked back before it is known.
    ports: Mutex<PortRequests>,
    next: AtomicU64,
    /// `Poller`s held now (by a thread between the upgrade's check and `adopt`, and by every port whose
    /// listener is lent): the thread does not end while one may still hand it a connection or a listener.
    users: AtomicUsize,
}

#[derive(Default)]
struct PortRequests {
    lent: Vec<(u64, Port)>,
    reclaimed: Vec<(u64, Sender<TcpListener>)>,
}

/// A listener the poller holds for a port's thread.
pub(super) struct Lent {
    token: u64,
    poller: Poller,
    /// Asked back (`reclaim`).
    back: bool,
}

impl Lent {
    /// Asks the poller for the listener; it answers on `tx` (or closes it, if `tx`'s receiver is gone).
    fn ask_back(&mut self, tx: Sender<TcpListener>) {
        self.back = true;
        let shared = &self.poller.shared;
        lock(&shared.ports).reclaimed.push((self.token, tx));
        shared.bell.kick(self.token);
    }

    /// The listener back, no longer polled; `None` when the poller did not give it back in time.
    pub(super) fn reclaim(mut self) -> Option<TcpListener> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.ask_back(tx);
        let back = rx.recv_timeout(RECLAIM_TIMEOUT).ok();
        if back.is_none() {
            log::warn!(
                "emulator: the poller did not give a port's listener back; it listens again"
            );
        }
        back
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if !self.back {
            // The port's thread ended without asking for it back (a panic): the poller closes it.
            let (tx, _) = crossbeam_channel::bounded(1);
            self.ask_back(tx);
        }
    }
}

/// The process's poller while it runs.
static RUNNING: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

/// The poller, started if it is not running.
pub(super) fn shared() -> Result<Poller, String> {
    let mut running = lock(&RUNNING);
    if let Some(shared) = running.as_ref() {
        shared.users.fetch_add(1, Ordering::SeqCst);
        return Ok(Poller {
            shared: Arc::clone(shared),
        });
    }
    let fail = |e: io::Error| format!("cannot start the emulator's poller: {e}");
    let poll = Poll::new().map_err(fail)?;
    let waker = Waker::new(poll.registry(), WAKE).map_err(fail)?;
    let registry = poll.registry().try_clone().map_err(fail)?;
    let shared = Arc::new(Shared {
        bell: Arc::new(Doorbell::new(waker)),
        registry,
        adopted: Mutex::default(),
        ports: Mutex::default(),
        next: AtomicU64::new(1),
        users: AtomicUsize::new(1),
    });
    let thread = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("sd-emu-ws".into())
        .stack_size(STACK)
        .spawn(move || run(poll, &thread))
        .map_err(fail)?;
    *running = Some(Arc::clone(&shared));
    Ok(Poller { shared })
}

impl Poller {
    /// A token for a new connection.
    pub(super) fn token(&self) -> u64 {
        self.shared.next.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn bell(&self) -> Arc<Doorbell> {
        Arc::clone(&self.shared.bell)
    }

    /// Serves `conn` from now on (its outbox was made with [`Poller::token`] and [`Poller::bell`]).
    pub(super) fn adopt(&self, conn: Adopted) {
        conn.dev.ws.attached.fetch_add(1, Ordering::SeqCst);
        let token = conn.outbox.token();
        lock(&self.shared.adopted).push((token, conn));
        self.shared.bell.kick(token);
    }

    /// Accepts on `listener` for its port until [`Lent::reclaim`]; `Err` with it when it cannot be polled.
    pub(super) fn lend(
        self,
        listener: TcpListener,
        service: Arc<dyn Service>,
        net: Arc<NetControl>,
    ) -> Result<Lent, TcpListener> {
        let token = self.token();
        let port = Port::new(listener, service, net, &self.shared.registry, token)?;
        lock(&self.shared.ports).lent.push((token, port));
        // What came before the poller knew the port is accepted at this kick.
        self.shared.bell.kick(token);
        Ok(Lent {
            token,
            poller: self,
            back: false,
        })
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.shared.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The thread: readiness events, kicks and timers, each turning into a turn of the connections concerned.
fn run(mut poll: Poll, shared: &Shared) {
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut ports: HashMap<u64, Port> = HashMap::new();
    let mut heads: HashMap<u64, Head> = HashMap::new();
    let mut new_heads: Vec<(u64, Head)> = Vec::new();
    let mut timers: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut events = Events::with_capacity(1024);
    let mut again: Vec<u64> = Vec::new();
    let mut todo: Vec<u64> = Vec::new();
    let mut scratch = vec![0u8; 16 * 1024];
    let mut idle_since = Instant::now();
    loop {
        let now = Instant::now();
        let timeout = if again.is_empty() {
            let next = timers
                .peek()
                .map(|Reverse((due, _))| due.saturating_duration_since(now));
            Some(next.unwrap_or(LINGER).min(LINGER))
        } else {
            Some(Duration::ZERO)
        };
        if let Err(e) = poll.poll(&mut events, timeout)
            && e.kind() != io::ErrorKind::Interrupted
        {
            log::warn!("emulator: the WebSocket poller failed: {e}");
            std::thread::sleep(Duration::from_millis(10));
        }
        todo.append(&mut again);
        for ev in events.iter() {
            if ev.token() == WAKE {
                shared.bell.take(&mut todo);
            } else {
                todo.push(ev.token().0 as u64);
            }
        }
        for (token, a) in std::mem::take(&mut *lock(&shared.adopted)) {
            match Conn::new(a, poll.registry(), token) {
                Some(c) => {
                    conns.insert(token, c);
                }
                None => log::debug!("emulator: a WebSocket connection could not be polled"),
            }
        }
        let requests = std::mem::take(&mut *lock(&shared.ports));
        ports.extend(requests.lent);
        for (token, reply) in requests.reclaimed {
            if let Some(port) = ports.remove(&token) {
                let _ = reply.send(port.into_listener(poll.registry()));
            }
        }
        let now = Instant::now();
        while let Some(Reverse((due, token))) = timers.peek().copied() {
            if due > now {
                break;
            }
            timers.pop();
            if let Some(c) = conns.get_mut(&token)
                && c.armed == Some(due)
            {
                c.armed = None;
            }
            todo.push(token);
        }
        todo.sort_unstable();
        todo.dedup();
        for token in todo.drain(..) {
            if let Some(head) = heads.get_mut(&token) {
                let next = head.turn(now, &mut scratch);
                if matches!(next, HeadNext::Wait) {
                    continue;
                }
                let Some(head) = heads.remove(&token) else {
                    continue;
                };
                if let Some(port) = ports.get_mut(&head.port) {
                    port.heads -= 1;
                }
                if matches!(next, HeadNext::Whole) {
                    // A panic in one device's upgrade ends that connection, not every device's.
                    let registry = poll.registry();
                    if catch_unwind(AssertUnwindSafe(|| head.finish(registry))).is_err() {
                        log::warn!("emulator: an upgrade failed; its connection ended");
                    }
                } else {
                    head.drop_from(poll.registry());
                }
                continue;
            }
            if let Some(port) = ports.get_mut(&token) {
                let next = port.turn(
                    token,
                    now,
                    poll.registry(),
                    || shared.next.fetch_add(1, Ordering::Relaxed),
                    &mut new_heads,
                );
                for (t, head) in new_heads.drain(..) {
                    timers.push(Reverse((head.deadline, t)));
                    heads.insert(t, head);
                }
                match next {
                    Next::At(due) => timers.push(Reverse((due, token))),
                    Next::Again => again.push(token),
                    Next::Wait | Next::End => {}
                }
                continue;
            }
            let Some(conn) = conns.get_mut(&token) else {
                continue;
            };
            // A panic in one device's answer ends that connection, not every device's.
            let next = catch_unwind(AssertUnwindSafe(|| conn.turn(now, &mut scratch)))
                .unwrap_or_else(|_| {
                    log::warn!("emulator: a WebSocket answer failed; its connection ended");
                    Next::End
                });
            match next {
                Next::Wait => {}
                // One timer per connection: a later one is not armed while an earlier one is.
                Next::At(due) => {
                    if conn.armed.is_none_or(|t| due < t) {
                        conn.armed = Some(due);
                        timers.push(Reverse((due, token)));
                    }
                }
                Next::Again => again.push(token),
                Next::End => {
                    if let Some(c) = conns.remove(&token) {
                        c.end(poll.registry());
                    }
                }
            }
        }
        if !conns.is_empty() || !ports.is_empty() || !heads.is_empty() {
            idle_since = now;
        } else if now.duration_since(idle_since) >= LINGER {
            // Ends unless a connection is being handed over: that one started no thread, it found this one.
            let mut running = lock(&RUNNING);
            if shared.users.load(Ordering::SeqCst) == 0
                && lock(&shared.adopted).is_empty()
                && lock(&shared.ports).lent.is_empty()
            {
                *running = None;
                return;
            }
        }
    }
}

/// What was read from a connection and not done yet, in order.
enum Item {
    /// A request waiting for its latency.
    Request {
        request: Map<String, Value>,
        fault: Fault,
        due: Instant,
    },
    /// An answer known at once, or a pong.
    Frame(Vec<u8>),
    /// A close frame (ours, or the client's echoed): sent, then the connection ends.
    Close(Vec<u8>),
}

struct Conn {
    dev: Arc<Device>,
    id: u64,
    tcp: mio::net::TcpStream,
    tls: Option<rustls::Connection>,
    outbox: Arc<Outbox>,
    src: Arc<Mutex<Option<String>>>,
    /// Bytes read and not yet a whole frame.
    input: Vec<u8>,
    asm: Assembler,
    /// When the bytes of the frame being read came: requests that came together (pipelined in one write)
    /// are answered together, one latency after they came, as over a network of that latency.
    arrived: Instant,
    items: VecDeque<Item>,
    /// The bytes being written (whole frames, one after another), and how much of them went.
    writing: Vec<u8>,
    sent: usize,
    /// How many of those frames are queued ones (counted in the outbox; a flood frame is not).
    counted: usize,
    /// Since when a write has been waiting for the socket.
    blocked: Option<Instant>,
    /// The client closed its side: what was asked is still answered, then the connection ends.
    eof: bool,
    /// Reading stopped before the socket was empty (budget or room): no readiness event will say so again.
    unread: bool,
    /// A close (or a cut answer) is queued: the connection ends once it is written.
    closing: bool,
    flooded: u64,
    /// The earliest timer armed for it and not yet fired.
    armed: Option<Instant>,
}

impl Conn {
    fn new(a: Adopted, registry: &mio::Registry, token: u64) -> Option<Conn> {
        let failed = |dev: &Device, id| {
            dev.ws.remove(id);
            dev.ws.attached.fetch_sub(1, Ordering::SeqCst);
        };
        if a.tcp.set_nonblocking(true).is_err() {
            failed(&a.dev, a.id);
            return None;
        }
        let mut tcp = mio::net::TcpStream::from_std(a.tcp);
        if registry
            .register(
                &mut tcp,
                Token(token as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            failed(&a.dev, a.id);
            return None;
        }
        Some(Conn {
            dev: a.dev,
            id: a.id,
            tcp,
            tls: a.tls,
            outbox: a.outbox,
            src: a.src,
            input: Vec::new(),
            asm: Assembler::default(),
            arrived: Instant::now(),
            items: VecDeque::new(),
            writing: Vec::new(),
            sent: 0,
            counted: 0,
            blocked: None,
            eof: false,
            unread: true,
            closing: false,
            flooded: 0,
            armed: None,
        })
    }

    /// Reads what came, does what is due, writes what is queued.
    fn turn(&mut self, now: Instant, scratch: &mut [u8]) -> Next {
        let ws = &self.dev.ws;
        if ws.stopping.load(Ordering::SeqCst) {
            return Next::End;
        }
        if ws.is_stalled() {
            // Parked: `set_stalled(false)` kicks it.
            return Next::Wait;
        }
        if !self.closing && !self.eof {
            if !self.room() {
                // A readiness event taken now is not given again: read once there is room.
                self.unread = true;
            } else if self.read(scratch).is_err() {
                return Next::End;
            }
        }
        let due = self.answer_due(now);
        // Flood frames go only when nothing else waits: after the queued frames are written.
        let (finished, more) = match self.write() {
            Ok(true) => match self.flood() {
                Ok(more) => (self.writing.is_empty(), more),
                Err(()) => return Next::End,
            },
            Ok(false) => (false, false),
            Err(()) => return Next::End,
        };
        if finished {
            self.blocked = None;
        } else {
            // The socket takes no more now: a writable event comes when it does.
            let since = *self.blocked.get_or_insert(now);
            if now.duration_since(since) >= WRITE_TIMEOUT {
                log::debug!("emulator: a WebSocket client does not read; connection ended");
                return Next::End;
            }
            let deadline = since + WRITE_TIMEOUT;
            return Next::At(due.map_or(deadline, |d| d.min(deadline)));
        }
        if self.closing || (self.eof && self.items.is_empty()) {
            return Next::End;
        }
        // Requests were left unread for want of budget or room, and the room is there now.
        let unread = self.unread || !self.input.is_empty();
        if more || (!self.eof && unread && self.room()) {
            return Next::Again;
        }
        due.map_or(Next::Wait, Next::At)
    }

    /// Whether requests may be read: not while the client has not read 64 frames.
    fn room(&self) -> bool {
        self.outbox.unwritten() < QUEUE && self.items.len() < QUEUE
    }

    /// Reads up to the budget and turns whole frames into items.
    fn read(&mut self, scratch: &mut [u8]) -> Result<(), ()> {
        let mut read = 0;
        self.unread = true;
        while read < READ_BUDGET {
            match self.read_some(scratch) {
                Ok(0) => {
                    self.eof = true;
                    self.unread = false;
                    break;
                }
                Ok(n) => {
                    read += n;
                    self.arrived = Instant::now();
                    self.input.extend_from_slice(&scratch[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.unread = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        self.frames();
        // What reading asked rustls to say (an alert, a key update) goes out now, not with our next frame.
        if self.flush_tls().is_err() {
            return Err(());
        }
        Ok(())
    }

    /// Plain bytes from the socket, or decrypted ones through TLS.
    fn read_some(&mut self, scratch: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            return self.tcp.read(scratch);
        };
        loop {
            match tls.reader().read(scratch) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if tls.read_tls(&mut self.tcp)? == 0 {
                return Ok(0);
            }
            tls.process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
    }

    /// Whole frames of the input become items, up to a protocol error (answered with a close).
    fn frames(&mut self) {
        let mut used = 0;
        while !self.closing && self.items.len() < QUEUE {
            let msg = match frame::decode(&self.input[used..], true, MAX_MESSAGE) {
                Ok(Some((f, n))) => {
                    used += n;
                    match self.asm.push(f) {
                        Ok(Some(m)) => Ok(m),
                        Ok(None) => continue,
                        Err(p) => Err(p),
                    }
                }
                Ok(None) => break,
                Err(p) => Err(p),
            };
            let item = match msg {
                Err(p) => Item::Close(frame::close_payload(p.close_code(), "")),
                Ok(Message::Close(code, _)) => Item::Close(
                    code.map(|c| frame::close_payload(c, ""))
                        .unwrap_or_default(),
                ),
                Ok(Message::Ping(p)) => Item::Frame(frame::encode(Opcode::Pong, true, &p, None)),
                Ok(Message::Pong(_) | Message::Binary(_)) => continue,
                Ok(Message::Text(t)) => match ws_answer::prepare(&self.dev, &t, self.arrived) {
                    Prepared::Now(reply) => match reply {
                        Reply::Frame(body) => {
                            Item::Frame(frame::encode(Opcode::Text, true, &body, None))
                        }
                        Reply::Silent | Reply::Cut(_) => continue,
                    },
                    Prepared::Later {
                        request,
                        fault,
                        due,
                    } => Item::Request {
                        request,
                        fault,
                        due,
                    },
                },
            };
            let close = matches!(item, Item::Close(_));
            self.items.push_back(item);
            if close {
                // Nothing after a close is read.
                self.input.clear();
                return;
            }
        }
        self.input.drain(..used);
    }

    /// Answers the items whose time has come, in order; the time the next one is due.
    fn answer_due(&mut self, now: Instant) -> Option<Instant> {
        while let Some(item) = self.items.pop_front() {
            match item {
                Item::Request { due, .. } if due > now => {
                    self.items.push_front(item);
                    return Some(due);
                }
                Item::Request { request, fault, .. } => {
                    if !self.answer(&request, fault) {
                        self.items.clear();
                        return None;
                    }
                }
                Item::Frame(wire) => self.outbox.push(wire),
                Item::Close(payload) => {
                    self.outbox
                        .push(frame::encode(Opcode::Close, true, &payload, None));
                    self.closing = true;
                    self.items.clear();
                    return None;
                }
            }
        }
        None
    }

    /// One due request answered (notifications made meanwhile go out after the answer: on the wire no change
    /// overtakes an answer older than it); `false` when the connection ends after it.
    fn answer(&mut self, request: &Map<String, Value>, fault: Fault) -> bool {
        let first = lock(&self.src).is_none();
        self.outbox.answering();
        match ws_answer::complete(&self.dev, request, fault, &self.src) {
            Reply::Frame(body) => {
                self.outbox
                    .answered(Some(frame::encode(Opcode::Text, true, &body, None)));
                let subscribed = first && lock(&self.src).is_some();
                // A flapping device: the subscription answered, then the connection ends.
                if subscribed && self.dev.ws.hang_up.load(Ordering::SeqCst) {
                    self.outbox.push(frame::encode(
                        Opcode::Close,
                        true,
                        &frame::close_payload(1001, ""),
                        None,
                    ));
                    self.closing = true;
                    return false;
                }
                true
            }
            Reply::Cut(body) => {
                // The frame's header promises more than comes: the connection ends mid-frame.
                let wire = frame::encode(Opcode::Text, true, &body, None);
                self.outbox.abandon();
                self.outbox.push(wire[..wire.len() / 2].to_vec());
                self.closing = true;
                false
            }
            Reply::Silent => {
                self.outbox.answered(None);
                true
            }
        }
    }

    /// Under the flood fault, a subscribed connection with nothing else to write gets more flood frames, written
    /// until the socket takes no more; `Ok(true)` when its budget ran out first.
    fn flood(&mut self) -> Result<bool, ()> {
        let bytes = self.dev.ws.flood.load(Ordering::SeqCst);
        if bytes == 0 || self.closing {
            return Ok(false);
        }
        let Some(dst) = lock(&self.src).clone() else {
            return Ok(false);
        };
        for _ in 0..FLOOD_BUDGET {
            self.flooded += 1;
            self.dev.ws.flooded.fetch_add(1, Ordering::Relaxed);
            self.writing = ws_answer::flood_frame(&self.dev, &dst, self.flooded, bytes);
            self.sent = 0;
            self.counted = 0;
            if !self.write()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Writes queued frames until none is left (`Ok(true)`) or the socket takes no more (`Ok(false)`).
    fn write(&mut self) -> Result<bool, ()> {
        loop {
            if self.sent == self.writing.len() {
                for _ in 0..self.counted {
                    self.outbox.written();
                }
                self.writing.clear();
                self.sent = 0;
                self.counted = 0;
                // The frames queued now go out together, up to 64 KiB: one write and one segment where a frame
                // each was one of each (a device's two answers at open, an answer and the notifications after it).
                while self.writing.len() < COALESCE {
                    let Some(wire) = self.outbox.next() else {
                        break;
                    };
                    if self.writing.is_empty() {
                        self.writing = wire;
                    } else {
                        self.writing.extend_from_slice(&wire);
                    }
                    self.counted += 1;
                }
                if self.writing.is_empty() {
                    return self.flush_tls();
                }
            }
            let piece = &self.writing[self.sent..];
            let wrote = match self.tls.as_mut() {
                Some(tls) => tls.writer().write(piece),
                None => self.tcp.write(piece),
            };
            match wrote {
                Ok(0) if self.tls.is_some() => {
                    // rustls's buffer is full: empty it into the socket first.
                    if !self.flush_tls()? {
                        return Ok(false);
                    }
                }
                Ok(0) => return Err(()),
                Ok(n) => {
                    self.sent += n;
                    self.blocked = None;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
    }

    /// TLS records waiting for the socket are written: `Ok(false)` when it takes no more now.
    fn flush_tls(&mut self) -> Result<bool, ()> {
        let Some(tls) = self.tls.as_mut() else {
            return Ok(true);
        };
        while tls.wants_write() {
            match tls.write_tls(&mut self.tcp) {
                Ok(_) => self.blocked = None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        Ok(true)
    }

    /// The connection ends: closed, out of the device's list.
    fn end(mut self, registry: &mio::Registry) {
        let _ = registry.deregister(&mut self.tcp);
        let _ = self.tcp.shutdown(Shutdown::Both);
        for _ in 0..self.counted {
            self.outbox.written();
        }
        while self.outbox.next().is_some() {
            self.outbox.written();
        }
        self.dev.ws.remove(self.id);
        self.dev.ws.attached.fetch_sub(1, Ordering::SeqCst);
    }
}
