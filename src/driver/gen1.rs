//! Shelly Gen1 over HTTP REST (`/shelly`, `/settings`, `/status`, `/relay/N`, `/light/N`, `/roller/N`).
//!
//! Relay meters (`meters[]`) count watt-minutes; they are reported in Wh. `emeters[]` (EM, 3EM) are Wh already.
//! Models with profiles (Shelly 2, 2.5: `/settings` `mode` = `relay` | `roller`) say which one they are in at
//! introduction; components the device does not have in that mode read as unknown.
//!
//! Covers are `rollers[N]`: Gen1 `state` is the motion (`open` = opening, `close` = closing, `stop` = still),
//! `current_pos` counts only when `positioning` (calibrated) is true, and a still, calibrated roller at 100 or 0
//! is open or closed. Lights (Dimmer) are `lights[N]` with `ison` and `brightness`.
//!
//! Add-on peripherals have no names on the device, so they are matched by position: configured probe i (and
//! add-on temperature sensor i) reads `ext_temperature` i, add-on humidity sensor i reads `ext_humidity` i,
//! voltage sensor i reads `adcs` i (Shelly Uni). A device's own sensors (H&T) read `tmp.tC` and `hum.value`.

use serde_json::Value;

use super::Credentials;
use super::http::{Http, Reply, Request};
use super::json::{flag, num, text};
use super::switching::{Relay, SetAnswer};
use super::{AuthProblem, Driver, OutputAction, identify, profile};
use crate::clock;
use crate::error::{Error, Result};
use crate::light::{LightCaps, LightChange, rgb_from, white_from_byte, white_to_byte};
use crate::models::{ModelInfo, OutputKind, SensorQuantity, Shape, SharedModel};
use crate::objects::{ComponentKind, Cover, CoverAction, CoverState, Device, OutputChange};
use crate::url::encode_component;
use crate::webhook::install::{HookPlan, gen1_action, gen1_event};

/// Drives one Gen1 device.
pub(crate) struct Gen1 {
    http: Http,
    base: String,
    model: SharedModel,
    /// What the device is, from the mode it reported (the model's default until it says).
    shape: Shape,
    introduced: bool,
    hooks: Option<HookPlan>,
    credentials: Credentials,
    /// During the first contact at open: the components its reported mode may give the device.
    follow: Option<std::sync::Arc<crate::plan::Follow>>,
    /// `/settings` named the same mode for a status that did not fit it: not asked again in this contact period.
    recheck_off: bool,
    /// With the CoIoT listener running: where the device's description (`/cit/d`) goes.
    pub(crate) coiot: Option<std::sync::Arc<crate::coiot::Link>>,
    /// `ip:port` the device's CoIoT peer is set to (`CoIoTPeer: true`).
    pub(crate) coiot_peer: Option<String>,
}

impl Gen1 {
    /// A driver for the device at `base` (`http://host:port`).
    pub(crate) fn new(
        http: Http,
        base: String,
        model: impl Into<SharedModel>,
        hooks: Option<HookPlan>,
        credentials: Credentials,
    ) -> Self {
        let model = model.into();
        Gen1 {
            http,
            base,
            shape: model.default_shape(),
            model,
            introduced: false,
            hooks,
            credentials,
            follow: None,
            recheck_off: false,
            coiot: None,
            coiot_peer: None,
        }
    }

