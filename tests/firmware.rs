//! Firmware checks and updates against the emulator, for every family: the versions a check reports (unknown
//! is `None`), an update followed through the device's restart to its new version, and every way it can fail
//! (nothing on offer, another update running, refused, never back, back with the old version, a download the
//! device says failed), and a Gen2+ device's download percent over its push channel. The restart
//! is expected: it must not be logged as a warning. (Own test binary: it installs a capturing logger.)
//!
//! The emulator's download and restart run on a manual clock: the test ends each phase by moving the clock,
//! after the controller has reported seeing it (progress events), so nothing races the real clock.

mod common;

use std::sync::mpsc::{Receiver, channel};
use std::sync::{Mutex, Once};
use std::time::Duration;

use smartdev::emulator::{DeviceSpec, EmuClock, Emulator, FirmwareSpec, UpdateOutcome};
use smartdev::{
    Controller, Error, FirmwareChannel, ModelLibrary, UpdateFailure, UpdateOptions, UpdateProgress,
};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        !m.target().starts_with("ureq")
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            LINES
                .lock()
                .unwrap()
                .push(format!("{} {}", record.level(), record.args()));
        }
    }
    fn flush(&self) {}
}

fn capture() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// Warnings that name `device`.
fn warnings_about(device: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("WARN") && l.contains(device))
        .cloned()
        .collect()
}

/// A device running 1.4.4 (Tasmota 13.4.0) with `stable` and `beta` on offer; the download takes 1 s and the
/// restart 2 s of the emulator clock.
fn spec(model: &str, stable: Option<&str>, beta: Option<&str>) -> DeviceSpec {
    let mut s = DeviceSpec::new(model);
    s.firmware = FirmwareSpec {
        version: (model != "Tasmota").then(|| "1.4.4".to_string()),
        stable: stable.map(str::to_string),
        beta: beta.map(str::to_string),
        download: Duration::from_secs(1),
        restart: Duration::from_secs(2),
    };
    s
}

/// The emulator on a manual clock, moved 10 s after the devices started (so an uptime after a restart is
/// smaller than before), and a controller for it.
fn start(specs: Vec<DeviceSpec>, names: &[&str]) -> (Emulator, EmuClock, Controller) {
    capture();
    let blocks: Vec<String> = names
        .iter()
        .zip(&specs)
        .map(|(n, s)| format!("Name: {n}, Model: {}", s.model))
        .collect();
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(specs, &ModelLibrary::embedded(), clock.clone()).unwrap();
    clock.advance(Duration::from_secs(10));
    let refs: Vec<&str> = blocks.iter().map(String::as_str).collect();
    let ctl = common::emu::open(&emu, &refs, "").unwrap();
    (emu, clock, ctl)
}

fn options(channel: FirmwareChannel) -> UpdateOptions {
    UpdateOptions {
        channel,
        // Never reached when the device comes back: the test moves the clock.
        timeout: Duration::from_secs(120),
        ..UpdateOptions::default()
    }
}

/// Runs `update` on a thread, passing its progress to the returned receiver.
fn spawn_update<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    ctl: &'s Controller,
    device: &'s str,
    options: UpdateOptions,
) -> (
    std::thread::ScopedJoinHandle<'s, smartdev::Result<smartdev::FirmwareUpdate>>,
    Receiver<UpdateProgress>,
) {
    let (tx, rx) = channel();
    let handle = scope.spawn(move || {
        ctl.update_firmware_with(device, &options, |p| {
            let _ = tx.send(p.clone());
        })
    });
    (handle, rx)
}

/// Waits for a progress event matching `want`, returning the ones seen on the way.
fn wait_for(
    rx: &Receiver<UpdateProgress>,
    want: fn(&UpdateProgress) -> bool,
) -> Vec<UpdateProgress> {
    let mut seen = Vec::new();
    loop {
        let p = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no progress ({e}); seen {seen:?}"));
        let done = want(&p);
        seen.push(p);
        if done {
            return seen;
        }
    }
}

/// Drives one update through download and restart: the clock ends the download once the controller saw the
/// device answer during it, and ends the restart once the controller saw the device gone.
fn drive(
    clock: &EmuClock,
    ctl: &Controller,
    device: &str,
    options: UpdateOptions,
) -> (
    smartdev::Result<smartdev::FirmwareUpdate>,
    Vec<UpdateProgress>,
) {
    std::thread::scope(|s| {
        let (handle, rx) = spawn_update(s, ctl, device, options);
        let mut seen = wait_for(&rx, |p| matches!(p, UpdateProgress::Downloading { .. }));
        clock.advance(Duration::from_secs(1));
        seen.extend(wait_for(&rx, |p| matches!(p, UpdateProgress::Restarting)));
        clock.advance(Duration::from_secs(2));
        let result = handle.join().unwrap();
        seen.extend(rx.try_iter());
        (result, seen)
    })
}

