//! Tasmota HTTP commands: `GET /cm?cmnd=<command>` (`Status [n]`, `State`, `Power[n] [0|1|2|off|on|toggle]`,
//! `OtaUrl`, `Upgrade 1`, the shutter commands of `tasmota_shutter`).

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::device::Device;
use super::firmware::Track;
use super::sensors::{Origin, dew_point};
use super::server::{Request, Response};
use super::state::{DeviceState, MeterView, Source, round};
use super::tasmota_shutter;
use crate::models::SensorQuantity;

/// Where `Upgrade 1` downloads from (`OtaUrl`).
const OTA_URL: &str = "http://ota.tasmota.com/tasmota32/release/tasmota32.bin";

fn command(req: &Request) -> String {
    req.param("cmnd").unwrap_or_default()
}

pub(crate) fn key(req: &Request) -> String {
    if req.path == "/cm" {
        format!("cm {}", command(req))
    } else {
        format!("{} {}", req.method, req.path)
    }
}

pub(crate) fn handle(dev: &Device, req: &Request) -> Response {
    if req.path != "/cm" {
        return Response::text(404, "Not Found");
    }
    Response::json(200, &run(dev, command(req).trim()))
}

fn unknown() -> Value {
    json!({"Command": "Unknown"})
}

/// Runs one command (`Power1 on`, `Status 0`...) and returns its answer; over HTTP (`/cm`) and MQTT alike.
pub(crate) fn run(dev: &Device, cmnd: &str) -> Value {
    let (name, arg) = cmnd
        .split_once(char::is_whitespace)
        .map_or((cmnd, ""), |(n, a)| (n, a.trim()));
    let name = name.to_ascii_lowercase();
    match name.as_str() {
        "status" => status(dev, arg),
        "state" => Value::Object(sts(dev, &dev.state())),
        "teleperiod" => tele_period(dev, arg),
        "otaurl" => json!({ "OtaUrl": OTA_URL }),
        "upgrade" | "upload" => upgrade(dev, arg),
        n if n.starts_with("shutter") => {
            tasmota_shutter::command(dev, n, arg).unwrap_or_else(unknown)
        }
        _ => name
            .strip_prefix("power")
            .and_then(|n| power(dev, n, arg))
            .unwrap_or_else(unknown),
    }
}

/// `Upgrade 1`: download from `OtaUrl` (the stable version on offer, else the running one again) and restart
/// (see `update.rs`). Without an argument: what it would do.
fn upgrade(dev: &Device, arg: &str) -> Value {
    let version = dev.firmware().version.clone();
    if arg != "1" {
        return json!({ "Upgrade": format!("1 or >{version} to upgrade") });
    }
    match super::update::begin(dev, Track::Stable, true) {
        Ok(v) => json!({ "Upgrade": format!("Version {v} from {OTA_URL}") }),
        Err(why) => json!({ "Upgrade": format!("Failed: {why}") }),
    }
}

/// `Power<n> [value]`; `None` when relay n does not exist (Tasmota then does not know the command).
fn power(dev: &Device, digits: &str, arg: &str) -> Option<Value> {
    let n = if digits.is_empty() {
        1
    } else {
        digits.parse::<usize>().ok()?
    };
    let mut s = dev.state();
    if n == 0 || n > s.outputs.len() {
        return None;
    }
    let i = n - 1;
    let on = match arg.to_ascii_lowercase().as_str() {
        "0" | "off" | "false" => Some(false),
        "1" | "on" | "true" => Some(true),
        "2" | "toggle" => Some(!s.outputs[i]),
        // No or another argument: report the state.
        _ => None,
    };
    if let Some(on) = on {
        s.set_output(i, on, Source::Remote);
    }
    let mut m = Map::new();
    m.insert(power_key(&s, i), json!(power_text(&s, i)));
    Some(Value::Object(m))
}

/// `TelePeriod [seconds]`: the MQTT telemetry period (10–3600, 0 off, 1 the default 300); setting it
/// also sends telemetry now.
fn tele_period(dev: &Device, arg: &str) -> Value {
    let period = if arg.is_empty() {
        dev.mqtt.tele_period()
    } else {
        match arg.parse::<u64>() {
            Ok(n) => dev.mqtt.set_tele_period(n, dev.clock.instant()),
            Err(_) => dev.mqtt.tele_period(),
        }
    };
    json!({ "TelePeriod": period })
}

/// `tele/<topic>/STATE` and `tele/<topic>/SENSOR`: what `State` and `Status 10` answer.
pub(crate) fn telemetry(dev: &Device) -> (Value, Value) {
    let s = dev.state();
    (Value::Object(sts(dev, &s)), Value::Object(sns(&s)))
}

