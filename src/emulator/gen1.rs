//! Shelly Gen1 REST: `/shelly`, `/status`, `/settings`, `/relay/<n>`, `/roller/<n>`, `/light/<n>`,
//! `/settings/actions`, `/ota` and `/ota/check` (firmware updates, see `update.rs`).

use serde_json::{Map, Value, json};

use super::device::Device;
use super::firmware::{Firmware, Stage, Track};
use super::gen1_outputs::{self, light_json, relay_json, roller_json};
use super::sensors::{self, Origin};
use super::server::{Request, Response};
use super::state::{DeviceState, fahrenheit, round};
use super::webhooks::{Channel, GEN1_ACTIONS};
use crate::models::{MeterSource, OutputKind, SensorQuantity};

pub(crate) fn key(req: &Request) -> String {
    format!("{} {}", req.method, req.path)
}

pub(crate) fn handle(dev: &Device, req: &Request) -> Response {
    let path = req.path.trim_end_matches('/');
    match path {
        "/shelly" => Response::json_whole(200, &shelly(dev)),
        "/status" => Response::json_whole(200, &status(dev, &dev.state())),
        "/settings" => match super::coiot::settings(dev, req) {
            Ok(coiot) => {
                let mut v = settings(dev, &dev.state());
                v["coiot"] = coiot;
                Response::json_whole(200, &v)
            }
            Err(refused) => refused,
        },
        "/cit/d" => Response::json_whole(200, &super::coiot::description(dev)),
        "/settings/actions" => actions(dev, req),
        "/ota" => ota(dev, req),
        "/ota/check" => Response::json_whole(200, &json!({"status": "ok"})),
        _ => {
            if let Some(n) = path.strip_prefix("/relay/") {
                gen1_outputs::relay(dev, n, req)
            } else if let Some(n) = path.strip_prefix("/roller/") {
                gen1_outputs::roller(dev, n, req)
            } else if let Some(n) = path.strip_prefix("/light/") {
                gen1_outputs::light(dev, n, req, false)
            } else if let Some(n) = path.strip_prefix("/color/") {
                gen1_outputs::light(dev, n, req, true)
            } else if let Some(n) = path
                .strip_prefix("/emeter/")
                .and_then(|p| p.strip_suffix("/em_data.csv"))
            {
                em_data(dev, n)
            } else {
                Response::text(404, "Not Found")
            }
        }
    }
}

/// The build id it runs (`fw`).
pub(crate) fn fw(dev: &Device) -> String {
    Firmware::gen1_build(&dev.firmware().version)
}

/// The `update` object of `/status` and `/ota`: `pending` while a newer stable version is on offer,
/// `updating` during the download.
fn update(dev: &Device) -> Value {
    let f = dev.firmware();
    let stable = f.offer(Track::Stable);
    let status = match (f.stage, stable) {
        (Stage::Idle, None) => "idle",
        (Stage::Idle, Some(_)) => "pending",
        _ => "updating",
    };
    let mut m = Map::new();
    m.insert("status".into(), json!(status));
    m.insert("has_update".into(), json!(stable.is_some()));
    m.insert(
        "new_version".into(),
        json!(Firmware::gen1_build(stable.unwrap_or(&f.version))),
    );
    m.insert(
        "old_version".into(),
        json!(Firmware::gen1_build(&f.version)),
    );
    if let Some(b) = &f.beta {
        m.insert("beta_version".into(), json!(Firmware::gen1_build(b)));
    }
    Value::Object(m)
}

/// `GET /ota`: the update object; `?update=true` (latest stable) or `?beta=true` starts an update (a refusal
/// is a 400 with the reason).
fn ota(dev: &Device, req: &Request) -> Response {
    let yes = |k: &str| matches!(req.param(k).as_deref(), Some("true" | "1"));
    let track = if yes("update") {
        Some(Track::Stable)
    } else if yes("beta") {
        Some(Track::Beta)
    } else {
        None
    };
    if let Some(track) = track
        && let Err(why) = super::update::begin(dev, track, false)
    {
        return Response::text(400, &why);
    }
    Response::json_whole(200, &update(dev))
}

