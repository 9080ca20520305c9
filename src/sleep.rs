//! Devices that sleep between reports (battery devices: H&T, door/window, flood sensors). Polling them fails by
//! design; they report through the outbound WebSocket (`webhook/listener.rs` serves it, `actor/outbound.rs`
//! matches the device) when they wake. This file holds the policy: which devices report there, which of them
//! sleep, and when a sleeping device that stayed silent counts as offline.

use std::time::Duration;

use crate::config::{DeviceConfig, Settings};
use crate::models::{ModelInfo, ModelRef, Protocol};

/// The reporting period of a sleeping device that neither its configuration (`ReportPeriod`) nor its status
/// (`sys.wakeup_period`) gives: 6 h (an H&T Gen3 reports every 2 h and on every change beyond its thresholds).
pub(crate) const DEFAULT_PERIOD: Duration = Duration::from_secs(6 * 3600);

/// A sleeping device is offline once it missed its period by this factor (Home Assistant waits 1.2 periods)...
const PERIOD_FACTOR: f64 = 1.2;
/// ... plus this much (a wake-up takes seconds to connect and report), or half the period if that is less.
const MARGIN: Duration = Duration::from_secs(60);

/// How long a sleeping device may stay silent before it is offline: 1.2 × its period + 60 s (+ half the period
/// for periods under 2 minutes).
pub(crate) fn allowed_silence(period: Duration) -> Duration {
    period.mul_f64(PERIOD_FACTOR) + MARGIN.min(period / 2)
}

/// The vendor model of a configured device, if it is a Gen2+ (RPC) network device.
fn rpc_model<'a>(settings: &'a Settings, cfg: &DeviceConfig) -> Option<&'a ModelInfo> {
    match settings.models.resolve(&cfg.model)? {
        ModelRef::Vendor(m) if m.protocol == Protocol::Rpc && !cfg.simulate => Some(m),
        _ => None,
    }
}

/// Whether the device reports through our outbound WebSocket server: a Gen2+ network device with the webhook
/// listener on, and `OutboundWebsocket: true` (default: its model sleeps).
pub(crate) fn outbound(settings: &Settings, cfg: &DeviceConfig) -> bool {
    settings.webhooks.enabled
        && rpc_model(settings, cfg).is_some_and(|m| cfg.outbound_websocket.unwrap_or(m.sleeps))
}

/// Whether the device sleeps between reports: it reports through the outbound WebSocket, and its model sleeps
/// or a `ReportPeriod` is configured. Such a device is never polled, and commands to it fail at once.
pub(crate) fn sleeps(settings: &Settings, cfg: &DeviceConfig) -> bool {
    outbound(settings, cfg)
        && rpc_model(settings, cfg).is_some_and(|m| m.sleeps || cfg.report_period.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_allowed_is_a_fifth_more_than_the_period_plus_a_minute() {
        assert_eq!(
            allowed_silence(Duration::from_secs(7200)),
            Duration::from_secs(8700)
        );
        assert_eq!(
            allowed_silence(Duration::from_secs(10)),
            Duration::from_secs(17)
        );
    }

    #[test]
    fn only_gen2_network_devices_with_the_listener_report_outbound() {
        let dev = |model: &str, ob: Option<bool>| DeviceConfig {
            model: model.into(),
            hostname: Some("10.0.0.9".into()),
            outbound_websocket: ob,
            ..DeviceConfig::default()
        };
        let mut s = Settings::with_defaults(vec![]);
        assert!(!outbound(&s, &dev("ShellyHTG3", None)), "no listener");
        s.webhooks.enabled = true;
        assert!(outbound(&s, &dev("ShellyHTG3", None)));
        assert!(sleeps(&s, &dev("ShellyHTG3", None)));
        assert!(!outbound(&s, &dev("ShellyHTG3", Some(false))));
        assert!(!outbound(&s, &dev("ShellyHT", None)), "Gen1");
        assert!(!outbound(&s, &dev("Shelly1PMG3", None)));
        assert!(outbound(&s, &dev("Shelly1PMG3", Some(true))));
        assert!(!sleeps(&s, &dev("Shelly1PMG3", Some(true))), "mains");
    }
}
