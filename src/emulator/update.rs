//! A firmware update's cycle on an emulated device, as real ones go through it: the request is accepted (or
//! refused), the image downloads while the device still answers, the device restarts (connections refused,
//! WebSocket connections dropped: `Fault::Refuse`), and it comes back running the new version (or, as
//! [`UpdateOutcome`] says, the old one, or not at all, or the download fails). A Gen2+ device tells its push
//! clients how the download goes (`ota_*` events). Durations run on the emulator clock, so a test with a
//! manual clock decides when each phase ends; the cycle runs on a short-lived thread `sd-emu-fw-<port>`.

use std::time::{Duration, Instant};

use serde_json::{Map, json};

use super::Fault;
use super::device::Device;
use super::faults::Phase;
use super::firmware::{Stage, Track, UpdateOutcome};

/// How often the cycle looks at the (possibly manual) clock.
const TICK: Duration = Duration::from_millis(10);
/// The longest wait for the WebSocket writers before a restart (real time: a client that does not read does
/// not hold the restart back).
const FLUSH: Duration = Duration::from_millis(500);

/// Starts an update to the version on `track`: the version it will install, or why the device refuses. `same`:
/// with nothing newer on offer, install the running version again (Tasmota's `Upgrade 1` downloads whatever its
/// `OtaUrl` serves).
pub(crate) fn begin(dev: &Device, track: Track, same: bool) -> Result<String, String> {
    let target = {
        let mut f = dev.firmware();
        if f.stage != Stage::Idle {
            return Err("an update or a restart is already under way".into());
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
    // Deadlines start now, not when the thread runs: a test moving a manual clock right after the answer
    // must not move it before the phase began.
    let begun = dev.clock.instant();
    let downloaded = begun + dev.firmware().download;
    let started = std::thread::Builder::new()
        .name(format!("sd-emu-fw-{}", dev.port()))
        .spawn(move || cycle(&me, to, begun, downloaded));
    if started.is_err() {
        dev.firmware().stage = Stage::Idle;
        return Err("the emulator could not start the update".into());
    }
    Ok(target)
}

/// Download, restart, come back (or not).
fn cycle(dev: &Device, target: String, begun: Instant, downloaded: Instant) {
    let outcome = dev.firmware().outcome;
    if !download(
        dev,
        begun,
        downloaded,
        outcome == UpdateOutcome::DownloadFails,
    ) {
        return;
    }
    let never_back = outcome == UpdateOutcome::NeverBack;
    restart(dev, never_back, |f| {
        if outcome != UpdateOutcome::OldVersion {
            f.version = target;
            // The new image went to the other slot, which boots from now on.
            f.slot ^= 1;
        }
    });
}

/// `Shelly.Reboot`: after `delay` (emulator clock; the device answers meanwhile) the device restarts as an
/// update's restart does (connections refused and dropped, then back with its uptime from zero), on a thread
/// `sd-emu-fw-<port>`. Refused while an update or another reboot is under way.
pub(crate) fn reboot(dev: &Device, delay: Duration) -> Result<(), String> {
    {
        let mut f = dev.firmware();
        if f.stage != Stage::Idle {
            return Err("an update or a restart is already under way".into());
        }
        f.stage = Stage::Restarting;
    }
    let Some(me) = dev.arc() else {
        dev.firmware().stage = Stage::Idle;
        return Err("the emulator cannot restart this device".into());
    };
    let due = dev.clock.instant() + delay;
    let started = std::thread::Builder::new()
        .name(format!("sd-emu-fw-{}", dev.port()))
        .spawn(move || {
            if wait_until(&me, due) {
                restart(&me, false, |_| {});
            }
        });
    if started.is_err() {
        dev.firmware().stage = Stage::Idle;
        return Err("the emulator could not start the restart".into());
    }
    Ok(())
}

/// The restart itself: refuse (dropping connections) for the firmware's restart time, then `booted` changes the
/// firmware, the uptime starts over and the port serves again (unless it never comes back).
fn restart(dev: &Device, never_back: bool, booted: impl FnOnce(&mut super::firmware::Firmware)) {
    let back = {
        let mut f = dev.firmware();
        f.stage = Stage::Restarting;
        dev.clock.instant() + f.restart
    };
    // What it notified before going down (`ota_success`) reaches its clients.
    dev.ws.flush(FLUSH);
    dev.set_fault(Fault::Refuse);
    if never_back || !wait_until(dev, back) {
        return;
    }
    {
        let mut f = dev.firmware();
        booted(&mut f);
        f.stage = Stage::Idle;
    }
    dev.state().restart();
    dev.set_fault(Fault::None);
}

/// The download, from `begun` until `end` on the device's clock, told as a Gen2+ device tells it (`ota_begin`, `ota_progress`
/// at each tenth, `ota_success`; `ota_error` halfway when it `fails`, and the device runs on). False when it
/// failed or the emulator stopped meanwhile.
fn download(dev: &Device, begun: Instant, end: Instant, fails: bool) -> bool {
    let msg = |m: &str| {
        let mut f = Map::new();
        f.insert("msg".into(), json!(m));
        f
    };
    dev.sys_event("ota_begin", msg("Waiting for data"));
    let span = end.saturating_duration_since(begun).as_secs_f64();
    let mut told = 0u32;
    loop {
        let now = dev.clock.instant();
        let done = now >= end;
        let percent = if done || span <= 0.0 {
            100
        } else {
            ((now - begun).as_secs_f64() / span * 100.0) as u32
        };
        if fails && percent >= 50 {
            dev.sys_event("ota_error", msg("Download failed"));
            dev.firmware().stage = Stage::Idle;
            return false;
        }
        // The last tenth reached, once each (a manual clock may jump several).
        if percent / 10 > told / 10 {
            told = percent / 10 * 10;
            let mut f = msg("Waiting for data");
            f.insert("progress_percent".into(), json!(told));
            dev.sys_event("ota_progress", f);
        }
        if done {
            dev.sys_event("ota_success", msg("Update applied, rebooting"));
            return dev.net.phase(Instant::now()) != Phase::Stop;
        }
        if dev.net.phase(Instant::now()) == Phase::Stop {
            return false;
        }
        dev.net.sleep(TICK);
    }
}

/// Waits until `end` on the device's clock; false when the emulator stops meanwhile.
fn wait_until(dev: &Device, end: Instant) -> bool {
    while dev.clock.instant() < end {
        if dev.net.phase(Instant::now()) == Phase::Stop {
            return false;
        }
        dev.net.sleep(TICK);
    }
    dev.net.phase(Instant::now()) != Phase::Stop
}
