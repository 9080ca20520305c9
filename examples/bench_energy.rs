//! One day of 1-minute records of a 3-phase meter (a Pro 3EM's `EMData`, 1,440 records × 3 phases) read with
//! `energy_history` over loopback with 20 ms of latency on every request: the goal is ≤ 1 s.
//!
//! `cargo run --release --example bench_energy -- [ROUNDS=10]`
//! Prints the median and the slowest round, the pages (requests) per round and the records read.

use std::time::{Duration, Instant};

use smartdev::emulator::{DeviceSpec, EmuClock, Emulator};
use smartdev::{Controller, ModelLibrary, Settings};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let clock = EmuClock::manual();
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let emu = Emulator::start_with_clock(
        vec![DeviceSpec::new("ShellyPro3EM")],
        &ModelLibrary::embedded(),
        clock.clone(),
    )
    .unwrap();
    for (phase, watts) in [(0, 800.0), (1, 1500.0), (2, -400.0)] {
        emu.set_load(0, phase, watts);
    }
    clock.advance(Duration::from_secs(2 * 86_400));
    let yaml = format!(
        "SmartDevices:\n  PingAllowed: false\n  RefreshInterval: 0\n  Channel: http\n  Devices:\n    - {{Name: Grid, Model: ShellyPro3EM, Hostname: 127.0.0.1, Port: {}, Meters: [{{Name: L1}}, {{Name: L2}}, {{Name: L3}}]}}\n",
        emu.port(0)
    );
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    emu.set_latency(0, Duration::from_millis(20));
    let from = (start / 3600 + 2) * 3600;
    let mut times = Vec::with_capacity(rounds);
    let mut records = 0;
    emu.reset_counts(0);
    for _ in 0..rounds {
        let t = Instant::now();
        let h = ctl.energy_history("L1", from, from + 86_400).unwrap();
        times.push(t.elapsed().as_secs_f64());
        records = h.records().count();
        assert_eq!(h.gaps().count(), 0);
    }
    let pages = emu.counts(0)["rpc EMData.GetData"] as f64 / rounds as f64;
    times.sort_by(f64::total_cmp);
    println!(
        "energy_history, one day of 1-minute 3-phase records ({records} records, {pages:.0} pages, 20 ms latency): median {:.0} ms, slowest {:.0} ms ({rounds} rounds, {} cores)",
        times[times.len() / 2] * 1e3,
        times[times.len() - 1] * 1e3,
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    ctl.close();
}
