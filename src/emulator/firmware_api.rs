//! The [`Emulator`] controls for firmware: the versions on offer, how the next updates end, the version a
//! device runs. The admin endpoint's `firmware` action is the same for other processes.

use serde_json::{Value, json};

use super::device::Device;
use super::firmware::{Stage, UpdateOutcome};
use super::{Emulator, or_panic};

impl Emulator {
    /// Offers newer firmware to a device: `stable` and `beta` versions (`None`: none on offer). A Shelly
    /// reports them (`Shelly.CheckForUpdate`, `sys.available_updates`, Gen1 `update`); a Tasmota device
    /// installs `stable` on `Upgrade 1`.
    pub fn set_firmware_offer(&self, device: usize, stable: Option<&str>, beta: Option<&str>) {
        let dev = self.dev(device);
        let mut f = dev.firmware();
        f.stable = stable.map(str::to_string);
        f.beta = beta.map(str::to_string);
    }

    /// How the device's next firmware updates end (see [`UpdateOutcome`]).
    pub fn set_update_outcome(&self, device: usize, outcome: UpdateOutcome) {
        self.dev(device).firmware().outcome = outcome;
    }

    /// The firmware version the device runs now (`1.7.5`).
    pub fn firmware_version(&self, device: usize) -> String {
        self.dev(device).firmware().version.clone()
    }

    /// Whether the device is restarting after a firmware update now (refusing connections).
    pub fn is_restarting(&self, device: usize) -> bool {
        self.dev(device).firmware().stage == Stage::Restarting
    }

    /// Sets the version the device runs (as if it had been updated elsewhere).
    pub fn set_firmware_version(&self, device: usize, version: &str) {
        or_panic(nonempty(version));
        self.dev(device).firmware().version = version.to_string();
    }
}

fn nonempty(v: &str) -> Result<(), String> {
    if v.trim().is_empty() {
        Err("a firmware version cannot be empty".into())
    } else {
        Ok(())
    }
}

/// The admin endpoint's `firmware` action: `GET` reports, `POST` changes what its parameters name (`version`,
/// `stable`, `beta` (empty: none on offer), `outcome=succeed|refuse|never|old|fail`, `download_ms`, `restart_ms`).
pub(crate) fn admin(
    dev: &Device,
    post: bool,
    param: &dyn Fn(&str) -> Option<String>,
) -> Result<Value, String> {
    if post {
        let outcome = match param("outcome").as_deref() {
            None => None,
            Some("succeed") => Some(UpdateOutcome::Succeed),
            Some("refuse") => Some(UpdateOutcome::Refuse),
            Some("never") => Some(UpdateOutcome::NeverBack),
            Some("old") => Some(UpdateOutcome::OldVersion),
            Some("fail") => Some(UpdateOutcome::DownloadFails),
            Some(o) => {
                return Err(format!(
                    "outcome must be succeed, refuse, never, old or fail, not {o:?}"
                ));
            }
        };
        let ms = |k: &str| -> Result<Option<std::time::Duration>, String> {
            param(k)
                .map(|v| {
                    v.parse::<u64>()
                        .map(std::time::Duration::from_millis)
                        .map_err(|_| format!("{k} must be milliseconds, not {v:?}"))
                })
                .transpose()
        };
        let (download, restart) = (ms("download_ms")?, ms("restart_ms")?);
        if let Some(v) = param("version") {
            nonempty(&v)?;
        }
        let mut f = dev.firmware();
        if let Some(v) = param("version") {
            f.version = v;
        }
        let offer = |v: String| Some(v).filter(|v| !v.is_empty());
        if let Some(v) = param("stable") {
            f.stable = offer(v);
        }
        if let Some(v) = param("beta") {
            f.beta = offer(v);
        }
        if let Some(o) = outcome {
            f.outcome = o;
        }
        if let Some(d) = download {
            f.download = d;
        }
        if let Some(d) = restart {
            f.restart = d;
        }
    }
    let f = dev.firmware();
    let outcome = match f.outcome {
        UpdateOutcome::Succeed => "succeed",
        UpdateOutcome::Refuse => "refuse",
        UpdateOutcome::NeverBack => "never",
        UpdateOutcome::OldVersion => "old",
        UpdateOutcome::DownloadFails => "fail",
    };
    let stage = match f.stage {
        Stage::Idle => "idle",
        Stage::Downloading => "downloading",
        Stage::Restarting => "restarting",
    };
    Ok(json!({
        "version": f.version, "stable": f.stable, "beta": f.beta, "outcome": outcome, "stage": stage,
        "download_ms": f.download.as_millis() as u64, "restart_ms": f.restart.as_millis() as u64,
    }))
}
