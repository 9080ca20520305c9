//! Shelly Gen2/Gen3/Gen4 over JSON-RPC (`POST /rpc`), split by job: `transport.rs` (framing, digest loop),
//! `intro.rs` (identity, probe names), `hooks.rs` (webhook reconciliation), `status.rs` (status mapping).
//!
//! One `Shelly.GetStatus` per refresh gives every component (switch, input, em, em1, pm1, temperature), so
//! separate meter calls are not needed. `Shelly.GetConfig` maps add-on probe names to `temperature:N` ids
//! (N ≥ 100, every id, gaps allowed) on first contact and after the device comes back, only when add-on probes
//! or sensors are configured. `Webhook.ListSupported` is asked where hooks are reconciled, or (webhooks off) at
//! the first read after the quick contact at `open`: open costs `/shelly` + `Shelly.GetStatus`.

mod energy;
mod firmware;
mod hooks;
mod intro;
mod outbound;
mod status;
pub(crate) mod status_doc;
mod transport;

use std::sync::Arc;

use serde_json::json;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use energy::read_page;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use intro::probe_ids;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use status::apply_cover;
pub(crate) use status::apply_status;
pub(crate) use status_doc::StatusDoc;
#[cfg(test)]
use transport::FrameError;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use transport::parse_frame;

use super::Credentials;
use super::digest::Challenge;
use super::http::Http;
use super::json::flag;
use super::switching::{Relay, SetAnswer};
use super::ws::tunnel::{Handoff, Mirror, PreRead, Tunnel};
use super::{Driver, OutputAction};
use crate::clock;
use crate::driver::profile;
use crate::error::{Error, Result};
use crate::light::{LightChange, white_to_byte};
use crate::models::{Shape, SharedModel};
use crate::objects::{CoverAction, Device, OutputChange};
use crate::webhook::install::HookPlan;

/// Drives one Gen2+ device.
pub(crate) struct Rpc {
    http: Http,
    base: String,
    model: SharedModel,
    /// What the device is, from the profile it reported (the model's default until it says).
    shape: Shape,
    introduced: bool,
    probes_mapped: bool,
    /// `Webhook.ListSupported` was asked in this contact period.
    supported_known: bool,
    /// The quick first contact at `open` is running (`Driver::set_quick`).
    quick: bool,
    next_id: u64,
    hooks: Option<HookPlan>,
    credentials: Credentials,
    /// The device's last digest challenge and the nonce count used with it (firmware 2.x lets a nonce be
    /// reused with a rising count; older firmware answers every reuse with a new challenge).
    nonce: Option<(Challenge, u32)>,
    /// The device's push connection, used for requests while it is up (`Channel: auto`).
    tunnel: Option<Arc<Tunnel>>,
    /// During the first contact at open: the components its reported profile may give the device.
    follow: Option<Arc<crate::plan::Follow>>,
    /// `/shelly` named the same profile for a status that did not fit it: not asked again in this contact
    /// period (a firmware with other status keys must not cost a request per read).
    recheck_off: bool,
    /// The device sleeps between reports (`sleep.rs`): a read its report asks for is its report, and without
    /// one the device is not asked (it is asleep).
    pub(crate) sleeps: bool,
    /// `Channel: mqtt`: every request goes through the broker (`tunnel` carries them), never HTTP.
    pub(crate) mqtt: Option<Arc<crate::mqtt::link::Port>>,
    /// A status read sent for this read before the worker ran (`Driver::read_sent`), taken by it.
    pre_read: Option<PreRead>,
    /// A generic RPC call ran since the worker last asked (`Driver::went_deep`).
    deep: bool,
}

