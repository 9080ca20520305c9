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
const PLUG: &str =
    "Name: Plug, Model: Tasmota, Outputs: [{Name: Plug Relay}], Meters: [{Name: Plug Meter}]";

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
    let off = ctl
        .change_output(Identity::name("Hall Light"), false)
        .unwrap();
    assert!(!off.state && off.did_change);
    assert!(!emu.output(0, 0), "the device switched");
    let again = ctl
        .change_output(Identity::name("Hall Light"), false)
        .unwrap();
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

/// A firmware update's course comes over the broker as over the WebSocket (`events/rpc`): the download's
/// percents, then a failure the device reports ends the update at once with its reason.
#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn gen2_tells_its_update_over_mqtt() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM"], |_| {});
    emu.set_firmware_offer(0, Some("9.9.9"), None);
    emu.set_update_outcome(0, smartdev::emulator::UpdateOutcome::DownloadFails);
    let ctl = open(&emu, &b, &[PLUS]);
    let before = emu.firmware_version(0);
    let mut seen = Vec::new();
    let r = ctl.update_firmware_with(
        "Hall",
        &smartdev::UpdateOptions {
            timeout: Duration::from_secs(600),
            ..Default::default()
        },
        |p| seen.push(p.clone()),
    );
    // The 600 s timeout is never waited for: the device's ota_error ends it.
    match r {
        Err(smartdev::Error::Firmware {
            failure: smartdev::UpdateFailure::Failed,
            ..
        }) => {}
        other => panic!("{other:?}; progress {seen:?}"),
    }
    let percents: Vec<u8> = seen
        .iter()
        .filter_map(|p| match p {
            smartdev::UpdateProgress::Downloading { percent } => *percent,
            _ => None,
        })
        .collect();
    assert!(percents.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(percents.iter().all(|p| *p < 50), "failed halfway: {seen:?}");
    assert_eq!(emu.firmware_version(0), before);
    assert!(ctl.device("Hall").unwrap().online);
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
    let off = ctl
        .change_output(Identity::name("Plug Relay"), false)
        .unwrap();
    assert!(!off.state && off.did_change);
    assert!(!emu.output(0, 0));
    let again = ctl
        .change_output(Identity::name("Plug Relay"), false)
        .unwrap();
    assert!(!again.state && !again.did_change);
    let toggled = ctl.toggle_output(Identity::name("Plug Relay")).unwrap();
    assert!(toggled.state && toggled.did_change && emu.output(0, 0));
    ctl.close();
}

