//! Devices with a password, against the emulator: each scheme works with the right password, fails once with
//! a clear authentication error with a wrong or missing one (and stays online), firmware 2.x nonces are reused
//! (one challenge per nonce lifetime), stale nonces and 429 throttling are recovered within the retry budget,
//! pre-2.0 firmware works, and webhooks install on protected devices.

mod common;

use std::time::Duration;

use common::emu::{open, settings};
use common::raw_http::request;
use smartdev::emulator::{AuthMode, DeviceSpec, Emulator};
use smartdev::{Controller, Error, Identity, ModelLibrary};

const PW: &str = "S3cr3t-Value";

fn spec(model: &str, password: &str) -> DeviceSpec {
    let mut s = DeviceSpec::new(model);
    s.password = Some(password.into());
    s
}

fn start(specs: Vec<DeviceSpec>) -> Emulator {
    Emulator::start(specs, &ModelLibrary::embedded()).unwrap()
}

fn id(n: i64) -> Identity {
    Identity::Id(n)
}

fn is_auth(e: &Error) -> bool {
    matches!(e, Error::Auth { .. })
}

#[test]
fn gen2_digest_reuses_the_nonce_of_firmware_2() {
    let emu = start(vec![spec("Shelly2PMG3", PW)]);
    let ctl = open(
        &emu,
        &[&format!("Name: D, Model: Shelly2PMG3, Password: {PW}")],
        // HTTP digest (the push channel's in-frame digest is tested in tests/push.rs).
        "  Channel: http\n",
    )
    .unwrap();
    let d = ctl.read_device(id(1)).unwrap();
    assert!(d.online, "{:?}", d.last_error);
    for _ in 0..10 {
        ctl.toggle_output(id(1)).unwrap();
        ctl.read_device(id(1)).unwrap();
    }
    let s = emu.auth_stats(0);
    assert_eq!(
        s.challenges, 1,
        "one challenge for the nonce's whole lifetime: {s:?}"
    );
    assert_eq!(s.rejected, 0);
    assert!(s.accepted >= 21, "{s:?}");
}

#[test]
fn gen2_wrong_and_missing_passwords_are_auth_errors_after_one_attempt() {
    let emu = start(vec![spec("ShellyPlus1PM", PW), spec("ShellyPlus1PM", PW)]);
    let ctl = open(
        &emu,
        &[
            "Name: Wrong, Model: ShellyPlus1PM, Password: nope",
            "Name: None, Model: ShellyPlus1PM",
        ],
        // Counts HTTP attempts; the push channel of these devices would add its own (refused) ones.
        "  Channel: http\n",
    )
    .unwrap();
    for (dev, want) in [(1, "wrong password"), (2, "requires a password")] {
        emu.reset_counts(dev as usize - 1);
        let rejected_before = emu.auth_stats(dev as usize - 1).rejected;
        let e = ctl.read_device(id(dev)).unwrap_err();
        let rejected = emu.auth_stats(dev as usize - 1).rejected - rejected_before;
        assert_eq!(
            rejected,
            if dev == 1 { 1 } else { 0 },
            "the wrong password was tried once"
        );
        assert!(is_auth(&e), "{e}");
        assert!(e.to_string().contains(want), "{e}");
        assert!(!e.to_string().contains(PW) && !e.to_string().contains("nope"));
        assert!(
            ctl.is_device_online(id(dev)).unwrap(),
            "reachable: stays online"
        );
        // No retry loop: the status call was tried with one challenge round at most.
        let n = emu
            .counts(dev as usize - 1)
            .get("rpc Shelly.GetStatus")
            .copied()
            .unwrap_or(0);
        assert!(n <= 2, "{n} requests");
    }
    assert!(matches!(
        ctl.change_output(id(1), true),
        Err(Error::Auth { .. })
    ));
    assert!(!emu.output(0, 0));
}

/// Over HTTP (one nonce: one renewal), and with the push channel (the socket's in-frame nonce and, while the
/// socket connects, HTTP's: each renewed once at most).
#[test]
fn stale_nonces_are_renewed_without_an_error() {
    for channel in ["http", "auto"] {
        let mut s = spec("ShellyPlus1PM", PW);
        s.nonce_lifetime = Duration::from_millis(600);
        let clock = smartdev::emulator::EmuClock::manual();
        let emu = smartdev::emulator::Emulator::start_with_clock(
            vec![s],
            &smartdev::ModelLibrary::embedded(),
            clock.clone(),
        )
        .unwrap();
        let ctl = open(
            &emu,
            &[&format!("Name: D, Model: ShellyPlus1PM, Password: {PW}")],
            &format!("  Channel: {channel}\n"),
        )
        .unwrap();
        ctl.read_device(id(1)).unwrap();
        clock.advance(Duration::from_millis(800));
        ctl.read_device(id(1))
            .expect("a stale nonce is renewed, not reported");
        let st = emu.auth_stats(0);
        let most = if channel == "http" { 1 } else { 2 };
        assert!(st.stale >= 1 && st.stale <= most, "{channel}: {st:?}");
        assert_eq!(st.rejected, 0, "{channel}");
    }
}