fn failure(r: &smartdev::Result<impl std::fmt::Debug>) -> (UpdateFailure, String) {
    match r {
        Err(e @ Error::Firmware { failure, .. }) => (*failure, e.to_string()),
        other => panic!("expected a firmware error, got {other:?}"),
    }
}

#[test]
fn a_check_reports_the_versions_each_family_tells_and_unknown_as_none() {
    let (_emu, _clock, ctl) = start(
        vec![
            spec("ShellyPlus1PM", Some("1.5.0"), Some("1.6.0-beta1")),
            spec("Shelly1", Some("1.5.0"), Some("1.6.0-beta1")),
            spec("Tasmota", Some("14.0.0"), None),
            spec("ShellyPlus1PM", None, None),
        ],
        &["CheckRpc", "CheckGen1", "CheckTasmota", "CheckCurrent"],
    );
    for name in ["CheckRpc", "CheckGen1"] {
        let info = ctl.check_firmware(name).unwrap();
        assert_eq!(info.current.as_deref(), Some("1.4.4"), "{name}");
        assert_eq!(info.stable.as_deref(), Some("1.5.0"), "{name}");
        assert_eq!(info.beta.as_deref(), Some("1.6.0-beta1"), "{name}");
        assert!(info.checked);
        assert_eq!(
            info.to_string(),
            format!("{name}: 1.4.4 installed, 1.5.0 available (stable), 1.6.0-beta1 (beta)")
        );
    }
    // Tasmota cannot tell what its OtaUrl serves: unknown, never invented.
    let t = ctl.check_firmware("CheckTasmota").unwrap();
    assert_eq!(t.current.as_deref(), Some("13.4.0"));
    assert_eq!((t.stable, t.beta, t.checked), (None, None, false));
    let up = ctl.check_firmware("CheckCurrent").unwrap();
    assert_eq!((&up.stable, &up.beta), (&None, &None));
    assert_eq!(up.to_string(), "CheckCurrent: 1.4.4 installed, up to date");
    let json = serde_json::to_value(ctl.check_firmware("CheckRpc").unwrap()).unwrap();
    assert_eq!(json["Device"], "CheckRpc");
    assert_eq!(json["Current"], "1.4.4");
    assert_eq!(json["Stable"], "1.5.0");
    assert_eq!(json["Beta"], "1.6.0-beta1");
}

#[test]
fn an_update_follows_the_restart_and_ends_with_the_new_version_in_every_family() {
    let (emu, clock, ctl) = start(
        vec![
            spec("ShellyPlus1PM", Some("1.5.0"), Some("1.6.0-beta1")),
            spec("Shelly1", Some("1.5.0"), Some("1.6.0-beta1")),
            spec("Tasmota", Some("14.0.0"), None),
        ],
        &["FwRpc", "FwGen1", "FwTasmota"],
    );
    let cases = [
        (0, "FwRpc", FirmwareChannel::Beta, "1.6.0-beta1"),
        (1, "FwGen1", FirmwareChannel::Stable, "1.5.0"),
        (2, "FwTasmota", FirmwareChannel::Stable, "14.0.0"),
    ];
    for (i, name, channel, new) in cases {
        let (result, seen) = drive(&clock, &ctl, name, options(channel));
        let done = result.unwrap_or_else(|e| panic!("{name}: {e}; progress {seen:?}"));
        assert_eq!(done.current, new, "{name}");
        assert_eq!(done.channel, channel);
        assert!(done.previous.is_some());
        assert!(
            matches!(seen.first(), Some(UpdateProgress::Started { .. })),
            "{seen:?}"
        );
        assert!(
            seen.contains(&UpdateProgress::Back {
                version: Some(new.to_string())
            }),
            "{seen:?}"
        );
        assert_eq!(emu.firmware_version(i), new);
        // The read after the update shows the new firmware everywhere.
        let d = ctl.device(name).unwrap();
        assert!(d.online, "{name}: {:?}", d.last_error);
        assert!(
            d.firmware.as_deref().unwrap_or("").contains(new),
            "{:?}",
            d.firmware
        );
        assert_eq!(
            ctl.check_firmware(name).unwrap().current.as_deref(),
            Some(new)
        );
        // It was offline while it restarted (the controller saw it), and that is no warning.
        assert_eq!(warnings_about(name), Vec::<String>::new());
    }
}

