//! Tasmota over its HTTP command API (`/cm?cmnd=...`), or over MQTT (`Channel: mqtt`: `cmnd/…` with answers on
//! `stat/…`, telemetry from `tele/…` taken into the last `Status 0` answer; see `actor/mqtt.rs`).
//!
//! Relay states come from the numeric `Status.Power` bitmask where present, because the `POWER` texts follow
//! the build's language ("EIN"/"AUS"). Energy totals are kWh on the wire and Wh here; multi-channel `ENERGY`
//! arrays give one meter per channel (`Frequency` and `Voltage` may be one value for all). DS18B20 probes are
//! matched by their `Id` (or sensor key); a probe named like its device reads the chip temperature
//! (`ESP32`/`ESP8266`).
//!
//! Covers are shutters (`SetOption80 1`, `ShutterRelay<n>`): cover i is `StatusSNS.Shutter<i+1>`
//! (`Position`, `Direction` 1 opening / -1 closing / 0 still); a configured cover the device does not report
//! leaves the cover unknown and says so in `Device::config_mismatch`. Moving one sends `ShutterOpen<n>`,
//! `ShutterClose<n>`, `ShutterStop<n>` or `ShutterPosition<n> <pos>`, then reads the shutter from the answer or
//! from `Status 10`.
//!
//! Sensors are matched by name: a configured sensor reads the `StatusSNS` object whose key is its `Name`
//! (`AM2301`, `SI7021`, `BME280`, `SHT3X`, `DS18B20-1`, ...; a DS18B20 also by its `Id`) and takes its
//! `Temperature`, `Humidity` or `Voltage`. Tasmota's ADC (`ANALOG`) and ADS1115 blocks report raw counts or
//! user-scaled ranges, not volts, so they give no voltage; sensors that report `Voltage` (INA219, INA226) do.

use serde_json::Value;

use super::Credentials;
use super::http::Http;
use super::json::{at, num, text};
use super::switching::{Relay, SetAnswer};
use super::tasmota_light;
use super::{AuthProblem, Driver, OutputAction};
use crate::clock;
use crate::error::{Error, Result};
use crate::light::LightChange;
use crate::models::SensorQuantity;
use crate::objects::{Cover, CoverAction, CoverState, Device, OutputChange};

/// Drives one Tasmota device.
pub(crate) struct Tasmota {
    http: Http,
    base: String,
    credentials: Credentials,
    /// Configured covers whose shutter the last status did not report (shutter mode not enabled).
    missing_shutters: Vec<usize>,
    /// During the first contact at open of a device without `Covers`: the covers its shutters become.
    follow: Option<std::sync::Arc<crate::plan::Follow>>,
    /// What its light can do, from the last status (`None`: it reports no light).
    light: Option<crate::light::LightCaps>,
    /// `Channel: mqtt`: commands through the broker (`cmnd/…`, answers on `stat/…`), never HTTP.
    pub(crate) mqtt: Option<std::sync::Arc<crate::mqtt::link::Port>>,
    /// Over MQTT: the last `Status 0` answer, which telemetry (`STATE`, `SENSOR`) updates in place.
    last_status: Option<Value>,
}

/// Texts for "on" and "off" in Tasmota's language builds, upper-case.
const ON_TEXTS: [&str; 10] = [
    "ON",
    "EIN",
    "AAN",
    "ALLUME",
    "ACCESO",
    "ENCENDIDO",
    "LIGADO",
    "PÅ",
    "WŁ",
    "1",
];
const OFF_TEXTS: [&str; 10] = [
    "OFF",
    "AUS",
    "UIT",
    "ETEINT",
    "SPENTO",
    "APAGADO",
    "DESLIGADO",
    "AV",
    "WYŁ",
    "0",
];

impl Tasmota {
    /// A driver for the device at `base` (`http://host:port`).
    pub(crate) fn new(http: Http, base: String, credentials: Credentials) -> Self {
        Tasmota {
            http,
            base,
            credentials,
            missing_shutters: Vec::new(),
            follow: None,
            light: None,
            mqtt: None,
            last_status: None,
        }
    }

    fn auth_error(&self, dev: &Device, cmnd: &str) -> Error {
        let problem = if self.credentials.password.is_some() {
            AuthProblem::Refused { user: true }
        } else {
            AuthProblem::Missing { user: true }
        };
        super::auth_error(dev, &format!("command '{cmnd}'"), problem)
    }

    pub(super) fn command(&self, dev: &mut Device, cmnd: &str) -> Result<Value> {
        let reply = self.send(dev, cmnd, true)?;
        if unknown(&reply) {
            return Err(Error::Device {
                device: dev.label(),
                message: format!("command '{cmnd}' is unknown to this firmware"),
            });
        }
        Ok(reply)
    }

    /// Sends one command (over HTTP with the credentials in the query, or through the broker) with the retry
    /// policy unless not `idempotent`, and returns the answer; authentication refusals and `WARNING` answers
    /// are errors, an unknown command is left to the caller.
    pub(super) fn send(&self, dev: &mut Device, cmnd: &str, idempotent: bool) -> Result<Value> {
        let reply = match &self.mqtt {
            Some(port) => self.send_mqtt(dev, port, cmnd, idempotent)?,
            None => self.send_http(dev, cmnd, idempotent)?,
        };
        // Firmware before 8.2.3 says so with HTTP 200 and a WARNING body.
        if text(&reply, &["WARNING"]).is_some_and(|w| w.contains("user=")) {
            return Err(self.auth_error(dev, cmnd));
        }
        if let Some(w) = text(&reply, &["WARNING"]) {
            return Err(Error::Device {
                device: dev.label(),
                message: format!("command '{cmnd}': {w}"),
            });
        }
        Ok(reply)
    }

