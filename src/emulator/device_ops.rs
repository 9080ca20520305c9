//! Operations on a device's profile, covers, lights, inputs and sensors, for the API and the admin endpoint.

use super::Press;
use super::cover::CoverReport;
use super::device::{Device, Family, finite};
use super::layout::Layout;
use super::sensors;
use super::state::{InputType, Source};
use crate::models::SensorQuantity;

impl Device {
    /// Switches to another profile as the app does: the device reboots into the new layout.
    pub(crate) fn set_profile(&self, name: &str) -> Result<(), String> {
        if self.ident.family == Family::Tasmota {
            return Err(format!(
                "device {} (Tasmota) has no profiles; shutters are configured with the spec",
                self.index
            ));
        }
        let shape = self
            .ident
            .info
            .shape_for(Some(name))
            .map_err(|e| format!("device {}: {e}", self.index))?;
        let layout = Layout::shelly(&self.ident.info, &shape);
        self.state().reboot(layout);
        Ok(())
    }

    pub(crate) fn profile(&self) -> Option<String> {
        self.state().layout.profile.clone()
    }

    pub(crate) fn cover(&self, n: usize) -> Result<CoverReport, String> {
        let s = self.state();
        self.check("cover", n, s.covers.len())?;
        Ok(s.covers[n].report(s.now()))
    }

    pub(crate) fn set_cover_calibrated(&self, n: usize, calibrated: bool) -> Result<(), String> {
        let mut s = self.state();
        self.check("cover", n, s.covers.len())?;
        let now = s.now();
        let c = &mut s.covers[n];
        if !calibrated {
            // Losing calibration ends a calibration run too.
            if matches!(c.phase, super::cover::Phase::Calibrating { .. }) {
                c.stop(now, Source::Local);
            }
        }
        c.calibrated = calibrated;
        s.sync_relays(n, now);
        Ok(())
    }

    pub(crate) fn set_cover_position(&self, n: usize, pos: f64) -> Result<(), String> {
        let mut s = self.state();
        self.check("cover", n, s.covers.len())?;
        finite("position", pos)?;
        if !(0.0..=100.0).contains(&pos) {
            return Err(format!("position must be 0–100, got {pos}"));
        }
        let now = s.now();
        s.covers[n].place(pos);
        s.sync_relays(n, now);
        Ok(())
    }

    /// Sets reading `n` of `quantity` in device order (built-in sensors first, then probes, then add-ons).
    pub(crate) fn set_sensor(
        &self,
        quantity: SensorQuantity,
        n: usize,
        value: Option<f64>,
    ) -> Result<(), String> {
        let mut s = self.state();
        let of: Vec<usize> = sensors::of(&s.sensors, quantity).collect();
        self.check(&format!("{quantity} sensor"), n, of.len())?;
        if let Some(v) = value {
            finite(quantity.as_str(), v)?;
        }
        s.sensors[of[n]].value = value;
        Ok(())
    }

    pub(crate) fn set_battery(&self, percent: f64) -> Result<(), String> {
        finite("percent", percent)?;
        if !(0.0..=100.0).contains(&percent) {
            return Err(format!("battery percent must be 0–100, got {percent}"));
        }
        let mut s = self.state();
        if !s.layout.battery {
            return Err(format!(
                "device {} ({}) has no battery",
                self.index, self.ident.info.model
            ));
        }
        s.battery = percent;
        Ok(())
    }

    pub(crate) fn set_input_type(&self, i: usize, t: InputType) -> Result<(), String> {
        let mut s = self.state();
        self.check("input", i, s.input_types.len())?;
        s.input_types[i] = t;
        Ok(())
    }

    /// Fires the webhooks of a button press on input `i` (which must be a button).
    pub(crate) fn press(&self, i: usize, press: Press) -> Result<usize, String> {
        {
            let s = self.state();
            self.check("input", i, s.input_types.len())?;
            if s.input_types[i] != InputType::Button {
                return Err(format!(
                    "input {i} of device {} is a switch; set its type to button first",
                    self.index
                ));
            }
        }
        Ok(self.fire_event(press.event(), i))
    }

    pub(crate) fn set_light(&self, n: usize, on: bool, brightness: u8) -> Result<(), String> {
        let mut s = self.state();
        self.check("light", n, light_count(&s))?;
        if brightness > 100 {
            return Err(format!("brightness must be 0–100, got {brightness}"));
        }
        s.set_output(n, on, Source::Local);
        s.brightness[n] = brightness;
        Ok(())
    }

    pub(crate) fn light(&self, n: usize) -> Result<(bool, u8), String> {
        let s = self.state();
        self.check("light", n, light_count(&s))?;
        Ok((s.outputs[n], s.brightness[n]))
    }

    /// A light's colour as a local control would set it; `None` keeps a part. The temperature must be within
    /// the light's range (a light without one keeps its value).
    pub(crate) fn set_light_color(
        &self,
        n: usize,
        ct: Option<u32>,
        rgb: Option<[u8; 3]>,
        white: Option<u8>,
    ) -> Result<(), String> {
        let mut s = self.state();
        self.check("light", n, light_count(&s))?;
        if let Some(k) = ct {
            match s.layout.light.and_then(|c| c.temperature) {
                Some([lo, hi]) if (lo..=hi).contains(&k) => s.ct[n] = k,
                Some([lo, hi]) => return Err(format!("ct must be {lo}–{hi} K, got {k}")),
                None => return Err("this light has no colour temperature".into()),
            }
        }
        if let Some(rgb) = rgb {
            s.rgb[n] = rgb;
        }
        if let Some(w) = white {
            s.white[n] = w;
        }
        s.sources[n] = Source::Local;
        Ok(())
    }

    pub(crate) fn light_color(&self, n: usize) -> Result<(u32, [u8; 3], u8), String> {
        let s = self.state();
        self.check("light", n, light_count(&s))?;
        Ok((s.ct[n], s.rgb[n], s.white[n]))
    }

    pub(crate) fn set_frequency(&self, meter: usize, hz: f64) -> Result<(), String> {
        let mut s = self.state();
        self.check("meter", meter, s.meters.len())?;
        finite("hz", hz)?;
        s.meters[meter].freq = hz;
        Ok(())
    }
}

/// How many outputs are lights: every output of a Shelly light model, the last one of a Tasmota light.
fn light_count(s: &super::state::DeviceState) -> usize {
    if s.layout.lights || s.layout.light.is_some() {
        s.outputs.len()
    } else {
        0
    }
}
