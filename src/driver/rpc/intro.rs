//! Getting to know a Gen2+ device: `/shelly` (identity) on first contact and after it comes back, and only
//! when the configuration needs them `Webhook.ListSupported` (supported webhook events) and `Shelly.GetConfig`
//! (add-on probe and sensor names).

use serde_json::Value;

use super::Rpc;
use crate::driver::json::text;
use crate::driver::rpc::status_doc::DeviceInfo;
use crate::driver::ws::tunnel::Opened;
use crate::driver::{Driver as _, identify};
use crate::error::Result;
use crate::objects::Device;
use crate::webhook::install::supported_events;

/// How long open's first contact waits for a connected device's WebSocket upgrade and first answers before it
/// reads the device over HTTP instead (a healthy device answers in milliseconds; 1,000 at once on 2 loaded
/// cores took under a second).
const OPEN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

impl Rpc {
    /// At open, the push channel dials the device first: its first contact waits for that attempt and then
    /// goes over the connection. A device that took no TCP connection within its timeout is unreachable now,
    /// with that as its error (an HTTP request would only have waited as long again).
    #[inline(never)]
    pub(super) fn await_channel(&mut self, dev: &Device) -> Result<()> {
        let Some(t) = &self.tunnel else {
            return Ok(());
        };
        // The dial's three steps (connect, upgrade, call) each have one timeout; a host name is resolved first.
        let bound = self.http.timeout().saturating_mul(3) + std::time::Duration::from_secs(1);
        match t.opened(bound, OPEN_GRACE) {
            Some(Opened::Unreachable(why)) => {
                self.http.record_reach(false);
                // What was tried: the connection for its WebSocket (HTTP would only wait as long again).
                Err(crate::error::Error::Device {
                    device: dev.label(),
                    message: format!("{why} (connecting for its WebSocket at open)"),
                })
            }
            Some(Opened::Failed(why)) => {
                log::debug!(
                    "device {}: no push channel at open ({why}); read over HTTP",
                    dev.label()
                );
                Ok(())
            }
            Some(Opened::Up) | None => Ok(()),
        }
    }

    /// Reads `/shelly` (over MQTT `Shelly.GetDeviceInfo`) once per contact period: firmware, MAC and the
    /// self-reported model.
    pub(super) fn introduce(&mut self, dev: &mut Device) -> Result<()> {
        // Over MQTT there is no `/shelly`: `Shelly.GetDeviceInfo` answers the same fields, and over a live push
        // connection it costs no new connection (at open, it came with the subscription).
        let prefetched = self.tunnel.as_ref().and_then(|t| t.take_info());
        // Boxed, its fields taken out one by one: the worker's stack at open has no room for a copy.
        let mut info = match prefetched {
            Some(info) => info,
            None => DeviceInfo::from_value(&self.ask_info(dev)?),
        };
        dev.firmware = info.ver.0.take().or_else(|| info.fw_id.0.take());
        if let Some(mac) = info.mac.0.as_deref().and_then(crate::mac::normalise) {
            dev.mac_address = Some(mac);
        }
        // A Gen1 device at this address answers with `type` instead of `model`.
        let reported = info.model.0.as_deref().or(info.kind.0.as_deref());
        identify(dev, &self.model, reported, info.generation.0.is_none());
        self.shape = crate::driver::profile::detect(
            dev,
            &self.model,
            info.profile.0.as_deref(),
            self.follow.as_deref(),
        );
        self.introduced = true;
        Ok(())
    }

    /// Asks for what `introduce` reads, when the push channel did not bring it. Out of line: the worker's
    /// deepest frame at open decides how much of its stack stays resident.
    #[inline(never)]
    fn ask_info(&mut self, dev: &mut Device) -> Result<Value> {
        if self.mqtt.is_some() || self.pinned() {
            self.call(dev, "Shelly.GetDeviceInfo", None)
        } else {
            let url = format!("{}/shelly", self.base);
            self.http.request(dev, &url, None, "GET /shelly")
        }
    }

