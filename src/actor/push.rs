//! The push channel (`Channel: auto`), first version: one reader thread `sd-push-<ID>` per Gen2+ device with
//! `Channel: auto`, each owning that device's WebSocket (`driver/ws/rpc.rs`). ARCHITECTURE.md ("Push channel")
//! says why this is not yet the planned single mio poller and how it gets there.
//!
//! A thread connects (TCP, upgrade, one authenticated `Shelly.GetStatus` with our `src`, which subscribes),
//! asks the worker for a full read after every (re)connect, and then turns notifications into what webhooks
//! produce: `NotifyStatus`/`NotifyFullStatus` become implied output/input states plus a "read now" in the
//! device's `HookInbox` (the worker stays the only writer), `NotifyEvent` events become queued
//! `WebhookEvent`s with `Channel: push`, named and deduplicated by `webhook/routing.rs`. Heartbeat: a ping after
//! [`PING_IDLE`] without traffic, the connection dropped when no pong came within two `ResponseTimeout`s.
//! A dead connection is reconnected after a back-off (1 s doubling, capped at 5 min) with jitter. The push
//! channel never decides `Online`: that stays with the worker's HTTP reads.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{Map, Value};

use crate::actor::worker;
use crate::driver::ws::client::Timeouts;
use crate::driver::ws::rpc::{Event, Notification, RpcSocket};
use crate::event::EventChannel;
use crate::objects::ComponentKind;
use crate::wake::WakeFlag;
use crate::webhook::queue::EventQueue;
use crate::webhook::request::Hook;
use crate::webhook::routing::{self, Shared};

/// A ping after this long without a frame from the device.
pub(crate) const PING_IDLE: Duration = Duration::from_secs(30);
/// Reconnect back-off: first wait and cap.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// One device with a push channel.
pub(crate) struct Target {
    /// Index in configuration order.
    pub(crate) di: usize,
    pub(crate) id: i64,
    pub(crate) label: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) password: Option<String>,
    /// The RPC component of its outputs: `switch` or `light`.
    pub(crate) output_type: &'static str,
}

/// What every push thread shares.
pub(crate) struct Context {
    pub(crate) shared: Arc<Shared>,
    pub(crate) queue: Arc<EventQueue>,
    pub(crate) wake: Option<WakeFlag>,
    pub(crate) response_timeout: Duration,
}

/// The running push threads; [`Push::stop`] ends and joins them.
pub(crate) struct Push {
    threads: Vec<JoinHandle<()>>,
    stop: Arc<Stop>,
    stop_tx: Option<Sender<()>>,
}

/// Sockets of the connected threads, shut down from `close` so a blocked read returns at once.
#[derive(Default)]
struct Stop(Mutex<(bool, HashMap<usize, TcpStream>)>);

