//! Firmware updates of Shelly Gen1 devices: `GET /ota/check` (the device looks for updates), the `update`
//! object of `/status` (`old_version` runs, `new_version` with `has_update`, `beta_version`), `GET
//! /ota?update=true` or `?beta=true` (sent once), and `update.status` `updating` during the download.

use super::FirmwareState;
use super::gen1::Gen1;
use super::json::{flag, num, text};
use crate::error::{Error, Result};
use crate::firmware::{FirmwareChannel, FirmwareInfo, UpdateFailure, short_version};
use crate::objects::Device;

impl Gen1 {
    pub(super) fn check(&mut self, dev: &mut Device) -> Result<FirmwareInfo> {
        self.get(dev, "/ota/check")?;
        let status = self.get(dev, "/status")?;
        let current = match text(&status, &["update", "old_version"]) {
            Some(v) => Some(v),
            None => text(&self.get(dev, "/shelly")?, &["fw"]),
        };
        if let Some(v) = &current {
            dev.firmware = Some(v.clone());
        }
        let current = current.as_deref().map(short_version);
        let has_update = flag(&status, &["update", "has_update"]).unwrap_or(false);
        let offer = |key: &str| {
            text(&status, &["update", key])
                .map(|v| short_version(&v))
                .filter(|v| Some(v) != current.as_ref())
        };
        Ok(FirmwareInfo {
            device: dev.name.clone(),
            stable: offer("new_version").filter(|_| has_update),
            beta: offer("beta_version"),
            current,
            checked: true,
        })
    }

    pub(super) fn start(
        &mut self,
        dev: &mut Device,
        channel: FirmwareChannel,
    ) -> Result<Option<String>> {
        let path = match channel {
            FirmwareChannel::Stable => "/ota?update=true",
            FirmwareChannel::Beta => "/ota?beta=true",
        };
        let answer = self
            .get_with(dev, path, false)
            .map_err(|e| refused(dev, e))?;
        let key = match channel {
            FirmwareChannel::Stable => "new_version",
            FirmwareChannel::Beta => "beta_version",
        };
        Ok(text(&answer, &["update", key])
            .or_else(|| text(&answer, &[key]))
            .map(|v| short_version(&v)))
    }

    pub(super) fn state(&mut self, dev: &mut Device) -> Result<FirmwareState> {
        let status = self.get(dev, "/status")?;
        Ok(FirmwareState {
            version: text(&status, &["update", "old_version"]).map(|v| short_version(&v)),
            updating: text(&status, &["update", "status"]).as_deref() == Some("updating"),
            uptime: num(&status, &["uptime"]).map(|u| u as u64),
        })
    }
}

/// An answer that is a refusal (an HTTP error status) is [`UpdateFailure::Refused`]; no answer stays what it is.
fn refused(dev: &Device, e: Error) -> Error {
    match &e {
        Error::Device { message, .. }
            if message.contains(": HTTP 4") || message.contains(": HTTP 5") =>
        {
            Error::Firmware {
                device: dev.label(),
                failure: UpdateFailure::Refused,
                message: format!("the device refused the update: {}", e.reason()),
            }
        }
        _ => e,
    }
}
