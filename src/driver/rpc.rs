//! Shelly Gen2/Gen3/Gen4 over JSON-RPC (`POST /rpc`).
//!
//! One `Shelly.GetStatus` per refresh gives every component (switch, input, em, em1, pm1, temperature), so
//! separate meter calls are not needed. `Shelly.GetConfig` maps add-on probe names to `temperature:N` ids
//! (N ≥ 100, every id, gaps allowed) on first contact and after the device comes back.

use serde_json::{Value, json};

use super::Credentials;
use super::digest::{self, Challenge};
use super::http::{Http, Reply, Request};
use super::json::{at, flag, num, text};
use super::switching::{Relay, SetAnswer};
use super::{Driver, OutputAction, identify};
use crate::clock;
use crate::error::{Error, Result};
use crate::models::{MeterSource, ModelInfo};
use crate::objects::{Device, OutputChange};
use crate::webhook::install::{HookPlan, NAME_PREFIX, supported_events};

/// Drives one Gen2+ device.
pub(crate) struct Rpc {
    http: Http,
    base: String,
    model: ModelInfo,
    introduced: bool,
    probes_mapped: bool,
    next_id: u64,
    hooks: Option<HookPlan>,
    credentials: Credentials,
    /// The device's last digest challenge and the nonce count used with it (firmware 2.x lets a nonce be
    /// reused with a rising count; older firmware answers every reuse with a new challenge).
    nonce: Option<(Challenge, u32)>,
}

impl Rpc {
    /// A driver for the device at `base` (`http://host:port`).
    pub(crate) fn new(
        http: Http,
        base: String,
        model: ModelInfo,
        hooks: Option<HookPlan>,
        credentials: Credentials,
    ) -> Self {
        Rpc {
            http,
            base,
            model,
            introduced: false,
            probes_mapped: false,
            next_id: 1,
            hooks,
            credentials,
            nonce: None,
        }
    }

    fn auth_error(dev: &Device, message: &str) -> Error {
        Error::Auth {
            device: dev.label(),
            message: message.to_string(),
        }
    }

    /// Posts a frame, answering digest challenges: the cached nonce is tried first; a challenge is answered
    /// once; `stale=true` means "take the new nonce", not a wrong password.
    fn post(&mut self, dev: &mut Device, frame: &Value, what: &str) -> Result<Value> {
        let url = format!("{}/rpc", self.base);
        // Whether the nonce in hand came from a challenge to this very call.
        let mut fresh = false;
        for _ in 0..3 {
            let mut headers = Vec::new();
            if let (Some(pw), Some((ch, nc))) = (&self.credentials.password, &mut self.nonce) {
                *nc += 1;
                let value = digest::authorization(
                    ch,
                    "admin",
                    pw.expose(),
                    "POST",
                    "/rpc",
                    *nc,
                    &digest::cnonce(),
                );
                headers.push(("Authorization", value));
            }
            let req = Request {
                url: &url,
                body: Some(frame),
                what,
                headers,
                idempotent: idempotent(what),
            };
            match self.http.send(dev, &req)? {
                Reply::Json(v) => return Ok(v),
                Reply::Unauthorized(header) => {
                    if self.credentials.password.is_none() {
                        return Err(Self::auth_error(
                            dev,
                            &format!(
                                "{what}: the device requires a password; set Password for it (the user is always admin)"
                            ),
                        ));
                    }
                    let Some(ch) = header.as_deref().and_then(digest::parse_challenge) else {
                        return Err(Self::auth_error(
                            dev,
                            &format!("{what}: the device sent no usable digest challenge"),
                        ));
                    };
                    if fresh && !ch.stale {
                        self.nonce = None;
                        return Err(Self::auth_error(
                            dev,
                            &format!("{what}: the device refused the password (wrong password)"),
                        ));
                    }
                    fresh = true;
                    self.nonce = Some((ch, 0));
                }
            }
        }
        Err(Self::auth_error(
            dev,
            &format!("{what}: the device kept asking for new credentials"),
        ))
    }

