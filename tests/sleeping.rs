//! Battery devices that sleep (issue 26 §3): they report through the outbound WebSocket served on the webhook
//! listener, stay `Sleeping` (not offline) with their last readings, refuse commands at once, and go offline
//! only when they miss their period by the margin. Hostile connections to the server (unknown devices, a
//! configured id with another MAC, junk and oversized frames) are dropped without touching anyone else.
//! (Own test binary: it installs a capturing logger.)

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Mutex, Once};
use std::time::Duration;

use common::eventually;
use smartdev::emulator::{DeviceSpec, EmuClock, Emulator};
use smartdev::ws::frame::{self, Opcode};
use smartdev::{Controller, Error, Identity, ModelLibrary, SensorQuantity, Settings};

const LIMIT: Duration = Duration::from_secs(15);
const HOOKS: &str = "  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n";

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        !m.target().starts_with("ureq")
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let line = format!("{} {}", record.level(), record.args());
            LINES.lock().unwrap().push(line);
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

fn warnings_containing(text: &str) -> usize {
    let lines = LINES.lock().unwrap();
    lines
        .iter()
        .filter(|l| l.starts_with("WARN") && l.contains(text))
        .count()
}

fn name(n: &str) -> Identity {
    Identity::name(n)
}

/// A controller for `devices` (YAML flow mappings, complete) with the listener on a free loopback port.
fn open(devices: &[String], extra: &str) -> Controller {
    let refresh = if extra.contains("RefreshInterval") {
        ""
    } else {
        "  RefreshInterval: 0\n"
    };
    let mut yaml = format!(
        "SmartDevices:\n{}{refresh}{HOOKS}{extra}  Devices:\n",
        common::emu::FAST
    );
    for d in devices {
        yaml.push_str(&format!("    - {d}\n"));
    }
    let s = Settings::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    Controller::open(s, None).expect("controller opens")
}

/// A sleeping H&T Gen3 on a manual clock, waking every 2 h, with readings set.
fn sleeping_ht() -> (Emulator, EmuClock) {
    let clock = EmuClock::manual();
    let spec = DeviceSpec {
        sleep: Some(Duration::from_secs(7200)),
        ..DeviceSpec::new("ShellyHTG3")
    };
    let emu = Emulator::start_with_clock(vec![spec], &ModelLibrary::embedded(), clock.clone())
        .expect("emulator starts");
    emu.set_sensor(0, SensorQuantity::Temperature, 0, Some(21.5));
    emu.set_sensor(0, SensorQuantity::Humidity, 0, Some(48.0));
    emu.set_battery(0, 73.0);
    (emu, clock)
}

fn ht_block(emu: &Emulator, extra: &str) -> String {
    format!(
        "{{Name: HT, Model: ShellyHTG3, MAC: '{}', Hostname: 127.0.0.1, Port: {}{extra}}}",
        emu.mac(0),
        emu.port(0)
    )
}

fn sensor(ctl: &Controller, device: &str, q: SensorQuantity) -> Option<f64> {
    let d = ctl.device(name(device)).unwrap();
    d.sensors
        .iter()
        .find(|s| s.quantity == q)
        .and_then(|s| s.value)
}

/// A WebSocket client of the listener's outbound server, as a device would be.
struct Client(TcpStream);

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        write!(
            s,
            "GET /shelly/ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut b).unwrap(), 1, "the upgrade is answered");
            head.push(b[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.contains(&smartdev::ws::accept_key(key)), "{head}");
        Client(s)
    }

    fn send(&mut self, op: Opcode, payload: &[u8]) {
        let _ = self
            .0
            .write_all(&frame::encode(op, true, payload, Some([7, 1, 3, 9])));
    }

    fn text(&mut self, v: &serde_json::Value) {
        self.send(Opcode::Text, v.to_string().as_bytes());
    }

    /// Waits until the server ends the connection (close frame, then EOF).
    fn ended(mut self) -> bool {
        let mut buf = [0u8; 256];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    }
}

fn report(id: &str, mac: &str, celsius: f64) -> serde_json::Value {
    serde_json::json!({"src": id, "dst": "ws", "method": "NotifyFullStatus", "params": {
        "ts": 1.0, "sys": {"mac": mac, "wakeup_period": 7200},
        "temperature:0": {"id": 0, "tC": celsius}, "humidity:0": {"id": 0, "rh": 50.0},
        "devicepower:0": {"id": 0, "battery": {"V": 5.5, "percent": 80}}}})
}

