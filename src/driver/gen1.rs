//! Shelly Gen1 over HTTP REST (`/shelly`, `/status`, `/relay/N`).
//!
//! Relay meters (`meters[]`) count watt-minutes; they are reported in Wh. `emeters[]` (EM, 3EM) are Wh already.
//! Add-on probes (`ext_temperature`) have no names on the device, so configured probe i reads sensor i.

use serde_json::Value;

use super::Credentials;
use super::http::{Http, Reply, Request};
use super::json::{flag, num, text};
use super::switching::{Relay, SetAnswer};
use super::{AuthProblem, Driver, OutputAction, identify};
use crate::clock;
use crate::error::{Error, Result};
use crate::models::ModelInfo;
use crate::objects::{Device, OutputChange};
use crate::url::encode_component;
use crate::webhook::install::{HookPlan, gen1_action, gen1_event};

/// Drives one Gen1 device.
pub(crate) struct Gen1 {
    http: Http,
    base: String,
    model: ModelInfo,
    introduced: bool,
    hooks: Option<HookPlan>,
    credentials: Credentials,
}

impl Gen1 {
    /// A driver for the device at `base` (`http://host:port`).
    pub(crate) fn new(
        http: Http,
        base: String,
        model: ModelInfo,
        hooks: Option<HookPlan>,
        credentials: Credentials,
    ) -> Self {
        Gen1 {
            http,
            base,
            model,
            introduced: false,
            hooks,
            credentials,
        }
    }

    /// Reads the action URLs and records the events they stand for as the device's supported webhooks.
    fn read_actions(&self, dev: &mut Device) -> Result<serde_json::Map<String, Value>> {
        let listed = self.get(dev, "/settings/actions")?;
        let actions = listed
            .get("actions")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        dev.supported_webhooks = actions
            .keys()
            .filter_map(|a| gen1_event(a).map(str::to_string))
            .collect();
        Ok(actions)
    }

    /// Gen1 "webhooks" are action URLs: one URL list per action and channel. smartdev's URLs are recognised by
    /// the listener's base URL; other URLs in a list are kept as they are.
    fn sync_actions(&mut self, dev: &mut Device) -> Result<()> {
        let Some(plan) = self.hooks.clone() else {
            return Ok(());
        };
        let actions = self.read_actions(dev)?;
        for w in &plan.wanted {
            if gen1_action(&w.event).is_none_or(|a| !actions.contains_key(a)) {
                log::warn!(
                    "device {}: webhook event '{}' has no action URL on this device; skipped",
                    dev.label(),
                    w.event
                );
            }
        }
        let ours = |u: &str| u.starts_with(&format!("{}?", plan.base));
        for (action, entries) in &actions {
            for entry in entries.as_array().into_iter().flatten() {
                let Some(index) = entry.get("index").and_then(Value::as_u64) else {
                    continue;
                };
                let current: Vec<String> = entry
                    .get("urls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|u| u.as_str().map(str::to_string))
                    .collect();
                let mut desired: Vec<String> =
                    current.iter().filter(|u| !ours(u)).cloned().collect();
                desired.extend(
                    plan.wanted
                        .iter()
                        .filter(|w| {
                            gen1_action(&w.event) == Some(action.as_str())
                                && w.channel as u64 == index
                        })
                        .map(|w| w.url.clone()),
                );
                let enabled = entry
                    .get("enabled")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if desired == current && enabled != desired.is_empty() {
                    continue;
                }
                let mut path = format!(
                    "/settings/actions?index={index}&name={action}&enabled={}",
                    !desired.is_empty()
                );
                if desired.is_empty() {
                    path.push_str("&urls[]=");
                }
                for u in &desired {
                    path.push_str(&format!("&urls[]={}", encode_component(u)));
                }
                self.get(dev, &path)?;
            }
        }
        Ok(())
    }

    /// GETs a path; everything but `/shelly` carries HTTP Basic credentials when a password is configured.
    fn get(&self, dev: &mut Device, path: &str) -> Result<Value> {
        use base64::Engine;
        let url = format!("{}{path}", self.base);
        let what = format!("GET {}", path.split('?').next().unwrap_or(path));
        let mut headers = Vec::new();
        if let Some(pw) = &self.credentials.password
            && path != "/shelly"
        {
            let pair = format!("{}:{}", self.credentials.user(), pw.expose());
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            headers.push(("Authorization", format!("Basic {encoded}")));
        }
        let req = Request {
            url: &url,
            body: None,
            what: &what,
            headers,
            // Reads, absolute sets and action-URL settings: all safe to repeat.
            idempotent: true,
        };
        match self.http.send(dev, &req)? {
            Reply::Json(v) => Ok(v),
            Reply::Unauthorized(_) => Err(super::auth_error(
                dev,
                &what,
                if self.credentials.password.is_some() {
                    AuthProblem::Refused { user: true }
                } else {
                    AuthProblem::Missing { user: true }
                },
            )),
        }
    }

    fn contact(&mut self, dev: &mut Device) -> Result<()> {
        if !self.introduced {
            let info = self.get(dev, "/shelly")?;
            dev.firmware = text(&info, &["fw"]);
            if let Some(mac) = text(&info, &["mac"]) {
                dev.mac_address = Some(mac);
            }
            let reported = text(&info, &["type"]).or_else(|| text(&info, &["model"]));
            identify(
                dev,
                &self.model,
                reported.as_deref(),
                info.get("gen").is_none(),
            );
            self.introduced = true;
        }
        let status = self.get(dev, "/status")?;
        apply_status(dev, &self.model, &status, &clock::rfc3339_now());
        Ok(())
    }

    fn relay_state(dev: &Device, relay: &Value, what: &str) -> Result<bool> {
        flag(relay, &["ison"]).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: format!("{what}: the answer has no ison"),
        })
    }
}

