//! Gen2+ system methods real clients call besides the component ones: `Shelly.Reboot` (a real restart, see
//! `update.rs`), and `<Service>.GetConfig` / `<Service>.GetStatus` of the single-instance services a device's
//! config lists (`Sys`, `BLE`, `Cloud`, `MQTT`, `WiFi`, `KNX`, `Matter`, `BTHome`, ...), answered from the same
//! payloads as `Shelly.GetConfig` / `Shelly.GetStatus`.

use std::time::Duration;

use serde_json::{Map, Value};

use super::components::{config, status};
use super::device::Device;
use super::rpc_params::{RpcError, invalid, opt_number};

/// Services answered here; a model has those its config lists.
pub(crate) const SERVICES: &[&str] = &[
    "sys", "ble", "cloud", "mqtt", "wifi", "knx", "matter", "bthome",
];

/// `Shelly.ListMethods` entries of the services beyond the common ones, by the config key that has them.
pub(crate) const EXTRA_METHODS: &[(&str, &[&str])] = &[
    ("knx", &["KNX.GetConfig", "KNX.GetStatus"]),
    ("matter", &["Matter.GetConfig", "Matter.GetStatus"]),
    ("bthome", &["BTHome.GetConfig", "BTHome.GetStatus"]),
];

/// Shortest reboot delay the firmware takes (`delay_ms`), and its default.
const MIN_DELAY_MS: f64 = 500.0;
const DEFAULT_DELAY_MS: f64 = 1000.0;

/// `Shelly.Reboot {delay_ms}`: answers `null`, then restarts after the delay.
pub(crate) fn reboot(dev: &Device, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let ms = opt_number(p, "delay_ms")?.unwrap_or(DEFAULT_DELAY_MS);
    if !(0.0..=86_400_000.0).contains(&ms) {
        return Err(invalid("delay_ms"));
    }
    let delay = Duration::from_secs_f64(ms.max(MIN_DELAY_MS) / 1000.0);
    super::update::reboot(dev, delay).map_err(|why| RpcError {
        code: -109,
        message: format!("Failed precondition: {why}"),
    })?;
    Ok(Value::Null)
}

/// `<Service>.GetConfig` / `.GetStatus` of a service (lower-case namespace) the model has.
pub(crate) fn service(dev: &Device, namespace: &str, method: &str) -> Result<Value, RpcError> {
    let s = dev.state();
    let part = match method.split_once('.').map(|(_, m)| m) {
        Some("getconfig") => config(dev, &s).remove(namespace),
        Some("getstatus") => status(dev, &s).remove(namespace),
        _ => None,
    };
    part.ok_or_else(RpcError::unknown)
}
