//! The push channel (`Channel: auto`): one poller thread `sd-push` over the WebSockets of every Gen2+ device
//! with `Channel: auto` (mio, like `sd-webhook`), decoding with the incremental `frame::decode`.
//!
//! Connecting (TCP, upgrade, one authenticated `Shelly.GetStatus` with our `src`, which subscribes; at open
//! `Shelly.GetDeviceInfo` with it, and the poller starts before the workers, whose first contacts take what
//! those read: [`Late`]) runs on the poller too, without blocking (`driver::ws::dial`): every step has its own deadline of one
//! `ResponseTimeout`, and a device that stalls a step holds nothing but its own socket, so no number of
//! stalled devices delays another's channel. Only a host *name* needs a thread: it is resolved on a
//! short-lived `sd-resolve-<ID>` (at most [`MAX_RESOLVING`] at once; addresses need none). The poller lends the socket to the device's driver (`Tunnel`), asks the worker for
//! the read after the (re)connect (served by that status: whatever changed while nobody listened), and turns
//! notifications into what webhooks produce: `NotifyStatus`/`NotifyFullStatus` are merged into the tunnel's
//! mirror and become implied output/input states plus a "read now" in the device's
//! `HookInbox` (the worker stays the only writer), `NotifyEvent` events become queued `WebhookEvent`s with
//! `Channel: push`, named and deduplicated by `webhook/routing.rs`. Heartbeat: a ping after one
//! `ResponseTimeout` without traffic (up to [`heartbeat_batch`] sooner: one scan pings every connection due
//! within it), the connection dropped when no pong came within another, so a dead
//! connection is noticed within two `ResponseTimeout`s of its last frame. A dead connection
//! (error, close, no pong) is reconnected after a back-off (1 s doubling, capped at 5 min) with jitter, which
//! only a connection that stayed up [`UP_LONG_ENOUGH`] starts over. The push channel never decides `Online`:
//! that stays with the worker's reads (over the socket or HTTP).
//!
//! Fairness (ARCHITECTURE.md): each device gets a bounded share of every poller turn ([`TURN_BYTES`],
//! [`TURN_MESSAGES`]) and of every second ([`MESSAGES_PER_SECOND`], [`BYTES_PER_SECOND`]); what its
//! notifications make the worker do (wake-ups, reads that become requests) is limited per device too, delayed
//! beyond that, never dropped.

use std::collections::hash_map::RandomState;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::io::Read as _;

use crossbeam_channel::{Receiver, Sender};
use mio::{Events, Interest, Poll, Token, Waker};
use serde_json::{Map, Value};

use super::pushed_states;

use crate::actor::handshakes::Handshakes;
use crate::actor::pace::Bucket;
use crate::actor::worker;
use crate::driver::rpc::status_doc::StatusRead;
use crate::driver::ws::dial::{Dial, Dialed, Progress, Share};
use crate::driver::ws::frame::{self, Assembler, MAX_MESSAGE, Message, Opcode};
use crate::driver::ws::rpc::{Event, Notification, parse_notification};
use crate::driver::ws::spent::Spent;
use crate::driver::ws::tunnel::{Opened, Tunnel};
use crate::objects::{ComponentKind, Device};
use crate::wake::WakeFlag;
use crate::webhook::queue::EventQueue;
use crate::webhook::request::Hook;
use crate::webhook::routing::{self, Origin, Shared};

/// Reconnect back-off: first wait and cap.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// How long a connection must have been up to reset the back-off (at least two `ResponseTimeout`s: long
/// enough for the heartbeat to have proved it). One that dies younger (a device that accepts the
/// subscription and closes) leaves the back-off growing.
const UP_LONG_ENOUGH: Duration = Duration::from_secs(10);

/// One device with a push channel.
pub(crate) struct Target {
    /// Index in configuration order.
    pub(crate) di: usize,
    pub(crate) id: i64,
    pub(crate) label: String,
    pub(crate) password: Option<String>,
    /// The RPC component of its outputs: `switch` or `light`.
    pub(crate) output_type: &'static str,
    /// The live connection lent to the device's driver for its requests.
    pub(crate) tunnel: Arc<Tunnel>,
    /// WSS: the device's TLS client configuration (its verifier is the one its HTTPS requests use).
    pub(crate) tls: Option<Arc<crate::driver::tls::DeviceTls>>,
    /// Where it is at open (host, port), before its worker published anything, and its configured MAC.
    pub(crate) initial: Option<(String, u16)>,
    /// Dialed at once, before open's first contacts (which then go over it); else once open has ended.
    pub(crate) early: bool,
    pub(crate) mac: Option<crate::mac::Mac>,
}

/// Why the subscription's status is not from device `t`: its `sys.mac` is not the MAC the device is known
/// by (configured, or confirmed by its worker; before open ends, the configured one), `None` when it is or
/// either is unknown.
fn foreign_mac(shared: Option<&Shared>, t: &Target, status: &StatusRead) -> Option<String> {
    let seen = crate::mac::Mac::parse(status.doc.sys.mac.0.as_deref()?).ok()?;
    let known = match shared {
        Some(shared) => {
            let known = shared
                .slots
                .get(t.di)?
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .mac_address
                .clone()?;
            crate::mac::Mac::parse(&known).ok()?
        }
        None => t.mac?,
    };
    (seen != known).then(|| format!("the device answering is {seen}, not {known}: not subscribed"))
}

/// The context the poller gets once open has built it (the directory needs every first contact, which goes
/// over the connections the poller makes first).
pub(crate) type Late = Arc<std::sync::OnceLock<Arc<Context>>>;

/// What every push thread shares.
pub(crate) struct Context {
    /// The channel events are queued with: `push` (push poller, outbound WebSocket) or `mqtt`.
    pub(crate) channel: crate::event::EventChannel,
    pub(crate) shared: Arc<Shared>,
    pub(crate) queue: Arc<EventQueue>,
    pub(crate) wake: Option<WakeFlag>,
}

/// The running push channel; [`Push::stop`] ends and joins it.
pub(crate) struct Push {
    poller: Option<JoinHandle<()>>,
    stop: Arc<Stop>,
    waker: Arc<Waker>,
}

/// Set by `close`: the poller leaves at its next wake-up, dropping every connection made or being made.
type Stop = AtomicBool;

const WAKE: Token = Token(usize::MAX);
/// How often a device with no address known yet is looked at again (its move wakes the poller sooner).
const NO_ADDRESS_RECHECK: Duration = Duration::from_secs(60);
/// Resolver threads at once (host names only): 1,000 named devices opened together start no 1,000 threads.
const MAX_RESOLVING: usize = 16;
/// One read from a socket.
const CHUNK: usize = 8 * 1024;
/// What one device may cost the poller per turn: bytes read, bytes of messages handled (a big frame's parse
/// counts) and messages handled. A device with more to give waits for the next turn, after every other ready
/// device had its own share.
const TURN_BYTES: usize = 64 * 1024;
const TURN_MESSAGES: usize = 64;

/// Wake-ups of one device's worker by its notifications, per second after a burst: a flooding device cannot
/// keep its worker (and a core) busy; its states wait coalesced in the inbox meanwhile. A real device's
/// notifications come a few per second.
const WAKES_PER_SECOND: f64 = 100.0;
const WAKE_BURST: f64 = 100.0;
/// Reads per second (after a burst) a device's notifications may ask while its mirror cannot serve them:
/// those reads are requests to the device.
const READS_PER_SECOND: f64 = 1.0;
const READ_BURST: f64 = 5.0;
/// What one device's socket may cost the poller per second, after a burst of one second's worth: messages
/// handled and bytes read or parsed. A real device sends a few messages a second; a flooding one is then
/// read no faster, so neither it nor the poller spins (TCP slows the device down).
const MESSAGES_PER_SECOND: f64 = 2000.0;
const BYTES_PER_SECOND: f64 = 4.0 * 1024.0 * 1024.0;
/// A device held to its rate is served again once this share of a turn is back (not for every byte).
const RESUME: f64 = 0.25;
/// How often a device held to its limits is logged (with what was held back meanwhile).
const LIMIT_LOG_EVERY: Duration = Duration::from_secs(60);