/// Single-relay devices answer `POWER`, others `POWER<n>`.
pub(crate) fn power_key(s: &DeviceState, i: usize) -> String {
    if s.outputs.len() == 1 {
        "POWER".into()
    } else {
        format!("POWER{}", i + 1)
    }
}

pub(crate) fn power_text(s: &DeviceState, i: usize) -> &str {
    &s.power_text[usize::from(!s.outputs[i])]
}

fn status(dev: &Device, arg: &str) -> Value {
    let s = dev.state();
    let one = |k: &str, v: Map<String, Value>| {
        let mut m = Map::new();
        m.insert(k.to_string(), Value::Object(v));
        Value::Object(m)
    };
    match arg {
        "" => one("Status", status_main(dev, &s)),
        "0" => {
            let mut m = Map::new();
            m.insert("Status".into(), Value::Object(status_main(dev, &s)));
            for (k, v) in sections(dev, &s) {
                m.insert(k.into(), Value::Object(v));
            }
            Value::Object(m)
        }
        _ => {
            let wanted = match arg {
                "1" => "StatusPRM",
                "2" => "StatusFWR",
                "3" => "StatusLOG",
                "4" => "StatusMEM",
                "5" => "StatusNET",
                "6" => "StatusMQT",
                "7" => "StatusTIM",
                "9" => "StatusPTH",
                "8" | "10" => "StatusSNS",
                "11" => "StatusSTS",
                _ => return unknown(),
            };
            sections(dev, &s)
                .into_iter()
                .find(|(k, _)| *k == wanted)
                .map_or_else(unknown, |(k, v)| one(k, v))
        }
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `2026-01-01T00:00:00` (UTC; the emulated device's time zone).
fn datetime(unix: f64) -> String {
    let t = OffsetDateTime::from_unix_timestamp(unix as i64).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// `1T04:03:06`: days, then time of day.
fn uptime_text(secs: u64) -> String {
    format!(
        "{}T{:02}:{:02}:{:02}",
        secs / 86_400,
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

fn status_main(dev: &Device, s: &DeviceState) -> Map<String, Value> {
    let friendly: Vec<String> = (0..s.outputs.len().max(1))
        .map(|i| {
            if i == 0 {
                "Tasmota".to_string()
            } else {
                format!("Tasmota{}", i + 1)
            }
        })
        .collect();
    obj(json!({
        "Module": 0,
        "DeviceName": "Tasmota",
        "FriendlyName": friendly,
        "Topic": dev.ident.id.replace('-', "_"),
        "ButtonTopic": "0",
        "Power": s.power_mask(),
        "PowerOnState": 3,
        "LedState": 1,
        "LedMask": "FFFF",
        "SaveData": 1,
        "SaveState": 1,
        "SwitchTopic": "0",
        "SwitchMode": [0, 0, 0, 0, 0, 0, 0, 0],
        "ButtonRetain": 0,
        "SwitchRetain": 0,
        "SensorRetain": 0,
        "PowerRetain": 0,
        "InfoRetain": 0,
        "StateRetain": 0,
    }))
}

/// Sections 1–11 of `Status 0`, in order.
fn sections(dev: &Device, s: &DeviceState) -> Vec<(&'static str, Map<String, Value>)> {
    let id = &dev.ident;
    let now = s.now();
    let (mqtt_host, mqtt_port) = dev
        .mqtt
        .spec
        .as_ref()
        .and_then(|m| m.host_port().ok())
        .unwrap_or((String::new(), 1883));
    let mqtt_user = dev
        .mqtt
        .spec
        .as_ref()
        .and_then(|m| m.user.clone())
        .unwrap_or_else(|| "DVES_USER".into());
    let mut v = vec![
        (
            "StatusPRM",
            obj(json!({
                "Baudrate": 115200, "SerialConfig": "8N1", "GroupTopic": "tasmotas",
                "OtaUrl": OTA_URL,
                "RestartReason": "Software/System restart", "Uptime": uptime_text(s.uptime()),
                "StartupUTC": datetime(s.started_unix), "Sleep": 50, "CfgHolder": 4617, "BootCount": 1,
                "BCResetTime": datetime(s.started_unix), "SaveCount": 1,
            })),
        ),
        (
            "StatusFWR",
            obj(json!({
                "Version": format!("{}(tasmota)", dev.firmware().version), "BuildDateTime": "2025-01-14T09:00:00", "Core": "3_1_0",
                "SDK": "5.3.2", "CpuFrequency": 160, "Hardware": "ESP32-D0WD-V3", "CR": "372/699",
            })),
        ),
        (
            "StatusLOG",
            obj(json!({
                "SerialLog": 2, "WebLog": 2, "MqttLog": 0, "SysLog": 0, "LogHost": "", "LogPort": 514,
                "SSId": ["emulator", ""], "TelePeriod": dev.mqtt.tele_period(), "Resolution": "558180C0",
                "SetOption": ["00008009", "2805C80001000600003C5A0A000000000000", "00000080", "00006000", "00004000", "00000000"],
            })),
        ),
        (
            "StatusMEM",
            obj(json!({
                "ProgramSize": 1800, "Free": 1200, "Heap": 150, "ProgramFlashSize": 4096, "FlashSize": 4096,
                "FlashChipId": "164020", "FlashFrequency": 40, "FlashMode": "DIO",
                "Features": ["0809", "9F9AD7DF", "0015A001", "B7F7BFCF", "05DA9BC4", "E0360DC7", "480840D2", "20200000", "04000080"],
                "Drivers": "1,2,3,4,5,7,8,9,10,11,12,16,20,21,24,26,27,29,34,35,38,50,52,59,62,63,64,82,86,87,88,121",
                "Sensors": "1,2,3,5,6,7,8,9,10,11,12,13,14,15,17,18,19,20,21,22,26,31,34,37,39,40,42,43,45,51,52,55,56,58,59,64,66,67,74,85,92,95,98,127",
            })),
        ),
        (
            "StatusNET",
            obj(json!({
                "Hostname": id.id, "IPAddress": "127.0.0.1", "Gateway": "127.0.0.1", "Subnetmask": "255.0.0.0",
                "DNSServer1": "127.0.0.1", "DNSServer2": "0.0.0.0", "Mac": dev.mac_colon(), "Webserver": 2,
                "HTTP_API": 1, "WifiConfig": 4, "WifiPower": 17.0,
            })),
        ),
        (
            "StatusMQT",
            obj(json!({
                "MqttHost": mqtt_host, "MqttPort": mqtt_port, "MqttClientMask": "DVES_%06X",
                "MqttClient": dev.mqtt.client_id, "MqttUser": mqtt_user, "MqttCount": dev.mqtt.connects(),
                "MAX_PACKET_SIZE": 1200, "KEEPALIVE": 30, "SOCKET_TIMEOUT": 4,
            })),
        ),
        (
            "StatusTIM",
            obj(json!({
                "UTC": datetime(now), "Local": datetime(now), "StartDST": "2026-03-29T02:00:00",
                "EndDST": "2026-10-25T03:00:00", "Timezone": "+00:00", "Sunrise": "07:00", "Sunset": "17:00",
            })),
        ),
    ];
    if !s.meters.is_empty() {
        v.push((
            "StatusPTH",
            obj(json!({
                "PowerDelta": vec![0; s.meters.len().max(3)], "PowerLow": 0, "PowerHigh": 0,
                "VoltageLow": 0, "VoltageHigh": 0, "CurrentLow": 0, "CurrentHigh": 0,
            })),
        ));
    }
    v.push(("StatusSNS", sns(s)));
    v.push(("StatusSTS", sts(dev, s)));
    v
}

fn sns(s: &DeviceState) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("Time".into(), json!(datetime(s.now())));
    // Tasmota numbers the sensors it finds, so a missing probe shifts the others.
    let present: Vec<(&str, f64)> = s
        .sensors
        .iter()
        .filter(|r| r.origin == Origin::Probe)
        .filter_map(|p| Some((p.name.as_deref().unwrap_or(""), p.value?)))
        .collect();
    for (k, (name, c)) in present.iter().enumerate() {
        let key = if present.len() == 1 {
            "DS18B20".to_string()
        } else {
            format!("DS18B20-{}", k + 1)
        };
        m.insert(key, json!({"Id": name, "Temperature": round(*c, 1)}));
    }
    let pressure = humidity_sensors(s, &mut m);
    for k in 0..s.covers.len() {
        let (key, v) = tasmota_shutter::entry(s, k);
        m.insert(key, v);
    }
    if !s.meters.is_empty() {
        m.insert("ENERGY".into(), Value::Object(energy(s)));
    }
    m.insert(
        "ESP32".into(),
        json!({"Temperature": round(s.temperature, 1)}),
    );
    if pressure {
        m.insert("PressureUnit".into(), json!("hPa"));
    }
    m.insert("TempUnit".into(), json!("C"));
    m
}

/// Temperature and humidity sensors (a DHT22 add-on reading), each named by its type: `AM2301` (how Tasmota
/// names a DHT22) unless the sensor is called `SI7021` or `BME280`. Returns whether a pressure was reported.
fn humidity_sensors(s: &DeviceState, m: &mut Map<String, Value>) -> bool {
    let mut pressure = false;
    let temps = s
        .sensors
        .iter()
        .filter(|r| r.origin == Origin::Dht22 && r.quantity == SensorQuantity::Temperature);
    for t in temps {
        let Some(h) = s.sensors.iter().find(|r| {
            r.origin == Origin::Dht22 && r.quantity == SensorQuantity::Humidity && r.id == t.id
        }) else {
            continue;
        };
        // A sensor that does not answer is left out, as Tasmota does.
        let (Some(c), Some(rh)) = (t.value, h.value) else {
            continue;
        };
        let name = t.name.as_deref().unwrap_or("").to_ascii_uppercase();
        let kind = match name.as_str() {
            "SI7021" | "BME280" => name.as_str(),
            _ => "AM2301",
        };
        let mut o = Map::new();
        o.insert("Temperature".into(), json!(round(c, 1)));
        o.insert("Humidity".into(), json!(round(rh, 1)));
        o.insert("DewPoint".into(), json!(round(dew_point(c, rh), 1)));
        if kind == "BME280" {
            o.insert("Pressure".into(), json!(1013.2));
            pressure = true;
        }
        let mut key = kind.to_string();
        let mut n = 2;
        while m.contains_key(&key) {
            key = format!("{kind}-{n}");
            n += 1;
        }
        m.insert(key, Value::Object(o));
    }
    pressure
}

/// One value per meter: a plain number with one meter, an array with several.
fn energy(s: &DeviceState) -> Map<String, Value> {
    let views: Vec<MeterView> = (0..s.meters.len()).map(|i| s.meter(i)).collect();
    let per = |f: &dyn Fn(&MeterView) -> f64, digits: i32| -> Value {
        // Tasmota prints fixed decimals: whole-number resolutions (W, V) as integers.
        let vals: Vec<Value> = views
            .iter()
            .map(|v| match round(f(v), digits) {
                x if digits == 0 => json!(x as i64),
                x => json!(x),
            })
            .collect();
        match vals.as_slice() {
            [one] => one.clone(),
            _ => Value::Array(vals),
        }
    };
    let apparent = |v: &MeterView| v.voltage * v.current;
    let mut m = Map::new();
    m.insert("TotalStartTime".into(), json!(datetime(s.started_unix)));
    m.insert("Total".into(), per(&|v| v.energy_wh / 1000.0, 3));
    m.insert("Yesterday".into(), per(&|_| 0.0, 3));
    m.insert("Today".into(), per(&|v| v.today_wh / 1000.0, 3));
    if views.iter().any(|v| v.returned_wh > 0.0) {
        m.insert("ExportActive".into(), per(&|v| v.returned_wh / 1000.0, 3));
    }
    m.insert("Power".into(), per(&|v| v.power, 0));
    m.insert("ApparentPower".into(), per(&apparent, 0));
    m.insert(
        "ReactivePower".into(),
        per(
            &|v| (apparent(v).powi(2) - v.power.powi(2)).max(0.0).sqrt(),
            0,
        ),
    );
    m.insert("Factor".into(), per(&|v| v.pf, 2));
    m.insert("Voltage".into(), per(&|v| v.voltage, 0));
    m.insert("Current".into(), per(&|v| v.current, 3));
    m
}

fn sts(dev: &Device, s: &DeviceState) -> Map<String, Value> {
    let up = s.uptime();
    let mut m = obj(json!({
        "Time": datetime(s.now()),
        "Uptime": uptime_text(up),
        "UptimeSec": up,
        "Heap": 150,
        "SleepMode": "Dynamic",
        "Sleep": 50,
        "LoadAvg": 19,
        "MqttCount": dev.mqtt.connects(),
    }));
    for i in 0..s.outputs.len() {
        m.insert(power_key(s, i), json!(power_text(s, i)));
    }
    m.insert(
        "Wifi".into(),
        json!({
            "AP": 1, "SSId": "emulator", "BSSId": "02:00:00:00:00:01", "Channel": 6, "Mode": "11n",
            "RSSI": 90, "Signal": -55, "LinkCount": 1, "Downtime": "0T00:00:03",
        }),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(uptime_text(93_784), "1T02:03:04");
        assert_eq!(datetime(1_767_225_600.0), "2026-01-01T00:00:00");
    }
}
