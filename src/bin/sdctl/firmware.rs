//! `sdctl firmware DEVICE [check|update [--beta] [--timeout SECS]]`: the versions, or an update followed
//! through the device's restart with one line per step.

use std::time::Duration;

use smartdev::{Controller, Error, FirmwareChannel, Identity, UpdateOptions};

/// Checks (`update` false) or updates the device; prints text, or JSON with `json`.
pub fn run(
    ctl: &Controller,
    device: Identity,
    update: bool,
    beta: bool,
    timeout: Option<f64>,
    json: bool,
) -> Result<(), Error> {
    if !update {
        let info = ctl.check_firmware(device)?;
        if json {
            super::print_json(&info)?;
        } else {
            println!("{info}");
        }
        return Ok(());
    }
    let name = ctl.device(&device)?.name;
    let options = UpdateOptions {
        channel: if beta {
            FirmwareChannel::Beta
        } else {
            FirmwareChannel::Stable
        },
        timeout: timeout.map_or(UpdateOptions::DEFAULT_TIMEOUT, Duration::from_secs_f64),
        allow_concurrent: false,
    };
    let done = ctl.update_firmware_with(device, &options, |p| {
        if !json {
            println!("{name}: {p}");
        }
    })?;
    if json {
        super::print_json(&done)?;
    } else {
        let was = done.previous.as_deref().unwrap_or("an unknown version");
        println!("{name}: {} installed (was {was})", done.current);
    }
    Ok(())
}
