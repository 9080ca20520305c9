//! Shelly Gen1 outputs: `/relay/N` (relay mode), `/roller/N` (Shelly 2/2.5 in roller mode) and `/light/N`
//! (dimmers), with the objects `/status` lists for them. Shapes: Gen1 API docs and Shelly 2.5 roller captures.

use serde_json::{Value, json};

use super::cover::{Direction, Phase, Refusal};
use super::device::Device;
use super::layout::MeterLink;
use super::server::{Request, Response};
use super::state::{DeviceState, Source, round};

fn relay_source(source: Source) -> &'static str {
    match source {
        Source::Init | Source::Local => "input",
        Source::Remote => "http",
    }
}

pub(crate) fn relay_json(s: &DeviceState, i: usize) -> Value {
    json!({
        "ison": s.outputs[i],
        "has_timer": false,
        "timer_started": 0,
        "timer_duration": 0,
        "timer_remaining": 0,
        "overpower": false,
        "is_valid": true,
        "source": relay_source(s.sources[i]),
    })
}

/// A light as `/status` `lights[]`, `/light/N` and `/color/N` show it: colour mode (RGBW2, Bulb) reports
/// `red`, `green`, `blue`, `white` (0–255) and `gain` as its brightness; white mode `brightness` and, on
/// tunable-white lights (Duo, Bulb in white mode), `temp` in K.
pub(crate) fn light_json(s: &DeviceState, i: usize) -> Value {
    let caps = s.layout.light.unwrap_or_default();
    let mut v = json!({
        "ison": s.outputs[i],
        "source": relay_source(s.sources[i]),
        "has_timer": false,
        "timer_started": 0,
        "timer_duration": 0,
        "timer_remaining": 0,
        "mode": if caps.rgb { "color" } else { "white" },
        "transition": 0,
    });
    if caps.rgb {
        let [r, g, b] = s.rgb[i];
        v["red"] = json!(r);
        v["green"] = json!(g);
        v["blue"] = json!(b);
        v["white"] = json!(s.white[i]);
        v["gain"] = json!(s.brightness[i]);
        v["effect"] = json!(0);
    } else {
        v["brightness"] = json!(s.brightness[i]);
        if caps.temperature.is_some() {
            v["temp"] = json!(s.ct[i]);
        }
    }
    v
}

/// A whole-number query parameter within `lo..=hi`; `Err` is the firmware's `Bad <name>!` answer.
fn param_in(req: &Request, name: &str, lo: u32, hi: u32) -> Result<Option<u32>, Response> {
    match req.param(name) {
        None => Ok(None),
        Some(v) => match v.parse::<u32>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(Some(v)),
            _ => Err(Response::text(400, &format!("Bad {name}!"))),
        },
    }
}

/// A roller as `/status` `rollers[]` and `/roller/N` show it: `state` is the motion (`open`, `close`, `stop`).
pub(crate) fn roller_json(s: &DeviceState, c: usize) -> Value {
    let cover = &s.covers[c];
    let now = s.now();
    let state = match cover.turning(now) {
        Some(Direction::Open) => "open",
        Some(Direction::Close) => "close",
        None => "stop",
    };
    let power: f64 = s
        .layout
        .meter_links
        .iter()
        .enumerate()
        .filter(|(_, l)| matches!(l, MeterLink::Cover(k) | MeterLink::CoverDir(k, _) if *k == c))
        .map(|(i, _)| s.meter(i).power)
        .sum();
    let last = match cover.last_direction {
        Some(Direction::Open) => "open",
        Some(Direction::Close) => "close",
        None => "stop",
    };
    json!({
        "state": state,
        "power": round(power, 2),
        "is_valid": true,
        "safety_switch": false,
        "overtemperature": false,
        "stop_reason": "normal",
        "last_direction": last,
        "current_pos": cover.position_at(now).round() as i64,
        "calibrating": matches!(cover.phase, Phase::Calibrating { .. }),
        "positioning": cover.calibrated,
    })
}

/// `/relay/N?turn=on|off|toggle`; in roller mode refused with 400 like the real device.
pub(crate) fn relay(dev: &Device, n: &str, req: &Request) -> Response {
    let mut s = dev.state();
    if s.layout.covers > 0 && s.layout.outputs == 0 {
        return Response::text(400, "Device mode is not relay!");
    }
    let count = if s.layout.lights { 0 } else { s.outputs.len() };
    let Some(i) = n.parse::<usize>().ok().filter(|i| *i < count) else {
        return Response::text(404, "Not Found");
    };
    let on = match turn(req, s.outputs[i]) {
        Ok(on) => on,
        Err(refused) => return refused,
    };
    if let Some(on) = on {
        s.set_output(i, on, Source::Remote);
    }
    Response::json_whole(200, &relay_json(&s, i))
}

