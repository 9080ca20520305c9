//! One emulated device: who it is (id, MAC, model), its state, its port's network controls, and the
//! operations the API and the admin endpoint perform on it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

use super::auth::{self, Auth};
use super::clock::EmuClock;
pub(crate) use super::family::Family;
use super::faults::NetControl;
use super::firmware::Firmware;
use super::layout::{self, Layout, MeterFields};
use super::mqtt_link::{self, MqttLink};
use super::sensors;
use super::server;
use super::state::{DeviceState, Extras, Source};
use super::ws_hub::WsHub;
use super::{DeviceSpec, Fault, MeterReading, webhooks};
use crate::models::{
    self, MeterSource, ModelInfo, ModelLibrary, OutputKind, Protocol, SensorQuantity, Shape,
};

/// How long `set_fault` waits for the port to actually close or reopen.
const APPLY_TIMEOUT: Duration = Duration::from_secs(3);

/// What a device reports about itself; fixed for its lifetime.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    pub family: Family,
    /// The library entry (synthetic for Tasmota).
    pub info: ModelInfo,
    pub id: String,
    /// 12 upper-case hex digits.
    pub mac: String,
    /// `type` (Gen1) or `model` (Gen2+) in `/shelly`.
    pub reported: String,
    /// Display name (`sys.device.name`, Gen1 `name`): `None` (null), as a device fresh from the factory
    /// reports, so no two instances share one.
    pub name: Option<String>,
    pub namespaces: Namespaces,
    /// Optional meter fields of `switch:N`.
    pub meter_fields: MeterFields,
}

/// Which RPC namespaces a model has in any of its profiles: a method of a known namespace on an absent component
/// answers "not found" (-105), one of an unknown namespace "method not found".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Namespaces {
    pub switch: bool,
    /// `Light`, `CCT`, `RGB`, `RGBW`.
    pub light: bool,
    pub cct: bool,
    pub rgb: bool,
    pub rgbw: bool,
    pub cover: bool,
    pub em: bool,
    pub em1: bool,
    pub pm1: bool,
}

impl Namespaces {
    fn of(info: &ModelInfo) -> Self {
        let mut shapes = vec![info.default_shape()];
        shapes.extend(info.profiles.keys().filter_map(|p| info.shape(p)));
        let light = info.output_kind == OutputKind::Light;
        let any = |f: &dyn Fn(&Shape) -> bool| shapes.iter().any(f);
        Namespaces {
            switch: !light && any(&|s| s.outputs > 0),
            light: any(&|s| s.outputs > 0 && s.light.is_some_and(|l| l.rpc_component() == "light")),
            cct: any(&|s| s.outputs > 0 && s.light.is_some_and(|l| l.rpc_component() == "cct")),
            rgb: any(&|s| s.outputs > 0 && s.light.is_some_and(|l| l.rpc_component() == "rgb")),
            rgbw: any(&|s| s.outputs > 0 && s.light.is_some_and(|l| l.rpc_component() == "rgbw")),
            cover: any(&|s| s.covers > 0),
            em: any(&|s| s.meter_source == MeterSource::Em),
            em1: any(&|s| s.meter_source == MeterSource::Em1),
            pm1: any(&|s| s.meter_source == MeterSource::Pm1),
        }
    }
}

/// Longest cover travel time accepted.
const MAX_TRAVEL: Duration = Duration::from_secs(3600);