/// One device's limits, each a token bucket: what its socket may cost the poller a second (beyond it, parked),
/// and what its notifications may make us do (worker wake-ups, reads that become requests). Wake-ups and
/// reads beyond theirs are owed (the states wait in the inbox) and paid by `scan` when a token is back:
/// delayed, never lost.
struct Limits {
    messages: Bucket,
    bytes: Bucket,
    /// Held to its rate with more to read: served again at this instant.
    parked: Option<Instant>,
    wakes: Bucket,
    reads: Bucket,
    owed_wake: bool,
    owed_read: bool,
    /// Held back since the last log line: turns cut at the share, wake-ups and reads delayed.
    cut_turns: u64,
    held: u64,
    logged: Option<Instant>,
}

impl Limits {
    fn new(now: Instant) -> Limits {
        Limits {
            messages: Bucket::new(MESSAGES_PER_SECOND, MESSAGES_PER_SECOND, now),
            bytes: Bucket::new(BYTES_PER_SECOND, BYTES_PER_SECOND, now),
            parked: None,
            wakes: Bucket::new(WAKES_PER_SECOND, WAKE_BURST, now),
            reads: Bucket::new(READS_PER_SECOND, READ_BURST, now),
            owed_wake: false,
            owed_read: false,
            cut_turns: 0,
            held: 0,
            logged: None,
        }
    }

    fn owes(&self) -> bool {
        self.owed_wake || self.owed_read
    }

    /// When an owed wake-up or read can be paid.
    fn due(&self) -> Instant {
        let read = self.owed_read.then(|| self.reads.next());
        let wake = self.wakes.next();
        read.map_or(wake, |r| r.max(wake))
    }
}

/// What is left of a device's share of one poller turn.
struct Budget {
    bytes: usize,
    messages: usize,
    /// Bytes spent in full (a big message costs all of its size, beyond the share).
    used: usize,
}

impl Budget {
    /// A turn's share, or less when the device's rate leaves less.
    fn turn(lim: &Limits) -> Budget {
        Budget {
            bytes: TURN_BYTES.min(lim.bytes.tokens.max(0.0) as usize),
            messages: TURN_MESSAGES.min(lim.messages.tokens.max(0.0) as usize),
            used: 0,
        }
    }

    fn spent(&self) -> bool {
        self.bytes == 0 || self.messages == 0
    }

    fn spend(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_sub(bytes);
        self.used += bytes;
    }
}

/// How serving a device's buffered frames ended.
#[derive(PartialEq)]
enum Served {
    /// No whole frame left in the buffer.
    Drained,
    /// The turn's share is used up; frames may be left.
    Spent,
    /// The connection ended.
    Ended,
}

impl Push {
    /// Starts the poller thread `sd-push`; it connects every target at once. Until `late` is set (then
    /// [`Push::wake`]), connections serve their drivers and keep their mirrors, and nothing reaches the
    /// workers' inboxes or the event queue.
    pub(crate) fn start(
        targets: Vec<Target>,
        late: Late,
        response_timeout: Duration,
    ) -> std::io::Result<Push> {
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let instance = INSTANCE.fetch_add(1, Ordering::Relaxed);
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let stop = Arc::new(Stop::new(false));
        let now = Instant::now();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let n = targets.len();
        // A device that moved wakes the poller, which reconnects it at its new address.
        let moved = Arc::new(Stop::new(false));
        let spent = {
            let waker = waker.clone();
            Arc::new(Spent::new(Box::new(move || {
                let _ = waker.wake();
            })))
        };
        for t in &targets {
            let (moved, waker) = (moved.clone(), waker.clone());
            t.tunnel.on_move(Box::new(move || {
                moved.store(true, Ordering::SeqCst);
                let _ = waker.wake();
            }));
            t.tunnel.on_spent(spent.clone());
        }
        let poller = Poller {
            poll,
            slots: targets
                .iter()
                .map(|_| Slot::Waiting {
                    at: now,
                    failures: 0,
                })
                .collect(),
            targets: targets.into_iter().map(Arc::new).collect(),
            ctx: late.get().cloned(),
            late,
            rt: response_timeout,
            missed: vec![false; n],
            stop: stop.clone(),
            waker: waker.clone(),
            done_tx,
            done_rx,
            resolving: 0,
            jitter: RandomState::new(),
            attempts: 0,
            src_prefix: format!("smartdev-{}-{instance}", std::process::id()),
            scratch: vec![0u8; CHUNK],
            due: now,
            ready: Vec::new(),
            spent,
            handshakes: Handshakes::new(waker.clone()),
            in_turn: vec![false; n],
            turn: Vec::new(),
            hosts: vec![None; n],
            moved,
            limits: (0..n).map(|_| Limits::new(now)).collect(),
        };
        let builder = std::thread::Builder::new()
            .name("sd-push".into())
            .stack_size(256 * 1024);
        let handle = crate::log_scope::spawn(builder, move || poller.run())?;
        Ok(Push {
            poller: Some(handle),
            stop,
            waker,
        })
    }

    /// Wakes the poller (its context was set).
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Ends the poller (every connection, made or being made, shut down) and joins it. A resolver still
    /// asking about a host name is not waited for: it ends on its own, and its answer goes nowhere.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.poller.take() {
            let _ = t.join();
        }
    }
}

/// A device's channel in the poller.
enum Slot {
    /// Connect at `at` (after `failures` failed attempts in a row).
    Waiting { at: Instant, failures: u32 },
    /// Its host name is being resolved.
    Resolving { failures: u32 },
    /// Connecting, upgrading or subscribing.
    Dialing(Box<Dialing>),
    /// Connected and subscribed.
    Live(Box<Live>),
}

/// One subscribed connection: the socket, what arrived and is not decoded yet (empty between frames), the
/// fragments being joined, and the heartbeat.
struct Live {
    stream: mio::net::TcpStream,
    tls: Option<crate::driver::ws::secure::Shared>,
    /// When it came up, and the failed attempts before it (kept until it has been up long enough).
    up_at: Instant,
    failures: u32,
    buf: Vec<u8>,
    asm: Assembler,
    source: IpAddr,
    last_traffic: Instant,
    ping_sent: Option<Instant>,
    last_pong: Option<Instant>,
}

/// A connection being made.
struct Dialing {
    dial: Dial,
    failures: u32,
    src: String,
    /// The device as known just before the subscribing request, and when it was sent: what its status is
    /// compared with where the socket saw no state yet (the snapshot by the time the status comes may hold a
    /// webhook's newer news, and a status older than that news is no flip back).
    baseline: Option<(Arc<Device>, Instant)>,
}

/// What a resolver hands back.
type Resolved = (usize, Result<SocketAddr, String>);

