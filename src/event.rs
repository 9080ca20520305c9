//! Webhook events as handed to the application by `pull_webhook_event`.

use serde::Serialize;

use crate::objects::Attributes;

/// One webhook a device sent, resolved against the configuration where possible.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
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
}
