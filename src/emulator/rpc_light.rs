//! Gen2+ lights: `light:N` (dimmers), `cct:N` (tunable white), `rgb:N` and `rgbw:N` (colour): status and config
//! payloads and the `Light.*`, `CCT.*`, `RGB.*`, `RGBW.*` methods, shaped like Pro Dimmer and Dimmer Gen3 captures
//! and the CCT/RGB/RGBW component docs (`ct` in K within `ct_range`, `rgb` as `[r, g, b]` 0–255, `white` 0–255).

use serde_json::{Map, Value, json};

use super::components::{source_name, temperature};
use super::device::Device;
use super::rpc::{RpcError, bool_param, index, invalid, missing, opt_number};
use super::state::{DeviceState, Source};
use crate::light::LightCaps;

/// The `Light.*` methods (`Shelly.ListMethods`).
pub(crate) const LIGHT: &[&str] = &[
    "Light.Set",
    "Light.Toggle",
    "Light.GetStatus",
    "Light.GetConfig",
];
/// The `CCT.*` methods.
pub(crate) const CCT: &[&str] = &["CCT.Set", "CCT.Toggle", "CCT.GetStatus", "CCT.GetConfig"];
/// The `RGB.*` methods.
pub(crate) const RGB: &[&str] = &["RGB.Set", "RGB.Toggle", "RGB.GetStatus", "RGB.GetConfig"];
/// The `RGBW.*` methods.
pub(crate) const RGBW: &[&str] = &[
    "RGBW.Set",
    "RGBW.Toggle",
    "RGBW.GetStatus",
    "RGBW.GetConfig",
];

fn caps(s: &DeviceState) -> LightCaps {
    s.layout.light.unwrap_or_default()
}

pub(crate) fn status(s: &DeviceState, i: usize) -> Value {
    let c = caps(s);
    let mut m = Map::new();
    m.insert("id".into(), json!(i));
    m.insert("source".into(), json!(source_name(s.sources[i])));
    m.insert("output".into(), json!(s.outputs[i]));
    m.insert("brightness".into(), json!(s.brightness[i]));
    if c.temperature.is_some() {
        m.insert("ct".into(), json!(s.ct[i]));
    }
    if c.rgb {
        m.insert("rgb".into(), json!(s.rgb[i]));
    }
    if c.white {
        m.insert("white".into(), json!(s.white[i]));
    }
    if s.layout.temperature {
        m.insert("temperature".into(), temperature(s.temperature));
    }
    Value::Object(m)
}

pub(crate) fn config(s: &DeviceState, i: usize) -> Value {
    let mut v = json!({
        "id": i,
        "name": null,
        "initial_state": "restore_last",
        "auto_on": false,
        "auto_on_delay": 60.0,
        "auto_off": false,
        "auto_off_delay": 60.0,
        "transition_duration": 3.0,
        "min_brightness_on_toggle": 3,
        "night_mode": {"enable": false, "brightness": 50, "active_between": []},
        "button_fade_rate": 3,
        "button_presets": {"button_doublepush": {"brightness": 100}},
        "in_mode": "dim",
    });
    if let Some(range) = caps(s).temperature {
        v["ct_range"] = json!(range);
    }
    v
}

/// A whole number argument within `lo..=hi`, `None` when absent; anything else is the firmware's -103.
fn int_in(p: &Map<String, Value>, name: &str, lo: f64, hi: f64) -> Result<Option<f64>, RpcError> {
    match opt_number(p, name)? {
        Some(v) if (lo..=hi).contains(&v) => Ok(Some(v.round())),
        Some(_) => Err(invalid(name)),
        None => Ok(None),
    }
}

/// `component` is the namespace called (`light`, `cct`, `rgb`, `rgbw`); only the device's current one has
/// instances.
pub(crate) fn call(
    dev: &Device,
    component: &str,
    method: &str,
    p: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let mut s = dev.state();
    let action = method.split_once('.').map_or(method, |(_, a)| a);
    if !matches!(action, "set" | "toggle" | "getstatus" | "getconfig") {
        return Err(RpcError::unknown());
    }
    let current = s.layout.lights && s.layout.output_component() == component;
    let n = if current { s.outputs.len() } else { 0 };
    let i = index(p, 0, n)?;
    match action {
        "getstatus" => Ok(status(&s, i)),
        "getconfig" => Ok(config(&s, i)),
        "toggle" => {
            let on = !s.outputs[i];
            s.set_output(i, on, Source::Remote);
            Ok(Value::Null)
        }
        _ => {
            let c = caps(&s);
            let on = match p.get("on") {
                None | Some(Value::Null) => None,
                Some(_) => Some(bool_param(p, "on")?),
            };
            let brightness = int_in(p, "brightness", 0.0, 100.0)?;
            let ct = match c.temperature {
                Some([lo, hi]) => int_in(p, "ct", f64::from(lo), f64::from(hi))?,
                None => None,
            };
            let rgb = match p.get("rgb") {
                Some(v) if c.rgb && !v.is_null() => Some(rgb_param(v)?),
                _ => None,
            };
            let white = if c.white {
                int_in(p, "white", 0.0, 255.0)?
            } else {
                None
            };
            if opt_number(p, "transition_duration")?.is_some_and(|t| t < 0.0) {
                return Err(invalid("transition_duration"));
            }
            if on.is_none()
                && brightness.is_none()
                && ct.is_none()
                && rgb.is_none()
                && white.is_none()
            {
                return Err(missing("on"));
            }
            // The transition is not emulated: the target is reached at once.
            if let Some(b) = brightness {
                s.brightness[i] = b as u8;
            }
            if let Some(k) = ct {
                s.ct[i] = k as u32;
            }
            if let Some(rgb) = rgb {
                s.rgb[i] = rgb;
            }
            if let Some(w) = white {
                s.white[i] = w as u8;
            }
            let on = on.unwrap_or(s.outputs[i]);
            s.set_output(i, on, Source::Remote);
            Ok(Value::Null)
        }
    }
}

/// `rgb`: exactly three whole numbers 0–255.
fn rgb_param(v: &Value) -> Result<[u8; 3], RpcError> {
    let a = v
        .as_array()
        .filter(|a| a.len() == 3)
        .ok_or_else(|| invalid("rgb"))?;
    let mut out = [0u8; 3];
    for (o, x) in out.iter_mut().zip(a) {
        *o = x
            .as_u64()
            .filter(|x| *x <= 255)
            .ok_or_else(|| invalid("rgb"))? as u8;
    }
    Ok(out)
}
