//! The fault matrix: each fault gives the right error kind after exactly the right number of attempts (counted
//! by the emulator, not by wall time); a dead device never delays a healthy one; open succeeds with an
//! unreachable device, which comes back online and is refreshed in the background.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::emu::{open, start};
use smartdev::emulator::{DeviceSpec, Emulator, Fault};
use smartdev::{Error, Identity, ModelLibrary};

const ATTEMPTS: u64 = 3; // RetryCount 2 + 1 in common::emu::FAST

fn id(n: i64) -> Identity {
    Identity::Id(n)
}

#[test]
fn every_fault_gives_its_error_after_the_right_number_of_attempts() {
    let t = start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &["Name: P, Model: ShellyPlus1PM"],
        // The HTTP retry policy (over the push channel a lost answer falls back to it).
        "  Channel: http\n",
    );
    let status = "rpc Shelly.GetStatus";
    let attempts_of = |fault: Fault| {
        t.emu.set_fault(0, Fault::None);
        t.ctl.read_device(id(1)).expect("healthy again");
        t.emu.reset_counts(0);
        t.emu.set_fault(0, fault);
        let e = t.ctl.read_device(id(1)).unwrap_err();
        (e, t.emu.counts(0).get(status).copied().unwrap_or(0))
    };

    let (e, n) = attempts_of(Fault::Blackhole);
    assert!(
        matches!(&e, Error::Timeout { attempts: 3, request, .. } if request == "RPC Shelly.GetStatus"),
        "{e}"
    );
    assert_eq!(n, ATTEMPTS);
    assert!(
        !t.ctl.is_device_online(id(1)).unwrap(),
        "a timeout marks the device offline"
    );
    assert!(
        t.ctl
            .device(id(1))
            .unwrap()
            .last_error
            .unwrap()
            .contains("timed out after 3 attempts")
    );

    let (e, n) = attempts_of(Fault::Http500);
    assert!(
        matches!(&e, Error::Device { message, .. } if message.contains("HTTP 500") && message.contains("after 3 attempts")),
        "{e}"
    );
    assert_eq!(n, ATTEMPTS);

    let (e, n) = attempts_of(Fault::TruncatedBody);
    assert!(
        matches!(&e, Error::Device { message, .. } if message.contains("after 3 attempts")),
        "{e}"
    );
    assert_eq!(n, ATTEMPTS);
    assert!(!t.ctl.is_device_online(id(1)).unwrap());

    let (e, n) = attempts_of(Fault::MalformedJson);
    assert!(
        matches!(&e, Error::Device { message, .. } if message.contains("not valid JSON")),
        "{e}"
    );
    assert_eq!(n, 1, "a malformed answer is not retried");
    assert!(
        t.ctl.is_device_online(id(1)).unwrap(),
        "the device answered: it is reachable"
    );

    // Refused connections never reach the device, so the count stays 0; the message says how often we tried.
    let (e, n) = attempts_of(Fault::Refuse);
    assert!(
        matches!(&e, Error::Device { message, .. } if message.contains("connection refused (after 3 attempts)")),
        "{e}"
    );
    assert_eq!(n, 0);
    assert!(!t.ctl.is_device_online(id(1)).unwrap());

    t.emu.set_fault(0, Fault::None);
    assert!(t.ctl.read_device(id(1)).unwrap().online);
    assert!(t.ctl.device(id(1)).unwrap().last_error.is_none());
}

#[test]
fn other_protocols_follow_the_same_retry_policy() {
    let t = start(
        vec![DeviceSpec::new("ShellyPlugS"), DeviceSpec::new("Tasmota")],
        &[
            "Name: G, Model: ShellyPlugS",
            "Name: T, Model: Tasmota, Outputs: [{Name: O}]",
        ],
        "",
    );
    for dev in 0..2 {
        t.emu.reset_counts(dev);
        t.emu.set_fault(dev, Fault::Http500);
    }
    assert!(t.ctl.read_device(id(1)).is_err());
    assert!(t.ctl.read_device(id(2)).is_err());
    assert_eq!(t.emu.counts(0).get("GET /status"), Some(&ATTEMPTS));
    assert_eq!(t.emu.counts(1).get("cm Status 0"), Some(&ATTEMPTS));
    // Switching is retried the same way, and a device error does not pretend the output changed.
    t.emu.set_fault(1, Fault::Blackhole);
    t.emu.reset_counts(1);
    assert!(matches!(
        t.ctl.change_output(id(2), true),
        Err(Error::Timeout { .. })
    ));
    assert_eq!(t.emu.total_requests(1), ATTEMPTS);
    assert!(t.ctl.output(id(2)).unwrap().state == Some(false));
}

