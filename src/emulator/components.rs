//! Shelly Gen2+ component payloads (`Shelly.GetStatus`, `Shelly.GetConfig`, `/shelly`), generated from the
//! device state in the shape real devices use.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use super::device::Device;
pub(crate) use super::fields::{
    Temperature, energy, meter_entries, meter_fields, source_name, temperature, to_tree,
};
use super::firmware::{Firmware, Track};
use super::sensors::Origin;
use super::state::{DeviceState, InputType, MeterView, round};
use super::{rpc_cover, rpc_light, rpc_sensors};
use crate::models::{MeterSource, SensorQuantity};

pub(crate) const CFG_REV: u64 = 10;

pub(crate) fn device_info(dev: &Device, s: &DeviceState) -> Value {
    let id = &dev.ident;
    let mut m = Map::with_capacity(16);
    m.insert("name".into(), json!(id.name));
    m.insert("id".into(), json!(id.id));
    m.insert("mac".into(), json!(dev.mac()));
    m.insert("slot".into(), json!(dev.firmware().slot));
    m.insert("model".into(), json!(id.reported));
    m.insert("gen".into(), json!(id.info.generation));
    let version = dev.firmware().version.clone();
    m.insert("fw_id".into(), json!(Firmware::build_id(&version)));
    m.insert("ver".into(), json!(version));
    m.insert("app".into(), json!(id.app()));
    if has_matter(dev) {
        m.insert("matter".into(), json!(false));
    }
    if dev.auth.enabled() {
        m.insert("auth_en".into(), json!(true));
        m.insert("auth_domain".into(), json!(id.id));
    } else {
        m.insert("auth_en".into(), json!(false));
        m.insert("auth_domain".into(), Value::Null);
    }
    if dev.enhanced_security {
        m.insert("enhanced_security".into(), json!(true));
    }
    if let Some(p) = profile(dev, s) {
        m.insert("profile".into(), json!(p));
    }
    Value::Object(m)
}

/// Models with several profiles report the current one.
fn profile<'a>(dev: &Device, s: &'a DeviceState) -> Option<&'a str> {
    dev.ident.info.profile.as_ref()?;
    s.layout.profile.as_deref()
}

fn hhmm(unix: f64) -> String {
    let secs = unix as i64;
    format!("{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60)
}

/// `sys.available_updates`: the newer versions on offer (`{}`: up to date); `Shelly.CheckForUpdate` with
/// `build_id`s when `build` is set.
pub(crate) fn available_updates_with(dev: &Device, build: bool) -> Value {
    let f = dev.firmware();
    let mut m = Map::new();
    for (key, track) in [("stable", Track::Stable), ("beta", Track::Beta)] {
        if let Some(v) = f.offer(track) {
            let entry = if build {
                json!({"version": v, "build_id": Firmware::build_id(v)})
            } else {
                json!({ "version": v })
            };
            m.insert(key.into(), entry);
        }
    }
    Value::Object(m)
}

fn available_updates(dev: &Device) -> Value {
    available_updates_with(dev, false)
}

/// `sys` of `Shelly.GetStatus`.
struct SysStatus<'a> {
    dev: &'a Device,
    s: &'a DeviceState,
}

