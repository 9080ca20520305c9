//! Firmware updates as the public API sees them: the channels, what a check finds ([`FirmwareInfo`]), how an
//! update is asked for ([`UpdateOptions`]), how it goes ([`UpdateProgress`]), how it ends ([`FirmwareUpdate`],
//! or [`Error::Firmware`](crate::Error::Firmware) with an [`UpdateFailure`]). The family-specific requests are
//! in the drivers (`driver/*/firmware`); following a device through its restart is `actor/update.rs`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// Which firmware an update installs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum FirmwareChannel {
    /// The latest stable release.
    #[default]
    Stable,
    /// The latest beta (Shelly only).
    Beta,
}

impl FirmwareChannel {
    /// `stable` or `beta`.
    pub fn as_str(self) -> &'static str {
        match self {
            FirmwareChannel::Stable => "stable",
            FirmwareChannel::Beta => "beta",
        }
    }
}

impl fmt::Display for FirmwareChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a firmware check found: the version a device runs and the newer ones it can install. Unknown is
/// `None` (`null` in JSON), never guessed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct FirmwareInfo {
    /// The device's name.
    pub device: String,
    /// The version it runs (`1.4.4`; Gen1 build ids and Tasmota's `(tasmota)` suffix are shortened to it).
    pub current: Option<String>,
    /// A newer stable version on offer; `None` when there is none, or when the device cannot tell (see
    /// `Checked`).
    pub stable: Option<String>,
    /// A newer beta version on offer; `None` when there is none, or when the device cannot tell.
    pub beta: Option<String>,
    /// Whether the device can tell which versions are on offer (Shelly: yes; Tasmota: no, its `Upgrade 1`
    /// installs whatever its `OtaUrl` serves, so `Stable` and `Beta` stay unknown).
    pub checked: bool,
}

impl FirmwareInfo {
    /// The version on offer on `channel`, if any.
    pub fn available(&self, channel: FirmwareChannel) -> Option<&str> {
        match channel {
            FirmwareChannel::Stable => self.stable.as_deref(),
            FirmwareChannel::Beta => self.beta.as_deref(),
        }
    }
}

impl fmt::Display for FirmwareInfo {
    /// `Kitchen: 1.4.4 installed, 1.5.0 available (stable), 1.6.0-beta1 (beta)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.current.as_deref().unwrap_or("unknown version");
        write!(f, "{}: {current} installed", self.device)?;
        match (&self.stable, &self.beta) {
            _ if !self.checked => write!(
                f,
                ", newer versions unknown (the device cannot tell; an update installs what its OtaUrl serves)"
            ),
            (None, None) => write!(f, ", up to date"),
            (Some(s), None) => write!(f, ", {s} available (stable)"),
            (None, Some(b)) => write!(f, ", {b} available (beta)"),
            (Some(s), Some(b)) => write!(f, ", {s} available (stable), {b} (beta)"),
        }
    }
}

/// How to update: the channel, whether other updates may run at the same time, and how long to wait for the
/// device to come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateOptions {
    /// Which firmware to install.
    pub channel: FirmwareChannel,
    /// Let this update run while another device updates (by default a second update is refused: never more
    /// than one device at a time unless asked).
    pub allow_concurrent: bool,
    /// How long the download and the restart may take together before the update fails with
    /// [`UpdateFailure::NotBack`]; default [`UpdateOptions::DEFAULT_TIMEOUT`].
    pub timeout: Duration,
}

impl UpdateOptions {
    /// Ten minutes: slow downloads and restarts of real devices fit.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

