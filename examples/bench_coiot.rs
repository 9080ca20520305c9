//! Gen1 push over CoIoT: change → snapshot latency for N emulated Shelly1PM devices (in process), their CoIoT
//! peer set by the controller (`CoIoTPeer: true`), polls an hour apart, so only CoIoT can bring a change.
//!
//! `cargo run --release --example bench_coiot -- [N=100] [SAMPLES=1000]`
//!
//! Each sample switches one device's output in the emulator (which sends its status at once, as firmware does)
//! and polls `ctl.output` every 50 µs until the snapshot shows it; samples start at least 2 ms apart, because
//! every emulated device sends from 127.0.0.1 and one address gets 1,000 datagrams a second (real devices
//! each have their own). Prints p50/p99/max.

mod support;

use std::time::{Duration, Instant};

use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, Identity, ModelLibrary, Settings};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, samples) = (arg(1, 100), arg(2, 1000));
    let emu = Emulator::start(
        (0..n).map(|_| DeviceSpec::new("Shelly1PM")).collect(),
        &ModelLibrary::embedded(),
    )
    .expect("the emulator starts");
    let mut yaml = String::from(
        "SmartDevices:\n  PingAllowed: false\n  FollowMoves: false\n  RefreshInterval: 3600\n  CoIoTPort: 0\n  CoIoTPeer: true\n  Devices:\n",
    );
    for i in 0..n {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: Shelly1PM, Hostname: 127.0.0.1, Port: {}, Outputs: [{{Name: O{i}}}]}}\n",
            emu.port(i)
        ));
    }
    let t = Instant::now();
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    println!("{n} Shelly1PM, open in {:.2} s", t.elapsed().as_secs_f64());
    // Every device described itself and took the peer (its first status follows at once).
    let peer_set = |i: usize| emu.counts(i).get("GET /settings").copied().unwrap_or(0) >= 2;
    let t = Instant::now();
    while !(0..n).all(peer_set) {
        assert!(t.elapsed() < Duration::from_secs(60), "peers not set");
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = |i: usize| ctl.output(Identity::name(format!("O{i}"))).unwrap().state;
    let mut lat = Vec::with_capacity(samples);
    let mut state = vec![false; n];
    for s in 0..samples {
        let i = s % n;
        let pace = Instant::now() + Duration::from_millis(2);
        state[i] = !state[i];
        let t = Instant::now();
        emu.set_output(i, 0, state[i]);
        while output(i) != Some(state[i]) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "device {i} never followed"
            );
            std::thread::sleep(Duration::from_micros(50));
        }
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(pace.saturating_duration_since(Instant::now()));
    }
    println!(
        "change → snapshot over CoIoT: {}",
        support::latency_summary(&mut lat)
    );
    ctl.close();
}
