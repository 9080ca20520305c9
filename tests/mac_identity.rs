//! The MAC is the identity (issue 24 §1), tested as the other party: MAC spellings in the configuration (both
//! layouts, `sdctl check`), malformed and duplicate MACs, a MAC-only device, and the safety rule: a device that
//! answers at the configured address with another MAC is never switched or read as the configured device,
//! and the device recovers by itself when the right MAC answers again.

mod common;

use std::process::Command;
use std::time::Duration;

use common::TempDir;
use common::emu::{open, settings};
use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, Error, Identity, Mac, ModelLibrary, Settings};

const LIMIT: Duration = Duration::from_secs(10);

fn id(n: i64) -> Identity {
    Identity::Id(n)
}

fn spec(model: &str, mac: &str) -> DeviceSpec {
    DeviceSpec {
        mac: Some(mac.into()),
        ..DeviceSpec::new(model)
    }
}

fn problems(e: Error) -> Vec<String> {
    e.problems().iter().map(|p| p.to_string()).collect()
}

#[test]
fn mac_spellings_read_as_one() {
    for s in [
        "a8:03:2a:b1:23:45",
        "A8-03-2A-B1-23-45",
        "a8032AB12345",
        "A803.2AB1.2345",
    ] {
        assert_eq!(
            Mac::parse(s).unwrap().to_string(),
            "A8:03:2A:B1:23:45",
            "{s}"
        );
    }
    let e = Mac::parse("A8:03:2A:B1:23").unwrap_err();
    assert!(e.contains("AA:BB:CC:DD:EE:FF"), "{e}");
}

#[test]
fn mac_is_accepted_in_both_layouts_in_any_spelling() {
    for (root, mac) in [
        ("SmartDevices", "a8-03-2a-b1-23-45"),
        ("SCSmartDevices", "A8032AB12345"),
        ("ShellyDevices", "a803.2ab1.2345"),
    ] {
        let yaml = format!(
            "{root}:\n  Devices:\n    - {{Name: Plug, Model: ShellyPlus1PM, Hostname: 192.168.1.20, MAC: {mac}}}\n"
        );
        let s = Settings::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{root}: {e}"));
        assert_eq!(
            s.devices[0].mac.map(|m| m.to_string()).as_deref(),
            Some("A8:03:2A:B1:23:45"),
            "{root}"
        );
    }
}

#[test]
fn a_malformed_mac_names_the_device_the_value_and_the_spellings_and_a_misspelt_key_gets_a_hint() {
    let yaml = "SmartDevices:\n  Devices:\n    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 10.0.0.5, MAC: A8:03:2A:B1:23}\n";
    let p = problems(Settings::from_yaml_str(yaml).unwrap_err()).join("\n");
    assert!(p.contains("Devices[0].MAC"), "{p}");
    assert!(p.contains("Kitchen"), "{p}");
    assert!(p.contains("A8:03:2A:B1:23"), "{p}");
    assert!(
        p.contains("AA:BB:CC:DD:EE:FF") && p.contains("AABBCCDDEEFF"),
        "{p}"
    );

    let yaml = "SmartDevices:\n  Devices:\n    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 10.0.0.5, MACC: A8032AB12345}\n";
    let p = problems(Settings::from_yaml_str(yaml).unwrap_err()).join("\n");
    assert!(p.contains("MACC") && p.contains("MAC"), "{p}");
}

#[test]
fn two_devices_with_one_mac_is_a_configuration_error() {
    let yaml = "SmartDevices:\n  Devices:
    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 10.0.0.5, MAC: A8032AB12345}
    - {Name: Hall, Model: ShellyPlus1PM, Hostname: 10.0.0.6, MAC: a8-03-2a-b1-23-45}\n";
    let p = problems(Settings::from_yaml_str(yaml).unwrap_err()).join("\n");
    assert!(p.contains("Devices[1].MAC"), "{p}");
    assert!(p.contains("A8:03:2A:B1:23:45"), "{p}");
    assert!(p.contains("Kitchen"), "{p}");
}

