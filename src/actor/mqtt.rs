//! The MQTT channel (`Channel: mqtt`): one broker connection per controller, owned by the thread `sd-mqtt`
//! (a mio poller over that one socket, like `sd-push` over its WebSockets).
//!
//! It connects (TCP, TLS with the `Mqtt` block's `CaFile`, CONNECT with a clean session, keep-alive, user and
//! password), subscribes to every MQTT device's topics (`mqtt/topics.rs`) and to `<ClientId>/+/rpc`, where
//! Gen2+ devices answer us; then the link is up, each Gen2+ device's `Tunnel` carries its requests, and every
//! device is read again (whatever changed while we were away). Quiet either way for `KeepAlive`, it sends
//! PINGREQ; no PINGRESP within a `ResponseTimeout`, an error or the broker closing ends the connection, and it
//! reconnects after 1 s doubling to 30 s plus jitter (the wait starts over once a connection stayed up 10 s).
//!
//! What arrives goes where the push channel's goes: answers to the tunnel by id (Gen2+) or to the command
//! waiting in the device's `Port` (Tasmota); `NotifyStatus`/`NotifyFullStatus`/`NotifyEvent` through
//! `push::notify_mqtt` (mirror, implied states and a read to the worker, events with `Channel: mqtt`);
//! Tasmota telemetry into the port, then a read the driver serves from it; availability (`online`, `LWT`)
//! into the port, then a read that marks the device offline, or reads it in full when it is back.
//!
//! Fairness (ARCHITECTURE.md): every device's messages come in order on one socket, so a flood must be read
//! to reach the others'; it costs a topic lookup per message. Per device, a turn handles at most
//! [`TURN_MESSAGES`] and a second [`MESSAGES_PER_SECOND`] (burst of a second's worth); beyond them its messages are
//! dropped unparsed and counted, its mirror is forgotten, and one read (within [`READS_PER_SECOND`]) catches its
//! state up. A packet over [`MAX_PACKET`] is skipped as it streams past, never buffered.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::io::{self, Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use serde_json::Value;

use crate::actor::pace::{Bucket, backoff};
use crate::actor::push;
use crate::config::MqttSettings;
use crate::driver::ws::secure;
use crate::mqtt::link::{Link, Port, Presence};
use crate::mqtt::packet::{self, Connect, Packet, PacketError};
use crate::mqtt::topics::{self, Kind, Level, Route};
use crate::objects::ComponentKind;

/// Largest packet we take: a device answer or notification is a few KiB. Bigger ones are skipped unread.
pub(crate) const MAX_PACKET: usize = 64 * 1024;
/// Bytes read from the socket per turn before every device's share starts over.
const TURN_BYTES: usize = 256 * 1024;
/// Messages of one device handled per turn.
const TURN_MESSAGES: usize = 64;
/// Messages of one device handled per second, after a burst of as many: a real device sends a few.
const MESSAGES_PER_SECOND: f64 = 200.0;
/// Reads per second (after a burst) that one device's dropped messages, telemetry or announcements may ask
/// of its worker.
const READS_PER_SECOND: f64 = 20.0;
const READ_BURST: f64 = 40.0;
/// Reconnect back-off.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A connection up this long starts the back-off over.
const UP_LONG_ENOUGH: Duration = Duration::from_secs(10);
/// Filters per SUBSCRIBE packet (1,000 devices subscribe in a few dozen packets).
const FILTERS_PER_SUBSCRIBE: usize = 64;
/// How often a device held to its limits is logged.
const LIMIT_LOG_EVERY: Duration = Duration::from_secs(60);

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);

/// One device on the MQTT channel.
pub(crate) struct Target {
    /// Index in configuration order.
    pub(crate) di: usize,
    pub(crate) id: i64,
    pub(crate) label: String,
    /// Its topics, availability and (Tasmota) waiting command; shared with its driver.
    pub(crate) port: Arc<Port>,
    /// Gen2+: what the push path takes (its tunnel, the RPC type of its outputs).
    pub(crate) rpc: Option<push::Target>,
}