    /// With the webhooks: the device's CoIoT description (old firmware serves none over HTTP: then CoIoT v2's
    /// documented ids stand in) and, when asked, its CoIoT peer.
    fn sync_coiot(&mut self, dev: &mut Device) -> Result<()> {
        let Some(link) = self.coiot.clone() else {
            return Ok(());
        };
        match self
            .get(dev, "/cit/d")
            .map(|v| crate::coiot::description::Description::parse(&v))
        {
            Ok(Ok(d)) => link.describe(d),
            Ok(Err(why)) => log::debug!("device {}: GET /cit/d: {why}", dev.label()),
            Err(e) => log::debug!("device {}: no CoIoT description: {e}", dev.label()),
        }
        let Some(peer) = self.coiot_peer.clone() else {
            return Ok(());
        };
        let settings = self.get(dev, "/settings")?;
        if text(&settings, &["coiot", "peer"]).as_deref() == Some(peer.as_str())
            && flag(&settings, &["coiot", "enabled"]) == Some(true)
        {
            return Ok(());
        }
        self.get(
            dev,
            &format!(
                "/settings?coiot_enable=true&coiot_peer={}",
                encode_component(&peer)
            ),
        )?;
        log::info!(
            "device {}: CoIoT peer set to {peer} (Gen1 firmware uses it after its next restart)",
            dev.label()
        );
        Ok(())
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
    pub(super) fn get(&self, dev: &mut Device, path: &str) -> Result<Value> {
        self.get_with(dev, path, true)
    }

    /// [`Gen1::get`], sent once when not `idempotent` (an update request).
    pub(super) fn get_with(&self, dev: &mut Device, path: &str, idempotent: bool) -> Result<Value> {
        self.send_get(dev, path, idempotent, false)
    }

    /// GETs a text download (a CSV file) and returns its body.
    pub(super) fn get_text(&self, dev: &mut Device, path: &str) -> Result<String> {
        match self.send_get(dev, path, true, true)? {
            Value::String(t) => Ok(t),
            _ => Err(Error::Device {
                device: dev.label(),
                message: format!("GET {path}: not a text answer"),
            }),
        }
    }

    fn send_get(
        &self,
        dev: &mut Device,
        path: &str,
        idempotent: bool,
        text: bool,
    ) -> Result<Value> {
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
            // Reads, absolute sets and action-URL settings are safe to repeat; an update request is not.
            idempotent,
            text,
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

    /// Reads `/shelly` (firmware, MAC, self-reported model) and, for models with profiles only, `/settings`
    /// for the mode the device is in.
    fn introduce(&mut self, dev: &mut Device) -> Result<()> {
        let info = self.get(dev, "/shelly")?;
        dev.firmware = text(&info, &["fw"]);
        if let Some(mac) = crate::driver::json::mac(&info, &["mac"]) {
            dev.mac_address = Some(mac);
        }
        let reported = text(&info, &["type"]).or_else(|| text(&info, &["model"]));
        identify(
            dev,
            &self.model,
            reported.as_deref(),
            info.get("gen").is_none(),
        );
        if !self.model.profiles.is_empty() {
            let settings = self.get(dev, "/settings")?;
            let mode = text(&settings, &["mode"]);
            self.shape = profile::detect(dev, &self.model, mode.as_deref(), self.follow.as_deref());
        }
        self.introduced = true;
        Ok(())
    }

    fn contact(&mut self, dev: &mut Device) -> Result<()> {
        let earlier = self.introduced;
        if !self.introduced {
            self.introduce(dev)?;
        }
        let status = self.get(dev, "/status")?;
        // Rollers in a device introduced in relay mode, or none in roller mode: the mode was switched since;
        // `/settings` is asked again, which reports it (log, `ConfigMismatch`).
        if earlier
            && !self.model.profiles.is_empty()
            && !self.recheck_off
            && (self.shape.covers > 0) != status.get("rollers").is_some()
        {
            let was = self.shape.profile.clone();
            self.introduce(dev)?;
            self.recheck_off = self.shape.profile == was;
        }
        apply_status(
            dev,
            &self.model,
            &self.shape,
            &status,
            &clock::rfc3339_now(),
        );
        Ok(())
    }

    /// Before an operation on a model with profiles: the device must have said which mode it is in.
    fn know_shape(&mut self, dev: &mut Device) -> Result<()> {
        if !self.introduced && !self.model.profiles.is_empty() {
            self.introduce(dev)?;
        }
        Ok(())
    }

    /// `relay`, `light` or (colour lights) `color`: the path of the outputs.
    fn output_path(&self) -> &'static str {
        match self.shape.light {
            None => "relay",
            Some(l) if l.rgb => "color",
            Some(_) => "light",
        }
    }

    fn output_answer(&self, dev: &mut Device, index: usize, answer: &Value) -> Result<bool> {
        let what = format!("GET /{}", self.output_path());
        let on = flag(answer, &["ison"]).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: format!("{what}: the answer has no ison"),
        })?;
        if let Some(caps) = self.shape.light
            && let Some(o) = dev.outputs.get_mut(index)
        {
            apply_light(o, Some(answer), caps);
        }
        Ok(on)
    }
}

impl Relay for Gen1 {
    fn reports_previous(&self) -> bool {
        // `/relay/N?turn=` and `/light/N?turn=` answer with the new state only.
        false
    }

    fn output_state(&mut self, dev: &mut Device, index: usize) -> Result<bool> {
        let answer = self.get(dev, &format!("/{}/{index}", self.output_path()))?;
        self.output_answer(dev, index, &answer)
    }

