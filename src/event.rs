//! Webhook events as handed to the application by `pull_webhook_event`.

use serde::Serialize;

use crate::objects::{Attributes, Identity};

/// Event names the listener accepts: every event Shelly devices are known to send (Gen1 action URLs are
/// installed under the same names).
pub const KNOWN_EVENTS: &[&str] = &[
    "input.toggle_on",
    "input.toggle_off",
    "input.button_push",
    "input.button_longpush",
    "input.button_doublepush",
    "input.button_triplepush",
    "input.analog_change",
    "input.analog_measurement",
    "input.count_change",
    "input.count_measurement",
    "input.freq_change",
    "input.freq_measurement",
    "switch.on",
    "switch.off",
    "light.on",
    "light.off",
    "cct.on",
    "cct.off",
    "rgb.on",
    "rgb.off",
    "rgbw.on",
    "rgbw.off",
    "cover.open",
    "cover.closed",
    "cover.opening",
    "cover.closing",
    "cover.stopped",
    "cover.calibrating",
    "em.active_power_change",
    "em.voltage_change",
    "em.current_change",
    "em1.active_power_change",
    "em1.voltage_change",
    "em1.current_change",
    "pm1.apower_change",
    "pm1.voltage_change",
    "pm1.current_change",
    "temperature.change",
    "temperature.measurement",
    "humidity.change",
    "humidity.measurement",
    "voltmeter.change",
    "voltmeter.measurement",
    "illuminance.change",
    "flood.alarm",
    "flood.alarm_off",
    "smoke.alarm",
    "smoke.alarm_off",
];

/// Events smartdev raises itself, queued like the devices' own (never installed on a device):
/// `device.profile_changed` when a device reports another profile than before while the controller runs (its
/// `Params` hold `Profile`, `PreviousProfile` and `ConfigMismatch`; the next open follows the new profile
/// where the configuration leaves the shape open).
pub const SMARTDEV_EVENTS: &[&str] = &[PROFILE_CHANGED];

/// `device.profile_changed` (see [`SMARTDEV_EVENTS`]).
pub const PROFILE_CHANGED: &str = "device.profile_changed";

/// The cover events a device with covers can send (Gen2+ `Webhook.ListSupported` in the cover profile).
pub const COVER_EVENTS: [&str; 6] = [
    "cover.open",
    "cover.closed",
    "cover.stopped",
    "cover.opening",
    "cover.closing",
    "cover.calibrating",
];

/// One webhook a device sent, resolved against the configuration where possible.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct WebhookEvent {
    /// Event name, e.g. `input.toggle_on`.
    pub event: String,
    /// Name of the component that raised it; empty when unknown.
    pub component: String,
    /// ID of that component, when given.
    #[serde(rename = "ComponentID")]
    pub component_id: Option<i64>,
    /// `input` or `output`, when given.
    pub object_type: Option<String>,
    /// Name of the device; empty when unknown.
    pub device: String,
    /// ID of the device, when given.
    #[serde(rename = "DeviceID")]
    pub device_id: Option<i64>,
    /// When the listener received it (RFC 3339, UTC).
    pub received_at: String,
    /// Remote address of the sender.
    pub source: String,
    /// Any other query or body fields.
    pub params: Attributes,
    /// Which channel brought the event (`webhook`, `push` or `coiot`; `read` for an event smartdev raised after a
    /// read).
    pub channel: EventChannel,
}

/// The channel an event came through ([`WebhookEvent::channel`]; JSON `"webhook"`, `"push"`, `"coiot"` or
/// `"read"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EventChannel {
    /// A webhook request to our listener.
    #[default]
    Webhook,
    /// The device's WebSocket (`Channel: auto`): a `NotifyEvent`, or an input or output state change it
    /// pushed (`input.toggle_on`/`off`, `switch.on`/`off`); for an event smartdev raises itself
    /// (`device.profile_changed`), a status the device pushed.
    Push,
    /// Raised by smartdev itself when a read of the device (a refresh) showed it (`device.profile_changed`).
    Read,
    /// The MQTT broker (`Channel: mqtt`): a Gen2+ `NotifyEvent`, or a state change in a notification.
    Mqtt,
    /// A Gen1 device's CoIoT status (UDP): an input or output state change (`input.toggle_on`/`off`,
    /// `switch.on`/`off`).
    Coiot,
}

/// Which events `pull_webhook_event_matching` takes: every given criterion must match.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventFilter {
    /// The device, by name or ID.
    pub device: Option<Identity>,
    /// The component, by name or ID.
    pub component: Option<Identity>,
}

impl EventFilter {
    /// Whether `e` matches. Events whose device or component was not resolved never match a filter on it.
    pub fn matches(&self, e: &WebhookEvent) -> bool {
        let fits = |want: &Option<Identity>, name: &str, id: Option<i64>| match want {
            None => true,
            Some(Identity::Name(n)) => !name.is_empty() && n == name,
            Some(Identity::Id(i)) => !name.is_empty() && id == Some(*i),
        };
        fits(&self.device, &e.device, e.device_id)
            && fits(&self.component, &e.component, e.component_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_resolved_names_and_ids_only() {
        let e = WebhookEvent {
            device: "Hall".into(),
            device_id: Some(1),
            component: "".into(),
            component_id: Some(7),
            ..WebhookEvent::default()
        };
        assert!(EventFilter::default().matches(&e));
        assert!(
            EventFilter {
                device: Some(Identity::Id(1)),
                component: None
            }
            .matches(&e)
        );
        assert!(
            EventFilter {
                device: Some(Identity::name("Hall")),
                component: None
            }
            .matches(&e)
        );
        assert!(
            !EventFilter {
                device: Some(Identity::Id(2)),
                component: None
            }
            .matches(&e)
        );
        assert!(
            !EventFilter {
                device: None,
                component: Some(Identity::Id(7))
            }
            .matches(&e),
            "component unresolved"
        );
    }
}
