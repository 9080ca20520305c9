//! CoIoT for emulated Gen1 devices (reference `transports-and-apis.md` §4): `GET /cit/d` (the description of
//! the sensor ids, CoIoT v2 numbering) and status datagrams as firmware sends them (NON, code 0.30, `cit/s`,
//! options 3332/3412/3420, `{"G":[...]}`), on every change of a state or a power reading and every 15 s of the
//! emulator clock, unicast to the peer set with `/settings?coiot_peer=ip:port` (applied at once; real firmware
//! waits for its restart), or multicast to 224.0.1.187 when the peer is empty and the emulator was asked to
//! ([`super::DeviceSpec::coiot_multicast`]: off by default, so nothing leaves the host unasked). An emulator
//! listening on loopback multicasts through the loopback interface only.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::device::{Device, Notify};
use super::server::{Request, Response};
use super::state::{DeviceState, round};
use crate::coiot::message::encode_status;

/// The CoIoT port and group devices multicast to.
const PORT: u16 = 5683;
const GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 1, 187);
/// Seconds between periodic statuses (firmware's default `update_period`).
const PERIOD: Duration = Duration::from_secs(15);
/// How often the periodic thread looks at the clock (a manual clock wakes nobody).
const LOOK: Duration = Duration::from_millis(10);

/// The hook of Gen1 devices (`Device::new`): WebSocket clients as before, then CoIoT.
pub(crate) const NOTIFY: Notify = Notify {
    state: |dev, s| {
        dev.ws.on_state(dev, s);
        dev.coiot.on_state(dev, s);
    },
    event: |dev, event, cid| dev.ws.on_event(dev, event, cid),
};

/// One device's CoIoT sender.
#[derive(Default)]
pub(crate) struct CoiotOut {
    /// Multicast when no peer is set ([`super::DeviceSpec::coiot_multicast`]).
    multicast: bool,
    inner: Mutex<Sending>,
    message_id: AtomicU16,
    socket: OnceLock<Option<UdpSocket>>,
}

#[derive(Default)]
struct Sending {
    /// `/settings?coiot_peer=`: `None` when empty (or `mcast`).
    peer: Option<SocketAddr>,
    /// The last status sent: what it said (energy left out: it grows with time alone), when (emulator
    /// clock), its serial.
    said: Option<String>,
    sent: Option<Instant>,
    serial: u16,
}

impl CoiotOut {
    /// `multicast`: [`super::DeviceSpec::coiot_multicast`].
    pub(crate) fn new(multicast: bool) -> CoiotOut {
        CoiotOut {
            multicast,
            ..CoiotOut::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sending> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where statuses go now.
    fn destination(&self) -> Option<SocketAddr> {
        self.lock()
            .peer
            .or(self.multicast.then_some(SocketAddr::from((GROUP, PORT))))
    }

    /// With the state lock held after every access: sends when what the status says changed.
    pub(crate) fn on_state(&self, dev: &Device, s: &DeviceState) {
        if self.destination().is_none() {
            return;
        }
        let (g, said) = values(dev, s);
        let changed = self.lock().said.as_deref() != Some(said.as_str());
        if changed {
            self.send(dev, g, said);
        }
    }

    /// The periodic status, when due.
    fn tick(&self, dev: &Device) {
        let due = self
            .lock()
            .sent
            .is_none_or(|at| dev.clock.instant().saturating_duration_since(at) >= PERIOD);
        if due && self.destination().is_some() {
            let (g, said) = {
                let s = dev.state();
                values(dev, &s)
            };
            // Releasing the state may have sent a change just now.
            let now = dev.clock.instant();
            if self
                .lock()
                .sent
                .is_some_and(|at| now.saturating_duration_since(at) < PERIOD)
            {
                return;
            }
            self.send(dev, g, said);
        }
    }

    fn send(&self, dev: &Device, g: Vec<Value>, said: String) {
        let Some(to) = self.destination() else {
            return;
        };
        let serial = {
            let mut w = self.lock();
            if w.said.as_deref() != Some(said.as_str()) {
                w.serial = w.serial.wrapping_add(1);
            }
            w.said = Some(said);
            w.sent = Some(dev.clock.instant());
            w.serial
        };
        let tag = format!("{}#{}#2", dev.ident.reported, dev.mac());
        let payload = json!({ "G": g }).to_string();
        let id = self.message_id.fetch_add(1, Ordering::Relaxed);
        // Validity 38 s (tenths of a second: the lowest bit is 0), beyond two missed periods.
        let datagram = encode_status(id, &tag, 380, serial, payload.as_bytes());
        if let Some(socket) = self.socket(dev) {
            let _ = socket.send_to(&datagram, to);
        }
    }

    /// Bound at the device's own address: its datagrams come from where its HTTP is.
    fn socket(&self, dev: &Device) -> Option<&UdpSocket> {
        self.socket
            .get_or_init(|| {
                let ip = match dev.net.local().ip() {
                    IpAddr::V4(v4) => v4,
                    IpAddr::V6(_) => Ipv4Addr::LOCALHOST,
                };
                let s = UdpSocket::bind((ip, 0)).ok()?;
                if ip.is_loopback() {
                    socket2::SockRef::from(&s).set_multicast_if_v4(&ip).ok()?;
                }
                let _ = s.set_multicast_loop_v4(true);
                Some(s)
            })
            .as_ref()
    }
}

/// `/settings?coiot_peer=ip:port` (empty or `mcast`: multicast); the `coiot` object of `/settings`. An
/// unusable peer is a 400, as firmware refuses bad values.
pub(crate) fn settings(dev: &Device, req: &Request) -> Result<Value, Response> {
    if let Some(peer) = req.param("coiot_peer") {
        let parsed = match peer.as_str() {
            "" | "mcast" => None,
            p => Some(
                p.parse::<SocketAddr>()
                    .or_else(|_| p.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, PORT)))
                    .map_err(|_| Response::text(400, "Bad coiot_peer"))?,
            ),
        };
        dev.coiot.lock().peer = parsed;
        // A new peer hears the current status at once.
        dev.coiot.lock().sent = None;
    }
    let peer = dev
        .coiot
        .lock()
        .peer
        .map(|p| p.to_string())
        .unwrap_or_default();
    Ok(json!({"enabled": true, "update_period": PERIOD.as_secs(), "peer": peer}))
}

