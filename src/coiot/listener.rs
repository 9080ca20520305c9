//! `sd-coiot`: one UDP socket (port `CoIoTPort`, default 5683) that receives Gen1 CoIoT statuses, unicast
//! (the device's peer setting pointed at us) and multicast (group 224.0.1.187, joined on the interfaces that
//! lead to configured Gen1 devices). One thread of its own rather than a slot on the push poller: the socket
//! is one, the work per datagram is bounded (2 KiB parsed at most), and a blocking receive needs no readiness
//! loop; the push poller stays Gen2+ only.
//!
//! Every datagram is hostile. In order: the sender's budget (a token bucket per source address, like
//! webhook-triggered reads; beyond it datagrams are dropped unparsed), the strict parse, attribution (the
//! device id of option 3332 must be a configured Gen1 device's MAC *and* the sender that device's address),
//! the device's own budget (what its statuses make us do), then the `G` values through its description.
//! What a status says takes the webhook's road: states and measured values to the worker's `HookInbox` (one wake-up, no read: polling at `RefreshInterval` stays
//! the source of truth), input and output changes the components ask events for queued once (`Pushed`,
//! `Dedupe` with webhooks) as `Channel: coiot`, then the `WakeFlag`. Refusals are logged once per source (at
//! most [`MAX_SOURCES`] remembered).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Map;

use super::Link;
use super::description::Description;
use super::message::{self, MAX_DATAGRAM};
use crate::actor::push::{Context, queue};
use crate::actor::worker;
use crate::objects::ComponentKind;
use crate::webhook::read_budget::TokenBucket;
use crate::webhook::request::Hook;
use crate::webhook::routing::Origin;

/// The CoIoT multicast group.
pub(crate) const GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 1, 187);
/// Datagrams per second one sender address may have parsed, after a burst of [`SOURCE_BURST`]: bounds the
/// work anyone can cause (a parse costs microseconds: 1,000 a second is under 1 % of a core). Generous, so
/// that hundreds of emulated devices behind one address (loopback) still fit.
pub(crate) const SOURCE_RATE: f64 = 1000.0;
pub(crate) const SOURCE_BURST: f64 = 1000.0;
/// Statuses per second one device may have applied, after a burst of [`DEVICE_BURST`]. A real device sends
/// one per change and one every 15 s (twice when heard by multicast and unicast).
pub(crate) const DEVICE_RATE: f64 = 10.0;
pub(crate) const DEVICE_BURST: f64 = 20.0;
/// Sources remembered (budgets, logged refusals); beyond this the map starts over.
const MAX_SOURCES: usize = 4096;

/// A configured Gen1 device the listener may attribute statuses to.
pub(crate) struct Target {
    /// Configuration index.
    pub(crate) di: usize,
    /// The device's configured ID.
    pub(crate) id: i64,
    /// Where its description is.
    pub(crate) link: Arc<Link>,
    /// Addresses of its configured host name (resolved at open; an IP address needs none).
    pub(crate) resolved: Vec<IpAddr>,
}

/// The running listener; [`Listener::stop`] ends and joins it.
pub(crate) struct Listener {
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    local: SocketAddr,
}

/// Binds the listener's socket on `port` and joins the multicast group on the interfaces of `towards` (the
/// addresses this machine uses to reach Gen1 devices). A port that is taken is one warning, not an error:
/// the devices are still polled.
pub(crate) fn bind(port: u16, towards: &[IpAddr]) -> Option<UdpSocket> {
    let socket = match UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)) {
        Ok(s) => s,
        Err(e) => {
            log::warn!(
                "CoIoT: cannot listen on UDP port {port} ({e}; another program, such as Home Assistant, may hold it): Gen1 devices are polled every RefreshInterval without CoIoT updates between. Set CoIoTPort to a free port (with CoIoTPeer: true), or CoIoT: false to turn this off"
            );
            return None;
        }
    };
    let mut joined = HashSet::new();
    for ip in towards {
        let IpAddr::V4(v4) = ip else { continue };
        if v4.is_loopback() || v4.is_unspecified() || !joined.insert(*v4) {
            continue;
        }
        if let Err(e) = socket.join_multicast_v4(&GROUP, v4) {
            log::info!(
                "CoIoT: cannot join the multicast group {GROUP} on the interface of {v4} ({e}); unicast still works"
            );
        }
    }
    // Room for a burst (every device's status after a power cut) while the thread is not scheduled; the
    // kernel caps it at its maximum.
    let _ = socket2::SockRef::from(&socket).set_recv_buffer_size(1 << 20);
    // A blocked receive looks at the stop flag this often even if the wake-up datagram is lost.
    let _ = socket.set_read_timeout(Some(Duration::from_millis(500)));
    Some(socket)
}

