//! A device that misbehaves on the wire, as a real one (or whatever answers at its address) can: non-ASCII
//! error pages cut anywhere, a 20 MB body, a body trickling a byte at a time, 100,000-deep JSON, numbers out of
//! range, wrong types, redirects. Each ends within the retry budget with an error naming the device, and the
//! same controller reads the device normally once it answers sanely again.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::hostile::{Behaviour, Hostile, answer};
use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, Error, Identity, ModelLibrary, Settings};

const TIMEOUT: f64 = 1.0;
const RETRIES: f64 = 1.0;
const DELAY: f64 = 0.05;

/// `(RetryCount+1)·ResponseTimeout + RetryCount·RetryDelay`, the longest a request may take.
fn budget() -> Duration {
    Duration::from_secs_f64((RETRIES + 1.0) * TIMEOUT + RETRIES * DELAY)
}

/// Hang guard on top of the budget: generous, because the machine is small and shared.
const SLACK: Duration = Duration::from_secs(4);

struct Rig {
    _emu: Emulator,
    fake: Hostile,
    ctl: Controller,
}

/// An emulated `model` behind a hostile fake device, opened while it behaves.
fn rig(model: &str, block: &str) -> Rig {
    let emu = Emulator::start(vec![DeviceSpec::new(model)], &ModelLibrary::embedded()).unwrap();
    let fake = Hostile::start(emu.port(0));
    let yaml = format!(
        "SmartDevices:\n  ResponseTimeout: {TIMEOUT}\n  RetryCount: {RETRIES}\n  RetryDelay: {DELAY}\n  PingAllowed: false\n  RefreshInterval: 0\n  Devices:\n    - {{{block}, Hostname: 127.0.0.1, Port: {}}}\n",
        fake.port()
    );
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    assert!(ctl.is_device_online(Identity::Id(1)).unwrap());
    Rig {
        _emu: emu,
        fake,
        ctl,
    }
}

fn rigs() -> Vec<Rig> {
    vec![
        rig(
            "ShellyPlus1PM",
            "Name: Gen2, Model: ShellyPlus1PM, Outputs: [{Name: O1}]",
        ),
        rig(
            "Shelly1",
            "Name: Gen1, Model: Shelly1, Outputs: [{Name: O1}]",
        ),
        rig(
            "Tasmota",
            "Name: Tas, Model: Tasmota, Outputs: [{Name: O1}]",
        ),
    ]
}

impl Rig {
    /// Serves `b` to one refresh: it must fail in time, naming the device; then the device must read normally.
    #[track_caller]
    fn fails_then_recovers(&self, b: Behaviour, what: &str) -> Error {
        let id = Identity::Id(1);
        self.fake.set(b);
        let started = Instant::now();
        let r = self.ctl.read_device(&id);
        let took = started.elapsed();
        let err = r.expect_err(what);
        let label = self.ctl.device(&id).unwrap().label();
        assert!(
            err.to_string().contains(&label),
            "{what}: the error does not name {label}: {err}"
        );
        assert!(
            took <= budget() + SLACK,
            "{what}: took {took:?}, budget {:?}",
            budget()
        );
        self.fake.set(Behaviour::Sane);
        let d = self
            .ctl
            .read_device(&id)
            .unwrap_or_else(|e| panic!("{what}: no recovery: {e}"));
        assert!(d.online, "{what}");
        assert_eq!(d.last_error, None, "{what}");
        err
    }
}

#[test]
fn non_ascii_error_pages_cut_at_any_offset_give_an_error_not_a_panic() {
    for r in rigs() {
        for (status, offsets) in [
            ("200 OK", [78, 79, 80, 81]),
            ("500 Fehler", [198, 199, 200, 201]),
        ] {
            for at in offsets {
                for tail in ["ü", "€", "😀"] {
                    let body = format!("{}{tail} Gerät nicht bereit", "x".repeat(at));
                    let mut raw = answer(200, body.as_bytes());
                    if status.starts_with("500") {
                        raw = answer(500, body.as_bytes());
                    }
                    let e =
                        r.fails_then_recovers(Behaviour::Raw(raw), &format!("{status} at {at}"));
                    assert!(matches!(e, Error::Device { .. }), "{e}");
                }
            }
        }
    }
}

