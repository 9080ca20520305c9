//! Fairness of the push channel, written as the hostile device: one Gen2 device floods, stalls or flaps its
//! WebSocket beside healthy ones, and the healthy ones must not notice. Every pushed change of theirs reaches
//! the snapshot and the event queue, every command of theirs succeeds over the socket (no HTTP fallback, no
//! "not sent again"), they stay online, and notifications cause no `Shelly.GetStatus` request. How fast they
//! are served during a flood is measured by `examples/bench_push.rs --flood` (BENCHMARKS.md), not here: the
//! waits below are hang guards only.

mod common;

use std::time::{Duration, Instant};

use common::emu::{self, Emulated};
use common::eventually;
use smartdev::emulator::DeviceSpec;
use smartdev::{CoverAction, Identity, WakeFlag};

const LIMIT: Duration = Duration::from_secs(30);
/// Healthy switches beside the hostile device 0; the last device is a healthy cover.
const SWITCHES: usize = 4;
const COVER: usize = SWITCHES + 1;
/// A response timeout no loaded test machine misses, far below the seconds a starved socket took.
const EXTRA: &str = "  Channel: auto\n  ResponseTimeout: 2\n";

/// The tests load the machine: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn start() -> (Emulated, WakeFlag) {
    let mut specs = vec![DeviceSpec::new("ShellyPlus1PM")];
    specs.extend((0..SWITCHES).map(|_| DeviceSpec::new("ShellyPlus1PM")));
    let mut cover = DeviceSpec::new("Shelly2PMG4");
    cover.profile = Some("cover".into());
    specs.push(cover);
    let mut blocks =
        vec!["Name: Hostile, Model: ShellyPlus1PM, Outputs: [{Name: Hostile Light}]".to_string()];
    for i in 1..=SWITCHES {
        blocks.push(format!(
            "Name: H{i}, Model: ShellyPlus1PM, Inputs: [{{Name: H{i} In, Webhooks: true}}], Outputs: [{{Name: H{i} Light}}]"
        ));
    }
    blocks
        .push("Name: Blinds, Model: Shelly2PMG4, Profile: cover, Covers: [{Name: Terrace}]".into());
    let blocks: Vec<&str> = blocks.iter().map(String::as_str).collect();
    let emu = smartdev::emulator::Emulator::start(specs, &smartdev::ModelLibrary::embedded())
        .expect("emulator starts");
    let wake = WakeFlag::new();
    let ctl = smartdev::Controller::open(emu::settings(&emu, &blocks, EXTRA), Some(wake.clone()))
        .expect("controller opens");
    let e = Emulated { emu, ctl };
    assert!(
        eventually(LIMIT, || (0..=COVER).all(|d| e.emu.ws_subscribed(d) == 1)),
        "every push channel subscribes"
    );
    (e, wake)
}

/// `Shelly.GetStatus` requests the device got (HTTP or frame).
fn status_reads(e: &Emulated, d: usize) -> u64 {
    let c = e.emu.counts(d);
    c.get("rpc Shelly.GetStatus").copied().unwrap_or(0)
        + c.get("POST /rpc/Shelly.GetStatus").copied().unwrap_or(0)
        + c.get("GET /rpc/Shelly.GetStatus").copied().unwrap_or(0)
}

/// Requests the device got over HTTP (not over its WebSocket).
fn http_requests(e: &Emulated, d: usize) -> u64 {
    e.emu.total_requests(d) - e.emu.ws_requests(d)
}

/// What the healthy devices do while device 0 misbehaves: pushed output and input flips (each seen in the
/// snapshot, each input flip one event), switches and cover moves (each succeeds over the socket). Asserts that
/// none of it needed HTTP or a status read, and that every healthy device stayed online.
fn healthy_devices_are_served(e: &Emulated, rounds: usize) {
    let ctl = &e.ctl;
    while ctl.pull_webhook_event().is_some() {}
    let reads: Vec<u64> = (1..=COVER).map(|d| status_reads(e, d)).collect();
    let http: Vec<u64> = (1..=COVER).map(|d| http_requests(e, d)).collect();
    let mut flips = 0;
    for r in 0..rounds {
        let d = 1 + r % SWITCHES;
        let on = (r / SWITCHES).is_multiple_of(2);
        let light = Identity::name(format!("H{d} Light"));
        e.emu.set_output(d, 0, on);
        assert!(
            eventually(LIMIT, || ctl.output(light.clone()).unwrap().state
                == Some(on)),
            "round {r}: H{d}'s pushed output never reached the snapshot"
        );
        e.emu.set_input(d, 0, on);
        flips += 1;
        let input = Identity::name(format!("H{d} In"));
        assert!(
            eventually(LIMIT, || ctl.input(input.clone()).unwrap().state
                == Some(on)),
            "round {r}: H{d}'s pushed input never reached the snapshot"
        );
        // A command of a healthy device, answered on its own socket.
        ctl.change_output(light.clone(), !on)
            .unwrap_or_else(|err| panic!("round {r}: switching H{d} failed: {err}"));
        assert_eq!(e.emu.output(d, 0), !on, "round {r}");
    }
    for action in [CoverAction::Open, CoverAction::Stop, CoverAction::Close] {
        ctl.move_cover("Terrace", action)
            .unwrap_or_else(|err| panic!("{action:?} of the healthy cover failed: {err}"));
    }
    // Every input flip is one event; none of the healthy devices' is lost.
    let mut events = 0;
    assert!(
        eventually(LIMIT, || {
            events += std::iter::from_fn(|| ctl.pull_webhook_event())
                .filter(|ev| ev.event.starts_with("input.toggle_"))
                .count();
            events >= flips
        }),
        "{events} of {flips} input events"
    );
    for d in 1..=COVER {
        let dev = &ctl.devices()[d];
        assert!(
            dev.online,
            "{} went offline: {:?}",
            dev.name, dev.last_error
        );
        assert_eq!(
            http_requests(e, d),
            http[d - 1],
            "{}: a request fell back to HTTP",
            dev.name
        );
        assert_eq!(
            status_reads(e, d),
            reads[d - 1],
            "{}: notifications caused status reads",
            dev.name
        );
    }
}

