//! Gen2+ `light:N` (dimmers): status and config payloads and the `Light.*` methods, shaped like Pro Dimmer and
//! Dimmer Gen3 captures.

use serde_json::{Map, Value, json};

use super::components::{source_name, temperature};
use super::device::Device;
use super::rpc::{RpcError, bool_param, index, invalid, missing, opt_number};
use super::state::{DeviceState, Source};

/// The `Light.*` methods (`Shelly.ListMethods`).
pub(crate) const METHODS: &[&str] = &[
    "Light.Set",
    "Light.Toggle",
    "Light.GetStatus",
    "Light.GetConfig",
];

pub(crate) fn status(s: &DeviceState, i: usize) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(i));
    m.insert("source".into(), json!(source_name(s.sources[i])));
    m.insert("output".into(), json!(s.outputs[i]));
    m.insert("brightness".into(), json!(s.brightness[i]));
    if s.layout.temperature {
        m.insert("temperature".into(), temperature(s.temperature));
    }
    Value::Object(m)
}

pub(crate) fn config(_s: &DeviceState, i: usize) -> Value {
    json!({
        "id": i,
        "name": null,
        "initial_state": "restore_last",
        "auto_on": false,
        "auto_on_delay": 60.0,
        "auto_off": false,
        "auto_off_delay": 60.0,
        "transition_duration": 3.0,
        "min_brightness_on_toggle": 3,
        "night_mode": {"enable": false, "brightness": 50, "active_between": []},
        "button_fade_rate": 3,
        "button_presets": {"button_doublepush": {"brightness": 100}},
        "in_mode": "dim",
    })
}

pub(crate) fn call(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let mut s = dev.state();
    let action = method.strip_prefix("light.").unwrap_or(method);
    if !matches!(action, "set" | "toggle" | "getstatus" | "getconfig") {
        return Err(RpcError::unknown());
    }
    let n = if s.layout.lights { s.outputs.len() } else { 0 };
    let i = index(p, 0, n)?;
    match action {
        "getstatus" => Ok(status(&s, i)),
        "getconfig" => Ok(config(&s, i)),
        "toggle" => {
            let on = !s.outputs[i];
            s.set_output(i, on, Source::Remote);
            Ok(Value::Null)
        }
        _ => {
            let on = match p.get("on") {
                None | Some(Value::Null) => None,
                Some(_) => Some(bool_param(p, "on")?),
            };
            let brightness = match opt_number(p, "brightness")? {
                Some(b) if (0.0..=100.0).contains(&b) => Some(b.round() as u8),
                Some(_) => return Err(invalid("brightness")),
                None => None,
            };
            if on.is_none() && brightness.is_none() {
                return Err(missing("on"));
            }
            if let Some(b) = brightness {
                s.brightness[i] = b;
            }
            let on = on.unwrap_or(s.outputs[i]);
            s.set_output(i, on, Source::Remote);
            Ok(Value::Null)
        }
    }
}