#[test]
fn too_many_requests_is_waited_out_within_the_retry_budget() {
    let mut s = spec("ShellyPlus1PM", PW);
    s.nonce_lifetime = Duration::from_millis(500);
    let emu = start(vec![s]);
    // Another client takes every nonce slot: 33 fresh challenges, the last one answered 429.
    for _ in 0..33 {
        request(emu.port(0), "GET", "/rpc/Shelly.GetStatus", None);
    }
    assert!(emu.auth_stats(0).throttled >= 1);
    // RetryDelay 1.3 s × 2 retries outlasts the 2 s throttle window and the 0.5 s nonces.
    let mut st = settings(
        &emu,
        &[&format!("Name: D, Model: ShellyPlus1PM, Password: {PW}")],
        "",
    );
    st.retry_delay = Duration::from_millis(1300);
    let ctl = Controller::open(st, None).unwrap();
    let d = ctl
        .read_device(id(1))
        .expect("recovered within the retry budget");
    assert!(d.online);
    assert!(emu.auth_stats(0).throttled >= 2, "{:?}", emu.auth_stats(0));
}

#[test]
fn pre_2_0_firmware_needs_a_fresh_challenge_every_time() {
    let mut s = spec("ShellyPlus1PM", PW);
    s.auth_mode = AuthMode::Fw1;
    let emu = start(vec![s]);
    let ctl = open(
        &emu,
        &[&format!("Name: D, Model: ShellyPlus1PM, Password: {PW}")],
        "",
    )
    .unwrap();
    for _ in 0..5 {
        ctl.toggle_output(id(1)).unwrap();
    }
    let st = emu.auth_stats(0);
    assert_eq!(st.rejected, 0, "{st:?}");
    assert!(st.challenges >= 5, "{st:?}");
}

#[test]
fn md5_when_the_device_asks_for_it() {
    let mut s = spec("ShellyPlus1PM", PW);
    s.digest_md5 = true;
    let emu = start(vec![s]);
    let ctl = open(
        &emu,
        &[&format!("Name: D, Model: ShellyPlus1PM, Password: {PW}")],
        "",
    )
    .unwrap();
    assert!(ctl.read_device(id(1)).unwrap().online);
    assert_eq!(emu.auth_stats(0).rejected, 0);
}

#[test]
fn gen1_basic_auth() {
    let mut custom = spec("Shelly2.5", PW);
    custom.username = Some("owner".into());
    let emu = start(vec![custom, spec("Shelly2.5", PW), spec("Shelly2.5", PW)]);
    let ctl = open(
        &emu,
        &[
            &format!("Name: Ok, Model: Shelly2.5, Username: owner, Password: {PW}"),
            "Name: Wrong, Model: Shelly2.5, Password: nope",
            "Name: None, Model: Shelly2.5",
        ],
        "",
    )
    .unwrap();
    assert!(ctl.read_device(id(1)).unwrap().online);
    assert!(ctl.change_output(id(1), true).unwrap().did_change);
    assert!(emu.output(0, 0));
    let e = ctl.read_device(id(2)).unwrap_err();
    assert!(is_auth(&e) && e.to_string().contains("refused"), "{e}");
    let e = ctl.read_device(id(3)).unwrap_err();
    assert!(
        is_auth(&e) && e.to_string().contains("requires a password"),
        "{e}"
    );
    assert!(ctl.is_device_online(id(2)).unwrap());
    // /shelly stays open, so the device is still identified.
    assert_eq!(
        ctl.device(id(3)).unwrap().reported_model.as_deref(),
        Some("SHSW-25")
    );
}

#[test]
fn tasmota_user_and_password_including_old_firmware() {
    let mut old = spec("Tasmota", PW);
    old.tasmota_old_auth = true;
    let emu = start(vec![spec("Tasmota", PW), spec("Tasmota", PW), old]);
    let ctl = open(
        &emu,
        &[
            &format!("Name: Ok, Model: Tasmota, Password: '{PW}', Outputs: [{{Name: O1}}]"),
            "Name: Wrong, Model: Tasmota, Password: nope, Outputs: [{Name: O2}]",
            "Name: Old, Model: Tasmota, Outputs: [{Name: O3}]",
        ],
        "",
    )
    .unwrap();
    assert!(
        ctl.change_output(Identity::name("O1"), true)
            .unwrap()
            .did_change
    );
    let e = ctl.read_device(id(2)).unwrap_err();
    assert!(is_auth(&e) && e.to_string().contains("refused"), "{e}");
    let e = ctl.read_device(id(3)).unwrap_err();
    assert!(
        is_auth(&e) && e.to_string().contains("requires a password"),
        "{e}"
    );
}

#[test]
fn webhooks_install_on_protected_devices() {
    let emu = start(vec![spec("Shelly2PMG3", PW), spec("Shelly2.5", PW)]);
    let ctl = open(
            &emu,
            &[
                &format!("Name: G2, Model: Shelly2PMG3, Password: {PW}, Outputs: [{{Name: A, Webhooks: true}}, {{}}]"),
                &format!("Name: G1, Model: Shelly2.5, Password: {PW}, Outputs: [{{Name: B, Webhooks: true}}, {{}}]"),
            ],
            "  ShellyWebhooks: {Enabled: true, Port: 0}\n",
    )
    .unwrap();
    assert_eq!(emu.webhooks(0).len(), 2, "{:?}", emu.webhooks(0));
    assert_eq!(emu.webhooks(1).len(), 2, "{:?}", emu.webhooks(1));
    assert!(
        ctl.device(id(1))
            .unwrap()
            .supported_webhooks
            .contains(&"switch.on".to_string())
    );
}
