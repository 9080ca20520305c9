//! Webhooks: the listener, the event queue, the request parser, and what to install on devices.

pub(crate) mod http;
pub(crate) mod install;
pub(crate) mod listener;
pub(crate) mod outbound_ws;
pub(crate) mod queue;
pub(crate) mod read_budget;
pub(crate) mod request;
pub(crate) mod routing;

/// The senders `AllowedSources: devices` accepts: the configured devices' addresses, and the new address of
/// a device that moved (added once its MAC answered there). Shared by the listener and `sd-find`.
pub(crate) type AllowedSources = std::sync::Arc<std::sync::RwLock<Vec<std::net::IpAddr>>>;

/// Resolves a valid webhook against the configuration and applies it to the device state.
pub(crate) trait HookSink: Send + Sync {
    /// Returns the device name and component name (empty when unknown) and updates the component's state;
    /// `None` for a twin of an event already queued. `source` is the sender, whose budget of device reads the
    /// event may use. Drop the answer only after the event is queued (it may hold the device's order lock).
    fn resolve(
        &self,
        hook: &request::Hook,
        source: std::net::IpAddr,
    ) -> Option<routing::Resolved<'_>>;
}

/// Where the outbound WebSocket server (on the listener, `outbound_ws.rs`) hands what devices push; the
/// controller's side is `actor/outbound.rs`.
pub(crate) trait WsSink: Send + Sync {
    /// The configured device a frame is from: its `src` (device id) names the device by its MAC, and a full
    /// status's `sys.mac` must be the same MAC. `None`: no configured device is it (the sink logs it, once per
    /// id); the connection is then dropped.
    fn identify(
        &self,
        frame: &serde_json::Map<String, serde_json::Value>,
        source: std::net::IpAddr,
    ) -> Option<usize>;
    /// A notification of the device `identify` named: handled as the push channel handles it.
    fn deliver(
        &self,
        device: usize,
        frame: serde_json::Map<String, serde_json::Value>,
        source: std::net::IpAddr,
    );
}

/// The listener starts before the workers exist; the sink is filled in once they run. Devices connecting
/// earlier are dropped (they connect again at their next wake-up).
#[derive(Default)]
pub(crate) struct LateWs(pub(crate) std::sync::OnceLock<std::sync::Arc<dyn WsSink>>);

impl WsSink for LateWs {
    fn identify(
        &self,
        frame: &serde_json::Map<String, serde_json::Value>,
        source: std::net::IpAddr,
    ) -> Option<usize> {
        self.0.get()?.identify(frame, source)
    }

    fn deliver(
        &self,
        device: usize,
        frame: serde_json::Map<String, serde_json::Value>,
        source: std::net::IpAddr,
    ) {
        if let Some(s) = self.0.get() {
            s.deliver(device, frame, source);
        }
    }
}