impl Listener {
    /// Starts `sd-coiot` on a socket from [`bind`].
    pub(crate) fn start(
        socket: UdpSocket,
        targets: Vec<Target>,
        ctx: Arc<Context>,
    ) -> std::io::Result<Listener> {
        let local = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let now = Instant::now();
        let mut state = State {
            devices: targets
                .iter()
                .map(|_| (TokenBucket::full(DEVICE_BURST, now), false))
                .collect(),
            targets,
            ctx,
            budgets: HashMap::new(),
            noted: HashSet::new(),
            index: HashMap::new(),
            indexed: None,
        };
        let flag = stop.clone();
        let builder = std::thread::Builder::new()
            .name("sd-coiot".into())
            .stack_size(256 * 1024);
        let thread = crate::log_scope::spawn(builder, move || {
            let mut buf = vec![0u8; MAX_DATAGRAM + 1];
            while !flag.load(Ordering::SeqCst) {
                match socket.recv_from(&mut buf) {
                    Ok((n, from)) if !flag.load(Ordering::SeqCst) => {
                        state.datagram(&buf[..n], from, Instant::now());
                    }
                    Ok(_) => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => {
                        log::debug!("CoIoT: receive failed: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })?;
        Ok(Listener {
            thread: Some(thread),
            stop,
            local,
        })
    }

    /// The address it listens on (its real port even when `CoIoTPort: 0`).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.local
    }

    /// Ends the thread (an empty datagram to itself wakes its receive) and joins it.
    pub(crate) fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(s) = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)) {
            let _ = s.send_to(&[], (Ipv4Addr::LOCALHOST, self.local.port()));
        }
        let _ = thread.join();
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

struct State {
    targets: Vec<Target>,
    ctx: Arc<Context>,
    /// Per source: its budget, and whether its being held to it was logged.
    budgets: HashMap<IpAddr, (TokenBucket, bool)>,
    /// Sources whose refused datagrams were logged.
    noted: HashSet<IpAddr>,
    /// Per target: its budget of applied statuses, and whether its being held to it was logged.
    devices: Vec<(TokenBucket, bool)>,
    /// Targets by the last 6 hex digits of their MAC, and when that was built.
    index: HashMap<String, Vec<usize>>,
    indexed: Option<Instant>,
}

/// `AA:BB:CC:DD:EE:FF` → `AABBCCDDEEFF`.
fn mac_hex(mac: &str) -> String {
    mac.chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

impl State {
    fn datagram(&mut self, d: &[u8], from: SocketAddr, now: Instant) {
        let source = from.ip();
        if !self.allow(source, now) {
            return;
        }
        if let Err(why) = self.handle(d, source, now) {
            if self.noted.len() >= MAX_SOURCES {
                self.noted.clear();
            }
            if self.noted.insert(source) {
                log::info!(
                    "CoIoT: ignored a datagram from {source}: {why} (logged once per sender)"
                );
            }
        }
    }

    /// The sender's token bucket.
    fn allow(&mut self, source: IpAddr, now: Instant) -> bool {
        if self.budgets.len() >= MAX_SOURCES && !self.budgets.contains_key(&source) {
            self.budgets.clear();
        }
        let (bucket, warned) = self
            .budgets
            .entry(source)
            .or_insert((TokenBucket::full(SOURCE_BURST, now), false));
        if bucket.take(now, SOURCE_RATE, SOURCE_BURST) {
            return true;
        }
        if !std::mem::replace(warned, true) {
            log::info!(
                "CoIoT: {source} sends more than {SOURCE_RATE} datagrams per second: the rest are dropped unread (polling still reads its devices)"
            );
        }
        false
    }

    fn handle(&mut self, d: &[u8], source: IpAddr, now: Instant) -> Result<(), String> {
        let m = message::parse(d)?;
        if !m.is_status() {
            return Err(format!(
                "not a status (code {}.{:02}, path /{})",
                m.code >> 5,
                m.code & 0x1F,
                m.path.join("/")
            ));
        }
        let tag = m
            .device
            .ok_or("a status without a device id (option 3332)")?;
        let ti = self.target(tag.id, source, now).ok_or_else(|| {
            format!(
                "device id {} at {source} is no configured Gen1 device",
                tag.id
            )
        })?;
        let (bucket, warned) = &mut self.devices[ti];
        if !bucket.take(now, DEVICE_RATE, DEVICE_BURST) {
            if !std::mem::replace(warned, true) {
                let di = self.targets[ti].di;
                let label = worker::snapshot(&self.ctx.shared.slots[di]).label();
                log::info!(
                    "CoIoT: device {label} sends more than {DEVICE_RATE} statuses per second: the rest are dropped (polling still reads it)"
                );
            }
            return Ok(());
        }
        let t = &self.targets[ti];
        let readings = message::status_values(m.payload)?;
        let said = match t.link.description() {
            Some(d) => d.read(&readings),
            None if tag.revision == 2 => Description::v2_defaults().read(&readings),
            None => return Err("CoIoT v1 status before the device's description is known".into()),
        };
        self.apply(t, said, source);
        Ok(())
    }

    /// The configured Gen1 device with this device id (its MAC, or the MAC's last 6 hex digits) at `source`.
    /// Found through an index by the MAC's last 6 digits, rebuilt from the snapshots (a MAC may be learnt at
    /// a first contact) when an id is not in it, at most once a second: a flood of unknown ids costs a lookup
    /// each, not a scan of every device.
    fn target(&mut self, id: &str, source: IpAddr, now: Instant) -> Option<usize> {
        let key = id.get(id.len().saturating_sub(6)..)?.to_ascii_uppercase();
        if !self.index.contains_key(&key)
            && self
                .indexed
                .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1))
        {
            self.indexed = Some(now);
            self.index.clear();
            for (ti, t) in self.targets.iter().enumerate() {
                let snap = worker::snapshot(&self.ctx.shared.slots[t.di]);
                if let Some(hex) = snap.mac_address.as_deref().map(mac_hex) {
                    let last = hex[hex.len().saturating_sub(6)..].to_string();
                    self.index.entry(last).or_default().push(ti);
                }
            }
        }
        self.index.get(&key)?.iter().copied().find(|&ti| {
            let t = &self.targets[ti];
            let snap = worker::snapshot(&self.ctx.shared.slots[t.di]);
            let Some(hex) = snap.mac_address.as_deref().map(mac_hex) else {
                return false;
            };
            let same_id = hex.eq_ignore_ascii_case(id)
                || (id.len() == 6 && hex.len() == 12 && hex[6..].eq_ignore_ascii_case(id));
            let at = snap
                .address
                .as_deref()
                .and_then(|a| a.parse::<IpAddr>().ok());
            same_id && (at == Some(source) || (at.is_none() && t.resolved.contains(&source)))
        })
    }

    /// Events first (compared with what was known before the states are posted), then the states.
    fn apply(&self, t: &Target, said: super::description::Said, source: IpAddr) {
        let shared = &self.ctx.shared;
        let snap = worker::snapshot(&shared.slots[t.di]);
        let mut events = Vec::new();
        let mut states = Vec::new();
        let outputs = said.outputs.iter().map(|&(n, on)| {
            let c = snap.outputs.get(n).map(|c| (c.id, c.state));
            (
                ComponentKind::Output,
                "output",
                n,
                on,
                c,
                ("switch.on", "switch.off"),
            )
        });
        let inputs = said.inputs.iter().map(|&(n, on)| {
            let c = snap.inputs.get(n).map(|c| (c.id, c.state));
            let names = ("input.toggle_on", "input.toggle_off");
            (ComponentKind::Input, "input", n, on, c, names)
        });
        for (kind, object, n, on, component, names) in outputs.chain(inputs) {
            // Only configured components: a device naming ever new ones must not grow what we keep.
            let Some((id, known)) = component else {
                continue;
            };
            states.push((kind, n, on));
            let event = shared
                .pushed(t.di)
                .and_then(|p| p.observe(kind, n, Some(on), known, false, names));
            if let Some(event) = event {
                events.push(Hook {
                    event: event.to_string(),
                    device_id: Some(t.id),
                    object_type: Some(object.to_string()),
                    component_id: Some(id),
                    params: Map::new(),
                });
            }
        }
        let measures = said.measures;
        if !states.is_empty() || !measures.is_empty() {
            let inbox = &shared.hook_inboxes[t.di];
            for (kind, n, on) in states {
                inbox.stash(kind, n, Some(on), false);
            }
            inbox.stash_measures(&measures);
            // One wake-up for the whole status (none while one is in flight), no read.
            shared.post(t.di, None, None, false);
        }
        for hook in events {
            queue(&self.ctx, hook, Origin::Coiot, source);
        }
    }
}