/// `/light/N?turn=on|off|toggle&brightness=B&temp=K&transition=MS` on white lights, `/color/N?turn=&gain=&red=
/// &green=&blue=&white=&transition=` on colour lights (`color` says which path was asked).
pub(crate) fn light(dev: &Device, n: &str, req: &Request, color: bool) -> Response {
    let mut s = dev.state();
    let caps = s.layout.light.unwrap_or_default();
    let count = if s.layout.lights && caps.rgb == color {
        s.outputs.len()
    } else {
        0
    };
    let Some(i) = n.parse::<usize>().ok().filter(|i| *i < count) else {
        return Response::text(404, "Not Found");
    };
    let on = match turn(req, s.outputs[i]) {
        Ok(on) => on,
        Err(refused) => return refused,
    };
    let (lo, hi) = caps.temperature.map_or((0, 0), |[lo, hi]| (lo, hi));
    let parsed = (|| {
        let level = if color { "gain" } else { "brightness" };
        Ok::<_, Response>((
            param_in(req, level, 0, 100)?,
            if caps.temperature.is_some() {
                param_in(req, "temp", lo, hi)?
            } else {
                None
            },
            [
                param_in(req, "red", 0, 255)?,
                param_in(req, "green", 0, 255)?,
                param_in(req, "blue", 0, 255)?,
            ],
            param_in(req, "white", 0, 255)?,
            param_in(req, "transition", 0, 10_800_000)?,
        ))
    })();
    let (level, temp, rgb, white, _transition) = match parsed {
        Ok(p) => p,
        Err(refused) => return refused,
    };
    // The transition is not emulated: the target is reached at once.
    if let Some(b) = level {
        s.brightness[i] = b as u8;
    }
    if let Some(k) = temp {
        s.ct[i] = k;
    }
    if color {
        for (c, v) in rgb.iter().enumerate() {
            if let Some(v) = v {
                s.rgb[i][c] = *v as u8;
            }
        }
        if let Some(w) = white {
            s.white[i] = w as u8;
        }
    }
    if let Some(on) = on {
        s.set_output(i, on, Source::Remote);
    }
    Response::json_whole(200, &light_json(&s, i))
}

/// `/roller/N[?go=open|close|stop|to_pos][&roller_pos=P][&duration=S]`.
pub(crate) fn roller(dev: &Device, n: &str, req: &Request) -> Response {
    let mut s = dev.state();
    if s.layout.covers == 0 {
        return if dev.ident.namespaces.cover {
            Response::text(400, "Device mode is not roller!")
        } else {
            Response::text(404, "Not Found")
        };
    }
    let Some(c) = n.parse::<usize>().ok().filter(|c| *c < s.covers.len()) else {
        return Response::text(404, "Not Found");
    };
    let pos = match req.param("roller_pos") {
        None => None,
        Some(p) => match p.parse::<u8>() {
            Ok(p) if p <= 100 => Some(f64::from(p)),
            _ => return Response::text(400, "Bad roller_pos!"),
        },
    };
    let duration = match req.param("duration") {
        None => None,
        Some(d) => match d.parse::<f64>() {
            Ok(d) if d.is_finite() && d > 0.0 => Some(d),
            _ => return Response::text(400, "Bad duration!"),
        },
    };
    let go = req.param("go");
    let now = s.now();
    let cover = &mut s.covers[c];
    let done = match (go.as_deref(), pos) {
        (None, None) => Ok(()),
        (Some("open"), _) => cover.drive(now, Direction::Open, duration, Source::Remote),
        (Some("close"), _) => cover.drive(now, Direction::Close, duration, Source::Remote),
        (Some("stop"), _) => {
            cover.stop(now, Source::Remote);
            Ok(())
        }
        (Some("to_pos") | None, Some(p)) => cover.go_to(now, p, Source::Remote),
        (Some("to_pos"), None) => return Response::text(400, "Missing roller_pos!"),
        (Some(_), _) => return Response::text(400, "Bad go!"),
    };
    match done {
        Ok(()) => {}
        Err(Refusal::NotCalibrated) => return Response::text(400, "Roller is not calibrated!"),
        Err(Refusal::Busy) => return Response::text(400, "Roller is calibrating!"),
    }
    s.sync_relays(c, now);
    Response::json_whole(200, &roller_json(&s, c))
}

/// The state a `turn=on|off|toggle` parameter asks for (`None` without one), given the channel's state now.
fn turn(req: &Request, now: bool) -> Result<Option<bool>, Response> {
    match req.param("turn").as_deref() {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some("toggle") => Ok(Some(!now)),
        Some(_) => Err(Response::text(400, "Bad turn!")),
    }
}
