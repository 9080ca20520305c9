//! Tasmota over its HTTP command API (`/cm?cmnd=...`).
//!
//! Relay states come from the numeric `Status.Power` bitmask where present, because the `POWER` texts follow
//! the build's language ("EIN"/"AUS"). Energy totals are kWh on the wire and Wh here; multi-channel `ENERGY`
//! arrays give one meter per channel. DS18B20 probes are matched by their `Id` (or sensor key); a probe named
//! like its device reads the chip temperature (`ESP32`/`ESP8266`).

use serde_json::Value;

use super::Credentials;
use super::http::Http;
use super::json::{at, num, text};
use super::switching::{Relay, SetAnswer};
use super::{AuthProblem, Driver, OutputAction};
use crate::clock;
use crate::error::{Error, Result};
use crate::objects::{Device, OutputChange};

/// Drives one Tasmota device.
pub(crate) struct Tasmota {
    http: Http,
    base: String,
    credentials: Credentials,
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

    fn command(&self, dev: &mut Device, cmnd: &str) -> Result<Value> {
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
            // Every command smartdev sends is a read or an absolute set (see `switching`).
            idempotent: true,
        };
        let reply = match self.http.send(dev, &req)? {
            super::http::Reply::Json(v) => v,
            super::http::Reply::Unauthorized(_) => return Err(self.auth_error(dev, cmnd)),
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
        if text(&reply, &["Command"]).as_deref() == Some("Unknown") {
            return Err(Error::Device {
                device: dev.label(),
                message: format!("command '{cmnd}' is unknown to this firmware"),
            });
        }
        Ok(reply)
    }

    fn contact(&mut self, dev: &mut Device) -> Result<()> {
        let status = self.command(dev, "Status 0")?;
        apply_status(dev, &status, &clock::rfc3339_now());
        Ok(())
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

    fn probe(&mut self, dev: &Device) -> bool {
        let url = format!("{}/cm?cmnd=Status", self.base);
        self.http.answers(dev, &url, "command 'Status'")
    }
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

/// Copies a `Status 0` answer into the device. Values the device does not report become `None`.
pub(crate) fn apply_status(dev: &mut Device, s: &Value, now: &str) {
    dev.mac_address = text(s, &["StatusNET", "Mac"]).or(dev.mac_address.take());
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
        if let Some(on) = mask.map(|m| m >> i & 1 == 1).or_else(from_text) {
            out.state = Some(on);
        }
    }
    let sns = s.get("StatusSNS").unwrap_or(&Value::Null);
    let energy = sns.get("ENERGY").unwrap_or(&Value::Null);
    for (i, m) in dev.meters.iter_mut().enumerate() {
        m.power = channel(energy, "Power", i);
        // One voltage serves every channel of a single-phase device.
        m.voltage = channel(energy, "Voltage", i).or_else(|| channel(energy, "Voltage", 0));
        m.current = channel(energy, "Current", i);
        m.power_factor = channel(energy, "Factor", i);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{Meter, Output, TempProbe};
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
}