    /// The defaults for `channel`: no other update at the same time, [`UpdateOptions::DEFAULT_TIMEOUT`].
    pub fn new(channel: FirmwareChannel) -> Self {
        UpdateOptions {
            channel,
            allow_concurrent: false,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

impl Default for UpdateOptions {
    fn default() -> Self {
        Self::new(FirmwareChannel::Stable)
    }
}

/// How an update goes, as it happens (given to the progress callback of
/// [`Controller::update_firmware_with`](crate::Controller::update_firmware_with)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpdateProgress {
    /// The device accepted the update request.
    Started {
        /// The version it ran.
        from: Option<String>,
        /// The version it said it would install, where it said.
        to: Option<String>,
    },
    /// The device still answers and says it is updating (Gen1 `update.status`), or has not restarted yet; again
    /// each time a Gen2+ device with a push channel tells a new percent of its download (`ota_progress`).
    Downloading {
        /// How much of the image is in, 0–100, where the device said.
        percent: Option<u8>,
    },
    /// The device stopped answering: it restarts (expected; not logged as a warning).
    Restarting,
    /// The device answers again, with this version.
    Back {
        /// The version it runs now.
        version: Option<String>,
    },
}

impl fmt::Display for UpdateProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown version".into());
        match self {
            UpdateProgress::Started { from, to: Some(to) } => {
                write!(f, "update from {} to {to} started", v(from))
            }
            UpdateProgress::Started { from, to: None } => {
                write!(f, "update from {} started", v(from))
            }
            UpdateProgress::Downloading { percent: None } => f.write_str("downloading"),
            UpdateProgress::Downloading { percent: Some(p) } => write!(f, "downloading, {p} %"),
            UpdateProgress::Restarting => f.write_str("restarting"),
            UpdateProgress::Back { version } => write!(f, "back, running {}", v(version)),
        }
    }
}

/// A finished update.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct FirmwareUpdate {
    /// The device's name.
    pub device: String,
    /// The channel installed from.
    pub channel: FirmwareChannel,
    /// The version it ran before.
    pub previous: Option<String>,
    /// The version it runs now.
    pub current: String,
}

/// Why an update did not end with the new version ([`Error::Firmware`](crate::Error::Firmware)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpdateFailure {
    /// The device has no newer version on that channel.
    NoUpdate,
    /// Another update runs (only one device at a time unless `allow_concurrent`), or this device updates
    /// already.
    Busy,
    /// The device refused the update request.
    Refused,
    /// The device did not answer with a new version within the timeout (it may still be restarting).
    NotBack,
    /// The device restarted and runs the old version.
    OldVersion,
    /// The device said the update failed before it restarted (Gen2+ `ota_error` over a push channel); it runs
    /// the old version.
    Failed,
}

/// `20230913-112003/v1.14.0-gcb84623` → `1.14.0`, `v1.14.1-rc1-g0617c15` → `1.14.1-rc1`, `13.4.0(tasmota)` →
/// `13.4.0`; a plain version stays as it is.
pub(crate) fn short_version(raw: &str) -> String {
    let v = raw.trim();
    let v = v.rsplit('/').next().unwrap_or(v);
    let v = v.split('(').next().unwrap_or(v);
    let v = v.strip_prefix('v').unwrap_or(v);
    let v = match v.rsplit_once("-g") {
        Some((head, hash))
            if !head.is_empty()
                && !hash.is_empty()
                && hash.chars().all(|c| c.is_ascii_hexdigit()) =>
        {
            head
        }
        _ => v,
    };
    if v.is_empty() {
        raw.trim().to_string()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_shortened_the_same_way_for_every_family() {
        assert_eq!(short_version("20230913-112003/v1.14.0-gcb84623"), "1.14.0");
        assert_eq!(
            short_version("20231107-162940/v1.14.1-rc1-g0617c15"),
            "1.14.1-rc1"
        );
        assert_eq!(short_version("20260311-095909/1.7.5-g9979d16"), "1.7.5");
        assert_eq!(short_version("13.4.0(tasmota)"), "13.4.0");
        assert_eq!(short_version("1.6.0-beta1"), "1.6.0-beta1");
        assert_eq!(short_version("20250226-140811/gcf2c72d"), "gcf2c72d");
    }

    #[test]
    fn a_check_reads_as_a_sentence() {
        let mut i = FirmwareInfo {
            device: "Kitchen".into(),
            current: Some("1.4.4".into()),
            stable: Some("1.5.0".into()),
            beta: Some("1.6.0-beta1".into()),
            checked: true,
        };
        assert_eq!(
            i.to_string(),
            "Kitchen: 1.4.4 installed, 1.5.0 available (stable), 1.6.0-beta1 (beta)"
        );
        i.stable = None;
        i.beta = None;
        assert_eq!(i.to_string(), "Kitchen: 1.4.4 installed, up to date");
        let json = serde_json::to_value(&i).unwrap();
        assert_eq!(json["Current"], "1.4.4");
        assert!(json["Stable"].is_null());
    }
}
