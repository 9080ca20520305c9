//! The MQTT channel (`Channel: mqtt`) against a real Mosquitto per test and emulated devices that are its
//! clients: reads and switches for Shelly Gen2+ and Tasmota, notifications and telemetry into the snapshot
//! and the event queue, last wills, a broker killed and restarted, two controllers on one broker, login, TLS
//! and hostile payloads on device topics.

mod common;

use std::time::Duration;

use common::eventually;
use common::mosquitto::{Broker, BrokerOptions};
use smartdev::emulator::{DeviceSpec, Emulator, MqttSpec};
use smartdev::{Controller, EventChannel, Identity, ModelLibrary, Settings};

/// A hang guard, never a timing assertion.
const LIMIT: Duration = Duration::from_secs(15);

/// Emulated devices of `models`, each a client of `b` (with `options` applied to each spec).
fn devices(b: &Broker, models: &[&str], options: impl Fn(&mut MqttSpec)) -> Emulator {
    let specs = models
        .iter()
        .map(|m| {
            let mut d = DeviceSpec::new(m);
            let mut spec = MqttSpec::new(&b.address());
            options(&mut spec);
            d.mqtt = Some(spec);
            d
        })
        .collect();
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator starts");
    for i in 0..emu.len() {
        assert!(
            eventually(LIMIT, || emu.mqtt_connected(i)),
            "device {i} connects to the broker"
        );
    }
    emu
}

/// The configuration: `mqtt` is the body of the `Mqtt` block; device i is `blocks[i]` with `Channel: mqtt` and
/// its emulated topic.
fn settings(emu: &Emulator, mqtt: &str, blocks: &[&str], extra: &str) -> Settings {
    let mut yaml = format!(
        "SmartDevices:\n  ResponseTimeout: 0.5\n  RetryCount: 1\n  RetryDelay: 0.05\n  RefreshInterval: 0\n  FollowMoves: false\n{extra}  Mqtt: {{{mqtt}}}\n  Devices:\n"
    );
    for (i, b) in blocks.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{{b}, Channel: mqtt, MqttTopic: '{}'}}\n",
            emu.mqtt_topic(i).expect("an MQTT device")
        ));
    }
    Settings::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn open(emu: &Emulator, b: &Broker, blocks: &[&str]) -> Controller {
    let mqtt = format!("Host: 127.0.0.1, Port: {}, ClientId: ctl-a", b.port);
    Controller::open(settings(emu, &mqtt, blocks, ""), None).expect("controller opens")
}

const PLUS: &str = "Name: Hall, Model: ShellyPlus1PM, Inputs: [{Name: Hall In, Webhooks: true}], Outputs: [{Name: Hall Light, Webhooks: true}]";
const PLUG: &str = "Name: Plug, Model: Tasmota, Outputs: [{Name: Plug Relay}], Meters: [{Name: Plug Meter}]";

fn state(ctl: &Controller, output: &str) -> Option<bool> {
    ctl.output(Identity::name(output)).unwrap().state
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn gen2_is_read_and_switched_over_mqtt() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM"], |_| {});
    emu.set_output(0, 0, true);
    emu.set_load(0, 0, 42.5);
    let ctl = open(&emu, &b, &[PLUS]);
    let dev = ctl.device("Hall").unwrap();
    assert!(dev.online, "{:?}", dev.last_error);
    assert_eq!(dev.transport, Some(smartdev::Transport::Mqtt));
    assert_eq!(dev.hostname, None);
    assert_eq!(
        dev.mac_address,
        Some(emu.mac(0)),
        "Shelly.GetDeviceInfo stands for /shelly"
    );
    assert_eq!(state(&ctl, "Hall Light"), Some(true));
    assert_eq!(dev.meters[0].power, Some(42.5));
    let off = ctl.change_output(Identity::name("Hall Light"), false).unwrap();
    assert!(!off.state && off.did_change);
    assert!(!emu.output(0, 0), "the device switched");
    let again = ctl.change_output(Identity::name("Hall Light"), false).unwrap();
    assert!(!again.state && !again.did_change);
    let toggled = ctl.toggle_output(Identity::name("Hall Light")).unwrap();
    assert!(toggled.state && toggled.did_change && emu.output(0, 0));
    // Nothing went over HTTP.
    assert_eq!(emu.ws_requests(0), 0);
    assert!(
        emu.counts(0).keys().all(|k| !k.starts_with("GET ")),
        "{:?}",
        emu.counts(0)
    );
    ctl.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn tasmota_is_read_and_switched_over_mqtt() {
    let b = Broker::start();
    let emu = devices(&b, &["Tasmota"], |_| {});
    emu.set_output(0, 0, true);
    emu.set_load(0, 0, 230.0);
    let ctl = open(&emu, &b, &[PLUG]);
    let dev = ctl.device("Plug").unwrap();
    assert!(dev.online, "{:?}", dev.last_error);
    assert_eq!(dev.transport, Some(smartdev::Transport::Mqtt));
    assert_eq!(dev.mac_address, Some(emu.mac(0)));
    assert_eq!(state(&ctl, "Plug Relay"), Some(true));
    assert_eq!(dev.meters[0].power, Some(230.0));
    let off = ctl.change_output(Identity::name("Plug Relay"), false).unwrap();
    assert!(!off.state && off.did_change);
    assert!(!emu.output(0, 0));
    let again = ctl.change_output(Identity::name("Plug Relay"), false).unwrap();
    assert!(!again.state && !again.did_change);
    let toggled = ctl.toggle_output(Identity::name("Plug Relay")).unwrap();
    assert!(toggled.state && toggled.did_change && emu.output(0, 0));
    ctl.close();
}
