//! The push channel (`Channel: auto`) against N emulated ShellyPlus1PM devices run in a child process, so that
//! threads, RSS and CPU time are the library's process alone.
//!
//! `cargo run --release --example bench_push -- [N=1000] [LATENCY_MS=20] [SAMPLES=500] [ROUNDS=20] [CHANNEL=auto]`
//! `cargo run --release --example bench_push -- --flood [N=21] [LATENCY_MS=0] [SAMPLES=500]`
//! `cargo run --release --example bench_push -- --stalled [STALLED=100] [HEALTHY=20] [RESPONSE_TIMEOUT_S=5]`
//!
//! `--flood`: device D0 sends `NotifyStatus` frames as fast as it can (small, then about 1 MiB each), and the
//! other devices' change→snapshot latency and `change_output` (over their sockets: failures, HTTP fallbacks)
//! are measured meanwhile; nothing else is measured.
//!
//! `--stalled`: the first STALLED devices of the configuration never answer the WebSocket upgrade (HTTP works);
//! measured: how long after `open` returned every healthy device was subscribed, their change→snapshot while
//! the stalled handshakes are pending, and `close` with those handshakes in progress.
//!
//! The example re-runs itself as the emulator (`--emulator N LATENCY_MS`, driven by lines on its stdin; the latency
//! applies to every answer, HTTP or WebSocket). Prints: threads by name, RSS and resident memory by mapping with
//! every device connected, the library threads' idle CPU over 5 s (`BENCH_IDLE_SECS`); change→snapshot latency (from writing the command to the child until
//! `ctl.output` shows the new state, polled every 50 µs); event→wake latency (from writing the command until the
//! wake flag is set, then the event is checked in the queue); `refresh_all` median/p99; a reconnect storm (every
//! WebSocket dropped at once: time until each device is subscribed again, measured in the child, and the spread of
//! the back-off jitter; `BENCH_STORMS`, 3 by default, with RSS after each). `CHANNEL=http` opens without the push channel and prints only threads,
//! memory, idle CPU and `refresh_all`, for comparison.

mod support;

use std::time::{Duration, Instant};

use smartdev::{Controller, Identity, Settings, WakeFlag};
use support::{EmuChild, quantile};