#[test]
fn a_blackholed_device_does_not_delay_a_healthy_one() {
    let t = Arc::new(start(
        vec![
            DeviceSpec::new("ShellyPlus1PM"),
            DeviceSpec::new("ShellyPlus1PM"),
        ],
        &[
            "Name: Dead, Model: ShellyPlus1PM",
            "Name: Alive, Model: ShellyPlus1PM",
        ],
        "",
    ));
    t.emu.set_fault(0, Fault::Blackhole);
    let dead_done = Arc::new(AtomicBool::new(false));
    let dead = {
        let (t, done) = (t.clone(), dead_done.clone());
        std::thread::spawn(move || {
            let r = t.ctl.read_device(id(1));
            done.store(true, Ordering::SeqCst);
            r
        })
    };
    // Wait until the dead device's worker is inside its first attempt.
    assert!(common::eventually(Duration::from_secs(2), || t
        .emu
        .total_requests(0)
        >= 1));
    for _ in 0..5 {
        let d = t.ctl.read_device(id(2)).unwrap();
        assert!(d.online);
        t.ctl.toggle_output(id(2)).unwrap();
    }
    assert!(
        !dead_done.load(Ordering::SeqCst),
        "the healthy device answered while the dead one was still retrying"
    );
    assert!(matches!(dead.join().unwrap(), Err(Error::Timeout { .. })));

    // refresh_all: every device is tried, the failure is reported, the healthy one is refreshed.
    let report = t.ctl.refresh_all().unwrap();
    assert_eq!(report.refreshed, 1);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].device_name, "Dead");
    assert!(matches!(report.failures[0].error, Error::Timeout { .. }));
}

#[test]
fn open_succeeds_with_an_unreachable_device_which_comes_back_and_is_refreshed() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM"), DeviceSpec::new("Tasmota")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    emu.set_fault(0, Fault::Refuse);
    emu.set_output(0, 0, true);
    let ctl = open(
        &emu,
        &[
            "Name: Away, Model: ShellyPlus1PM",
            "Name: Here, Model: Tasmota, Outputs: [{Name: O}]",
        ],
        "  RefreshInterval: 0.1\n",
    )
    .expect("open does not fail because a device is unreachable");
    let away = ctl.device(id(1)).unwrap();
    assert!(!away.online);
    assert!(away.last_error.unwrap().contains("connection refused"));
    assert!(ctl.device(id(2)).unwrap().online);
    assert_eq!(
        ctl.output(id(1)).unwrap().state,
        None,
        "never read: unknown, not off"
    );

    emu.set_fault(0, Fault::None);
    assert!(
        common::eventually(Duration::from_secs(5), || ctl
            .is_device_online(id(1))
            .unwrap()),
        "the supervisor brings the device back"
    );
    assert_eq!(
        ctl.output(id(1)).unwrap().state,
        Some(true),
        "and refreshes it"
    );
    assert!(ctl.device(id(1)).unwrap().last_error.is_none());

    // It goes away again and comes back again; calls in between fail cleanly.
    emu.set_fault(0, Fault::Refuse);
    assert!(common::eventually(Duration::from_secs(5), || !ctl
        .is_device_online(id(1))
        .unwrap()));
    assert!(ctl.change_output(id(1), false).is_err());
    emu.set_fault(0, Fault::None);
    assert!(common::eventually(Duration::from_secs(5), || ctl
        .is_device_online(id(1))
        .unwrap()));
    assert!(!ctl.change_output(id(1), false).unwrap().state);
}