impl Stop {
    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, HashMap<usize, TcpStream>)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the handle; false when stopping (the caller then leaves).
    fn register(&self, di: usize, socket: TcpStream) -> bool {
        let mut s = self.lock();
        if s.0 {
            let _ = socket.shutdown(Shutdown::Both);
            return false;
        }
        s.1.insert(di, socket);
        true
    }

    fn unregister(&self, di: usize) {
        self.lock().1.remove(&di);
    }

    fn stopping(&self) -> bool {
        self.lock().0
    }

    fn stop(&self) {
        let mut s = self.lock();
        s.0 = true;
        for (_, socket) in s.1.drain() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

impl Push {
    /// Starts one thread per target.
    pub(crate) fn start(targets: Vec<Target>, ctx: Arc<Context>) -> std::io::Result<Push> {
        static INSTANCE: AtomicU64 = AtomicU64::new(0);
        let instance = INSTANCE.fetch_add(1, Ordering::Relaxed);
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
        let mut push = Push {
            threads: Vec::new(),
            stop: Arc::default(),
            stop_tx: Some(stop_tx),
        };
        for t in targets {
            let (ctx, stop, stop_rx) = (ctx.clone(), push.stop.clone(), stop_rx.clone());
            let src = format!("smartdev-{}-{instance}-{}", std::process::id(), t.id);
            let builder = std::thread::Builder::new()
                .name(format!("sd-push-{}", t.id))
                .stack_size(256 * 1024);
            match crate::log_scope::spawn(builder, move || run(&t, &src, &ctx, &stop, &stop_rx)) {
                Ok(h) => push.threads.push(h),
                Err(e) => {
                    push.stop();
                    return Err(e);
                }
            }
        }
        Ok(push)
    }

    /// Ends every push thread (connections shut down, back-off waits cut short) and joins them.
    pub(crate) fn stop(&mut self) {
        self.stop.stop();
        drop(self.stop_tx.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn run(t: &Target, src: &str, ctx: &Context, stop: &Stop, stop_rx: &Receiver<()>) {
    let mut failures = 0u32;
    let jitter = RandomState::new();
    loop {
        let mut established = false;
        let r = session(t, src, ctx, stop, &mut established);
        if stop.stopping() {
            return;
        }
        if established {
            failures = 0;
        }
        let wait = backoff(failures, &jitter);
        failures = failures.saturating_add(1);
        match r {
            Err(e) if established || failures == 1 => log::info!(
                "device {}: push channel down ({e}); reconnecting in {:.1} s, HTTP meanwhile",
                t.label,
                wait.as_secs_f64()
            ),
            Err(e) => log::debug!("device {}: push channel: {e}", t.label),
            Ok(()) => {}
        }
        match stop_rx.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// The wait before reconnect attempt `failures` + 1: 1 s doubling up to 5 min, plus up to a quarter more at
/// random (so devices dropped together do not reconnect in step).
fn backoff(failures: u32, jitter: &RandomState) -> Duration {
    let base = BACKOFF_FIRST
        .saturating_mul(1u32 << failures.min(16))
        .min(BACKOFF_CAP);
    let mut h = jitter.build_hasher();
    h.write_u32(failures);
    let quarter = base.as_millis() as u64 / 4;
    base + Duration::from_millis(h.finish() % quarter.max(1))
}

/// One connection from connect to its end; `established` is set once it subscribed.
fn session(
    t: &Target,
    src: &str,
    ctx: &Context,
    stop: &Stop,
    established: &mut bool,
) -> Result<(), String> {
    let addr = (t.host.trim_matches(['[', ']']), t.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", t.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", t.host))?;
    let host_header = format!("{}:{}", crate::hostname::url_host(&t.host), t.port);
    let rt = ctx.response_timeout;
    let timeouts = Timeouts {
        connect: rt,
        io: rt,
    };
    let mut sock = RpcSocket::connect(addr, &host_header, src, t.password.as_deref(), timeouts, rt)
        .map_err(|e| e.to_string())?;
    let handle = sock
        .connection()
        .shutdown_handle()
        .map_err(|e| e.to_string())?;
    if !stop.register(t.di, handle) {
        return Ok(());
    }
    let r = subscribed(t, ctx, stop, &mut sock, established, addr.ip());
    stop.unregister(t.di);
    if r.is_ok() {
        sock.close();
    }
    r
}

fn subscribed(
    t: &Target,
    ctx: &Context,
    stop: &Stop,
    sock: &mut RpcSocket,
    established: &mut bool,
    source: IpAddr,
) -> Result<(), String> {
    // The first request with our `src` subscribes; authenticated when the device has a password.
    sock.call("Shelly.GetStatus", None)
        .map_err(|e| format!("subscribing failed: {e}"))?;
    *established = true;
    log::debug!("device {}: push channel connected", t.label);
    // Whatever changed while we were not listening: the worker re-reads the whole status.
    ctx.shared.post(t.di, None, None, true);
    let pong_wait = ctx.response_timeout * 2;
    let mut last_traffic = Instant::now();
    let mut ping_sent: Option<Instant> = None;
    loop {
        if stop.stopping() {
            return Ok(());
        }
        let pong = sock.connection().last_pong();
        let deadline = match heartbeat(Instant::now(), last_traffic, ping_sent, pong, pong_wait) {
            Beat::Wait(deadline) => deadline,
            _ => Instant::now(),
        };
        let got = sock
            .next_notification(deadline)
            .map_err(|e| e.to_string())?;
        let now = Instant::now();
        if let Some(n) = got {
            last_traffic = now;
            ping_sent = None;
            on_notification(t, ctx, n, source);
            continue;
        }
        let pong = sock.connection().last_pong();
        match heartbeat(now, last_traffic, ping_sent, pong, pong_wait) {
            Beat::Wait(_) => {}
            Beat::Alive => {
                ping_sent = None;
                last_traffic = now;
            }
            Beat::Ping => {
                sock.ping().map_err(|e| e.to_string())?;
                ping_sent = Some(now);
            }
            Beat::Dead => {
                return Err(format!(
                    "no pong within {:.1} s of a ping",
                    pong_wait.as_secs_f64()
                ));
            }
        }
    }
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

/// The heartbeat rule: a ping after [`PING_IDLE`] without traffic, dead when its pong has not come within
/// `pong_wait`.
fn heartbeat(
    now: Instant,
    last_traffic: Instant,
    ping_sent: Option<Instant>,
    last_pong: Option<Instant>,
    pong_wait: Duration,
) -> Beat {
    match ping_sent {
        Some(at) if last_pong.is_some_and(|p| p >= at) => Beat::Alive,
        Some(at) if now >= at + pong_wait => Beat::Dead,
        Some(at) => Beat::Wait(at + pong_wait),
        None if now >= last_traffic + PING_IDLE => Beat::Ping,
        None => Beat::Wait(last_traffic + PING_IDLE),
    }
}

/// `switch:0` → (`switch`, 0).
fn split_key(key: &str) -> Option<(&str, usize)> {
    let (kind, n) = key.split_once(':')?;
    Some((kind, n.parse().ok()?))
}

fn on_notification(t: &Target, ctx: &Context, n: Notification, source: IpAddr) {
    match n {
        Notification::Status { components, .. } => on_status(t, ctx, &components),
        Notification::FullStatus { status, .. } => on_status(t, ctx, &status),
        Notification::Event { events, .. } => {
            for e in events {
                on_event(t, ctx, e, source);
            }
        }
    }
}

/// Implied output/input states go to the worker; anything else (power, covers, sensors) asks for a read.
fn on_status(t: &Target, ctx: &Context, components: &Map<String, Value>) {
    let snap = worker::snapshot(&ctx.shared.slots[t.di]);
    let mut read = false;
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
            ctx.shared.post(t.di, Some((kind, index)), Some(on), false);
        }
        read |= fields
            .keys()
            .any(|k| !matches!(k.as_str(), "id" | "source") && k != field);
    }
    if read {
        ctx.shared.post(t.di, None, None, true);
    }
}

/// A `NotifyEvent` event as the webhook the device would have called: same event name, object type and IDs.
fn on_event(t: &Target, ctx: &Context, e: Event, source: IpAddr) {
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
    let Some(names) = ctx.shared.resolve(&hook, source, EventChannel::Push) else {
        return;
    };
    ctx.queue.push(routing::event(
        hook,
        names,
        source.to_string(),
        EventChannel::Push,
    ));
    if let Some(w) = &ctx.wake {
        w.set();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_pings_when_idle_and_drops_without_a_pong() {
        let t0 = Instant::now();
        let wait = Duration::from_millis(800);
        assert_eq!(
            heartbeat(t0, t0, None, None, wait),
            Beat::Wait(t0 + PING_IDLE)
        );
        let idle = t0 + PING_IDLE;
        assert_eq!(heartbeat(idle, t0, None, None, wait), Beat::Ping);
        assert_eq!(
            heartbeat(idle, t0, Some(idle), None, wait),
            Beat::Wait(idle + wait)
        );
        // A pong from before the ping does not count.
        assert_eq!(
            heartbeat(idle + wait, t0, Some(idle), Some(t0), wait),
            Beat::Dead
        );
        let pong = idle + Duration::from_millis(5);
        assert_eq!(
            heartbeat(idle + wait, t0, Some(idle), Some(pong), wait),
            Beat::Alive
        );
    }

    #[test]
    fn backoff_doubles_to_its_cap_with_up_to_a_quarter_of_jitter() {
        let j = RandomState::new();
        for (failures, base) in [(0, 1), (1, 2), (3, 8), (9, 300), (40, 300)] {
            let w = backoff(failures, &j);
            let base = Duration::from_secs(base);
            assert!(
                w >= base && w < base + base / 4 + Duration::from_millis(1),
                "{failures}: {w:?}"
            );
        }
    }
}