#[test]
fn a_sleeping_ht_reports_through_the_outbound_websocket_and_is_asleep_not_offline() {
    capture();
    let (emu, clock) = sleeping_ht();
    // Its button held for setup: the first contact at open finds it awake and installs our server.
    emu.set_awake(0, true);
    let ctl = open(&[ht_block(&emu, "")], "");
    let port = ctl.webhook_address().unwrap().port();
    assert_eq!(
        emu.ws_server(0).as_deref(),
        Some(format!("ws://127.0.0.1:{port}/shelly/ws").as_str())
    );
    let d = ctl.device(name("HT")).unwrap();
    assert_eq!(d.restart_required, Some(true), "Ws.SetConfig asks for it");
    assert!(d.sleeping && d.online, "{d:?}");
    assert!(d.last_seen.is_some());
    assert_eq!(d.wakeup_period, Some(7200));

    // Released, it sleeps: its port refuses connections.
    emu.set_awake(0, false);
    assert!(TcpStream::connect(("127.0.0.1", emu.port(0))).is_err());
    emu.set_sensor(0, SensorQuantity::Temperature, 0, Some(19.5));
    emu.set_battery(0, 72.0);
    clock.advance(Duration::from_secs(7200));
    assert!(eventually(LIMIT, || emu.ws_reports(0) == 1));
    let ok = eventually(LIMIT, || {
        sensor(&ctl, "HT", SensorQuantity::Temperature) == Some(19.5)
    });
    assert!(ok, "{:?}", ctl.device(name("HT")).unwrap());
    let d = ctl.device(name("HT")).unwrap();
    assert!(d.sleeping && d.online, "asleep is not offline: {d:?}");
    assert_eq!(d.battery, Some(72.0));
    assert_eq!(sensor(&ctl, "HT", SensorQuantity::Humidity), Some(48.0));
    assert_eq!(d.last_error, None);

    // Commands fail at once with the typed error: nothing is sent (the device would not answer anyway).
    let before = emu.total_requests(0);
    let e = ctl.read_device(name("HT")).unwrap_err();
    assert!(matches!(e, Error::Sleeping { .. }), "{e}");
    assert!(e.to_string().contains("asleep"), "{e}");
    let report = ctl.refresh_all().unwrap();
    assert!(matches!(report.failures[0].error, Error::Sleeping { .. }));
    assert_eq!(emu.total_requests(0), before);
    let text = ctl.print_device_status(Some(&name("HT"))).unwrap();
    assert!(text.contains("asleep, last heard"), "{text}");
    assert!(
        text.contains("72 %") && text.contains("every 2 h"),
        "{text}"
    );
    assert!(!text.contains("None") && !text.contains("true"), "{text}");
}

#[test]
fn missing_its_period_by_the_margin_makes_it_offline_and_a_report_brings_it_back() {
    capture();
    let (emu, _clock) = sleeping_ht();
    // ReportPeriod 2 s: offline after 2.4 s + 1 s of silence. Background checks every 0.1 s.
    let ctl = open(
        &[ht_block(&emu, ", ReportPeriod: 2")],
        "  RefreshInterval: 0.1\n",
    );
    // Asleep at open (its first contact was refused): not offline, no error, nothing heard yet.
    let d = ctl.device(name("HT")).unwrap();
    assert!(d.sleeping && d.online && d.last_error.is_none(), "{d:?}");
    assert!(d.last_seen.is_none());
    assert!(eventually(LIMIT, || !ctl
        .device(name("HT"))
        .unwrap()
        .online));
    let d = ctl.device(name("HT")).unwrap();
    assert!(!d.sleeping);
    let why = d.last_error.unwrap_or_default();
    assert!(why.contains("no report for"), "{why}");
    assert!(eventually(LIMIT, || warnings_containing(
        "HT (ID: 1) went offline"
    ) == 1));

    // Set up by hand while awake, then woken: it reports and is asleep (online) again.
    emu.set_awake(0, true);
    let port = ctl.webhook_address().unwrap().port();
    let body = serde_json::json!({"id": 1, "method": "Ws.SetConfig", "params": {"config":
        {"enable": true, "server": format!("ws://127.0.0.1:{port}/shelly/ws")}}});
    let r = common::raw_http::request(emu.port(0), "POST", "/rpc", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.text());
    emu.set_awake(0, false);
    assert!(emu.wake(0));
    assert!(eventually(LIMIT, || {
        let d = ctl.device(name("HT")).unwrap();
        d.online && d.sleeping && d.last_seen.is_some()
    }));
}

