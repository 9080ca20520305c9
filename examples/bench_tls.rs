//! HTTPS against HTTP: open and read N emulated ShellyPlus1PM devices (run in a child process, so CPU time is
//! the library's process alone), once over HTTP and once over HTTPS (a self-signed certificate per device,
//! pinned at first use in a temporary trust file). Devices close every connection, as real ones do, so every
//! HTTPS request pays a full handshake.
//!
//! `cargo run --release --example bench_tls -- [N=100] [ROUNDS=20] [LATENCY_MS=0] [PIN=first-use|sha256] [CHANNEL=http|auto]`
//!
//! `LATENCY_MS`: each device answers that much later (the goal is stated for 1,000 devices × 20 ms).
//! `PIN`: how certificates are verified: pinned at first use in a trust file (default) or `CertSha256` per
//! device (nothing written). `CHANNEL`: `http` (default: every request a connection) or `auto` (the push
//! channel: open reads each device over its one WebSocket, WSS for HTTPS, and `refresh_all` goes over it).
//!
//! Prints per transport: `open` wall time and which threads spent its CPU (and the emulator child's),
//! `refresh_all` median wall time, and the controller process's CPU per request (utime + stime over every
//! request of the rounds); then the HTTPS/HTTP ratios; the CPU floor of `open` on the shared cores (both
//! processes' CPU over the cores) for each; and the client's public-key crypto of one full handshake timed
//! alone, added to `open`'s HTTP CPU per device.
//! `BENCH_TLS_ONLY=http|https` runs one transport alone (for a profiler). `BENCH_TLS_PAIRS=K` runs K
//! HTTP-then-HTTPS pairs (each with its own emulator child) and takes the medians: on a shared VM the same
//! open varies by a third from one minute to the next, so one pair's ratio says little.

mod support;

use std::time::Instant;

use smartdev::{Controller, Settings};
use support::{EmuChild, quantile};

struct Figures {
    open_ms: f64,
    /// The controller process's CPU during open (the devices' own TLS work is the child's).
    open_cpu_ms: f64,
    /// The emulator child's CPU during open: on the same cores, open cannot take less than both over the cores.
    emu_open_cpu_ms: f64,
    refresh_ms: f64,
    cpu_us_per_request: f64,
}

fn run(
    n: usize,
    rounds: usize,
    latency_ms: u64,
    tls: bool,
    sha256: bool,
    channel: &str,
    dir: &std::path::Path,
) -> Figures {
    let emu = EmuChild::start_with(n, latency_ms, tls);
    let trust = dir.join(format!("trust-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&trust);
    let mut yaml = format!(
        "SmartDevices:\n  Channel: {channel}\n  RefreshInterval: 0\n  PingAllowed: false\n  FollowMoves: false\n  TrustFile: {}\n  Devices:\n",
        trust.display()
    );
    assert!(
        channel == "http" || channel == "auto",
        "CHANNEL is http or auto"
    );
    for (i, p) in emu.ports.iter().enumerate() {
        let pin = match emu.fingerprints.get(i) {
            Some(f) if tls && sha256 => format!(", CertSha256: \"{f}\""),
            _ => String::new(),
        };
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {p}, Tls: {tls}{pin}}}\n"
        ));
    }
    let settings = Settings::from_yaml_str(&yaml).expect("settings");
    let cpu_open = support::cpu_ticks();
    let emu_open = emu.cpu_ticks();
    let by_thread = support::cpu_ns_by_name();
    let t = Instant::now();
    let ctl = Controller::open(settings, None).expect("open");
    let open_ms = t.elapsed().as_secs_f64() * 1000.0;
    // 100 clock ticks per second on Linux.
    let open_cpu_ms = (support::cpu_ticks() - cpu_open) as f64 * 10.0;
    let emu_open_cpu_ms = (emu.cpu_ticks() - emu_open) as f64 * 10.0;
    // Which threads spent open's CPU: the poller does every device's connection in turn, so its share bounds
    // open's wall time from below.
    let mut shares: Vec<(String, f64)> = support::cpu_ns_by_name()
        .into_iter()
        .map(|(name, ns)| {
            (
                name.clone(),
                (ns - by_thread.get(&name).copied().unwrap_or(0)) as f64 / 1e6,
            )
        })
        .filter(|(_, ms)| *ms >= 1.0)
        .collect();
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    let shares: Vec<String> = shares
        .iter()
        .map(|(n, ms)| format!("{n} {ms:.0} ms"))
        .collect();
    println!(
        "  {} open's CPU by thread: {}; the emulator child {emu_open_cpu_ms:.0} ms (both on {} cores: open takes at least {:.0} ms)",
        if tls { "https" } else { "http " },
        shares.join(", "),
        support::cores(),
        (open_cpu_ms + emu_open_cpu_ms) / support::cores().max(1) as f64
    );
    assert!(
        ctl.devices().iter().all(|d| d.online),
        "every device online after open"
    );
    let cpu0 = support::cpu_ticks();
    let mut walls = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        ctl.refresh_all().expect("refresh_all");
        walls.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let ticks = support::cpu_ticks() - cpu0;
    let requests = (n * rounds) as f64;
    drop(ctl);
    emu.stop();
    let _ = std::fs::remove_file(&trust);
    walls.sort_by(f64::total_cmp);
    Figures {
        open_ms,
        open_cpu_ms,
        emu_open_cpu_ms,
        refresh_ms: quantile(&walls, 0.5),
        // 100 clock ticks per second on Linux.
        cpu_us_per_request: ticks as f64 * 10_000.0 / requests,
    }
}