struct Poller {
    poll: Poll,
    targets: Vec<Arc<Target>>,
    slots: Vec<Slot>,
    /// Set once open built it (`late`); until then nothing is posted or queued.
    ctx: Option<Arc<Context>>,
    late: Late,
    /// `ResponseTimeout`.
    rt: Duration,
    /// Per device: a notification came before the context (merged into its mirror; its read is asked then).
    missed: Vec<bool>,
    stop: Arc<Stop>,
    waker: Arc<Waker>,
    done_tx: Sender<Resolved>,
    done_rx: Receiver<Resolved>,
    /// Resolver threads running.
    resolving: usize,
    /// Keyed randomness for the back-off jitter, and the attempts scheduled so far (its salt).
    jitter: RandomState,
    attempts: u64,
    src_prefix: String,
    /// The one read buffer of every socket.
    scratch: Vec<u8>,
    /// The next instant a connection attempt or a heartbeat is due (never later than the real one).
    due: Instant,
    /// Devices that stopped at their turn's share with more to read: readiness is edge-triggered, so no new
    /// event comes for them; served again next turn, after the others.
    ready: Vec<usize>,
    /// Whether a device is in `ready` or in the turn being served (listed once).
    in_turn: Vec<bool>,
    /// This turn's devices, kept between turns: a fresh list each turn (up to 2 KiB, a "large" block for glibc)
    /// made the allocator consolidate every small block freed since.
    turn: Vec<usize>,
    /// Per device: what its socket and its notifications may cost.
    limits: Vec<Limits>,
    /// Per device: the address (host, port) of its connection or attempt, read from its worker's snapshot when
    /// the attempt starts (a device configured with a `MAC` may move).
    hosts: Vec<Option<(String, u16)>>,
    /// Set when a device moved (its tunnel says which).
    moved: Arc<Stop>,
    /// Statuses the workers took and gave back: freed here, where they were parsed.
    spent: Arc<Spent>,
    /// The threads that run WSS handshakes' crypto.
    handshakes: Handshakes,
}