#[test]
fn an_unknown_device_is_dropped_and_logged_once() {
    capture();
    let ctl = open(
        &["{Name: Known, Model: ShellyHTG3, MAC: '10:00:00:00:00:01'}".into()],
        "",
    );
    let addr = ctl.webhook_address().unwrap();
    for _ in 0..3 {
        let mut c = Client::connect(addr);
        c.text(&report("shellyhtg3-10000000ffff", "10000000FFFF", 5.0));
        assert!(c.ended(), "an unknown device's connection is dropped");
    }
    assert_eq!(warnings_containing("shellyhtg3-10000000ffff"), 1);
    assert_eq!(sensor(&ctl, "Known", SensorQuantity::Temperature), None);
}

#[test]
fn a_configured_id_with_another_mac_is_refused() {
    capture();
    let ctl = open(
        &["{Name: Door, Model: ShellyHTG3, MAC: '10:00:00:00:00:02'}".into()],
        "",
    );
    let addr = ctl.webhook_address().unwrap();
    let mut c = Client::connect(addr);
    c.text(&report("shellyhtg3-100000000002", "AABBCCDDEEFF", 99.0));
    assert!(c.ended(), "refused");
    assert_eq!(warnings_containing("AABBCCDDEEFF"), 1);
    // The real one is taken.
    let mut c = Client::connect(addr);
    c.text(&report("shellyhtg3-100000000002", "100000000002", 18.5));
    let ok = eventually(LIMIT, || {
        sensor(&ctl, "Door", SensorQuantity::Temperature) == Some(18.5)
    });
    assert!(
        ok,
        "{:#?}\n{:#?}",
        ctl.device(name("Door")).unwrap(),
        LINES.lock().unwrap()
    );
    c.send(Opcode::Close, &frame::close_payload(1000, ""));
    assert!(c.ended());
    assert_eq!(ctl.device(name("Door")).unwrap().battery, Some(80.0));
}

#[test]
fn junk_and_oversized_frames_are_dropped_without_affecting_other_devices() {
    capture();
    let ctl = open(
        &[
            "{Name: A, Model: ShellyHTG3, MAC: '10:00:00:00:00:0A'}".into(),
            "{Name: B, Model: ShellyHTG3, MAC: '10:00:00:00:00:0B'}".into(),
        ],
        "",
    );
    let addr = ctl.webhook_address().unwrap();
    // A healthy device stays connected while the others misbehave.
    let mut good = Client::connect(addr);
    good.text(&report("shellyhtg3-10000000000b", "10000000000B", 20.0));
    let mut junk = Client::connect(addr);
    junk.send(Opcode::Text, b"{not json");
    let mut big = Client::connect(addr);
    let mut huge = report("shellyhtg3-10000000000a", "10000000000A", 99.0);
    huge["params"]["pad"] = serde_json::json!("x".repeat(70 * 1024));
    big.text(&huge);
    let mut wrong = Client::connect(addr);
    wrong.text(&report("shellyhtg3-10000000000a", "10000000000A", 30.0));
    wrong.text(&report("shellyhtg3-10000000000b", "10000000000B", 99.0));
    assert!(junk.ended() && big.ended() && wrong.ended());
    good.text(&report("shellyhtg3-10000000000b", "10000000000B", 21.0));
    assert!(eventually(LIMIT, || sensor(
        &ctl,
        "B",
        SensorQuantity::Temperature
    ) == Some(21.0)));
    assert!(eventually(LIMIT, || sensor(
        &ctl,
        "A",
        SensorQuantity::Temperature
    ) == Some(30.0)));
    // Neither the oversized report nor the frame naming another device was taken.
    assert_ne!(sensor(&ctl, "B", SensorQuantity::Temperature), Some(99.0));
    good.send(Opcode::Close, &frame::close_payload(1000, ""));
    assert!(good.ended());
}

