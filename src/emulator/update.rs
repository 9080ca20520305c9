//! A firmware update's cycle on an emulated device, as real ones go through it: the request is accepted (or
//! refused), the image downloads while the device still answers, the device restarts (connections refused,
//! WebSocket connections dropped: `Fault::Refuse`), and it comes back running the new version (or, as
//! [`UpdateOutcome`] says, the old one, or not at all). Durations run on the emulator clock, so a test with a
//! manual clock decides when each phase ends; the cycle runs on a short-lived thread `sd-emu-fw-<port>`.

use std::time::{Duration, Instant};

use super::Fault;
use super::device::Device;
use super::faults::Phase;
use super::firmware::{Stage, Track, UpdateOutcome};

/// How often the cycle looks at the (possibly manual) clock.
const TICK: Duration = Duration::from_millis(10);

/// Starts an update to the version on `track`: the version it will install, or why the device refuses. `same`:
/// with nothing newer on offer, install the running version again (Tasmota's `Upgrade 1` downloads whatever its
/// `OtaUrl` serves).
pub(crate) fn begin(dev: &Device, track: Track, same: bool) -> Result<String, String> {
    let target = {
        let mut f = dev.firmware();
        if f.stage != Stage::Idle {
            return Err("an update is already running".into());
        }
        if f.outcome == UpdateOutcome::Refuse {
            return Err("update refused".into());
        }
        let target = match f.offer(track) {
            Some(v) => v.to_string(),
            None if same => f.version.clone(),
            None => return Err("no update available".into()),
        };
        f.stage = Stage::Downloading;
        target
    };
    let Some(me) = dev.arc() else {
        dev.firmware().stage = Stage::Idle;
        return Err("the emulator cannot restart this device".into());
    };
    let to = target.clone();
    let started = std::thread::Builder::new()
        .name(format!("sd-emu-fw-{}", dev.port()))
        .spawn(move || cycle(&me, to));
    if started.is_err() {
        dev.firmware().stage = Stage::Idle;
        return Err("the emulator could not start the update".into());
    }
    Ok(target)
}

/// Download, restart, come back (or not).
fn cycle(dev: &Device, target: String) {
    let (download, restart, outcome) = {
        let f = dev.firmware();
        (f.download, f.restart, f.outcome)
    };
    if !wait(dev, download) {
        return;
    }
    dev.firmware().stage = Stage::Restarting;
    dev.set_fault(Fault::Refuse);
    if outcome == UpdateOutcome::NeverBack || !wait(dev, restart) {
        return;
    }
    {
        let mut f = dev.firmware();
        if outcome != UpdateOutcome::OldVersion {
            f.version = target;
        }
        f.stage = Stage::Idle;
    }
    dev.state().restart();
    dev.set_fault(Fault::None);
}

/// Waits `d` on the device's clock; false when the emulator stops meanwhile.
fn wait(dev: &Device, d: Duration) -> bool {
    let end = dev.clock.instant() + d;
    while dev.clock.instant() < end {
        if dev.net.phase(Instant::now()) == Phase::Stop {
            return false;
        }
        dev.net.sleep(TICK);
    }
    dev.net.phase(Instant::now()) != Phase::Stop
}