#[test]
fn a_second_update_is_refused_while_one_runs_unless_concurrent_updates_are_allowed() {
    let (emu, clock, ctl) = start(
        vec![
            spec("ShellyPlus1PM", Some("1.5.0"), None),
            spec("ShellyPlus1PM", Some("1.5.0"), None),
        ],
        &["First", "Second"],
    );
    emu.set_update_outcome(1, UpdateOutcome::Refuse);
    std::thread::scope(|s| {
        let (handle, rx) = spawn_update(s, &ctl, "First", options(FirmwareChannel::Stable));
        wait_for(&rx, |p| matches!(p, UpdateProgress::Downloading { .. }));
        let r = ctl.update_firmware("Second", FirmwareChannel::Stable);
        let (why, text) = failure(&r);
        assert_eq!(why, UpdateFailure::Busy);
        assert!(
            text.contains("First") && text.contains("allow_concurrent"),
            "{text}"
        );
        // The same device twice is refused even when concurrent updates are allowed.
        let again = UpdateOptions {
            allow_concurrent: true,
            ..options(FirmwareChannel::Stable)
        };
        assert_eq!(
            failure(&ctl.update_firmware_with("First", &again, |_| {})).0,
            UpdateFailure::Busy
        );
        // Allowed: it goes to the device, which refuses it.
        let (why, text) = failure(&ctl.update_firmware_with("Second", &again, |_| {}));
        assert_eq!(why, UpdateFailure::Refused, "{text}");
        assert!(text.contains("refused"), "{text}");
        clock.advance(Duration::from_secs(1));
        wait_for(&rx, |p| matches!(p, UpdateProgress::Restarting));
        clock.advance(Duration::from_secs(2));
        assert_eq!(handle.join().unwrap().unwrap().current, "1.5.0");
    });
    assert_eq!(emu.firmware_version(1), "1.4.4");
    // Once it is over, the next one may run.
    emu.set_update_outcome(1, UpdateOutcome::Succeed);
    let (r, _) = drive(&clock, &ctl, "Second", options(FirmwareChannel::Stable));
    assert_eq!(r.unwrap().current, "1.5.0");
}

#[test]
fn nothing_on_offer_and_a_refusal_are_clear_errors_in_every_family() {
    let (emu, _clock, ctl) = start(
        vec![
            spec("ShellyPlus1PM", None, None),
            spec("Shelly1", None, None),
            spec("ShellyPlus1PM", Some("1.5.0"), None),
            spec("Shelly1", Some("1.5.0"), None),
            spec("Tasmota", Some("14.0.0"), None),
        ],
        &[
            "NoneRpc",
            "NoneGen1",
            "RefuseRpc",
            "RefuseGen1",
            "RefuseTasmota",
        ],
    );
    for name in ["NoneRpc", "NoneGen1"] {
        let (why, text) = failure(&ctl.update_firmware(name, FirmwareChannel::Stable));
        assert_eq!(why, UpdateFailure::NoUpdate, "{text}");
        assert!(
            text.contains("no newer stable version") && text.contains("1.4.4"),
            "{text}"
        );
    }
    assert_eq!(
        emu.counts(0).get("rpc Shelly.Update"),
        None,
        "nothing was asked"
    );
    for i in 2..5 {
        emu.set_update_outcome(i, UpdateOutcome::Refuse);
    }
    for name in ["RefuseRpc", "RefuseGen1", "RefuseTasmota"] {
        let (why, text) = failure(&ctl.update_firmware(name, FirmwareChannel::Stable));
        assert_eq!(why, UpdateFailure::Refused, "{text}");
        assert!(text.contains("refused the update"), "{text}");
    }
    // Tasmota has no beta channel.
    let e = ctl
        .update_firmware("RefuseTasmota", FirmwareChannel::Beta)
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
}

