//! Gen2+ `Webhook.*`: hooks for the events the current layout supports, on components that exist.

use serde_json::{Map, Value, json};

use super::device::Device;
use super::rpc::{RpcError, id_param, invalid, missing, not_found};
use super::sensors;
use super::state::DeviceState;
use super::webhooks::{Hook, MAX_HOOKS};
use crate::models::SensorQuantity;

/// Most URLs one hook may call.
const MAX_URLS: usize = 5;

fn opt_string(v: &Value, name: &str) -> Result<Option<String>, RpcError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(invalid(name)),
    }
}

/// Applies the optional fields of `Webhook.Create`/`Update`.
fn apply(h: &mut Hook, p: &Map<String, Value>) -> Result<(), RpcError> {
    if let Some(v) = p.get("enable") {
        h.enable = v.as_bool().ok_or_else(|| invalid("enable"))?;
    }
    if let Some(v) = p.get("name") {
        h.name = opt_string(v, "name")?;
    }
    if let Some(v) = p.get("ssl_ca") {
        h.ssl_ca = opt_string(v, "ssl_ca")?;
    }
    if let Some(v) = p.get("condition") {
        h.condition = opt_string(v, "condition")?;
    }
    if let Some(v) = p.get("repeat_period") {
        h.repeat_period = v.as_i64().ok_or_else(|| invalid("repeat_period"))?;
    }
    if let Some(v) = p.get("urls") {
        let list = v.as_array().ok_or_else(|| invalid("urls"))?;
        if list.len() > MAX_URLS {
            return Err(invalid("urls"));
        }
        h.urls = list
            .iter()
            .map(|u| {
                u.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid("urls"))
            })
            .collect::<Result<_, _>>()?;
    }
    Ok(())
}

/// The event must be supported and its component instance must exist.
fn check_target(
    s: &DeviceState,
    supported: &[(&str, Value)],
    event: &str,
    cid: u64,
) -> Result<(), RpcError> {
    if !supported.iter().any(|(e, _)| *e == event) {
        return Err(invalid("event"));
    }
    let sensor = |q| sensors::by_id(&s.sensors, q, cid).is_some();
    let ok = match event.split('.').next() {
        Some("input") => cid < s.inputs.len() as u64,
        Some("switch" | "light" | "cct" | "rgb" | "rgbw") => cid < s.outputs.len() as u64,
        Some("cover") => cid < s.covers.len() as u64,
        Some("temperature") => sensor(SensorQuantity::Temperature),
        Some("humidity") => sensor(SensorQuantity::Humidity),
        Some("voltmeter") => sensor(SensorQuantity::Voltage),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(not_found("cid", cid))
    }
}

pub(crate) fn call(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let mut s = dev.state();
    let supported = supported_events(&s);
    match method {
        "webhook.listsupported"
        | "webhook.list"
        | "webhook.create"
        | "webhook.update"
        | "webhook.delete"
        | "webhook.deleteall" => {}
        _ => return Err(RpcError::unknown()),
    }
    match method {
        "webhook.listsupported" => {
            let types: Map<String, Value> = supported
                .into_iter()
                .map(|(e, v)| (e.to_string(), v))
                .collect();
            Ok(json!({ "types": types }))
        }
        "webhook.list" => Ok(json!({"hooks": s.hooks.list(), "rev": s.hooks.rev})),
        "webhook.create" => {
            let event = match p.get("event") {
                None | Some(Value::Null) => return Err(missing("event")),
                Some(v) => v.as_str().ok_or_else(|| invalid("event"))?.to_string(),
            };
            let cid = id_param(p, "cid")?;
            check_target(&s, &supported, &event, cid)?;
            if !p.contains_key("urls") {
                return Err(missing("urls"));
            }
            if s.hooks.hooks.len() >= MAX_HOOKS {
                return Err(RpcError {
                    code: -108,
                    message: "resource exhausted".into(),
                });
            }
            let mut h = Hook::new(&event, cid as usize);
            apply(&mut h, p)?;
            let id = s.hooks.insert(h);
            Ok(json!({"id": id, "rev": s.hooks.rev}))
        }
        "webhook.update" => {
            let id = id_param(p, "id")?;
            let Some(mut h) = s.hooks.hooks.iter().find(|h| h.id == id).cloned() else {
                return Err(not_found("id", id));
            };
            if let Some(v) = p.get("event") {
                h.event = v.as_str().ok_or_else(|| invalid("event"))?.to_string();
            }
            if p.contains_key("cid") {
                h.cid = id_param(p, "cid")? as usize;
            }
            check_target(&s, &supported, &h.event, h.cid as u64)?;
            apply(&mut h, p)?;
            if let Some(slot) = s.hooks.get_mut(id) {
                *slot = h;
            }
            Ok(json!({"rev": s.hooks.touch()}))
        }
        "webhook.delete" => {
            let id = id_param(p, "id")?;
            if !s.hooks.remove(id) {
                return Err(not_found("id", id));
            }
            Ok(json!({"rev": s.hooks.rev}))
        }
        _ => {
            s.hooks.clear();
            Ok(json!({"rev": s.hooks.rev}))
        }
    }
}

// `Webhook.ListSupported`'s events are computed here, by the RPC front end that serves them, not in
// webhooks.rs: that store is part of the device state, so it must not depend on the state.
fn attrs(list: &[(&str, &str)]) -> Value {
    let a: Vec<Value> = list
        .iter()
        .map(|(name, desc)| json!({"name": name, "type": "number", "desc": desc}))
        .collect();
    json!({ "attrs": a })
}

/// RPC events the device supports in its current layout (`Webhook.ListSupported`), with attributes where the
/// event carries values: input events with inputs, `switch.*` with relays, `light.*` with lights, `cover.*`
/// with covers, `<sensor>.change` per sensor kind present.
pub(crate) fn supported_events(s: &DeviceState) -> Vec<(&'static str, Value)> {
    let l = &s.layout;
    let mut v = Vec::new();
    if l.inputs > 0 {
        for e in [
            "input.toggle_on",
            "input.toggle_off",
            "input.button_push",
            "input.button_longpush",
            "input.button_doublepush",
            "input.button_triplepush",
        ] {
            v.push((e, json!({})));
        }
    }
    if l.outputs > 0 {
        let pair = match l.output_component() {
            "light" => ["light.on", "light.off"],
            "cct" => ["cct.on", "cct.off"],
            "rgb" => ["rgb.on", "rgb.off"],
            "rgbw" => ["rgbw.on", "rgbw.off"],
            _ => ["switch.on", "switch.off"],
        };
        for e in pair {
            v.push((e, json!({})));
        }
    }
    if l.covers > 0 {
        for e in [
            "cover.open",
            "cover.closed",
            "cover.stopped",
            "cover.opening",
            "cover.closing",
            "cover.calibrating",
        ] {
            v.push((e, json!({})));
        }
    }
    let has = |q| sensors::of(&s.sensors, q).next().is_some();
    if has(SensorQuantity::Temperature) {
        v.push((
            "temperature.change",
            attrs(&[
                ("tC", "Temperature in Celsius"),
                ("tF", "Temperature in Fahrenheit"),
            ]),
        ));
    }
    if has(SensorQuantity::Humidity) {
        v.push((
            "humidity.change",
            attrs(&[("rh", "Relative humidity in %")]),
        ));
    }
    if has(SensorQuantity::Voltage) {
        v.push(("voltmeter.change", attrs(&[("voltage", "Voltage in V")])));
    }
    v
}