/// The running MQTT channel; [`Mqtt::stop`] ends and joins it.
pub(crate) struct Mqtt {
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl Mqtt {
    /// Starts `sd-mqtt`, which connects at once. `ctx` is set once the workers run (notifications before it
    /// are covered by every device's first read).
    pub(crate) fn start(
        settings: MqttSettings,
        link: Arc<Link>,
        targets: Vec<Target>,
        ctx: Arc<OnceLock<Arc<push::Context>>>,
        response_timeout: Duration,
    ) -> io::Result<Mqtt> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let w = waker.clone();
        link.on_wake(Box::new(move || {
            let _ = w.wake();
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let tls = match settings.tls {
            true => Some(tls_config(&settings)),
            false => None,
        };
        let now = Instant::now();
        let mut p = Poller {
            poll,
            link,
            ctx,
            stop: stop.clone(),
            response_timeout,
            keep_alive: settings.keep_alive,
            tls,
            limits: targets.iter().map(|_| Limits::new(now)).collect(),
            routes: HashMap::new(),
            levels: HashMap::new(),
            by_id: HashMap::new(),
            targets,
            settings,
            conn: Conn::Down { retry_at: now },
            failures: 0,
            attempts: 0,
            jitter: RandomState::new(),
            logged_down: false,
            source: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        p.index();
        let builder = std::thread::Builder::new()
            .name("sd-mqtt".into())
            .stack_size(256 * 1024);
        let thread = crate::log_scope::spawn(builder, move || p.run())?;
        Ok(Mqtt {
            thread: Some(thread),
            stop,
            waker,
        })
    }

    /// Ends the connection (DISCONNECT: no last will of ours to publish) and joins the thread.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Mqtt {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The rustls configuration for the broker: its certificate verified against `CaFile` (checked at open).
fn tls_config(settings: &MqttSettings) -> Result<Arc<rustls::ClientConfig>, String> {
    let path = settings.ca_file.as_deref().ok_or_else(|| {
        "Mqtt: Tls needs CaFile (the CA that signed the broker's certificate)".to_string()
    })?;
    let roots = crate::driver::tls::load_ca(path)?;
    let config = rustls::ClientConfig::builder_with_provider(crate::driver::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// One device's limits.
struct Limits {
    messages: Bucket,
    reads: Bucket,
    /// Messages handled this turn.
    turn: usize,
    /// Messages were dropped: its state must be read when a read token is back.
    owed_read: bool,
    dropped: u64,
    logged: Option<Instant>,
}

impl Limits {
    fn new(now: Instant) -> Limits {
        Limits {
            messages: Bucket::new(MESSAGES_PER_SECOND, MESSAGES_PER_SECOND, now),
            reads: Bucket::new(READS_PER_SECOND, READ_BURST, now),
            turn: 0,
            owed_read: false,
            dropped: 0,
            logged: None,
        }
    }
}

/// The connection's state.
enum Conn {
    /// Not connected; the next attempt at `retry_at`.
    Down { retry_at: Instant },
    /// TCP (and TLS) under way, CONNECT sent or buffered; CONNACK due by `deadline`.
    Connecting { s: Session, deadline: Instant },
    /// CONNACK accepted; SUBACKs for these packet ids due by `deadline`.
    Subscribing {
        s: Session,
        waiting: Vec<u16>,
        deadline: Instant,
    },
    /// Connected and subscribed.
    Up(Session),
}

/// One TCP connection to the broker.
struct Session {
    tcp: TcpStream,
    tls: Option<secure::Shared>,
    /// Bytes read, not yet a whole packet.
    inbuf: Vec<u8>,
    /// Bytes the socket did not take yet (plain TCP; rustls buffers its own).
    outbuf: Vec<u8>,
    /// Bytes of an oversized packet still to skip.
    skip: usize,
    /// The socket may hold more (a turn stopped at its byte share).
    more: bool,
    last_sent: Instant,
    /// When the broker last sent anything: a broker gone silent is pinged even while we keep sending.
    last_heard: Instant,
    ping_sent: Option<Instant>,
    up_at: Instant,
    next_id: u16,
}

impl Session {
    /// The start of the quiet the keep-alive measures: since we last sent, or since the broker last did.
    fn idle_since(&self) -> Instant {
        self.last_sent.min(self.last_heard)
    }

    fn packet_id(&mut self) -> u16 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.next_id
    }

    /// Queues `bytes` and writes what the socket takes now.
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.last_sent = Instant::now();
        match &self.tls {
            Some(conn) => tls_written(secure::write(conn, &mut self.tcp, bytes)),
            None => {
                self.outbuf.extend_from_slice(bytes);
                self.flush()
            }
        }
    }

    fn send_packet(&mut self, p: &Packet) -> io::Result<()> {
        self.send(&packet::to_bytes(p))
    }

    /// Writes what waits as far as the socket takes it.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(conn) = &self.tls {
            return tls_written(secure::write(conn, &mut self.tcp, &[]));
        }
        while !self.outbuf.is_empty() {
            match self.tcp.write(&self.outbuf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.outbuf.drain(..n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
                    ) =>
                {
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.tls {
            Some(conn) => secure::read(conn, &mut self.tcp, buf),
            None => self.tcp.read(buf),
        }
    }
}

struct Poller {
    poll: Poll,
    link: Arc<Link>,
    ctx: Arc<OnceLock<Arc<push::Context>>>,
    stop: Arc<AtomicBool>,
    settings: MqttSettings,
    response_timeout: Duration,
    keep_alive: Duration,
    tls: Option<Result<Arc<rustls::ClientConfig>, String>>,
    targets: Vec<Target>,
    limits: Vec<Limits>,
    /// Exact topic → (target, kind).
    routes: HashMap<String, (usize, Kind)>,
    /// Base (ending in `/`) whose last level varies → (target, level).
    levels: HashMap<String, (usize, Level)>,
    /// Device ID → target (answers on `<ClientId>/<ID>/rpc`).
    by_id: HashMap<i64, usize>,
    conn: Conn,
    failures: u32,
    attempts: u64,
    jitter: RandomState,
    /// The connection's loss was logged (at WARN once, then DEBUG until it is back).
    logged_down: bool,
    /// The broker's address: the events' `Source`.
    source: IpAddr,
}

/// How reading the socket ended.
enum Read {
    /// Nothing more now.
    Drained,
    /// Stopped at the turn's byte share; the socket may hold more.
    Spent,
}

impl Poller {
    fn index(&mut self) {
        for (ti, t) in self.targets.iter().enumerate() {
            for r in t.port.topics.routes() {
                match r {
                    Route::Exact(topic, kind) => {
                        self.routes.insert(topic, (ti, kind));
                    }
                    Route::Level(base, level) => {
                        self.levels.insert(base, (ti, level));
                    }
                }
            }
            if t.rpc.is_some() {
                self.by_id.insert(t.id, ti);
            }
        }
    }

    /// Every filter we subscribe to, with its QoS: availability and notifications at 1 (a lost one is a lost
    /// state change or event, and they are rare), answers and telemetry at 0 (an answer's loss is a timeout
    /// under the retry rules, the next telemetry replaces a lost one).
    fn filters(&self) -> Vec<(String, u8)> {
        let mut out = Vec::new();
        if !self.by_id.is_empty() {
            out.push((topics::answers_filter(&self.link.client_id), 0));
        }
        for t in &self.targets {
            for r in t.port.topics.routes() {
                let qos = match &r {
                    Route::Exact(_, Kind::Online | Kind::Events) => 1,
                    _ => 0,
                };
                out.push((r.filter(), qos));
            }
        }
        out
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(16);
        let mut scratch = vec![0u8; 16 * 1024];
        loop {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let timeout = self
                .next_due()
                .map(|at| at.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout)
                && e.kind() != io::ErrorKind::Interrupted
            {
                log::error!("MQTT: the poller failed: {e}");
                break;
            }
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            self.turn(&mut scratch);
        }
        self.close();
    }

    /// When the poller must look again without an event: a reconnect, a deadline, a ping, a paid read.
    fn next_due(&self) -> Option<Instant> {
        let mut due = match &self.conn {
            Conn::Down { retry_at } => Some(*retry_at),
            Conn::Connecting { deadline, .. } | Conn::Subscribing { deadline, .. } => {
                Some(*deadline)
            }
            Conn::Up(s) if s.more => Some(Instant::now()),
            Conn::Up(s) => Some(match s.ping_sent {
                Some(at) => at + self.response_timeout,
                None => s.idle_since() + self.keep_alive,
            }),
        };
        for l in &self.limits {
            if l.owed_read {
                let at = l.reads.next();
                due = Some(due.map_or(at, |d| d.min(at)));
            }
        }
        due
    }

    fn session(&mut self) -> Option<&mut Session> {
        match &mut self.conn {
            Conn::Down { .. } => None,
            Conn::Connecting { s, .. } | Conn::Subscribing { s, .. } | Conn::Up(s) => Some(s),
        }
    }

    fn turn(&mut self, scratch: &mut [u8]) {
        let now = Instant::now();
        if let Conn::Down { retry_at } = self.conn {
            if now >= retry_at {
                self.connect();
            }
            return;
        }
        // Requests the drivers queued.
        let mut out = Vec::new();
        self.link.take_outbox(&mut out);
        if let Some(s) = self.session() {
            let sent = if out.is_empty() {
                s.flush()
            } else {
                s.send(&out)
            };
            if let Err(e) = sent {
                self.fail(format!("writing to the broker failed: {e}"));
                return;
            }
        }
        for l in &mut self.limits {
            l.turn = 0;
        }
        match self.read_turn(scratch) {
            Ok(Read::Drained) => {
                if let Some(s) = self.session() {
                    s.more = false;
                }
            }
            Ok(Read::Spent) => {
                if let Some(s) = self.session() {
                    s.more = true;
                }
            }
            Err(why) => {
                self.fail(why);
                return;
            }
        }
        self.timers(Instant::now());
        self.pay(Instant::now());
    }

    /// Deadlines and the keep-alive.
    fn timers(&mut self, now: Instant) {
        let (keep_alive, response) = (self.keep_alive, self.response_timeout);
        let why = match &mut self.conn {
            Conn::Connecting { deadline, .. } if now >= *deadline => Some(format!(
                "no CONNACK within {:.1} s (is it an MQTT broker, with Tls as configured?)",
                response.as_secs_f64()
            )),
            Conn::Subscribing { deadline, .. } if now >= *deadline => {
                Some(format!("no SUBACK within {:.1} s", response.as_secs_f64()))
            }
            Conn::Up(s) => match s.ping_sent {
                Some(at) if now >= at + response => Some(format!(
                    "no PINGRESP within {:.1} s",
                    response.as_secs_f64()
                )),
                None if now >= s.idle_since() + keep_alive => {
                    s.ping_sent = Some(now);
                    s.send_packet(&Packet::PingReq)
                        .err()
                        .map(|e| format!("writing to the broker failed: {e}"))
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(why) = why {
            self.fail(why);
        }
    }

    /// Pays owed reads whose token is back, and logs devices held to their limits.
    fn pay(&mut self, now: Instant) {
        let Some(ctx) = self.ctx.get().cloned() else {
            return;
        };
        for (ti, l) in self.limits.iter_mut().enumerate() {
            if l.dropped > 0 && l.logged.is_none_or(|at| now >= at + LIMIT_LOG_EVERY) {
                log::info!(
                    "device {}: {} MQTT messages dropped (more than {} a second, or {} in one turn: flooding?); its state is read instead, other devices are not affected",
                    self.targets[ti].label,
                    l.dropped,
                    MESSAGES_PER_SECOND,
                    TURN_MESSAGES
                );
                l.dropped = 0;
                l.logged = Some(now);
            }
            if l.owed_read && l.reads.take(now) {
                l.owed_read = false;
                ctx.shared.post(self.targets[ti].di, None, None, true);
            }
        }
    }

    fn connect(&mut self) {
        self.attempts += 1;
        let now = Instant::now();
        let addr = match (self.settings.host.as_str(), self.settings.port)
            .to_socket_addrs()
            .map(|mut a| a.next())
        {
            Ok(Some(a)) => a,
            Ok(None) => return self.fail(format!("{} has no address", self.settings.host)),
            Err(e) => return self.fail(format!("cannot resolve {}: {e}", self.settings.host)),
        };
        self.source = addr.ip();
        match self.open(addr) {
            Ok(s) => {
                self.conn = Conn::Connecting {
                    s,
                    deadline: now + self.response_timeout,
                }
            }
            Err(why) => self.fail(why),
        }
    }

    /// A non-blocking connection with CONNECT queued (written once TCP and TLS are up).
    fn open(&mut self, addr: SocketAddr) -> Result<Session, String> {
        let tls = match &self.tls {
            None => None,
            Some(Err(why)) => return Err(why.clone()),
            Some(Ok(config)) => {
                let name = rustls::pki_types::ServerName::try_from(self.settings.host.clone())
                    .map_err(|e| {
                        format!("'{}' is not a TLS server name: {e}", self.settings.host)
                    })?;
                let mut conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| format!("TLS: {e}"))?;
                // Our outbox bounds what waits; rustls must not refuse part of a packet.
                conn.set_buffer_limit(None);
                Some(Arc::new(Mutex::new(conn)))
            }
        };
        let mut tcp = TcpStream::connect(addr).map_err(|e| format!("cannot connect: {e}"))?;
        self.poll
            .registry()
            .register(&mut tcp, SOCKET, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| e.to_string())?;
        let now = Instant::now();
        let mut s = Session {
            tcp,
            tls,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            skip: 0,
            more: false,
            last_sent: now,
            last_heard: now,
            ping_sent: None,
            up_at: now,
            next_id: 0,
        };
        let keep_alive = self.keep_alive.as_secs().clamp(1, u16::MAX as u64) as u16;
        let connect = Packet::Connect(Connect {
            client_id: self.link.client_id.clone(),
            keep_alive,
            clean_session: true,
            will: None,
            username: self.settings.user.clone(),
            password: self
                .settings
                .password
                .as_ref()
                .map(|p| p.expose().as_bytes().to_vec()),
        });
        s.send_packet(&connect)
            .map_err(|e| format!("cannot connect: {e}"))?;
        Ok(s)
    }

    /// Reads within the turn's share and handles every whole packet.
    fn read_turn(&mut self, scratch: &mut [u8]) -> Result<Read, String> {
        let mut read = 0;
        loop {
            if read >= TURN_BYTES {
                return Ok(Read::Spent);
            }
            let Some(s) = self.session() else {
                return Ok(Read::Drained);
            };
            let n = match s.read(scratch) {
                Ok(0) => return Err("the broker closed the connection".into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Read::Drained),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(Read::Drained),
                Err(e) => return Err(describe_io(&e)),
            };
            read += n;
            s.last_heard = Instant::now();
            let mut chunk = &scratch[..n];
            if s.skip > 0 {
                let k = s.skip.min(chunk.len());
                s.skip -= k;
                chunk = &chunk[k..];
            }
            s.inbuf.extend_from_slice(chunk);
            self.packets()?;
        }
    }

    /// Handles the whole packets in the buffer.
    fn packets(&mut self) -> Result<(), String> {
        loop {
            let Some(s) = self.session() else {
                return Ok(());
            };
            if s.inbuf.is_empty() {
                return Ok(());
            }
            match packet::decode(&s.inbuf, MAX_PACKET) {
                Ok(None) => return Ok(()),
                Ok(Some((p, used))) => {
                    s.inbuf.drain(..used);
                    self.on_packet(p)?;
                }
                Err(PacketError::TooLarge { length, .. }) => {
                    // Skipped as it streams past; a QoS 1 one is still acknowledged (else the broker's window
                    // of unacknowledged messages to us fills up).
                    let Some(big) = oversized(&s.inbuf, length) else {
                        return Ok(());
                    };
                    let total = big.header + length;
                    let here = total.min(s.inbuf.len());
                    s.inbuf.drain(..here);
                    s.skip = total - here;
                    if let Some(id) = big.ack {
                        s.send_packet(&Packet::PubAck(id))
                            .map_err(|e| format!("writing to the broker failed: {e}"))?;
                    }
                    if let Some(ti) = self.owner(&big.topic) {
                        log::debug!(
                            "device {}: an MQTT message of {length} bytes on {} skipped (limit {MAX_PACKET})",
                            self.targets[ti].label,
                            crate::text::quote(&big.topic, 120)
                        );
                        self.drop_message(ti);
                    }
                }
                Err(e) => return Err(format!("the broker sent {e}")),
            }
        }
    }

    fn on_packet(&mut self, p: Packet) -> Result<(), String> {
        let write = |e: io::Error| format!("writing to the broker failed: {e}");
        match p {
            Packet::ConnAck { code, .. } => {
                if !matches!(self.conn, Conn::Connecting { .. }) {
                    return Err("the broker sent a second CONNACK".into());
                }
                if code != 0 {
                    return Err(format!(
                        "the broker refused the connection: {}",
                        packet::connack_reason(code)
                    ));
                }
                self.subscribe().map_err(write)?;
            }
            Packet::SubAck { id, codes } => {
                if codes.contains(&0x80) {
                    log::warn!(
                        "MQTT: the broker {} refused some of our subscriptions (packet {id}): check its ACL for this user (README \"Devices behind a broker\")",
                        self.link.broker
                    );
                }
                let done = match &mut self.conn {
                    Conn::Subscribing { waiting, .. } => {
                        waiting.retain(|w| *w != id);
                        waiting.is_empty()
                    }
                    _ => false,
                };
                if done {
                    self.go_up();
                }
            }
            Packet::Publish(m) => {
                if let Some(s) = self.session() {
                    match (m.qos, m.id) {
                        (1, Some(id)) => s.send_packet(&Packet::PubAck(id)).map_err(write)?,
                        (2, Some(id)) => s.send_packet(&Packet::PubRec(id)).map_err(write)?,
                        _ => {}
                    }
                }
                self.on_message(&m.topic, &m.payload);
            }
            Packet::PubRel(id) => {
                if let Some(s) = self.session() {
                    s.send_packet(&Packet::PubComp(id)).map_err(write)?;
                }
            }
            Packet::PingResp => {
                if let Some(s) = self.session() {
                    s.ping_sent = None;
                }
            }
            // Acks of what we never send, and packets a broker does not send to a client.
            _ => {}
        }
        Ok(())
    }

    /// Sends SUBSCRIBE packets for every filter.
    fn subscribe(&mut self) -> io::Result<()> {
        let filters = self.filters();
        let deadline = Instant::now() + self.response_timeout;
        let Conn::Connecting { s, .. } = std::mem::replace(
            &mut self.conn,
            Conn::Down {
                retry_at: Instant::now(),
            },
        ) else {
            return Ok(());
        };
        let mut s = s;
        let mut waiting = Vec::new();
        for chunk in filters.chunks(FILTERS_PER_SUBSCRIBE) {
            let id = s.packet_id();
            waiting.push(id);
            s.send_packet(&Packet::Subscribe {
                id,
                filters: chunk.to_vec(),
            })?;
        }
        if waiting.is_empty() {
            self.conn = Conn::Up(s);
            self.go_up();
        } else {
            self.conn = Conn::Subscribing {
                s,
                waiting,
                deadline,
            };
        }
        Ok(())
    }

    /// Subscribed: the link is up, tunnels carry requests, and every device is read again.
    fn go_up(&mut self) {
        let conn = std::mem::replace(
            &mut self.conn,
            Conn::Down {
                retry_at: Instant::now(),
            },
        );
        let mut s = match conn {
            Conn::Subscribing { s, .. } | Conn::Up(s) => s,
            other => {
                self.conn = other;
                return;
            }
        };
        s.up_at = Instant::now();
        self.conn = Conn::Up(s);
        for t in &self.targets {
            t.port.set_presence(Presence::Unknown);
            if let Some(r) = &t.rpc {
                r.tunnel.attach_mqtt(
                    self.link.clone(),
                    t.port.topics.request(),
                    topics::src(&self.link.client_id, t.id),
                );
            }
        }
        self.link.set_up();
        if self.logged_down {
            log::info!(
                "MQTT: connected to the broker {} again as {}",
                self.link.broker,
                self.link.client_id
            );
        } else {
            log::info!(
                "MQTT: connected to the broker {} as {} ({} device(s))",
                self.link.broker,
                self.link.client_id,
                self.targets.len()
            );
        }
        self.logged_down = false;
        // Whatever changed while nobody listened: every device is read (after open; at open the workers'
        // first contact is that read).
        if let Some(ctx) = self.ctx.get() {
            for t in &self.targets {
                ctx.shared.post(t.di, None, None, true);
            }
        }
    }

    /// The connection ended (or an attempt failed): every waiting request learns it, the link is down with
    /// the reason, and the next attempt is due after the back-off.
    fn fail(&mut self, why: String) {
        let conn = std::mem::replace(
            &mut self.conn,
            Conn::Down {
                retry_at: Instant::now(),
            },
        );
        let up_for = match conn {
            Conn::Down { .. } => None,
            Conn::Connecting { mut s, .. } | Conn::Subscribing { mut s, .. } => {
                let _ = self.poll.registry().deregister(&mut s.tcp);
                None
            }
            Conn::Up(mut s) => {
                let _ = self.poll.registry().deregister(&mut s.tcp);
                Some(s.up_at.elapsed())
            }
        };
        if up_for.is_some_and(|d| d >= UP_LONG_ENOUGH) {
            self.failures = 0;
        }
        self.link.set_down(why.clone());
        for t in &self.targets {
            if let Some(r) = &t.rpc {
                r.tunnel.detach();
            }
            t.port.cancel();
        }
        let wait = backoff(
            self.failures,
            BACKOFF_FIRST,
            BACKOFF_CAP,
            &self.jitter,
            self.attempts,
        );
        self.failures = self.failures.saturating_add(1);
        let text = format!(
            "MQTT: the broker {}: {why}; trying again in {:.0} s",
            self.link.broker,
            wait.as_secs_f64()
        );
        if why.contains("refused") {
            // A refusal needs the user: every time, at ERROR.
            log::error!("{text}");
        } else if !self.logged_down {
            log::warn!("{text}");
        } else {
            log::debug!("{text}");
        }
        self.logged_down = true;
        // A lost connection: the devices are read (and found unreachable) now, not at the next refresh.
        if up_for.is_some()
            && let Some(ctx) = self.ctx.get()
        {
            for t in &self.targets {
                ctx.shared.post(t.di, None, None, true);
            }
        }
        self.conn = Conn::Down {
            retry_at: Instant::now() + wait,
        };
    }

    fn close(&mut self) {
        if let Some(s) = self.session() {
            let _ = s.send_packet(&Packet::Disconnect);
            let _ = s.flush();
        }
        self.link
            .set_down("the controller closed the connection".into());
        for t in &self.targets {
            if let Some(r) = &t.rpc {
                r.tunnel.detach();
            }
            t.port.cancel();
        }
    }

    /// The device a topic belongs to.
    fn owner(&self, topic: &str) -> Option<usize> {
        if let Some(id) = topics::answer_device(&self.link.client_id, topic) {
            return self.by_id.get(&id).copied();
        }
        if let Some((ti, _)) = self.routes.get(topic) {
            return Some(*ti);
        }
        let (base, _) = topic.rsplit_once('/')?;
        self.levels.get(&topic[..=base.len()]).map(|(ti, _)| *ti)
    }

    /// A message of device `ti` beyond its share: dropped, its state read instead.
    fn drop_message(&mut self, ti: usize) {
        let l = &mut self.limits[ti];
        l.dropped += 1;
        l.owed_read = true;
        if let Some(r) = &self.targets[ti].rpc {
            r.tunnel.forget_mirror();
        }
    }

    /// Whether device `ti` may have one more message handled now.
    fn admit(&mut self, ti: usize) -> bool {
        let l = &mut self.limits[ti];
        if l.turn >= TURN_MESSAGES || !l.messages.take(Instant::now()) {
            self.drop_message(ti);
            return false;
        }
        l.turn += 1;
        true
    }

    fn on_message(&mut self, topic: &str, payload: &[u8]) {
        // Answers: `<ClientId>/<ID>/rpc`.
        if let Some(id) = topics::answer_device(&self.link.client_id, topic) {
            let Some(&ti) = self.by_id.get(&id) else {
                return;
            };
            if !self.admit(ti) {
                return;
            }
            if let (Ok(Value::Object(frame)), Some(r)) =
                (crate::untrusted_json::parse(payload), &self.targets[ti].rpc)
                && let Some(n) = frame.get("id").and_then(Value::as_u64)
            {
                r.tunnel.deliver(n, frame);
            }
            return;
        }
        let (ti, kind) = if let Some((ti, kind)) = self.routes.get(topic) {
            (*ti, kind.clone())
        } else {
            let Some((base, last)) = topic.rsplit_once('/') else {
                return;
            };
            match self.levels.get(&topic[..=base.len()]) {
                Some((ti, Level::Stat)) => (*ti, Kind::Stat(last.to_string())),
                Some((ti, Level::Tele)) => (*ti, Kind::Tele(last.to_string())),
                None => return,
            }
        };
        if !self.admit(ti) {
            return;
        }
        match kind {
            Kind::Online => self.on_presence(ti, payload),
            Kind::Events => self.on_events(ti, payload),
            Kind::Stat(level) => self.on_stat(ti, &level, payload),
            Kind::Tele(level) => self.on_tele(ti, &level, payload),
        }
    }

    /// `<prefix>/online` (`true`/`false`) or Tasmota `LWT` (`Online`/`Offline`).
    fn on_presence(&mut self, ti: usize, payload: &[u8]) {
        let text = String::from_utf8_lossy(payload);
        let presence = match text.trim() {
            t if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("online") => {
                Presence::Online
            }
            t if t.eq_ignore_ascii_case("false") || t.eq_ignore_ascii_case("offline") => {
                Presence::Offline
            }
            _ => return,
        };
        let t = &self.targets[ti];
        if !t.port.set_presence(presence) {
            return;
        }
        log::debug!(
            "device {}: announces itself {} on the MQTT broker",
            t.label,
            if presence == Presence::Online {
                "online"
            } else {
                "offline"
            }
        );
        if let Some(r) = &t.rpc {
            // Back (or gone): nothing the mirror holds is current.
            r.tunnel.forget_mirror();
        }
        // Offline: the read finds it announced offline; online: a full read of what changed meanwhile.
        self.ask_read(ti);
    }

    /// A read of device `ti` for its worker, within its read rate (else owed).
    fn ask_read(&mut self, ti: usize) {
        let Some(ctx) = self.ctx.get() else {
            return;
        };
        let l = &mut self.limits[ti];
        if l.reads.take(Instant::now()) {
            ctx.shared.post(self.targets[ti].di, None, None, true);
        } else {
            l.owed_read = true;
        }
    }

    /// Gen2+ `<prefix>/events/rpc`: the push channel's path.
    fn on_events(&mut self, ti: usize, payload: &[u8]) {
        let Some(ctx) = self.ctx.get().cloned() else {
            return;
        };
        let Some(r) = &self.targets[ti].rpc else {
            return;
        };
        let Ok(Value::Object(frame)) = crate::untrusted_json::parse(payload) else {
            log::debug!(
                "device {}: a notification that is not a JSON object ignored",
                r.label
            );
            return;
        };
        if let Some(n) = crate::driver::ws::rpc::parse_notification(&frame) {
            push::notify_mqtt(r, &ctx, n, self.source);
        }
    }

    /// Tasmota `stat/…/<level>`: the answer a command waits for, else news (a button, another client).
    fn on_stat(&mut self, ti: usize, level: &str, payload: &[u8]) {
        let Ok(body) = crate::untrusted_json::parse(payload) else {
            // `stat/…/POWER1 ON` beside the JSON RESULT: the RESULT says the same.
            return;
        };
        let t = &self.targets[ti];
        if t.port.deliver(level, body.clone()) {
            return;
        }
        // Unasked: relay states go to the worker as they are; anything else asks for a read.
        let Some(ctx) = self.ctx.get().cloned() else {
            return;
        };
        let mut states = Vec::new();
        if let Value::Object(m) = &body {
            for (k, v) in m {
                let Some(n) = k.to_ascii_uppercase().strip_prefix("POWER").map(|n| {
                    if n.is_empty() {
                        Some(1)
                    } else {
                        n.parse::<usize>().ok()
                    }
                }) else {
                    continue;
                };
                if let (Some(n @ 1..), Some(on)) =
                    (n, v.as_str().and_then(crate::driver::tasmota::power_text))
                {
                    states.push((n - 1, on));
                }
            }
        }
        if states.is_empty() {
            self.ask_read(ti);
            return;
        }
        for (index, on) in states {
            ctx.shared
                .post(t.di, Some((ComponentKind::Output, index)), Some(on), false);
        }
    }

    /// Tasmota `tele/…/STATE` and `SENSOR`: kept in the port; the read it asks for takes them.
    fn on_tele(&mut self, ti: usize, level: &str, payload: &[u8]) {
        let state = match level {
            "STATE" => true,
            "SENSOR" => false,
            _ => return,
        };
        let Ok(body @ Value::Object(_)) = crate::untrusted_json::parse(payload) else {
            return;
        };
        self.targets[ti].port.telemetry(state, body);
        self.ask_read(ti);
    }
}

/// A TLS write's outcome: what the socket did not take yet stays in rustls (sent at the next flush), also
/// while the TCP connect is still under way.
fn tls_written(r: io::Result<usize>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r.map(|_| ()),
    }
}

/// The head of a packet too large to take: its header's length, and for a PUBLISH its topic and (QoS 1) the
/// packet id to acknowledge. `None`: more bytes are needed to tell.
struct Oversized {
    header: usize,
    topic: String,
    ack: Option<u16>,
}

fn oversized(buf: &[u8], length: usize) -> Option<Oversized> {
    // Remaining length: 1–4 bytes after the first.
    let header = 1 + buf[1..].iter().take(4).position(|b| b & 0x80 == 0)? + 1;
    let first = buf[0];
    if first >> 4 != 3 {
        return Some(Oversized {
            header,
            topic: String::new(),
            ack: None,
        });
    }
    let qos = (first >> 1) & 3;
    let at = header;
    let len = u16::from_be_bytes([*buf.get(at)?, *buf.get(at + 1)?]) as usize;
    if len + 2 > length {
        return Some(Oversized {
            header,
            topic: String::new(),
            ack: None,
        });
    }
    let topic = String::from_utf8_lossy(buf.get(at + 2..at + 2 + len)?).into_owned();
    let ack = match qos {
        1 => Some(u16::from_be_bytes([
            *buf.get(at + 2 + len)?,
            *buf.get(at + 3 + len)?,
        ])),
        _ => None,
    };
    Some(Oversized { header, topic, ack })
}

/// An I/O error in words: a refused certificate says what was wrong with it.
fn describe_io(e: &io::Error) -> String {
    match crate::driver::tls::refusal_of(e) {
        Some(r) => format!("the broker's certificate was refused: {r}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mqtt::packet::Publish;

    #[test]
    fn an_oversized_publish_is_skipped_and_still_acknowledged() {
        let big = packet::to_bytes(&Packet::Publish(Publish {
            topic: "plug/events/rpc".into(),
            payload: vec![b'x'; 100_000],
            qos: 1,
            retain: false,
            dup: false,
            id: Some(77),
        }));
        let Err(PacketError::TooLarge { length, .. }) = packet::decode(&big, MAX_PACKET) else {
            panic!("too large")
        };
        // Only the first bytes have come: enough to tell.
        let o = oversized(&big[..30], length).unwrap();
        assert_eq!(o.header + length, big.len());
        assert_eq!(o.topic, "plug/events/rpc");
        assert_eq!(o.ack, Some(77));
        // Not enough bytes yet: wait.
        assert!(oversized(&big[..3], length).is_none());
    }
}