    fn send_http(&self, dev: &mut Device, cmnd: &str, idempotent: bool) -> Result<Value> {
        use crate::url::encode_component;
        let mut url = format!("{}/cm?cmnd={}", self.base, encode_component(cmnd));
        if let Some(pw) = &self.credentials.password {
            // Tasmota takes its web credentials in the query; URLs are never logged.
            url.push_str(&format!(
                "&user={}&password={}",
                encode_component(self.credentials.user()),
                encode_component(pw.expose())
            ));
        }
        let req = super::http::Request {
            url: &url,
            body: None,
            what: &format!("command '{cmnd}'"),
            headers: Vec::new(),
            // Every command smartdev sends is a read or an absolute set (see `switching`), but `Upgrade`.
            idempotent,
            text: false,
        };
        match self.http.send(dev, &req)? {
            super::http::Reply::Json(v) => Ok(v),
            super::http::Reply::Unauthorized(_) => Err(self.auth_error(dev, cmnd)),
        }
    }

    /// `cmnd/<topic>/<Command>` with its argument as the payload; the answer is the next `stat/<topic>/RESULT`
    /// (`STATUS<n>` for `Status n`; `Status 0` is sent as `Status0`, whose answer is one message). The HTTP
    /// rules: `ResponseTimeout` per attempt, only idempotent commands sent again.
    fn send_mqtt(
        &self,
        dev: &mut Device,
        port: &crate::mqtt::link::Port,
        cmnd: &str,
        idempotent: bool,
    ) -> Result<Value> {
        let (name, arg) = cmnd.split_once(' ').unwrap_or((cmnd, ""));
        let (name, arg, levels) = match (name.eq_ignore_ascii_case("Status"), arg.trim()) {
            (true, "0") => ("Status0".to_string(), "", vec!["STATUS0".to_string()]),
            (true, "") => ("Status".to_string(), "", vec!["STATUS".to_string()]),
            (true, n) => ("Status".to_string(), n, vec![format!("STATUS{n}")]),
            // `SetOption4 1` answers on `stat/<topic>/<COMMAND>` instead.
            (false, a) => (
                name.to_string(),
                a,
                vec!["RESULT".to_string(), name.to_ascii_uppercase()],
            ),
        };
        let what = format!("command '{cmnd}'");
        let attempts = if idempotent { self.http.attempts() } else { 1 };
        let mut n = 0;
        loop {
            n += 1;
            if let Some(why) = port.unavailable() {
                self.http.record_reach(false);
                return Err(Error::Device {
                    device: dev.label(),
                    message: format!("{what}: {why}"),
                });
            }
            match port.command(&name, arg, levels.clone(), self.http.timeout()) {
                Ok(Some(v)) => {
                    self.http.record_reach(true);
                    return Ok(v);
                }
                Ok(None) => {}
                Err(why) => {
                    self.http.record_reach(false);
                    return Err(Error::Device {
                        device: dev.label(),
                        message: format!("{what}: {why}"),
                    });
                }
            }
            if n >= attempts || self.http.closing() || !self.http.pause() {
                break;
            }
        }
        self.http.record_reach(false);
        Err(Error::Timeout {
            device: dev.label(),
            request: format!("{what} over MQTT"),
            attempts: n,
        })
    }

    fn contact(&mut self, dev: &mut Device) -> Result<()> {
        let status = self.command(dev, "Status 0")?;
        if let Some(follow) = &self.follow {
            take_shutters(dev, &status, follow);
        }
        self.take_status(dev, &status);
        if self.mqtt.is_some() {
            // Telemetry before this read is older than it.
            if let Some(port) = &self.mqtt {
                port.take_telemetry();
            }
            self.last_status = Some(status);
        }
        Ok(())
    }

    fn take_status(&mut self, dev: &mut Device, status: &Value) {
        if let Some(missing) = apply_status(dev, status, &clock::rfc3339_now()) {
            self.missing_shutters = missing;
        }
        self.take_light(dev, status.get("StatusSTS"));
    }

    /// Over MQTT, a read telemetry asked for: `STATE` stands for `StatusSTS` and `SENSOR` for `StatusSNS` in
    /// the last `Status 0` answer (parsed as that answer), so no request is made. Without one, a full read.
    fn take_telemetry(&mut self, dev: &mut Device) -> Result<()> {
        let (state, sensor) = match &self.mqtt {
            Some(port) => port.take_telemetry(),
            None => (None, None),
        };
        let Some(Value::Object(mut status)) = self.last_status.take() else {
            return self.read(dev);
        };
        if state.is_none() && sensor.is_none() {
            // Nothing new (an announcement, dropped messages): ask the device.
            return self.read(dev);
        }
        if let Some(state) = state {
            // The relay bitmask of the old answer is older than the texts in STATE.
            if let Some(Value::Object(st)) = status.get_mut("Status") {
                st.remove("Power");
            }
            status.insert("StatusSTS".into(), state);
        }
        if let Some(sensor) = sensor {
            status.insert("StatusSNS".into(), sensor);
        }
        let status = Value::Object(status);
        self.http.record_reach(true);
        self.take_status(dev, &status);
        self.last_status = Some(status);
        Ok(())
    }