impl Poller {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        while !self.stop.load(Ordering::SeqCst) {
            self.spent.drain();
            self.adopt_context();
            if self.moved.swap(false, Ordering::SeqCst) {
                self.follow_moves();
            }
            let mut finished = false;
            while let Ok((ti, r)) = self.done_rx.try_recv() {
                finished = true;
                self.resolving -= 1;
                let Slot::Resolving { failures } = self.slots[ti] else {
                    continue;
                };
                match r {
                    Ok(addr) => self.dial(ti, addr, failures),
                    Err(e) => self.fail(ti, e),
                }
            }
            self.take_handshakes();
            // The slots are scanned only when something is due or a resolver's place came free, not on every
            // frame: with 1,000 sockets a scan per frame was a large part of the poller's CPU.
            if finished || Instant::now() >= self.due {
                self.scan();
            }
            // Devices with more to read: look at the others' sockets without waiting, then serve them again.
            let timeout = if self.ready.is_empty() {
                self.due
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    log::error!("push channel: polling failed: {e}");
                    break;
                }
                continue;
            }
            // One turn: every device with news or with more to read, once each, each within its share.
            let mut turn = std::mem::take(&mut self.turn);
            for ev in events.iter() {
                let ti = ev.token().0;
                if ev.token() != WAKE && ti < self.in_turn.len() && !self.in_turn[ti] {
                    self.in_turn[ti] = true;
                    turn.push(ti);
                }
            }
            turn.append(&mut self.ready);
            for &ti in &turn {
                self.in_turn[ti] = false;
                self.serve(ti);
            }
            turn.clear();
            self.turn = turn;
        }
        for (slot, t) in self.slots.iter_mut().zip(&self.targets) {
            t.tunnel.detach();
            match slot {
                Slot::Live(l) => {
                    let _ = l.stream.shutdown(Shutdown::Both);
                }
                Slot::Dialing(d) => {
                    let _ = d.dial.stream_mut().shutdown(Shutdown::Both);
                }
                Slot::Waiting { .. } | Slot::Resolving { .. } => {}
            }
        }
    }

    /// Takes the context once open has set it (looked at before every turn and before a notification is
    /// handled: an event sent right after open returned must not be taken for one from before).
    fn adopt_context(&mut self) {
        if self.ctx.is_none()
            && let Some(ctx) = self.late.get()
        {
            let ctx = ctx.clone();
            self.ctx = Some(ctx.clone());
            self.on_context(&ctx);
        }
    }

    /// Open has ended (its context is set): each live connection's states become what notifications are
    /// compared with, and what came before is read from the mirrors (no request). Nothing is queued: the
    /// mirror is what open read (or older than a webhook the worker took meanwhile, which is no flip back),
    /// and a change during open had no listener yet.
    fn on_context(&mut self, ctx: &Arc<Context>) {
        for ti in 0..self.targets.len() {
            let t = &self.targets[ti];
            if let (Slot::Live(_), Some(mirror)) = (&self.slots[ti], t.tunnel.mirror_text())
                && let Some(states) = pushed_states::states_in(&mirror, t.output_type)
            {
                let snap = worker::snapshot(&ctx.shared.slots[t.di]);
                // Recorded as the socket's last word, not queued.
                let _ = state_events(t, ctx, &states, Some(snap));
            }
            if std::mem::take(&mut self.missed[ti]) {
                ctx.shared.post(t.di, None, None, true);
            }
            if !t.early
                && let Slot::Waiting { at, .. } = &mut self.slots[ti]
            {
                *at = Instant::now();
                self.due = Instant::now();
            }
        }
        // Every first answer parsed here was taken and given back (`spent`, drained before this turn): the
        // peak of open is over, its free pages go back to the system.
        crate::ffi::heap::release_free_memory();
    }

    /// Starts the connections that are due, ends the dials past their step's deadline, runs every heartbeat,
    /// and sets `due` to the earliest instant anything is due again.
    fn scan(&mut self) {
        let now = Instant::now();
        let idle = self.rt;
        let mut next = now + idle;
        for ti in 0..self.slots.len() {
            match &self.slots[ti] {
                Slot::Waiting { at, failures } if *at <= now => {
                    let failures = *failures;
                    self.connect(ti, failures);
                }
                // Its step's time is up: served this turn, it takes what came in time or fails.
                Slot::Dialing(d) if now >= d.dial.deadline() => self.again(ti),
                Slot::Dialing(d) => next = next.min(d.dial.deadline()),
                _ => {}
            }
        }
        let pong_wait = self.rt;
        let beat_every = heartbeat_batch(idle);
        let young = young(idle);
        for ti in 0..self.slots.len() {
            let Slot::Live(l) = &mut self.slots[ti] else {
                continue;
            };
            if l.failures > 0 {
                if now >= l.up_at + young {
                    log::info!(
                        "device {}: push channel back after {} failed attempts",
                        self.targets[ti].label,
                        l.failures
                    );
                    l.failures = 0;
                } else {
                    next = next.min(l.up_at + young);
                }
            }
            match heartbeat(
                now,
                l.last_traffic,
                l.ping_sent,
                l.last_pong,
                pong_wait,
                idle,
            ) {
                // Heartbeats are batched: no scan sooner than `beat_every` for them.
                Beat::Wait(at) => next = next.min(at.max(now + beat_every)),
                Beat::Alive => {
                    l.ping_sent = None;
                    l.last_traffic = now;
                    next = next.min(now + idle);
                }
                Beat::Ping => {
                    l.ping_sent = Some(now);
                    next = next.min(now + pong_wait);
                    self.write(ti, Opcode::Ping, b"sd");
                }
                Beat::Dead => self.fail(
                    ti,
                    format!("no pong within {:.1} s of a ping", pong_wait.as_secs_f64()),
                ),
            }
        }
        for ti in 0..self.limits.len() {
            if let Some(at) = self.pay(ti, now) {
                next = next.min(at);
            }
        }
        // Attempts scheduled just now (a failed dial, a dead heartbeat) count too; overdue ones waiting for a
        // resolver's place are started when a resolver reports (which wakes the poller).
        let full = self.resolving >= MAX_RESOLVING;
        for slot in &self.slots {
            if let Slot::Waiting { at, .. } = slot
                && !(full && *at <= now)
            {
                next = next.min(*at);
            }
        }
        self.due = next;
    }

    /// Pays what device `ti`'s limits owe when their tokens are back, and logs a device held to them (once
    /// per [`LIMIT_LOG_EVERY`]); returns when to look again.
    fn pay(&mut self, ti: usize, now: Instant) -> Option<Instant> {
        let label = &self.targets[ti].label;
        let lim = &mut self.limits[ti];
        if (lim.cut_turns > 0 || lim.held > 0)
            && lim.logged.is_none_or(|at| now >= at + LIMIT_LOG_EVERY)
        {
            log::info!(
                "device {}: push notifications faster than served (flooding?): {} turns cut at its share, {} wake-ups or reads delayed; its states are coalesced, other devices are not affected",
                label,
                lim.cut_turns,
                lim.held
            );
            (lim.cut_turns, lim.held) = (0, 0);
            lim.logged = Some(now);
        }
        let mut next = None;
        if let Some(at) = lim.parked {
            if now >= at {
                lim.parked = None;
                self.again(ti);
            } else {
                next = Some(at);
            }
        }
        let lim = &mut self.limits[ti];
        if !lim.owes() {
            return next;
        }
        let read = lim.owed_read && lim.reads.take(now);
        if lim.wakes.take(now) {
            lim.owed_read &= !read;
            lim.owed_wake = false;
            if let Some(ctx) = &self.ctx {
                ctx.shared.post(self.targets[ti].di, None, None, read);
            }
        } else if read {
            // Keep the read token: it goes with the next wake-up.
            lim.reads.tokens += 1.0;
        }
        let owed = lim.owes().then(|| lim.due());
        match (next, owed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Drops the connection (made or being made) of every device whose worker followed it to another address,
    /// and connects it there at once: nothing more from the old address reaches the device.
    fn follow_moves(&mut self) {
        let now = Instant::now();
        for ti in 0..self.targets.len() {
            if !self.targets[ti].tunnel.take_moved() {
                continue;
            }
            match &mut self.slots[ti] {
                Slot::Live(l) => {
                    let _ = self.poll.registry().deregister(&mut l.stream);
                    let _ = l.stream.shutdown(Shutdown::Both);
                }
                Slot::Dialing(d) => {
                    let _ = self.poll.registry().deregister(d.dial.stream_mut());
                    let _ = d.dial.stream_mut().shutdown(Shutdown::Both);
                }
                // A resolver's late answer is for the old address: `connect` asks again.
                Slot::Resolving { .. } | Slot::Waiting { .. } => {}
            }
            self.targets[ti].tunnel.detach();
            log::debug!(
                "device {}: push channel follows the device to its new address",
                self.targets[ti].label
            );
            self.slots[ti] = Slot::Waiting {
                at: now,
                failures: 0,
            };
        }
        self.due = now;
    }

    /// Starts connecting target `ti`: at once to an address, after a resolver thread for a host name (or
    /// later, when every resolver's place is taken: the slot stays due).
    fn connect(&mut self, ti: usize, failures: u32) {
        let t = &self.targets[ti];
        if self.ctx.is_none() && !t.early {
            // Its worker reads it over HTTP first: dialed once open has ended (`on_context`).
            self.slots[ti] = Slot::Waiting {
                at: Instant::now() + NO_ADDRESS_RECHECK,
                failures,
            };
            return;
        }
        let at = match &self.ctx {
            Some(ctx) => {
                let snap = worker::snapshot(&ctx.shared.slots[t.di]);
                snap.address.clone().map(|h| (h, snap.port))
            }
            None => t.initial.clone(),
        };
        let Some((host, port)) = at else {
            // No address known yet (configured by its MAC alone): its worker's move wakes the poller.
            t.tunnel
                .first_ended(Opened::Failed("no address is known yet".into()));
            self.slots[ti] = Slot::Waiting {
                at: Instant::now() + NO_ADDRESS_RECHECK,
                failures,
            };
            return;
        };
        self.hosts[ti] = Some((host.clone(), port));
        let bare = host.trim_matches(['[', ']']);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            let addr = SocketAddr::new(ip, port);
            self.dial(ti, addr, failures);
            return;
        }
        if self.resolving >= MAX_RESOLVING {
            return;
        }
        let (done, waker) = (self.done_tx.clone(), self.waker.clone());
        let builder = std::thread::Builder::new()
            .name(format!("sd-resolve-{}", t.id))
            .stack_size(256 * 1024);
        let spawned = crate::log_scope::spawn(builder, move || {
            let r = resolve(&host, port);
            if done.send((ti, r)).is_ok() {
                let _ = waker.wake();
            }
        });
        self.slots[ti] = Slot::Resolving { failures };
        match spawned {
            // Not joined: `getaddrinfo` cannot be interrupted, and `close` must not wait for it.
            Ok(_detached) => self.resolving += 1,
            Err(e) => self.fail(ti, format!("cannot start a resolver thread: {e}")),
        }
    }

    /// Starts the non-blocking connect of target `ti` to `addr`.
    fn dial(&mut self, ti: usize, addr: SocketAddr, failures: u32) {
        let t = &self.targets[ti];
        let host_header = match &self.hosts[ti] {
            Some((host, port)) => format!("{}:{port}", crate::hostname::url_host(host)),
            None => addr.to_string(),
        };
        let src = format!("{}-{}", self.src_prefix, t.id);
        let now = Instant::now();
        let rt = self.rt;
        let tls = match &t.tls {
            // The name the certificate is checked against (under CaFile): the configured host, else the IP.
            Some(config) => {
                let name = match &self.hosts[ti] {
                    Some((host, _)) => host.clone(),
                    None => addr.ip().to_string(),
                };
                match rustls::pki_types::ServerName::try_from(name)
                    .map_err(|e| e.to_string())
                    .and_then(|n| {
                        rustls::ClientConnection::new(config.config(), n).map_err(|e| e.to_string())
                    }) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        self.slots[ti] = Slot::Resolving { failures };
                        return self.fail(ti, format!("TLS: {e}"));
                    }
                }
            }
            None => None,
        };
        let started = Dial::start(
            addr,
            &host_header,
            &src,
            t.password.as_deref(),
            rt,
            now,
            tls,
        )
        .and_then(|mut dial| {
            // Open's first contact reads the device over this connection.
            if self.ctx.is_none() {
                dial.introduce();
            }
            self.poll.registry().register(
                dial.stream_mut(),
                Token(ti),
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Ok(dial)
        });
        self.slots[ti] = Slot::Resolving { failures };
        match started {
            Ok(dial) => {
                self.due = self.due.min(dial.deadline());
                self.slots[ti] = Slot::Dialing(Box::new(Dialing {
                    dial,
                    failures,
                    src,
                    baseline: None,
                }));
            }
            Err(e) => self.fail(ti, format!("cannot connect to {addr}: {e}")),
        }
    }

    /// Advances device `ti`'s dial within its turn's share; true when it stopped there with more to do.
    fn serve_dial(&mut self, ti: usize, budget: &mut Budget, scratch: &mut [u8]) -> bool {
        loop {
            let Some(Slot::Dialing(d)) = self.slots.get_mut(ti) else {
                return false;
            };
            let mut share = Share {
                bytes: budget.bytes,
                messages: budget.messages,
            };
            let progress = d.dial.advance(Instant::now(), scratch, &mut share);
            if !d.dial.connecting() {
                self.targets[ti].tunnel.first_connected();
            }
            budget.spend(budget.bytes - share.bytes);
            budget.messages = share.messages;
            match progress {
                Progress::Waiting => return false,
                Progress::More => return true,
                Progress::Calling => {
                    let at = Instant::now();
                    d.baseline = self
                        .ctx
                        .as_ref()
                        .map(|ctx| (worker::snapshot(&ctx.shared.slots[self.targets[ti].di]), at));
                }
                Progress::Done(status) => {
                    self.go_live(ti, status);
                    return false;
                }
                Progress::Crypto(conn) => {
                    self.handshakes.post(ti, conn);
                    return false;
                }
                Progress::Failed(why) => {
                    self.fail(ti, why);
                    return false;
                }
            }
        }
    }

    /// Gives each dial its processed handshake records and serves it again this turn (no socket event will
    /// come for it: the records were read already). A dial that ended meanwhile is not this connection's.
    fn take_handshakes(&mut self) {
        let finished: Vec<_> = self.handshakes.finished().collect();
        for (ti, conn, result) in finished {
            let Some(Slot::Dialing(d)) = self.slots.get_mut(ti) else {
                continue;
            };
            if !d.dial.processing() || !d.dial.tls().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                continue;
            }
            if let Err(why) = d.dial.processed(result) {
                self.fail(ti, why);
                continue;
            }
            if !self.in_turn[ti] {
                self.in_turn[ti] = true;
                self.ready.push(ti);
            }
        }
    }

    /// Hands device `ti`'s answered dial to the device (`status`: the subscription's answer) and serves it.
    fn go_live(&mut self, ti: usize, status: Option<StatusRead>) {
        let Slot::Dialing(d) =
            std::mem::replace(&mut self.slots[ti], Slot::Resolving { failures: 0 })
        else {
            return;
        };
        let Dialing {
            dial,
            failures,
            src,
            baseline,
        } = *d;
        let source = dial.addr().ip();
        if dial.dropped() > 0 {
            log::debug!(
                "device {}: {} notifications dropped while subscribing",
                self.targets[ti].label,
                dial.dropped()
            );
        }
        let Dialed {
            mut stream,
            tls,
            buf,
            asm,
            challenge,
            queued,
            info,
        } = dial.into_dialed();
        self.slots[ti] = Slot::Resolving { failures };
        let ctx = self.ctx.clone();
        // The MAC rule: a subscription answered by another device is not this device's channel. Nothing it
        // said is merged; the worker's read (over HTTP) finds the foreign MAC and takes the device offline.
        if let Some(why) = status
            .as_ref()
            .and_then(|s| foreign_mac(ctx.as_deref().map(|c| &*c.shared), &self.targets[ti], s))
        {
            let _ = self.poll.registry().deregister(&mut stream);
            let _ = stream.shutdown(Shutdown::Both);
            self.fail(ti, why);
            if let Some(ctx) = &ctx {
                ctx.shared.post(self.targets[ti].di, None, None, true);
            }
            return;
        }
        // The worker writes through a second handle on the same (non-blocking) socket.
        let writer = stream
            .as_fd()
            .try_clone_to_owned()
            .map(TcpStream::from)
            .and_then(|w| {
                self.poll
                    .registry()
                    .reregister(&mut stream, Token(ti), Interest::READABLE)?;
                Ok(w)
            });
        let writer = match writer {
            Ok(w) => crate::driver::ws::secure::Writer::tls(w, tls.clone()),
            Err(e) => {
                let _ = self.poll.registry().deregister(&mut stream);
                self.fail(ti, e.to_string());
                return;
            }
        };
        let now = Instant::now();
        self.slots[ti] = Slot::Live(Box::new(Live {
            up_at: now,
            failures,
            stream,
            tls,
            buf,
            asm,
            source,
            last_traffic: now,
            ping_sent: None,
            last_pong: None,
        }));
        let t = self.targets[ti].clone();
        let Some(ctx) = ctx else {
            // At open: the worker's first contact takes the status and the device information; notifications
            // before the answer are older than it.
            t.tunnel
                .attach(writer, src, challenge, status.map(|s| (s, now)), info);
            t.tunnel.first_ended(Opened::Up);
            log::debug!("device {}: push channel connected", t.label);
            self.again(ti);
            return;
        };
        // These came before the status answer: it is newer than they are.
        for n in queued {
            on_notification(&t, &ctx, n, source, Some(&mut self.limits[ti]));
        }
        let (baseline, status_at) = match baseline {
            Some((b, at)) => (Some(b), at),
            None => (None, now),
        };
        // What changed while nobody listened is measured against what the socket saw before the drop.
        if let Some(status) = status
            .as_ref()
            .and_then(|s| pushed_states::states_in(&s.text, t.output_type))
        {
            let events = state_events(&t, &ctx, &status, baseline);
            queue_all(&ctx, events, source);
        }
        t.tunnel
            .attach(writer, src, challenge, status.map(|s| (s, status_at)), info);
        t.tunnel.first_ended(Opened::Up);
        // The worker's read after a (re)connect takes the subscription's status (no second request).
        ctx.shared.post(t.di, None, None, true);
        log::debug!("device {}: push channel connected", t.label);
        // Frames that came with the subscription's answer, and bytes that arrived meanwhile.
        self.again(ti);
    }

    /// Serves device `ti` again next turn.
    fn again(&mut self, ti: usize) {
        if !std::mem::replace(&mut self.in_turn[ti], true) {
            self.ready.push(ti);
        }
    }

    /// Serves device `ti` for one turn: its buffered frames, then reads, within [`Budget::turn`]. A device
    /// with more to give is listed for the next turn (until then its socket raises no new event).
    fn serve(&mut self, ti: usize) {
        let now = Instant::now();
        let lim = &mut self.limits[ti];
        if lim.parked.is_some() {
            // Held to its rate: `scan` lists it again.
            return;
        }
        lim.messages.refill(now);
        lim.bytes.refill(now);
        let mut budget = Budget::turn(lim);
        let messages = budget.messages;
        let more = if budget.spent() {
            true
        } else {
            let mut scratch = std::mem::take(&mut self.scratch);
            let more = self.serve_within(ti, &mut budget, &mut scratch);
            self.scratch = scratch;
            more
        };
        let lim = &mut self.limits[ti];
        lim.messages.tokens -= (messages - budget.messages) as f64;
        lim.bytes.tokens -= budget.used as f64;
        if more {
            lim.cut_turns += 1;
            if lim.messages.tokens < 1.0 || lim.bytes.tokens < 1.0 {
                let at = lim
                    .messages
                    .holding(RESUME * TURN_MESSAGES as f64)
                    .max(lim.bytes.holding(RESUME * TURN_BYTES as f64));
                lim.parked = Some(at);
                self.due = self.due.min(at);
            } else {
                self.again(ti);
            }
        }
        if self.limits[ti].owes() {
            self.due = self.due.min(self.limits[ti].due());
        }
    }

    /// True when the device stopped at its share with more to read or decode.
    fn serve_within(&mut self, ti: usize, budget: &mut Budget, scratch: &mut [u8]) -> bool {
        if matches!(self.slots.get(ti), Some(Slot::Dialing(_))) {
            return self.serve_dial(ti, budget, scratch);
        }
        match self.process(ti, budget) {
            Served::Drained => {}
            Served::Spent => return true,
            Served::Ended => return false,
        }
        loop {
            if budget.spent() {
                return true;
            }
            let Some(Slot::Live(l)) = self.slots.get_mut(ti) else {
                return false;
            };
            let read = match &l.tls {
                Some(conn) => crate::driver::ws::secure::read(conn, &mut l.stream, scratch),
                None => l.stream.read(scratch),
            };
            match read {
                Ok(0) => {
                    let mid = !l.buf.is_empty();
                    let why = if mid {
                        "the WebSocket connection ended in the middle of a frame"
                    } else {
                        "the WebSocket connection ended"
                    };
                    self.fail(ti, why.into());
                    return false;
                }
                Ok(n) => {
                    // Our ACK at once: a device whose stack holds a small write until the previous one is
                    // acknowledged (Nagle) would otherwise wait for our delayed ACK (40 ms) to send an answer.
                    let _ = socket2::SockRef::from(&l.stream).set_tcp_quickack(true);
                    l.buf.extend_from_slice(&scratch[..n]);
                    budget.spend(n);
                    match self.process(ti, budget) {
                        Served::Drained => {}
                        Served::Spent => return true,
                        Served::Ended => return false,
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(ti, format!("WebSocket I/O failed: {e}"));
                    return false;
                }
            }
        }
    }

    /// Decodes and handles the whole frames in the buffer, while the budget lasts.
    fn process(&mut self, ti: usize, budget: &mut Budget) -> Served {
        loop {
            if budget.messages == 0 {
                return Served::Spent;
            }
            let Some(Slot::Live(l)) = self.slots.get_mut(ti) else {
                return Served::Ended;
            };
            let frame = match frame::decode(&l.buf, false, MAX_MESSAGE) {
                Ok(Some((f, used))) => {
                    l.buf.drain(..used);
                    f
                }
                Ok(None) => {
                    // Between frames an idle socket holds no buffer.
                    if l.buf.is_empty() && l.buf.capacity() > 0 {
                        l.buf = Vec::new();
                    }
                    return Served::Drained;
                }
                Err(p) => {
                    self.protocol_error(ti, p);
                    return Served::Ended;
                }
            };
            let message = match l.asm.push(frame) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(p) => {
                    self.protocol_error(ti, p);
                    return Served::Ended;
                }
            };
            budget.messages -= 1;
            let now = Instant::now();
            match message {
                Message::Text(text) => {
                    // Parsing and merging cost about the message's size: a big one uses up the turn.
                    budget.spend(text.len());
                    l.last_traffic = now;
                    l.ping_sent = None;
                    let source = l.source;
                    // A status read's answer goes straight into the typed status, no JSON tree.
                    if self.targets[ti].tunnel.take_status_answer(&text) {
                        continue;
                    }
                    let Ok(Value::Object(frame)) = crate::untrusted_json::parse(text.as_bytes())
                    else {
                        continue;
                    };
                    if let Some(id) = frame.get("id").and_then(Value::as_u64) {
                        self.targets[ti].tunnel.deliver(id, frame);
                    } else if frame.contains_key("method")
                        && let Some(n) = parse_notification(&frame)
                    {
                        self.adopt_context();
                        let t = &self.targets[ti];
                        match &self.ctx {
                            Some(ctx) => {
                                on_notification(t, ctx, n, source, Some(&mut self.limits[ti]))
                            }
                            None => self.missed[ti] |= before_open(t, n),
                        }
                    }
                }
                Message::Binary(b) => budget.spend(b.len()),
                Message::Ping(p) => {
                    if !self.write(ti, Opcode::Pong, &p) {
                        return Served::Ended;
                    }
                }
                Message::Pong(_) => {
                    // Our ping answered: alive (no scan of every device for it).
                    if l.ping_sent.is_some_and(|at| now >= at) {
                        l.ping_sent = None;
                        l.last_traffic = now;
                    }
                    l.last_pong = Some(now);
                }
                Message::Close(code, _) => {
                    let payload = code
                        .map(|c| frame::close_payload(c, ""))
                        .unwrap_or_default();
                    self.write(ti, Opcode::Close, &payload);
                    let why = match code {
                        Some(c) => format!("the device closed the WebSocket ({c})"),
                        None => "the device closed the WebSocket".into(),
                    };
                    self.fail_live(ti, why);
                    return Served::Ended;
                }
            }
            if budget.bytes == 0 {
                return Served::Spent;
            }
        }
    }

    fn protocol_error(&mut self, ti: usize, p: frame::ProtocolError) -> bool {
        self.write(ti, Opcode::Close, &frame::close_payload(p.close_code(), ""));
        self.fail_live(ti, format!("the device sent {p}"));
        false
    }

    /// [`Poller::fail`] unless a failed write already ended the connection.
    fn fail_live(&mut self, ti: usize, why: String) {
        if matches!(self.slots[ti], Slot::Live(_)) {
            self.fail(ti, why);
        }
    }

    /// Writes one small control frame through the tunnel (the one writer lock, shared with the worker's
    /// requests); a socket that cannot take it at once is given up.
    fn write(&mut self, ti: usize, opcode: Opcode, payload: &[u8]) -> bool {
        let payload = &payload[..payload.len().min(125)];
        if self.targets[ti].tunnel.write(opcode, payload) {
            return true;
        }
        if matches!(self.slots[ti], Slot::Live(_)) {
            self.fail(ti, "the socket did not take a control frame".into());
        }
        false
    }

    /// Ends target `ti`'s connection (if any) and schedules the next attempt after the back-off.
    fn fail(&mut self, ti: usize, why: String) {
        let tunnel = &self.targets[ti].tunnel;
        tunnel.detach();
        // Open's first contact waits for the first attempt: a device that took no TCP connection within its
        // timeout is not asked again over HTTP (it would only wait as long again).
        let unreachable = matches!(&self.slots[ti], Slot::Dialing(d)
            if d.dial.connecting() && Instant::now() >= d.dial.deadline());
        tunnel.first_ended(if unreachable {
            Opened::Unreachable(why.clone())
        } else {
            Opened::Failed(why.clone())
        });
        let young = young(self.rt);
        let failures = match &mut self.slots[ti] {
            Slot::Live(l) => {
                let _ = self.poll.registry().deregister(&mut l.stream);
                let _ = l.stream.shutdown(Shutdown::Both);
                kept_failures(l.failures, l.up_at.elapsed(), young)
            }
            Slot::Dialing(d) => {
                let _ = self.poll.registry().deregister(d.dial.stream_mut());
                let _ = d.dial.stream_mut().shutdown(Shutdown::Both);
                d.failures
            }
            Slot::Resolving { failures } | Slot::Waiting { failures, .. } => *failures,
        };
        if self.stop.load(Ordering::SeqCst) {
            return;
        }
        self.attempts += 1;
        let wait = backoff(failures, &self.jitter, self.attempts);
        let label = &self.targets[ti].label;
        // INFO only when the channel goes from working to failing; its recovery is logged by `scan`.
        if failures == 0 {
            log::info!(
                "device {label}: push channel down ({why}); reconnecting in {:.1} s, HTTP meanwhile",
                wait.as_secs_f64()
            );
        } else {
            log::debug!(
                "device {label}: push channel: {why}; attempt {} in {:.1} s",
                failures + 1,
                wait.as_secs_f64()
            );
        }
        let at = Instant::now() + wait;
        self.due = self.due.min(at);
        self.slots[ti] = Slot::Waiting {
            at,
            failures: failures.saturating_add(1),
        };
    }
}