/// The events queued so far, as `(event, channel)`.
fn events(ctl: &Controller, out: &mut Vec<(String, EventChannel)>) {
    while let Some(e) = ctl.pull_webhook_event() {
        out.push((e.event, e.channel));
    }
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn gen2_notifications_reach_the_snapshot_and_the_events_exactly_once() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM"], |_| {});
    let wake = smartdev::WakeFlag::new();
    let mqtt = format!("Host: 127.0.0.1, Port: {}, ClientId: ctl-a", b.port);
    let ctl = Controller::open(settings(&emu, &mqtt, &[PLUS], ""), Some(wake.clone())).unwrap();
    assert_eq!(state(&ctl, "Hall Light"), Some(false));
    emu.set_output(0, 0, true);
    assert!(eventually(LIMIT, || state(&ctl, "Hall Light") == Some(true)));
    emu.set_input(0, 0, true);
    assert!(eventually(LIMIT, || {
        ctl.input(Identity::name("Hall In")).unwrap().state == Some(true)
    }));
    emu.set_load(0, 0, 17.0);
    assert!(eventually(LIMIT, || {
        ctl.device("Hall").unwrap().meters[0].power == Some(17.0)
    }));
    assert_eq!(
        emu.fire_event(0, "input.button_push", 0),
        0,
        "no webhooks are installed over MQTT"
    );
    assert!(wake.wait(LIMIT), "the wake flag is set");
    let mut got = Vec::new();
    assert!(eventually(LIMIT, || {
        events(&ctl, &mut got);
        got.len() >= 3
    }));
    // A last change: once its event is in, a twin of any earlier one would be in too (one queue, in order).
    emu.set_output(0, 0, false);
    assert!(eventually(LIMIT, || {
        events(&ctl, &mut got);
        got.iter().any(|(e, _)| e == "switch.off")
    }));
    let names: Vec<&str> = got.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        [
            "switch.on",
            "input.toggle_on",
            "input.button_push",
            "switch.off"
        ],
        "{got:?}"
    );
    assert!(got.iter().all(|(_, c)| *c == EventChannel::Mqtt), "{got:?}");
    ctl.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn tasmota_changes_and_telemetry_reach_the_snapshot() {
    let b = Broker::start();
    let clock = smartdev::emulator::EmuClock::manual();
    let mut d = DeviceSpec::new("Tasmota");
    d.mqtt = Some(MqttSpec::new(&b.address()));
    let emu =
        Emulator::start_with_clock(vec![d], &ModelLibrary::embedded(), clock.clone()).unwrap();
    assert!(eventually(LIMIT, || emu.mqtt_connected(0)));
    let ctl = open(&emu, &b, &[PLUG]);
    assert_eq!(state(&ctl, "Plug Relay"), Some(false));
    // A relay switched at the device: its `stat/…/RESULT` is the news.
    emu.set_output(0, 0, true);
    assert!(eventually(LIMIT, || state(&ctl, "Plug Relay") == Some(true)));
    // Power comes with the telemetry (every TelePeriod, 300 s by default, on the emulator's clock).
    emu.set_load(0, 0, 1234.0);
    let power = || ctl.device("Plug").unwrap().meters[0].power;
    assert_ne!(power(), Some(1234.0));
    clock.advance(Duration::from_secs(300));
    assert!(
        eventually(LIMIT, || power() == Some(1234.0)),
        "{:?}",
        power()
    );
    ctl.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_last_will_takes_the_device_offline_and_its_return_reads_it_again() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM", "Tasmota"], |_| {});
    let ctl = open(&emu, &b, &[PLUS, PLUG]);
    let online = |name: &str| ctl.device(name).unwrap().online;
    assert!(online("Hall") && online("Plug"));
    for i in 0..2 {
        emu.mqtt_pause(i, true);
    }
    assert!(eventually(LIMIT, || !online("Hall") && !online("Plug")));
    for name in ["Hall", "Plug"] {
        let why = ctl.device(name).unwrap().last_error.unwrap_or_default();
        assert!(why.contains("announced itself offline"), "{name}: {why}");
    }
    // Changed while away: the read at its return sees it.
    emu.set_output(0, 0, true);
    emu.set_output(1, 0, true);
    for i in 0..2 {
        emu.mqtt_pause(i, false);
    }
    assert!(eventually(LIMIT, || online("Hall") && online("Plug")));
    assert!(eventually(LIMIT, || state(&ctl, "Hall Light")
        == Some(true)
        && state(&ctl, "Plug Relay") == Some(true)));
    ctl.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_broker_restart_loses_no_acknowledged_command_and_the_reread_sees_what_changed() {
    let mut b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM", "Tasmota"], |_| {});
    let ctl = open(&emu, &b, &[PLUS, PLUG]);
    let acked = ctl
        .change_output(Identity::name("Hall Light"), true)
        .unwrap();
    assert!(acked.state);
    b.kill();
    let online = |name: &str| ctl.device(name).unwrap().online;
    assert!(eventually(LIMIT, || !online("Hall") && !online("Plug")));
    // Refused, not acknowledged, while the broker is away: it says why.
    let e = ctl
        .change_output(Identity::name("Plug Relay"), true)
        .unwrap_err();
    assert!(e.to_string().contains("MQTT broker"), "{e}");
    // Changed meanwhile, where nobody was listening.
    emu.set_output(1, 0, true);
    emu.set_output(0, 0, false);
    emu.set_output(0, 0, true);
    b.restart();
    assert!(eventually(LIMIT, || emu.mqtt_connected(0) && emu.mqtt_connected(1)));
    assert!(eventually(LIMIT, || online("Hall") && online("Plug")));
    assert!(eventually(LIMIT, || state(&ctl, "Plug Relay") == Some(true)));
    assert_eq!(state(&ctl, "Hall Light"), Some(true));
    assert!(emu.output(0, 0), "the acknowledged command stands");
    // Commands work again.
    let off = ctl
        .change_output(Identity::name("Plug Relay"), false)
        .unwrap();
    assert!(off.did_change && !emu.output(1, 0));
    ctl.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn two_controllers_on_one_broker_get_their_own_answers() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM", "ShellyPlus1PM"], |_| {});
    let second = "Name: Porch, Model: ShellyPlus1PM, Outputs: [{Name: Porch Light}]";
    let with = |id: &str, blocks: &[&str]| {
        let mqtt = format!("Host: 127.0.0.1, Port: {}, ClientId: {id}", b.port);
        Controller::open(settings(&emu, &mqtt, blocks, ""), None).unwrap()
    };
    // Both name their first device ID 1: the client ids keep their answers apart.
    let a = with("site-a", &[PLUS]);
    let c = with("site-b", &[PLUS, second]);
    std::thread::scope(|s| {
        let (a, c) = (&a, &c);
        let one = s.spawn(move || {
            for i in 0..20 {
                let on = i % 2 == 0;
                let r = a.change_output(Identity::name("Hall Light"), on).unwrap();
                assert_eq!(r.state, on);
            }
        });
        for _ in 0..20 {
            c.read_device("Hall").unwrap();
        }
        one.join().unwrap();
    });
    assert!(a.device("Hall").unwrap().online && c.device("Hall").unwrap().online);
    // A switch through one controller is news to the other one (the device notifies both).
    c.change_output(Identity::name("Hall Light"), true).unwrap();
    assert!(eventually(LIMIT, || state(&a, "Hall Light") == Some(true)));
    a.close();
    c.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_broker_with_a_login_and_a_wrong_password_says_what_to_fix() {
    let b = Broker::start_with(BrokerOptions {
        login: Some(("site".into(), "s3cret-pw".into())),
        ..BrokerOptions::default()
    });
    let emu = devices(&b, &["ShellyPlus1PM"], |s| {
        s.user = Some("site".into());
        s.password = Some("s3cret-pw".into());
    });
    let right = format!(
        "Host: 127.0.0.1, Port: {}, User: site, Password: s3cret-pw",
        b.port
    );
    let s = settings(&emu, &right, &[PLUS], "");
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("s3cret-pw"),
        "Debug shows no password: {shown}"
    );
    let ctl = Controller::open(s, None).unwrap();
    assert!(ctl.device("Hall").unwrap().online);
    ctl.close();

    let wrong = format!(
        "Host: 127.0.0.1, Port: {}, User: site, Password: not-it",
        b.port
    );
    let ctl = Controller::open(settings(&emu, &wrong, &[PLUS], ""), None).unwrap();
    let dev = ctl.device("Hall").unwrap();
    assert!(!dev.online);
    let why = dev.last_error.unwrap_or_default();
    assert!(
        why.contains("refused") && why.contains("Mqtt: User and Password"),
        "{why}"
    );
    assert!(!why.contains("not-it"), "{why}");
    ctl.close();
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_broker_over_tls_is_verified_against_its_ca() {
    let b = Broker::start_with(BrokerOptions {
        tls: true,
        ..BrokerOptions::default()
    });
    let ca = b.ca_file();
    let emu = devices(&b, &["ShellyPlus1PM", "Tasmota"], |s| {
        s.ca_file = Some(ca.clone());
    });
    let mqtt = format!(
        "Host: 127.0.0.1, Port: {}, Tls: true, CaFile: '{}'",
        b.port,
        ca.display()
    );
    let ctl = Controller::open(settings(&emu, &mqtt, &[PLUS, PLUG], ""), None).unwrap();
    assert!(ctl.device("Hall").unwrap().online);
    assert!(ctl.device("Plug").unwrap().online);
    let on = ctl
        .change_output(Identity::name("Plug Relay"), true)
        .unwrap();
    assert!(on.did_change && emu.output(1, 0));
    emu.set_output(0, 0, true);
    assert!(eventually(LIMIT, || state(&ctl, "Hall Light") == Some(true)));
    ctl.close();

    // Another CA: the broker's certificate is refused, and the message says so.
    let dir = common::TempDir::new("other-ca");
    let other = dir.write(
        "ca.pem",
        smartdev::emulator::CertAuthority::new("someone else").pem(),
    );
    let mqtt = format!(
        "Host: 127.0.0.1, Port: {}, Tls: true, CaFile: '{}'",
        b.port,
        other.display()
    );
    let ctl = Controller::open(settings(&emu, &mqtt, &[PLUS], ""), None).unwrap();
    let why = ctl.device("Hall").unwrap().last_error.unwrap_or_default();
    assert!(why.contains("certificate"), "{why}");
    ctl.close();
}

/// Publishes every line of `lines` as one message on `topic` (one `mosquitto_pub` process).
fn flood(b: &Broker, topic: &str, lines: usize, line: &str) -> std::process::Child {
    use std::io::Write as _;
    let mut child = std::process::Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &b.port.to_string(),
            "-t",
            topic,
            "-l",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("mosquitto_pub");
    let mut stdin = child.stdin.take().unwrap();
    let text: String = (0..lines).map(|_| format!("{line}\n")).collect();
    std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    child
}

/// Kills a child process when dropped (also on panic).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn hostile_payloads_on_device_topics_change_nothing_and_a_flood_delays_no_other_device() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM", "Tasmota"], |_| {});
    let ctl = open(&emu, &b, &[PLUS, PLUG]);
    let hall = emu.mqtt_topic(0).unwrap().to_string();
    let plug = emu.mqtt_topic(1).unwrap().to_string();
    let deep = "[".repeat(100_000);
    let huge = format!(
        r#"{{"method":"NotifyStatus","params":{{"switch:0":{{"output":true}},"x":"{}"}}}}"#,
        "x".repeat(100_000)
    );
    let hostile = [
        (format!("{hall}/events/rpc"), huge.as_str()),
        (format!("{hall}/events/rpc"), deep.as_str()),
        (format!("{hall}/events/rpc"), "not json"),
        (
            format!("{hall}/events/rpc"),
            r#"{"method":"NotifyStatus","params":{"switch:0":{"output":"yes"},"input:99":{"state":true}}}"#,
        ),
        (
            format!("{hall}/events/rpc"),
            r#"{"method":"NotifyStatus","params":[]}"#,
        ),
        (format!("{hall}/online"), "maybe"),
        ("ctl-a/1/rpc".to_string(), r#"{"id":"x","result":{}}"#),
        (
            "ctl-a/1/rpc".to_string(),
            r#"{"id":99999,"result":{"was_on":true}}"#,
        ),
        ("ctl-a/1/rpc".to_string(), deep.as_str()),
        (
            format!("stat/{plug}/RESULT"),
            r#"{"POWER1":5,"POWER9999999999999":"ON"}"#,
        ),
        (format!("stat/{plug}/RESULT"), deep.as_str()),
        (format!("tele/{plug}/STATE"), "[]"),
        (
            format!("tele/{plug}/SENSOR"),
            r#"{"ENERGY":{"Power":"lots","Total":[1,2,{}]}}"#,
        ),
        (format!("tele/{plug}/LWT"), "Sideways"),
    ];
    for (topic, payload) in &hostile {
        b.publish(topic, payload, false);
    }
    // Still served, still right.
    assert_eq!(state(&ctl, "Hall Light"), Some(false));
    let on = ctl
        .change_output(Identity::name("Hall Light"), true)
        .unwrap();
    assert!(on.did_change && emu.output(0, 0));
    let plug_on = ctl
        .change_output(Identity::name("Plug Relay"), true)
        .unwrap();
    assert!(plug_on.did_change);
    assert!(ctl.device("Hall").unwrap().online && ctl.device("Plug").unwrap().online);

    // One device floods its notification topic; the other's change still arrives meanwhile.
    let _flood = Reaped(flood(
        &b,
        &format!("{hall}/events/rpc"),
        200_000,
        r#"{"method":"NotifyStatus","params":{"switch:0":{"id":0,"apower":1.0}}}"#,
    ));
    emu.set_output(1, 0, false);
    assert!(eventually(LIMIT, || state(&ctl, "Plug Relay") == Some(false)));
    // And the flooder's own state is caught up once it is read.
    emu.set_output(0, 0, false);
    assert!(eventually(LIMIT, || {
        ctl.read_device("Hall").is_ok() && state(&ctl, "Hall Light") == Some(false)
    }));
    ctl.close();
}

/// Configuration problems of the MQTT channel, each with its fix (no broker needed).
#[test]
fn mqtt_configuration_problems_name_the_fix() {
    let load = |root: &str, device: &str| {
        Settings::from_yaml_str(&format!(
            "SmartDevices:\n{root}  Devices:\n    - {{Name: X, {device}}}\n"
        ))
    };
    // Schema problems fail the load; installation rules are `check`'s (and `open`'s).
    let problem = |root: &str, device: &str| match load(root, device) {
        Ok(s) => {
            let found: Vec<String> = s.check().iter().map(|p| p.to_string()).collect();
            assert!(!found.is_empty(), "accepted: {root} {device}");
            found.join("\n")
        }
        Err(e) => e.to_string(),
    };
    let broker = "  Mqtt: {Host: broker.local}\n";
    // No Hostname needed; the default topics come from the MAC.
    let s = load(
        broker,
        "Model: ShellyPlus1PM, Channel: mqtt, MAC: A8:03:2A:B1:23:45",
    )
    .unwrap();
    let m = s.mqtt.as_ref().unwrap();
    assert_eq!((m.port, m.keep_alive), (1883, Duration::from_secs(30)));
    assert!(m.client_id.starts_with("smartdev-"), "{}", m.client_id);
    assert!(s.check().is_empty(), "{:?}", s.check());
    assert_eq!(s.device_channels(), [("X".to_string(), "mqtt")]);
    let e = problem("", "Model: ShellyPlus1PM, Channel: mqtt, MqttTopic: x");
    assert!(e.contains("add an Mqtt block"), "{e}");
    let e = problem(broker, "Model: ShellyPlus1PM, Channel: mqtt");
    assert!(e.contains("MqttTopic") && e.contains("MAC"), "{e}");
    let e = problem(
        broker,
        "Model: ShellyPlus1PM, Channel: mqtt, MqttTopic: 'a/+/b'",
    );
    assert!(e.contains("not a usable MQTT topic"), "{e}");
    let e = problem(
        broker,
        "Model: Shelly1, Channel: mqtt, MqttTopic: shelly1-x",
    );
    assert!(e.contains("Gen1") && e.contains("Channel: http"), "{e}");
    let e = problem(
        broker,
        "Model: Tasmota, Channel: mqtt, MqttTopic: p, MqttFullTopic: '%topic%/x'",
    );
    assert!(e.contains("%prefix%"), "{e}");
    let e = problem(
        "  Mqtt: {Host: broker.local, Tls: true}\n",
        "Model: Tasmota, Channel: mqtt, MqttTopic: p",
    );
    assert!(e.contains("CaFile"), "{e}");
    let e = problem(
        "  Mqtt: {Host: broker.local, ClientId: 'a/b'}\n",
        "Model: Tasmota, Channel: mqtt, MqttTopic: p",
    );
    assert!(e.contains("ClientId"), "{e}");
    let e = problem(
        "  Mqtt: {Host: broker.local, Pasword: x}\n",
        "Model: Tasmota, Channel: mqtt, MqttTopic: p",
    );
    assert!(e.contains("Password"), "did you mean: {e}");
    // TLS moves the default port.
    let s = load(
        "  Mqtt: {Host: broker.local, Tls: true, CaFile: ca.pem}\n",
        "Model: Tasmota, Channel: mqtt, MqttTopic: p",
    )
    .unwrap();
    assert_eq!(s.mqtt.unwrap().port, 8883);
}

fn sdctl(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args(args)
        .output()
        .expect("sdctl runs")
}

/// sdctl goes through the Controller, so every command works over MQTT; `check` says who uses which channel
/// and never shows the password.
#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn sdctl_checks_reads_and_switches_over_mqtt() {
    let b = Broker::start_with(BrokerOptions {
        login: Some(("site".into(), "pw-9f2".into())),
        ..BrokerOptions::default()
    });
    let emu = devices(&b, &["ShellyPlus1PM", "Tasmota"], |s| {
        s.user = Some("site".into());
        s.password = Some("pw-9f2".into());
    });
    let dir = common::TempDir::new("mqtt-cli");
    let cfg = dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:\n  ResponseTimeout: 2\n  Mqtt: {{Host: 127.0.0.1, Port: {}, User: site, Password: pw-9f2, ClientId: cli}}\n  Devices:\n    - {{{PLUS}, Channel: mqtt, MqttTopic: '{}'}}\n    - {{{PLUG}, Channel: mqtt, MqttTopic: '{}'}}\n    - {{Name: Sim, Model: Tasmota, Simulate: true}}\n",
            b.port,
            emu.mqtt_topic(0).unwrap(),
            emu.mqtt_topic(1).unwrap()
        ),
    );
    let cfg = cfg.to_str().unwrap();
    let o = sdctl(&["--config", cfg, "check"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "channel mqtt (broker 127.0.0.1:{}, client id cli, user site): Hall, Plug",
            b.port
        )) && out.contains("channel simulated: Sim"),
        "{out}"
    );
    assert!(!out.contains("pw-9f2"), "{out}");
    let o = sdctl(&["--config", cfg, "--json", "check"]);
    let checked: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        checked["Channels"],
        serde_json::json!([
            {"Device": "Hall", "Channel": "mqtt"},
            {"Device": "Plug", "Channel": "mqtt"},
            {"Device": "Sim", "Channel": "simulated"}
        ])
    );
    let o = sdctl(&["--config", cfg, "--json", "status"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for d in &all.as_array().unwrap()[..2] {
        assert_eq!(d["Online"], true, "{d}");
        assert_eq!(d["Transport"], "mqtt", "{d}");
    }
    let o = sdctl(&["--config", cfg, "set", "Plug Relay", "on"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(emu.output(1, 0));
    let o = sdctl(&["--config", cfg, "set", "Hall Light", "toggle"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(emu.output(0, 0));
}

/// The README's "Devices behind a broker" example is valid as pasted (with its CA file beside it and its
/// password variable set), and `sdctl check` lists its devices on the MQTT channel without the password.
#[test]
fn the_readme_broker_example_is_valid() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .find("## Devices behind a broker")
        .expect("README has the broker section");
    let start = section + readme[section..].find("```yaml\n").unwrap() + 8;
    let end = start + readme[start..].find("```").unwrap();
    let dir = common::TempDir::new("mqtt-readme");
    dir.write(
        "broker-ca.pem",
        smartdev::emulator::CertAuthority::new("readme CA").pem(),
    );
    let cfg = dir.write("devices.yaml", &readme[start..end]);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args(["--config", cfg.to_str().unwrap(), "check"])
        .env("SMARTDEV_MQTT_PASSWORD", "readme-pw-1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("channel mqtt (broker broker.example.net:8883 over TLS, client id smartdev-site-1, user smartdev-site-1): Hall, Barn, Plug, Pump"),
        "{out}"
    );
    assert!(!out.contains("readme-pw-1"), "{out}");
}

/// Covers over MQTT: a Gen2+ cover (RPC `Cover.*` through the broker) and a Tasmota shutter (`ShutterOpen1`,
/// `ShutterPosition1` on `cmnd/…`), moved and read back on the emulator's clock.
#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn covers_move_over_mqtt() {
    use smartdev::{CoverAction, CoverState};
    let b = Broker::start();
    let clock = smartdev::emulator::EmuClock::manual();
    let mut gen2 = DeviceSpec::new("Shelly2PMG4");
    gen2.profile = Some("cover".into());
    let mut tasmota = DeviceSpec::new("Tasmota");
    tasmota.shutters = 1;
    for d in [&mut gen2, &mut tasmota] {
        d.mqtt = Some(MqttSpec::new(&b.address()));
    }
    let emu = Emulator::start_with_clock(
        vec![gen2, tasmota],
        &ModelLibrary::embedded(),
        clock.clone(),
    )
    .unwrap();
    assert!(eventually(LIMIT, || emu.mqtt_connected(0) && emu.mqtt_connected(1)));
    let ctl = open(
        &emu,
        &b,
        &[
            "Name: Blinds, Model: Shelly2PMG4, Profile: cover, Covers: [{Name: Terrace}]",
            "Name: Shade, Model: Tasmota, Covers: [{Name: Awning}]",
        ],
    );
    for (device, cover) in [("Blinds", "Terrace"), ("Shade", "Awning")] {
        let c = ctl.cover(Identity::name(cover)).unwrap();
        assert_eq!(c.position, Some(0.0), "{cover}: {c:?}");
        let c = ctl
            .move_cover(Identity::name(cover), CoverAction::Open)
            .unwrap();
        assert_eq!(c.state, Some(CoverState::Opening), "{cover}");
        clock.advance(Duration::from_secs(60));
        ctl.read_device(device).unwrap();
        let c = ctl.cover(Identity::name(cover)).unwrap();
        assert_eq!(c.position, Some(100.0), "{cover}: {c:?}");
        ctl.move_cover(Identity::name(cover), CoverAction::Position(30))
            .unwrap();
        clock.advance(Duration::from_secs(60));
        ctl.read_device(device).unwrap();
        let c = ctl.cover(Identity::name(cover)).unwrap();
        assert_eq!(c.position, Some(30.0), "{cover}: {c:?}");
    }
    ctl.close();
}

/// Thaws a frozen broker when dropped (also on panic), so its own drop can kill it.
struct Thaw<'a>(&'a Broker);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.freeze(false);
    }
}

/// A broker that goes silent without closing anything (hung, or a path that drops packets): the keep-alive's
/// unanswered PINGREQ ends the connection, the devices go offline with the reason, and when the broker answers
/// again everything is reconnected and read.
#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_silent_broker_is_found_out_by_the_keep_alive() {
    let b = Broker::start();
    let emu = devices(&b, &["ShellyPlus1PM"], |_| {});
    let mqtt = format!(
        "Host: 127.0.0.1, Port: {}, ClientId: ctl-k, KeepAlive: 5",
        b.port
    );
    let ctl = Controller::open(settings(&emu, &mqtt, &[PLUS], ""), None).unwrap();
    assert!(ctl.device("Hall").unwrap().online);
    b.freeze(true);
    let thaw = Thaw(&b);
    assert!(eventually(LIMIT, || !ctl.device("Hall").unwrap().online));
    let why = ctl.device("Hall").unwrap().last_error.unwrap_or_default();
    assert!(why.contains("PINGRESP"), "{why}");
    drop(thaw);
    assert!(eventually(LIMIT, || emu.mqtt_connected(0)));
    assert!(eventually(LIMIT, || ctl.device("Hall").unwrap().online));
    ctl.close();
}