    /// Reads `Webhook.ListSupported` into `SupportedWebhooks` once per contact period (a failure is logged and
    /// not retried until the device comes back, as before). Called where hooks are reconciled when some hook is
    /// wanted, otherwise at the first read after `open`, so the quick first contact skips a request nothing
    /// waits for.
    #[inline(never)]
    pub(super) fn learn_supported(&mut self, dev: &mut Device) {
        if self.supported_known {
            return;
        }
        match self.call(dev, "Webhook.ListSupported", None) {
            Ok(r) => {
                dev.supported_webhooks = supported_events(&r);
                // The answer's tree (an object per event) was parsed on the poller: freed there too.
                self.give_back(r);
            }
            Err(e) => log::debug!("device {}: no webhook list: {}", dev.label(), e.reason()),
        }
        self.supported_known = true;
    }

    /// Maps configured probe names to `temperature:N` ids from `Shelly.GetConfig`. Failures are logged and
    /// retried at the next refresh.
    #[inline(never)]
    pub(super) fn map_probes(&mut self, dev: &mut Device) {
        match self.call(dev, "Shelly.GetConfig", None) {
            Ok(config) => {
                let found = probe_ids(&config);
                let label = dev.label();
                for p in dev
                    .temp_probes
                    .iter_mut()
                    .filter(|p| p.probe_id != Some(-1))
                {
                    p.probe_id = found.iter().find(|(_, n)| *n == p.name).map(|(id, _)| *id);
                    if p.probe_id.is_none() {
                        let names: Vec<String> = found
                            .iter()
                            .map(|(_, n)| crate::text::quote(n, 60))
                            .collect();
                        log::warn!(
                            "device {label}: add-on probe '{}' not found (the device names its probes: {})",
                            p.name,
                            if names.is_empty() {
                                "none".into()
                            } else {
                                names.join(", ")
                            }
                        );
                    }
                }
                map_sensors(dev, &config);
                self.probes_mapped = true;
            }
            Err(e) => log::debug!("device {}: probe mapping postponed: {e}", dev.label()),
        }
    }
}

/// Maps configured add-on sensors to their `humidity:N`, `voltmeter:N` or `temperature:N` ids (N ≥ 100) by
/// name; built-in sensors keep their planned ids.
fn map_sensors(dev: &mut Device, config: &Value) {
    let label = dev.label();
    for x in dev.sensors.iter_mut().filter(|x| !x.built_in) {
        let found = addon_ids(config, x.quantity.rpc_component());
        x.sensor_id = found.iter().find(|(_, n)| *n == x.name).map(|(id, _)| *id);
        if x.sensor_id.is_none() {
            let names: Vec<String> = found
                .iter()
                .map(|(_, n)| crate::text::quote(n, 60))
                .collect();
            log::warn!(
                "device {label}: add-on {} sensor '{}' not found (the device names its {} sensors: {})",
                x.quantity,
                x.name,
                x.quantity,
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            );
        }
    }
}

/// Add-on peripheral ids and names of one RPC component type (`temperature`, `humidity`, `voltmeter`) from a
/// `Shelly.GetConfig` result: every `<type>:N` with N ≥ 100.
pub(crate) fn addon_ids(config: &Value, component: &str) -> Vec<(i64, String)> {
    let Some(map) = config.as_object() else {
        return Vec::new();
    };
    let prefix = format!("{component}:");
    let mut found: Vec<(i64, String)> = map
        .iter()
        .filter_map(|(k, v)| {
            let id: i64 = k.strip_prefix(&prefix)?.parse().ok()?;
            (id >= 100).then(|| (id, text(v, &["name"]).unwrap_or_default()))
        })
        .collect();
    found.sort();
    found
}

/// Add-on probe ids and names from a `Shelly.GetConfig` result: every `temperature:N` with N ≥ 100.
pub(crate) fn probe_ids(config: &Value) -> Vec<(i64, String)> {
    addon_ids(config, "temperature")
}
