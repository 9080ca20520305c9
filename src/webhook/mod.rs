//! Webhooks: the listener, the event queue, the request parser, and what to install on devices.

pub(crate) mod http;
pub(crate) mod install;
pub(crate) mod listener;
pub(crate) mod queue;
pub(crate) mod read_budget;
pub(crate) mod request;
pub(crate) mod routing;

/// The senders `AllowedSources: devices` accepts: the configured devices' addresses, and the new address of
/// a device that moved (added once its MAC answered there). Shared by the listener and `sd-find`.
pub(crate) type AllowedSources = std::sync::Arc<std::sync::RwLock<Vec<std::net::IpAddr>>>;

/// Resolves a valid webhook against the configuration and applies it to the device state.
pub(crate) trait HookSink: Send + Sync {
    /// Returns the device name and component name (empty when unknown) and updates the component's state.
    /// `source` is the sender, whose budget of device reads the event may use.
    fn resolve(&self, hook: &request::Hook, source: std::net::IpAddr) -> Option<(String, String)>;
}