impl Serialize for SysStatus<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (dev, s) = (self.dev, self.s);
        let now = s.now();
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("mac", &dev.mac())?;
        m.serialize_entry("restart_required", &dev.ws_out.restart_required())?;
        m.serialize_entry("time", &hhmm(now))?;
        m.serialize_entry("unixtime", &(now as i64))?;
        m.serialize_entry("last_sync_ts", &(s.started_unix as i64))?;
        m.serialize_entry("uptime", &s.uptime())?;
        m.serialize_entry("ram_size", &250_596)?;
        m.serialize_entry("ram_free", &127_644)?;
        m.serialize_entry("ram_min_free", &102_668)?;
        m.serialize_entry("fs_size", &524_288)?;
        m.serialize_entry("fs_free", &188_416)?;
        m.serialize_entry("cfg_rev", &CFG_REV)?;
        m.serialize_entry("kvs_rev", &dev.kvs.rev())?;
        m.serialize_entry("schedule_rev", &0)?;
        m.serialize_entry("webhook_rev", &s.hooks.rev)?;
        m.serialize_entry("available_updates", &available_updates(dev))?;
        m.serialize_entry("reset_reason", &3)?;
        m.serialize_entry("utc_offset", &0)?;
        if let Some(p) = dev.ws_out.period {
            m.serialize_entry("wakeup_period", &p.as_secs())?;
            m.serialize_entry(
                "wakeup_reason",
                &WakeupReason {
                    boot: "deepsleep_wake",
                    cause: "status_update",
                },
            )?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct WakeupReason {
    boot: &'static str,
    cause: &'static str,
}

pub(crate) fn switch_status(dev: &Device, s: &DeviceState, i: usize) -> Value {
    to_tree(&SwitchStatus { dev, s, i })
}

/// `switch:<i>` of `Shelly.GetStatus` (and `Switch.GetStatus`).
struct SwitchStatus<'a> {
    dev: &'a Device,
    s: &'a DeviceState,
    i: usize,
}

impl Serialize for SwitchStatus<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (s, i) = (self.s, self.i);
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("id", &i)?;
        m.serialize_entry("source", source_name(s.sources[i]))?;
        m.serialize_entry("output", &s.outputs[i])?;
        if s.layout.switch_meter(i) && i < s.meters.len() {
            meter_entries(&mut m, &s.meter(i), self.dev.ident.meter_fields)?;
        }
        if s.layout.temperature {
            m.serialize_entry("temperature", &Temperature(s.temperature))?;
        }
        m.end()
    }
}

pub(crate) fn em1(i: usize, v: &MeterView) -> Value {
    json!({
        "id": i,
        "current": round(v.current, 3),
        "voltage": round(v.voltage, 1),
        "act_power": round(v.power, 1),
        "aprt_power": round(v.voltage * v.current, 1),
        "pf": round(v.pf, 2),
        "freq": round(v.freq, 1),
        "calibration": "factory",
    })
}

pub(crate) fn em1data(i: usize, v: &MeterView) -> Value {
    json!({
        "id": i,
        "total_act_energy": round(v.energy_wh, 2),
        "total_act_ret_energy": round(v.returned_wh, 2),
    })
}

const PHASES: [&str; 3] = ["a", "b", "c"];

/// Three-phase meter; totals are sums of the rounded phase values, so they add up exactly as shown.
pub(crate) fn em(s: &DeviceState) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(0));
    let (mut current, mut act, mut aprt) = (0.0, 0.0, 0.0);
    for (i, p) in PHASES.iter().enumerate() {
        let v = (i < s.meters.len()).then(|| s.meter(i));
        let f = |g: fn(&MeterView) -> f64, d: i32| v.as_ref().map_or(0.0, |v| round(g(v), d));
        let vals = [
            ("current", f(|v| v.current, 3)),
            ("voltage", f(|v| v.voltage, 1)),
            ("act_power", f(|v| v.power, 1)),
            ("aprt_power", f(|v| v.voltage * v.current, 1)),
            ("pf", f(|v| v.pf, 2)),
            ("freq", f(|v| v.freq, 1)),
        ];
        current += vals[0].1;
        act += vals[2].1;
        aprt += vals[3].1;
        for (k, x) in vals {
            m.insert(format!("{p}_{k}"), json!(x));
        }
    }
    m.insert("n_current".into(), Value::Null);
    m.insert("total_current".into(), json!(round(current, 3)));
    m.insert("total_act_power".into(), json!(round(act, 3)));
    m.insert("total_aprt_power".into(), json!(round(aprt, 3)));
    m.insert("user_calibrated_phase".into(), json!([]));
    Value::Object(m)
}

