//! The controller's firmware operations: `check_firmware`, `update_firmware`, `update_firmware_with`. The steps
//! run on the device's worker; following the update through the restart is `actor/update.rs`.

use super::Controller;
use crate::actor::update::{self, Target};
use crate::error::Result;
use crate::firmware::{
    FirmwareChannel, FirmwareInfo, FirmwareUpdate, UpdateOptions, UpdateProgress,
};
use crate::objects::Identity;

impl Controller {
    /// Asks the device which firmware it runs and which newer versions it can install (device I/O; a Shelly
    /// looks them up on the internet). Unknown is `None`: a Tasmota device cannot tell what its `OtaUrl` serves
    /// (`checked` false). A simulated device gives [`Error::Unsupported`](crate::Error::Unsupported).
    pub fn check_firmware(&self, device: impl Into<Identity>) -> Result<FirmwareInfo> {
        let i = self.shared.directory.device(&device.into())?;
        let target = Target {
            tx: self.sender(i)?,
            slot: &self.shared.slots[i],
            ota: &self.shared.ota,
            index: i,
        };
        target.check()
    }

    /// Installs the latest firmware of `channel` and waits until the device runs it (with the defaults of
    /// [`UpdateOptions::new`]: at most [`UpdateOptions::DEFAULT_TIMEOUT`], never while another device
    /// updates). See [`update_firmware_with`](Self::update_firmware_with).
    pub fn update_firmware(
        &self,
        device: impl Into<Identity>,
        channel: FirmwareChannel,
    ) -> Result<FirmwareUpdate> {
        self.update_firmware_with(device, &UpdateOptions::new(channel), |_| {})
    }

    /// Installs the latest firmware of `options.channel` and follows the device through its restart until it
    /// answers with the new version; `progress` hears each step as it happens (on the caller's thread). The
    /// device going offline while it restarts is expected: it is logged without a warning. Fails with
    /// [`Error::Firmware`](crate::Error::Firmware), whose [`UpdateFailure`](crate::UpdateFailure) says why:
    /// nothing newer on offer, another update running (unless `allow_concurrent`), the device refused, it did
    /// not come back with a new version within `options.timeout`, or it came back with the old version.
    pub fn update_firmware_with(
        &self,
        device: impl Into<Identity>,
        options: &UpdateOptions,
        mut progress: impl FnMut(&UpdateProgress),
    ) -> Result<FirmwareUpdate> {
        let i = self.shared.directory.device(&device.into())?;
        let target = Target {
            tx: self.sender(i)?,
            slot: &self.shared.slots[i],
            ota: &self.shared.ota,
            index: i,
        };
        let label = self.snapshot(i).label();
        let _ticket = self.updates.enter(i, &label, options.allow_concurrent)?;
        update::run(&target, options, &mut progress)
    }
}