impl Identity {
    /// Resolves a spec against the library; errors name the problem.
    pub(crate) fn from_spec(
        index: usize,
        spec: &DeviceSpec,
        models: &ModelLibrary,
    ) -> Result<(Identity, Layout), String> {
        if spec.cover_travel.is_zero() || spec.cover_travel > MAX_TRAVEL {
            return Err(format!(
                "device {index} ({}): cover_travel must be between 1 ms and 1 h",
                spec.model
            ));
        }
        let (info, family, layout) = if models::is_tasmota(&spec.model) {
            if spec.reported_model.is_some() || spec.profile.is_some() {
                return Err(format!(
                    "device {index} ({}): reported_model and profile apply to Shelly models only",
                    spec.model
                ));
            }
            if spec.shutters > 16 {
                return Err(format!("device {index} (Tasmota): at most 16 shutters"));
            }
            let outputs = spec.outputs.unwrap_or((2 * spec.shutters).max(1));
            let meters = spec.meters.unwrap_or(outputs);
            if outputs > 32 || meters > 32 {
                return Err(format!(
                    "device {index} (Tasmota): at most 32 outputs and 32 meters"
                ));
            }
            if outputs < 2 * spec.shutters {
                return Err(format!(
                    "device {index} (Tasmota): {} shutter(s) need {} relays (two each), outputs is {outputs}",
                    spec.shutters,
                    2 * spec.shutters
                ));
            }
            let info = ModelInfo {
                model: models::TASMOTA.into(),
                name: "Tasmota".into(),
                url: None,
                generation: 0,
                protocol: Protocol::Tasmota,
                inputs: 0,
                outputs,
                meters,
                meters_separate: meters != outputs,
                temperature_monitoring: true,
                meter_source: None,
                reported_models: Vec::new(),
                covers: 0,
                output_kind: models::OutputKind::Switch,
                sensors: Vec::new(),
                profile: None,
                profiles: Default::default(),
                sleeps: false,
                light: None,
            };
            let mut layout = Layout::tasmota(outputs, meters, spec.shutters);
            layout.light = spec.tasmota_light;
            (info, Family::Tasmota, layout)
        } else {
            let Some(info) = models.get(&spec.model) else {
                let hint = models.suggest(&spec.model);
                let hint = if hint.is_empty() {
                    String::new()
                } else {
                    format!(" (did you mean {}?)", hint.join(", "))
                };
                return Err(format!("unknown model '{}'{hint}", spec.model));
            };
            if spec.outputs.is_some()
                || spec.meters.is_some()
                || spec.shutters > 0
                || spec.tasmota_light.is_some()
            {
                return Err(format!(
                    "device {index} ({}): outputs, meters, shutters and tasmota_light apply to Tasmota only; a Shelly model has \
                     fixed counts (choose a profile instead)",
                    spec.model
                ));
            }
            let family = if info.protocol == Protocol::Rest {
                Family::Gen1
            } else {
                Family::Rpc
            };
            let shape = info
                .shape_for(spec.profile.as_deref())
                .map_err(|e| format!("device {index}: {e}"))?;
            (info.clone(), family, Layout::shelly(info, &shape))
        };
        if family != Family::Rpc && spec.sleep.is_some() {
            return Err(format!(
                "device {index} ({}): sleep: only Gen2+ devices report through the outbound WebSocket",
                spec.model
            ));
        }
        if let Some(m) = &spec.mqtt {
            check_mqtt(index, spec, m)?;
        }
        if spec.sleep.is_some_and(|p| p.is_zero()) {
            return Err(format!(
                "device {index} ({}): sleep must be at least 1 second",
                spec.model
            ));
        }
        if family != Family::Rpc
            && let Some(v) = spec
                .sensors
                .iter()
                .find(|s| s.quantity == SensorQuantity::Voltage)
        {
            return Err(format!(
                "device {index} ({}): voltage sensor '{}': only Gen2+ add-ons have a voltmeter",
                spec.model, v.name
            ));
        }
        let slug: String = info
            .model
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase();
        let (id, mac) = match &spec.id {
            Some(id) => (id.clone(), mac_from_id(id)),
            None if spec.mac.is_some() => {
                let mac = spec_mac(index, spec)?.expect("checked");
                let id = match family {
                    Family::Gen1 => format!("{slug}-{mac}"),
                    Family::Rpc => format!("{slug}-{}", mac.to_ascii_lowercase()),
                    Family::Tasmota => format!("tasmota-{}", &mac[6..]),
                };
                (id, mac)
            }
            None => {
                let mac = fake_mac(&format!("{}#{index}", info.model));
                let id = match family {
                    Family::Gen1 => format!("{slug}-{mac}"),
                    Family::Rpc => format!("{slug}-{}", mac.to_ascii_lowercase()),
                    Family::Tasmota => format!("tasmota-{}", &mac[6..]),
                };
                (id, mac)
            }
        };
        // A MAC chosen by the test wins over the one derived from the id.
        let mac = spec_mac(index, spec)?.unwrap_or(mac);
        let reported = spec
            .reported_model
            .clone()
            .or_else(|| info.reported_models.first().cloned())
            .unwrap_or_else(|| info.model.clone());
        let name = None;
        auth::validate(index, spec, family)?;
        let namespaces = Namespaces::of(&info);
        let meter_fields = layout::switch_meter_fields(&info);
        Ok((
            Identity {
                family,
                info,
                id,
                mac,
                reported,
                name,
                namespaces,
                meter_fields,
            },
            layout,
        ))
    }