    /// The light's capabilities and state from a `StatusSTS` or `State` object, on the last output.
    fn take_light(&mut self, dev: &mut Device, sts: Option<&Value>) {
        self.light = tasmota_light::caps(sts);
        if let (Some(caps), Some(sts), Some(out)) = (self.light, sts, dev.outputs.last_mut()) {
            tasmota_light::apply(out, sts, caps);
        }
    }

    /// Why cover `index` cannot be moved: the device is not in shutter mode for it.
    fn no_shutter(&self, dev: &Device, index: usize) -> Error {
        let message = match &dev.config_mismatch {
            Some(m) if self.missing_shutters.contains(&index) => m.clone(),
            _ => shutter_mode_message(dev, &[index]),
        };
        Error::Unsupported {
            device: dev.label(),
            message,
        }
    }

    /// Relay states from the `Status` bitmask.
    fn relay_mask(&self, dev: &mut Device) -> Result<u64> {
        let s = self.command(dev, "Status")?;
        power_mask(&s).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: "command 'Status': the answer has no Status.Power".into(),
        })
    }
}

impl Relay for Tasmota {
    fn reports_previous(&self) -> bool {
        false
    }

    fn output_state(&mut self, dev: &mut Device, index: usize) -> Result<bool> {
        Ok(self.relay_mask(dev)? >> index & 1 == 1)
    }

    fn set_output(&mut self, dev: &mut Device, index: usize, on: bool) -> Result<SetAnswer> {
        let n = index + 1;
        let answer = self.command(dev, &format!("Power{n} {}", u8::from(on)))?;
        let word = text(&answer, &[&format!("POWER{n}")])
            .or_else(|| (n == 1).then(|| text(&answer, &["POWER"])).flatten());
        let now = match word.as_deref().and_then(power_text) {
            Some(on) => on,
            // An unknown language: ask the bitmask.
            None => self.output_state(dev, index)?,
        };
        Ok(SetAnswer { was: None, now })
    }
}

impl Driver for Tasmota {
    fn read(&mut self, dev: &mut Device) -> Result<()> {
        self.contact(dev)
    }

    fn set_quick(&mut self, quick: bool) {
        self.http.set_quick(quick);
    }

    fn follow(&mut self, follow: Option<std::sync::Arc<crate::plan::Follow>>) {
        self.follow = follow;
    }

    fn reach(&mut self) -> Option<bool> {
        self.http.take_reach()
    }

    fn switch(
        &mut self,
        dev: &mut Device,
        index: usize,
        action: OutputAction,
    ) -> Result<OutputChange> {
        super::switching::switch(self, dev, index, action)
    }

    /// `ShutterOpen<n>`, `ShutterClose<n>`, `ShutterStop<n>` or `ShutterPosition<n> <pos>` (n = index + 1), then
    /// the shutter's state from the answer, or from `Status 10` when the answer does not carry it.
    fn check_light(&self, dev: &Device, index: usize, change: &LightChange) -> Result<()> {
        let model = "this Tasmota device";
        let n = dev.outputs.len();
        if self.light.is_none() || index + 1 != n {
            let what = if self.light.is_none() {
                "reports no light (no Dimmer in its status)".to_string()
            } else {
                format!("has its light on output channel {} (its last one)", n - 1)
            };
            return Err(Error::Unsupported {
                device: dev.label(),
                message: format!("{model} {what}; use change_output to switch relays"),
            });
        }
        let caps = super::light_caps(dev, self.light, model)?;
        change.check_caps(&caps, &dev.label(), model)?;
        if let Some(m) = tasmota_light::check_transition(change) {
            return Err(Error::InvalidArgument(m));
        }
        Ok(())
    }

    /// The change as separate commands (each answered, each an absolute set), then `State` for the result.
    fn light(&mut self, dev: &mut Device, index: usize, change: &LightChange) -> Result<()> {
        self.check_light(dev, index, change)?;
        let n = dev.outputs.len();
        for cmnd in tasmota_light::commands(change, n) {
            self.command(dev, &cmnd)?;
        }
        let state = self.command(dev, "State")?;
        let power = text(&state, &[&format!("POWER{n}")])
            .or_else(|| (n == 1).then(|| text(&state, &["POWER"])).flatten());
        if let Some(on) = power.as_deref().and_then(power_text) {
            dev.outputs[index].state = Some(on);
        }
        self.take_light(dev, Some(&state));
        Ok(())
    }