pub(crate) fn emdata(s: &DeviceState) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(0));
    let (mut act, mut ret) = (0.0, 0.0);
    for (i, p) in PHASES.iter().enumerate() {
        let (e, r) = if i < s.meters.len() {
            let v = s.meter(i);
            (round(v.energy_wh, 2), round(v.returned_wh, 2))
        } else {
            (0.0, 0.0)
        };
        act += e;
        ret += r;
        m.insert(format!("{p}_total_act_energy"), json!(e));
        m.insert(format!("{p}_total_act_ret_energy"), json!(r));
    }
    m.insert("total_act".into(), json!(round(act, 2)));
    m.insert("total_act_ret".into(), json!(round(ret, 2)));
    Value::Object(m)
}

pub(crate) fn pm1(i: usize, v: &MeterView) -> Value {
    json!({
        "id": i,
        "voltage": round(v.voltage, 1),
        "current": round(v.current, 3),
        "apower": round(v.power, 1),
        "freq": round(v.freq, 1),
        "aenergy": energy(v.energy_wh, &v.by_minute, v.minute_ts),
        "ret_aenergy": energy(v.returned_wh, &v.ret_by_minute, v.minute_ts),
    })
}

pub(crate) fn status(dev: &Device, s: &DeviceState) -> Map<String, Value> {
    match to_tree(&Status { dev, s }) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `Shelly.GetStatus` as one `Serialize`: written straight out as an RPC answer's text (the tree of values
/// built to be printed was a quarter of the emulator's CPU in `refresh_all`), or collected into a map
/// ([`status`]).
pub(crate) struct Status<'a> {
    pub dev: &'a Device,
    pub s: &'a DeviceState,
}

impl Serialize for Status<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (dev, s) = (self.dev, self.s);
        let src = s.layout.meter_source;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("ble", &Empty {})?;
        if has_bthome(dev) {
            // Bluetooth is off (`ble.enable: false`), as the firmware then reports.
            m.serialize_entry("bthome", &json!({"errors": ["bluetooth_disabled"]}))?;
        }
        m.serialize_entry("cloud", &Connected { connected: false })?;
        for c in 0..s.covers.len() {
            m.serialize_entry(&Key("cover", c), &rpc_cover::status(s, c))?;
        }
        if s.layout.battery {
            m.serialize_entry("devicepower:0", &rpc_sensors::devicepower(s))?;
        }
        match src {
            MeterSource::Em => {
                m.serialize_entry("em:0", &em(s))?;
                m.serialize_entry("emdata:0", &emdata(s))?;
            }
            MeterSource::Em1 => {
                for i in 0..s.meters.len() {
                    m.serialize_entry(&Key("em1", i), &em1(i, &s.meter(i)))?;
                }
                for i in 0..s.meters.len() {
                    m.serialize_entry(&Key("em1data", i), &em1data(i, &s.meter(i)))?;
                }
            }
            _ => {}
        }
        rpc_sensors::status_entries(&mut m, s, SensorQuantity::Humidity)?;
        for i in 0..s.inputs.len() {
            let input = InputStatus {
                id: i,
                state: s.input_state(i),
            };
            m.serialize_entry(&Key("input", i), &input)?;
        }
        if s.layout.lights {
            let c = s.layout.output_component();
            for i in 0..s.outputs.len() {
                m.serialize_entry(&Key(c, i), &rpc_light::status(s, i))?;
            }
        }
        if has_matter(dev) {
            m.serialize_entry("knx", &Empty {})?;
            m.serialize_entry(
                "matter",
                &json!({"num_fabrics": 0, "commissionable": false}),
            )?;
        }
        let mqtt = Connected {
            connected: dev.mqtt.connected(),
        };
        m.serialize_entry("mqtt", &mqtt)?;
        if src == MeterSource::Pm1 {
            for i in 0..s.meters.len() {
                m.serialize_entry(&Key("pm1", i), &pm1(i, &s.meter(i)))?;
            }
        }
        if !s.layout.lights {
            for i in 0..s.outputs.len() {
                m.serialize_entry(&Key("switch", i), &SwitchStatus { dev, s, i })?;
            }
        }
        for (k, v) in dev.scripts.statuses() {
            m.serialize_entry(&k, &v)?;
        }
        m.serialize_entry("sys", &SysStatus { dev, s })?;
        rpc_sensors::status_entries(&mut m, s, SensorQuantity::Temperature)?;
        rpc_sensors::status_entries(&mut m, s, SensorQuantity::Voltage)?;
        m.serialize_entry("wifi", &Wifi::EMULATED)?;
        m.serialize_entry("ws", &Connected { connected: false })?;
        m.end()
    }
}