impl Rpc {
    /// A driver for the device at `base` (`http://host:port`).
    pub(crate) fn new(
        http: Http,
        base: String,
        model: impl Into<SharedModel>,
        hooks: Option<HookPlan>,
        credentials: Credentials,
        tunnel: Option<Arc<Tunnel>>,
    ) -> Self {
        let model = model.into();
        Rpc {
            http,
            base,
            shape: model.default_shape(),
            model,
            introduced: false,
            probes_mapped: false,
            supported_known: false,
            deep: false,
            quick: false,
            next_id: 1,
            hooks,
            credentials,
            nonce: None,
            tunnel,
            follow: None,
            recheck_off: false,
            sleeps: false,
            mqtt: None,
            pre_read: None,
        }
    }

    /// A sleeping device configured by its MAC alone has no address: it is only heard when it reports.
    fn addressed(&self, dev: &Device) -> Result<()> {
        if self.has_address() {
            return Ok(());
        }
        Err(Self::no_address(dev))
    }

    fn has_address(&self) -> bool {
        !self.base.is_empty() || self.mqtt.is_some()
    }

    /// The error for a device with no address to ask (out of line: every read checks for it).
    #[cold]
    #[inline(never)]
    fn no_address(dev: &Device) -> Error {
        Error::Device {
            device: dev.label(),
            message: "no address is known: the configuration gives only its MAC; it is heard when it wakes and reports through the outbound WebSocket".into(),
        }
    }

    fn contact(&mut self, dev: &mut Device) -> Result<()> {
        self.addressed(dev)?;
        // A status of a device introduced in an earlier contact may show another profile.
        let earlier = self.introduced;
        if !self.introduced {
            self.await_channel(dev)?;
            self.introduce(dev)?;
        }
        if self.probes_to_map(dev) {
            self.map_probes(dev);
        }
        // Right after a (re)connect the subscription's answer is the read.
        let prefetched = self.tunnel.as_ref().and_then(|t| t.take_prefetched());
        // Each way in a frame of its own: a status held here would sit under every other one (the worker's
        // deepest frame decides how much of its stack stays resident).
        match prefetched {
            Some(Handoff::Read(status)) => self.take_pushed(dev, &status, earlier)?,
            Some(Handoff::Parsed(status)) => self.take_parsed(dev, status, earlier)?,
            None => self.read_and_take(dev, earlier)?,
        }
        if !self.hooks_need_list() && !self.quick {
            // Without webhooks nothing needs the list at open; it still fills `SupportedWebhooks` (the old
            // library reported it whether or not webhooks were on) at the first read after.
            self.learn_supported(dev);
        }
        Ok(())
    }

    /// A pushed status that came as a tree (notifications merged into it).
    #[inline(never)]
    fn take_parsed(
        &mut self,
        dev: &mut Device,
        status: serde_json::Value,
        recheck: bool,
    ) -> Result<()> {
        let taken = self.take_pushed(dev, &StatusDoc::from_value(&status), recheck);
        self.give_back(status);
        taken
    }

    /// The status read now.
    #[inline(never)]
    fn read_and_take(&mut self, dev: &mut Device, recheck: bool) -> Result<()> {
        if let Some(t) = &self.tunnel {
            t.reading();
        }
        let status = match self.pre_read_answer() {
            Ok(status) => status,
            Err(first) => self.read_status(dev, first)?,
        };
        self.take_status(dev, &status, recheck)
    }

    /// Whether add-on probes or sensors still need their component ids (a request of their own).
    fn probes_to_map(&self, dev: &Device) -> bool {
        let unmapped_sensors = dev
            .sensors
            .iter()
            .any(|x| !x.built_in && x.sensor_id.is_none());
        !self.probes_mapped
            && (dev.temp_probes.iter().any(|p| p.probe_id != Some(-1)) || unmapped_sensors)
    }

    /// Done with what a device sent (a status, the rest of an answer frame): with a push channel its poller
    /// frees it, having parsed it (`driver/ws/spent.rs`); one this worker read over HTTP goes there too (the
    /// poller's cache keeps at most seven blocks a size).
    fn give_back(&self, value: serde_json::Value) {
        match &self.tunnel {
            Some(t) => t.give_back(value),
            None => drop(value),
        }
    }

