//! What to install on a device: the hooks smartdev owns, their callback URLs, and the Gen1 action-URL names.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};

use serde_json::Value;

use crate::config::WebhookSettings;
use crate::objects::{ComponentKind, Device};
use crate::url::encode_component;

/// Every hook smartdev creates is named with this prefix, so it never touches anyone else's.
pub(crate) const NAME_PREFIX: &str = "smartdev:";

/// One hook smartdev wants on a device.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WantedHook {
    /// Event name (`input.toggle_on`).
    pub event: String,
    /// Component channel on the device (`cid`).
    pub channel: usize,
    /// Unique name on the device, starting with [`NAME_PREFIX`].
    pub name: String,
    /// The callback URL.
    pub url: String,
}

/// The address this machine uses to reach `host` (what a device should call back when we listen on 0.0.0.0).
/// Connecting a UDP socket sends nothing; it only picks the route.
pub(crate) fn local_address_towards(host: &str, port: u16) -> Option<IpAddr> {
    let target = (host.trim_matches(['[', ']']), port);
    let probe = match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => UdpSocket::bind("[::]:0").ok()?,
        _ => UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?,
    };
    probe.connect(target).ok()?;
    probe.local_addr().ok().map(|a| a.ip())
}

/// What smartdev keeps on one device: its callback base and the hooks it wants there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HookPlan {
    /// `http://host:port/path`: every URL smartdev installs starts with this (Gen1 URLs are recognised by it).
    pub base: String,
    /// The hooks wanted (possibly none: then smartdev's old hooks are removed).
    pub wanted: Vec<WantedHook>,
    /// `ws://host:port/ws_path`: our outbound WebSocket server as this device reaches it.
    pub server: String,
    /// Whether the device should connect to [`HookPlan::server`] (Gen2+ `Ws.SetConfig`; `sleep::outbound`).
    pub outbound: bool,
}

/// One event a component asks for (`Webhooks: true`, and listed in `DefaultWebhooks`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WantedEvent {
    /// Input, output or cover.
    pub kind: ComponentKind,
    /// Its channel on the device (`component_index`: `cid` of a hook, `N` of `input:N`).
    pub index: usize,
    /// Its configured ID.
    pub id: i64,
    /// Event name (`input.toggle_on`).
    pub event: String,
}

/// The events a device's components ask for: the `DefaultWebhooks` of every input, output and cover with
/// `Webhooks: true`, whether or not the listener runs. One decision for both the hooks to install ([`plan`])
/// and the events the push channel derives from pushed states (which need no listener).
pub(crate) fn wanted_events(dev: &Device, w: &WebhookSettings) -> Vec<WantedEvent> {
    let d = &w.default_webhooks;
    let inputs = dev.inputs.iter().filter(|c| c.webhooks);
    let inputs = inputs.map(|c| (ComponentKind::Input, c.component_index, c.id, &d.inputs));
    let outputs = dev.outputs.iter().filter(|c| c.webhooks);
    let outputs = outputs.map(|c| (ComponentKind::Output, c.component_index, c.id, &d.outputs));
    let covers = dev.covers.iter().filter(|c| c.webhooks);
    let covers = covers.map(|c| (ComponentKind::Cover, c.component_index, c.id, &d.covers));
    inputs
        .chain(outputs)
        .chain(covers)
        .flat_map(|(kind, index, id, events)| {
            events.iter().map(move |e| WantedEvent {
                kind,
                index,
                id,
                event: e.clone(),
            })
        })
        .collect()
}

/// The hooks a device should carry: the default events of its inputs and outputs that ask for webhooks.
/// `port` is the listener's actual port. Support is checked later against what the device lists. `None` when
/// webhooks are off or the device takes no part (simulated, Tasmota).
pub(crate) fn plan(dev: &Device, w: &WebhookSettings, port: u16) -> Option<HookPlan> {
    if !w.enabled || dev.simulate || dev.is_tasmota() {
        return None;
    }
    let host = match w.host.as_str() {
        "0.0.0.0" | "::" | "[::]" => dev
            .hostname
            .as_deref()
            .and_then(|h| local_address_towards(h, dev.port))
            .map(|ip| ip.to_string())
            .unwrap_or_else(|| w.host.clone()),
        h => h.to_string(),
    };
    let base = format!(
        "http://{}:{port}{}",
        crate::hostname::url_host(&host),
        w.path
    );
    let server = format!(
        "ws://{}:{port}{}",
        crate::hostname::url_host(&host),
        w.ws_path
    );
    let token = w
        .token
        .as_deref()
        .map(|t| format!("&token={}", encode_component(t)))
        .unwrap_or_default();
    let wanted = wanted_events(dev, w)
        .into_iter()
        .map(|e| {
            let object = match e.kind {
                ComponentKind::Input => "input",
                ComponentKind::Output => "output",
                _ => "cover",
            };
            WantedHook {
                name: format!("{NAME_PREFIX}{object}:{}:{}", e.id, e.event),
                url: format!(
                    "{base}?Event={}&DeviceID={}&ObjectType={object}&ComponentID={}{token}",
                    encode_component(&e.event),
                    dev.id,
                    e.id
                ),
                channel: e.index,
                event: e.event,
            }
        })
        .collect();
    Some(HookPlan {
        base,
        wanted,
        server,
        outbound: false,
    })
}

