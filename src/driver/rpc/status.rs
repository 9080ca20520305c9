//! Mapping a `Shelly.GetStatus` result onto a device: switches or lights, covers, inputs, meters
//! (switch/cover-embedded, em/emdata, em1/em1data, pm1), temperatures, sensors, system facts. Values the device
//! does not report stay `None`: a component the device does not have in its profile reads as unknown.

use serde_json::Value;

use crate::driver::json::{at, flag, num, text};
use crate::light::{LightCaps, rgb_from, white_from_byte};
use crate::models::{MeterSource, ModelInfo, SensorQuantity, Shape};
use crate::objects::{CoverState, Device, Output};

/// A `light:N`, `cct:N`, `rgb:N` or `rgbw:N` status into an output: what the light cannot have, or the status
/// does not give in range, is `None`.
pub(crate) fn apply_light(out: &mut Output, s: Option<&Value>, caps: LightCaps) {
    let n = |k: &str| s.and_then(|s| num(s, &[k]));
    if s.is_some() {
        out.state = s.and_then(|s| flag(s, &["output"]));
    }
    out.brightness = n("brightness").filter(|b| caps.brightness && (0.0..=100.0).contains(b));
    out.color_temperature =
        n("ct").filter(|k| caps.temperature.is_some() && (1000.0..=10_000.0).contains(k));
    let rgb = |i: usize| {
        s.and_then(|s| s.get("rgb"))
            .and_then(|a| a.get(i))
            .and_then(Value::as_f64)
    };
    out.rgb = rgb_from([rgb(0), rgb(1), rgb(2)]).filter(|_| caps.rgb);
    out.white = n("white").and_then(white_from_byte).filter(|_| caps.white);
}

