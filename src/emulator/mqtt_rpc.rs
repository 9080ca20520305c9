//! Shelly Gen2+ over MQTT, as the firmware speaks it (the prefix is the `topic_prefix`, by default the device
//! id): last will `<prefix>/online` `false` (retained), `true` after connecting; request frames on
//! `<prefix>/rpc` answered on `<src>/rpc` by the same dispatcher as HTTP and WebSocket calls (`rpc.rs`, no
//! auth: device authentication does not apply to MQTT); `NotifyStatus`, `NotifyFullStatus` (after connecting)
//! and `NotifyEvent` on `<prefix>/events/rpc` built as the WebSocket's (`notify.rs`); `status_update` on
//! `<prefix>/command` (or `<prefix>/command/<component>`) publishes every component's status on
//! `<prefix>/status/<component>`; `on`, `off` and `toggle` on `<prefix>/command/switch:<n>` switch it.
//! Everything is published at QoS 1.

use serde_json::{Map, Value, json};

use super::Fault;
use super::device::Device;
use super::server::Response;
use super::state::{DeviceState, Source};
use super::{components, notify, rpc};
use crate::mqtt::packet::{Will, valid_topic};

/// Longest `src` answered (a topic we publish to).
const MAX_SRC: usize = 256;

fn topic(dev: &Device, rest: &str) -> String {
    format!("{}/{rest}", dev.mqtt.prefix)
}

pub(crate) fn will(dev: &Device) -> Will {
    super::mqtt_link::retained_will(topic(dev, "online"), b"false")
}

pub(crate) fn subscriptions(dev: &Device) -> Vec<String> {
    vec![
        topic(dev, "rpc"),
        topic(dev, "command"),
        topic(dev, "command/+"),
    ]
}

/// After the CONNACK: `online` `true`, then the whole status (`NotifyFullStatus`), from which later changes
/// are measured.
pub(crate) fn on_connect(dev: &Device) {
    dev.mqtt.publish(&topic(dev, "online"), b"true", true);
    let s = dev.state();
    let full = notify::full_status(dev, &s, &dev.mqtt.last);
    notification(dev, "NotifyFullStatus", &full);
    drop(s);
}

pub(crate) fn notification(dev: &Device, method: &str, params: &Value) {
    let frame = json!({"src": dev.ident.id, "dst": topic(dev, "events"), "method": method, "params": params});
    let body = Response::json_whole(200, &frame).body;
    dev.mqtt.publish(&topic(dev, "events/rpc"), &body, false);
}

/// A state change: what changed, as over the WebSocket.
pub(crate) fn on_state(dev: &Device, s: &DeviceState) {
    if let Some((method, params)) = notify::status_change(dev, s, &dev.mqtt.last) {
        notification(dev, method, &params);
    }
}

pub(crate) fn on_event(dev: &Device, event: &str, cid: usize) {
    notification(dev, "NotifyEvent", &notify::event(dev, event, cid));
}

pub(crate) fn on_message(dev: &Device, topic: &str, payload: &[u8]) {
    let Some(rest) = topic
        .strip_prefix(dev.mqtt.prefix.as_str())
        .and_then(|r| r.strip_prefix('/'))
    else {
        return;
    };
    match rest {
        "rpc" => request(dev, payload),
        "command" => {
            if payload.trim_ascii() == b"status_update" {
                status_update(dev, None);
            }
        }
        _ => {
            if let Some(component) = rest.strip_prefix("command/") {
                command(dev, component, payload);
            }
        }
    }
}

/// A request frame: answered on `<src>/rpc`; one without a usable `src` cannot be answered and is dropped.
fn request(dev: &Device, payload: &[u8]) {
    let Ok(Value::Object(f)) = crate::untrusted_json::parse(payload) else {
        log::debug!(
            "emulator: device {} MQTT: a request that is not a JSON object",
            dev.ident.id
        );
        return;
    };
    let Some(src) = f.get("src").and_then(Value::as_str) else {
        return;
    };
    let reply_to = format!("{src}/rpc");
    if src.is_empty() || src.len() > MAX_SRC || !valid_topic(&reply_to) {
        return;
    }
    let method = f.get("method").and_then(Value::as_str).unwrap_or("");
    let key = format!("rpc {method}");
    let (fault, latency) = dev.net.for_request(&key);
    dev.net.count(key);
    match fault {
        Fault::Blackhole => return,
        Fault::MalformedJson => {
            dev.mqtt.publish(&reply_to, b"{\"broken\":", false);
            return;
        }
        _ => {}
    }
    dev.net.sleep(latency);
    dev.mqtt
        .publish(&reply_to, &rpc::answer_text(dev, &f), false);
}

/// Every component's status (or one's) on `<prefix>/status/<component>`.
fn status_update(dev: &Device, only: Option<&str>) {
    let status: Map<String, Value> = components::status(dev, &dev.state());
    for (key, value) in status {
        if only.is_none_or(|o| o == key) {
            let body = Response::json_whole(200, &value).body;
            dev.mqtt
                .publish(&topic(dev, &format!("status/{key}")), &body, false);
        }
    }
}

/// `<prefix>/command/<component>`: `status_update`, and for a switch `on`, `off`, `toggle`.
fn command(dev: &Device, component: &str, payload: &[u8]) {
    let text = String::from_utf8_lossy(payload);
    let text = text.trim();
    if text == "status_update" {
        status_update(dev, Some(component));
        return;
    }
    let Some(i) = component
        .strip_prefix("switch:")
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return;
    };
    // `on,<toggle_after>` switches too; the timer is not emulated.
    let verb = text.split(',').next().unwrap_or("");
    let mut s = dev.state();
    if i >= s.outputs.len() || s.layout.lights {
        return;
    }
    let on = match verb {
        "on" => true,
        "off" => false,
        "toggle" => !s.outputs[i],
        _ => {
            drop(s);
            dev.mqtt.publish(
                &topic(dev, &format!("error/{component}")),
                format!("unknown command {verb}").as_bytes(),
                false,
            );
            return;
        }
    };
    s.set_output(i, on, Source::Remote);
}