impl Relay for Gen1 {
    fn reports_previous(&self) -> bool {
        // `/relay/N?turn=` answers with the new state only.
        false
    }

    fn output_state(&mut self, dev: &mut Device, index: usize) -> Result<bool> {
        let relay = self.get(dev, &format!("/relay/{index}"))?;
        Self::relay_state(dev, &relay, "GET /relay")
    }

    fn set_output(&mut self, dev: &mut Device, index: usize, on: bool) -> Result<SetAnswer> {
        let turn = if on { "on" } else { "off" };
        let answer = self.get(dev, &format!("/relay/{index}?turn={turn}"))?;
        let now = Self::relay_state(dev, &answer, "GET /relay")?;
        Ok(SetAnswer { was: None, now })
    }
}

impl Driver for Gen1 {
    fn read(&mut self, dev: &mut Device) -> Result<()> {
        self.contact(dev)
    }

    fn sync_hooks(&mut self, dev: &mut Device) -> Result<()> {
        self.sync_actions(dev)
    }

    fn forget(&mut self) {
        self.introduced = false;
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

/// Copies a Gen1 `/status` answer into the device. Values the device does not report become `None`.
pub(crate) fn apply_status(dev: &mut Device, model: &ModelInfo, s: &Value, now: &str) {
    dev.mac_address = text(s, &["mac"]).or(dev.mac_address.take());
    dev.uptime = num(s, &["uptime"]).map(|u| u.max(0.0) as u64);
    // Gen1's update.has_update means "firmware update available", not "restart required".
    dev.update_available = flag(s, &["update", "has_update"]);
    dev.temperature = num(s, &["temperature"])
        .or_else(|| num(s, &["tmp", "tC"]))
        .filter(|_| model.temperature_monitoring);
    for (i, input) in dev.inputs.iter_mut().enumerate() {
        input.state = s
            .get("inputs")
            .and_then(|a| a.get(i))
            .and_then(|x| flag(x, &["input"]));
    }
    let temperature = dev.temperature;
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        // A relay the answer does not list (roller mode) has no state: unknown, not off.
        out.state = s
            .get("relays")
            .and_then(|a| a.get(i))
            .and_then(|r| flag(r, &["ison"]));
        out.temperature = temperature;
    }
    let emeters = s
        .get("emeters")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    let voltage = num(s, &["voltage"]);
    for (i, m) in dev.meters.iter_mut().enumerate() {
        match emeters {
            Some(list) => {
                let e = list.get(i).unwrap_or(&Value::Null);
                m.power = num(e, &["power"]);
                m.voltage = num(e, &["voltage"]);
                m.current = num(e, &["current"]);
                m.power_factor = num(e, &["pf"]);
                m.energy = num(e, &["total"]);
                m.returned_energy = num(e, &["total_returned"]);
            }
            None => {
                let e = s
                    .get("meters")
                    .and_then(|a| a.get(i))
                    .unwrap_or(&Value::Null);
                m.power = num(e, &["power"]);
                m.voltage = voltage;
                m.current = None;
                m.power_factor = None;
                m.energy = num(e, &["total"]).map(|watt_minutes| watt_minutes / 60.0);
                m.returned_energy = None;
            }
        }
    }
    dev.update_totals();
    // Probes have no names on Gen1: configured probe i (not counting one named like the device) is sensor i.
    let sensors = dev
        .temp_probes
        .iter_mut()
        .filter(|p| p.probe_id != Some(-1));
    for (sensor, p) in (0..).zip(sensors) {
        p.probe_id = Some(sensor);
    }
    dev.update_probes(now, |p| match p.probe_id {
        Some(-1) => temperature,
        Some(n) => num(s, &["ext_temperature", &n.to_string(), "tC"]),
        None => None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelLibrary;
    use crate::objects::TempProbe;
    use serde_json::json;

    fn device(model: &ModelInfo) -> Device {
        Device::with_components(model.inputs, model.outputs, model.meters)
    }

    #[test]
    fn relay_meters_are_watt_minutes_reported_as_wh() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let mut d = device(model);
        d.temp_probes = vec![TempProbe::default()];
        let s = json!({"mac": "3494547BF36C", "uptime": 788600, "temperature": 51.61, "voltage": 240.98,
            "update": {"has_update": true},
            "inputs": [{"input": 1}, {"input": 0}],
            "relays": [{"ison": true}, {"ison": false}],
            "meters": [{"power": -10.5, "total": 600}, {"power": 0, "total": 0}],
            "ext_temperature": {"0": {"hwID": "0300", "tC": 21.5}}});
        apply_status(&mut d, model, &s, "T");
        assert!(d.inputs[0].state == Some(true) && d.inputs[1].state == Some(false));
        assert!(d.outputs[0].state == Some(true));
        assert_eq!(d.meters[0].energy, Some(10.0));
        assert_eq!(d.meters[0].power, Some(-10.5));
        assert_eq!(d.meters[0].voltage, Some(240.98));
        assert_eq!(d.meters[0].current, None);
        assert_eq!(d.update_available, Some(true));
        assert_eq!(d.restart_required, None);
        assert_eq!(d.outputs[1].temperature, Some(51.61));
        assert_eq!(d.temp_probes[0].temperature, Some(21.5));
    }

    #[test]
    fn emeters_are_wh_with_returned_energy() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly3EM").unwrap();
        let mut d = device(model);
        let s = json!({"relays": [{"ison": false}], "emeters": [
            {"power": 12.3, "pf": 0.5, "current": 0.1, "voltage": 231.2, "total": 5000.1, "total_returned": 7.0},
            {"power": -3.0, "voltage": 230.0, "total": 1.0, "total_returned": 0},
            {"power": 0, "total": 0}]});
        apply_status(&mut d, model, &s, "T");
        let m = &d.meters[0];
        assert_eq!(
            (m.power, m.voltage, m.current, m.power_factor),
            (Some(12.3), Some(231.2), Some(0.1), Some(0.5))
        );
        assert_eq!((m.energy, m.returned_energy), (Some(5000.1), Some(7.0)));
        assert_eq!(d.total_power, Some(9.3));
        assert_eq!(d.temperature, None, "3EM has no temperature monitoring");
    }

    #[test]
    fn short_arrays_leave_values_absent_instead_of_failing() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let mut d = device(model);
        apply_status(
            &mut d,
            model,
            &json!({"inputs": [{"input": 1}], "meters": []}),
            "T",
        );
        assert_eq!(
            (d.inputs[0].state, d.inputs[1].state),
            (Some(true), None),
            "an input the answer does not list is unknown, not off"
        );
        assert_eq!(d.meters[1].energy, None);
    }
}