    fn cover(&mut self, dev: &mut Device, index: usize, action: CoverAction) -> Result<()> {
        if index >= dev.covers.len() {
            return Err(Error::Unsupported {
                device: dev.label(),
                message: format!("no cover channel {index} is configured"),
            });
        }
        if self.missing_shutters.contains(&index) {
            return Err(self.no_shutter(dev, index));
        }
        let n = index + 1;
        let cmnd = match action {
            CoverAction::Open => format!("ShutterOpen{n}"),
            CoverAction::Close => format!("ShutterClose{n}"),
            CoverAction::Stop => format!("ShutterStop{n}"),
            CoverAction::Position(p) => format!("ShutterPosition{n} {}", p.min(100)),
        };
        let answer = self.send(dev, &cmnd, true)?;
        // A shutter the firmware does not have answers as an unknown command.
        if unknown(&answer) {
            return Err(self.no_shutter(dev, index));
        }
        let key = format!("Shutter{n}");
        let state = match answer.get(&key).filter(|v| v.is_object()) {
            Some(v) => v.clone(),
            None => {
                let status = self.command(dev, "Status 10")?;
                match status.get("StatusSNS").and_then(|sns| sns.get(&key)) {
                    Some(v) if v.is_object() => v.clone(),
                    _ => {
                        return Err(Error::Device {
                            device: dev.label(),
                            message: format!(
                                "command 'Status 10': the answer has no {key} after '{cmnd}'"
                            ),
                        });
                    }
                }
            }
        };
        if let Some(c) = dev.covers.get_mut(index) {
            apply_shutter(c, Some(&state));
        }
        Ok(())
    }

    fn read_for_event(&mut self, dev: &mut Device) -> Result<()> {
        match self.mqtt {
            Some(_) => self.take_telemetry(dev),
            None => self.read(dev),
        }
    }

    fn probe(&mut self, dev: &Device) -> bool {
        if let Some(port) = &self.mqtt {
            return port.unavailable().is_none();
        }
        let url = format!("{}/cm?cmnd=Status", self.base);
        self.http.answers(dev, &url, "command 'Status'")
    }

    fn check_firmware(&mut self, dev: &mut Device) -> Result<crate::FirmwareInfo> {
        self.check(dev)
    }

    fn start_update(
        &mut self,
        dev: &mut Device,
        channel: crate::FirmwareChannel,
    ) -> Result<Option<String>> {
        self.start(dev, channel)
    }

    fn firmware_state(&mut self, dev: &mut Device) -> Result<super::FirmwareState> {
        self.state(dev)
    }
}

/// Whether an answer is Tasmota's `{"Command":"Unknown"}`.
fn unknown(reply: &Value) -> bool {
    text(reply, &["Command"]).as_deref() == Some("Unknown")
}

/// The mismatch message for configured covers (indices) the device reports no shutter for, with the fix.
fn shutter_mode_message(dev: &Device, missing: &[usize]) -> String {
    let names: Vec<String> = missing
        .iter()
        .map(|&i| {
            let name = dev.covers.get(i).map_or("?", |c| c.name.as_str());
            format!("'{name}' (Shutter{})", i + 1)
        })
        .collect();
    let relays: Vec<String> = missing
        .iter()
        .map(|&i| format!("ShutterRelay{} <its first relay>", i + 1))
        .collect();
    let (what, verb, pronoun) = if missing.len() == 1 {
        ("cover", "is", "it stays")
    } else {
        ("covers", "are", "they stay")
    };
    format!(
        "{what} {} {verb} configured but the device reports no such shutter: shutter mode is not enabled on the device; enable it with SetOption80 1 and {}, then restart the device, or remove the {what} from the configuration. Until then {pronoun} unknown",
        names.join(", "),
        relays.join(", ")
    )
}

/// Copies one `Shutter<n>` object (`Position`, `Direction`, `Target`, `Tilt`) into `c`; `None` (the device
/// reports no such shutter) makes everything unknown.
pub(crate) fn apply_shutter(c: &mut Cover, v: Option<&Value>) {
    let Some(v) = v.filter(|v| v.is_object()) else {
        c.state = None;
        c.position = None;
        c.calibrated = None;
        return;
    };
    // Tasmota shutters are calibrated by their open and close durations: a reported shutter has a position.
    c.calibrated = Some(true);
    c.position = num(v, &["Position"])
        .or_else(|| num(v, &["position"]))
        .filter(|p| (0.0..=100.0).contains(p));
    let direction = ["Direction", "direction"]
        .iter()
        .find_map(|k| at(v, &[k]))
        .and_then(Value::as_i64);
    c.state = match direction {
        Some(1) => Some(CoverState::Opening),
        Some(-1) => Some(CoverState::Closing),
        Some(0) => Some(match c.position {
            Some(p) if p >= 100.0 => CoverState::Open,
            Some(p) if p <= 0.0 => CoverState::Closed,
            _ => CoverState::Stopped,
        }),
        _ => None,
    };
}

/// `Some(true)` for an "on" text in any known language, `Some(false)` for "off".
pub(crate) fn power_text(word: &str) -> Option<bool> {
    let w = word.trim().to_uppercase();
    if ON_TEXTS.contains(&w.as_str()) {
        Some(true)
    } else if OFF_TEXTS.contains(&w.as_str()) {
        Some(false)
    } else {
        None
    }
}

/// The relay bitmask `Status.Power` (a number, or a decimal string on some builds).
pub(crate) fn power_mask(s: &Value) -> Option<u64> {
    match at(s, &["Status", "Power"])? {
        Value::Number(n) => n.as_u64(),
        Value::String(t) => t.trim().parse().ok(),
        _ => None,
    }
}

