//! Lights beyond on/off: what a light can do ([`LightCaps`], from the model library, or for Tasmota from what
//! the device reports), a change to make ([`LightChange`]), and the checks every driver runs before it sends
//! anything. Units: brightness and white in % (0–100), colour temperature in K, RGB 0–255 per channel,
//! transitions in s.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest transition any family takes (Gen1 `transition` up to 10 800 000 ms; Gen2+ the same as s).
pub(crate) const MAX_TRANSITION_S: f64 = 10_800.0;

/// What a light output can do besides on/off. In the model library as `"light": {"temperature": [2700, 6500],
/// "rgb": true, "white": true}` (brightness is always there; absent fields are false/none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LightCaps {
    /// Brightness in % (every light the library knows has it).
    #[serde(default = "yes")]
    pub brightness: bool,
    /// Colour temperature range in K (`[min, max]`), for tunable-white lights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<[u32; 2]>,
    /// Red, green and blue channels.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rgb: bool,
    /// A separate white channel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub white: bool,
}

fn yes() -> bool {
    true
}

impl Default for LightCaps {
    /// A dimmer: brightness only.
    fn default() -> Self {
        LightCaps {
            brightness: true,
            temperature: None,
            rgb: false,
            white: false,
        }
    }
}

impl LightCaps {
    /// A dimmer (brightness only).
    pub fn dimmer() -> Self {
        LightCaps::default()
    }

    /// The Gen2+ component type that carries such a light: `light`, `cct`, `rgb` or `rgbw`.
    pub fn rpc_component(&self) -> &'static str {
        match (self.rgb, self.white, self.temperature.is_some()) {
            (true, true, _) => "rgbw",
            (true, false, _) => "rgb",
            (false, _, true) => "cct",
            _ => "light",
        }
    }

    /// The capabilities in words, for listings: `brightness, 2700–6500 K, RGB, white`.
    pub fn describe(&self) -> String {
        let mut p = Vec::new();
        if self.brightness {
            p.push("brightness".to_string());
        }
        if let Some([lo, hi]) = self.temperature {
            p.push(format!("{lo}–{hi} K"));
        }
        if self.rgb {
            p.push("RGB".into());
        }
        if self.white {
            p.push("white".into());
        }
        p.join(", ")
    }

    /// Problems of a library entry's capabilities (an empty or inverted temperature range).
    pub(crate) fn check(&self) -> Option<String> {
        match self.temperature {
            Some([lo, hi]) if lo == 0 || lo >= hi => Some(format!(
                "light temperature range [{lo}, {hi}] must be two rising values in K"
            )),
            _ => None,
        }
    }
}

/// A change to a light: every part optional, only the given ones are sent. Build it with [`LightChange::new`]
/// and the setters:
///
/// ```
/// let change = smartdev::LightChange::new().on(true).brightness(40.0).temperature(3000);
/// assert_eq!(change.brightness, Some(40.0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct LightChange {
    /// Switch on or off.
    pub on: Option<bool>,
    /// Brightness in % (0–100).
    pub brightness: Option<f64>,
    /// Colour temperature in K, within the light's range.
    pub temperature: Option<u32>,
    /// Red, green, blue (0–255 each).
    pub rgb: Option<[u8; 3]>,
    /// White channel in % (0–100).
    pub white: Option<f64>,
    /// How long the change takes, in s (0–10 800; Tasmota 0.5–20).
    pub transition: Option<f64>,
}

impl LightChange {
    /// An empty change (set at least one part before sending it).
    pub fn new() -> Self {
        LightChange::default()
    }
    /// Switch on (`true`) or off.
    pub fn on(mut self, on: bool) -> Self {
        self.on = Some(on);
        self
    }
    /// Brightness in %.
    pub fn brightness(mut self, percent: f64) -> Self {
        self.brightness = Some(percent);
        self
    }
    /// Colour temperature in K.
    pub fn temperature(mut self, kelvin: u32) -> Self {
        self.temperature = Some(kelvin);
        self
    }
    /// Colour as red, green, blue.
    pub fn rgb(mut self, rgb: [u8; 3]) -> Self {
        self.rgb = Some(rgb);
        self
    }
    /// White channel in %.
    pub fn white(mut self, percent: f64) -> Self {
        self.white = Some(percent);
        self
    }
    /// Transition time in s.
    pub fn transition(mut self, seconds: f64) -> Self {
        self.transition = Some(seconds);
        self
    }

    /// The checks that need no device: something to change, percentages within 0–100, a transition within
    /// 0–10 800 s.
    pub(crate) fn check(&self) -> Result<()> {
        if self.on.is_none()
            && self.brightness.is_none()
            && self.temperature.is_none()
            && self.rgb.is_none()
            && self.white.is_none()
        {
            return Err(Error::InvalidArgument(
                "nothing to change: give on/off, a brightness, a colour temperature, an RGB colour or a white level"
                    .into(),
            ));
        }
        for (v, what) in [(self.brightness, "brightness"), (self.white, "white")] {
            if let Some(v) = v
                && !(0.0..=100.0).contains(&v)
            {
                return Err(Error::InvalidArgument(format!(
                    "{what} {v} % is out of range; use 0 to 100 %"
                )));
            }
        }
        if let Some(t) = self.transition
            && !(0.0..=MAX_TRANSITION_S).contains(&t)
        {
            return Err(Error::InvalidArgument(format!(
                "transition {t} s is out of range; use 0 to {MAX_TRANSITION_S} s"
            )));
        }
        Ok(())
    }

