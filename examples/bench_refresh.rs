//! `refresh_all` time for N emulated devices, each answering after an added latency.
//!
//! `cargo run --release --example bench_refresh -- [N=100] [LATENCY_MS=20] [ROUNDS=30] [BLACKHOLED_PERCENT=0]`
//! Prints median and p99 over the rounds. Blackholed devices never answer; with them the call returns once
//! their attempts time out (ResponseTimeout 1 s, RetryCount 0 here) while healthy devices are not delayed.

use std::time::{Duration, Instant};

use smartdev::emulator::{DeviceSpec, Emulator, Fault};
use smartdev::{Controller, ModelLibrary, Settings};

fn main() {
    let arg = |i: usize, d: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (n, latency, rounds, dead_pct) = (
        arg(1, 100) as usize,
        arg(2, 20),
        arg(3, 30) as usize,
        arg(4, 0) as usize,
    );
    let specs = (0..n).map(|_| DeviceSpec::new("ShellyPlus1PM")).collect();
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator");
    let dead = n * dead_pct / 100;
    let mut yaml = String::from(
        "SmartDevices:\n  ResponseTimeout: 1\n  RetryCount: 0\n  PingAllowed: false\n  RefreshInterval: 0\n  Devices:\n",
    );
    for i in 0..n {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n",
            emu.port(i)
        ));
    }
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).expect("valid"), None).expect("open");
    for i in 0..n {
        emu.set_latency(i, Duration::from_millis(latency));
    }
    for i in 0..dead {
        emu.set_fault(i, Fault::Blackhole);
    }
    let ctl = std::sync::Arc::new(ctl);
    let mut times = Vec::with_capacity(rounds);
    let mut healthy = Vec::new();
    for _ in 0..rounds {
        // While refresh_all waits for the dead devices, a healthy one is read from another thread.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let probe = (dead > 0).then(|| {
            let (ctl, stop) = (ctl.clone(), stop.clone());
            let healthy_id = smartdev::Identity::Id(n as i64);
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                std::thread::sleep(Duration::from_millis(100));
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    ctl.read_device(&healthy_id).expect("healthy");
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                lat
            })
        });
        let t = Instant::now();
        let report = ctl.refresh_all().expect("open");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(p) = probe {
            healthy.extend(p.join().unwrap());
        }
        assert_eq!(
            report.refreshed,
            n - dead,
            "{:?}",
            report.failures.first().map(|f| f.error.to_string())
        );
    }
    times.sort_by(f64::total_cmp);
    let p = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "refresh_all: {n} devices, {latency} ms latency, {dead} blackholed, {rounds} rounds, {} cores: median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        std::thread::available_parallelism().map_or(0, |c| c.get()),
        p(0.5),
        p(0.99),
        times[times.len() - 1]
    );
    if !healthy.is_empty() {
        healthy.sort_by(f64::total_cmp);
        let q = |x: f64| healthy[((healthy.len() as f64 - 1.0) * x).round() as usize];
        println!(
            "  a healthy device read during those refreshes: {} reads, median {:.1} ms, p99 {:.1} ms",
            healthy.len(),
            q(0.5),
            q(0.99)
        );
    }
    ctl.close();
}