/// `1T04:03:06` (days T hh:mm:ss) in seconds.
fn uptime_text(t: &str) -> Option<u64> {
    let (days, clock) = t.split_once('T')?;
    let parts: Vec<u64> = clock
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = parts[..] else { return None };
    // Checked: absurd fields (a fuzzer's `0T+111111111111111111:0:0`) give no uptime instead of overflowing.
    days.parse::<u64>()
        .ok()?
        .checked_mul(86400)?
        .checked_add(h.checked_mul(3600)?)?
        .checked_add(m.checked_mul(60)?)?
        .checked_add(s)
}

/// One channel of an `ENERGY` field: array element `i`, or a plain number for channel 0.
fn channel(energy: &Value, key: &str, i: usize) -> Option<f64> {
    match energy.get(key)? {
        Value::Array(a) => a.get(i)?.as_f64(),
        Value::Number(n) if i == 0 => n.as_f64(),
        _ => None,
    }
}

/// Copies a `Status 0` answer into the device. Values the device does not report become `None`. Returns the
/// configured covers whose shutter the answer lacks (`None` when the answer has no `StatusSNS` to tell), and
/// sets or clears `Device::config_mismatch` accordingly.
pub(crate) fn apply_status(dev: &mut Device, s: &Value, now: &str) -> Option<Vec<usize>> {
    dev.mac_address = crate::driver::json::mac(s, &["StatusNET", "Mac"]).or(dev.mac_address.take());
    dev.firmware = text(s, &["StatusFWR", "Version"]);
    dev.uptime = num(s, &["StatusSTS", "UptimeSec"])
        .map(|u| u.max(0.0) as u64)
        .or_else(|| text(s, &["StatusPRM", "Uptime"]).and_then(|t| uptime_text(&t)));
    let mask = power_mask(s);
    let single = dev.outputs.len() == 1;
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        let n = i + 1;
        let from_text = || {
            let sts = s.get("StatusSTS")?;
            let word = text(sts, &[&format!("POWER{n}")])
                .or_else(|| single.then(|| text(sts, &["POWER"])).flatten())?;
            power_text(&word)
        };
        // A mask of 64 bits says nothing about relay 65 and beyond.
        let from_mask = mask.filter(|_| i < 64).map(|m| m >> i & 1 == 1);
        if let Some(on) = from_mask.or_else(from_text) {
            out.state = Some(on);
        }
    }
    let sns_obj = s.get("StatusSNS").filter(|v| v.is_object());
    let sns = sns_obj.unwrap_or(&Value::Null);
    let energy = sns.get("ENERGY").unwrap_or(&Value::Null);
    for (i, m) in dev.meters.iter_mut().enumerate() {
        m.power = channel(energy, "Power", i);
        // One voltage (and frequency) serves every channel of a single-phase device.
        m.voltage = channel(energy, "Voltage", i).or_else(|| channel(energy, "Voltage", 0));
        m.frequency = channel(energy, "Frequency", i).or_else(|| channel(energy, "Frequency", 0));
        m.current = channel(energy, "Current", i);
        m.power_factor = channel(energy, "Factor", i);
        m.apparent_power = channel(energy, "ApparentPower", i);
        m.energy = channel(energy, "Total", i).map(|kwh| kwh * 1000.0);
        m.returned_energy = channel(energy, "ExportActive", i).map(|kwh| kwh * 1000.0);
    }
    dev.update_totals();
    let chip = ["ESP32", "ESP8266"]
        .iter()
        .find_map(|k| num(sns, &[k, "Temperature"]));
    dev.temperature = chip;
    let device_name = dev.name.clone();
    dev.update_probes(now, |p| {
        if p.name == device_name {
            return chip;
        }
        sns.as_object()?.iter().find_map(|(key, v)| {
            let id = text(v, &["Id"]);
            let mine = key.starts_with("DS18B20")
                && (id.as_deref() == Some(p.name.as_str()) || *key == p.name);
            if mine { num(v, &["Temperature"]) } else { None }
        })
    });
    dev.update_sensors(now, |x| {
        let field = match x.quantity {
            SensorQuantity::Temperature => "Temperature",
            SensorQuantity::Humidity => "Humidity",
            SensorQuantity::Voltage => "Voltage",
        };
        let block = sns.get(&x.name).filter(|v| v.is_object()).or_else(|| {
            // A DS18B20 may be named by its Id.
            sns.as_object()?.iter().find_map(|(key, v)| {
                (key.starts_with("DS18B20") && text(v, &["Id"]).as_deref() == Some(x.name.as_str()))
                    .then_some(v)
            })
        })?;
        num(block, &[field])
    });
    let mut missing = Vec::new();
    for (i, c) in dev.covers.iter_mut().enumerate() {
        let shutter = sns
            .get(format!("Shutter{}", i + 1))
            .filter(|v| v.is_object());
        if shutter.is_none() && sns_obj.is_some() {
            missing.push(i);
        }
        apply_shutter(c, shutter);
    }
    // Without StatusSNS the answer says nothing about shutter mode.
    sns_obj?;
    let message = (!missing.is_empty()).then(|| shutter_mode_message(dev, &missing));
    crate::driver::profile::record_mismatch(
        dev,
        message,
        "every configured cover is a shutter now",
    );
    Some(missing)
}

