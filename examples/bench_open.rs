//! Opens N simulated devices (default 1,000) and reports `open` time and process RSS.
//!
//! `cargo run --release --example bench_open -- [N] [ROUNDS]`
//! The first round creates the simulation files (cold); later rounds read existing files (warm).

use std::time::Instant;

use smartdev::{Controller, Settings};

mod support;

use support::status_kib as rss_kib;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("smartdev-bench-open-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  Devices:\n",
        dir.display()
    );
    for i in 0..n {
        yaml.push_str(&format!(
            "    - {{Name: Dev {i}, Model: Shelly2PMG3, Simulate: true}}\n"
        ));
    }
    let settings = Settings::from_yaml_str(&yaml).expect("valid");
    println!(
        "devices: {n}, cores: {}",
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    println!("RSS before open: {} KiB", rss_kib("VmRSS:"));
    let mut times = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        let ctl = Controller::open(settings.clone(), None).expect("open");
        let open_ms = t.elapsed().as_secs_f64() * 1000.0;
        let rss = rss_kib("VmRSS:");
        let t = Instant::now();
        ctl.close();
        let close_ms = t.elapsed().as_secs_f64() * 1000.0;
        println!(
            "round {round} ({}): open {open_ms:.1} ms, RSS while open {:.1} MiB, close {close_ms:.1} ms",
            if round == 0 {
                "cold: files created"
            } else {
                "warm: files read"
            },
            rss as f64 / 1024.0
        );
        if round > 0 {
            times.push(open_ms);
        }
    }
    times.sort_by(f64::total_cmp);
    if !times.is_empty() {
        println!(
            "warm open median: {:.1} ms, max: {:.1} ms",
            times[times.len() / 2],
            times[times.len() - 1]
        );
    }
    println!(
        "peak RSS (VmHWM): {:.1} MiB",
        rss_kib("VmHWM:") as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}
