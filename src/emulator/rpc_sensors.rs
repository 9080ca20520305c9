//! Gen2+ sensor components: `temperature:N` (`tC`/`tF`), `humidity:N` (`rh`), `voltmeter:N` (`voltage`),
//! `devicepower:0` (battery), built-in (ids from 0) and add-on (ids from 100), and their `GetStatus`/`GetConfig`.

use serde::ser::SerializeMap;
use serde_json::{Map, Value, json};

use super::device::Device;
use super::rpc::{RpcError, id_param, index, not_found};
use super::sensors::{self, Reading};
use super::state::{DeviceState, fahrenheit, round};
use crate::models::SensorQuantity;

fn key(q: SensorQuantity) -> &'static str {
    q.rpc_component()
}

fn reading_status(r: &Reading) -> Value {
    match r.quantity {
        SensorQuantity::Temperature => json!({
            "id": r.id,
            "tC": r.value.map(|c| round(c, 1)),
            "tF": r.value.map(fahrenheit),
        }),
        SensorQuantity::Humidity => json!({"id": r.id, "rh": r.value.map(|v| round(v, 1))}),
        SensorQuantity::Voltage => json!({"id": r.id, "voltage": r.value.map(|v| round(v, 2))}),
    }
}

fn reading_config(r: &Reading) -> Value {
    match r.quantity {
        SensorQuantity::Temperature => {
            json!({"id": r.id, "name": r.name, "report_thr_C": 0.1, "offset_C": 0.0})
        }
        SensorQuantity::Humidity => {
            json!({"id": r.id, "name": r.name, "report_thr": 1.0, "offset": 0.0})
        }
        SensorQuantity::Voltage => json!({
            "id": r.id, "name": r.name, "report_thr": 0.1, "range": 0,
            "xvoltage": {"expr": null, "unit": null},
        }),
    }
}

/// Adds `<component>:<id>` status entries for every reading of `q` to a map being serialized.
pub(crate) fn status_entries<M: SerializeMap>(
    m: &mut M,
    s: &DeviceState,
    q: SensorQuantity,
) -> Result<(), M::Error> {
    for i in sensors::of(&s.sensors, q) {
        let r = &s.sensors[i];
        m.serialize_entry(&format!("{}:{}", key(q), r.id), &reading_status(r))?;
    }
    Ok(())
}

/// Adds `<component>:<id>` config entries for every reading of `q`.
pub(crate) fn insert_config(m: &mut Map<String, Value>, s: &DeviceState, q: SensorQuantity) {
    for i in sensors::of(&s.sensors, q) {
        let r = &s.sensors[i];
        m.insert(format!("{}:{}", key(q), r.id), reading_config(r));
    }
}

/// `devicepower:0`: battery voltage follows the charge (four AA cells, H&T Gen3 captures around 5.3–5.7 V).
pub(crate) fn devicepower(s: &DeviceState) -> Value {
    let volts = 4.4 + s.battery / 100.0 * 1.6;
    json!({
        "id": 0,
        "battery": {"V": round(volts, 2), "percent": s.battery.round() as i64},
        "external": {"present": false},
    })
}

pub(crate) fn call(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let s = dev.state();
    let (ns, action) = method.split_once('.').unwrap_or((method, ""));
    if ns == "devicepower" {
        if !s.layout.battery || action != "getstatus" {
            return Err(RpcError::unknown());
        }
        index(p, 0, 1)?;
        return Ok(devicepower(&s));
    }
    let q = match ns {
        "temperature" => SensorQuantity::Temperature,
        "humidity" => SensorQuantity::Humidity,
        _ => SensorQuantity::Voltage,
    };
    if sensors::of(&s.sensors, q).next().is_none() || !matches!(action, "getstatus" | "getconfig") {
        return Err(RpcError::unknown());
    }
    let id = id_param(p, "id")?;
    let i = sensors::by_id(&s.sensors, q, id).ok_or_else(|| not_found("id", id))?;
    Ok(if action == "getstatus" {
        reading_status(&s.sensors[i])
    } else {
        reading_config(&s.sensors[i])
    })
}