    /// Calls one RPC method and returns its `result`.
    fn call(&mut self, dev: &mut Device, method: &str, params: Option<Value>) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"id": id, "src": "smartdev", "method": method});
        if let Some(p) = params {
            frame["params"] = p;
        }
        let reply = self.post(dev, &frame, &format!("RPC {method}"))?;
        parse_frame(reply, method).map_err(|e| match e {
            FrameError::Rpc(401, _) => Self::auth_error(
                dev,
                &format!("RPC {method}: the device refused the credentials"),
            ),
            FrameError::Rpc(code, message) => Error::Rpc {
                device: dev.label(),
                method: method.to_string(),
                code,
                message,
            },
            FrameError::Malformed(m) => Error::Device {
                device: dev.label(),
                message: format!("RPC {method}: {m}"),
            },
        })
    }

    /// Reads `/shelly` once per contact period: firmware, MAC and the self-reported model.
    fn introduce(&mut self, dev: &mut Device) -> Result<()> {
        let url = format!("{}/shelly", self.base);
        let info = self.http.request(dev, &url, None, "GET /shelly")?;
        dev.firmware = text(&info, &["ver"]).or_else(|| text(&info, &["fw_id"]));
        if let Some(mac) = text(&info, &["mac"]) {
            dev.mac_address = Some(mac);
        }
        // A Gen1 device at this address answers with `type` instead of `model`.
        let reported = text(&info, &["model"]).or_else(|| text(&info, &["type"]));
        let generation = num(&info, &["gen"]);
        identify(dev, &self.model, reported.as_deref(), generation.is_none());
        match self.call(dev, "Webhook.ListSupported", None) {
            Ok(r) => dev.supported_webhooks = supported_events(&r),
            Err(e) => log::debug!("device {}: no webhook list: {}", dev.label(), e.reason()),
        }
        self.introduced = true;
        Ok(())
    }

    /// Makes smartdev's hooks on the device (named `smartdev:`…) match the plan: creates what is missing,
    /// updates what differs, deletes only its own stale ones. Other software's hooks are never touched.
    fn reconcile_hooks(&mut self, dev: &mut Device) -> Result<()> {
        let Some(plan) = self.hooks.clone() else {
            return Ok(());
        };
        let mut wanted = Vec::new();
        for w in &plan.wanted {
            if dev.supported_webhooks.contains(&w.event) {
                wanted.push(w);
            } else {
                log::warn!(
                    "device {}: webhook event '{}' is not supported by the device; skipped",
                    dev.label(),
                    w.event
                );
            }
        }
        let list = self.call(dev, "Webhook.List", None)?;
        let ours: Vec<Value> = list
            .get("hooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|h| text(h, &["name"]).is_some_and(|n| n.starts_with(NAME_PREFIX)))
            .cloned()
            .collect();
        for w in &wanted {
            let desired = json!({"cid": w.channel, "enable": true, "event": w.event, "name": w.name, "urls": [w.url]});
            let existing = ours
                .iter()
                .find(|h| text(h, &["name"]).as_deref() == Some(w.name.as_str()));
            match existing {
                Some(h)
                    if ["cid", "enable", "event", "urls"]
                        .iter()
                        .all(|k| h.get(*k) == desired.get(*k)) => {}
                Some(h) => {
                    let mut update = desired.clone();
                    update["id"] = h.get("id").cloned().unwrap_or(Value::Null);
                    self.call(dev, "Webhook.Update", Some(update))?;
                }
                None => {
                    self.call(dev, "Webhook.Create", Some(desired)).map_err(|e| match e {
                        Error::Rpc { code: -108, device, .. } => Error::Device {
                            device,
                            message: format!(
                                "the device's webhook limit is reached, so '{}' could not be created; delete hooks you no longer need",
                                w.name
                            ),
                        },
                        other => other,
                    })?;
                }
            }
        }
        for (i, h) in ours.iter().enumerate() {
            let name = text(h, &["name"]).unwrap_or_default();
            // A second hook of the same name (a create whose answer was lost, in an older version) fires
            // every event twice: only the first one is kept.
            let duplicate = ours[..i]
                .iter()
                .any(|o| text(o, &["name"]).as_deref() == Some(name.as_str()));
            if duplicate || !wanted.iter().any(|w| w.name == name) {
                let id = h.get("id").cloned().unwrap_or(Value::Null);
                self.call(dev, "Webhook.Delete", Some(json!({ "id": id })))?;
            }
        }
        log::debug!(
            "device {}: {} webhook(s) in place",
            dev.label(),
            wanted.len()
        );
        Ok(())
    }

    /// Maps configured probe names to `temperature:N` ids from `Shelly.GetConfig`. Failures are logged and
    /// retried at the next refresh.
    fn map_probes(&mut self, dev: &mut Device) {
        match self.call(dev, "Shelly.GetConfig", None) {
            Ok(config) => {
                let found = probe_ids(&config);
                let label = dev.label();
                for p in dev
                    .temp_probes
                    .iter_mut()
                    .filter(|p| p.probe_id != Some(-1))
                {
                    p.probe_id = found.iter().find(|(_, n)| *n == p.name).map(|(id, _)| *id);
                    if p.probe_id.is_none() {
                        let names: Vec<String> = found
                            .iter()
                            .map(|(_, n)| crate::text::quote(n, 60))
                            .collect();
                        log::warn!(
                            "device {label}: add-on probe '{}' not found (the device names its probes: {})",
                            p.name,
                            if names.is_empty() {
                                "none".into()
                            } else {
                                names.join(", ")
                            }
                        );
                    }
                }
                self.probes_mapped = true;
            }
            Err(e) => log::debug!("device {}: probe mapping postponed: {e}", dev.label()),
        }
    }

    fn contact(&mut self, dev: &mut Device) -> Result<()> {
        if !self.introduced {
            self.introduce(dev)?;
        }
        if !self.probes_mapped && dev.temp_probes.iter().any(|p| p.probe_id != Some(-1)) {
            self.map_probes(dev);
        }
        let status = self.call(dev, "Shelly.GetStatus", None)?;
        apply_status(dev, &self.model, &status, &clock::rfc3339_now());
        Ok(())
    }
}