/// Copies a `Shelly.GetStatus` result into the device. `shape` is what the device is now (its reported
/// profile). Values the device does not report become `None`.
pub(crate) fn apply_status(
    dev: &mut Device,
    model: &ModelInfo,
    shape: &Shape,
    s: &Value,
    now: &str,
) {
    dev.mac_address = crate::driver::json::mac(s, &["sys", "mac"]).or(dev.mac_address.take());
    dev.battery = num(s, &["devicepower:0", "battery", "percent"]);
    dev.wakeup_period = num(s, &["sys", "wakeup_period"])
        .filter(|p| *p > 0.0)
        .map(|p| p as u64);
    dev.uptime = num(s, &["sys", "uptime"]).map(|u| u.max(0.0) as u64);
    dev.restart_required = flag(s, &["sys", "restart_required"]);
    dev.update_available = at(s, &["sys", "available_updates"])
        .and_then(Value::as_object)
        .map(|u| !u.is_empty());
    for (i, input) in dev.inputs.iter_mut().enumerate() {
        // Inputs in button mode report state null: they have no state.
        input.state = flag(s, &[&format!("input:{i}"), "state"]);
    }
    let mut temps = Vec::new();
    let output_type = shape.output_component();
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        let key = format!("{output_type}:{i}");
        // A switch the device does not have (cover profile) has no state: unknown, not off.
        out.state = flag(s, &[&key, "output"]);
        match shape.light {
            Some(caps) => apply_light(out, s.get(&key), caps),
            None => apply_light(out, None, LightCaps::dimmer()),
        }
        out.temperature =
            num(s, &[&key, "temperature", "tC"]).filter(|_| model.temperature_monitoring);
        temps.extend(out.temperature);
    }
    for (i, c) in dev.covers.iter_mut().enumerate() {
        let key = format!("cover:{i}");
        apply_cover(c, s.get(&key));
        c.temperature = c.temperature.filter(|_| model.temperature_monitoring);
        temps.extend(c.temperature);
    }
    dev.temperature = if temps.is_empty() {
        num(s, &["temperature:0", "tC"])
    } else {
        Some(temps.iter().sum::<f64>() / temps.len() as f64)
    };
    let source = shape.meter_source;
    for (i, m) in dev.meters.iter_mut().enumerate() {
        // A meter planned as part of an output (or cover, or as a separate channel) is only read from a device
        // whose meters are that kind now: a 2PM in cover profile has no switch meters to read.
        let planned = match (m.output_id, m.cover_id) {
            (Some(_), _) => MeterSource::Switch,
            (_, Some(_)) => MeterSource::Cover,
            _ => source,
        };
        let same_role = planned == source
            || (!matches!(planned, MeterSource::Switch | MeterSource::Cover)
                && !matches!(source, MeterSource::Switch | MeterSource::Cover));
        let r = match source {
            _ if !same_role || i >= shape.meters => [None; 8],
            MeterSource::Switch | MeterSource::Cover | MeterSource::Pm1 => {
                let k = match source {
                    MeterSource::Switch => format!("switch:{i}"),
                    MeterSource::Cover => format!("cover:{i}"),
                    _ => format!("pm1:{i}"),
                };
                [
                    num(s, &[&k, "apower"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&k, "aenergy", "total"]),
                    num(s, &[&k, "ret_aenergy", "total"]),
                    num(s, &[&k, "freq"]),
                    num(s, &[&k, "aprtpower"]),
                ]
            }
            MeterSource::Em1 => {
                let (k, d) = (format!("em1:{i}"), format!("em1data:{i}"));
                [
                    num(s, &[&k, "act_power"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&d, "total_act_energy"]),
                    num(s, &[&d, "total_act_ret_energy"]),
                    num(s, &[&k, "freq"]),
                    num(s, &[&k, "aprt_power"]),
                ]
            }
            MeterSource::Em => {
                let p = ["a", "b", "c"].get(i).copied().unwrap_or("?");
                [
                    num(s, &["em:0", &format!("{p}_act_power")]),
                    num(s, &["em:0", &format!("{p}_voltage")]),
                    num(s, &["em:0", &format!("{p}_current")]),
                    num(s, &["em:0", &format!("{p}_pf")]),
                    num(s, &["emdata:0", &format!("{p}_total_act_energy")]),
                    num(s, &["emdata:0", &format!("{p}_total_act_ret_energy")]),
                    num(s, &["em:0", &format!("{p}_freq")]),
                    num(s, &["em:0", &format!("{p}_aprt_power")]),
                ]
            }
            _ => [None; 8],
        };
        [
            m.power,
            m.voltage,
            m.current,
            m.power_factor,
            m.energy,
            m.returned_energy,
            m.frequency,
            m.apparent_power,
        ] = r;
    }
    dev.update_totals();
    if source == MeterSource::Em {
        // The 3-phase meter reports its own totals.
        dev.total_power = num(s, &["em:0", "total_act_power"]).or(dev.total_power);
        dev.total_energy = num(s, &["emdata:0", "total_act"]).or(dev.total_energy);
        dev.total_returned_energy =
            num(s, &["emdata:0", "total_act_ret"]).or(dev.total_returned_energy);
    }
    let device_temp = dev.temperature;
    dev.update_probes(now, |p| match p.probe_id {
        Some(-1) => device_temp,
        Some(id) => num(s, &[&format!("temperature:{id}"), "tC"]),
        None => None,
    });
    dev.update_sensors(now, |x| {
        let id = x.sensor_id?;
        let key = format!("{}:{id}", x.quantity.rpc_component());
        match x.quantity {
            SensorQuantity::Temperature => num(s, &[&key, "tC"]),
            SensorQuantity::Humidity => num(s, &[&key, "rh"]),
            SensorQuantity::Voltage => num(s, &[&key, "voltage"]),
        }
    });
}

/// Copies one `cover:N` status (a `Shelly.GetStatus` member or a `Cover.GetStatus` result) into `c`; `None`
/// (the device has no such cover now) makes everything unknown.
pub(crate) fn apply_cover(c: &mut crate::objects::Cover, v: Option<&Value>) {
    let v = v.unwrap_or(&Value::Null);
    c.state = text(v, &["state"]).and_then(|t| CoverState::parse(&t));
    c.calibrated = flag(v, &["pos_control"]);
    // `current_pos` is only meaningful on a calibrated cover.
    c.position = num(v, &["current_pos"])
        .filter(|p| (0.0..=100.0).contains(p) && c.calibrated != Some(false));
    c.temperature = num(v, &["temperature", "tC"]);
}