/// A component key, `<kind>:<id>`, written without a `String` of its own.
struct Key<'a>(&'a str, usize);

impl Serialize for Key<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(&format_args!("{}:{}", self.0, self.1))
    }
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct Connected {
    connected: bool,
}

#[derive(Serialize)]
struct InputStatus {
    id: usize,
    state: Option<bool>,
}

#[derive(Serialize)]
struct Wifi {
    sta_ip: &'static str,
    status: &'static str,
    ssid: &'static str,
    rssi: i32,
}

impl Wifi {
    const EMULATED: Wifi = Wifi {
        sta_ip: "127.0.0.1",
        status: "got ip",
        ssid: "emulator",
        rssi: -55,
    };
}

/// Gen3 and Gen4 devices with outputs have KNX and Matter (and report `matter` in `/shelly`), as the captures
/// of real ones show; energy meters (EM Gen3, even with its relay) do not. No `zigbee`: a Gen4 running its Wi-Fi firmware has none (the
/// 1PM Gen4 capture), and clients read its presence as "Zigbee firmware active" (aioshelly).
fn has_matter(dev: &Device) -> bool {
    let (i, ns) = (&dev.ident.info, dev.ident.namespaces);
    i.generation >= 3 && (i.outputs > 0 || i.covers > 0) && !(ns.em || ns.em1)
}

/// Gen3, Gen4 and Pro devices have the BTHome service.
fn has_bthome(dev: &Device) -> bool {
    let i = &dev.ident.info;
    i.generation >= 3 || i.model.starts_with("ShellyPro")
}

pub(crate) fn input_config(i: usize, t: InputType) -> Value {
    json!({"id": i, "name": null, "type": t.as_str(), "enable": true, "invert": false, "factory_reset": true})
}

pub(crate) fn switch_config(s: &DeviceState, i: usize) -> Value {
    let mut c = json!({
        "id": i, "name": null, "in_mode": "detached", "in_locked": false, "initial_state": "off",
        "auto_on": false, "auto_on_delay": 60.0, "auto_off": false, "auto_off_delay": 60.0,
    });
    if s.layout.switch_meter(i)
        && let Some(o) = c.as_object_mut()
    {
        o.insert("power_limit".into(), json!(4480));
        o.insert("voltage_limit".into(), json!(280));
        o.insert("current_limit".into(), json!(16.0));
    }
    c
}

/// `MQTT.GetConfig` (and `mqtt` in `Shelly.GetConfig`), as firmware 1.x reports it; `pass` is never returned.
pub(crate) fn mqtt_config(dev: &Device) -> Value {
    let m = &dev.mqtt;
    let spec = m.spec.as_ref();
    json!({
        "enable": spec.is_some(),
        "server": spec.map(|s| s.server.clone()),
        "client_id": m.client_id,
        "user": spec.and_then(|s| s.user.clone()),
        // A CA file stands for one uploaded with `Shelly.PutUserCA`.
        "ssl_ca": spec.and_then(|s| s.ca_file.as_ref()).map(|_| "user_ca.pem"),
        "topic_prefix": m.prefix,
        "rpc_ntf": true,
        "status_ntf": false,
        "use_client_cert": false,
        "enable_rpc": true,
        "enable_control": true,
    })
}