impl Relay for Rpc {
    fn reports_previous(&self) -> bool {
        true
    }

    fn output_state(&mut self, dev: &mut Device, index: usize) -> Result<bool> {
        let status = self.call(dev, "Switch.GetStatus", Some(json!({ "id": index })))?;
        flag(&status, &["output"]).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: "RPC Switch.GetStatus: the answer has no output".into(),
        })
    }

    fn set_output(&mut self, dev: &mut Device, index: usize, on: bool) -> Result<SetAnswer> {
        let result = self.call(dev, "Switch.Set", Some(json!({"id": index, "on": on})))?;
        let was = flag(&result, &["was_on"]).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: "RPC Switch.Set: the answer has no was_on".into(),
        })?;
        Ok(SetAnswer {
            was: Some(was),
            now: on,
        })
    }
}

impl Driver for Rpc {
    fn read(&mut self, dev: &mut Device) -> Result<()> {
        self.contact(dev)
    }

    fn sync_hooks(&mut self, dev: &mut Device) -> Result<()> {
        self.reconcile_hooks(dev)
    }

    fn forget(&mut self) {
        // Coming back: the firmware, add-on or hooks may have changed meanwhile.
        self.introduced = false;
        self.probes_mapped = false;
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
        let url = format!("{}/shelly", self.base);
        self.http.answers(dev, &url, "GET /shelly")
    }
}

/// Whether an RPC (named `RPC <method>`) may be sent again after a lost answer: reads and absolute sets may;
/// anything else (a `Webhook.Create`, a `Switch.Toggle`) gets one attempt, so it never happens twice.
fn idempotent(what: &str) -> bool {
    let verb = what.rsplit('.').next().unwrap_or("");
    verb.starts_with("Get")
        || verb.starts_with("List")
        || matches!(verb, "Set" | "Update" | "Delete")
}

/// Why an RPC answer frame is not a result.
#[derive(Debug, PartialEq)]
pub(crate) enum FrameError {
    /// The device's error object: code and message.
    Rpc(i64, String),
    /// Neither result nor error.
    Malformed(String),
}

/// Takes the `result` out of an RPC answer frame, or its error.
pub(crate) fn parse_frame(
    mut frame: Value,
    method: &str,
) -> std::result::Result<Value, FrameError> {
    if let Some(err) = frame.get("error").filter(|e| !e.is_null()) {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        // The device's own words, kept to one short line.
        let message = crate::text::escape_controls(&crate::text::clip(message, 200)).into_owned();
        return Err(FrameError::Rpc(code, message));
    }
    // Taken, not cloned: status results are a few KiB and this runs on every call.
    match frame.get_mut("result").map(Value::take) {
        Some(r) if !r.is_null() => Ok(r),
        _ => Err(FrameError::Malformed(format!(
            "the answer to {method} has neither result nor error"
        ))),
    }
}

