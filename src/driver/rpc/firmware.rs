//! Firmware updates of Shelly Gen2+ devices: `Shelly.GetDeviceInfo` (`ver`) and `Sys.GetStatus` (`uptime`), `Shelly.CheckForUpdate` (`stable`
//! and `beta` keys only when a newer build exists) and `Shelly.Update {stage}` (sent once, over HTTP). Progress is not
//! visible over HTTP; the orchestration sees the restart and the new `ver`.

use serde_json::json;

use super::Rpc;
use crate::driver::FirmwareState;
use crate::driver::json::{num, text};
use crate::error::{Error, Result};
use crate::firmware::{FirmwareChannel, FirmwareInfo, UpdateFailure, short_version};
use crate::objects::Device;

impl Rpc {
    pub(super) fn check(&mut self, dev: &mut Device) -> Result<FirmwareInfo> {
        let current = self.version(dev)?;
        let offer = self.call(dev, "Shelly.CheckForUpdate", None)?;
        let version = |key: &str| text(&offer, &[key, "version"]).map(|v| short_version(&v));
        Ok(FirmwareInfo {
            device: dev.name.clone(),
            current,
            stable: version("stable"),
            beta: version("beta"),
            checked: true,
        })
    }

    pub(super) fn start(
        &mut self,
        dev: &mut Device,
        channel: FirmwareChannel,
    ) -> Result<Option<String>> {
        let params = json!({ "stage": channel.as_str() });
        // Over HTTP: the device closes its WebSocket connections when it restarts, and the one answer that
        // says whether it took the update must not go with them.
        match self.call_http(dev, "Shelly.Update", Some(params)) {
            Ok(_) => Ok(None),
            Err(Error::Rpc { code, message, .. }) => Err(Error::Firmware {
                device: dev.label(),
                failure: UpdateFailure::Refused,
                message: format!("the device refused the update: error {code}: {message}"),
            }),
            Err(e) => Err(e),
        }
    }

    pub(super) fn state(&mut self, dev: &mut Device) -> Result<FirmwareState> {
        let version = self.version(dev)?;
        let sys = self.call(dev, "Sys.GetStatus", None)?;
        Ok(FirmwareState {
            version,
            updating: false,
            uptime: num(&sys, &["uptime"]).map(|u| u as u64),
        })
    }

    /// `Shelly.GetDeviceInfo` → `ver` (else `fw_id`, shortened); stored in `dev.firmware`.
    fn version(&mut self, dev: &mut Device) -> Result<Option<String>> {
        let info = self.call(dev, "Shelly.GetDeviceInfo", None)?;
        let raw = text(&info, &["ver"]).or_else(|| text(&info, &["fw_id"]));
        if let Some(v) = &raw {
            dev.firmware = Some(v.clone());
        }
        Ok(raw.as_deref().map(short_version))
    }
}