#[test]
fn a_twenty_megabyte_answer_is_refused_without_reading_it_all() {
    for r in rigs() {
        let e = r.fails_then_recovers(Behaviour::Huge(20 * 1024 * 1024), "20 MB");
        assert!(e.to_string().contains("larger than 1024 KiB"), "{e}");
        assert!(e.to_string().contains("check Hostname and Port"), "{e}");
    }
}

#[test]
fn a_trickling_answer_ends_at_the_response_timeout() {
    let r = rig("ShellyPlus1PM", "Name: Gen2, Model: ShellyPlus1PM");
    let before = r.fake.requests();
    let body = br#"{"id":1,"result":{"switch:0":{"output":true}}}"#;
    let e = r.fails_then_recovers(
        Behaviour::Trickle(answer(200, body), Duration::from_millis(100)),
        "trickle",
    );
    assert!(matches!(e, Error::Timeout { attempts: 2, .. }), "{e}");
    // Two attempts of the refresh, then the healthy refresh.
    assert!(r.fake.requests() - before >= 3);
}

#[test]
fn hundred_thousand_deep_json_is_a_clear_error() {
    for r in rigs() {
        let deep = "[".repeat(100_000);
        let e = r.fails_then_recovers(Behaviour::Raw(answer(200, deep.as_bytes())), "deep");
        assert!(e.to_string().contains("not valid JSON"), "{e}");
    }
}

#[test]
fn numbers_out_of_range_and_wrong_types_are_not_reported_as_values() {
    let r = rig("ShellyPlus1PM", "Name: Gen2, Model: ShellyPlus1PM");
    let id = Identity::Id(1);
    // A status whose every field has the wrong type or an absurd value: the read succeeds or fails cleanly,
    // and no invented number appears.
    let body = br#"{"id":1,"src":"x","result":{"switch:0":{"id":"zero","output":"yes","apower":1e308,"voltage":"230","current":-1e308,"aenergy":{"total":18446744073709551616},"temperature":{"tC":[]}},"input:0":{"state":7},"sys":{"uptime":-5,"mac":17}}}"#;
    r.fake.set(Behaviour::Raw(answer(200, body)));
    let _ = r.ctl.read_device(&id);
    let d = r.ctl.device(&id).unwrap();
    for m in &d.meters {
        assert!(
            m.voltage.is_none(),
            "a string voltage became {:?}",
            m.voltage
        );
    }
    r.fake.set(Behaviour::Sane);
    assert!(r.ctl.read_device(&id).unwrap().online);
    // 1e400 does not even parse as a double.
    r.fails_then_recovers(
        Behaviour::Raw(answer(
            200,
            br#"{"id":1,"result":{"switch:0":{"apower":1e400}}}"#,
        )),
        "1e400",
    );
}

#[test]
fn a_redirect_is_an_error_naming_its_target_and_is_never_followed() {
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let target = format!(
        "http://{}/rpc/Switch.Set?on=true",
        elsewhere.local_addr().unwrap()
    );
    for r in rigs() {
        let before = r.fake.requests();
        let raw = format!(
            "HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let e = r.fails_then_recovers(Behaviour::Raw(raw.into_bytes()), "302");
        let text = e.to_string();
        assert!(
            text.contains("HTTP 302") && text.contains(&target),
            "{text}"
        );
        assert!(text.contains("does not follow redirects"), "{text}");
        // One attempt (a redirect is not retried) plus the healthy refresh's requests.
        assert!(r.fake.requests() > before);
        // A switch answered with a redirect reports the redirect, not another host's answer.
        r.fake.set(Behaviour::Raw(
            format!("HTTP/1.1 307 Temporary\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n")
                .into_bytes(),
        ));
        let e = r
            .ctl
            .change_output(Identity::name("O1"), true)
            .expect_err("a redirected switch fails");
        assert!(e.to_string().contains("HTTP 307"), "{e}");
        r.fake.set(Behaviour::Sane);
    }
    assert!(
        elsewhere.accept().is_err(),
        "something connected to the redirect target"
    );
}
