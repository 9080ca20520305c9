//! `close` while every worker is stuck on a device that never answers.
//!
//! `cargo run --release --example bench_close -- [DEVICES=100] [ROUNDS=10]`
//! Devices are emulated and blackholed; a `refresh_all` is in flight (ResponseTimeout 5 s, RetryCount 1) when
//! `close` is called. Reports close time (median, max) and checks that no `sd-` worker thread is left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smartdev::emulator::{DeviceSpec, Emulator, Fault};
use smartdev::{Controller, ModelLibrary, Settings};

fn sd_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|n| n.starts_with("sd-dev-") || n.starts_with("sd-supervisor"))
                })
                .count()
        })
        .unwrap_or(0)
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (n, rounds) = (arg(1, 100), arg(2, 10));
    let emu = Emulator::start(
        (0..n).map(|_| DeviceSpec::new("ShellyPlus1PM")).collect(),
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let mut yaml = String::from(
        "SmartDevices:\n  ResponseTimeout: 5\n  RetryCount: 1\n  PingAllowed: false\n  Devices:\n",
    );
    for i in 0..n {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n",
            emu.port(i)
        ));
    }
    let settings = Settings::from_yaml_str(&yaml).unwrap();
    let mut times = Vec::new();
    for _ in 0..rounds {
        for i in 0..n {
            emu.set_fault(i, Fault::None);
        }
        let ctl = Arc::new(Controller::open(settings.clone(), None).unwrap());
        for i in 0..n {
            emu.set_fault(i, Fault::Blackhole);
        }
        let before: Vec<u64> = (0..n).map(|i| emu.total_requests(i)).collect();
        let waiting = {
            let ctl = ctl.clone();
            std::thread::spawn(move || ctl.refresh_all())
        };
        // Every worker is inside its request.
        while (0..n).any(|i| emu.total_requests(i) == before[i]) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = Instant::now();
        ctl.close();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(sd_threads(), 0, "threads left after close");
        let _ = waiting.join();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "close with {n} blackholed devices mid-request: median {:.1} ms, max {:.1} ms over {rounds} rounds; all threads joined ({} cores)",
        times[times.len() / 2],
        times[times.len() - 1],
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
}