/// How long a connection must have been up to reset the back-off: [`UP_LONG_ENOUGH`], or two
/// `ResponseTimeout`s when longer.
fn young(response_timeout: Duration) -> Duration {
    UP_LONG_ENOUGH.max(response_timeout.saturating_mul(2))
}

/// The failed attempts a connection that ended after `lived` leaves behind: none when it was up long enough
/// (`young`), else those before it (it does not count as a success).
fn kept_failures(failures: u32, lived: Duration, young: Duration) -> u32 {
    if lived >= young { 0 } else { failures }
}

/// The wait before reconnect attempt `failures` + 1: 1 s doubling up to 5 min, plus jitter (`pace::backoff`).
fn backoff(failures: u32, jitter: &RandomState, salt: u64) -> Duration {
    crate::actor::pace::backoff(failures, BACKOFF_FIRST, BACKOFF_CAP, jitter, salt)
}

/// Resolves a host name (on a resolver thread: it blocks).
fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))
}

/// What the heartbeat does next.
#[derive(Debug, PartialEq)]
enum Beat {
    /// Nothing due before this instant.
    Wait(Instant),
    /// The pong to our ping came: the connection is alive.
    Alive,
    /// Idle long enough: send a ping.
    Ping,
    /// No pong in time: the connection is dead.
    Dead,
}

