//! Tasmota shutters: `ShutterOpen<n>`, `ShutterClose<n>`, `ShutterStop<n>`, `ShutterPosition<n> <pos>` and the
//! `"Shutter<n>": {"Position", "Direction", "Target", "Tilt"}` object (answers and `StatusSNS`), as the shutter
//! driver (`xdrv_27_shutter`) reports it: Direction 1 opening, -1 closing, 0 standing.

use serde_json::{Map, Value, json};

use super::cover::Direction;
use super::device::Device;
use super::state::{DeviceState, Source};

/// `"Shutter<k+1>"` and its position object.
pub(crate) fn entry(s: &DeviceState, k: usize) -> (String, Value) {
    let c = &s.covers[k];
    let now = s.now();
    let pos = c.position_at(now).round() as i64;
    let dir = match c.turning(now) {
        Some(Direction::Open) => 1,
        Some(Direction::Close) => -1,
        None => 0,
    };
    let target = c
        .motion()
        .filter(|_| dir != 0)
        .map_or(pos, |m| m.target.round() as i64);
    (
        format!("Shutter{}", k + 1),
        json!({"Position": pos, "Direction": dir, "Target": target, "Tilt": 0}),
    )
}

fn report(s: &DeviceState, k: usize) -> Value {
    let (key, v) = entry(s, k);
    let mut m = Map::new();
    m.insert(key, v);
    Value::Object(m)
}

/// Handles a shutter command (`name` lower-cased); `None` when it is not one or names no existing shutter
/// (Tasmota then answers `{"Command":"Unknown"}`).
pub(crate) fn command(dev: &Device, name: &str, arg: &str) -> Option<Value> {
    let rest = name.strip_prefix("shutter")?;
    let (verb, digits) = ["position", "open", "close", "stop"]
        .iter()
        .find_map(|v| rest.strip_prefix(v).map(|d| (*v, d)))?;
    let mut s = dev.state();
    // Without an index, a bare number argument of Open/Close/Stop selects the shutter, as in Tasmota.
    let n = if !digits.is_empty() {
        digits.parse::<usize>().ok()?
    } else if verb != "position" {
        arg.parse::<usize>().unwrap_or(1)
    } else {
        1
    };
    if n == 0 || n > s.covers.len() {
        return None;
    }
    let k = n - 1;
    let now = s.now();
    match verb {
        "open" => {
            let _ = s.covers[k].drive(now, Direction::Open, None, Source::Remote);
        }
        "close" => {
            let _ = s.covers[k].drive(now, Direction::Close, None, Source::Remote);
        }
        "stop" => {
            let moving = s.covers[k].turning(now).is_some();
            s.covers[k].stop(now, Source::Remote);
            s.sync_relays(k, now);
            // A stop while moving reports the position it stopped at; otherwise the command is just "Done".
            return Some(if moving {
                report(&s, k)
            } else {
                json!({"ShutterStop": "Done"})
            });
        }
        _ => position(&mut s, k, arg, now),
    }
    s.sync_relays(k, now);
    Some(report(&s, k))
}

/// `ShutterPosition <0-100|UP|DOWN|OPEN|CLOSE|STOP|TOGGLE>[,tilt]`; no argument only reports.
fn position(s: &mut DeviceState, k: usize, arg: &str, now: f64) {
    let first = arg.split(',').next().unwrap_or("").trim();
    let c = &mut s.covers[k];
    match first.to_ascii_lowercase().as_str() {
        "" => {}
        "up" | "open" => {
            let _ = c.drive(now, Direction::Open, None, Source::Remote);
        }
        "down" | "close" => {
            let _ = c.drive(now, Direction::Close, None, Source::Remote);
        }
        "stop" => c.stop(now, Source::Remote),
        "toggle" => {
            let dir = if c.position_at(now) >= 50.0 {
                Direction::Close
            } else {
                Direction::Open
            };
            let _ = c.drive(now, dir, None, Source::Remote);
        }
        other => {
            // Tasmota clamps the payload to 0–100; a non-number reads as 0.
            let pct = other.parse::<f64>().unwrap_or(0.0);
            let pct = if pct.is_finite() {
                pct.clamp(0.0, 100.0)
            } else {
                0.0
            };
            let dir = if pct >= c.position_at(now) {
                Direction::Open
            } else {
                Direction::Close
            };
            let span = (pct - c.position_at(now)).abs() / 100.0 * c.travel;
            // Time-based shutters need no calibration: a timed drive reaches the percentage.
            let _ = c.drive(now, dir, Some(span.max(f64::MIN_POSITIVE)), Source::Remote);
        }
    }
}