/// Waits until the device has written `frames` flood frames (it writes as fast as we read).
fn flooding(e: &Emulated, frames: u64) {
    assert!(
        eventually(LIMIT, || e.emu.ws_flooded(0) >= frames),
        "the flood begins"
    );
}

/// Finding 1 (small frames): a device sending `NotifyStatus` as fast as it can froze push for everybody, so
/// healthy commands timed out on the socket and fell back to HTTP (or failed as "not sent again").
#[test]
fn a_flood_of_small_notifications_does_not_starve_the_others() {
    let _serial = serial();
    let (e, _wake) = start();
    e.emu.flood_ws(0, Some(100));
    flooding(&e, 5000);
    healthy_devices_are_served(&e, 3 * SWITCHES);
    e.emu.flood_ws(0, None);
    e.ctl.close();
}

/// Finding 1 (big frames): about 1 MiB per notification; each costs a parse, counted against the device's turn.
#[test]
fn a_flood_of_one_mib_notifications_does_not_starve_the_others() {
    let _serial = serial();
    let (e, _wake) = start();
    e.emu.flood_ws(0, Some(1 << 20));
    flooding(&e, 20);
    // Each frame grows the mirror past its limit (it is dropped), so the reads these notifications ask for
    // are requests to the device: held to the device's read limit (a burst of 5, then 1 per second).
    let (reads, t, sent) = (status_reads(&e, 0), Instant::now(), e.emu.ws_flooded(0));
    healthy_devices_are_served(&e, 2 * SWITCHES);
    // More frames, each asking for a read (read at the device's byte rate: a few a second).
    flooding(&e, sent + 20);
    let asked = status_reads(&e, 0) - reads;
    let allowed = 5 + 2 + t.elapsed().as_secs();
    assert!(
        asked <= allowed,
        "{asked} status reads of the flooding device in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    e.emu.flood_ws(0, None);
    e.ctl.close();
}

/// Finding 3: a read a notification asks for is served from the mirror, even when the worker already took
/// the mirror that a later notification changed (the race made it a real `Shelly.GetStatus`).
#[test]
fn a_flood_of_notifications_causes_no_status_read_of_the_flooding_device() {
    let _serial = serial();
    let (e, _wake) = start();
    let before = status_reads(&e, 0);
    e.emu.flood_ws(0, Some(100));
    flooding(&e, 5000);
    // Long enough for many worker reads to run beside the poller's merges.
    let power = || e.ctl.device("Hostile").unwrap().meters[0].power;
    let mut seen = 0;
    let mut last = power();
    assert!(eventually(LIMIT, || {
        let p = power();
        if p != last {
            seen += 1;
            last = p;
        }
        seen >= 100
    }));
    e.emu.flood_ws(0, None);
    assert_eq!(
        status_reads(&e, 0),
        before,
        "reads the notifications asked for"
    );
    assert!(e.ctl.device("Hostile").unwrap().online);
    e.ctl.close();
}

/// A device whose connection stalls (reads and writes nothing, stays open) costs only its own requests.
#[test]
fn a_stalled_device_does_not_hold_the_others() {
    let _serial = serial();
    let (e, _wake) = start();
    e.emu.stall_ws(0, true);
    healthy_devices_are_served(&e, SWITCHES);
    e.emu.stall_ws(0, false);
    e.ctl.close();
}

/// Finding 2: a device that accepts the subscription and then closes was reconnected about once a second
/// forever (the back-off reset whenever a connection was up, however briefly). Connections that die young
/// keep the back-off doubling: 1 s, 2 s, 4 s, 8 s … so within 10 s there are at most 4 or 5 attempts, not 10.
/// Fewer attempts on a slow machine only lower the count: the bound cannot flake that way.
#[test]
fn a_device_that_drops_every_connection_is_retried_ever_more_slowly() {
    let _serial = serial();
    let (e, _wake) = start();
    e.emu.ws_hang_up(0, true);
    let first = e.emu.ws_upgrades(0);
    e.emu.drop_ws(0);
    let t = Instant::now();
    // The window runs while the healthy devices are used (a hang guard is not needed: it is a count).
    healthy_devices_are_served(&e, SWITCHES);
    let rest = Duration::from_secs(10).saturating_sub(t.elapsed());
    std::thread::sleep(rest);
    let attempts = e.emu.ws_upgrades(0) - first;
    assert!(attempts >= 2, "it is retried: {attempts}");
    assert!(
        attempts <= 5,
        "{attempts} connections in {:.1} s: the back-off was reset by connections that died young",
        t.elapsed().as_secs_f64()
    );
    e.emu.ws_hang_up(0, false);
    e.ctl.close();
}