    /// Gen2+ `app` (the model id without the vendor prefix).
    pub(crate) fn app(&self) -> &str {
        self.info
            .model
            .strip_prefix("Shelly")
            .unwrap_or(&self.info.model)
    }
}

/// What the MQTT client cannot do or was given wrong, before anything starts.
fn check_mqtt(index: usize, spec: &DeviceSpec, m: &super::MqttSpec) -> Result<(), String> {
    let at = format!("device {index} ({})", spec.model);
    if spec.sleep.is_some() {
        return Err(format!("{at}: mqtt and sleep together are not emulated"));
    }
    m.host_port().map_err(|e| format!("{at}: {e}"))?;
    if let Some(t) = &m.topic {
        let forbidden = t.starts_with('$') || t.contains(['#', '+', '%', '?']);
        if !crate::mqtt::packet::valid_topic(t) || forbidden || t.len() > 300 {
            return Err(format!(
                "{at}: mqtt topic '{t}' cannot be a topic prefix: 1 to 300 characters, no #, +, %, ? and \
                 not starting with $"
            ));
        }
    }
    if m.keep_alive.as_secs() == 0 || m.keep_alive.as_secs() > 65_535 {
        return Err(format!(
            "{at}: mqtt keep_alive must be between 1 s and 65535 s"
        ));
    }
    if let Some(ca) = &m.ca_file {
        crate::driver::tls::load_ca(ca).map_err(|e| format!("{at}: mqtt_ca: {e}"))?;
    }
    Ok(())
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The spec's MAC as the device reports it (12 upper-case hex digits), if it chose one.
fn spec_mac(index: usize, spec: &DeviceSpec) -> Result<Option<String>, String> {
    let Some(text) = &spec.mac else {
        return Ok(None);
    };
    let mac = crate::mac::Mac::parse(text).map_err(|e| format!("device {index}: mac: {e}"))?;
    Ok(Some(bare(mac)))
}

/// `A8032AB12345`: how Shelly devices spell a MAC.
pub(crate) fn bare(mac: crate::mac::Mac) -> String {
    mac.bytes().iter().map(|b| format!("{b:02X}")).collect()
}

/// A stable, locally administered MAC (first byte `x2`) from any text.
fn fake_mac(seed: &str) -> String {
    let b = fnv(seed).to_be_bytes();
    let first = (b[2] & 0xF0) | 0x02;
    format!(
        "{first:02X}{:02X}{:02X}{:02X}{:02X}{:02X}",
        b[3], b[4], b[5], b[6], b[7]
    )
}

/// The hex digits after the id's last `-` end the MAC (all 12 when present); the rest comes from a hash.
fn mac_from_id(id: &str) -> String {
    let base = fake_mac(id);
    let tail = id.rsplit('-').next().unwrap_or("");
    if tail.is_empty() || tail.len() > 12 || !tail.chars().all(|c| c.is_ascii_hexdigit()) {
        return base;
    }
    let tail = tail.to_ascii_uppercase();
    format!("{}{tail}", &base[..12 - tail.len()])
}

/// How a device tells its WebSocket clients and its MQTT broker of a change or an event (`NOTIFY` in `mod.rs`):
/// handed in by `mod.rs`, so this module stays below the front ends that render what is sent.
#[derive(Clone, Copy)]
pub(crate) struct Notify {
    /// After every access to the state, with the state lock held; with whether the status may have changed
    /// other than in its energy counters and clocks (see `StateGuard`).
    pub state: fn(&Device, &DeviceState, bool),
    /// A fired event (webhook form `input.button_push`, component id).
    pub event: fn(&Device, &str, usize),
    /// An event of the device itself (`sys`: a firmware update's `ota_*` steps) and its fields; Gen2+ only.
    pub sys: fn(&Device, &str, Map<String, Value>),
}

/// A device: identity, state and port controls.
pub(crate) struct Device {
    pub index: usize,
    pub ident: Identity,
    pub net: Arc<NetControl>,
    pub auth: Auth,
    /// WebSocket RPC connections (Gen2+).
    pub ws: WsHub,
    /// The outbound WebSocket config and, for a sleeping device, its wake-ups (Gen2+).
    pub ws_out: super::ws_out::WsOut,
    /// Tells them of changes and events.
    notify: Notify,
    /// Gen1: where CoIoT statuses go (`coiot_out.rs`; rendered by `coiot.rs`).
    pub coiot: super::coiot_out::CoiotOut,
    state: Mutex<DeviceState>,
    /// Real, or moved by hand in tests.
    pub clock: EmuClock,
    /// The MAC it reports now (12 upper-case hex digits): `ident.mac` until a test swaps the device's
    /// identity with `Emulator::set_mac` (another device took the address).
    mac: Mutex<String>,
    /// The firmware it runs and where an update is.
    firmware: Mutex<Firmware>,
    /// Itself, for the thread an update's restart runs on.
    me: Weak<Device>,
    /// HTTPS: the certificate it serves ([`super::DeviceSpec::tls`]).
    pub tls: Option<super::cert::DeviceTls>,
    /// Reports Enhanced Security ([`super::DeviceSpec::enhanced_security`]).
    pub enhanced_security: bool,
    /// Its MQTT client's side ([`super::DeviceSpec::mqtt`]).
    pub mqtt: MqttLink,
    /// Its key-value store (Gen2+ `KVS.*`).
    pub kvs: super::kvs::Kvs,
    /// Its scripts (Gen2+ `Script.*`), stored, never run.
    pub scripts: super::scripts::Scripts,
    /// What the status shows from outside the state lock (the MQTT link's state, the scripts' calls), as
    /// the last access saw it.
    outside: AtomicU64,
}

impl Device {
    pub(crate) fn new(
        index: usize,
        ident: Identity,
        layout: Layout,
        spec: &DeviceSpec,
        clock: EmuClock,
        notify: Notify,
    ) -> Self {
        let auth = Auth::new(ident.family, spec, &ident.id, clock.clone());
        let extras = Extras {
            probes: spec.probes.clone(),
            sensors: spec.sensors.clone(),
            travel: spec.cover_travel.as_secs_f64(),
            record_period: super::history::record_period(&ident.info),
        };
        let mqtt = match ident.family {
            // Tasmota: `%topic%` is `tasmota_XXXXXX`, the client `DVES_XXXXXX` (`MqttClient`).
            Family::Tasmota => MqttLink::new(
                spec.mqtt.clone(),
                &ident.id.replace('-', "_"),
                &format!("DVES_{}", &ident.mac[6..]),
                mqtt_link::DEFAULT_TELE_PERIOD,
            ),
            Family::Gen1 => MqttLink::new(
                spec.mqtt.clone(),
                &ident.id,
                &ident.id,
                mqtt_link::GEN1_UPDATE_PERIOD,
            ),
            Family::Rpc => MqttLink::new(spec.mqtt.clone(), &ident.id, &ident.id, 0),
        };
        Device {
            index,
            net: Arc::new(NetControl::new()),
            auth,
            ws: WsHub::default(),
            ws_out: super::ws_out::WsOut::new(spec.sleep, clock.instant()),
            notify,
            coiot: super::coiot_out::CoiotOut::new(spec.coiot_multicast),
            state: Mutex::new(DeviceState::new(layout, &extras, clock.unix())),
            clock,
            mac: Mutex::new(ident.mac.clone()),
            firmware: Mutex::new(Firmware {
                // Which slot a device booted from depends on how many updates it has had: real fleets
                // report both, so instances differ, stably per id.
                slot: (fnv(&ident.id) & 1) as u8,
                ..Firmware::new(ident.family, &spec.firmware)
            }),
            kvs: super::kvs::Kvs::default(),
            scripts: super::scripts::Scripts::default(),
            outside: AtomicU64::new(0),
            me: Weak::new(),
            ident,
            tls: spec.tls.then(|| {
                super::cert::DeviceTls::new(&super::cert::CertSpec::default())
                    .expect("a self-signed certificate")
            }),
            enhanced_security: spec.enhanced_security,
            mqtt,
        }
    }

    /// The device with a reference to its own `Arc` (see [`Device::arc`]).
    pub(crate) fn with_self(mut self, me: Weak<Device>) -> Self {
        self.me = me;
        self
    }

    /// Its own `Arc`, when it was built with [`Device::with_self`].
    pub(crate) fn arc(&self) -> Option<Arc<Device>> {
        self.me.upgrade()
    }

    /// Its firmware now (version, offers, update stage).
    pub(crate) fn firmware(&self) -> MutexGuard<'_, Firmware> {
        self.firmware.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The port it listens on now (it changes when the device moves).
    pub(crate) fn port(&self) -> u16 {
        self.net.local().port()
    }

    /// Moves the device to `ip` (default: where it listens now) and `port` (0: a free one), as a DHCP lease
    /// change does: the old address refuses from then on, open connections (WebSocket included) end, and
    /// state, MAC and credentials stay. Returns the new address; an address the host does not have is an error.
    pub(crate) fn relocate(&self, ip: Option<IpAddr>, port: u16) -> Result<SocketAddr, String> {
        let old = self.net.local();
        let to = SocketAddr::new(ip.unwrap_or(old.ip()), port);
        if to == old {
            return Ok(old);
        }
        let listener = TcpListener::bind(to)
            .map_err(|e| format!("cannot move device {} to {to}: {e}", self.index))?;
        let new = listener
            .local_addr()
            .map_err(|e| format!("cannot move device {} to {to}: {e}", self.index))?;
        self.net.hand_over(listener);
        server::wake(old);
        self.ws.drop_all();
        if self.net.await_local(new, APPLY_TIMEOUT) {
            Ok(new)
        } else {
            Err(format!(
                "device {} did not move to {new} within {APPLY_TIMEOUT:?}",
                self.index
            ))
        }
    }

    /// The MAC it reports now, as Shelly devices spell it: `A8032AB12345`.
    pub(crate) fn mac(&self) -> String {
        self.mac.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The MAC it reports now, as Tasmota spells it: `A8:03:2A:B1:23:45`.
    pub(crate) fn mac_colon(&self) -> String {
        crate::mac::Mac::parse(&self.mac())
            .map(|m| m.to_string())
            .unwrap_or_default()
    }

    /// Reports `mac` from now on, as if another device had taken the address: the WebSocket connections end
    /// (they were the other device's).
    pub(crate) fn set_mac(&self, mac: crate::mac::Mac) {
        *self.mac.lock().unwrap_or_else(|e| e.into_inner()) = bare(mac);
        self.ws.drop_all();
    }

    /// The state, with energy accounted up to now. When the guard goes, WebSocket clients are told what
    /// changed (see `ws.rs`), so every change notifies, whoever made it.
    pub(crate) fn state(&self) -> StateGuard<'_> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Time alone changes what a status comparison sees (`notify.rs` leaves energy counters and clocks out)
        // only while a cover moves: its position, its motor's relays and meter.
        let moving = g.covers.iter().any(|c| c.finish_time().is_some());
        g.advance(self.clock.unix());
        let changed = self.outside_changed() | moving;
        StateGuard {
            dev: self,
            guard: Some(g),
            changed,
        }
    }

    /// Measures the status now, even when nothing was written: a newly subscribed client's changes are
    /// measured against it.
    pub(crate) fn measure_status(&self) {
        self.state().changed = true;
    }

    /// Whether what the status shows from outside the state lock changed since the last access.
    fn outside_changed(&self) -> bool {
        let now = (self.scripts.calls() << 1) | u64::from(self.mqtt.connected());
        self.outside.swap(now, Ordering::SeqCst) != now
    }

    pub(crate) fn check(&self, what: &str, i: usize, n: usize) -> Result<(), String> {
        if i < n {
            Ok(())
        } else {
            Err(format!(
                "device {} ({}) has no {what} {i}; it has {n}",
                self.index, self.ident.info.model
            ))
        }
    }

    pub(crate) fn set_fault(&self, fault: Fault) {
        if self.net.set_fault(fault) {
            server::wake(self.net.local());
        }
        match fault {
            Fault::Refuse => {
                // A device that refuses connections has lost its established ones too.
                self.ws.drop_all();
                self.net.await_listening(false, APPLY_TIMEOUT);
            }
            Fault::Flapping(_) => {}
            _ => {
                self.net.await_listening(true, APPLY_TIMEOUT);
            }
        }
    }

    pub(crate) fn set_fault_scope(&self, scope: Option<String>) {
        self.net.set_scope(scope);
    }

    pub(crate) fn set_latency(&self, latency: Duration) {
        self.net.set_latency(latency);
    }

    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.net.counts()
    }

    pub(crate) fn set_input(&self, i: usize, on: bool) -> Result<(), String> {
        let mut s = self.state();
        self.check("input", i, s.inputs.len())?;
        s.inputs[i] = on;
        Ok(())
    }

    pub(crate) fn set_output(&self, i: usize, on: bool) -> Result<(), String> {
        let mut s = self.state();
        self.check("output", i, s.outputs.len())?;
        s.set_output(i, on, Source::Local);
        Ok(())
    }

    pub(crate) fn output(&self, i: usize) -> Result<bool, String> {
        let s = self.state();
        self.check("output", i, s.outputs.len())?;
        Ok(s.outputs[i])
    }

    pub(crate) fn set_load(&self, i: usize, watts: f64) -> Result<(), String> {
        let mut s = self.state();
        self.check("meter", i, s.meters.len())?;
        finite("watts", watts)?;
        s.meters[i].set_load(watts);
        Ok(())
    }

    pub(crate) fn set_meter(&self, i: usize, r: &MeterReading) -> Result<(), String> {
        let mut s = self.state();
        self.check("meter", i, s.meters.len())?;
        for (n, v) in [
            ("power", r.power),
            ("voltage", r.voltage),
            ("current", r.current),
            ("pf", r.pf),
            ("energy_wh", r.energy_wh),
            ("returned_wh", r.returned_wh),
        ] {
            finite(n, v)?;
        }
        s.meters[i].set_reading(r);
        Ok(())
    }

    /// The meter recorded nothing in `[from, to)` (Unix seconds): it was off.
    pub(crate) fn set_history_gap(&self, from: i64, to: i64) -> Result<(), String> {
        let mut s = self.state();
        let model = &self.ident.info.model;
        let h = s.history.as_mut().ok_or(format!(
            "device {} ({model}) keeps no energy history",
            self.index
        ))?;
        h.remove(from, to);
        Ok(())
    }

    /// Records for the `secs` before now where it has none, at each meter's present load.
    pub(crate) fn backfill_history(&self, secs: i64) -> Result<(), String> {
        let mut s = self.state();
        let now = s.now() as i64;
        let period = s.history.as_ref().map_or(60, |h| h.period);
        let cells: Vec<super::history::Cell> = (0..s.meters.len())
            .map(|i| {
                let m = s.meter(i);
                let hours = period as f64 / 3600.0;
                super::history::Cell {
                    wh: m.power.max(0.0) * hours,
                    ret_wh: (-m.power).max(0.0) * hours,
                    v_min: m.voltage,
                    v_max: m.voltage,
                    i_min: m.current,
                    i_max: m.current,
                }
            })
            .collect();
        let model = &self.ident.info.model;
        let h = s.history.as_mut().ok_or(format!(
            "device {} ({model}) keeps no energy history",
            self.index
        ))?;
        h.backfill(now, secs, &cells);
        Ok(())
    }

    /// How long the meter keeps its records.
    pub(crate) fn set_history_retention(&self, secs: i64) -> Result<(), String> {
        let mut s = self.state();
        let now = s.now() as i64;
        let model = &self.ident.info.model;
        let h = s.history.as_mut().ok_or(format!(
            "device {} ({model}) keeps no energy history",
            self.index
        ))?;
        h.set_retention(secs, now);
        Ok(())
    }

    pub(crate) fn set_probe(&self, i: usize, celsius: Option<f64>) -> Result<(), String> {
        let mut s = self.state();
        let probes = sensors::addon_temperatures(&s.sensors);
        self.check("probe", i, probes.len())?;
        if let Some(c) = celsius {
            finite("celsius", c)?;
        }
        s.sensors[probes[i]].value = celsius;
        Ok(())
    }

    pub(crate) fn set_temperature(&self, celsius: f64) -> Result<(), String> {
        finite("celsius", celsius)?;
        self.state().temperature = celsius;
        Ok(())
    }

    pub(crate) fn set_power_text(&self, on: &str, off: &str) {
        self.state().power_text = [on.to_string(), off.to_string()];
    }

    pub(crate) fn webhooks(&self) -> Vec<Value> {
        self.state().hooks.list()
    }

    /// Tells the WebSocket clients and the broker of an event of the device itself (Gen2+: `sys` events, a
    /// firmware update's steps); other families have no such notification.
    pub(crate) fn sys_event(&self, event: &str, fields: Map<String, Value>) {
        if self.ident.family == Family::Rpc {
            (self.notify.sys)(self, event, fields);
        }
    }

    /// Calls every enabled URL for the event (outside the state lock: the peer may query us back).
    pub(crate) fn fire_event(&self, event: &str, cid: usize) -> usize {
        (self.notify.event)(self, event, cid);
        let urls = self.state().hooks.urls(event, cid);
        urls.iter().filter(|u| webhooks::call(u)).count()
    }
}