#[test]
fn sdctl_check_accepts_a_mac_and_refuses_a_bad_one() {
    let dir = TempDir::new("mac-check");
    dir.write(
        "good.yaml",
        "SmartDevices:\n  Devices:\n    - {Name: Kitchen, Model: ShellyPlus1PM, MAC: A8032AB12345}\n",
    );
    dir.write(
        "bad.yaml",
        "SmartDevices:\n  Devices:\n    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 10.0.0.5, MAC: A8032AB1234Z}\n",
    );
    let run = |file: &str| {
        Command::new(env!("CARGO_BIN_EXE_sdctl"))
            .current_dir(dir.path())
            .args(["--config", file, "check"])
            .output()
            .unwrap()
    };
    let good = run("good.yaml");
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let bad = run("bad.yaml");
    assert!(!bad.status.success());
    let text =
        String::from_utf8_lossy(&bad.stderr).to_string() + &String::from_utf8_lossy(&bad.stdout);
    assert!(
        text.contains("A8032AB1234Z") && text.contains("Kitchen"),
        "{text}"
    );
}

#[test]
fn a_device_with_only_a_mac_opens_offline_and_says_why() {
    let yaml = "SmartDevices:\n  RefreshInterval: 0\n  PingAllowed: false\n  FollowMoves: false\n  Devices:
    - {Name: Kitchen, Model: ShellyPlus1PM, MAC: a8032ab12345}\n";
    let ctl = Controller::open(Settings::from_yaml_str(yaml).unwrap(), None).unwrap();
    let d = ctl.device(id(1)).unwrap();
    assert!(!d.online);
    assert_eq!(d.mac_address.as_deref(), Some("A8:03:2A:B1:23:45"));
    let why = d.last_error.unwrap();
    assert!(
        why.contains("no address is known yet") && why.contains("discovery"),
        "{why}"
    );
    assert!(ctl.change_output(id(1), true).is_err());
    // Without a MAC, Hostname stays required.
    let yaml = "SmartDevices:\n  Devices:\n    - {Name: Kitchen, Model: ShellyPlus1PM}\n";
    let e = Controller::open(Settings::from_yaml_str(yaml).unwrap(), None).unwrap_err();
    assert!(e.to_string().contains("Hostname is required"), "{e}");
}

#[test]
fn simulated_devices_have_a_stable_mac_or_their_configured_one() {
    let dir = TempDir::new("mac-sim");
    let yaml = |d: &TempDir| {
        format!(
            "SmartDevices:\n  SimulationFileFolder: {}\n  Devices:
    - {{Name: A, Model: ShellyPlus1PM, Simulate: true}}
    - {{Name: B, Model: ShellyPlus1PM, Simulate: true, MAC: 02-00-00-00-00-0b}}\n",
            d.path().display()
        )
    };
    let first = {
        let ctl = Controller::open(Settings::from_yaml_str(&yaml(&dir)).unwrap(), None).unwrap();
        let a = ctl.device(id(1)).unwrap().mac_address.unwrap();
        assert_eq!(Mac::parse(&a).unwrap().to_string(), a, "one spelling");
        assert_eq!(
            ctl.device(id(2)).unwrap().mac_address.as_deref(),
            Some("02:00:00:00:00:0B")
        );
        a
    };
    let other = TempDir::new("mac-sim-2");
    let ctl = Controller::open(Settings::from_yaml_str(&yaml(&other)).unwrap(), None).unwrap();
    assert_eq!(
        ctl.device(id(1)).unwrap().mac_address.unwrap(),
        first,
        "stable"
    );
}