/// `GET /emeter/<i>/em_data.csv`: every record of emeter i, oldest first (transports-and-apis.md §8.4: header
/// `Date/time UTC,Active energy Wh (1),Returned energy Wh (1),Min V,Max V`, Wh per row interval).
fn em_data(dev: &Device, n: &str) -> Response {
    let s = dev.state();
    let (Some(h), Some(i)) = (
        &s.history,
        n.parse::<usize>().ok().filter(|i| *i < s.meters.len()),
    ) else {
        return Response::text(404, "Not Found");
    };
    let mut csv = format!(
        "Date/time UTC,Active energy Wh ({0}),Returned energy Wh ({0}),Min V,Max V\n",
        i + 1
    );
    for r in h.rows(i64::MIN, i64::MAX) {
        let c = r.cells.get(i).copied().unwrap_or_default();
        let at = crate::energy::rfc3339(r.ts);
        csv.push_str(&format!(
            "{} {},{:.2},{:.2},{:.1},{:.1}\n",
            &at[..10],
            &at[11..16],
            c.wh,
            c.ret_wh,
            c.v_min,
            c.v_max
        ));
    }
    Response::text(200, &csv)
}

fn emeters(dev: &Device) -> bool {
    dev.ident.info.meter_source() == MeterSource::Gen1Emeters
}

/// Rollers the model has in its roller mode.
fn num_rollers(dev: &Device) -> usize {
    let info = &dev.ident.info;
    info.profile_names()
        .iter()
        .filter_map(|p| info.shape(p))
        .map(|s| s.covers)
        .max()
        .unwrap_or(0)
}

/// Counts as `/shelly` and `/settings` `device` show them: the hardware's, whatever the mode.
fn counts(dev: &Device, s: &DeviceState, m: &mut Map<String, Value>) {
    let info = &dev.ident.info;
    m.insert("num_outputs".into(), json!(info.outputs));
    if emeters(dev) {
        m.insert("num_meters".into(), json!(0));
        m.insert("num_emeters".into(), json!(info.meters));
    } else if info.meters > 0 {
        m.insert("num_meters".into(), json!(info.meters));
    }
    if info.profile.is_some() {
        m.insert("num_rollers".into(), json!(num_rollers(dev)));
        m.insert("mode".into(), json!(s.layout.profile));
    }
}

fn shelly(dev: &Device) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(dev.ident.reported));
    m.insert("mac".into(), json!(dev.mac()));
    m.insert("auth".into(), json!(dev.auth.enabled()));
    m.insert("fw".into(), json!(fw(dev)));
    m.insert("discoverable".into(), json!(false));
    m.insert("longid".into(), json!(1));
    counts(dev, &dev.state(), &mut m);
    Value::Object(m)
}