/// How far apart heartbeat scans are at least: a ping goes out up to this much before its connection has been
/// idle for `idle` (never later), so one scan pings every connection due within it. With 1,000 devices the
/// pings of a few seconds came one scan of every device each.
fn heartbeat_batch(idle: Duration) -> Duration {
    Duration::from_secs(1).min(idle / 4)
}

/// The heartbeat rule: a ping after `idle` without traffic (up to [`heartbeat_batch`] sooner), dead when its
/// pong has not come within `pong_wait`.
fn heartbeat(
    now: Instant,
    last_traffic: Instant,
    ping_sent: Option<Instant>,
    last_pong: Option<Instant>,
    pong_wait: Duration,
    idle: Duration,
) -> Beat {
    match ping_sent {
        Some(at) if last_pong.is_some_and(|p| p >= at) => Beat::Alive,
        Some(at) if now >= at + pong_wait => Beat::Dead,
        Some(at) => Beat::Wait(at + pong_wait),
        None if now + heartbeat_batch(idle) >= last_traffic + idle => Beat::Ping,
        None => Beat::Wait(last_traffic + idle - heartbeat_batch(idle)),
    }
}

/// `switch:0` → (`switch`, 0).
fn split_key(key: &str) -> Option<(&str, usize)> {
    let (kind, n) = key.split_once(':')?;
    Some((kind, n.parse().ok()?))
}