/// The client's share of one full handshake's public-key crypto, in µs of CPU: one X25519 key pair and
/// agreement (the ECDHE key exchange) and one ECDSA P-256 signature check (the server's key exchange
/// signed by its certificate's key), through the same rustls provider the library uses, `reps` times on this
/// thread. No TLS library can do a verified full handshake with less of this on this CPU.
fn handshake_crypto_floor(reps: u32) -> (f64, f64) {
    use rustls::crypto::ring::default_provider;
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = default_provider();
    let key = rcgen::KeyPair::generate().expect("an ECDSA P-256 key");
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signing = provider
        .key_provider
        .load_private_key(der)
        .expect("ECDSA key");
    let scheme = rustls::SignatureScheme::ECDSA_NISTP256_SHA256;
    let signer = signing.choose_scheme(&[scheme]).expect("P-256 scheme");
    let message = [7u8; 100];
    let signature = signer.sign(&message).unwrap();
    let public = key.public_key_raw().to_vec();
    let check = provider
        .signature_verification_algorithms
        .mapping
        .iter()
        .find(|(s, _)| *s == scheme)
        .expect("P-256 verification")
        .1[0];
    let x25519 = provider.kx_groups[0];
    assert_eq!(x25519.name(), rustls::NamedGroup::X25519);
    let peer = x25519.start().unwrap().pub_key().to_vec();
    let t0 = support::cpu_ticks();
    for _ in 0..reps {
        let kx = x25519.start().unwrap();
        std::hint::black_box(kx.complete(&peer).unwrap());
    }
    let t1 = support::cpu_ticks();
    for _ in 0..reps {
        check
            .verify_signature(&public, &message, &signature)
            .expect("valid signature");
    }
    let t2 = support::cpu_ticks();
    let us = |ticks: u64| ticks as f64 * 10_000.0 / reps as f64;
    (us(t1 - t0), us(t2 - t1))
}