/// The state lock of a device; on release, WebSocket clients are notified of changes (under the lock, so
/// notifications leave in the order the changes happened).
pub(crate) struct StateGuard<'a> {
    dev: &'a Device,
    guard: Option<MutexGuard<'a, DeviceState>>,
    /// Written through, a cover moving, or a change outside the lock: only then is the status measured
    /// again (building it for every read was a quarter of the emulator's CPU).
    changed: bool,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = DeviceState;
    fn deref(&self) -> &DeviceState {
        self.guard.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut DeviceState {
        self.changed = true;
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.guard.take() {
            (self.dev.notify.state)(self.dev, &g, self.changed);
        }
    }
}

pub(crate) fn finite(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("{name} must be a finite number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_macs() {
        let lib = ModelLibrary::embedded();
        let (a, _) = Identity::from_spec(0, &DeviceSpec::new("ShellyPlus1PM"), &lib).unwrap();
        assert!(a.id.starts_with("shellyplus1pm-"), "{}", a.id);
        assert_eq!(
            a.id,
            format!("shellyplus1pm-{}", a.mac.to_ascii_lowercase())
        );
        assert_eq!(a.reported, "SNSW-001P16EU");
        let (b, _) = Identity::from_spec(1, &DeviceSpec::new("ShellyPlus1PM"), &lib).unwrap();
        assert_ne!(a.mac, b.mac);
        assert_eq!(mac_from_id(&a.id), a.mac, "the MAC follows from the id");
        let (g1, _) = Identity::from_spec(0, &DeviceSpec::new("Shelly2.5"), &lib).unwrap();
        assert_eq!(g1.id, format!("shelly25-{}", g1.mac));
        let (t, l) = Identity::from_spec(0, &DeviceSpec::new("Tasmota"), &lib).unwrap();
        assert_eq!(t.id.len(), "tasmota-".len() + 6);
        assert_eq!((l.outputs, l.meters), (1, 1));
        assert_eq!(mac_from_id("tasmota-A1B2C3")[6..], *"A1B2C3");
        assert_eq!(mac_from_id("kitchen").len(), 12);
        assert_eq!(t.mac.len(), 12);
    }

    #[test]
    fn spec_errors_name_the_problem() {
        let lib = ModelLibrary::embedded();
        let e = Identity::from_spec(0, &DeviceSpec::new("Shelly9000"), &lib).unwrap_err();
        assert!(e.contains("'Shelly9000'"), "{e}");
        let mut s = DeviceSpec::new("Shelly2PMG3");
        s.outputs = Some(3);
        assert!(Identity::from_spec(0, &s, &lib).is_err());
        let mut s = DeviceSpec::new("Shelly2PMG3");
        s.profile = Some("roller".into());
        let e = Identity::from_spec(0, &s, &lib).unwrap_err();
        assert!(e.contains("use one of: switch, cover"), "{e}");
        let mut s = DeviceSpec::new("Tasmota");
        s.shutters = 2;
        s.outputs = Some(3);
        let e = Identity::from_spec(0, &s, &lib).unwrap_err();
        assert!(e.contains("need 4 relays"), "{e}");
        s.outputs = None;
        let (_, l) = Identity::from_spec(0, &s, &lib).unwrap();
        assert_eq!((l.outputs, l.covers), (4, 2));
        let mut s = DeviceSpec::new("Shelly1");
        s.sensors = vec![super::super::AddonSensor::new(
            "Tank",
            SensorQuantity::Voltage,
        )];
        assert!(Identity::from_spec(0, &s, &lib).is_err());
    }

    #[test]
    fn namespaces_span_every_profile() {
        let lib = ModelLibrary::embedded();
        let n = |m: &str| Namespaces::of(lib.get(m).unwrap());
        let g3 = n("Shelly2PMG3");
        assert!(g3.switch && g3.cover && !g3.light);
        let em = n("ShellyPro3EM");
        assert!(em.em && em.em1 && !em.switch);
        assert!(n("ShellyProDimmer1PM").light);
    }
}