/// A notification a device pushed over the outbound WebSocket (`actor/outbound.rs`): handled exactly as one
/// from the push channel (mirror, implied states and a read to the worker, events to the queue). The listener
/// bounds what a connection may send; the inbox and the event queue bound the rest.
pub(crate) fn notify_outbound(t: &Target, ctx: &Context, n: Notification, source: IpAddr) {
    on_notification(t, ctx, n, source, None);
}

/// A notification from the device's `<prefix>/events/rpc` topic (`actor/mqtt.rs`): the same path as the push
/// channel's (mirror, implied states and a read to the worker, events queued with `ctx.channel`, `mqtt`). The
/// MQTT poller bounds what each device may send per turn and per second before this.
pub(crate) fn notify_mqtt(t: &Target, ctx: &Context, n: Notification, source: IpAddr) {
    on_notification(t, ctx, n, source, None);
}

/// `limits`: the device's (the poller's); `None` on a connector, for the few notifications that came with
/// the subscription, and for the outbound WebSocket.
/// A notification before open ended: the status it tells is merged into the mirror (the worker reads it
/// once the context is set: true), events are dropped (nobody could pull them yet).
fn before_open(t: &Target, n: Notification) -> bool {
    t.tunnel.notified();
    match n {
        Notification::Status { components, .. } => t.tunnel.merge_status(&components, false),
        Notification::FullStatus { status, .. } => t.tunnel.merge_status(&status, true),
        Notification::Event { .. } => return false,
    }
    true
}

fn on_notification(
    t: &Target,
    ctx: &Context,
    n: Notification,
    source: IpAddr,
    limits: Option<&mut Limits>,
) {
    t.tunnel.notified();
    match n {
        Notification::Status { components, .. } => {
            t.tunnel.merge_status(&components, false);
            // Compared before the states are posted: the worker may apply them at once.
            let events = state_events(t, ctx, &components, None);
            on_status(t, ctx, &components, limits);
            queue_all(ctx, events, source);
        }
        Notification::FullStatus { status, .. } => {
            t.tunnel.merge_status(&status, true);
            let events = state_events(t, ctx, &status, None);
            on_status(t, ctx, &status, limits);
            queue_all(ctx, events, source);
        }
        Notification::Event { events, .. } => {
            for e in events {
                on_event(t, ctx, e, source);
            }
        }
    }
}

/// Implied output/input states go to the worker; anything else (power, covers, sensors) asks for a read,
/// which the driver serves from the tunnel's mirror (merged just before) without a request.
fn on_status(
    t: &Target,
    ctx: &Context,
    components: &Map<String, Value>,
    limits: Option<&mut Limits>,
) {
    let snap = worker::snapshot(&ctx.shared.slots[t.di]);
    let mut read = false;
    let mut states = Vec::new();
    for (key, fields) in components {
        let Some(fields) = fields.as_object() else {
            continue;
        };
        let (kind, field, count) = match split_key(key) {
            Some((k, _)) if k == t.output_type => {
                (ComponentKind::Output, "output", snap.outputs.len())
            }
            Some(("input", _)) => (ComponentKind::Input, "state", snap.inputs.len()),
            _ => {
                read = true;
                continue;
            }
        };
        let index = split_key(key).map_or(usize::MAX, |(_, n)| n);
        if let Some(on) = fields.get(field).and_then(Value::as_bool)
            && index < count
        {
            states.push((kind, index, on));
        }
        read |= fields
            .keys()
            .any(|k| !matches!(k.as_str(), "id" | "source") && k != field);
    }
    let Some(lim) = limits else {
        for (kind, index, on) in states {
            ctx.shared.post(t.di, Some((kind, index)), Some(on), false);
        }
        if read {
            ctx.shared.post(t.di, None, None, true);
        }
        return;
    };
    if states.is_empty() && !read {
        return;
    }
    let now = Instant::now();
    // A read the mirror cannot serve is a request to the device.
    if read && !t.tunnel.has_mirror() && !lim.reads.take(now) {
        lim.owed_read = true;
        lim.held += 1;
        read = false;
    }
    let inbox = &ctx.shared.hook_inboxes[t.di];
    if lim.wakes.take(now) {
        // One wake-up for the whole notification.
        for (kind, index, on) in states {
            inbox.stash(kind, index, Some(on), false);
        }
        ctx.shared.post(t.di, None, None, read);
    } else {
        for (kind, index, on) in states {
            inbox.stash(kind, index, Some(on), false);
        }
        if read {
            inbox.stash(ComponentKind::Input, 0, None, true);
        }
        lim.owed_wake = true;
        lim.held += 1;
    }
}