    fn set_output(&mut self, dev: &mut Device, index: usize, on: bool) -> Result<SetAnswer> {
        let turn = if on { "on" } else { "off" };
        let path = format!("/{}/{index}?turn={turn}", self.output_path());
        let answer = self.get(dev, &path)?;
        let now = self.output_answer(dev, index, &answer)?;
        Ok(SetAnswer { was: None, now })
    }
}

impl Driver for Gen1 {
    fn read(&mut self, dev: &mut Device) -> Result<()> {
        self.contact(dev)
    }

    fn sync_hooks(&mut self, dev: &mut Device) -> Result<()> {
        self.sync_actions(dev)?;
        self.sync_coiot(dev)
    }

    fn forget(&mut self) {
        self.introduced = false;
        self.recheck_off = false;
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
        self.know_shape(dev)?;
        profile::check_has(dev, &self.shape, ComponentKind::Output, index)?;
        super::switching::switch(self, dev, index, action)
    }

    /// `GET /light/N?turn=&brightness=&temp=&transition=` (white lights) or `GET /color/N?turn=&gain=&red=&green=
    /// &blue=&white=&transition=` (colour lights); the answer is the light's status.
    fn check_light(&self, dev: &Device, _index: usize, change: &LightChange) -> Result<()> {
        let caps = super::light_caps(dev, self.shape.light, &self.model.model)?;
        change.check_caps(&caps, &dev.label(), &self.model.model)
    }

    fn light(&mut self, dev: &mut Device, index: usize, change: &LightChange) -> Result<()> {
        self.know_shape(dev)?;
        profile::check_has(dev, &self.shape, ComponentKind::Output, index)?;
        self.check_light(dev, index, change)?;
        let caps = super::light_caps(dev, self.shape.light, &self.model.model)?;
        let mut q = Vec::new();
        if let Some(on) = change.on {
            q.push(format!("turn={}", if on { "on" } else { "off" }));
        }
        if let Some(b) = change.brightness {
            // Colour mode dims with `gain`.
            let key = if caps.rgb { "gain" } else { "brightness" };
            q.push(format!("{key}={}", b.round()));
        }
        if let Some(k) = change.temperature {
            q.push(format!("temp={k}"));
        }
        if let Some([r, g, b]) = change.rgb {
            q.push(format!("red={r}&green={g}&blue={b}"));
        }
        if let Some(w) = change.white {
            q.push(format!("white={}", white_to_byte(w)));
        }
        if let Some(t) = change.transition {
            q.push(format!("transition={}", (t * 1000.0).round()));
        }
        let path = format!("/{}/{index}?{}", self.output_path(), q.join("&"));
        let answer = self.get(dev, &path)?;
        let on = self.output_answer(dev, index, &answer)?;
        dev.outputs[index].state = Some(on);
        Ok(())
    }

    /// `GET /roller/N?go=open|close|stop` or `?go=to_pos&roller_pos=P`; the answer is the roller's status.
    fn cover(&mut self, dev: &mut Device, index: usize, action: CoverAction) -> Result<()> {
        self.know_shape(dev)?;
        profile::check_has(dev, &self.shape, ComponentKind::Cover, index)?;
        if index >= dev.covers.len() {
            return Err(Error::Unsupported {
                device: dev.label(),
                message: format!("no cover channel {index} is configured"),
            });
        }
        let query = match action {
            CoverAction::Open => "go=open".to_string(),
            CoverAction::Close => "go=close".to_string(),
            CoverAction::Stop => "go=stop".to_string(),
            CoverAction::Position(p) => {
                profile::check_calibrated(dev, index)?;
                format!("go=to_pos&roller_pos={}", p.min(100))
            }
        };
        let answer = self.get(dev, &format!("/roller/{index}?{query}"))?;
        if text(&answer, &["state"]).is_none() {
            return Err(Error::Device {
                device: dev.label(),
                message: "GET /roller: the answer has no state".into(),
            });
        }
        let temperature = dev.temperature;
        if let Some(c) = dev.covers.get_mut(index) {
            apply_roller(c, Some(&answer));
            c.temperature = temperature;
        }
        Ok(())
    }

