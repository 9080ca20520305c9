//! Sleeping devices reporting through the outbound WebSocket (issue 26 §3): N H&T Gen3 configured by their MAC
//! alone, each report made as a waking device makes it (connect, upgrade, one `NotifyFullStatus`, close).
//!
//! `cargo run --release --example bench_sleeping -- [N=200] [SAMPLES=500]`
//!
//! Prints, over SAMPLES reports spread over the N devices: connect+upgrade time; report→snapshot (from writing
//! the `NotifyFullStatus` frame until `ctl.device` shows its temperature, polled every 50 µs); and
//! `NotifyEvent`→wake (from writing the frame until the controller's wake flag, the pollable fd, is set; the
//! event is then checked in the queue).

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use smartdev::ws::frame::{self, Opcode};
use smartdev::{Controller, Identity, SensorQuantity, Settings, WakeFlag};
use support::latency_summary;

fn mac(i: usize) -> String {
    format!("10000000{:04X}", i)
}

/// A device waking: connect and upgrade.
fn connect(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /shelly/ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1);
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"));
    s
}

fn text(s: &mut TcpStream, v: &serde_json::Value) {
    let wire = frame::encode(
        Opcode::Text,
        true,
        v.to_string().as_bytes(),
        Some([1, 2, 3, 4]),
    );
    s.write_all(&wire).unwrap();
}

/// Back to sleep: close, and wait for the server's close.
fn close(mut s: TcpStream) {
    let wire = frame::encode(
        Opcode::Close,
        true,
        &frame::close_payload(1000, ""),
        Some([1, 2, 3, 4]),
    );
    let _ = s.write_all(&wire);
    let mut buf = [0u8; 64];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(200);
    let samples = args.get(1).copied().unwrap_or(500);
    let mut yaml = String::from(
        "SmartDevices:\n  RefreshInterval: 60\n  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n  Devices:\n",
    );
    for i in 0..n {
        yaml.push_str(&format!(
            "    - {{Name: HT{i}, Model: ShellyHTG3, MAC: '{}'}}\n",
            mac(i)
        ));
    }
    let wake = WakeFlag::new();
    let t = Instant::now();
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), Some(wake.clone()))
        .expect("open");
    println!(
        "{n} sleeping ShellyHTG3 configured by MAC, opened in {:.0} ms; {} cores, load average {}",
        t.elapsed().as_secs_f64() * 1000.0,
        std::thread::available_parallelism().map_or(0, |p| p.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let addr = ctl.webhook_address().expect("listener");
    let (mut upgrade, mut snapshot, mut woken) = (Vec::new(), Vec::new(), Vec::new());
    let mut missing = 0;
    for k in 0..samples {
        let i = k % n;
        let id = format!("shellyhtg3-{}", mac(i).to_ascii_lowercase());
        // A new value each time (a tenth and a half, exact enough to compare after the JSON round trip).
        let celsius = (100 + k % 200) as f64 / 10.0 + 0.05;
        let t = Instant::now();
        let mut s = connect(addr);
        upgrade.push(t.elapsed().as_secs_f64() * 1000.0);
        let report = serde_json::json!({"src": id, "dst": "ws", "method": "NotifyFullStatus", "params": {
            "ts": 1.0, "sys": {"mac": mac(i), "wakeup_period": 7200},
            "temperature:0": {"id": 0, "tC": celsius}, "humidity:0": {"id": 0, "rh": 50.0},
            "devicepower:0": {"id": 0, "battery": {"V": 5.5, "percent": 80}}}});
        let name = Identity::name(format!("HT{i}"));
        let t = Instant::now();
        text(&mut s, &report);
        loop {
            let d = ctl.device(name.clone()).unwrap();
            let now = d
                .sensors
                .iter()
                .find(|x| x.quantity == SensorQuantity::Temperature)
                .and_then(|x| x.value);
            if now.is_some_and(|v| (v - celsius).abs() < 1e-6) {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "report {k} not taken: {now:?} {:?}",
                ctl.device(name.clone()).unwrap()
            );
            std::thread::sleep(Duration::from_micros(50));
        }
        snapshot.push(t.elapsed().as_secs_f64() * 1000.0);
        wake.clear();
        let event = serde_json::json!({"src": id, "dst": "ws", "method": "NotifyEvent", "params": {
            "ts": 1.0, "events": [{"component": "devicepower:0", "id": 0, "event": "battery_low", "ts": 1.0}]}});
        let t = Instant::now();
        text(&mut s, &event);
        if wake.wait(Duration::from_secs(5)) {
            woken.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        match ctl.pull_webhook_event() {
            Some(e) if e.device == format!("HT{i}") => {}
            _ => missing += 1,
        }
        close(s);
    }
    println!("connect+upgrade: {}", latency_summary(&mut upgrade));
    println!("report→snapshot: {}", latency_summary(&mut snapshot));
    println!(
        "event→wake: {}; {missing} not in the queue",
        latency_summary(&mut woken)
    );
    let asleep = ctl
        .devices()
        .iter()
        .filter(|d| d.sleeping && d.online)
        .count();
    println!("asleep (not offline) after the run: {asleep} of {n}");
    ctl.close();
}