#[test]
fn a_device_that_never_comes_back_fails_after_the_configured_time() {
    capture();
    let mut s = spec("ShellyPlus1PM", Some("1.5.0"), None);
    s.firmware.download = Duration::ZERO;
    // The real clock: nothing to move; the timeout ends it.
    let emu = Emulator::start(vec![s], &ModelLibrary::embedded()).unwrap();
    emu.set_update_outcome(0, UpdateOutcome::NeverBack);
    let ctl = common::emu::open(&emu, &["Name: Gone, Model: ShellyPlus1PM"], "").unwrap();
    let mut seen = Vec::new();
    let r = ctl.update_firmware_with(
        "Gone",
        &UpdateOptions {
            timeout: Duration::from_millis(1500),
            ..UpdateOptions::default()
        },
        |p| seen.push(p.clone()),
    );
    let (why, text) = failure(&r);
    assert_eq!(why, UpdateFailure::NotBack, "{text}");
    assert!(
        text.contains("did not come back with a new version within"),
        "{text}"
    );
    assert!(!ctl.device("Gone").unwrap().online);
    assert_eq!(warnings_about("Gone"), Vec::<String>::new());
    // The guard is released: another update may start (and is refused by the device still down, not by us).
    let again = ctl
        .update_firmware("Gone", FirmwareChannel::Stable)
        .unwrap_err();
    assert!(
        !matches!(
            again,
            Error::Firmware {
                failure: UpdateFailure::Busy,
                ..
            }
        ),
        "{again}"
    );
}

/// A Gen2+ device tells how its download goes over its push channel: each new tenth reaches the progress
/// callback as it is told, and a download that fails (`ota_error`) ends the update at once with the device's
/// reason, instead of a wait for the timeout. (A Gen1 device tells nothing: its failed download is a device
/// that was not seen restarting.)
#[test]
fn a_gen2_device_tells_its_download_percent_and_its_failure_over_the_push_channel() {
    let (emu, clock, ctl) = start(
        vec![
            spec("ShellyPlus1PM", Some("1.5.0"), None),
            spec("ShellyPlus1PM", Some("1.5.0"), None),
        ],
        &["Told", "Failing"],
    );
    std::thread::scope(|s| {
        let (handle, rx) = spawn_update(s, &ctl, "Told", options(FirmwareChannel::Stable));
        wait_for(&rx, |p| matches!(p, UpdateProgress::Started { .. }));
        // Each step of the (manual) clock makes the device tell the tenth it reached; nothing races: the test
        // waits for the percent before the next step.
        for tenth in [3u8, 6, 9] {
            clock.advance(Duration::from_millis(300));
            let seen = wait_for(&rx, |p| {
                matches!(p, UpdateProgress::Downloading { percent: Some(_) })
            });
            assert_eq!(
                seen.last(),
                Some(&UpdateProgress::Downloading {
                    percent: Some(tenth * 10)
                }),
                "{seen:?}"
            );
            // Before it, at most the look's own Downloading without a percent.
            assert!(
                seen[..seen.len() - 1]
                    .iter()
                    .all(|p| *p == UpdateProgress::Downloading { percent: None }),
                "{seen:?}"
            );
        }
        clock.advance(Duration::from_millis(100));
        wait_for(&rx, |p| matches!(p, UpdateProgress::Restarting));
        clock.advance(Duration::from_secs(2));
        let done = handle.join().unwrap().unwrap();
        assert_eq!(done.current, "1.5.0");
    });
    assert_eq!(
        UpdateProgress::Downloading { percent: Some(40) }.to_string(),
        "downloading, 40 %"
    );

    emu.set_update_outcome(1, UpdateOutcome::DownloadFails);
    std::thread::scope(|s| {
        let (handle, rx) = spawn_update(s, &ctl, "Failing", options(FirmwareChannel::Stable));
        wait_for(&rx, |p| matches!(p, UpdateProgress::Started { .. }));
        // Halfway the device gives up; the update ends without the test moving the clock again.
        clock.advance(Duration::from_millis(600));
        let (why, text) = failure(&handle.join().unwrap());
        assert_eq!(why, UpdateFailure::Failed, "{text}");
        assert!(
            text.contains("the device reported that the update failed (Download failed)")
                && text.contains("it still runs 1.4.4"),
            "{text}"
        );
        let seen: Vec<_> = rx.try_iter().collect();
        assert!(!seen.contains(&UpdateProgress::Restarting), "{seen:?}");
    });
    assert_eq!(emu.firmware_version(1), "1.4.4");
    assert!(ctl.device("Failing").unwrap().online);
    assert_eq!(warnings_about("Failing"), Vec::<String>::new());
    // Not busy any more: the guard was released with the failure.
    emu.set_update_outcome(1, UpdateOutcome::Succeed);
    let (r, _) = drive(&clock, &ctl, "Failing", options(FirmwareChannel::Stable));
    assert_eq!(r.unwrap().current, "1.5.0");
}

