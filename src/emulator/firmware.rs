//! An emulated device's firmware: the version it runs, the versions on offer (stable, beta), how an update
//! goes (how long the download and the restart take, how it ends), and where an update is. A leaf: the update
//! cycle itself (download, refusing connections while it restarts, the new version) is `update.rs`.

use std::time::Duration;

use super::family::Family;

/// How an emulated device's firmware starts out and updates (see [`super::DeviceSpec::firmware`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirmwareSpec {
    /// The version it runs (`1.7.5`); default per family: Gen2+ `1.7.5`, Gen1 `1.14.0`, Tasmota `13.4.0`.
    pub version: Option<String>,
    /// A newer stable version on offer (Tasmota: what its `OtaUrl` serves); `None`: up to date.
    pub stable: Option<String>,
    /// A newer beta version on offer (Shelly only); `None`: none.
    pub beta: Option<String>,
    /// How long the download takes after the update request (the device answers meanwhile), on the emulator
    /// clock.
    pub download: Duration,
    /// How long the restart takes (connections are refused meanwhile), on the emulator clock.
    pub restart: Duration,
}

impl Default for FirmwareSpec {
    fn default() -> Self {
        FirmwareSpec {
            version: None,
            stable: None,
            beta: None,
            download: Duration::from_secs(1),
            restart: Duration::from_secs(2),
        }
    }
}

/// How the next firmware updates of an emulated device end (set with
/// [`Emulator::set_update_outcome`](super::Emulator::set_update_outcome) or the admin endpoint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Download, restart, run the new version.
    #[default]
    Succeed,
    /// Refuse the update request.
    Refuse,
    /// Download, then stay down (connections refused) until the fault is cleared or the emulator stops.
    NeverBack,
    /// Download, restart, and still run the old version (the new image did not boot).
    OldVersion,
    /// The download fails halfway: a Gen2+ device says so (`ota_error`) and runs on, never restarting.
    DownloadFails,
}

/// Where an update is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// No update running.
    Idle,
    /// Downloading: the device still answers.
    Downloading,
    /// Restarting: connections are refused.
    Restarting,
}

/// Which version an update asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Track {
    Stable,
    Beta,
}

/// A device's firmware now.
#[derive(Clone, Debug)]
pub(crate) struct Firmware {
    /// The version it runs.
    pub version: String,
    pub stable: Option<String>,
    pub beta: Option<String>,
    pub download: Duration,
    pub restart: Duration,
    pub outcome: UpdateOutcome,
    pub stage: Stage,
    /// The flash slot it booted from (`slot` in `/shelly`): each installed update boots from the other one.
    pub slot: u8,
}

impl Firmware {
    pub(crate) fn new(family: Family, spec: &FirmwareSpec) -> Self {
        let default = match family {
            Family::Rpc => "1.7.5",
            Family::Gen1 => "1.14.0",
            Family::Tasmota => "13.4.0",
        };
        Firmware {
            version: spec.version.clone().unwrap_or_else(|| default.into()),
            stable: spec.stable.clone(),
            beta: spec.beta.clone(),
            download: spec.download,
            restart: spec.restart,
            outcome: UpdateOutcome::default(),
            stage: Stage::Idle,
            slot: 0,
        }
    }

    /// The newer version on `track`, if one is on offer (not the one it runs).
    pub(crate) fn offer(&self, track: Track) -> Option<&str> {
        let v = match track {
            Track::Stable => self.stable.as_deref(),
            Track::Beta => self.beta.as_deref(),
        };
        v.filter(|v| *v != self.version)
    }

    /// Gen2+ build id (`fw_id`) of `version`.
    pub(crate) fn build_id(version: &str) -> String {
        format!("20260311-095847/{version}-g0e0e0e0")
    }

    /// Gen1 build id (`fw`, `new_version`) of `version`.
    pub(crate) fn gen1_build(version: &str) -> String {
        format!("20230913-112003/v{version}-g0e0e0e0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_another_version_is_on_offer() {
        let mut f = Firmware::new(Family::Rpc, &FirmwareSpec::default());
        assert_eq!(f.version, "1.7.5");
        assert_eq!(f.offer(Track::Stable), None);
        f.stable = Some("1.7.5".into());
        f.beta = Some("1.8.0-beta1".into());
        assert_eq!(f.offer(Track::Stable), None);
        assert_eq!(f.offer(Track::Beta), Some("1.8.0-beta1"));
        assert_eq!(
            Firmware::gen1_build("1.14.0"),
            "20230913-112003/v1.14.0-g0e0e0e0"
        );
    }
}