#[test]
fn open_time_is_bounded_by_one_attempt_per_device() {
    let emu = Emulator::start(
        (0..4).map(|_| DeviceSpec::new("ShellyPlus1PM")).collect(),
        &ModelLibrary::embedded(),
    )
    .unwrap();
    for d in 0..4 {
        emu.set_fault(d, Fault::Blackhole);
    }
    let blocks: Vec<String> = (0..4)
        .map(|i| format!("Name: B{i}, Model: ShellyPlus1PM"))
        .collect();
    let refs: Vec<&str> = blocks.iter().map(String::as_str).collect();
    // Open's own attempts only: with the push channel, a connector's subscription request may reach the
    // (blackholed) device right after open returns, and would be counted too (failed 1 suite run in 8).
    let ctl = open(&emu, &refs, "  Channel: http\n").unwrap();
    // Each device got exactly one attempt at open (in parallel), not RetryCount + 1.
    for d in 0..4 {
        assert_eq!(emu.total_requests(d), 1, "device {d}");
        assert!(!ctl.is_device_online(id(d as i64 + 1)).unwrap());
    }
}

#[test]
fn flapping_device_ends_in_a_consistent_state() {
    let t = start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &["Name: F, Model: ShellyPlus1PM"],
        "",
    );
    t.emu
        .set_fault(0, Fault::Flapping(Duration::from_millis(100)));
    let mut ok = 0;
    let mut failed = 0;
    for _ in 0..20 {
        match t.ctl.read_device(id(1)) {
            Ok(d) => {
                ok += 1;
                assert!(d.online);
            }
            Err(_) => failed += 1,
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(ok > 0, "some calls land while it serves");
    t.emu.set_fault(0, Fault::None);
    assert!(t.ctl.read_device(id(1)).unwrap().online);
    let _ = failed;
}

/// A lost or late answer to a toggle must not make the relay click twice: the library never sends a toggle;
/// it reads the output and sends an absolute set, which is safe to repeat. Counted on the device side.
#[test]
fn a_toggle_whose_answers_are_lost_or_late_switches_exactly_once() {
    let t = start(
        vec![
            DeviceSpec::new("ShellyPlus1PM"),
            DeviceSpec::new("ShellyPlugS"),
            DeviceSpec::new("Tasmota"),
        ],
        &[
            "Name: R, Model: ShellyPlus1PM, Outputs: [{Name: OR}]",
            "Name: G, Model: ShellyPlugS, Outputs: [{Name: OG}]",
            "Name: T, Model: Tasmota, Outputs: [{Name: OT}]",
        ],
        // The default: two attempts, so a toggle sent twice would end where it started.
        "  RetryCount: 1\n",
    );
    // (device, output, the set request, every way a toggle could be sent)
    let cases = [
        (0, "OR", "rpc Switch.Set", ["rpc Switch.Toggle", "-", "-"]),
        (
            1,
            "OG",
            "GET /relay/0?turn=",
            ["GET /relay/0?turn=toggle", "-", "-"],
        ),
        (
            2,
            "OT",
            "cm Power1 ",
            ["cm Power1 2", "cm Power1 TOGGLE", "cm Power 2"],
        ),
    ];
    for (dev, output, set, toggles) in cases {
        t.emu.set_output(dev, 0, false);
        t.emu.set_fault_scope(dev, Some(set));
        // Answers cut short: every attempt acts, none is answered.
        t.emu.set_fault(dev, Fault::TruncatedBody);
        t.emu.reset_counts(dev);
        let r = t.ctl.toggle_output(Identity::name(output));
        assert!(r.is_err(), "{output}: no answer, no success: {r:?}");
        assert!(t.emu.output(dev, 0), "{output}: toggled exactly once");
        // Answers later than ResponseTimeout: the same, the other way round.
        t.emu.set_fault(dev, Fault::None);
        t.emu.set_latency(dev, Duration::from_millis(600));
        let r = t.ctl.toggle_output(Identity::name(output));
        assert!(r.is_err(), "{output}: late answers are timeouts: {r:?}");
        assert!(!t.emu.output(dev, 0), "{output}: toggled back exactly once");
        t.emu.set_latency(dev, Duration::ZERO);
        t.emu.set_fault_scope(dev, None);
        // Healthy again: a toggle reports what happened.
        let c = t.ctl.toggle_output(Identity::name(output)).unwrap();
        assert!(c.state && c.did_change, "{output}");
        assert!(t.emu.output(dev, 0));
        let counts = t.emu.counts(dev);
        for toggle in toggles {
            let sent: u64 = counts
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(toggle))
                .map(|(_, n)| n)
                .sum();
            assert_eq!(sent, 0, "{output}: '{toggle}' was sent: {counts:?}");
        }
    }
}