#[test]
fn ws_setconfig_is_installed_on_a_device_with_outbound_websocket_true() {
    capture();
    let emu = Emulator::start(
        vec![
            DeviceSpec::new("Shelly1PMG3"),
            DeviceSpec::new("Shelly1PMG3"),
        ],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let block = |n: &str, i: usize, extra: &str| {
        format!(
            "{{Name: {n}, Model: Shelly1PMG3, Hostname: 127.0.0.1, Port: {}{extra}}}",
            emu.port(i)
        )
    };
    let ctl = open(
        &[
            block("Asked", 0, ", OutboundWebsocket: true"),
            block("Mains", 1, ""),
        ],
        "",
    );
    let port = ctl.webhook_address().unwrap().port();
    assert_eq!(
        emu.ws_server(0).as_deref(),
        Some(format!("ws://127.0.0.1:{port}/shelly/ws").as_str())
    );
    assert_eq!(
        emu.ws_server(1),
        None,
        "mains devices are not asked by default"
    );
    let d = ctl.device(name("Asked")).unwrap();
    assert_eq!(d.restart_required, Some(true));
    assert!(
        !d.sleeping && d.online,
        "a mains device is polled as before"
    );
    // Both layouts and `sdctl check` know the keys.
    for yaml in [
        "SmartDevices:\n  ShellyWebhooks: {Enabled: true, WebsocketPath: /ws/in}\n  Devices:\n    - {Model: ShellyHTG3, MAC: '10:00:00:00:00:0C', ReportPeriod: 600, OutboundWebsocket: true}\n",
        "ShellyDevices:\n  WebhooksEnabled: true\n  WebhookWebsocketPath: /ws/in\n  Devices:\n    - {Model: ShellyHTG3, MAC: '10:00:00:00:00:0C', ReportPeriod: 600, OutboundWebsocket: true}\n",
    ] {
        let s = Settings::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert_eq!(s.webhooks.ws_path, "/ws/in");
        assert_eq!(s.devices[0].report_period, Some(Duration::from_secs(600)));
        assert_eq!(s.devices[0].outbound_websocket, Some(true));
    }
    let e = Settings::from_yaml_str(
        "SmartDevices:\n  ShellyWebhooks: {Enabled: true, WebsocketPath: /shelly/webhook}\n  Devices:\n    - {Model: ShellyHTG3, MAC: '10:00:00:00:00:0C', ReportPeriod: 0}\n",
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("WebsocketPath") && text.contains("ReportPeriod"),
        "{text}"
    );
}

#[test]
fn the_emulator_holds_a_sleeping_device_awake_through_its_admin_endpoint() {
    let (emu, _clock) = sleeping_ht();
    let admin = emu.admin_port();
    assert!(
        TcpStream::connect(("127.0.0.1", emu.port(0))).is_err(),
        "asleep"
    );
    let r = common::raw_http::request(admin, "POST", "/devices/0/sleep?action=hold", None);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = common::raw_http::request(emu.port(0), "GET", "/shelly", None);
    assert_eq!(r.status, 200, "awake: {}", r.text());
    let state: serde_json::Value = serde_json::from_str(
        &common::raw_http::request(admin, "GET", "/devices/0/sleep", None).text(),
    )
    .unwrap();
    assert_eq!(state["period"], 7200);
    assert_eq!(state["held_awake"], true);
    assert_eq!(state["server"], serde_json::Value::Null);
    let r = common::raw_http::request(admin, "POST", "/devices/0/sleep?action=release", None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        TcpStream::connect(("127.0.0.1", emu.port(0))).is_err(),
        "asleep again"
    );
    // Without a server to report to, a wake-up sends nothing.
    assert!(!emu.wake(0));
    assert_eq!(emu.ws_reports(0), 0);
}

#[test]
fn sdctl_check_knows_the_keys_and_their_limits() {
    let dir = common::TempDir::new("sleeping-check");
    let good = dir.write(
        "good.yaml",
        "SmartDevices:\n  ShellyWebhooks: {Enabled: true, WebsocketPath: /shelly/ws}\n  Devices:\n    - {Name: Bath, Model: ShellyHTG3, MAC: '54:32:04:53:9B:34', ReportPeriod: 3600, OutboundWebsocket: true}\n",
    );
    let bad = dir.write(
        "bad.yaml",
        "SmartDevices:\n  ShellyWebhooks: {Enabled: true}\n  Devices:\n    - {Name: Bath, Model: ShellyHTG3, MAC: '54:32:04:53:9B:34', ReportPeriod: -1, OutboundWebsocket: 3}\n",
    );
    let run = |f: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
            .args(["--config", f.to_str().unwrap(), "check"])
            .output()
            .unwrap()
    };
    let ok = run(&good);
    assert!(ok.status.success(), "{ok:?}");
    let no = run(&bad);
    assert_eq!(no.status.code(), Some(2));
    let err = String::from_utf8_lossy(&no.stderr);
    assert!(
        err.contains("ReportPeriod") && err.contains("OutboundWebsocket"),
        "{err}"
    );
}

#[test]
fn expect_offline_mutes_the_warning_of_a_sleeping_device_that_missed_its_period() {
    capture();
    let ctl = open(
        &["{Name: Quiet, Model: ShellyHTG3, MAC: '10:00:00:00:00:0D', ReportPeriod: 1, ExpectOffline: true}".into()],
        "  RefreshInterval: 0.1\n",
    );
    assert!(eventually(LIMIT, || !ctl
        .device(name("Quiet"))
        .unwrap()
        .online));
    // The transition is logged before the snapshot is published: had it warned, the line would be there.
    assert_eq!(warnings_containing("Quiet (ID: 1)"), 0);
    let d = ctl.device(name("Quiet")).unwrap();
    assert!(!d.sleeping && d.last_error.unwrap_or_default().contains("no report for"));
}
