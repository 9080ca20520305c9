//! Shelly Gen1 over MQTT, as the firmware speaks it under `shellies/<id>/` (`<id>` is `mqtt.id`, by default the
//! device id such as `shelly1-34945472A643`): last will `online` `false` (retained), `true` after connecting with
//! the `announce` JSON (also on `shellies/announce`); relays as `relay/<n>` `on`/`off`, their meters as
//! `relay/<n>/power` (W) and `relay/<n>/energy` (watt-minutes, as the firmware counts), inputs as `input/<n>`
//! `0`/`1`, the whole `/status` as `info`. Published after connecting, on every change of a relay or an input,
//! and every `update_period` (30 s) on the emulator clock (the telemetry thread of `mqtt_tasmota.rs`). Commands:
//! `relay/<n>/command` `on`/`off`/`toggle`; `command` (and `shellies/command` for every device) `announce` and
//! `update`. Dimmers, rollers and emeters are not published over MQTT.

use serde_json::{Map, Value, json};

use super::device::Device;
use super::gen1;
use super::lock::lock;
use super::state::{DeviceState, Source};
use crate::mqtt::packet::Will;

fn topic(dev: &Device, rest: &str) -> String {
    format!("shellies/{}/{rest}", dev.mqtt.prefix)
}

pub(crate) fn will(dev: &Device) -> Will {
    super::mqtt_link::retained_will(topic(dev, "online"), b"false")
}

pub(crate) fn subscriptions(dev: &Device) -> Vec<String> {
    vec![
        topic(dev, "relay/+/command"),
        topic(dev, "command"),
        "shellies/command".into(),
    ]
}

/// After the CONNACK: `online`, the announcement, every value.
pub(crate) fn on_connect(dev: &Device) {
    dev.mqtt.publish(&topic(dev, "online"), b"true", true);
    announce(dev);
    {
        let s = dev.state();
        *lock(&dev.mqtt.last) = Some(values(&s));
    }
    dev.mqtt.schedule_tele(dev.clock.instant());
}

fn announce(dev: &Device) {
    let a = json!({
        "id": dev.mqtt.prefix, "model": dev.ident.reported, "mac": dev.mac(), "ip": "127.0.0.1",
        "new_fw": false, "fw_ver": gen1::fw(dev),
    })
    .to_string();
    dev.mqtt.publish("shellies/announce", a.as_bytes(), false);
    dev.mqtt
        .publish(&topic(dev, "announce"), a.as_bytes(), false);
}

/// Topic (under the prefix) → payload for every relay, relay meter and input.
fn values(s: &DeviceState) -> Map<String, Value> {
    let mut m = Map::new();
    if !s.layout.lights && s.covers.is_empty() {
        for (i, on) in s.outputs.iter().enumerate() {
            m.insert(format!("relay/{i}"), json!(if *on { "on" } else { "off" }));
        }
        for i in 0..s.meters.len().min(s.outputs.len()) {
            let v = s.meter(i);
            // Two decimals, as the firmware prints watts.
            m.insert(format!("relay/{i}/power"), json!(format!("{:.2}", v.power)));
            m.insert(
                format!("relay/{i}/energy"),
                json!((v.energy_wh * 60.0).round() as i64),
            );
        }
    }
    for i in 0..s.inputs.len() {
        m.insert(format!("input/{i}"), json!(u8::from(s.inputs[i])));
    }
    m
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A relay or an input changed (energy alone does not: it goes out with the periodic update).
pub(crate) fn on_state(dev: &Device, s: &DeviceState) {
    let now = values(s);
    let before = lock(&dev.mqtt.last).replace(now.clone());
    let Some(before) = before else {
        return;
    };
    for (k, v) in &now {
        if k.ends_with("/energy") || before.get(k) == Some(v) {
            continue;
        }
        dev.mqtt.publish(&topic(dev, k), text(v).as_bytes(), false);
    }
}

/// Every value and `info` (the `/status` JSON): after connecting, every `update_period`, on `update`.
pub(crate) fn update(dev: &Device) {
    let (vals, info) = {
        let s = dev.state();
        (values(&s), gen1::status(dev, &s))
    };
    for (k, v) in &vals {
        dev.mqtt.publish(&topic(dev, k), text(v).as_bytes(), false);
    }
    dev.mqtt
        .publish(&topic(dev, "info"), info.to_string().as_bytes(), false);
}

pub(crate) fn on_message(dev: &Device, t: &str, payload: &[u8]) {
    let cmd = String::from_utf8_lossy(payload);
    let cmd = cmd.trim();
    if t == "shellies/command" || t == topic(dev, "command") {
        match cmd {
            "announce" => announce(dev),
            "update" => update(dev),
            _ => {}
        }
        return;
    }
    let Some(n) = t
        .strip_prefix(&topic(dev, "relay/"))
        .and_then(|r| r.strip_suffix("/command"))
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return;
    };
    let mut s = dev.state();
    if s.layout.lights || !s.covers.is_empty() || n >= s.outputs.len() {
        return;
    }
    let on = match cmd {
        "on" => true,
        "off" => false,
        "toggle" => !s.outputs[n],
        _ => return,
    };
    s.set_output(n, on, Source::Remote);
}