    /// A status the push channel brought (the subscription's answer, or notifications merged into the last one):
    /// the device spoke, and this is its state. `recheck`: the device was introduced before this status.
    fn take_pushed(&mut self, dev: &mut Device, status: &StatusDoc, recheck: bool) -> Result<()> {
        self.http.record_reach(true);
        self.take_status(dev, status, recheck)
    }

    /// A status read or pushed, onto the device (after asking `/shelly` again when `recheck` and its
    /// components are not those of the profile the device introduced itself with).
    #[inline(never)]
    fn take_status(&mut self, dev: &mut Device, status: &StatusDoc, recheck: bool) -> Result<()> {
        if recheck {
            self.recheck_profile(dev, status)?;
        }
        apply_status(dev, &self.model, &self.shape, status, &clock::rfc3339_now());
        Ok(())
    }

    /// A status whose components are not those of the profile the device introduced itself with: it was
    /// switched to another profile since (it reboots into it, and the push channel sends the new full status).
    /// `/shelly` is asked again, which reports the new profile (log, `ConfigMismatch`).
    #[inline(never)]
    fn recheck_profile(&mut self, dev: &mut Device, status: &StatusDoc) -> Result<()> {
        if self.model.profiles.is_empty() || self.recheck_off || status_fits(&self.shape, status) {
            return Ok(());
        }
        log::debug!(
            "device {}: the status has other components than profile {}; asking /shelly again",
            dev.label(),
            self.shape.profile.as_deref().unwrap_or("default")
        );
        let was = self.shape.profile.clone();
        self.introduce(dev)?;
        self.recheck_off = self.shape.profile == was;
        Ok(())
    }

    /// Whether reconciling hooks needs `Webhook.ListSupported` (some hook is wanted on this device).
    fn hooks_need_list(&self) -> bool {
        self.hooks.as_ref().is_some_and(|p| !p.wanted.is_empty())
    }

    /// An RPC method of the outputs' component type (`Switch`, `Light`, `CCT`, `RGB` or `RGBW`).
    fn output_method(&self, verb: &str) -> String {
        let t = match self.shape.output_component() {
            "switch" => "Switch",
            "light" => "Light",
            "cct" => "CCT",
            "rgb" => "RGB",
            _ => "RGBW",
        };
        format!("{t}.{verb}")
    }
}

impl Relay for Rpc {
    fn reports_previous(&self) -> bool {
        // `Switch.Set` answers `was_on`; `Light.Set` (and `CCT`, `RGB`, `RGBW`) answer null.
        self.shape.light.is_none()
    }

    fn output_state(&mut self, dev: &mut Device, index: usize) -> Result<bool> {
        let method = self.output_method("GetStatus");
        let status = self.call(dev, &method, Some(json!({ "id": index })))?;
        flag(&status, &["output"]).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: format!("RPC {method}: the answer has no output"),
        })
    }

    fn set_output(&mut self, dev: &mut Device, index: usize, on: bool) -> Result<SetAnswer> {
        let method = self.output_method("Set");
        let result = self.call(dev, &method, Some(json!({"id": index, "on": on})))?;
        if self.shape.light.is_some() {
            return Ok(SetAnswer { was: None, now: on });
        }
        let was = flag(&result, &["was_on"]).ok_or_else(|| Error::Device {
            device: dev.label(),
            message: format!("RPC {method}: the answer has no was_on"),
        })?;
        Ok(SetAnswer {
            was: Some(was),
            now: on,
        })
    }
}

impl Driver for Rpc {
    fn pinned(&self) -> bool {
        self.tunnel.as_ref().is_some_and(|t| t.live())
    }

    fn answered_at(&self) -> Option<std::time::Instant> {
        self.tunnel.as_ref().and_then(|t| t.answered_at())
    }

    fn read(&mut self, dev: &mut Device) -> Result<()> {
        self.contact(dev)
    }