fn hhmm(unix: f64) -> String {
    let secs = unix as i64;
    format!("{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60)
}

/// `/status` (also `info` over MQTT).
pub(crate) fn status(dev: &Device, s: &DeviceState) -> Value {
    let now = s.now();
    let mut m = Map::new();
    m.insert(
        "wifi_sta".into(),
        json!({"connected": true, "ssid": "emulator", "ip": "127.0.0.1", "rssi": -55}),
    );
    m.insert(
        "cloud".into(),
        json!({"enabled": false, "connected": false}),
    );
    m.insert("mqtt".into(), json!({"connected": dev.mqtt.connected()}));
    m.insert("time".into(), json!(hhmm(now)));
    m.insert("unixtime".into(), json!(now as i64));
    m.insert("serial".into(), json!(1));
    m.insert(
        "has_update".into(),
        json!(dev.firmware().offer(Track::Stable).is_some()),
    );
    m.insert("mac".into(), json!(dev.mac()));
    m.insert("cfg_changed_cnt".into(), json!(0));
    m.insert("actions_stats".into(), json!({"skipped": 0}));
    if s.layout.lights {
        let lights: Vec<Value> = (0..s.outputs.len()).map(|i| light_json(s, i)).collect();
        m.insert("lights".into(), Value::Array(lights));
    } else if s.layout.outputs > 0 {
        let relays: Vec<Value> = (0..s.outputs.len()).map(|i| relay_json(s, i)).collect();
        m.insert("relays".into(), Value::Array(relays));
    }
    if !s.covers.is_empty() {
        let rollers: Vec<Value> = (0..s.covers.len()).map(|c| roller_json(s, c)).collect();
        m.insert("rollers".into(), Value::Array(rollers));
    }
    if emeters(dev) {
        let mut total = 0.0;
        let list: Vec<Value> = (0..s.meters.len())
            .map(|i| {
                let v = s.meter(i);
                let power = round(v.power, 2);
                total += power;
                json!({
                    "power": power,
                    "pf": round(v.pf, 2),
                    "current": round(v.current, 2),
                    "voltage": round(v.voltage, 2),
                    "is_valid": true,
                    "total": round(v.energy_wh, 1),
                    "total_returned": round(v.returned_wh, 1),
                })
            })
            .collect();
        m.insert("emeters".into(), Value::Array(list));
        m.insert("total_power".into(), json!(round(total, 2)));
    } else if !s.meters.is_empty() {
        let list: Vec<Value> = (0..s.meters.len())
            .map(|i| {
                let v = s.meter(i);
                // Gen1 relay meters count watt-minutes; by_minute is mWh.
                let counters: Vec<f64> =
                    v.by_minute.iter().map(|mwh| round(mwh * 0.06, 3)).collect();
                json!({
                    "power": round(v.power, 2),
                    "overpower": 0,
                    "is_valid": true,
                    "timestamp": now as i64,
                    "counters": counters,
                    "total": (v.energy_wh * 60.0).round() as i64,
                })
            })
            .collect();
        m.insert("meters".into(), Value::Array(list));
    }
    if !s.inputs.is_empty() {
        let list: Vec<Value> = s
            .inputs
            .iter()
            .map(|on| json!({"input": u8::from(*on), "event": "", "event_cnt": 0}))
            .collect();
        m.insert("inputs".into(), Value::Array(list));
    }
    let temps = sensors::addon_temperatures(&s.sensors);
    if !temps.is_empty() {
        m.insert("ext_sensors".into(), json!({"temperature_unit": "C"}));
        let (mut ext, mut hum) = (Map::new(), Map::new());
        for (k, &i) in temps.iter().enumerate() {
            let r = &s.sensors[i];
            let hw = hw_id(dev, r.origin, k);
            if let Some(c) = r.value {
                ext.insert(
                    k.to_string(),
                    json!({"hwID": hw, "tC": round(c, 2), "tF": fahrenheit(c)}),
                );
            }
            // A DHT22's humidity is reported under the same index as its temperature.
            if r.origin == Origin::Dht22
                && let Some(h) = sensors::by_id(&s.sensors, SensorQuantity::Humidity, r.id as u64)
                && let Some(v) = s.sensors[h].value
            {
                hum.insert(k.to_string(), json!({"hwID": hw, "hum": round(v, 1)}));
            }
        }
        m.insert("ext_temperature".into(), Value::Object(ext));
        if s.sensors.iter().any(|r| r.origin == Origin::Dht22) {
            m.insert("ext_humidity".into(), Value::Object(hum));
        }
    }
    if s.layout.temperature {
        let t = round(s.temperature, 2);
        m.insert("temperature".into(), json!(t));
        m.insert("overtemperature".into(), json!(false));
        m.insert(
            "tmp".into(),
            json!({"tC": t, "tF": fahrenheit(t), "is_valid": true}),
        );
    }
    m.insert("update".into(), update(dev));
    m.insert("ram_total".into(), json!(51688));
    m.insert("ram_free".into(), json!(39000));
    m.insert("fs_size".into(), json!(233681));
    m.insert("fs_free".into(), json!(150000));
    m.insert("uptime".into(), json!(s.uptime()));
    Value::Object(m)
}

/// A DS18B20-style ROM id, stable per device and probe; a DHT22 shows its short bus id (`0300` in captures).
fn hw_id(dev: &Device, origin: Origin, i: usize) -> String {
    match origin {
        Origin::Dht22 => format!("03{i:02x}"),
        _ => format!("28{}{:02x}", dev.ident.mac.to_ascii_lowercase(), i),
    }
}

fn action_names(dev: &Device) -> Vec<(&'static str, usize)> {
    let info = &dev.ident.info;
    GEN1_ACTIONS
        .iter()
        .map(|(name, _, ch)| {
            let n = match ch {
                Channel::Input => info.inputs,
                Channel::Output => info.outputs,
            };
            (*name, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn settings(dev: &Device, s: &DeviceState) -> Value {
    let hostname = dev.ident.id.clone();
    let mut device = Map::new();
    device.insert("type".into(), json!(dev.ident.reported));
    device.insert("mac".into(), json!(dev.mac()));
    device.insert("hostname".into(), json!(hostname));
    counts(dev, s, &mut device);
    let mut names = Vec::new();
    for i in 0..s.outputs.len().max(s.inputs.len()) {
        for (name, n) in action_names(dev) {
            if i < n {
                names.push(name);
            }
        }
    }
    let mut m = Map::new();
    m.insert("device".into(), Value::Object(device));
    if let Some(mode) = s
        .layout
        .profile
        .as_ref()
        .filter(|_| dev.ident.info.profile.is_some())
    {
        m.insert("mode".into(), json!(mode));
    }
    m.insert(
        "wifi_sta".into(),
        json!({"enabled": true, "ssid": "emulator", "ipv4_method": "dhcp", "ip": null}),
    );
    let spec = dev.mqtt.spec.as_ref();
    m.insert(
        "mqtt".into(),
        json!({
            "enable": spec.is_some(),
            "server": spec.map_or(String::new(), |m| m.server.clone()),
            "user": spec.and_then(|m| m.user.clone()).unwrap_or_default(),
            "id": if spec.is_some() { dev.mqtt.prefix.clone() } else { hostname.clone() },
            "reconnect_timeout_max": 30, "reconnect_timeout_min": 1, "clean_session": true,
            "keep_alive": spec.map_or(60, |m| m.keep_alive.as_secs()),
            "max_qos": 1, "retain": false, "update_period": super::mqtt_link::GEN1_UPDATE_PERIOD,
        }),
    );
    m.insert(
        "coiot".into(),
        json!({"enabled": false, "update_period": 15, "peer": ""}),
    );
    m.insert(
        "login".into(),
        json!({"enabled": dev.auth.enabled(), "unprotected": false, "username": dev.auth.username()}),
    );
    m.insert("name".into(), json!(dev.ident.name));
    m.insert("fw".into(), json!(fw(dev)));
    m.insert("discoverable".into(), json!(false));
    m.insert(
        "cloud".into(),
        json!({"enabled": false, "connected": false}),
    );
    m.insert("time".into(), json!(hhmm(s.now())));
    m.insert("unixtime".into(), json!(s.now() as i64));
    m.insert(
        "actions".into(),
        json!({"active": s.hooks.hooks.iter().any(|h| h.enable), "names": names}),
    );
    settings_outputs(dev, s, &mut m);
    if emeters(dev) {
        let list: Vec<Value> = (0..s.meters.len())
            .map(|_| json!({"name": null, "appliance_type": "General", "max_power": 0}))
            .collect();
        m.insert("emeters".into(), Value::Array(list));
    }
    let temps = sensors::addon_temperatures(&s.sensors);
    if !temps.is_empty() {
        m.insert("ext_sensors".into(), json!({"temperature_unit": "C"}));
        let ext: Map<String, Value> = (0..temps.len())
            .map(|i| {
                (
                    i.to_string(),
                    json!({"overtemp_act": "disabled", "undertemp_act": "disabled", "offset_tC": 0}),
                )
            })
            .collect();
        m.insert("ext_temperature".into(), Value::Object(ext));
        let hum: Map<String, Value> = temps
            .iter()
            .enumerate()
            .filter(|(_, i)| s.sensors[**i].origin == Origin::Dht22)
            .map(|(k, _)| {
                (
                    k.to_string(),
                    json!({"overhum_act": "disabled", "underhum_act": "disabled", "offset": 0}),
                )
            })
            .collect();
        if !hum.is_empty() {
            m.insert("ext_humidity".into(), Value::Object(hum));
        }
    }
    m.insert("eco_mode_enabled".into(), json!(false));
    Value::Object(m)
}

/// `relays`, `rollers` and `lights` settings: a Shelly 2.5 keeps both relay and roller settings in either mode.
fn settings_outputs(dev: &Device, s: &DeviceState, m: &mut Map<String, Value>) {
    let info = &dev.ident.info;
    if info.output_kind == OutputKind::Light {
        let lights: Vec<Value> = (0..s.outputs.len())
            .map(|i| {
                json!({
                    "name": null, "ison": s.outputs[i], "default_state": "last", "auto_on": 0, "auto_off": 0,
                    "btn_type": "toggle", "swap_inputs": 0, "schedule": false, "schedule_rules": [],
                    "night_mode": {"enabled": 0, "start_time": "00:00", "end_time": "00:00", "brightness": 0},
                })
            })
            .collect();
        m.insert("lights".into(), Value::Array(lights));
        return;
    }
    let relays: Vec<Value> = (0..info.outputs)
        .map(|i| {
            json!({
                "name": null, "appliance_type": "General", "ison": s.outputs.get(i).copied().unwrap_or(false),
                "has_timer": false, "default_state": "off", "btn_type": "detached", "btn_reverse": 0,
                "auto_on": 0, "auto_off": 0, "schedule": false, "schedule_rules": [],
            })
        })
        .collect();
    m.insert("relays".into(), Value::Array(relays));
    if num_rollers(dev) > 0 {
        let rollers: Vec<Value> = (0..num_rollers(dev))
            .map(|c| {
                let mut r = json!({
                    "maxtime": 20, "maxtime_open": 20, "maxtime_close": 20, "default_state": "stop",
                    "swap": false, "swap_inputs": false, "input_mode": "openclose", "button_type": "momentary",
                    "btn_reverse": 0, "state": "stop", "power": 0, "is_valid": true, "safety_switch": false,
                    "schedule": false, "schedule_rules": [], "obstacle_mode": "disabled", "obstacle_action": "stop",
                    "obstacle_power": 200, "obstacle_delay": 1, "safety_mode": "while_opening",
                    "safety_action": "stop", "safety_allowed_on_trigger": "none", "off_power": 2,
                    "positioning": true,
                });
                // In roller mode the live values show here too.
                if let Some(o) = r.as_object_mut().filter(|_| c < s.covers.len()) {
                    let live = roller_json(s, c);
                    for k in ["state", "power", "positioning"] {
                        o.insert(k.into(), live[k].clone());
                    }
                }
                r
            })
            .collect();
        m.insert("rollers".into(), Value::Array(rollers));
    }
}

/// Lists action URLs, or sets one (`index`, `name`, `enabled`, `urls[]`).
fn actions(dev: &Device, req: &Request) -> Response {
    let pairs = req.query_pairs();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let names = action_names(dev);
    let list = |s: &DeviceState, only: Option<&str>| {
        let mut m = Map::new();
        for (name, n) in names.iter().filter(|(a, _)| only.is_none_or(|o| o == *a)) {
            let entries: Vec<Value> = (0..*n)
                .map(|i| match s.hooks.action(name, i) {
                    Some(h) => json!({"index": i, "enabled": h.enable, "urls": h.urls}),
                    None => json!({"index": i, "enabled": false, "urls": []}),
                })
                .collect();
            m.insert(name.to_string(), Value::Array(entries));
        }
        json!({ "actions": m })
    };
    let Some(name) = get("name") else {
        return Response::json_whole(200, &list(&dev.state(), None));
    };
    let Some(&(name, n)) = names.iter().find(|(a, _)| *a == name) else {
        return Response::text(400, &format!("Unknown action name '{name}'"));
    };
    let index = match get("index").unwrap_or("0").parse::<usize>() {
        Ok(i) if i < n => i,
        _ => return Response::text(400, "Bad index!"),
    };
    let mut s = dev.state();
    // Without any `urls` parameter only `enabled` changes.
    let urls: Vec<String> = if pairs.iter().any(|(k, _)| k.starts_with("urls")) {
        pairs
            .iter()
            .filter(|(k, v)| k.starts_with("urls") && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    } else {
        s.hooks
            .action(name, index)
            .map(|h| h.urls.clone())
            .unwrap_or_default()
    };
    let enabled = match get("enabled") {
        None => !urls.is_empty(),
        Some("true" | "1") => true,
        Some("false" | "0") => false,
        Some(_) => return Response::text(400, "Bad enabled!"),
    };
    s.hooks.set_action(name, index, enabled, urls);
    Response::json_whole(200, &list(&s, Some(name)))
}