/// What each family's emulated device reports, and how smartdev shows it.
#[test]
fn emulated_devices_report_macs_as_real_ones_and_smartdev_shows_one_spelling() {
    let specs = vec![
        spec("ShellyPlus1PM", "A8032AB12345"),
        spec("Shelly1PM", "a4:cf:12:f4:56:78"),
        DeviceSpec {
            mac: Some("A4CF12F45679".into()),
            ..DeviceSpec::new("Tasmota")
        },
    ];
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).unwrap();
    let get = |port: u16, path: &str| common::raw_http::request(port, "GET", path, None).json();
    assert_eq!(get(emu.port(0), "/shelly")["mac"], "A8032AB12345");
    assert_eq!(get(emu.port(1), "/shelly")["mac"], "A4CF12F45678");
    assert_eq!(
        get(emu.port(2), "/cm?cmnd=Status%205")["StatusNET"]["Mac"],
        "A4:CF:12:F4:56:79"
    );
    // The admin endpoint swaps a device's MAC (another device at the address), as Emulator::set_mac does.
    let admin = |method: &str, target: &str| {
        common::raw_http::request(emu.admin_port(), method, target, None)
    };
    assert_eq!(
        admin("GET", "/devices/0/mac").json()["mac"],
        "A8:03:2A:B1:23:45"
    );
    let swapped = admin("POST", "/devices/0/mac?value=11-22-33-44-55-66").json();
    assert_eq!(swapped["mac"], "11:22:33:44:55:66");
    assert_eq!(get(emu.port(0), "/shelly")["mac"], "112233445566");
    assert_eq!(emu.mac(0), "11:22:33:44:55:66");
    assert!(
        admin("POST", "/devices/0/mac?value=nonsense")
            .text()
            .contains("AA:BB:CC:DD:EE:FF")
    );
    emu.set_mac(0, "A8032AB12345");
    let ctl = open(
        &emu,
        &[
            "Model: ShellyPlus1PM",
            "Model: Shelly1PM",
            "Model: Tasmota, Outputs: [{}]",
        ],
        "  Channel: http\n",
    )
    .unwrap();
    for (n, want) in [
        (1, "A8:03:2A:B1:23:45"),
        (2, "A4:CF:12:F4:56:78"),
        (3, "A4:CF:12:F4:56:79"),
    ] {
        let d = ctl.device(id(n)).unwrap();
        assert!(d.online, "{n}: {:?}", d.last_error);
        assert_eq!(d.mac_address.as_deref(), Some(want), "{n}");
    }
}

