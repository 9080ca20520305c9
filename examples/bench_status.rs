//! Whole-process `sdctl --json status` against N emulated ShellyPlus1PM devices × LATENCY ms, the devices in a
//! child process.
//!
//! `cargo build --release --bins --examples && cargo run --release --example bench_status -- [N=1000] [LATENCY_MS=20] [ROUNDS=10] [CHANNEL=http]`
//!
//! Writes a temporary configuration with `Channel: CHANNEL` (`http` or `auto`) and the N devices at 127.0.0.1,
//! runs the release `sdctl` next to this example's directory (`target/release/sdctl`) ROUNDS times and prints
//! the median/p99 wall time (spawn to exit) and the exit codes. Goals: ≤ 120 ms for 1,000 devices × 20 ms
//! (issue 30); ≤ 5 × latency + 150 ms before it, printed for other sizes.

mod support;

use std::process::{Command, Stdio};
use std::time::Instant;

use support::{EmuChild, quantile};

fn main() {
    support::maybe_child();
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, latency, rounds) = (arg(1, 1000) as usize, arg(2, 20), arg(3, 10) as usize);
    let channel = args.get(4).map_or("http", String::as_str);
    assert!(
        channel == "http" || channel == "auto",
        "CHANNEL is http or auto"
    );
    let sdctl = support::sdctl_or_exit("bench_status");

    let emu = EmuChild::start(n, latency);
    let mut yaml = format!("SmartDevices:\n  Channel: {channel}\n  Devices:\n");
    for (i, port) in emu.ports.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n"
        ));
    }
    let config =
        std::env::temp_dir().join(format!("smartdev-bench-status-{}.yaml", std::process::id()));
    std::fs::write(&config, &yaml).expect("writing the configuration");

    let mut times = Vec::with_capacity(rounds);
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    let mut bytes = 0;
    let (emu0, own0) = (emu.cpu_ticks(), support::waited_children_ticks());
    for _ in 0..rounds {
        let t = Instant::now();
        let out = Command::new(&sdctl)
            .arg("--config")
            .arg(&config)
            .args(["--json", "status"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .expect("running sdctl");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        bytes = out.stdout.len();
        let code = out
            .status
            .code()
            .map_or_else(|| format!("{:?}", out.status), |c| c.to_string());
        *codes.entry(code).or_default() += 1;
    }
    // Ticks are 10 ms: the child's CPU while answering the sdctl rounds, per round.
    let emu_cpu = (emu.cpu_ticks() - emu0) as f64 * 10.0 / rounds as f64;
    let sdctl_cpu = (support::waited_children_ticks() - own0) as f64 * 10.0 / rounds as f64;
    let _ = std::fs::remove_file(&config);

    // The same steps in this process, to see where the time goes: open (reads every device), the JSON, close.
    let settings = smartdev::Settings::from_yaml_str(
        &yaml.replace("  Devices:\n", "  RefreshInterval: 0\n  Devices:\n"),
    )
    .expect("valid");
    let (mut open, mut json, mut close) = (Vec::new(), Vec::new(), Vec::new());
    let mut emu_open = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (t, emu0) = (Instant::now(), emu.cpu_ticks());
        let ctl = smartdev::Controller::open(settings.clone(), None).expect("open");
        open.push(t.elapsed().as_secs_f64() * 1000.0);
        emu_open.push((emu.cpu_ticks() - emu0) as f64 * 10.0);
        let t = Instant::now();
        let text = serde_json::to_string_pretty(&ctl.devices()).expect("JSON");
        json.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(!text.is_empty());
        let t = Instant::now();
        ctl.close();
        close.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    emu.stop();
    for v in [&mut open, &mut json, &mut close, &mut emu_open] {
        v.sort_by(f64::total_cmp);
    }
    times.sort_by(f64::total_cmp);
    let codes: Vec<String> = codes.iter().map(|(c, k)| format!("{c} ×{k}")).collect();
    // Issue 30 sets the goal for 1,000 devices at 20 ms; elsewhere the earlier rule of thumb.
    let goal = if n == 1000 && latency == 20 {
        "≤ 120 ms, issue 30".to_string()
    } else {
        format!("≤ {} ms", 5 * latency + 150)
    };
    println!(
        "sdctl --json status: {n} devices × {latency} ms, Channel: {channel}, {rounds} rounds, {} cores: median {:.0} ms, p99 {:.0} ms, max {:.0} ms (goal {goal}); exit codes {}; {bytes} bytes of JSON; load average {}",
        support::cores(),
        quantile(&times, 0.5),
        quantile(&times, 0.99),
        times[times.len() - 1],
        codes.join(", "),
        support::load_average()
    );
    println!("  CPU per sdctl round: sdctl {sdctl_cpu:.0} ms, emulator child {emu_cpu:.0} ms");
    println!(
        "  in this process (median): open {:.0} ms (emulator child CPU meanwhile {:.0} ms), devices() as JSON {:.1} ms, close {:.0} ms",
        quantile(&open, 0.5),
        quantile(&emu_open, 0.5),
        quantile(&json, 0.5),
        quantile(&close, 0.5)
    );
}