fn main() {
    support::maybe_child();
    let flood = std::env::args().any(|a| a == "--flood");
    let stalled = std::env::args().any(|a| a == "--stalled");
    let args: Vec<String> = std::env::args()
        .filter(|a| a != "--flood" && a != "--stalled")
        .collect();
    if flood {
        return flood_bench(&args);
    }
    if stalled {
        return stalled_bench(&args);
    }
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, latency, samples, rounds) = (
        arg(1, 1000) as usize,
        arg(2, 20),
        arg(3, 500) as usize,
        arg(4, 20) as usize,
    );
    let channel = args.get(5).map_or("auto", String::as_str);
    let push = channel == "auto";
    // How long the idle window lasts (BENCH_IDLE_SECS, 5 by default): longer for a steadier figure or for perf.
    let idle_secs = std::env::var("BENCH_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5u64);
    assert!(push || channel == "http", "CHANNEL is auto or http");

    let t = Instant::now();
    let mut emu = EmuChild::start(n, latency);
    println!(
        "{n} ShellyPlus1PM × {latency} ms (every answer) in a child process, started in {:.1} s; {} cores, load average {}; Channel: {channel}",
        t.elapsed().as_secs_f64(),
        support::cores(),
        support::load_average()
    );
    let threads_before = support::thread_count();
    let rss_before = support::status_kib("VmRSS:");

    let mut yaml = format!(
        "SmartDevices:\n  Channel: {channel}\n  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n"
    );
    for (i, port) in emu.ports.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}, Inputs: [{{Name: I{i}}}], Outputs: [{{Name: O{i}}}]}}\n"
        ));
    }
    let settings = Settings::from_yaml_str(&yaml).expect("valid");
    let wake = WakeFlag::new();
    let emu_open0 = emu.cpu_ticks();
    let t = Instant::now();
    let ctl = Controller::open(settings, Some(wake.clone())).expect("open");
    let open_ms = t.elapsed().as_secs_f64() * 1000.0;
    if push {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = emu.subscribed();
            if s == n {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "only {s}/{n} subscribed after 120 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        println!(
            "open {open_ms:.0} ms; every push channel subscribed {:.0} ms after open began; emulator child CPU meanwhile {:.0} ms",
            t.elapsed().as_secs_f64() * 1000.0,
            (emu.cpu_ticks() - emu_open0) as f64 * 10.0
        );
    } else {
        println!(
            "open {open_ms:.0} ms; emulator child CPU meanwhile {:.0} ms",
            (emu.cpu_ticks() - emu_open0) as f64 * 10.0
        );
    }
    // Let the connector threads end and the reads after subscribing settle.
    std::thread::sleep(Duration::from_secs(1));

    // Threads and memory with every device connected.
    let threads = support::thread_count();
    println!(
        "threads: {threads} (before open {threads_before}; {:.2} per device)",
        (threads - threads_before) as f64 / n as f64
    );
    let names: Vec<String> = support::threads_by_name()
        .iter()
        .map(|(k, c)| format!("{k} {c}"))
        .collect();
    println!("  by name: {}", names.join(", "));
    let (rss, hwm) = (support::status_kib("VmRSS:"), support::status_kib("VmHWM:"));
    println!(
        "RSS: {:.1} MiB (before open {:.1} MiB; {:.1} KiB per device), peak (VmHWM) {:.1} MiB",
        rss as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        (rss - rss_before) as f64 / n as f64,
        hwm as f64 / 1024.0
    );
    let by_map: Vec<String> = support::rss_by_mapping()
        .iter()
        .take(6)
        .map(|(k, kib, c)| format!("{k} ×{c}: {:.1} MiB", *kib as f64 / 1024.0))
        .collect();
    println!("  resident by mapping: {}", by_map.join("; "));

    // The library's threads alone: the bench's own thread reads 1,000 threads' /proc files to measure, and
    // that scan (about 10 ms) landed inside the window when every thread was summed.
    let before = support::cpu_ns_by_name();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(idle_secs));
    let after = support::cpu_ns_by_name();
    let secs = t.elapsed().as_secs_f64();
    let lib = |m: &std::collections::BTreeMap<String, u64>| -> u64 {
        m.iter()
            .filter(|(k, _)| k.starts_with("sd-"))
            .map(|(_, v)| v)
            .sum()
    };
    let ns = lib(&after).saturating_sub(lib(&before));
    let by: Vec<String> = after
        .iter()
        .filter(|(k, _)| k.starts_with("sd-"))
        .map(|(k, v)| {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            format!("{k} {:.2} ms", d as f64 / 1e6)
        })
        .collect();
    println!(
        "idle CPU over {secs:.1} s, the library's threads (schedstat): {:.2} ms = {:.4} % of one core ({})",
        ns as f64 / 1e6,
        ns as f64 / 1e7 / secs,
        by.join(", ")
    );

    if push {
        // Change → snapshot.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut lat = Vec::with_capacity(samples);
        let mut timeouts = 0;
        for _ in 0..samples {
            let i = (next() % n as u64) as usize;
            match flip_and_wait(&ctl, &mut emu, i) {
                Some(ms) => lat.push(ms),
                None => timeouts += 1,
            }
        }
        println!(
            "change→snapshot: {}; {timeouts} not seen within 5 s",
            support::latency_summary(&mut lat)
        );

        // Event → wake.
        while ctl.pull_webhook_event().is_some() {}
        let mut lat = Vec::with_capacity(samples);
        let mut missing = 0;
        for _ in 0..samples {
            let i = (next() % n as u64) as usize;
            wake.clear();
            let t = Instant::now();
            emu.send(&format!("fire {i} input.toggle_on"));
            if wake.wait(Duration::from_secs(5)) {
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            emu.reply();
            match ctl.pull_webhook_event() {
                Some(e) if e.device == format!("D{i}") => {}
                _ => missing += 1,
            }
            while ctl.pull_webhook_event().is_some() {}
        }
        println!(
            "event→wake: {}; {missing} not in the queue",
            support::latency_summary(&mut lat)
        );
    }

    // refresh_all.
    let mut times = Vec::with_capacity(rounds);
    let (lib0, emu0) = (support::cpu_ticks(), emu.cpu_ticks());
    let by_name0 = support::cpu_ns_by_name();
    for _ in 0..rounds {
        let t = Instant::now();
        let report = ctl.refresh_all().expect("open");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(
            report.refreshed,
            n,
            "{:?}",
            report.failures.first().map(|f| f.error.to_string())
        );
    }
    let per_round = |ticks: u64| ticks as f64 * 10.0 / rounds as f64;
    let (lib_cpu, emu_cpu) = (
        per_round(support::cpu_ticks() - lib0),
        per_round(emu.cpu_ticks() - emu0),
    );
    times.sort_by(f64::total_cmp);
    println!(
        "refresh_all: {rounds} rounds: median {:.1} ms, p99 {:.1} ms, max {:.1} ms; CPU per round: library {lib_cpu:.0} ms, emulator child {emu_cpu:.0} ms",
        quantile(&times, 0.5),
        quantile(&times, 0.99),
        times[times.len() - 1]
    );
    let split: Vec<String> = support::cpu_ns_by_name()
        .into_iter()
        .map(|(name, ns)| {
            let before = by_name0.get(&name).copied().unwrap_or(0);
            (name, ns.saturating_sub(before) as f64 / 1e6 / rounds as f64)
        })
        .filter(|(_, ms)| *ms >= 0.05)
        .map(|(name, ms)| format!("{name} {ms:.1} ms"))
        .collect();
    println!("  library CPU per round by thread: {}", split.join(", "));
    // What stays resident once every device has been read again (and notified, above): the steady state.
    std::thread::sleep(Duration::from_secs(1));
    let rss_after = support::status_kib("VmRSS:");
    println!(
        "RSS after the reads: {:.1} MiB ({:.1} KiB per device); stacks and arenas: {}",
        rss_after as f64 / 1024.0,
        (rss_after - rss_before) as f64 / n as f64,
        support::rss_by_mapping()
            .iter()
            .take(3)
            .map(|(k, kib, c)| format!("{k} ×{c}: {:.1} MiB", *kib as f64 / 1024.0))
            .collect::<Vec<_>>()
            .join("; ")
    );

    if push {
        // Reconnect storms: every socket dropped at once, three times (does memory settle?).
        let storms: usize = std::env::var("BENCH_STORMS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3);
        for storm in 1..=storms {
            std::thread::sleep(Duration::from_secs(1));
            let answer = emu.ask("storm");
            let mut back: Vec<f64> = answer
                .split_whitespace()
                .skip(1)
                .map(|v| v.parse().unwrap())
                .collect();
            let lost = back.iter().filter(|&&v| v < 0.0).count();
            back.retain(|&v| v >= 0.0);
            back.sort_by(f64::total_cmp);
            if back.is_empty() {
                println!("reconnect storm: none came back within 120 s");
            } else {
                // How the reconnects spread: per 50 ms from the first.
                let first = back[0];
                let mut buckets =
                    vec![0usize; ((back[back.len() - 1] - first) / 50.0) as usize + 1];
                for v in &back {
                    buckets[((v - first) / 50.0) as usize] += 1;
                }
                let hist: Vec<String> = buckets.iter().map(usize::to_string).collect();
                println!(
                    "reconnect storm {storm}: {}/{n} subscribed again, all within {:.0} ms of the drop; first {:.0} ms, p50 {:.0} ms, p90 {:.0} ms; spread (last − first) {:.0} ms; {lost} not back",
                    back.len(),
                    back[back.len() - 1],
                    first,
                    quantile(&back, 0.5),
                    quantile(&back, 0.9),
                    back[back.len() - 1] - first
                );
                println!("  per 50 ms from the first: {}", hist.join(" "));
            }
            let rss = support::status_kib("VmRSS:");
            println!(
                "  after the storm: threads {}, RSS {:.1} MiB ({:.1} KiB per device), peak {:.1} MiB",
                support::thread_count(),
                rss as f64 / 1024.0,
                (rss - rss_before) as f64 / n as f64,
                support::status_kib("VmHWM:") as f64 / 1024.0
            );
        }
    }

    let t = Instant::now();
    ctl.close();
    println!(
        "close: {:.0} ms; load average now {}",
        t.elapsed().as_secs_f64() * 1000.0,
        support::load_average()
    );
    emu.stop();
}

/// `--flood`: D0 floods; change→snapshot and `change_output` of the others meanwhile.
fn flood_bench(args: &[String]) {
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, latency, samples) = (arg(1, 21) as usize, arg(2, 0), arg(3, 500) as usize);
    assert!(n >= 2, "N counts the flooding device too");
    let mut emu = EmuChild::start(n, latency);
    println!(
        "--flood: D0 floods beside {} healthy ShellyPlus1PM × {latency} ms; {} cores, load average {}",
        n - 1,
        support::cores(),
        support::load_average()
    );
    let ctl = Controller::open(switches(&emu.ports, "  Channel: auto\n"), None).expect("open");
    let deadline = Instant::now() + Duration::from_secs(60);
    while emu.subscribed() < n {
        assert!(Instant::now() < deadline, "not every device subscribed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(1));
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for (label, bytes) in [
        ("none", 0usize),
        ("small frames", 100),
        ("~1 MiB frames", 1 << 20),
    ] {
        let flooded0: u64 = emu.ask("flooded 0").parse().unwrap();
        let t0 = Instant::now();
        if bytes > 0 {
            emu.ask(&format!("flood 0 {bytes}"));
            std::thread::sleep(Duration::from_secs(1));
        }
        let mut lat = Vec::with_capacity(samples);
        let mut unseen = 0;
        for _ in 0..samples {
            let i = 1 + (next() % (n as u64 - 1)) as usize;
            match flip_and_wait(&ctl, &mut emu, i) {
                Some(ms) => lat.push(ms),
                None => unseen += 1,
            }
            // Space the changes like real ones (a few per second per device at most).
            std::thread::sleep(Duration::from_millis(2));
        }
        println!(
            "flood {label}: change→snapshot of the others {}; {unseen} not seen within 5 s",
            support::latency_summary(&mut lat)
        );
        let mut cmd = Vec::with_capacity(samples / 5);
        let mut failed = 0;
        for k in 0..samples / 5 {
            let i = 1 + (next() % (n as u64 - 1)) as usize;
            let t = Instant::now();
            match ctl.change_output(Identity::name(format!("O{i}")), k % 2 == 0) {
                Ok(_) => cmd.push(t.elapsed().as_secs_f64() * 1000.0),
                Err(e) => {
                    failed += 1;
                    println!("  change_output O{i} failed: {e}");
                }
            }
        }
        let offline = ctl.devices().iter().skip(1).filter(|d| !d.online).count();
        println!(
            "  change_output of the others: {}; {failed} failed; {offline} healthy devices offline",
            support::latency_summary(&mut cmd)
        );
        // As fast as the controller takes them (TCP holds the device back beyond its rate).
        let frames = emu.ask("flooded 0").parse::<u64>().unwrap() - flooded0;
        println!(
            "  D0 wrote {frames} frames in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        emu.ask("flood 0 0");
        // A new connection for the next kind: the frames still in the socket's buffers go with the old one.
        emu.ask("drop 0");
        let deadline = Instant::now() + Duration::from_secs(60);
        std::thread::sleep(Duration::from_millis(100));
        while emu.subscribed() < n {
            assert!(Instant::now() < deadline, "D0 did not come back");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    ctl.close();
    emu.stop();
}

/// `--stalled`: the first devices hold their upgrades; how soon the healthy ones get their channel.
fn stalled_bench(args: &[String]) {
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (stalled, healthy, rt) = (arg(1, 100) as usize, arg(2, 20) as usize, arg(3, 5));
    let n = stalled + healthy;
    let mut emu = EmuChild::start(n, 0);
    for i in 0..stalled {
        emu.ask(&format!("hold {i} 1"));
    }
    println!(
        "--stalled: {stalled} devices that never answer the upgrade, listed before {healthy} healthy ones; ResponseTimeout {rt} s; {} cores, load average {}",
        support::cores(),
        support::load_average()
    );
    let t = Instant::now();
    let ctl = Controller::open(
        switches(
            &emu.ports,
            &format!("  Channel: auto\n  ResponseTimeout: {rt}\n"),
        ),
        None,
    )
    .expect("open");
    let opened = Instant::now();
    let deadline = opened + Duration::from_secs(300);
    while emu.subscribed() < healthy {
        assert!(
            Instant::now() < deadline,
            "not every healthy device subscribed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    println!(
        "open {:.0} ms; every healthy device subscribed {:.0} ms after open returned (goal: ≤ 2 × ResponseTimeout = {} ms)",
        (opened - t).as_secs_f64() * 1000.0,
        opened.elapsed().as_secs_f64() * 1000.0,
        2 * rt * 1000
    );
    let mut lat = Vec::new();
    let mut unseen = 0;
    for k in 0..200 {
        match flip_and_wait(&ctl, &mut emu, stalled + k % healthy) {
            Some(ms) => lat.push(ms),
            None => unseen += 1,
        }
    }
    println!(
        "change→snapshot of the healthy devices meanwhile: {}; {unseen} not seen within 5 s",
        support::latency_summary(&mut lat)
    );
    let t = Instant::now();
    ctl.close();
    println!(
        "close with {stalled} handshakes in progress: {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    emu.stop();
}

/// Devices `D<i>` (ShellyPlus1PM, output `O<i>`) at `ports` on 127.0.0.1, with `root` lines in the root block
/// and no background refreshes.
fn switches(ports: &[u16], root: &str) -> Settings {
    let mut yaml =
        format!("SmartDevices:\n{root}  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n");
    for (i, port) in ports.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}, Outputs: [{{Name: O{i}}}]}}\n"
        ));
    }
    Settings::from_yaml_str(&yaml).expect("valid")
}

/// Flips output `O<i>` on the emulated device and waits for the controller's snapshot to show it: the
/// change → snapshot latency in ms, or `None` when it was not seen within 5 s.
fn flip_and_wait(ctl: &Controller, emu: &mut EmuChild, i: usize) -> Option<f64> {
    let out = Identity::name(format!("O{i}"));
    let on = ctl.output(out.clone()).unwrap().state != Some(true);
    let t = Instant::now();
    emu.send(&format!("out {i} {}", u8::from(on)));
    let limit = t + Duration::from_secs(5);
    while ctl.output(out.clone()).unwrap().state != Some(on) && Instant::now() < limit {
        std::thread::sleep(Duration::from_micros(50));
    }
    let seen = Instant::now() < limit;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    emu.reply();
    seen.then_some(ms)
}