/// Event names from a `Webhook.ListSupported` result, in either shape: `{"types": {name: {...}}}` (current
/// firmware) or `{"hook_types": [name, ...]}` (early firmware).
pub(crate) fn supported_events(result: &Value) -> Vec<String> {
    if let Some(types) = result.get("types").and_then(Value::as_object) {
        return types.keys().cloned().collect();
    }
    result
        .get("hook_types")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Gen1 action-URL names and the events they stand for.
pub(crate) const GEN1_ACTIONS: &[(&str, &str)] = &[
    ("btn_on_url", "input.toggle_on"),
    ("btn_off_url", "input.toggle_off"),
    ("shortpush_url", "input.button_push"),
    ("longpush_url", "input.button_longpush"),
    ("out_on_url", "switch.on"),
    ("out_off_url", "switch.off"),
    // Roller mode (Shelly 2.5, Shelly 2): reached open, reached closed, stopped.
    ("roller_open_url", "cover.open"),
    ("roller_close_url", "cover.closed"),
    ("roller_stop_url", "cover.stopped"),
];

/// The Gen1 action name for an event.
pub(crate) fn gen1_action(event: &str) -> Option<&'static str> {
    GEN1_ACTIONS
        .iter()
        .find(|(_, e)| *e == event)
        .map(|(a, _)| *a)
}

/// The event of a Gen1 action name.
pub(crate) fn gen1_event(action: &str) -> Option<&'static str> {
    GEN1_ACTIONS
        .iter()
        .find(|(a, _)| *a == action)
        .map(|(_, e)| *e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{Input, Output};
    use serde_json::json;

    #[test]
    fn urls_carry_ids_and_the_encoded_token() {
        let dev = Device {
            id: 4,
            hostname: Some("127.0.0.1".into()),
            inputs: vec![Input {
                id: 9,
                component_index: 1,
                webhooks: true,
                ..Input::default()
            }],
            outputs: vec![Output {
                id: 3,
                webhooks: false,
                ..Output::default()
            }],
            ..Device::default()
        };
        let w = WebhookSettings {
            enabled: true,
            token: Some("a b&c".into()),
            ..WebhookSettings::default()
        };
        let p = plan(&dev, &w, 8787).unwrap();
        assert_eq!(p.base, "http://127.0.0.1:8787/shelly/webhook");
        let hooks = p.wanted;
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[0].name, "smartdev:input:9:input.toggle_on");
        assert_eq!(hooks[0].channel, 1);
        assert_eq!(
            hooks[0].url,
            "http://127.0.0.1:8787/shelly/webhook?Event=input.toggle_on&DeviceID=4&ObjectType=input&ComponentID=9&token=a%20b%26c"
        );
        let off = WebhookSettings::default();
        assert!(plan(&dev, &off, 8787).is_none());
    }

    #[test]
    fn both_list_supported_shapes() {
        let now = json!({"types": {"input.toggle_on": {}, "switch.on": {"attrs": []}}});
        assert_eq!(supported_events(&now), ["input.toggle_on", "switch.on"]);
        let early = json!({"hook_types": ["switch.off"]});
        assert_eq!(supported_events(&early), ["switch.off"]);
        assert!(supported_events(&json!({})).is_empty());
        assert_eq!(gen1_action("switch.on"), Some("out_on_url"));
        assert_eq!(gen1_event("longpush_url"), Some("input.button_longpush"));
    }

    #[test]
    fn loopback_routes_from_loopback() {
        assert_eq!(
            local_address_towards("127.0.0.1", 80),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }
}