/// At the first contact at open of a device without `Covers`: each shutter the device reports
/// (`Shutter1`, `Shutter2`, … in `StatusSNS`) becomes a cover, with the ID the plan reserved for it.
fn take_shutters(dev: &mut Device, status: &Value, follow: &crate::plan::Follow) {
    let Some(sns) = status.get("StatusSNS").filter(|v| v.is_object()) else {
        return;
    };
    let n = (1..)
        .take_while(|i| sns.get(format!("Shutter{i}")).is_some_and(Value::is_object))
        .count();
    if n > follow.shutters.len() {
        log::warn!(
            "device {}: reports {n} shutters; only the first {} become covers without configuration: list them under Covers",
            dev.label(),
            follow.shutters.len()
        );
    }
    dev.covers = follow.shutters[..n.min(follow.shutters.len())].to_vec();
    if n > 0 {
        log::info!(
            "device {}: {n} shutter(s) at first contact; its covers follow them (the configuration lists no Covers)",
            dev.label()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::canned::Script;
    use crate::driver::canned::testing::{self, ok, targets};
    use crate::objects::{Meter, Output, Sensor, TempProbe};
    use serde_json::json;

    fn device(outputs: usize, meters: usize) -> Device {
        Device {
            name: "Plug".into(),
            outputs: (0..outputs)
                .map(|i| Output {
                    name: format!("O{i}"),
                    ..Output::default()
                })
                .collect(),
            meters: (0..meters).map(|_| Meter::default()).collect(),
            ..Device::default()
        }
    }

    #[test]
    fn bitmask_wins_over_localised_text() {
        let mut d = device(2, 0);
        let s = json!({"Status": {"Power": 2}, "StatusSTS": {"POWER1": "EIN", "POWER2": "AUS"}});
        apply_status(&mut d, &s, "T");
        assert!(d.outputs[0].state == Some(false) && d.outputs[1].state == Some(true));
        let s = json!({"StatusSTS": {"POWER1": "EIN", "POWER2": "AUS"}});
        apply_status(&mut d, &s, "T");
        assert!(d.outputs[0].state == Some(true) && d.outputs[1].state == Some(false));
        let mut one = device(1, 0);
        apply_status(&mut one, &json!({"StatusSTS": {"POWER1": "ON"}}), "T");
        assert!(
            one.outputs[0].state == Some(true),
            "single relay reporting POWER1"
        );
    }

    #[test]
    fn energy_in_wh_and_channels() {
        let mut d = device(2, 2);
        let s = json!({"StatusSNS": {"ENERGY": {"Total": [1.5, 0.25], "Power": [100, -20], "Voltage": 230,
            "Current": [0.45, 0.1], "Factor": [0.95, 0.5]}},
            "StatusPRM": {"Uptime": "1T04:03:06"}, "StatusNET": {"Mac": "24:62:AB:AA:AA:AA"},
            "StatusFWR": {"Version": "11.1.0(tasmota)"}});
        apply_status(&mut d, &s, "T");
        assert_eq!(d.meters[0].energy, Some(1500.0));
        assert_eq!(d.meters[1].energy, Some(250.0));
        assert_eq!(d.meters[1].power, Some(-20.0));
        assert_eq!(d.meters[1].voltage, Some(230.0));
        assert_eq!(d.total_power, Some(80.0));
        assert_eq!(d.uptime, Some(86400 + 4 * 3600 + 3 * 60 + 6));
        assert_eq!(d.firmware.as_deref(), Some("11.1.0(tasmota)"));
    }

    #[test]
    fn probes_by_id_and_chip_temperature() {
        let mut d = device(1, 0);
        d.temp_probes = vec![
            TempProbe {
                name: "01131B7A4B6F".into(),
                ..TempProbe::default()
            },
            TempProbe {
                name: "Plug".into(),
                ..TempProbe::default()
            },
            TempProbe {
                name: "DS18B20-2".into(),
                ..TempProbe::default()
            },
        ];
        let s = json!({"StatusSNS": {"DS18B20-1": {"Id": "0000000000AA", "Temperature": 5.0},
            "DS18B20-2": {"Id": "01131B7A4B6F", "Temperature": 21.3}, "ESP32": {"Temperature": 48.9}}});
        apply_status(&mut d, &s, "T");
        assert_eq!(d.temp_probes[0].temperature, Some(21.3));
        assert_eq!(d.temp_probes[1].temperature, Some(48.9));
        assert_eq!(d.temp_probes[2].temperature, Some(21.3));
        assert_eq!(d.temperature, Some(48.9));
    }

    #[test]
    fn words_and_masks() {
        assert_eq!(power_text("ein"), Some(true));
        assert_eq!(power_text("AUS"), Some(false));
        assert_eq!(power_text("maybe"), None);
        assert_eq!(power_mask(&json!({"Status": {"Power": "3"}})), Some(3));
        assert_eq!(uptime_text("bad"), None);
    }
    fn with_covers(mut d: Device, n: usize) -> Device {
        d.covers = (0..n)
            .map(|i| Cover {
                name: format!("Blind {i}"),
                ..Cover::default()
            })
            .collect();
        d
    }

    #[test]
    fn shutters_are_covers_by_number() {
        let mut d = with_covers(device(2, 0), 3);
        let s = json!({"StatusSNS": {"Time": "2024-05-01T10:00:00",
            "Shutter1": {"Position": 35, "Direction": 1, "Target": 100, "Tilt": 0},
            "Shutter2": {"Position": 0, "Direction": 0, "Target": 0, "Tilt": 0},
            "Shutter3": {"Position": 100, "Direction": 0, "Target": 100}}});
        assert_eq!(apply_status(&mut d, &s, "T"), Some(vec![]));
        let got: Vec<_> = d
            .covers
            .iter()
            .map(|c| (c.state, c.position, c.calibrated))
            .collect();
        assert_eq!(
            got,
            [
                (Some(CoverState::Opening), Some(35.0), Some(true)),
                (Some(CoverState::Closed), Some(0.0), Some(true)),
                (Some(CoverState::Open), Some(100.0), Some(true)),
            ]
        );
        assert!(d.config_mismatch.is_none());
        let s = json!({"StatusSNS": {"Shutter1": {"Position": 60, "Direction": -1},
            "Shutter2": {"Position": 50, "Direction": 0}, "Shutter3": {"Position": 50}}});
        apply_status(&mut d, &s, "T");
        let states: Vec<_> = d.covers.iter().map(|c| c.state).collect();
        assert_eq!(
            states,
            [Some(CoverState::Closing), Some(CoverState::Stopped), None]
        );
    }

    #[test]
    fn a_cover_without_its_shutter_is_unknown_and_the_fix_is_named() {
        let mut d = with_covers(device(2, 0), 2);
        let s = json!({"StatusSNS": {"Shutter1": {"Position": 10, "Direction": 0}}});
        assert_eq!(apply_status(&mut d, &s, "T"), Some(vec![1]));
        let c = &d.covers[1];
        assert_eq!((c.state, c.position, c.calibrated), (None, None, None));
        let m = d.config_mismatch.clone().unwrap();
        assert!(m.contains("'Blind 1' (Shutter2)"), "{m}");
        assert!(
            m.contains("SetOption80 1") && m.contains("ShutterRelay2"),
            "{m}"
        );
        // An answer without StatusSNS says nothing about shutter mode: the message stays.
        assert_eq!(
            apply_status(&mut d, &json!({"Status": {"Power": 0}}), "T"),
            None
        );
        assert!(d.config_mismatch.is_some());
        // Shutter mode enabled: the message clears.
        let s = json!({"StatusSNS": {"Shutter1": {"Position": 10, "Direction": 0},
            "Shutter2": {"Position": 20, "Direction": 0}}});
        apply_status(&mut d, &s, "T");
        assert!(d.config_mismatch.is_none());
        assert_eq!(d.covers[1].position, Some(20.0));
    }

    fn sensor(name: &str, quantity: SensorQuantity) -> Sensor {
        Sensor {
            name: name.into(),
            quantity,
            unit: quantity.unit(),
            ..Sensor::default()
        }
    }

    #[test]
    fn sensors_by_name_and_quantity() {
        let mut d = device(1, 0);
        d.sensors = vec![
            sensor("AM2301", SensorQuantity::Temperature),
            sensor("AM2301", SensorQuantity::Humidity),
            sensor("BME280", SensorQuantity::Humidity),
            sensor("SHT3X", SensorQuantity::Temperature),
            sensor("DS18B20-2", SensorQuantity::Temperature),
            sensor("01131B7A4B6F", SensorQuantity::Temperature),
            sensor("INA219", SensorQuantity::Voltage),
            sensor("ANALOG", SensorQuantity::Voltage),
            sensor("SI7021", SensorQuantity::Humidity),
        ];
        let s = json!({"StatusSNS": {
            "AM2301": {"Temperature": 22.4, "Humidity": 51.3, "DewPoint": 11.8},
            "BME280": {"Temperature": 19.0, "Humidity": 44.1, "DewPoint": 6.6, "Pressure": 1012.4},
            "SHT3X": {"Temperature": 18.25, "Humidity": 60.0},
            "DS18B20-1": {"Id": "01131B7A4B6F", "Temperature": 5.5},
            "DS18B20-2": {"Id": "0000000000AA", "Temperature": 7.0},
            "INA219": {"Voltage": 12.31, "Current": 0.2, "Power": 2.46},
            "ANALOG": {"A0": 712},
            "SI7021": {"Temperature": "n/a", "Humidity": null},
            "TempUnit": "C"}});
        apply_status(&mut d, &s, "T");
        let v: Vec<Option<f64>> = d.sensors.iter().map(|x| x.value).collect();
        assert_eq!(
            v,
            [
                Some(22.4),
                Some(51.3),
                Some(44.1),
                Some(18.25),
                Some(7.0),
                Some(5.5),
                Some(12.31),
                None,
                None
            ]
        );
        assert_eq!(d.sensors[0].last_reading_time.as_deref(), Some("T"));
    }

    #[test]
    fn frequency_apparent_power_and_export() {
        let mut d = device(2, 2);
        let s = json!({"StatusSNS": {"ENERGY": {"Total": [1.5, 0.25], "ExportActive": [0.125, 0.0],
            "Power": [100, -20], "ApparentPower": [110, 25], "Voltage": 229.5, "Frequency": 50.02,
            "Current": [0.48, 0.11], "Factor": [0.91, 0.8]}}});
        apply_status(&mut d, &s, "T");
        let m = &d.meters;
        assert_eq!((m[0].frequency, m[1].frequency), (Some(50.02), Some(50.02)));
        assert_eq!(
            (m[0].apparent_power, m[1].apparent_power),
            (Some(110.0), Some(25.0))
        );
        assert_eq!(
            (m[0].returned_energy, m[1].returned_energy),
            (Some(125.0), Some(0.0))
        );
        assert_eq!(d.total_returned_energy, Some(125.0));
        // Not reported: None, not 0.
        apply_status(&mut d, &json!({"StatusSNS": {"ENERGY": {"Power": 5}}}), "T");
        assert_eq!(
            (
                d.meters[0].frequency,
                d.meters[0].apparent_power,
                d.meters[0].returned_energy
            ),
            (None, None, None)
        );
        assert_eq!(d.total_returned_energy, None);
    }

    #[test]
    fn hostile_status_values_are_absent_not_panics() {
        let mut d = with_covers(device(70, 2), 1);
        d.sensors = vec![sensor("AM2301", SensorQuantity::Humidity)];
        for s in [
            json!({"Status": {"Power": u64::MAX}, "StatusSNS": {"Shutter1": [1], "AM2301": 5}}),
            json!({"StatusSNS": {"Shutter1": {"Position": 1e308, "Direction": "up"},
                "ENERGY": {"Frequency": [], "ApparentPower": {"0": 1}}}}),
            json!({"StatusSNS": []}),
            json!({"StatusSNS": {"Shutter1": {"Position": -5, "Direction": 1e300}}}),
        ] {
            apply_status(&mut d, &s, "T");
            assert_eq!(d.covers[0].position, None);
            assert_eq!(d.sensors[0].value, None);
        }
    }

    /// A driver whose commands get the canned `answers` in order, after a read that found `status`.
    fn driver(d: &mut Device, status: Value, answers: Vec<Value>) -> (Tasmota, Script) {
        let script = Script::default();
        script.load(std::iter::once(&status).chain(&answers).map(ok));
        let mut t = Tasmota::new(
            testing::http(&script),
            "http://127.0.0.1:9".into(),
            Credentials::default(),
        );
        t.read(d).unwrap();
        (t, script)
    }

    fn commands(script: &Script) -> Vec<String> {
        targets(script)
            .iter()
            .map(|t| {
                let q = t.strip_prefix("/cm?cmnd=").unwrap_or(t);
                crate::url::decode(q, false)
            })
            .collect()
    }

    #[test]
    fn cover_commands_and_the_state_they_leave() {
        let mut d = with_covers(device(2, 0), 1);
        let status =
            json!({"StatusSNS": {"Shutter1": {"Position": 0, "Direction": 0, "Target": 0}}});
        let (mut t, script) = driver(
            &mut d,
            status,
            vec![
                // Answers that carry the shutter...
                json!({"Shutter1": {"Position": 0, "Direction": 1, "Target": 100, "Tilt": 0}}),
                json!({"Shutter1": {"Position": 80, "Direction": -1, "Target": 40, "Tilt": 0}}),
                // ... and one that does not: the state comes from Status 10.
                json!({"ShutterStop1": "Done"}),
                json!({"StatusSNS": {"Shutter1": {"Position": 62, "Direction": 0, "Target": 62}}}),
                json!({"ShutterClose1": 0}),
                json!({"StatusSNS": {"Shutter1": {"Position": 62, "Direction": -1, "Target": 0}}}),
            ],
        );
        assert_eq!(d.covers[0].state, Some(CoverState::Closed));
        t.cover(&mut d, 0, CoverAction::Open).unwrap();
        assert_eq!(d.covers[0].state, Some(CoverState::Opening));
        t.cover(&mut d, 0, CoverAction::Position(40)).unwrap();
        assert_eq!(d.covers[0].state, Some(CoverState::Closing));
        t.cover(&mut d, 0, CoverAction::Stop).unwrap();
        assert_eq!(
            (d.covers[0].state, d.covers[0].position),
            (Some(CoverState::Stopped), Some(62.0))
        );
        t.cover(&mut d, 0, CoverAction::Close).unwrap();
        assert_eq!(d.covers[0].state, Some(CoverState::Closing));
        assert_eq!(
            commands(&script),
            [
                "Status 0",
                "ShutterOpen1",
                "ShutterPosition1 40",
                "ShutterStop1",
                "Status 10",
                "ShutterClose1",
                "Status 10"
            ]
        );
    }

    #[test]
    fn a_cover_the_device_has_no_shutter_for_is_refused_with_the_fix() {
        let mut d = with_covers(device(2, 0), 2);
        let status = json!({"StatusSNS": {"Shutter1": {"Position": 0, "Direction": 0}}});
        let (mut t, script) = driver(&mut d, status, vec![json!({"Command": "Unknown"})]);
        // Known from the last read: nothing is sent.
        let e = t.cover(&mut d, 1, CoverAction::Open).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("SetOption80 1"), "{e}");
        assert_eq!(commands(&script), ["Status 0"]);
        // Not known (no read yet, or the firmware dropped it since): the device's "unknown command" says it.
        t.missing_shutters.clear();
        let e = t.cover(&mut d, 1, CoverAction::Stop).unwrap_err();
        assert!(e.to_string().contains("ShutterRelay2"), "{e}");
        assert_eq!(commands(&script), ["Status 0", "ShutterStop2"]);
    }
}
