//! Gen2+ `cover:N`: status and config payloads and the `Cover.*` methods. Field set and order follow the Cover
//! component docs and 2PM Gen3/Gen4 captures in the cover profile.

use serde_json::{Map, Value, json};

use super::components::{meter_fields, source_name, temperature};
use super::cover::{Direction, Refusal};
use super::device::Device;
use super::layout::COVER_METER_FIELDS;
use super::rpc::{RpcError, index, invalid, missing, opt_number, precondition};
use super::state::{DeviceState, Source, round};

/// The `Cover.*` methods (`Shelly.ListMethods`).
pub(crate) const METHODS: &[&str] = &[
    "Cover.GetStatus",
    "Cover.GetConfig",
    "Cover.Open",
    "Cover.Close",
    "Cover.Stop",
    "Cover.GoToPosition",
    "Cover.Calibrate",
];

fn direction(d: Option<Direction>) -> Value {
    match d {
        Some(Direction::Open) => json!("open"),
        Some(Direction::Close) => json!("close"),
        None => Value::Null,
    }
}

pub(crate) fn status(s: &DeviceState, c: usize) -> Value {
    let cover = &s.covers[c];
    let now = s.now();
    let state = cover.state_at(now);
    let mut m = Map::new();
    m.insert("id".into(), json!(c));
    m.insert("source".into(), json!(source_name(cover.source)));
    m.insert("state".into(), json!(state.as_str()));
    let moving = cover.turning(now).is_some();
    if let Some(mo) = cover.motion().filter(|_| moving) {
        m.insert("move_timeout".into(), json!(round(mo.timeout, 2)));
        m.insert("move_started_at".into(), json!(round(mo.started, 2)));
    }
    if let Some(i) = s.layout.cover_meter(c) {
        meter_fields(&mut m, &s.meter(i), COVER_METER_FIELDS);
    }
    if s.layout.temperature {
        m.insert("temperature".into(), temperature(s.temperature));
    }
    m.insert("pos_control".into(), json!(cover.calibrated));
    m.insert("last_direction".into(), direction(cover.last_direction));
    let calibrating = matches!(state, super::CoverState::Calibrating);
    if cover.calibrated && !calibrating {
        m.insert(
            "current_pos".into(),
            json!(cover.position_at(now).round() as i64),
        );
        if let Some(mo) = cover.motion().filter(|m| moving && m.to_position) {
            m.insert("target_pos".into(), json!(mo.target.round() as i64));
        }
    }
    Value::Object(m)
}

pub(crate) fn config(s: &DeviceState, c: usize) -> Value {
    let maxtime = s.covers[c].maxtime;
    let dual = s.layout.inputs >= 2 * (c + 1);
    json!({
        "id": c,
        "name": null,
        "motor": {"idle_power_thr": 2, "idle_confirm_period": 0.25},
        "maxtime_open": maxtime,
        "maxtime_close": maxtime,
        "initial_state": "stopped",
        "invert_directions": false,
        "maintenance_mode": false,
        "in_mode": if dual { "dual" } else { "single" },
        "in_locked": false,
        "swap_inputs": false,
        "safety_switch": {"enable": false, "direction": "both", "action": "stop", "allowed_move": null},
        "power_limit": 2800,
        "voltage_limit": 280,
        "undervoltage_limit": 0,
        "current_limit": 10,
        "obstruction_detection": {"enable": false, "direction": "both", "action": "stop", "power_thr": 1000,
                                  "holdoff": 1},
        "slat": {"enable": false, "open_time": 1.5, "close_time": 1.5, "step": 20, "retain_pos": false,
                 "precise_ctl": false},
    })
}

fn refused(r: Refusal) -> RpcError {
    match r {
        // FAILED_PRECONDITION (-109), the code real devices use for requests their state does not allow.
        Refusal::NotCalibrated => precondition("Cover is not calibrated!"),
        Refusal::Busy => precondition("Cover is moving or calibrating!"),
    }
}

/// A positive duration in seconds, or `None`.
fn duration(p: &Map<String, Value>) -> Result<Option<f64>, RpcError> {
    match opt_number(p, "duration")? {
        Some(d) if d > 0.0 => Ok(Some(d)),
        Some(_) => Err(invalid("duration")),
        None => Ok(None),
    }
}

pub(crate) fn call(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let mut s = dev.state();
    let action = method.strip_prefix("cover.").unwrap_or(method);
    if !matches!(
        action,
        "getstatus" | "getconfig" | "open" | "close" | "stop" | "gotoposition" | "calibrate"
    ) {
        return Err(RpcError::unknown());
    }
    let c = index(p, 0, s.covers.len())?;
    let now = s.now();
    let done = match action {
        "getstatus" => return Ok(status(&s, c)),
        "getconfig" => return Ok(config(&s, c)),
        "open" | "close" => {
            let dir = if action == "open" {
                Direction::Open
            } else {
                Direction::Close
            };
            let d = duration(p)?;
            s.covers[c].drive(now, dir, d, Source::Remote)
        }
        "stop" => {
            s.covers[c].stop(now, Source::Remote);
            Ok(())
        }
        "gotoposition" => {
            let cover = &s.covers[c];
            let target = match (opt_number(p, "pos")?, opt_number(p, "rel")?) {
                (Some(pos), _) if (0.0..=100.0).contains(&pos) => pos,
                (Some(_), _) => return Err(invalid("pos")),
                (None, Some(rel)) if (-100.0..=100.0).contains(&rel) => {
                    cover.position_at(now) + rel
                }
                (None, Some(_)) => return Err(invalid("rel")),
                (None, None) => return Err(missing("pos")),
            };
            s.covers[c].go_to(now, target, Source::Remote)
        }
        _ => s.covers[c].calibrate(now, Source::Remote),
    };
    done.map_err(refused)?;
    s.sync_relays(c, now);
    Ok(Value::Null)
}