/// The configured MAC is A8:03:2A:B1:23:45; the emulated device at the port is another one.
fn foreign_at_the_address(model: &str, block: &str, extra: &str) {
    let emu = Emulator::start(
        vec![spec(model, "11:22:33:44:55:66")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    emu.set_output(0, 0, false);
    let s = settings(&emu, &[&format!("{block}, MAC: A8032AB12345")], extra);
    let ctl = Controller::open(s, None).unwrap();
    let d = ctl.device(id(1)).unwrap();
    assert!(!d.online, "{model}");
    let why = d.last_error.clone().unwrap();
    assert!(
        why.contains("11:22:33:44:55:66")
            && why.contains("A8:03:2A:B1:23:45")
            && why.contains(&format!("127.0.0.1:{}", emu.port(0))),
        "{model}: {why}"
    );
    // Nothing of the foreign device is taken: its output state and its MAC stay unknown / configured.
    assert_eq!(d.outputs[0].state, None, "{model}");
    assert_eq!(d.mac_address.as_deref(), Some("A8:03:2A:B1:23:45"));
    for r in [
        ctl.change_output(id(1), true).map(|_| ()),
        ctl.toggle_output(id(1)).map(|_| ()),
        ctl.read_device(id(1)).map(|_| ()),
    ] {
        assert!(
            matches!(&r, Err(Error::WrongDevice { expected, found, .. })
                if expected == "A8:03:2A:B1:23:45" && found == "11:22:33:44:55:66"),
            "{model}: {r:?}"
        );
    }
    assert!(
        !emu.output(0, 0),
        "{model}: the foreign device was switched"
    );
    assert_eq!(ctl.output(id(1)).unwrap().state, None, "{model}");
}

#[test]
fn a_foreign_gen2_device_at_the_address_is_refused_and_never_switched() {
    foreign_at_the_address("ShellyPlus1PM", "Model: ShellyPlus1PM", "  Channel: http\n");
}

#[test]
fn a_foreign_gen2_device_is_refused_with_the_push_channel_on() {
    foreign_at_the_address("ShellyPlus1PM", "Model: ShellyPlus1PM", "  Channel: auto\n");
}

#[test]
fn a_foreign_gen1_device_at_the_address_is_refused_and_never_switched() {
    foreign_at_the_address("Shelly1PM", "Model: Shelly1PM", "");
}

#[test]
fn a_foreign_tasmota_device_at_the_address_is_refused_and_never_switched() {
    let emu = Emulator::start(
        vec![DeviceSpec {
            mac: Some("11:22:33:44:55:66".into()),
            ..DeviceSpec::new("Tasmota")
        }],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let s = settings(
        &emu,
        &["Model: Tasmota, Outputs: [{}], MAC: A8032AB12345"],
        "",
    );
    let ctl = Controller::open(s, None).unwrap();
    assert!(!ctl.device(id(1)).unwrap().online);
    let r = ctl.change_output(id(1), true);
    assert!(matches!(r, Err(Error::WrongDevice { .. })), "{r:?}");
    assert!(!emu.output(0, 0));
}

/// No MAC configured: the first one the device reported is its identity for the controller's life. Another
/// device takes the address (the emulated device's MAC changes): offline, refused; the right one comes
/// back: online again by itself, at the next background read.
fn swapped_mid_run(extra: &str) {
    let emu = Emulator::start(
        vec![spec("ShellyPlus1PM", "A8032AB12345")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let s = settings(
        &emu,
        &["Model: ShellyPlus1PM"],
        &format!("  RefreshInterval: 1\n{extra}"),
    );
    let ctl = Controller::open(s, None).unwrap();
    ctl.change_output(id(1), true).unwrap();
    assert!(emu.output(0, 0));

    emu.set_mac(0, "11:22:33:44:55:66");
    emu.set_output(0, 0, false);
    assert!(
        common::eventually(LIMIT, || !ctl.device(id(1)).unwrap().online),
        "the background read finds the other MAC"
    );
    let d = ctl.device(id(1)).unwrap();
    let why = d.last_error.unwrap();
    assert!(
        why.contains("answers as 11:22:33:44:55:66, not A8:03:2A:B1:23:45 as it did before"),
        "{why}"
    );
    assert_eq!(
        d.outputs[0].state,
        Some(true),
        "the last known state is kept"
    );
    let r = ctl.change_output(id(1), true);
    assert!(matches!(r, Err(Error::WrongDevice { .. })), "{r:?}");
    assert!(!emu.output(0, 0), "the foreign device was switched");

    emu.set_mac(0, "a8-03-2a-b1-23-45");
    assert!(
        common::eventually(LIMIT, || ctl.device(id(1)).unwrap().online),
        "back by itself"
    );
    assert_eq!(ctl.device(id(1)).unwrap().last_error, None);
    ctl.change_output(id(1), true).unwrap();
    assert!(emu.output(0, 0));
}

/// Another device takes the address and a command comes at once, before any read noticed (no background
/// reads): nothing may reach the other device. Over the push channel, its dropped connection no longer
/// vouches for the address, so the command's HTTP path asks for the MAC first; over HTTP alone, the last
/// read's confirmation lasts a few seconds, so this asserts only the push case, where no window exists.
#[test]
fn a_command_right_after_another_device_took_the_address_reaches_nothing() {
    let emu = Emulator::start(
        vec![spec("ShellyPlus1PM", "A8032AB12345")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let s = settings(
        &emu,
        &["Model: ShellyPlus1PM, MAC: A8032AB12345"],
        "  Channel: auto\n  RefreshInterval: 0\n",
    );
    let ctl = Controller::open(s, None).unwrap();
    assert!(common::eventually(LIMIT, || emu.ws_subscribed(0) == 1));
    ctl.change_output(id(1), true).unwrap();
    assert!(emu.output(0, 0));
    emu.set_output(0, 0, false);
    // The other device: another MAC at the address, and the old connection gone with the old device.
    emu.set_mac(0, "11:22:33:44:55:66");
    let r = ctl.change_output(id(1), true);
    assert!(matches!(r, Err(Error::WrongDevice { .. })), "{r:?}");
    assert!(!emu.output(0, 0), "the other device was switched");
}

#[test]
fn a_device_replaced_mid_run_goes_offline_and_recovers_over_http() {
    swapped_mid_run("  Channel: http\n");
}

#[test]
fn a_device_replaced_mid_run_goes_offline_and_recovers_with_the_push_channel() {
    swapped_mid_run("  Channel: auto\n");
}

/// The push channel (no background reads): another device takes the address and the socket drops; a read
/// over HTTP finds the other MAC. The reconnect's subscription, answered by the other MAC, is refused: the
/// channel does not stay connected to it, and nothing it reports is taken (its relay is off, the snapshot keeps
/// on). Without the poller's check the socket to the other device stays open (checked by disabling it).
#[test]
fn a_subscription_answered_by_another_mac_is_refused() {
    let emu = Emulator::start(
        vec![spec("ShellyPlus1PM", "A8032AB12345")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let s = settings(&emu, &["Model: ShellyPlus1PM"], "  Channel: auto\n");
    let ctl = Controller::open(s, None).unwrap();
    ctl.change_output(id(1), true).unwrap();
    assert!(common::eventually(LIMIT, || emu.ws_subscribed(0) == 1));

    let upgrades = emu.ws_upgrades(0);
    emu.set_mac(0, "11:22:33:44:55:66");
    emu.set_output(0, 0, false);
    assert!(
        common::eventually(LIMIT, || !ctl.device(id(1)).unwrap().online),
        "a read finds the other MAC"
    );
    assert!(
        common::eventually(LIMIT, || emu.ws_upgrades(0) > upgrades),
        "the push channel connects again"
    );
    let d = ctl.device(id(1)).unwrap();
    assert_eq!(
        d.outputs[0].state,
        Some(true),
        "nothing pushed by the other device is taken"
    );
    assert!(d.last_error.unwrap().contains("11:22:33:44:55:66"));
    // The push channel does not stay connected to the other device (it tries again later, with its back-off).
    assert!(
        common::eventually(LIMIT, || emu.ws_connections(0) == 0),
        "a socket to the other device stays open"
    );

    emu.set_mac(0, "A8032AB12345");
    ctl.read_device(id(1)).unwrap();
    assert!(ctl.device(id(1)).unwrap().online);
    assert_eq!(ctl.device(id(1)).unwrap().outputs[0].state, Some(false));
}

/// A cover device: moving the cover of another device at the address is refused, the emulated cover stays
/// where it was, and `get_device` gives the typed error with the object (offline, both MACs in LastError).
#[test]
fn a_foreign_cover_device_is_not_moved_and_get_device_says_why() {
    let emu = Emulator::start(
        vec![DeviceSpec {
            profile: Some("cover".into()),
            ..spec("Shelly2PMG3", "11:22:33:44:55:66")
        }],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let s = settings(
        &emu,
        &["Model: Shelly2PMG3, Profile: cover, Covers: [{Name: Blind}], MAC: A8032AB12345"],
        "  Channel: http\n",
    );
    let ctl = Controller::open(s, None).unwrap();
    let before = emu.cover(0, 0);
    let r = ctl.move_cover(Identity::Name("Blind".into()), smartdev::CoverAction::Open);
    assert!(matches!(r, Err(Error::WrongDevice { .. })), "{r:?}");
    let after = emu.cover(0, 0);
    assert_eq!(
        (after.state, after.position),
        (before.state, before.position)
    );
    assert_eq!(after.target, None, "no movement started");
    let e = ctl.get_device(id(1)).unwrap_err();
    assert!(matches!(e.error, Error::WrongDevice { .. }), "{}", e.error);
    let d = e.device.unwrap();
    assert!(!d.online);
    assert!(d.last_error.unwrap().contains("11:22:33:44:55:66"));
    assert_eq!(d.covers[0].state, None, "nothing of the other device");
}
