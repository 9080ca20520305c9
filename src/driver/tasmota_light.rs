//! Tasmota lights: what the light can do and its state, from the fields `State`/`Status 11` report (`Dimmer`
//! 0–100, `CT` in mireds 153–500, `Color` as hex `RRGGBB[WW]` or `CW`, `White` 0–100), and the commands a
//! change becomes (`Fade2`/`Speed2` for a transition, `Power<n>`, `Color2 r,g,b`, `CT`, `White`, `Dimmer`).
//! Tasmota's light is the last power channel (`Power<n>`, n = the number of outputs): relays come first.

use serde_json::Value;

use super::json::{num, text};
use crate::light::{LightCaps, LightChange};
use crate::objects::Output;

/// Tasmota's colour temperature range in mireds (cold → warm), `CT 153..500`.
const CT_MIREDS: [f64; 2] = [153.0, 500.0];

/// Kelvin from mireds (`1 000 000 / mireds`), rounded to whole K.
fn kelvin(mireds: f64) -> f64 {
    (1_000_000.0 / mireds).round()
}

/// Mireds from kelvin, within Tasmota's range.
fn mireds(kelvin: u32) -> u32 {
    ((1_000_000.0 / f64::from(kelvin.max(1))).round()).clamp(CT_MIREDS[0], CT_MIREDS[1]) as u32
}

/// The colour's red, green and blue from `Color` (hex `RRGGBB…`, or `r,g,b…` with `SetOption17 1`).
fn color(sts: &Value) -> Option<[u8; 3]> {
    let c = text(sts, &["Color"])?;
    let parts: Vec<&str> = c.split(',').collect();
    let mut out = [0u8; 3];
    if parts.len() >= 3 {
        for (o, p) in out.iter_mut().zip(&parts) {
            *o = p.trim().parse().ok()?;
        }
        return Some(out);
    }
    let hex = c.trim_start_matches('#');
    if hex.len() < 6 || !hex.is_ascii() {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// What the light reporting `sts` (a `StatusSTS` or `State` object) can do: `None` when it reports no
/// `Dimmer` (no light).
pub(crate) fn caps(sts: Option<&Value>) -> Option<LightCaps> {
    let sts = sts?;
    num(sts, &["Dimmer"])?;
    let mut caps = LightCaps::dimmer();
    caps.temperature =
        num(sts, &["CT"]).map(|_| [kelvin(CT_MIREDS[1]) as u32, kelvin(CT_MIREDS[0]) as u32]);
    caps.rgb = color(sts).is_some();
    caps.white = caps.rgb && num(sts, &["White"]).is_some();
    Some(caps)
}

/// The light's state from `sts` into `out`; what is absent or out of range is `None`.
pub(crate) fn apply(out: &mut Output, sts: &Value, caps: LightCaps) {
    let pct = |k: &str| num(sts, &[k]).filter(|v| (0.0..=100.0).contains(v));
    out.brightness = pct("Dimmer");
    out.color_temperature = num(sts, &["CT"])
        .filter(|m| caps.temperature.is_some() && (CT_MIREDS[0]..=CT_MIREDS[1]).contains(m))
        .map(kelvin);
    out.rgb = color(sts).filter(|_| caps.rgb);
    out.white = pct("White").filter(|_| caps.white);
}

/// The commands for `change` on power channel `n`, in the order they must run: a transition's fade first,
/// switching on before the values (`SetOption20 0` would switch on anyway), off last.
pub(crate) fn commands(change: &LightChange, n: usize) -> Vec<String> {
    let mut c = Vec::new();
    match change.transition {
        // `Speed2` counts half-seconds for a full fade, 1..40 (not stored).
        Some(t) if t > 0.0 => {
            c.push("Fade2 1".to_string());
            c.push(format!("Speed2 {}", (t * 2.0).round().clamp(1.0, 40.0)));
        }
        Some(_) => c.push("Fade2 0".to_string()),
        None => {}
    }
    if change.on == Some(true) {
        c.push(format!("Power{n} 1"));
    }
    if let Some([r, g, b]) = change.rgb {
        c.push(format!("Color2 {r},{g},{b}"));
    }
    if let Some(k) = change.temperature {
        c.push(format!("CT {}", mireds(k)));
    }
    if let Some(w) = change.white {
        c.push(format!("White {}", w.round()));
    }
    if let Some(b) = change.brightness {
        c.push(format!("Dimmer {}", b.round()));
    }
    if change.on == Some(false) {
        c.push(format!("Power{n} 0"));
    }
    c
}

/// Tasmota's transitions: `Speed2` 1..40 half-seconds, so 0.5–20 s (0: no fade).
pub(crate) fn check_transition(change: &LightChange) -> Option<String> {
    change
        .transition
        .filter(|t| *t != 0.0 && !(0.5..=20.0).contains(t))
        .map(|t| {
            format!("transition {t} s is out of range for Tasmota; use 0 (none) or 0.5 to 20 s")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capabilities_and_state_from_what_the_light_reports() {
        let sts =
            json!({"POWER": "ON", "Dimmer": 40, "Color": "FF800000CC", "CT": 250, "White": 80});
        let c = caps(Some(&sts)).unwrap();
        assert_eq!(
            (c.rgb, c.white, c.temperature),
            (true, true, Some([2000, 6536]))
        );
        let mut o = Output::default();
        apply(&mut o, &sts, c);
        assert_eq!(o.brightness, Some(40.0));
        assert_eq!(o.color_temperature, Some(4000.0));
        assert_eq!(o.rgb, Some([255, 128, 0]));
        assert_eq!(o.white, Some(80.0));
        // A CT-only light reports two channels: no RGB.
        let cw = json!({"Dimmer": 10, "Color": "1A1A", "CT": 153});
        assert!(!caps(Some(&cw)).unwrap().rgb);
        assert_eq!(caps(Some(&json!({"POWER": "ON"}))), None, "a relay");
        let bad = json!({"Dimmer": 400, "Color": "ZZ", "CT": 9000});
        apply(&mut o, &bad, c);
        assert_eq!(
            (o.brightness, o.rgb, o.color_temperature),
            (None, None, None)
        );
    }

    #[test]
    fn a_change_becomes_commands_in_order() {
        let ch = LightChange::new()
            .on(true)
            .brightness(30.0)
            .temperature(4000)
            .transition(2.0);
        assert_eq!(
            commands(&ch, 1),
            ["Fade2 1", "Speed2 4", "Power1 1", "CT 250", "Dimmer 30"]
        );
        assert_eq!(commands(&LightChange::new().on(false), 2), ["Power2 0"]);
        assert!(check_transition(&LightChange::new().transition(30.0)).is_some());
        assert!(check_transition(&LightChange::new().transition(0.0)).is_none());
    }
}