fn main() {
    support::maybe_child();
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, rounds, latency) = (arg(1, 100), arg(2, 20).max(1), arg(3, 0) as u64);
    let sha256 = args.get(4).is_some_and(|a| a == "sha256");
    let channel = args.get(5).map_or("http", String::as_str);
    let dir = std::env::temp_dir();
    println!(
        "{n} ShellyPlus1PM in a child process ({latency} ms latency), {rounds} refresh_all rounds, {}, Channel: {channel}; {} cores, load average {}",
        if sha256 {
            "CertSha256"
        } else {
            "pinned at first use"
        },
        support::cores(),
        support::load_average()
    );
    if let Ok(only) = std::env::var("BENCH_TLS_ONLY") {
        // For a profiler: one transport alone (`http` or `https`).
        let f = run(n, rounds, latency, only == "https", sha256, channel, &dir);
        println!(
            "{only}: open {:.1} ms (CPU {:.0} ms)",
            f.open_ms, f.open_cpu_ms
        );
        return;
    }
    let pairs: usize = std::env::var("BENCH_TLS_PAIRS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut all = Vec::with_capacity(pairs);
    for i in 0..pairs {
        let http = run(n, rounds, latency, false, sha256, channel, &dir);
        let https = run(n, rounds, latency, true, sha256, channel, &dir);
        if pairs > 1 {
            println!(
                "pair {}: open {:.1} ms over HTTP, {:.1} ms over HTTPS = {:.2}×",
                i + 1,
                http.open_ms,
                https.open_ms,
                https.open_ms / http.open_ms
            );
        }
        all.push((http, https));
    }
    if pairs > 1 {
        let mut ratios: Vec<f64> = all.iter().map(|(a, b)| b.open_ms / a.open_ms).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "open HTTPS / HTTP over {pairs} pairs: median {:.2}×, range {:.2}–{:.2}× (the figures below are the medians)",
            quantile(&ratios, 0.5),
            ratios[0],
            ratios[pairs - 1]
        );
    }
    let median = |pick: fn(&(Figures, Figures)) -> &Figures| {
        let of = |f: fn(&Figures) -> f64| {
            let mut v: Vec<f64> = all.iter().map(|p| f(pick(p))).collect();
            v.sort_by(f64::total_cmp);
            quantile(&v, 0.5)
        };
        Figures {
            open_ms: of(|f| f.open_ms),
            open_cpu_ms: of(|f| f.open_cpu_ms),
            emu_open_cpu_ms: of(|f| f.emu_open_cpu_ms),
            refresh_ms: of(|f| f.refresh_ms),
            cpu_us_per_request: of(|f| f.cpu_us_per_request),
        }
    };
    let (http, https) = (median(|p| &p.0), median(|p| &p.1));
    for (name, f) in [("http", &http), ("https", &https)] {
        println!(
            "{name:5}: open {:7.1} ms (CPU {:6.0} ms)   refresh_all median {:7.1} ms   CPU {:7.1} µs per request",
            f.open_ms, f.open_cpu_ms, f.refresh_ms, f.cpu_us_per_request
        );
    }
    println!(
        "HTTPS / HTTP: CPU per request {:.2}×, open {:.2}× (CPU {:.2}×), refresh_all {:.2}×",
        https.cpu_us_per_request / http.cpu_us_per_request,
        https.open_ms / http.open_ms,
        https.open_cpu_ms / http.open_cpu_ms,
        https.refresh_ms / http.refresh_ms
    );
    let floor = |f: &Figures| (f.open_cpu_ms + f.emu_open_cpu_ms) / support::cores().max(1) as f64;
    println!(
        "CPU floor of open on {} cores (this process and the emulator's): http {:.0} ms, https {:.0} ms = {:.2}× (measured {:.2}×)",
        support::cores(),
        floor(&http),
        floor(&https),
        floor(&https) / floor(&http),
        https.open_ms / http.open_ms
    );
    let (kx, verify) = handshake_crypto_floor(4000);
    let http_open_us = http.open_cpu_ms * 1000.0 / n as f64;
    println!(
        "full handshake, client crypto alone: X25519 {kx:.0} µs + ECDSA P-256 check {verify:.0} µs; open over HTTP {http_open_us:.0} µs CPU per device → floor of open's CPU over HTTPS {:.2}× (every device's first connection is a full handshake)",
        (http_open_us + kx + verify) / http_open_us
    );
}