    /// The checks against what the light can do (`model` names it in the message), before anything is sent.
    pub(crate) fn check_caps(&self, caps: &LightCaps, device: &str, model: &str) -> Result<()> {
        let lacks = |what: &str| Error::Unsupported {
            device: device.to_string(),
            message: format!("this light ({model}) has no {what}; leave it out of the change"),
        };
        if self.brightness.is_some() && !caps.brightness {
            return Err(lacks("brightness"));
        }
        if let Some(k) = self.temperature {
            let Some([lo, hi]) = caps.temperature else {
                return Err(lacks("colour temperature"));
            };
            if !(lo..=hi).contains(&k) {
                return Err(Error::InvalidArgument(format!(
                    "colour temperature {k} K is out of range for {model}; use {lo} to {hi} K"
                )));
            }
        }
        if self.rgb.is_some() && !caps.rgb {
            return Err(lacks("RGB colour"));
        }
        if self.white.is_some() && !caps.white {
            return Err(lacks("white channel"));
        }
        Ok(())
    }
}

/// A white level in % as the 0–255 the Shelly APIs take.
pub(crate) fn white_to_byte(percent: f64) -> u8 {
    (percent.clamp(0.0, 100.0) * 2.55).round() as u8
}

/// A 0–255 white level as % (one decimal), `None` when out of range.
pub(crate) fn white_from_byte(v: f64) -> Option<f64> {
    (0.0..=255.0)
        .contains(&v)
        .then(|| (v / 2.55 * 10.0).round() / 10.0)
}

/// An RGB triple from three reported numbers, `None` unless each is within 0–255.
pub(crate) fn rgb_from(values: [Option<f64>; 3]) -> Option<[u8; 3]> {
    let mut out = [0u8; 3];
    for (o, v) in out.iter_mut().zip(values) {
        let v = v.filter(|v| (0.0..=255.0).contains(v) && v.fract() == 0.0)?;
        *o = v as u8;
    }
    Some(out)
}

/// `RRGGBB` (with or without `#`) as an RGB triple.
pub fn parse_rgb(text: &str) -> Result<[u8; 3]> {
    let hex = text.strip_prefix('#').unwrap_or(text);
    let bad = || {
        Error::InvalidArgument(format!(
            "colour {} is not RRGGBB; give six hex digits, e.g. FF8000",
            crate::text::quote(text, 40)
        ))
    };
    if hex.len() != 6 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 3];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// An RGB triple as `RRGGBB`.
pub fn format_rgb(rgb: [u8; 3]) -> String {
    format!("{:02X}{:02X}{:02X}", rgb[0], rgb[1], rgb[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_follow_capabilities() {
        let mut c = LightCaps::dimmer();
        assert_eq!(c.rpc_component(), "light");
        c.temperature = Some([2700, 6500]);
        assert_eq!(c.rpc_component(), "cct");
        c.rgb = true;
        assert_eq!(c.rpc_component(), "rgb");
        c.white = true;
        assert_eq!(c.rpc_component(), "rgbw");
    }

    #[test]
    fn ranges_and_capabilities_are_checked_with_the_range_in_the_message() {
        let e = LightChange::new().brightness(101.0).check().unwrap_err();
        assert!(e.to_string().contains("0 to 100 %"), "{e}");
        assert!(LightChange::new().brightness(f64::NAN).check().is_err());
        assert!(
            LightChange::new().transition(1.0).check().is_err(),
            "nothing to change"
        );
        let cct = LightCaps {
            temperature: Some([2700, 6500]),
            ..LightCaps::dimmer()
        };
        let e = LightChange::new()
            .temperature(2000)
            .check_caps(&cct, "D", "M")
            .unwrap_err();
        assert!(e.to_string().contains("2700 to 6500 K"), "{e}");
        let e = LightChange::new()
            .rgb([1, 2, 3])
            .check_caps(&LightCaps::dimmer(), "D", "ShellyDimmer2")
            .unwrap_err();
        assert!(e.to_string().contains("RGB") && e.to_string().contains("ShellyDimmer2"));
    }

    #[test]
    fn rgb_text_and_white_bytes() {
        assert_eq!(parse_rgb("#FF8000").unwrap(), [255, 128, 0]);
        assert!(parse_rgb("FF80").is_err());
        assert!(parse_rgb("GG0000").is_err());
        assert!(parse_rgb("ÿÿÿ").is_err());
        assert_eq!(format_rgb([255, 128, 0]), "FF8000");
        assert_eq!(white_to_byte(100.0), 255);
        assert_eq!(white_from_byte(255.0), Some(100.0));
        assert_eq!(white_from_byte(256.0), None);
        assert_eq!(rgb_from([Some(1.0), Some(2.0), Some(300.0)]), None);
        assert_eq!(rgb_from([Some(1.0), None, Some(3.0)]), None);
    }
}
