//! Tasmota lights (a spec's `tasmota_light`): the last output is the light's `Power<n>`; `Dimmer 0..100`, `CT
//! 153..500` (mireds), `Color[1|2] r,g,b` or `#RRGGBB`, `White 1..100`, `Fade[2]`, `Speed[2]`, and the fields
//! `State`/`Status 11` show (`Dimmer`, `Color` hex with one pair per channel, `White`, `CT`). As firmware with
//! `SetOption20 0` does, setting a value switches the light on; `Dimmer 0` switches it off.

use serde_json::{Map, Value, json};

use super::device::Device;
use super::state::{DeviceState, Source};
use crate::light::LightCaps;

/// The light's output index and capabilities, if the device has a light.
fn light(s: &DeviceState) -> Option<(usize, LightCaps)> {
    Some((s.outputs.len().checked_sub(1)?, s.layout.light?))
}

/// Mireds from the stored kelvin.
fn mireds(k: u32) -> u32 {
    (1_000_000 / k.max(1)).clamp(153, 500)
}

/// `Color`: one hex pair per channel (R, G, B, then W or cold/warm white, or one pair for a single channel).
fn color_hex(s: &DeviceState, i: usize, caps: LightCaps) -> String {
    let [r, g, b] = s.rgb[i];
    let mut hex = String::new();
    if caps.rgb {
        hex.push_str(&format!("{r:02X}{g:02X}{b:02X}"));
    }
    if caps.temperature.is_some() {
        // Cold and warm white: the colour temperature shares the brightness between them.
        let warm = f64::from(mireds(s.ct[i]) - 153) / 347.0;
        let level = f64::from(s.brightness[i]) * 2.55;
        let (c, w) = ((level * (1.0 - warm)).round(), (level * warm).round());
        hex.push_str(&format!("{:02X}{:02X}", c as u8, w as u8));
    } else if caps.white || !caps.rgb {
        let w = if caps.rgb {
            s.white[i]
        } else {
            (f64::from(s.brightness[i]) * 2.55).round() as u8
        };
        hex.push_str(&format!("{w:02X}"));
    }
    hex
}

/// The light's fields of `State` / `StatusSTS`.
pub(crate) fn insert_state(s: &DeviceState, m: &mut Map<String, Value>) {
    let Some((i, caps)) = light(s) else {
        return;
    };
    m.insert("Dimmer".into(), json!(s.brightness[i]));
    m.insert("Color".into(), json!(color_hex(s, i, caps)));
    if caps.white {
        m.insert(
            "White".into(),
            json!((f64::from(s.white[i]) / 2.55).round()),
        );
    }
    if caps.temperature.is_some() {
        m.insert("CT".into(), json!(mireds(s.ct[i])));
    }
    m.insert("Fade".into(), json!("OFF"));
    m.insert("Speed".into(), json!(1));
    m.insert("LedTable".into(), json!("ON"));
}

/// `r,g,b` or `#RRGGBB…` (the first three channels).
fn parse_color(arg: &str) -> Option<[u8; 3]> {
    let mut out = [0u8; 3];
    if arg.contains(',') {
        let parts: Vec<&str> = arg.split(',').collect();
        if parts.len() < 3 {
            return None;
        }
        for (o, p) in out.iter_mut().zip(parts) {
            *o = p.trim().parse().ok()?;
        }
        return Some(out);
    }
    let hex = arg.trim_start_matches('#');
    if hex.len() < 6 || !hex.is_ascii() {
        return None;
    }
    for (k, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).ok()?;
    }
    Some(out)
}

/// One light command (`name` lower case); `None` when the device has no light or the command is not a light
/// command (Tasmota then does not know it).
pub(crate) fn command(dev: &Device, name: &str, arg: &str) -> Option<Value> {
    let mut s = dev.state();
    let (i, caps) = light(&s)?;
    let number = || arg.parse::<f64>().ok().filter(|v| v.is_finite());
    match name {
        "dimmer" => {
            if let Some(v) = number() {
                let v = v.round().clamp(0.0, 100.0) as u8;
                s.brightness[i] = v;
                s.set_output(i, v > 0, Source::Remote);
            }
        }
        "ct" if caps.temperature.is_some() => {
            if let Some(v) = number() {
                s.ct[i] = (1_000_000.0 / v.round().clamp(153.0, 500.0)).round() as u32;
                s.set_output(i, true, Source::Remote);
            }
        }
        "color" | "color1" | "color2" if caps.rgb => {
            if !arg.is_empty() {
                s.rgb[i] = parse_color(arg)?;
                s.set_output(i, true, Source::Remote);
            }
        }
        "white" if caps.white => {
            if let Some(v) = number() {
                s.white[i] = (v.round().clamp(0.0, 100.0) * 2.55).round() as u8;
                s.set_output(i, true, Source::Remote);
            }
        }
        // Fades are accepted and not emulated: the target is reached at once.
        "fade" | "fade2" => return Some(json!({"Fade": if arg == "1" { "ON" } else { "OFF" }})),
        "speed" | "speed2" => {
            return Some(json!({"Speed": number().unwrap_or(1.0).clamp(1.0, 40.0)}));
        }
        _ => return None,
    }
    let mut m = Map::new();
    m.insert(
        if s.outputs.len() == 1 {
            "POWER".into()
        } else {
            format!("POWER{}", i + 1)
        },
        json!(s.power_text[usize::from(!s.outputs[i])]),
    );
    insert_state(&s, &mut m);
    Some(Value::Object(m))
}