    fn read_sent(&mut self, dev: &mut Device, pre: PreRead) -> Result<()> {
        // Taken only by a read with nothing to ask first: a first contact or a probe mapping would send
        // requests of their own over the connection, in its place (it is then answered unread).
        if self.introduced && !self.sleeps && !self.probes_to_map(dev) {
            self.pre_read = Some(pre);
        }
        let r = self.contact(dev);
        self.pre_read = None;
        r
    }

    fn read_for_event(&mut self, dev: &mut Device) -> Result<()> {
        // What notifications said, merged into the connection's last full status.
        // A sleeping device's report is all there is: it is taken before `/shelly` was ever read.
        let mirrored = match &self.tunnel {
            Some(t) if self.introduced || self.sleeps => t.take_mirror(),
            _ => Mirror::Absent,
        };
        match mirrored {
            Mirror::Changed(status) => {
                let recheck = self.introduced;
                let taken = self.take_pushed(dev, &StatusDoc::from_value(&status), recheck);
                self.give_back(status);
                taken
            }
            Mirror::Absent if self.sleeps => Err(Error::Sleeping {
                device: dev.label(),
                last_seen: dev.last_seen.clone(),
            }),
            // An earlier read took what this one was asked for (notifications in a row each ask): the device
            // spoke, nothing to read.
            Mirror::Held => {
                self.http.record_reach(true);
                Ok(())
            }
            Mirror::Absent => self.read(dev),
        }
    }

    fn sync_hooks(&mut self, dev: &mut Device) -> Result<()> {
        // Nothing to install: the reconciliation's large frame is not entered at all.
        if self.hooks.is_none() {
            return Ok(());
        }
        self.reconcile_hooks(dev)
    }

    fn moved(&mut self) {
        if let Some(t) = &self.tunnel {
            t.retarget();
        }
    }

    fn forget(&mut self) {
        // Coming back: the firmware, add-on or hooks may have changed meanwhile.
        self.introduced = false;
        self.probes_mapped = false;
        self.supported_known = false;
        self.recheck_off = false;
    }

    fn set_quick(&mut self, quick: bool) {
        self.quick = quick;
        self.http.set_quick(quick);
    }

    fn went_deep(&mut self) -> bool {
        std::mem::take(&mut self.deep)
    }

    fn follow(&mut self, follow: Option<Arc<crate::plan::Follow>>) {
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
        profile::check_has(dev, &self.shape, crate::ComponentKind::Output, index)?;
        super::switching::switch(self, dev, index, action)
    }

    /// `Light.Set`, `CCT.Set`, `RGB.Set` or `RGBW.Set` with the parts given, then the component's status.
    fn check_light(&self, dev: &Device, _index: usize, change: &LightChange) -> Result<()> {
        let caps = super::light_caps(dev, self.shape.light, &self.model.model)?;
        change.check_caps(&caps, &dev.label(), &self.model.model)
    }

    fn light(&mut self, dev: &mut Device, index: usize, change: &LightChange) -> Result<()> {
        profile::check_has(dev, &self.shape, crate::ComponentKind::Output, index)?;
        self.check_light(dev, index, change)?;
        let caps = super::light_caps(dev, self.shape.light, &self.model.model)?;
        let mut p = serde_json::Map::new();
        p.insert("id".into(), index.into());
        if let Some(on) = change.on {
            p.insert("on".into(), on.into());
        }
        if let Some(b) = change.brightness {
            p.insert("brightness".into(), b.round().into());
        }
        if let Some(k) = change.temperature {
            p.insert("ct".into(), k.into());
        }
        if let Some(rgb) = change.rgb {
            p.insert("rgb".into(), json!(rgb));
        }
        if let Some(w) = change.white {
            p.insert("white".into(), white_to_byte(w).into());
        }
        if let Some(t) = change.transition {
            p.insert("transition_duration".into(), t.into());
        }
        let set = self.output_method("Set");
        self.call(dev, &set, Some(serde_json::Value::Object(p)))?;
        let method = self.output_method("GetStatus");
        let status = self.call(dev, &method, Some(json!({ "id": index })))?;
        let temperature = dev.outputs[index].temperature;
        status::apply_light(&mut dev.outputs[index], Some(&channel(&status)), caps);
        // The component's own status carries its temperature as the full status does.
        let t = super::json::num(&status, &["temperature", "tC"]);
        dev.outputs[index].temperature = t
            .or(temperature)
            .filter(|_| self.model.temperature_monitoring);
        Ok(())
    }

