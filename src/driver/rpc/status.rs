//! Mapping a `Shelly.GetStatus` result onto a device: switches, inputs, meters (switch-embedded, em/emdata,
//! em1/em1data, pm1), temperatures, system facts. Values the device does not report stay `None`.

use serde_json::Value;

use crate::driver::json::{at, flag, num, text};
use crate::models::{MeterSource, ModelInfo};
use crate::objects::Device;

/// Copies a `Shelly.GetStatus` result into the device. Values the device does not report become `None`.
pub(crate) fn apply_status(dev: &mut Device, model: &ModelInfo, s: &Value, now: &str) {
    dev.mac_address = text(s, &["sys", "mac"]).or(dev.mac_address.take());
    dev.uptime = num(s, &["sys", "uptime"]).map(|u| u.max(0.0) as u64);
    dev.restart_required = flag(s, &["sys", "restart_required"]);
    dev.update_available = at(s, &["sys", "available_updates"])
        .and_then(Value::as_object)
        .map(|u| !u.is_empty());
    for (i, input) in dev.inputs.iter_mut().enumerate() {
        // Inputs in button mode report state null: not pressed.
        input.state = flag(s, &[&format!("input:{i}"), "state"]).unwrap_or(false);
    }
    let mut temps = Vec::new();
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        let key = format!("switch:{i}");
        if let Some(on) = flag(s, &[&key, "output"]) {
            out.state = on;
        }
        out.temperature =
            num(s, &[&key, "temperature", "tC"]).filter(|_| model.temperature_monitoring);
        temps.extend(out.temperature);
    }
    dev.temperature = if temps.is_empty() {
        num(s, &["temperature:0", "tC"])
    } else {
        Some(temps.iter().sum::<f64>() / temps.len() as f64)
    };
    let source = model.meter_source();
    for (i, m) in dev.meters.iter_mut().enumerate() {
        let r = match source {
            MeterSource::Switch => {
                let k = format!("switch:{i}");
                [
                    num(s, &[&k, "apower"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&k, "aenergy", "total"]),
                    num(s, &[&k, "ret_aenergy", "total"]),
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
                ]
            }
            MeterSource::Pm1 => {
                let k = format!("pm1:{i}");
                [
                    num(s, &[&k, "apower"]),
                    num(s, &[&k, "voltage"]),
                    num(s, &[&k, "current"]),
                    num(s, &[&k, "pf"]),
                    num(s, &[&k, "aenergy", "total"]),
                    num(s, &[&k, "ret_aenergy", "total"]),
                ]
            }
            _ => [None; 6],
        };
        [
            m.power,
            m.voltage,
            m.current,
            m.power_factor,
            m.energy,
            m.returned_energy,
        ] = r;
    }
    dev.update_totals();
    if source == MeterSource::Em {
        // The 3-phase meter reports its own totals.
        dev.total_power = num(s, &["em:0", "total_act_power"]).or(dev.total_power);
        dev.total_energy = num(s, &["emdata:0", "total_act"]).or(dev.total_energy);
    }
    let device_temp = dev.temperature;
    dev.update_probes(now, |p| match p.probe_id {
        Some(-1) => device_temp,
        Some(id) => num(s, &[&format!("temperature:{id}"), "tC"]),
        None => None,
    });
}