#[test]
fn a_device_back_with_the_old_version_is_an_error_saying_so() {
    let (emu, clock, ctl) = start(
        vec![
            spec("ShellyPlus1PM", Some("1.5.0"), None),
            spec("Shelly1", Some("1.5.0"), None),
            spec("Tasmota", Some("14.0.0"), None),
        ],
        &["OldRpc", "OldGen1", "OldTasmota"],
    );
    for (i, name, old) in [
        (0, "OldRpc", "1.4.4"),
        (1, "OldGen1", "1.4.4"),
        (2, "OldTasmota", "13.4.0"),
    ] {
        emu.set_update_outcome(i, UpdateOutcome::OldVersion);
        let (r, seen) = drive(&clock, &ctl, name, options(FirmwareChannel::Stable));
        let (why, text) = failure(&r);
        assert_eq!(why, UpdateFailure::OldVersion, "{text}; {seen:?}");
        assert!(text.contains(&format!("still runs {old}")), "{text}");
        assert_eq!(emu.firmware_version(i), old);
        assert!(ctl.device(name).unwrap().online);
        assert_eq!(warnings_about(name), Vec::<String>::new());
    }
}

#[test]
fn sdctl_prints_the_versions_and_one_line_per_step_of_an_update() {
    capture();
    let mut kitchen = spec("ShellyPlus1PM", Some("1.5.0"), Some("1.6.0-beta1"));
    kitchen.firmware.download = Duration::from_millis(100);
    kitchen.firmware.restart = Duration::from_millis(300);
    let hall = spec("Shelly1", None, None);
    let emu = Emulator::start(vec![kitchen, hall], &ModelLibrary::embedded()).unwrap();
    let dir = common::TempDir::new("firmware-cli");
    let config = dir.write(
        "f.yaml",
        &format!(
            "SmartDevices:\n  ResponseTimeout: 0.4\n  PingAllowed: false\n  Devices:\n    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n    - {{Name: Hall, Model: Shelly1, Hostname: 127.0.0.1, Port: {}}}\n",
            emu.port(0),
            emu.port(1)
        ),
    );
    let sdctl = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, err) = sdctl(&["firmware", "Kitchen"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "Kitchen: 1.4.4 installed, 1.5.0 available (stable), 1.6.0-beta1 (beta)"
    );
    let (code, out, _) = sdctl(&["--json", "firmware", "Hall", "check"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["Current"].as_str(), v["Stable"].is_null()),
        (Some("1.4.4"), true)
    );

    let (code, out, err) = sdctl(&["firmware", "Kitchen", "update", "--beta", "--timeout", "60"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"Kitchen: update from 1.4.4 to 1.6.0-beta1 started"),
        "{out}"
    );
    assert!(
        lines.contains(&"Kitchen: back, running 1.6.0-beta1"),
        "{out}"
    );
    assert_eq!(
        lines.last(),
        Some(&"Kitchen: 1.6.0-beta1 installed (was 1.4.4)"),
        "{out}"
    );
    assert_eq!(emu.firmware_version(0), "1.6.0-beta1");

    // A failed update is a failed operation (1); a wrong command line a usage error (2).
    let (code, _, err) = sdctl(&["firmware", "Hall", "update"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no newer stable version"), "{err}");
    assert_eq!(sdctl(&["firmware", "Hall", "flash"]).0, Some(2));
    assert_eq!(sdctl(&["firmware", "Hall", "--beta"]).0, Some(2));
}

#[test]
fn a_panicking_progress_callback_ends_the_update_for_the_guard_and_the_warnings() {
    let (emu, _clock, ctl) = start(
        vec![spec("ShellyPlus1PM", Some("1.5.0"), None)],
        &["Panicky"],
    );
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ctl.update_firmware_with("Panicky", &options(FirmwareChannel::Stable), |_| {
            panic!("the application's callback")
        })
    }));
    assert!(r.is_err());
    // The guard is released: the next update goes to the device (which is still downloading: refused).
    let (why, text) = failure(&ctl.update_firmware("Panicky", FirmwareChannel::Stable));
    assert_eq!(why, UpdateFailure::Refused, "{text}");
    // And the worker no longer takes the device going offline for the restart: it warns again.
    emu.set_fault(0, smartdev::emulator::Fault::Refuse);
    assert!(ctl.read_device("Panicky").is_err());
    assert!(
        warnings_about("Panicky")
            .iter()
            .any(|w| w.contains("went offline")),
        "{:?}",
        warnings_about("Panicky")
    );
}
