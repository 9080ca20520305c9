//! Firmware updates of Tasmota devices: the version from `Status 2` (`StatusFWR.Version`; while it updates
//! `Status 0`, which has the uptime too), `OtaUrl` (where
//! `Upgrade 1` downloads from) and `Upgrade 1` (sent once). Tasmota cannot say which version its `OtaUrl`
//! serves, so a check leaves the versions on offer unknown, and there is no beta channel.

use super::FirmwareState;
use super::json::{num, text};
use super::tasmota::Tasmota;
use crate::error::{Error, Result};
use crate::firmware::{FirmwareChannel, FirmwareInfo, UpdateFailure, short_version};
use crate::objects::Device;

impl Tasmota {
    pub(super) fn check(&mut self, dev: &mut Device) -> Result<FirmwareInfo> {
        let current = self.version(dev)?;
        Ok(FirmwareInfo {
            device: dev.name.clone(),
            current,
            stable: None,
            beta: None,
            checked: false,
        })
    }

    pub(super) fn start(
        &mut self,
        dev: &mut Device,
        channel: FirmwareChannel,
    ) -> Result<Option<String>> {
        if channel == FirmwareChannel::Beta {
            return Err(Error::Unsupported {
                device: dev.label(),
                message: "Tasmota has no beta channel: point its OtaUrl at the image you want and update from the stable channel".into(),
            });
        }
        if let Some(url) = text(&self.command(dev, "OtaUrl")?, &["OtaUrl"]) {
            log::info!(
                "device {}: updating from {}",
                dev.label(),
                crate::text::quote(&url, 200)
            );
        }
        let answer = self.send(dev, "Upgrade 1", false)?;
        match text(&answer, &["Upgrade"]) {
            Some(t) if t.starts_with("Version") => Ok(None),
            other => Err(Error::Firmware {
                device: dev.label(),
                failure: UpdateFailure::Refused,
                message: format!(
                    "the device refused the update: {}",
                    other.map_or("no Upgrade answer".to_string(), |t| crate::text::quote(
                        &t, 200
                    ))
                ),
            }),
        }
    }

    /// `Status 0`: the version and the uptime in one answer.
    pub(super) fn state(&mut self, dev: &mut Device) -> Result<FirmwareState> {
        let status = self.command(dev, "Status 0")?;
        Ok(FirmwareState {
            version: version_of(dev, &status),
            updating: false,
            uptime: num(&status, &["StatusSTS", "UptimeSec"]).map(|u| u as u64),
        })
    }

    /// `Status 2` → `StatusFWR.Version`, shortened (`13.4.0(tasmota)` → `13.4.0`); stored in `dev.firmware`.
    fn version(&mut self, dev: &mut Device) -> Result<Option<String>> {
        let status = self.command(dev, "Status 2")?;
        Ok(version_of(dev, &status))
    }
}

/// `StatusFWR.Version` of a status answer, shortened; stored in `dev.firmware`.
fn version_of(dev: &mut Device, status: &serde_json::Value) -> Option<String> {
    let raw = text(status, &["StatusFWR", "Version"]);
    if let Some(v) = &raw {
        dev.firmware = Some(v.clone());
    }
    raw.as_deref().map(short_version)
}