    fn probe(&mut self, dev: &Device) -> bool {
        let url = format!("{}/shelly", self.base);
        self.http.answers(dev, &url, "GET /shelly")
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

    fn keeps_history(&self, index: usize) -> bool {
        self.shape.meter_source == crate::models::MeterSource::Gen1Emeters
            && index < self.shape.meters
    }

    fn energy_history(
        &mut self,
        dev: &mut Device,
        index: usize,
        range: (i64, i64),
    ) -> Result<crate::energy::EnergyHistory> {
        let csv = self.get_text(dev, &format!("/emeter/{index}/em_data.csv"))?;
        let records = super::gen1_energy::parse_csv(&csv).map_err(|m| Error::Device {
            device: dev.label(),
            message: format!("GET /emeter/{index}/em_data.csv: {m}"),
        })?;
        let meter = dev
            .meters
            .get(index)
            .map(|m| m.name.clone())
            .unwrap_or_default();
        Ok(crate::energy::EnergyHistory::assemble(
            dev.name.clone(),
            meter.clone(),
            vec![meter],
            range,
            records,
        ))
    }
}

/// One `lights[N]` status (or a `/light/N`, `/color/N` answer) into a light output: brightness (`gain` in
/// colour mode), `temp` (K), `red`/`green`/`blue`, `white` (0–255); what the light cannot have, or what is out of
/// range, is `None`.
fn apply_light(out: &mut crate::objects::Output, light: Option<&Value>, caps: LightCaps) {
    let n = |k: &str| light.and_then(|l| num(l, &[k]));
    let pct = |v: Option<f64>| v.filter(|b| (0.0..=100.0).contains(b));
    out.brightness = pct(if caps.rgb {
        n("gain").or(n("brightness"))
    } else {
        n("brightness")
    })
    .filter(|_| caps.brightness);
    out.color_temperature =
        n("temp").filter(|k| caps.temperature.is_some() && (1000.0..=10_000.0).contains(k));
    out.rgb = rgb_from([n("red"), n("green"), n("blue")]).filter(|_| caps.rgb);
    out.white = n("white").and_then(white_from_byte).filter(|_| caps.white);
}

/// Copies one `rollers[N]` status (a `/status` member or a `/roller/N` answer) into `c`; `None` (the device has
/// no such roller now) makes everything unknown.
pub(crate) fn apply_roller(c: &mut Cover, v: Option<&Value>) {
    let v = v.unwrap_or(&Value::Null);
    c.calibrated = flag(v, &["positioning"]);
    // `current_pos` means something only on a calibrated roller.
    c.position = num(v, &["current_pos"])
        .filter(|p| (0.0..=100.0).contains(p) && c.calibrated == Some(true));
    c.state = if flag(v, &["calibrating"]) == Some(true) {
        Some(CoverState::Calibrating)
    } else {
        match text(v, &["state"]).as_deref() {
            // Gen1 reports the motion, not the place.
            Some("open") => Some(CoverState::Opening),
            Some("close") => Some(CoverState::Closing),
            Some("stop") => Some(match c.position {
                Some(p) if p >= 100.0 => CoverState::Open,
                Some(p) if p <= 0.0 => CoverState::Closed,
                _ => CoverState::Stopped,
            }),
            _ => None,
        }
    };
}

/// Copies a Gen1 `/status` answer into the device. `shape` is what the device is now (its reported mode).
/// Values the device does not report become `None`.
pub(crate) fn apply_status(
    dev: &mut Device,
    model: &ModelInfo,
    shape: &Shape,
    s: &Value,
    now: &str,
) {
    dev.mac_address = crate::driver::json::mac(s, &["mac"]).or(dev.mac_address.take());
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
    let list = match model.output_kind {
        OutputKind::Switch => "relays",
        OutputKind::Light => "lights",
    };
    let caps = shape.light.unwrap_or_default();
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        // An output the device does not have now (roller mode) has no state: unknown, not off.
        let o = s
            .get(list)
            .and_then(|a| a.get(i))
            .filter(|_| i < shape.outputs);
        out.state = o.and_then(|r| flag(r, &["ison"]));
        match model.output_kind {
            OutputKind::Light => apply_light(out, o, caps),
            OutputKind::Switch => apply_light(out, None, caps),
        }
        out.temperature = temperature;
    }
    for (i, c) in dev.covers.iter_mut().enumerate() {
        let r = s
            .get("rollers")
            .and_then(|a| a.get(i))
            .filter(|_| i < shape.covers);
        apply_roller(c, r);
        c.temperature = temperature.filter(|_| r.is_some());
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
        // Gen1 meters report neither frequency nor apparent power.
        m.frequency = None;
        m.apparent_power = None;
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
    // Add-on sensors likewise: the i-th configured one of a quantity is the device's i-th of that quantity.
    for q in SensorQuantity::ALL {
        let addons = dev
            .sensors
            .iter_mut()
            .filter(|x| !x.built_in && x.quantity == q);
        for (n, x) in (0..).zip(addons) {
            x.sensor_id = Some(n);
        }
    }
    dev.update_sensors(now, |x| {
        let n = x.sensor_id?;
        let key = n.to_string();
        match (x.built_in, x.quantity) {
            (true, SensorQuantity::Temperature) => valid(s, "tmp").and_then(|t| num(t, &["tC"])),
            (true, SensorQuantity::Humidity) => valid(s, "hum").and_then(|h| num(h, &["value"])),
            (false, SensorQuantity::Temperature) => num(s, &["ext_temperature", &key, "tC"]),
            (false, SensorQuantity::Humidity) => num(s, &["ext_humidity", &key, "hum"]),
            (_, SensorQuantity::Voltage) => s
                .get("adcs")
                .and_then(|a| a.get(usize::try_from(n).ok()?))
                .and_then(|a| num(a, &["voltage"])),
        }
    });
}

/// The object `key` of a status unless it says its reading is not valid (`is_valid: false`).
fn valid<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    s.get(key).filter(|v| flag(v, &["is_valid"]) != Some(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::canned::Script;
    use crate::driver::canned::testing::{self, ok, targets};
    use crate::models::ModelLibrary;
    use crate::objects::{Sensor, TempProbe};
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
        apply_status(&mut d, model, &model.default_shape(), &s, "T");
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
        apply_status(&mut d, model, &model.default_shape(), &s, "T");
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
            &model.default_shape(),
            &json!({"inputs": [{"input": 1}], "meters": []}),
            "T",
        );
        // An input the answer does not list is unknown, not off.
        assert_eq!((d.inputs[0].state, d.inputs[1].state), (Some(true), None));
        assert_eq!(d.meters[1].energy, None);
    }

