//! The Gen2+ notifications a state change or an event makes (`NotifyStatus` with the changed fields,
//! `NotifyFullStatus` when a component appeared or went, `NotifyEvent`), built once for every channel that
//! carries them: the WebSocket connections (`ws.rs`) and the MQTT client (`mqtt_rpc.rs`). Each channel keeps
//! its own last status to measure changes against.

use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::components;
use super::device::Device;
use super::lock::lock;
use super::state::DeviceState;

/// Status keys that change with time alone: not worth a notification.
const VOLATILE: &[&str] = &["aenergy", "ret_aenergy"];

pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The status without what changes by itself (`sys`, energy counters and data components).
fn comparable(mut status: Map<String, Value>) -> Map<String, Value> {
    status.retain(|k, _| k != "sys" && !k.starts_with("emdata") && !k.starts_with("em1data"));
    for v in status.values_mut() {
        if let Value::Object(o) = v {
            o.retain(|k, _| !VOLATILE.contains(&k.as_str()));
        }
    }
    status
}

/// The status as text (what a subscription is measured with until something changes).
pub(crate) fn status_text(dev: &Device, s: &DeviceState) -> String {
    serde_json::to_string(&components::Status { dev, s }).unwrap_or_default()
}

/// [`status_text`] made what changes are measured against (our own writing: a status that will not parse is
/// none, and every field then reads as changed).
pub(crate) fn comparable_text(text: &str) -> Map<String, Value> {
    comparable(serde_json::from_str(text).unwrap_or_default())
}

/// The whole status with `ts` (`NotifyFullStatus` params); `last` starts over from it.
pub(crate) fn full_status(
    dev: &Device,
    s: &DeviceState,
    last: &Mutex<Option<Map<String, Value>>>,
) -> Value {
    let status = components::status(dev, s);
    *lock(last) = Some(comparable(status.clone()));
    let mut full = status;
    full.insert("ts".into(), json!(round2(dev.clock.unix())));
    Value::Object(full)
}

/// `status`, just built under the state lock, becomes what later changes are measured against when nothing
/// is yet: a status read built as values (`rpc::general`) measures with what it answers, and no second status
/// is built to measure it.
pub(crate) fn measure_from(status: &Map<String, Value>, last: &Mutex<Option<Map<String, Value>>>) {
    let mut last = lock(last);
    if last.is_none() {
        *last = Some(comparable(status.clone()));
    }
}

/// What changed since `last` as a notification (method, params), `last` moved on; `None` when nothing did
/// (or `last` was empty: the status now is what later changes are measured against).
pub(crate) fn status_change(
    dev: &Device,
    s: &DeviceState,
    last: &Mutex<Option<Map<String, Value>>>,
) -> Option<(&'static str, Value)> {
    let now = comparable(components::status(dev, s));
    let mut last = lock(last);
    let Some(prev) = last.as_ref() else {
        *last = Some(now);
        return None;
    };
    // A component that appeared or went (a profile switch) cannot be said as changed fields: the whole
    // status goes out as `NotifyFullStatus`, which replaces what the client knew.
    let same_components = prev.len() == now.len() && now.keys().all(|k| prev.contains_key(k));
    if !same_components {
        *last = Some(now);
        drop(last);
        let mut full = components::status(dev, s);
        full.insert("ts".into(), json!(round2(dev.clock.unix())));
        return Some(("NotifyFullStatus", Value::Object(full)));
    }
    let mut changed = Map::new();
    for (key, value) in &now {
        let Value::Object(fields) = value else {
            continue;
        };
        let before = prev.get(key).and_then(Value::as_object);
        let mut diff = Map::new();
        for (k, v) in fields {
            if before.and_then(|b| b.get(k)) != Some(v) {
                diff.insert(k.clone(), v.clone());
            }
        }
        if !diff.is_empty() {
            if let Some(id) = fields.get("id") {
                diff.insert("id".into(), id.clone());
            }
            changed.insert(key.clone(), Value::Object(diff));
        }
    }
    *last = Some(now);
    drop(last);
    if changed.is_empty() {
        return None;
    }
    changed.insert("ts".into(), json!(round2(dev.clock.unix())));
    Some(("NotifyStatus", Value::Object(changed)))
}

/// `NotifyEvent` params for an event of the device itself (component `sys`: a firmware update's `ota_begin`,
/// `ota_progress` with `progress_percent`, `ota_success`, `ota_error`), with its fields.
pub(crate) fn sys_event(dev: &Device, event: &str, fields: Map<String, Value>) -> Value {
    let ts = round2(dev.clock.unix());
    let mut e = Map::new();
    e.insert("component".into(), json!("sys"));
    e.insert("event".into(), json!(event));
    e.extend(fields);
    e.insert("ts".into(), json!(ts));
    json!({"ts": ts, "events": [e]})
}

/// `NotifyEvent` params for a fired event (webhook form `input.button_push`, component id).
pub(crate) fn event(dev: &Device, event: &str, cid: usize) -> Value {
    let (kind, name) = event.split_once('.').unwrap_or(("sys", event));
    let name = match name {
        "button_push" => "single_push",
        "button_doublepush" => "double_push",
        "button_triplepush" => "triple_push",
        "button_longpush" => "long_push",
        other => other,
    };
    let ts = round2(dev.clock.unix());
    let events =
        json!([{"component": format!("{kind}:{cid}"), "id": cid, "event": name, "ts": ts}]);
    json!({"ts": ts, "events": events})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a subscription is measured with as text reads back as the values it was measured with before:
    /// every Gen2+ model, idle and then switched on, loaded and two minutes on.
    #[test]
    fn a_status_measured_as_text_is_the_status_measured_as_values() {
        super::super::every_model::each_rpc_model_idle_then_loaded(|model, dev, round| {
            let s = dev.state();
            let values = comparable(components::status(dev, &s));
            assert!(!values.is_empty(), "{model}");
            assert_eq!(
                comparable_text(&status_text(dev, &s)),
                values,
                "{model}, round {round}"
            );
        });
    }
}
