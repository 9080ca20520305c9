//! CoIoT for emulated Gen1 devices (reference `transports-and-apis.md` §4): `GET /cit/d` (the description of
//! the sensor ids, CoIoT v2 numbering) and status datagrams as firmware sends them (NON, code 0.30, `cit/s`,
//! options 3332/3412/3420, `{"G":[...]}`), on every change of a state or a power reading and every 15 s of the
//! emulator clock, unicast to the peer set with `/settings?coiot_peer=ip:port` (applied at once; real firmware
//! waits for its restart), or multicast to 224.0.1.187 when the peer is empty and the emulator was asked to
//! ([`super::DeviceSpec::coiot_multicast`]: off by default, so nothing leaves the host unasked). An emulator
//! listening on loopback multicasts through the loopback interface only.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use super::coiot_out::PORT;
use super::device::Device;
use super::server::{Request, Response};
use super::state::{DeviceState, round};
use crate::coiot::message::encode_status;

/// Seconds between periodic statuses (firmware's default `update_period`).
const PERIOD: Duration = Duration::from_secs(15);
/// How often the periodic thread looks at the clock (a manual clock wakes nobody).
const LOOK: Duration = Duration::from_millis(10);

/// With the state lock held after every access (the `Notify` hook in `mod.rs`): a Gen1 device sends when what
/// the status says changed.
pub(crate) fn on_state(dev: &Device, s: &DeviceState) {
    if dev.ident.family != super::family::Family::Gen1 {
        return;
    }
    let out = &dev.coiot;
    if out.destination().is_none() {
        return;
    }
    let (g, said) = values(dev, s);
    if out.changed(&said) {
        send(dev, g, said);
    }
}

/// The periodic status, when due.
fn tick(dev: &Device) {
    let out = &dev.coiot;
    if out.destination().is_none() || !out.due(dev.clock.instant(), PERIOD) {
        return;
    }
    let (g, said) = {
        let s = dev.state();
        values(dev, &s)
    };
    // Releasing the state may have sent a change just now.
    if out.due(dev.clock.instant(), PERIOD) {
        send(dev, g, said);
    }
}

fn send(dev: &Device, g: Vec<Value>, said: String) {
    let out = &dev.coiot;
    let Some(to) = out.destination() else {
        return;
    };
    let (message_id, serial) = out.record(said, dev.clock.instant());
    let tag = format!("{}#{}#2", dev.ident.reported, dev.mac());
    let payload = json!({ "G": g }).to_string();
    // Validity 38 s (tenths of a second: the lowest bit is 0), beyond two missed periods.
    let datagram = encode_status(message_id, &tag, 380, serial, payload.as_bytes());
    out.send(dev.net.local().ip(), &datagram, to);
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
        dev.coiot.set_peer(parsed);
    }
    let peer = dev.coiot.peer().map(|p| p.to_string()).unwrap_or_default();
    Ok(json!({"enabled": true, "update_period": PERIOD.as_secs(), "peer": peer}))
}

/// The `G` values, and what they say apart from energy (which grows with time alone).
pub(crate) fn values(dev: &Device, s: &DeviceState) -> (Vec<Value>, String) {
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
                        tick(d);
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