    fn cover(&mut self, dev: &mut Device, index: usize, action: CoverAction) -> Result<()> {
        profile::check_has(dev, &self.shape, crate::ComponentKind::Cover, index)?;
        if let CoverAction::Position(_) = action {
            profile::check_calibrated(dev, index)?;
        }
        let (method, params) = match action {
            CoverAction::Open => ("Cover.Open", json!({ "id": index })),
            CoverAction::Close => ("Cover.Close", json!({ "id": index })),
            CoverAction::Stop => ("Cover.Stop", json!({ "id": index })),
            CoverAction::Position(p) => ("Cover.GoToPosition", json!({ "id": index, "pos": p })),
        };
        self.call(dev, method, Some(params))?;
        let status = self.call(dev, "Cover.GetStatus", Some(json!({ "id": index })))?;
        status::apply_cover(&mut dev.covers[index], Some(&channel(&status)));
        Ok(())
    }

    fn probe(&mut self, dev: &Device) -> bool {
        // Over MQTT the broker tells: worth a read unless it is down or the device announced itself gone.
        if let Some(port) = &self.mqtt {
            return port.unavailable().is_none();
        }
        if self.base.is_empty() {
            return false;
        }
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
        self.keeps(index)
    }

    fn energy_history(
        &mut self,
        dev: &mut Device,
        index: usize,
        range: (i64, i64),
    ) -> Result<crate::energy::EnergyHistory> {
        self.history(dev, index, range)
    }
}

/// Whether a `Shelly.GetStatus` result has the components of `shape`: outputs of its type (`switch:0` or
/// `light:0`), covers as `cover:0`, three-phase meters as `em:0`, per-channel meters as `em1:0`.
fn status_fits(shape: &Shape, status: &StatusDoc) -> bool {
    use status_doc::Kind;
    let outputs = Kind::of(shape.output_component()).unwrap_or(Kind::Switch);
    let meters = match shape.meter_source {
        crate::models::MeterSource::Em => status.has(Kind::Em, 0),
        crate::models::MeterSource::Em1 => status.has(Kind::Em1, 0),
        _ => true,
    };
    (shape.outputs > 0) == status.has(outputs, 0)
        && (shape.covers > 0) == status.has(Kind::Cover, 0)
        && meters
}