/// A `NotifyEvent` event as the webhook the device would have called: same event name, object type and IDs.
fn on_event(t: &Target, ctx: &Context, e: Event, source: IpAddr) {
    // A firmware update's steps also reach the caller following it; they are events like any other too.
    if e.component == "sys" {
        ctx.shared.ota.tell(t.di, &e.event, &e.fields);
    }
    let (kind_text, n) = match split_key(&e.component) {
        Some((k, n)) => (k.to_string(), Some(n)),
        None => (e.component.clone(), e.id.map(|i| i as usize)),
    };
    let name = match e.event.as_str() {
        "single_push" => "button_push",
        "double_push" => "button_doublepush",
        "triple_push" => "button_triplepush",
        "long_push" => "button_longpush",
        other => other,
    };
    let event = format!("{kind_text}.{name}");
    let snap = worker::snapshot(&ctx.shared.slots[t.di]);
    let (object_type, component_id) = match kind_text.as_str() {
        "input" => ("input", n.and_then(|n| snap.inputs.get(n)).map(|c| c.id)),
        "cover" => ("cover", n.and_then(|n| snap.covers.get(n)).map(|c| c.id)),
        k if k == t.output_type => ("output", n.and_then(|n| snap.outputs.get(n)).map(|c| c.id)),
        _ => ("", None),
    };
    let hook = Hook {
        event,
        device_id: Some(t.id),
        object_type: (!object_type.is_empty()).then(|| object_type.to_string()),
        component_id,
        params: e.fields,
    };
    queue(ctx, hook, Origin::PushEvent, source);
}

/// Input and output states in a pushed status become the events their blocks ask for, when they changed
/// (`Pushed::observe`: in the order the device sent them, and an unknown state is no change); `resync`: the
/// status read at a (re)connect, with the device as known before it was asked.
fn state_events(
    t: &Target,
    ctx: &Context,
    components: &Map<String, Value>,
    resync: Option<Arc<Device>>,
) -> Vec<Hook> {
    let (resync, baseline) = (resync.is_some(), resync);
    let mut out = Vec::new();
    let Some(pushed) = ctx.shared.pushed(t.di) else {
        return out;
    };
    // Taken only when an input or output state came (a power change is the common notification).
    let mut snap = None;
    for (key, fields) in components {
        let Some((kind, n, field)) = pushed_states::state_of(key, t.output_type) else {
            continue;
        };
        let names = match (kind, t.output_type) {
            (ComponentKind::Input, _) => ("input.toggle_on", "input.toggle_off"),
            (_, "switch") => ("switch.on", "switch.off"),
            (_, "cct") => ("cct.on", "cct.off"),
            (_, "rgb") => ("rgb.on", "rgb.off"),
            (_, "rgbw") => ("rgbw.on", "rgbw.off"),
            _ => ("light.on", "light.off"),
        };
        // A state left out did not change; a `null` or a value that is no bool is unknown.
        let Some(value) = fields.get(field) else {
            continue;
        };
        let snap = snap.get_or_insert_with(|| {
            baseline
                .clone()
                .unwrap_or_else(|| worker::snapshot(&ctx.shared.slots[t.di]))
        });
        // Only configured components: a device naming ever new ones must not grow what we keep.
        let (object_type, id, known) = match kind {
            ComponentKind::Input => match snap.inputs.get(n) {
                Some(c) => ("input", c.id, c.state),
                None => continue,
            },
            _ => match snap.outputs.get(n) {
                Some(c) => ("output", c.id, c.state),
                None => continue,
            },
        };
        let Some(event) = pushed.observe(kind, n, value.as_bool(), known, resync, names) else {
            continue;
        };
        let hook = Hook {
            event: event.to_string(),
            device_id: Some(t.id),
            object_type: Some(object_type.to_string()),
            component_id: Some(id),
            params: Map::new(),
        };
        out.push(hook);
    }
    out
}

/// Queues events derived from pushed states, in order.
fn queue_all(ctx: &Context, events: Vec<Hook>, source: IpAddr) {
    for hook in events {
        queue(ctx, hook, Origin::PushStatus, source);
    }
}

/// Names and deduplicates a pushed event, then queues it and sets the wake flag.
pub(crate) fn queue(ctx: &Context, hook: Hook, origin: Origin, source: IpAddr) {
    let Some(routing::Resolved { names, order }) = ctx.shared.resolve(&hook, source, origin) else {
        return;
    };
    ctx.queue
        .push(routing::event(hook, names, source.to_string(), ctx.channel));
    // Queued: a twin waiting for the device's order lock may now be dropped (see `Resolved`).
    drop(order);
    if let Some(w) = &ctx.wake {
        w.set();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_pings_when_idle_and_drops_without_a_pong() {
        const IDLE: Duration = Duration::from_secs(5);
        let t0 = Instant::now();
        let wait = Duration::from_millis(800);
        // Batched: a ping up to one second early, never late.
        let early = Duration::from_secs(1);
        assert_eq!(heartbeat_batch(IDLE), early);
        assert_eq!(
            heartbeat(t0, t0, None, None, wait, IDLE),
            Beat::Wait(t0 + IDLE - early)
        );
        let just_before = t0 + IDLE - early - Duration::from_millis(1);
        assert_eq!(
            heartbeat(just_before, t0, None, None, wait, IDLE),
            Beat::Wait(t0 + IDLE - early)
        );
        assert_eq!(
            heartbeat(t0 + IDLE - early, t0, None, None, wait, IDLE),
            Beat::Ping
        );
        assert_eq!(
            heartbeat_batch(Duration::from_secs(2)),
            Duration::from_millis(500),
            "a quarter of a short idle time"
        );
        let idle = t0 + IDLE;
        assert_eq!(heartbeat(idle, t0, None, None, wait, IDLE), Beat::Ping);
        assert_eq!(
            heartbeat(idle, t0, Some(idle), None, wait, IDLE),
            Beat::Wait(idle + wait)
        );
        // A pong from before the ping does not count.
        assert_eq!(
            heartbeat(idle + wait, t0, Some(idle), Some(t0), wait, IDLE),
            Beat::Dead
        );
        let pong = idle + Duration::from_millis(5);
        assert_eq!(
            heartbeat(idle + wait, t0, Some(idle), Some(pong), wait, IDLE),
            Beat::Alive
        );
    }

    /// A device that accepts the subscription and closes at once: each connection dies young, so the
    /// back-off keeps doubling; one that stayed up long enough starts it over.
    #[test]
    fn connections_that_die_young_do_not_reset_the_backoff() {
        let j = RandomState::new();
        let young = young(Duration::from_millis(400));
        assert_eq!(young, UP_LONG_ENOUGH);
        assert_eq!(
            super::young(Duration::from_secs(8)),
            Duration::from_secs(16)
        );
        let mut failures = 0;
        let mut waits = Vec::new();
        for drop in 0..6u64 {
            // Up for a second, then closed by the device.
            failures = kept_failures(failures, Duration::from_secs(1), young);
            waits.push(backoff(failures, &j, drop));
            failures += 1;
        }
        for (w, base) in waits.iter().zip([1, 2, 4, 8, 16, 32]) {
            assert!(*w >= Duration::from_secs(base), "{waits:?}");
        }
        assert!(
            waits[5] >= Duration::from_secs(16),
            "after six drops in a row: {:?}",
            waits[5]
        );
        // A connection that was up long enough: the next wait is the first one again.
        let failures = kept_failures(failures, young, young);
        assert_eq!(failures, 0);
        assert!(backoff(failures, &j, 9) < Duration::from_secs(2));
    }

    #[test]
    fn backoff_doubles_to_its_cap_with_up_to_a_quarter_of_jitter() {
        let j = RandomState::new();
        for (failures, base) in [(0, 1), (1, 2), (3, 8), (9, 300), (40, 300)] {
            let w = backoff(failures, &j, 7);
            let base = Duration::from_secs(base);
            assert!(
                w >= base && w < base + base / 4 + Duration::from_millis(1),
                "{failures}: {w:?}"
            );
        }
    }
}
