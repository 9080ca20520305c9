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

pub(crate) fn light_json(s: &DeviceState, i: usize) -> Value {
    json!({
        "ison": s.outputs[i],
        "source": relay_source(s.sources[i]),
        "has_timer": false,
        "timer_started": 0,
        "timer_duration": 0,
        "timer_remaining": 0,
        "mode": "white",
        "brightness": s.brightness[i],
        "transition": 0,
    })
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

/// `/light/N?turn=on|off|toggle&brightness=B` on dimmers.
pub(crate) fn light(dev: &Device, n: &str, req: &Request) -> Response {
    let mut s = dev.state();
    let count = if s.layout.lights { s.outputs.len() } else { 0 };
    let Some(i) = n.parse::<usize>().ok().filter(|i| *i < count) else {
        return Response::text(404, "Not Found");
    };
    let on = match turn(req, s.outputs[i]) {
        Ok(on) => on,
        Err(refused) => return refused,
    };
    let brightness = match req.param("brightness") {
        None => None,
        Some(b) => match b.parse::<u8>() {
            Ok(b) if b <= 100 => Some(b),
            _ => return Response::text(400, "Bad brightness!"),
        },
    };
    if let Some(b) = brightness {
        s.brightness[i] = b;
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