/// The `G` values, and what they say apart from energy (which grows with time alone).
fn values(dev: &Device, s: &DeviceState) -> (Vec<Value>, String) {
    let mut g = Vec::new();
    let mut energy = Vec::new();
    for (i, on) in s.outputs.iter().enumerate() {
        g.push(json!([0, 1101 + 100 * i, u8::from(*on)]));
    }
    for (i, on) in s.inputs.iter().enumerate() {
        g.push(json!([0, 2101 + 100 * i, u8::from(*on)]));
    }
    let emeters = dev.ident.info.meter_source() == crate::models::MeterSource::Gen1Emeters;
    for i in 0..s.meters.len() {
        let v = s.meter(i);
        if emeters {
            g.push(json!([0, 4105 + 100 * i, round(v.power, 2)]));
            energy.push(json!([0, 4106 + 100 * i, round(v.energy_wh, 1)]));
        } else {
            g.push(json!([0, 4101 + 100 * i, round(v.power, 2)]));
            energy.push(json!([
                0,
                4103 + 100 * i,
                (v.energy_wh * 60.0).round() as i64
            ]));
        }
    }
    if s.layout.temperature {
        g.push(json!([0, 3104, round(s.temperature, 1)]));
    }
    let said = Value::Array(g.clone()).to_string();
    g.extend(energy);
    (g, said)
}

/// `GET /cit/d`: blocks `relay_N`/`light_N`, `emeter_N`, `device`; the sensors [`values`] sends.
pub(crate) fn description(dev: &Device) -> Value {
    let s = dev.state();
    let emeters = dev.ident.info.meter_source() == crate::models::MeterSource::Gen1Emeters;
    let out_name = if s.layout.lights { "light" } else { "relay" };
    let mut blk = Vec::new();
    let mut sen = Vec::new();
    let channels = s.outputs.len().max(s.inputs.len()).max(s.meters.len());
    for i in 0..channels {
        let block = i + 1;
        let name = if emeters { "emeter" } else { out_name };
        blk.push(json!({"I": block, "D": format!("{name}_{i}")}));
        if i < s.outputs.len() {
            sen.push(json!({"I": 1101 + 100 * i, "T": "S", "D": "output", "R": "0/1", "L": block}));
        }
        if i < s.inputs.len() {
            sen.push(json!({"I": 2101 + 100 * i, "T": "S", "D": "input", "R": "0/1", "L": block}));
        }
        if i < s.meters.len() {
            let (p, e, unit) = if emeters {
                (4105 + 100 * i, 4106 + 100 * i, "Wh")
            } else {
                (4101 + 100 * i, 4103 + 100 * i, "Wmin")
            };
            sen.push(json!({"I": p, "T": "P", "D": "power", "U": "W", "R": ["0/3500", "-1"], "L": block}));
            sen.push(
                json!({"I": e, "T": "E", "D": "energy", "U": unit, "R": ["U32", "-1"], "L": block}),
            );
        }
    }
    let device = channels + 1;
    blk.push(json!({"I": device, "D": "device"}));
    if s.layout.temperature {
        sen.push(json!({"I": 3104, "T": "T", "D": "deviceTemp", "U": "C", "R": ["-40/300", "999"], "L": device}));
    }
    json!({"blk": blk, "sen": sen})
}

/// `sd-emu-coiot`: the periodic statuses of every Gen1 device, on the emulator clock.
pub(crate) struct Periodic {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Periodic {
    /// `None` when no device is Gen1.
    pub(crate) fn start(devices: Vec<Arc<Device>>) -> std::io::Result<Option<Periodic>> {
        if devices.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sd-emu-coiot".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                while !flag.load(Ordering::SeqCst) {
                    for d in &devices {
                        d.coiot.tick(d);
                    }
                    std::thread::sleep(LOOK);
                }
            })?;
        Ok(Some(Periodic { stop, thread }))
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}