/// A component's own status (`Light.GetStatus`, `Cover.GetStatus`) read as a channel.
fn channel(status: &serde_json::Value) -> status_doc::Channel {
    serde::Deserialize::deserialize(status).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::rpc::status_doc::StatusRead;
    use crate::models::{ModelInfo, ModelLibrary};
    use crate::objects::TempProbe;

    fn device(model: &ModelInfo) -> Device {
        Device::with_components(model.inputs, model.outputs, model.meters)
    }

    #[test]
    fn a_status_of_another_profile_does_not_fit() {
        let lib = ModelLibrary::embedded();
        let two = lib.get("Shelly2PMG4").unwrap();
        let (switch, cover) = (two.shape("switch").unwrap(), two.shape("cover").unwrap());
        let as_switch = json!({"switch:0": {}, "switch:1": {}, "input:0": {}});
        let as_cover = json!({"cover:0": {}, "input:0": {}});
        assert!(status_fits(&switch, &StatusDoc::from_value(&as_switch)));
        assert!(!status_fits(&switch, &StatusDoc::from_value(&as_cover)));
        assert!(status_fits(&cover, &StatusDoc::from_value(&as_cover)));
        assert!(!status_fits(&cover, &StatusDoc::from_value(&as_switch)));
        let em = lib.get("ShellyPro3EM").unwrap();
        let (tri, mono) = (
            em.shape("triphase").unwrap(),
            em.shape("monophase").unwrap(),
        );
        assert!(status_fits(
            &tri,
            &StatusDoc::from_value(&json!({"em:0": {}}))
        ));
        assert!(!status_fits(
            &tri,
            &StatusDoc::from_value(&json!({"em1:0": {}}))
        ));
        assert!(status_fits(
            &mono,
            &StatusDoc::from_value(&json!({"em1:0": {}}))
        ));
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
        apply_status(
            &mut d,
            model,
            &model.default_shape(),
            &StatusDoc::from_value(&s),
            "T",
        );
        // An input in button mode reports state null: it has no state (unknown, not off).
        assert_eq!((d.inputs[0].state, d.inputs[1].state), (Some(true), None));
        assert!(d.outputs[0].state == Some(true) && d.outputs[1].state == Some(false));
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
        apply_status(
            &mut d,
            model,
            &model.default_shape(),
            &StatusDoc::from_value(&s),
            "T",
        );
        assert_eq!(d.meters[1].power, Some(-50.0));
        assert_eq!(d.meters[1].returned_energy, Some(7.5));
        assert_eq!(d.meters[2].voltage, None);
        assert_eq!(d.total_power, Some(60.0));
        assert_eq!(d.total_energy, Some(6.0));
        assert_eq!(d.temperature, Some(38.5));
    }

    #[test]
    fn the_read_after_a_connect_takes_the_subscription_status_without_a_request() {
        use crate::driver::canned::{Script, testing};
        let lib = ModelLibrary::embedded();
        let model = lib.get("ShellyPlus1PM").unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _theirs = l.accept().unwrap();
        let tunnel = Arc::new(Tunnel::default());
        let status = json!({"switch:0": {"id": 0, "output": true, "apower": 12.5}, "input:0": {"id": 0, "state": false}});
        tunnel.attach(
            crate::driver::ws::secure::Writer::plain(ours),
            "me".into(),
            None,
            StatusRead::from_value(&status).map(|s| (s, std::time::Instant::now())),
            None,
        );
        let script = Script::default();
        let mut rpc = Rpc::new(
            testing::http(&script),
            "http://127.0.0.1:9".into(),
            model.clone(),
            None,
            Credentials::default(),
            Some(tunnel),
        );
        rpc.introduced = true;
        rpc.supported_known = true;
        let mut d = device(model);
        rpc.read(&mut d).unwrap();
        assert!(testing::targets(&script).is_empty(), "no request");
        assert_eq!(rpc.reach(), Some(true));
        assert_eq!(d.outputs[0].state, Some(true));
        assert_eq!(d.meters[0].power, Some(12.5));
        assert_eq!(d.inputs[0].state, Some(false));
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
            assert!(transport::idempotent(&format!("RPC {m}")), "{m}");
        }
        for m in [
            "Switch.Toggle",
            "Webhook.Create",
            "Shelly.Reboot",
            "Shelly.Update",
        ] {
            assert!(!transport::idempotent(&format!("RPC {m}")), "{m}");
        }
    }

    #[test]
    fn frames_errors_and_probe_ids() {
        assert_eq!(
            parse_frame(&mut json!({"id": 1, "result": {"was_on": true}}), "m").unwrap()["was_on"],
            true
        );
        assert_eq!(
            parse_frame(
                &mut json!({"id": 1, "error": {"code": -105, "message": "not found"}}),
                "m"
            ),
            Err(FrameError::Rpc(-105, "not found".into()))
        );
        assert!(matches!(
            parse_frame(&mut json!({"id": 1}), "m"),
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