    fn roller_device(model: &ModelInfo) -> Device {
        let mut d = Device::with_components(model.inputs, 0, model.meters);
        d.name = "Blinds".into();
        d.covers = vec![Cover {
            name: "Blind".into(),
            ..Cover::default()
        }];
        d
    }

    #[test]
    fn rollers_report_motion_position_only_when_calibrated_and_meters_keep_working() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let roller = model.shape("roller").unwrap();
        let mut d = roller_device(model);
        let s = json!({"temperature": 45.0, "voltage": 231.0,
            "rollers": [{"state": "stop", "power": 0, "is_valid": true, "safety_switch": false,
                "stop_reason": "normal", "last_direction": "open", "current_pos": 100,
                "calibrating": false, "positioning": true}],
            "meters": [{"power": 12.5, "total": 120}, {"power": 0, "total": 60}],
            "inputs": [{"input": 0}, {"input": 1}]});
        apply_status(&mut d, model, &roller, &s, "T");
        let c = &d.covers[0];
        assert_eq!(
            (c.state, c.position, c.calibrated),
            (Some(CoverState::Open), Some(100.0), Some(true))
        );
        assert_eq!(c.temperature, Some(45.0));
        assert_eq!(
            (d.meters[0].power, d.meters[0].energy),
            (Some(12.5), Some(2.0))
        );
        assert_eq!(d.meters[1].energy, Some(1.0));
        assert_eq!(d.meters[0].voltage, Some(231.0));
        assert_eq!(d.inputs[1].state, Some(true));