/// Add-on probe ids and names from a `Shelly.GetConfig` result: every `temperature:N` with N ≥ 100.
pub(crate) fn probe_ids(config: &Value) -> Vec<(i64, String)> {
    let Some(map) = config.as_object() else {
        return Vec::new();
    };
    let mut found: Vec<(i64, String)> = map
        .iter()
        .filter_map(|(k, v)| {
            let id: i64 = k.strip_prefix("temperature:")?.parse().ok()?;
            (id >= 100).then(|| (id, text(v, &["name"]).unwrap_or_default()))
        })
        .collect();
    found.sort();
    found
}

/// Copies a `Shelly.GetStatus` result into the device. Values the device does not report become `None`.
pub(crate) fn apply_status(dev: &mut Device, model: &ModelInfo, s: &Value, now: &str) {
    dev.mac_address = text(s, &["sys", "mac"]).or(dev.mac_address.take());
    dev.uptime = num(s, &["sys", "uptime"]).map(|u| u.max(0.0) as u64);
    dev.restart_required = flag(s, &["sys", "restart_required"]);
    dev.update_available = at(s, &["sys", "available_updates"])
        .and_then(Value::as_object)
        .map(|u| !u.is_empty());
    for (i, input) in dev.inputs.iter_mut().enumerate() {
        // Inputs in button mode report state null: not pressed.
        input.state = flag(s, &[&format!("input:{i}"), "state"]).unwrap_or(false);
    }
    let mut temps = Vec::new();
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        let key = format!("switch:{i}");
        if let Some(on) = flag(s, &[&key, "output"]) {
            out.state = on;
        }
        out.temperature =
            num(s, &[&key, "temperature", "tC"]).filter(|_| model.temperature_monitoring);
        temps.extend(out.temperature);
    }
    dev.temperature = if temps.is_empty() {
        num(s, &["temperature:0", "tC"])
    } else {
        Some(temps.iter().sum::<f64>() / temps.len() as f64)
    };
    let source = model.meter_source();
    for (i, m) in dev.meters.iter_mut().enumerate() {
        let r = match source {
            MeterSource::Switch => {
                let k = format!("switch:{i}");
                [
                    num(s, &[&k, "apower"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&k, "aenergy", "total"]),
                    num(s, &[&k, "ret_aenergy", "total"]),
                ]
            }
            MeterSource::Em1 => {
                let (k, d) = (format!("em1:{i}"), format!("em1data:{i}"));
                [
                    num(s, &[&k, "act_power"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&d, "total_act_energy"]),
                    num(s, &[&d, "total_act_ret_energy"]),
                ]
            }
            MeterSource::Em => {
                let p = ["a", "b", "c"].get(i).copied().unwrap_or("?");
                [
                    num(s, &["em:0", &format!("{p}_act_power")]),
                    num(s, &["em:0", &format!("{p}_voltage")]),
                    num(s, &["em:0", &format!("{p}_current")]),
                    num(s, &["em:0", &format!("{p}_pf")]),
                    num(s, &["emdata:0", &format!("{p}_total_act_energy")]),
                    num(s, &["emdata:0", &format!("{p}_total_act_ret_energy")]),
                ]
            }
            MeterSource::Pm1 => {
                let k = format!("pm1:{i}");
                [
                    num(s, &[&k, "apower"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&k, "aenergy", "total"]),
                    num(s, &[&k, "ret_aenergy", "total"]),
                ]
            }
            _ => [None; 6],
        };
        [
            m.power,
            m.voltage,
            m.current,
            m.power_factor,
            m.energy,
            m.returned_energy,
        ] = r;
    }
    dev.update_totals();
    if source == MeterSource::Em {
        // The 3-phase meter reports its own totals.
        dev.total_power = num(s, &["em:0", "total_act_power"]).or(dev.total_power);
        dev.total_energy = num(s, &["emdata:0", "total_act"]).or(dev.total_energy);
    }
    let device_temp = dev.temperature;
    dev.update_probes(now, |p| match p.probe_id {
        Some(-1) => device_temp,
        Some(id) => num(s, &[&format!("temperature:{id}"), "tC"]),
        None => None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelLibrary;
    use crate::objects::TempProbe;

    fn device(model: &ModelInfo) -> Device {
        Device::with_components(model.inputs, model.outputs, model.meters)
    }

    #[test]
    fn switch_embedded_meters_keep_sign_and_units() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("ShellyPlus2PM").unwrap();
        let mut d = device(model);
        d.temp_probes = vec![
            TempProbe {
                probe_id: Some(101),
                ..TempProbe::default()
            },
            TempProbe {
                probe_id: Some(100),
                requires_output: Some("O1".into()),
                ..TempProbe::default()
            },
        ];
        let s = json!({
            "sys": {"mac": "AA", "uptime": 99, "restart_required": false, "available_updates": {}},
            "input:0": {"id": 0, "state": true}, "input:1": {"id": 1, "state": null},
            "switch:0": {"id": 0, "output": true, "apower": -12.5, "voltage": 230.2, "current": 0.06, "pf": -0.9,
                          "aenergy": {"total": 1000.5}, "ret_aenergy": {"total": 20.25}, "temperature": {"tC": 50.0}},
            "switch:1": {"id": 1, "output": false, "apower": 0, "voltage": 230.2, "aenergy": {"total": 0},
                          "temperature": {"tC": 40.0}},
            "temperature:100": {"id": 100, "tC": 20.0}, "temperature:101": {"id": 101, "tC": 22.5}
        });
        apply_status(&mut d, model, &s, "T");
        assert!(d.inputs[0].state && !d.inputs[1].state);
        assert!(d.outputs[0].state && !d.outputs[1].state);
        let m = &d.meters[0];
        assert_eq!(
            (m.power, m.voltage, m.current, m.power_factor),
            (Some(-12.5), Some(230.2), Some(0.06), Some(-0.9))
        );
        assert_eq!((m.energy, m.returned_energy), (Some(1000.5), Some(20.25)));
        assert_eq!(d.meters[1].power, Some(0.0));
        assert_eq!(d.meters[1].current, None, "not reported is None, not 0");
        assert_eq!(d.temperature, Some(45.0));
        assert_eq!(d.total_power, Some(-12.5));
        assert_eq!(d.update_available, Some(false));
        assert_eq!(d.temp_probes[0].temperature, Some(22.5));
        assert_eq!(d.temp_probes[0].last_reading_time.as_deref(), Some("T"));
        assert_eq!(d.temp_probes[1].temperature, None, "O1 is off");
    }

    #[test]
    fn three_phase_meters_and_totals() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("ShellyPro3EM").unwrap();
        let mut d = device(model);
        let s = json!({
            "em:0": {"a_act_power": 100.0, "a_voltage": 230.0, "a_current": 0.5, "a_pf": 0.87,
                     "b_act_power": -50.0, "b_voltage": 231.0, "c_act_power": 10.0, "total_act_power": 60.0},
            "emdata:0": {"a_total_act_energy": 1.0, "b_total_act_energy": 2.0, "c_total_act_energy": 3.0,
                         "b_total_act_ret_energy": 7.5, "total_act": 6.0},
            "temperature:0": {"tC": 38.5}
        });
        apply_status(&mut d, model, &s, "T");
        assert_eq!(d.meters[1].power, Some(-50.0));
        assert_eq!(d.meters[1].returned_energy, Some(7.5));
        assert_eq!(d.meters[2].voltage, None);
        assert_eq!(d.total_power, Some(60.0));
        assert_eq!(d.total_energy, Some(6.0));
        assert_eq!(d.temperature, Some(38.5));
    }

    #[test]
    fn only_reads_and_absolute_sets_are_repeated() {
        for m in [
            "Shelly.GetStatus",
            "Switch.GetStatus",
            "Switch.Set",
            "Webhook.List",
            "Webhook.ListSupported",
            "Webhook.Update",
            "Webhook.Delete",
        ] {
            assert!(idempotent(&format!("RPC {m}")), "{m}");
        }
        for m in ["Switch.Toggle", "Webhook.Create", "Shelly.Reboot"] {
            assert!(!idempotent(&format!("RPC {m}")), "{m}");
        }
    }

    #[test]
    fn frames_errors_and_probe_ids() {
        assert_eq!(
            parse_frame(json!({"id": 1, "result": {"was_on": true}}), "m").unwrap()["was_on"],
            true
        );
        assert_eq!(
            parse_frame(
                json!({"id": 1, "error": {"code": -105, "message": "not found"}}),
                "m"
            ),
            Err(FrameError::Rpc(-105, "not found".into()))
        );
        assert!(matches!(
            parse_frame(json!({"id": 1}), "m"),
            Err(FrameError::Malformed(_))
        ));
        let cfg = json!({"temperature:0": {"name": "internal"}, "temperature:102": {"name": "Roof"},
                         "temperature:100": {"name": "Pool"}, "switch:0": {}});
        assert_eq!(
            probe_ids(&cfg),
            [(100, "Pool".to_string()), (102, "Roof".to_string())]
        );
    }
}
