//! `change_output` latency against one emulated device, next to a raw HTTP request for the same switch from the
//! same process (plain ureq, no timeout: the fastest request ureq makes).
//!
//! `cargo run --release --example bench_switch -- [ROUNDS=2000]`
//! Every call really switches (the library turns on, the raw request off); median and p99 in microseconds.

use std::time::Instant;

use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, Identity, ModelLibrary, Settings};

fn percentiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.99))
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let port = emu.port(0);
    let yaml = format!(
        "SmartDevices:\n  PingAllowed: false\n  RefreshInterval: 0\n  Devices:\n    - {{Name: D, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n"
    );
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let out = Identity::Id(1);

    // No timeout on the raw side: with one, ureq resolves on a spawned thread per request, which the library
    // avoids for IP addresses; the baseline is the fastest plain ureq request.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .max_idle_connections_per_host(1)
        .build()
        .into();
    let url = format!("http://127.0.0.1:{port}/rpc");

    // Warm up both paths.
    for i in 0..50 {
        ctl.change_output(&out, i % 2 == 0).unwrap();
        let frame = serde_json::json!({"id": i, "src": "raw", "method": "Switch.Set", "params": {"id": 0, "on": i % 2 == 0}});
        let mut r = agent.post(&url).send_json(&frame).unwrap();
        let _: serde_json::Value = r.body_mut().read_json().unwrap();
    }
    let mut lib = Vec::with_capacity(rounds);
    let mut raw = Vec::with_capacity(rounds);
    for i in 0..rounds {
        // The library switches on, the raw request switches off again: both always change the relay.
        let t = Instant::now();
        let c = ctl.change_output(&out, true).unwrap();
        lib.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(c.did_change);

        let frame = serde_json::json!({"id": i, "src": "raw", "method": "Switch.Set", "params": {"id": 0, "on": false}});
        let t = Instant::now();
        let mut r = agent.post(&url).send_json(&frame).unwrap();
        let v: serde_json::Value = r.body_mut().read_json().unwrap();
        raw.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(v["result"]["was_on"].is_boolean());
    }
    let (lm, lp) = percentiles(lib);
    let (rm, rp) = percentiles(raw);
    println!(
        "change_output: median {lm:.0} µs, p99 {lp:.0} µs; raw HTTP: median {rm:.0} µs, p99 {rp:.0} µs; ratio of medians {:.2} ({rounds} rounds, {} cores)",
        lm / rm,
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    ctl.close();
}