        let moving = |state: &str, pos: i64, positioning: bool| {
            let mut d = roller_device(model);
            let s = json!({"rollers": [{"state": state, "current_pos": pos, "positioning": positioning}]});
            apply_status(&mut d, model, &roller, &s, "T");
            let c = &d.covers[0];
            (c.state, c.position, c.calibrated)
        };
        assert_eq!(
            moving("open", 40, true),
            (Some(CoverState::Opening), Some(40.0), Some(true))
        );
        assert_eq!(
            moving("close", 40, true),
            (Some(CoverState::Closing), Some(40.0), Some(true))
        );
        assert_eq!(
            moving("stop", 0, true),
            (Some(CoverState::Closed), Some(0.0), Some(true))
        );
        assert_eq!(
            moving("stop", 55, true),
            (Some(CoverState::Stopped), Some(55.0), Some(true))
        );
        // Not calibrated: whatever current_pos says, the position is unknown, and so is open/closed.
        assert_eq!(
            moving("stop", 100, false),
            (Some(CoverState::Stopped), None, Some(false))
        );
        assert_eq!(moving("sideways", 50, true), (None, Some(50.0), Some(true)));
        let mut d = roller_device(model);
        let s = json!({"rollers": [{"state": "stop", "calibrating": true, "positioning": false}]});
        apply_status(&mut d, model, &roller, &s, "T");
        assert_eq!(d.covers[0].state, Some(CoverState::Calibrating));
    }

    #[test]
    fn components_the_mode_lacks_are_unknown() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        // Planned as relays, in roller mode: the relays are unknown, never off, even if an answer lists them.
        let mut d = device(model);
        let s = json!({"relays": [{"ison": false}], "rollers": [{"state": "stop"}],
            "meters": [{"power": 1, "total": 60}]});
        apply_status(&mut d, model, &model.shape("roller").unwrap(), &s, "T");
        assert_eq!((d.outputs[0].state, d.outputs[1].state), (None, None));
        assert_eq!(d.meters[0].energy, Some(1.0));
        // Planned as a roller, in relay mode: the cover is unknown.
        let mut d = roller_device(model);
        let s = json!({"relays": [{"ison": true}, {"ison": false}], "rollers": [{"state": "stop",
            "current_pos": 3, "positioning": true}]});
        apply_status(&mut d, model, &model.default_shape(), &s, "T");
        let c = &d.covers[0];
        assert_eq!((c.state, c.position, c.calibrated), (None, None, None));
        assert_eq!(c.temperature, None);
    }

    #[test]
    fn lights_report_on_and_brightness() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("ShellyDimmer2").unwrap();
        let mut d = device(model);
        let s = json!({"lights": [{"ison": true, "source": "http", "mode": "white", "brightness": 37}],
            "relays": [{"ison": false}], "tmp": {"tC": 41.2, "is_valid": true},
            "inputs": [{"input": 0}, {"input": 0}]});
        apply_status(&mut d, model, &model.default_shape(), &s, "T");
        assert_eq!(d.outputs[0].state, Some(true), "lights, not relays");
        assert_eq!(d.outputs[0].brightness, Some(37.0));
        assert_eq!(d.temperature, Some(41.2));
        apply_status(
            &mut d,
            model,
            &model.default_shape(),
            &json!({"lights": [{"ison": "yes", "brightness": 1e300}]}),
            "T",
        );
        assert_eq!((d.outputs[0].state, d.outputs[0].brightness), (None, None));
        // Relays of a relay model have no brightness.
        let relay = lib.get("Shelly1").unwrap();
        let mut d = device(relay);
        let s = json!({"relays": [{"ison": true, "brightness": 50}]});
        apply_status(&mut d, relay, &relay.default_shape(), &s, "T");
        assert_eq!(
            (d.outputs[0].state, d.outputs[0].brightness),
            (Some(true), None)
        );
    }

    fn sensor(name: &str, quantity: SensorQuantity, built_in: bool) -> Sensor {
        Sensor {
            name: name.into(),
            quantity,
            unit: quantity.unit(),
            built_in,
            sensor_id: built_in.then_some(0),
            ..Sensor::default()
        }
    }

    #[test]
    fn addon_sensors_by_position_and_own_sensors() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly1").unwrap();
        let mut d = device(model);
        d.temp_probes = vec![TempProbe::default()];
        d.sensors = vec![
            sensor("Bath", SensorQuantity::Humidity, false),
            sensor("Air", SensorQuantity::Temperature, false),
            sensor("Cellar", SensorQuantity::Humidity, false),
            sensor("Battery", SensorQuantity::Voltage, false),
            sensor("Loft", SensorQuantity::Temperature, false),
        ];
        let s = json!({"relays": [{"ison": true}],
            "ext_temperature": {"0": {"hwID": "0300", "tC": 21.5}, "1": {"hwID": "28ff", "tC": 9.25}},
            "ext_humidity": {"0": {"hwID": "0300", "hum": 55.1}},
            "adcs": [{"voltage": 12.08}]});
        apply_status(&mut d, model, &model.default_shape(), &s, "T");
        let v: Vec<Option<f64>> = d.sensors.iter().map(|x| x.value).collect();
        assert_eq!(
            v,
            [Some(55.1), Some(21.5), None, Some(12.08), Some(9.25)],
            "humidity 0 and 1, temperature 0 and 1, voltage 0"
        );
        assert_eq!(d.sensors[2].sensor_id, Some(1));
        assert_eq!(d.sensors[0].last_reading_time.as_deref(), Some("T"));
        assert_eq!(d.sensors[2].last_reading_time, None);
        assert_eq!(d.temp_probes[0].temperature, Some(21.5));

        // A device's own sensors (H&T): tmp and hum, unless the device says the reading is not valid.
        let mut ht = model.clone();
        ht.sensors = vec![SensorQuantity::Temperature, SensorQuantity::Humidity];
        let mut d = device(&ht);
        d.sensors = vec![
            sensor("T", SensorQuantity::Temperature, true),
            sensor("H", SensorQuantity::Humidity, true),
        ];
        let s = json!({"tmp": {"value": 22.4, "units": "C", "tC": 22.4, "tF": 72.3, "is_valid": true},
            "hum": {"value": 48.5, "is_valid": true}, "bat": {"value": 90, "voltage": 2.9}});
        apply_status(&mut d, &ht, &ht.default_shape(), &s, "T");
        assert_eq!(
            (d.sensors[0].value, d.sensors[1].value),
            (Some(22.4), Some(48.5))
        );
        let s = json!({"tmp": {"tC": 22.4, "is_valid": false}, "hum": {"value": "wet"}});
        apply_status(&mut d, &ht, &ht.default_shape(), &s, "T");
        assert_eq!((d.sensors[0].value, d.sensors[1].value), (None, None));
    }

    #[test]
    fn hostile_values_are_absent_not_panics() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let mut d = roller_device(model);
        d.sensors = vec![sensor("V", SensorQuantity::Voltage, false)];
        for s in [
            json!({"rollers": {"0": {"state": "stop"}}, "adcs": {"0": 1}, "ext_humidity": [55]}),
            json!({"rollers": [{"state": 7, "current_pos": 1e308, "positioning": "yes"}], "adcs": [[]]}),
            json!({"rollers": [null], "meters": [{"total": -1e308}], "uptime": -5}),
            json!([1, 2, 3]),
            json!(null),
        ] {
            apply_status(&mut d, model, &model.shape("roller").unwrap(), &s, "T");
            assert!(d.covers[0].position.is_none() && d.sensors[0].value.is_none());
        }
    }

    /// A driver whose requests get the canned `answers` in order.
    fn driver(model: &str, answers: Vec<Value>) -> (Gen1, Script) {
        let lib = ModelLibrary::embedded();
        let script = Script::default();
        script.load(answers.iter().map(ok));
        let g = Gen1::new(
            testing::http(&script),
            "http://127.0.0.1:9".into(),
            lib.get(model).unwrap().clone(),
            None,
            Credentials::default(),
        );
        (g, script)
    }

    fn shelly25() -> Value {
        json!({"type": "SHSW-25", "mac": "3494547BF36C", "auth": false, "fw": "20230913-112234/v1.14.0",
            "num_outputs": 2, "num_meters": 2, "num_rollers": 1})
    }

    #[test]
    fn the_mode_is_read_at_introduction_and_a_mismatch_is_reported_with_the_fix() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let mut d = device(model);
        d.name = "Stairs".into();
        let (mut g, script) = driver(
            "Shelly2.5",
            vec![
                shelly25(),
                json!({"mode": "roller", "device": {"type": "SHSW-25"}}),
                json!({"rollers": [{"state": "stop"}], "meters": [{"power": 0, "total": 0}]}),
            ],
        );
        g.read(&mut d).unwrap();
        assert_eq!(targets(&script), ["/shelly", "/settings", "/status"]);
        assert_eq!(d.profile.as_deref(), Some("roller"));
        let m = d.config_mismatch.clone().unwrap();
        assert!(m.contains("set Profile: roller"), "{m}");
        assert_eq!(d.outputs[0].state, None);
        // Switching a relay the device does not have fails with the reason, without a request.
        let e = g.switch(&mut d, 0, OutputAction::On).unwrap_err();
        assert!(e.to_string().contains("Profile: roller"), "{e}");
        assert_eq!(targets(&script).len(), 3);
    }

    #[test]
    fn models_without_profiles_are_not_asked_for_settings() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly1").unwrap();
        let mut d = device(model);
        let (mut g, script) = driver(
            "Shelly1",
            vec![
                json!({"type": "SHSW-1", "fw": "x"}),
                json!({"relays": [{"ison": true}]}),
            ],
        );
        g.read(&mut d).unwrap();
        assert_eq!(targets(&script), ["/shelly", "/status"]);
        assert_eq!(d.outputs[0].state, Some(true));
        assert_eq!((d.profile.clone(), d.config_mismatch.clone()), (None, None));
    }

    fn read_roller(calibrated: bool, extra: Vec<Value>) -> (Gen1, Script, Device) {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let mut d = roller_device(model);
        let mut answers = vec![
            shelly25(),
            json!({"mode": "roller"}),
            json!({"rollers": [{"state": "stop", "current_pos": 30, "positioning": calibrated}]}),
        ];
        answers.extend(extra);
        let (mut g, script) = driver("Shelly2.5", answers);
        g.read(&mut d).unwrap();
        assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
        (g, script, d)
    }

    #[test]
    fn cover_commands_go_to_the_roller_and_take_its_answer() {
        let answer = |state: &str, pos: i64| {
            json!({"state": state, "power": 80.1, "is_valid": true, "safety_switch": false,
                "overtemperature": false, "stop_reason": "normal", "last_direction": "open",
                "current_pos": pos, "calibrating": false, "positioning": true})
        };
        let (mut g, script, mut d) = read_roller(
            true,
            vec![
                answer("open", 30),
                answer("close", 30),
                answer("stop", 31),
                answer("close", 31),
            ],
        );
        g.cover(&mut d, 0, CoverAction::Open).unwrap();
        assert_eq!(d.covers[0].state, Some(CoverState::Opening));
        g.cover(&mut d, 0, CoverAction::Close).unwrap();
        assert_eq!(d.covers[0].state, Some(CoverState::Closing));
        g.cover(&mut d, 0, CoverAction::Stop).unwrap();
        assert_eq!(
            (d.covers[0].state, d.covers[0].position),
            (Some(CoverState::Stopped), Some(31.0))
        );
        g.cover(&mut d, 0, CoverAction::Position(20)).unwrap();
        assert_eq!(d.covers[0].state, Some(CoverState::Closing));
        assert_eq!(
            targets(&script)[3..],
            [
                "/roller/0?go=open",
                "/roller/0?go=close",
                "/roller/0?go=stop",
                "/roller/0?go=to_pos&roller_pos=20"
            ]
        );
        // There is one roller: cover 1 is refused without a request.
        assert!(g.cover(&mut d, 1, CoverAction::Open).is_err());
        assert_eq!(targets(&script).len(), 7);
    }

    #[test]
    fn an_uncalibrated_roller_refuses_positions_but_opens() {
        let (mut g, script, mut d) = read_roller(
            false,
            vec![json!({"state": "open", "current_pos": 0, "positioning": false})],
        );
        assert_eq!(d.covers[0].calibrated, Some(false));
        let e = g.cover(&mut d, 0, CoverAction::Position(50)).unwrap_err();
        assert!(e.to_string().contains("not calibrated"), "{e}");
        assert_eq!(targets(&script).len(), 3, "nothing sent");
        g.cover(&mut d, 0, CoverAction::Open).unwrap();
        assert_eq!(
            (d.covers[0].state, d.covers[0].position),
            (Some(CoverState::Opening), None)
        );
    }

    #[test]
    fn a_cover_command_on_a_device_in_relay_mode_names_the_mismatch() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("Shelly2.5").unwrap();
        let mut d = roller_device(model);
        let (mut g, script) = driver(
            "Shelly2.5",
            vec![
                shelly25(),
                json!({"mode": "relay"}),
                json!({"relays": [{"ison": true}, {"ison": false}]}),
            ],
        );
        // Not read yet: the driver asks the device what it is before refusing.
        let e = g.cover(&mut d, 0, CoverAction::Open).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("set Profile: relay"), "{e}");
        assert_eq!(targets(&script), ["/shelly", "/settings"]);
    }

    #[test]
    fn lights_switch_through_the_light_path() {
        let lib = ModelLibrary::embedded();
        let model = lib.get("ShellyDimmer2").unwrap();
        let mut d = device(model);
        let (mut g, script) = driver(
            "ShellyDimmer2",
            vec![
                json!({"ison": false, "brightness": 60, "mode": "white"}),
                json!({"ison": true, "brightness": 60, "mode": "white"}),
            ],
        );
        let change = g.switch(&mut d, 0, OutputAction::Toggle).unwrap();
        assert!(change.state && change.did_change);
        assert_eq!(targets(&script), ["/light/0", "/light/0?turn=on"]);
        assert_eq!(
            (d.outputs[0].state, d.outputs[0].brightness),
            (Some(true), Some(60.0))
        );
    }
}