pub(crate) fn config(dev: &Device, s: &DeviceState) -> Map<String, Value> {
    let id = &dev.ident;
    let src = s.layout.meter_source;
    let mut m = Map::new();
    m.insert(
        "ble".into(),
        json!({"enable": false, "rpc": {"enable": false}}),
    );
    if has_bthome(dev) {
        m.insert("bthome".into(), json!({}));
    }
    m.insert("cloud".into(), json!({"enable": false, "server": null}));
    for c in 0..s.covers.len() {
        m.insert(format!("cover:{c}"), rpc_cover::config(s, c));
    }
    match src {
        MeterSource::Em => {
            m.insert(
                "em:0".into(),
                json!({"id": 0, "name": null, "blink_mode_selector": "active_energy", "phase_selector": "all",
                       "monitor_phase_sequence": false, "ct_type": "120A", "reverse": {}}),
            );
            m.insert("emdata:0".into(), json!({}));
        }
        MeterSource::Em1 => {
            for i in 0..s.meters.len() {
                m.insert(
                    format!("em1:{i}"),
                    json!({"id": i, "name": null, "reverse": false, "ct_type": "50A"}),
                );
            }
            for i in 0..s.meters.len() {
                m.insert(format!("em1data:{i}"), json!({}));
            }
        }
        _ => {}
    }
    rpc_sensors::insert_config(&mut m, s, SensorQuantity::Humidity);
    for i in 0..s.inputs.len() {
        m.insert(format!("input:{i}"), input_config(i, s.input_types[i]));
    }
    if s.layout.lights {
        let c = s.layout.output_component();
        for i in 0..s.outputs.len() {
            m.insert(format!("{c}:{i}"), rpc_light::config(s, i));
        }
    }
    if has_matter(dev) {
        m.insert(
            "knx".into(),
            json!({"enable": false, "ia": "15.15.255", "routing": {"addr": "224.0.23.12:3671"}}),
        );
        m.insert("matter".into(), json!({"enable": false}));
    }
    m.insert("mqtt".into(), mqtt_config(dev));
    if src == MeterSource::Pm1 {
        for i in 0..s.meters.len() {
            m.insert(
                format!("pm1:{i}"),
                json!({"id": i, "name": null, "reverse": false}),
            );
        }
    }
    if !s.layout.lights {
        for i in 0..s.outputs.len() {
            m.insert(format!("switch:{i}"), switch_config(s, i));
        }
    }
    let mut device = Map::new();
    device.insert("name".into(), json!(id.name));
    device.insert("mac".into(), json!(dev.mac()));
    device.insert(
        "fw_id".into(),
        json!(Firmware::build_id(&dev.firmware().version)),
    );
    device.insert("discoverable".into(), json!(true));
    device.insert("eco_mode".into(), json!(false));
    if let Some(p) = profile(dev, s) {
        device.insert("profile".into(), json!(p));
    }
    let addon = if !s.sensors.iter().any(|r| r.origin != Origin::Builtin) {
        Value::Null
    } else {
        json!("sensor")
    };
    device.insert("addon_type".into(), addon);
    m.extend(dev.scripts.configs());
    m.insert(
        "sys".into(),
        json!({
            "device": device,
            "location": null,
            "debug": {"level": 2, "file_level": null, "mqtt": {"enable": false}, "websocket": {"enable": false}},
            "ui_data": {},
            "rpc_udp": {"dst_addr": null, "listen_port": null},
            "sntp": {"server": "time.cloudflare.com"},
            "cfg_rev": CFG_REV,
        }),
    );
    rpc_sensors::insert_config(&mut m, s, SensorQuantity::Temperature);
    rpc_sensors::insert_config(&mut m, s, SensorQuantity::Voltage);
    m.insert(
        "wifi".into(),
        json!({"ap": {"ssid": id.id, "is_open": true, "enable": false},
               "sta": {"ssid": "emulator", "is_open": false, "enable": true, "ipv4mode": "dhcp", "ip": null}}),
    );
    m.insert("ws".into(), dev.ws_out.config());
    m
}
