//! The floor of `open` and `refresh_all` on this machine (issue 30): what reading 1,000 Gen2 devices over their
//! WebSocket costs when neither side does anything but the wire's work, beside the library's own, in one run.
//!
//! `cargo run --release --features fuzzing --example bench_floor -- [N=1000] [LATENCY_MS=20] [ROUNDS=5] [READS=5]`
//! (`main.rs`; `link.rs` drives a connection, plain or TLS, without blocking; `tls.rs` is both sides' TLS).
//!
//! Two device sides, each in a child process:
//! - **wire devices**: one thread, one `mio` poll, N listeners. Each connection: the upgrade (with a real
//!   `Sec-WebSocket-Accept`), then each request frame answered the latency after it came with the bytes
//!   `sdctl emulate` answers (`Shelly.GetDeviceInfo` 215 bytes, `Shelly.GetStatus` 721, and
//!   `Webhook.ListSupported`, which the library asks at its first read), each device with its own MAC.
//! - **the emulator** (`smartdev::emulator`, as every other benchmark).
//!
//! Three client sides, in this process:
//! - **wire client**: one thread, one poll: N connects, the upgrade, `Shelly.GetDeviceInfo` and
//!   `Shelly.GetStatus` in one write (what the library's push dial sends), both answers read (the open); then
//!   READS times one `Shelly.GetStatus` to every device over its connection, every answer read.
//! - **wire client + threads**: the same, plus one thread per device started as the controller starts a
//!   worker (pthread, its stack), each handed its device's answers over a channel and saying so over another:
//!   the design card's cost.
//! - **smartdev**: `Controller::open` with `Channel: auto` (every device read and subscribed), READS ×
//!   `refresh_all`, then `close`; against both device sides, so the library's distance to the floor is seen
//!   apart from the emulator's.
//!
//! `BENCH_FLOOR_ONLY=TEXT` runs only the combinations whose label contains TEXT (for `perf`).
//!
//! `BENCH_FLOOR_TLS=1`: every combination (but the threads) over WSS as well, each device side in a second
//! child serving TLS: the wire devices one self-signed ECDSA P-256 certificate, the emulator one per device
//! (`tls.rs`). The wire client verifies with the library's own configuration for a device pinned with
//! `CertSha256` that has chosen TLS 1.2 (the pin, the handshake's signature, 1.2 alone as the devices speak it:
//! no TLS 1.3 key share it would not use); smartdev pins with `CertSha256`, from its first connection. The wire client over TLS against the wire devices over TLS is the floor of a verified open on
//! this machine: what both sides' handshakes cannot skip. Then, per client and device side, the open over WSS
//! against over WS: median wall time and the floor of both processes' CPU on the cores.
//!
//! `BENCH_FLOOR_WHOLE=1`: instead, whole processes against each device side, in turn each round: `sdctl --json
//! status` (`Channel: auto`, built next to this example) and **the whole-process floor**, this example started
//! as a child that does what a one-shot command cannot skip and nothing else: reads the same configuration
//! file with the same YAML parser, opens every device as the wire client does, prints every device's status
//! as pretty JSON, and exits with its connections (and threads) still there, as `sdctl` does. The floor runs
//! twice: with a thread per device, each parsing its device's answers, and with no threads, the poller
//! parsing them. Wall time from spawn to exit, median and range.
//!
//! Every combination runs once per round, in turn, so the machine's drift falls on all alike. Per combination,
//! for the open and for one read: the median wall time, this process's CPU and the device child's CPU (closes
//! and thread ends not counted). The wall time cannot fall below the two processes' CPU over the cores.

#[path = "../support/mod.rs"]
mod support;

mod link;
mod tls;

use std::collections::VecDeque;
use std::io::{self, BufRead, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use link::Link;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use smartdev::ws::frame::{self, Opcode};
use smartdev::{Controller, Settings};
use support::{EmuChild, cpu_ticks, cpu_ticks_of, quantile};

const WIRE_FLAG: &str = "--wire-devices";
const WHOLE_FLAG: &str = "--whole-process";

/// `sdctl emulate`'s answers for a ShellyPlus1PM (the result objects; id, src and dst are added per call).
/// `Webhook.ListSupported`'s result for a ShellyPlus1PM, as `sdctl emulate` answers it.
const SUPPORTED: &str = r#"{"types":{"input.toggle_on":{},"input.toggle_off":{},"input.button_push":{},"input.button_longpush":{},"input.button_doublepush":{},"input.button_triplepush":{},"switch.on":{},"switch.off":{}}}"#;
/// The MAC of the answers below, replaced by each wire device's own.
const MAC: &str = "028E7B42916F";
const DEVICE_INFO: &str = r#"{"name":null,"id":"shellyplus1pm-028e7b42916f","mac":"028E7B42916F","slot":1,"model":"SNSW-001P16EU","gen":2,"fw_id":"20260311-095847/1.7.5-g0e0e0e0","ver":"1.7.5","app":"Plus1PM","auth_en":false,"auth_domain":null}"#;
const STATUS: &str = r#"{"ble":{},"cloud":{"connected":false},"input:0":{"id":0,"state":false},"mqtt":{"connected":false},"switch:0":{"id":0,"source":"init","output":false,"apower":0,"voltage":230.1,"current":0,"aenergy":{"total":0,"by_minute":[0,0,0],"minute_ts":1795732380},"temperature":{"tC":45,"tF":113}},"sys":{"mac":"028E7B42916F","restart_required":false,"time":"22:33","unixtime":1795732391,"last_sync_ts":1795732390,"uptime":1,"ram_size":250596,"ram_free":127644,"ram_min_free":102668,"fs_size":524288,"fs_free":188416,"cfg_rev":10,"kvs_rev":0,"schedule_rev":0,"webhook_rev":0,"available_updates":{},"reset_reason":3,"utc_offset":0},"wifi":{"sta_ip":"127.0.0.1","status":"got ip","ssid":"emulator","rssi":-55},"ws":{"connected":false}}"#;

fn main() {
    support::maybe_child();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(WIRE_FLAG) {
        let latency = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(20);
        let tls = args.get(4).map(String::as_str) == Some("tls");
        wire_devices(
            args[2].parse().unwrap(),
            Duration::from_millis(latency),
            tls,
        );
        return;
    }
    if args.get(1).map(String::as_str) == Some(WHOLE_FLAG) {
        whole_process_floor(&args[2], args.get(3).map(String::as_str) != Some("none"));
    }
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, latency, rounds, refreshes) = (arg(1, 1000), arg(2, 20) as u64, arg(3, 5), arg(4, 5));
    if std::env::var_os("BENCH_FLOOR_WHOLE").is_some() {
        compare_whole_processes(n, latency, rounds);
        return;
    }
    // `BENCH_FLOOR_TLS=1`: every combination over WSS too (one pinned certificate per device), beside WS.
    let with_tls = std::env::var_os("BENCH_FLOOR_TLS").is_some();
    println!(
        "{n} ShellyPlus1PM × {latency} ms, {rounds} rounds of open and {refreshes} reads{}, {} cores, load average {}",
        if with_tls { ", over WS and WSS" } else { "" },
        support::cores(),
        support::load_average()
    );
    let transports: &[bool] = if with_tls { &[false, true] } else { &[false] };
    let mut sides: Vec<Devices> = Vec::new();
    for &tls in transports {
        let wire = WireChild::start(n, latency, tls);
        sides.push(Devices {
            ports: wire.ports.clone(),
            pins: tls.then(|| vec![wire.fingerprint.clone(); n]),
            child: Child::Wire(wire),
        });
        let emu = EmuChild::start_with(n, latency, tls);
        sides.push(Devices {
            ports: emu.ports.clone(),
            pins: tls.then(|| emu.fingerprints.clone()),
            child: Child::Emulator(emu),
        });
    }
    let mut combos: Vec<(String, usize, Client)> = Vec::new();
    for (k, side) in sides.iter().enumerate() {
        let name = match side.child {
            Child::Wire(_) => "wire devices",
            Child::Emulator(_) => "emulator",
        };
        let ws = if side.pins.is_some() { ", wss" } else { "" };
        let clients: &[(&str, Client)] = if with_tls {
            // The threads add what they add whatever the transport: left out to keep the run short.
            &[
                ("wire client", Client::Wire),
                ("smartdev", Client::Smartdev),
            ]
        } else {
            &[
                ("wire client", Client::Wire),
                ("wire client + threads", Client::Threads),
                ("smartdev", Client::Smartdev),
            ]
        };
        for (client_name, client) in clients {
            combos.push((format!("{client_name}, {name}{ws}"), k, *client));
        }
    }
    // `BENCH_FLOOR_ONLY=smartdev,` (a part of a label): only those combinations, for a profiler.
    let only = std::env::var("BENCH_FLOOR_ONLY").unwrap_or_default();
    combos.retain(|(label, _, _)| label.contains(only.as_str()));
    let mut rows: Vec<Row> = combos.iter().map(|_| Row::default()).collect();
    for _ in 0..rounds {
        for (row, (_, side, client)) in rows.iter_mut().zip(&combos) {
            let side = &sides[*side];
            // Let the previous combination's sockets and threads settle.
            std::thread::sleep(Duration::from_millis(300));
            // The configuration is read before the count: the wire clients have none.
            let settings = matches!(client, Client::Smartdev)
                .then(|| settings(&side.ports, side.pins.as_deref()));
            let cpu = Cpu::new(&side.pid());
            match settings {
                Some(settings) => smartdev(settings, side.ports.len(), refreshes, &cpu, row),
                None => wire_client(
                    &side.ports,
                    side.pins.as_deref(),
                    matches!(client, Client::Threads),
                    refreshes,
                    &cpu,
                    row,
                ),
            }
            // The device child finishes its side (closes) before the next combination.
        }
    }
    let labels: Vec<&str> = combos.iter().map(|(label, _, _)| label.as_str()).collect();
    print_table(
        "open (connect, upgrade, Shelly.GetDeviceInfo and Shelly.GetStatus, every device read):",
        "round",
        &labels,
        rows.iter().map(|r| &r.open),
        rounds,
    );
    if refreshes > 0 {
        print_table(
            &format!(
                "then {refreshes} reads of every device's status over its connection (refresh_all), per read:"
            ),
            "read",
            &labels,
            rows.iter().map(|r| &r.read),
            rounds * refreshes,
        );
    }
    if with_tls {
        print_tls_ratios(&labels, &rows);
    }
    for side in sides {
        match side.child {
            Child::Wire(w) => w.stop(),
            Child::Emulator(e) => e.stop(),
        }
    }
}

/// A device side's child and what a client needs to reach it.
struct Devices {
    ports: Vec<u16>,
    /// Over TLS: each device's certificate fingerprint, pinned by the clients.
    pins: Option<Vec<String>>,
    child: Child,
}

impl Devices {
    fn pid(&self) -> String {
        match &self.child {
            Child::Wire(w) => w.pid(),
            Child::Emulator(e) => e.pid().to_string(),
        }
    }
}

enum Child {
    Wire(WireChild),
    Emulator(EmuChild),
}

/// Per client and device side: the open's median over WSS against over WS, and the same of the floor both
/// processes' CPU sets on the cores.
fn print_tls_ratios(labels: &[&str], rows: &[Row]) {
    println!("WSS / WS, open:");
    let cores = support::cores() as f64;
    let floor =
        |m: &Measured| (m.cpu.0 + m.cpu.1) as f64 * 10.0 / m.walls.len().max(1) as f64 / cores;
    for (k, label) in labels.iter().enumerate() {
        let Some(plain) = label.strip_suffix(", wss") else {
            continue;
        };
        let Some(p) = labels.iter().position(|l| *l == plain) else {
            continue;
        };
        let (tls, ws) = (&rows[k].open, &rows[p].open);
        // CPU is counted in 10 ms ticks: a small open may show none.
        let floor_ratio = match floor(ws) {
            0.0 => "—".to_string(),
            f => format!("{:.2}×", floor(tls) / f),
        };
        println!(
            "  {plain:<37} median {:.2}× ({:.1} / {:.1} ms); floor on {cores} cores {floor_ratio} ({:.0} / {:.0} ms)",
            median(&tls.walls) / median(&ws.walls),
            median(&tls.walls),
            median(&ws.walls),
            floor(tls),
            floor(ws),
        );
    }
}

#[derive(Clone, Copy)]
enum Client {
    Wire,
    Threads,
    Smartdev,
}

/// Devices `D<i>` (ShellyPlus1PM) at `ports`, over the push channel, no background refreshes; with `pins`,
/// over TLS with each device's certificate pinned (`CertSha256`).
fn settings(ports: &[u16], pins: Option<&[String]>) -> Settings {
    Settings::from_yaml_str(&config_yaml(ports, pins)).expect("valid")
}

/// The configuration of [`settings`], as a file's text (`sdctl` and the whole-process floor read it).
fn config_yaml(ports: &[u16], pins: Option<&[String]>) -> String {
    let mut yaml = String::from(
        "SmartDevices:\n  Channel: auto\n  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n",
    );
    for (i, port) in ports.iter().enumerate() {
        let tls = match pins {
            Some(pins) => format!(", Tls: true, CertSha256: \"{}\"", pins[i]),
            None => String::new(),
        };
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}{tls}}}\n"
        ));
    }
    yaml
}

/// One combination's figures over the rounds.
#[derive(Default)]
struct Row {
    open: Measured,
    read: Measured,
}

/// Wall times in ms, and CPU in clock ticks summed over them (this process, the device child).
#[derive(Default)]
struct Measured {
    walls: Vec<f64>,
    cpu: (u64, u64),
}

impl Measured {
    fn add_cpu(&mut self, (own, child): (u64, u64)) {
        self.cpu.0 += own;
        self.cpu.1 += child;
    }
}

/// One line per combination: the median wall time, its range, the CPU per `unit` (`times` of them in all) and
/// the floor that CPU sets on the cores.
fn print_table<'a>(
    title: &str,
    unit: &str,
    labels: &[&str],
    measured: impl Iterator<Item = &'a Measured>,
    times: usize,
) {
    // Clock ticks are 100 per second on Linux.
    let per = |ticks: u64| ticks as f64 * 10.0 / times.max(1) as f64;
    let cores = support::cores() as f64;
    println!("{title}");
    for (label, m) in labels.iter().zip(measured) {
        let (own, child) = (per(m.cpu.0), per(m.cpu.1));
        println!(
            "  {label:<37} median {:6.1} ms ({}); CPU per {unit}: this process {own:4.0} ms, devices {child:4.0} ms; floor on {cores} cores {:4.0} ms",
            median(&m.walls),
            range(&m.walls),
            (own + child) / cores,
        );
    }
}

/// CPU clock ticks of this process and the device child, from a start.
struct Cpu {
    child: String,
    at: std::cell::Cell<(u64, u64)>,
}

impl Cpu {
    fn new(child: &str) -> Cpu {
        let c = Cpu {
            child: child.to_string(),
            at: Default::default(),
        };
        c.lap();
        c
    }

    /// The ticks since the last lap (or the start).
    fn lap(&self) -> (u64, u64) {
        self.lap_to(now_ticks(&self.child))
    }

    /// The ticks from the last lap to `now` (read earlier, on another thread), which starts the next lap.
    fn lap_to(&self, now: (u64, u64)) -> (u64, u64) {
        let before = self.at.replace(now);
        (now.0 - before.0, now.1 - before.1)
    }
}

/// This process's and `child`'s CPU ticks now.
fn now_ticks(child: &str) -> (u64, u64) {
    (cpu_ticks(), cpu_ticks_of(child))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

fn range(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    format!("range {lo:.1}–{hi:.1}")
}

/// `Controller::open` (every device read and subscribed), then `refreshes` × `refresh_all`, then `close` (not
/// counted, as the wire client's threads' ends are not).
fn smartdev(settings: Settings, n: usize, refreshes: usize, cpu: &Cpu, row: &mut Row) {
    let t = Instant::now();
    let ctl = Controller::open(settings, None).expect("open");
    row.open.walls.push(t.elapsed().as_secs_f64() * 1000.0);
    row.open.add_cpu(cpu.lap());
    let online = ctl.devices().iter().filter(|d| d.online).count();
    assert_eq!(online, n, "every device read");
    for _ in 0..refreshes {
        let t = Instant::now();
        let report = ctl.refresh_all().expect("refresh_all");
        row.read.walls.push(t.elapsed().as_secs_f64() * 1000.0);
        std::hint::black_box(report);
    }
    row.read.add_cpu(cpu.lap());
    ctl.close();
}

/// `BENCH_FLOOR_WHOLE`: `sdctl --json status` and [`whole_process_floor`] (with and without threads) in turn,
/// against the wire devices and the emulator.
fn compare_whole_processes(n: usize, latency: u64, rounds: usize) {
    let exe = std::env::current_exe().expect("current_exe");
    let sdctl = support::sdctl_or_exit("bench_floor");
    println!(
        "whole process, {n} ShellyPlus1PM × {latency} ms, {rounds} rounds, {} cores, load average {}",
        support::cores(),
        support::load_average()
    );
    let wire = WireChild::start(n, latency, false);
    let emu = EmuChild::start(n, latency);
    let devices = [("wire devices", &wire.ports), ("emulator", &emu.ports)];
    let mut configs = Vec::new();
    for (side, ports) in devices {
        let file = std::env::temp_dir().join(format!(
            "smartdev-floor-{}-{}.yaml",
            std::process::id(),
            configs.len()
        ));
        std::fs::write(&file, config_yaml(ports, None)).expect("writing the configuration");
        configs.push((side, file.display().to_string()));
    }
    // Per device side: sdctl, the floor with a thread per device, the floor without threads.
    let mut runs = Vec::new();
    for (side, config) in &configs {
        let floor =
            |threads: &str| vec![WHOLE_FLAG.to_string(), config.clone(), threads.to_string()];
        let status = ["--config", config, "--json", "status"].map(String::from);
        runs.push((
            format!("sdctl --json status, {side}"),
            &sdctl,
            status.to_vec(),
        ));
        runs.push((format!("floor + threads, {side}"), &exe, floor("threads")));
        runs.push((format!("floor, no threads, {side}"), &exe, floor("none")));
    }
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    let mut sizes = vec![0; runs.len()];
    for _ in 0..rounds {
        for (k, (label, program, args)) in runs.iter().enumerate() {
            // Let the previous process's sockets settle.
            std::thread::sleep(Duration::from_millis(300));
            let t = Instant::now();
            let out = Command::new(program)
                .args(args)
                .stderr(Stdio::null())
                .output()
                .expect("spawn");
            walls[k].push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(out.status.success(), "{label}: {:?}", out.status);
            sizes[k] = out.stdout.len();
        }
    }
    for (k, (label, ..)) in runs.iter().enumerate() {
        println!(
            "  {label:<37} median {:6.1} ms ({}); {} bytes of output",
            median(&walls[k]),
            range(&walls[k]),
            sizes[k]
        );
    }
    for (_, config) in &configs {
        let _ = std::fs::remove_file(config);
    }
    wire.stop();
    emu.stop();
}

/// The whole-process floor (see the module docs), with a thread per device or (`threads` false) none, the
/// poller parsing every answer; never returns.
fn whole_process_floor(config: &str, threads: bool) -> ! {
    let text = std::fs::read_to_string(config).expect("reading the configuration");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    let ports: Vec<u16> = doc["SmartDevices"]["Devices"]
        .as_sequence()
        .expect("Devices")
        .iter()
        .map(|d| d["Port"].as_u64().expect("Port") as u16)
        .collect();
    let n = ports.len();
    let t = Instant::now();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<()>();
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
    let (parsed_tx, parsed_rx) = crossbeam_channel::unbounded::<(usize, serde_json::Value)>();
    // Never sent on: the threads wait on it until the process exits, as a one-shot command's workers do.
    let (_hold, held) = crossbeam_channel::bounded::<()>(0);
    let poll_ports = ports.clone();
    let handoff = threads.then_some((ready_rx, done_rx));
    let poller =
        std::thread::spawn(move || poll_devices(&poll_ports, None, handoff, 0, t, "self", true));
    let mut inboxes = Vec::with_capacity(n);
    for i in (0..n).filter(|_| threads) {
        let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(8);
        let (done, parsed, held) = (done_tx.clone(), parsed_tx.clone(), held.clone());
        smartdev::fuzzing::spawn_worker_thread(format!("floor-{i}"), move || {
            if let Ok(answers) = rx.recv() {
                let _ = parsed.send((i, status_of(&answers)));
                let _ = done.send(());
            }
            let _ = held.recv();
        })
        .expect("spawn");
        inboxes.push(tx);
    }
    let mut statuses = vec![serde_json::Value::Null; n];
    if threads {
        ready_tx.send(inboxes).unwrap();
        poller.join().expect("poller");
        for _ in 0..n {
            let (i, v) = parsed_rx.recv().expect("a status");
            statuses[i] = v;
        }
    } else {
        let kept = poller.join().expect("poller").kept;
        statuses = kept.iter().map(|a| status_of(a)).collect();
    }
    let out = serde_json::to_string_pretty(&statuses).expect("JSON");
    let mut stdout = io::stdout().lock();
    stdout.write_all(out.as_bytes()).expect("output");
    stdout.flush().expect("output");
    std::process::exit(0);
}

/// The second of a device's answers (its status), from their payloads one after the other.
fn status_of(answers: &[u8]) -> serde_json::Value {
    serde_json::Deserializer::from_slice(answers)
        .into_iter::<serde_json::Value>()
        .nth(1)
        .expect("two answers")
        .expect("an answer")
}

/// The wire client's view of one device.
struct Conn {
    link: Link,
    phase: Phase,
    buf: Vec<u8>,
    /// Answers still awaited.
    awaited: usize,
    /// The answers read, for its thread.
    answers: Vec<u8>,
}

#[derive(PartialEq)]
enum Phase {
    Upgrade,
    Calls,
    Read,
}

/// One poller thread reads every device at `ports` over its WebSocket (open), then `refreshes` times asks each
/// for its status again over the same connection. With `threads`, each device also has a thread of its own,
/// started meanwhile as the controller starts workers, which is handed its device's answers and says when it
/// has them: a read ends when every thread has its answers.
fn wire_client(
    ports: &[u16],
    pins: Option<&[String]>,
    threads: bool,
    refreshes: usize,
    cpu: &Cpu,
    row: &mut Row,
) {
    let t = Instant::now();
    let n = ports.len();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<()>();
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
    let poll_ports = ports.to_vec();
    let pins = pins.map(<[String]>::to_vec);
    let child = cpu.child.clone();
    // The poller dials at once, as the push channel does before the workers start.
    let poller = std::thread::spawn(move || {
        let threads = threads.then_some((ready_rx, done_rx));
        poll_devices(
            &poll_ports,
            pins.as_deref(),
            threads,
            refreshes,
            t,
            &child,
            false,
        )
    });
    let mut started = Vec::new();
    if threads {
        let mut inboxes = Vec::new();
        for i in 0..n {
            let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(8);
            let done = done_tx.clone();
            let worker = smartdev::fuzzing::spawn_worker_thread(format!("floor-{i}"), move || {
                // Each read's answers; the thread stays until the poller drops its sender.
                while let Ok(answers) = rx.recv() {
                    std::hint::black_box(answers.len());
                    let _ = done.send(());
                }
            })
            .expect("spawn");
            inboxes.push(tx);
            started.push(worker);
        }
        ready_tx.send(inboxes).unwrap();
    }
    let Polled {
        open,
        at_open,
        reads,
        at_end,
        ..
    } = poller.join().expect("poller");
    row.open.walls.push(open);
    row.open.add_cpu(cpu.lap_to(at_open));
    row.read.walls.extend(reads);
    row.read.add_cpu(cpu.lap_to(at_end));
    for w in started {
        w.join().expect("join");
    }
}

type Inboxes = Vec<crossbeam_channel::Sender<Vec<u8>>>;

/// What [`poll_devices`] measured, and kept.
struct Polled {
    /// The open's wall time in ms.
    open: f64,
    /// Both processes' CPU ticks when the open ended.
    at_open: (u64, u64),
    /// Each read's wall time in ms.
    reads: Vec<f64>,
    /// The ticks after the last read.
    at_end: (u64, u64),
    /// With `keep_open` and no threads: each device's answers.
    kept: Vec<Vec<u8>>,
}

/// The poller's side of [`wire_client`] (the open timed from `t`; over TLS with `pins`, each device's
/// certificate pinned). With `keep_open` the connections stay open until the process exits, and without threads
/// each device's answers are kept.
fn poll_devices(
    ports: &[u16],
    pins: Option<&[String]>,
    threads: Option<(
        crossbeam_channel::Receiver<Inboxes>,
        crossbeam_channel::Receiver<()>,
    )>,
    refreshes: usize,
    t: Instant,
    child: &str,
    keep_open: bool,
) -> Polled {
    let mut poll = Poll::new().unwrap();
    let mut conns: Vec<Conn> = Vec::with_capacity(ports.len());
    for (i, port) in ports.iter().enumerate() {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut stream = TcpStream::connect(addr).expect("connect");
        // As the library's sockets: a small write is never held back for an acknowledgement.
        stream.set_nodelay(true).unwrap();
        poll.registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .unwrap();
        let upgrade = format!(
            "GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        let mut link = match pins {
            None => Link::plain(stream),
            Some(pins) => {
                let name = "127.0.0.1".try_into().expect("a server name");
                let conn = rustls::ClientConnection::new(tls::client_config(&pins[i]), name)
                    .expect("a TLS client");
                Link::tls(stream, conn)
            }
        };
        // Sent once connected (over TLS, once the handshake is done).
        link.send(upgrade.as_bytes()).expect("send");
        conns.push(Conn {
            link,
            phase: Phase::Upgrade,
            buf: Vec::new(),
            awaited: 2,
            answers: Vec::new(),
        });
    }
    let mut inboxes: Option<Inboxes> = None;
    let (ready, done) = threads.unzip();
    let mut events = Events::with_capacity(1024);
    let mut wire = Wire {
        poll: &mut poll,
        events: &mut events,
        conns: &mut conns,
        ready: ready.as_ref(),
        done: done.as_ref(),
        inboxes: &mut inboxes,
        keep_answers: keep_open,
    };
    wire.read_all();
    let open = t.elapsed().as_secs_f64() * 1000.0;
    let at_open = now_ticks(child);
    let mut reads = Vec::new();
    for _ in 0..refreshes {
        let t = Instant::now();
        for c in wire.conns.iter_mut() {
            c.phase = Phase::Calls;
            c.awaited = 1;
            c.link
                .send(&masked(
                    br#"{"id":3,"src":"floor","method":"Shelly.GetStatus"}"#,
                ))
                .expect("send");
        }
        wire.read_all();
        reads.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let at_end = now_ticks(child);
    let mut kept = Vec::new();
    if keep_open {
        kept = conns
            .iter_mut()
            .map(|c| std::mem::take(&mut c.answers))
            .collect();
        // Open until the process exits, as a one-shot command's connections are.
        std::mem::forget(conns);
        std::mem::forget(poll);
    }
    Polled {
        open,
        at_open,
        reads,
        at_end,
        kept,
    }
}

/// What [`Wire::read_all`] drives.
struct Wire<'a> {
    poll: &'a mut Poll,
    events: &'a mut Events,
    conns: &'a mut [Conn],
    /// The threads' inboxes, once they are all started.
    ready: Option<&'a crossbeam_channel::Receiver<Inboxes>>,
    /// A thread's word that it has its answers.
    done: Option<&'a crossbeam_channel::Receiver<()>>,
    inboxes: &'a mut Option<Inboxes>,
    /// Without threads: keep each device's answers in its `Conn` (the whole-process floor prints them).
    keep_answers: bool,
}

impl Wire<'_> {
    /// Drives every connection until each has its awaited answers (and, with threads, each thread has them).
    fn read_all(&mut self) {
        let Wire {
            poll,
            events,
            conns,
            ready,
            done,
            inboxes,
            keep_answers,
        } = self;
        let mut left = conns.iter().filter(|c| c.phase != Phase::Read).count();
        let mut handed = 0;
        // Devices read before their threads were all started.
        let mut unhanded: Vec<usize> = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        let deadline = Instant::now() + Duration::from_secs(60);
        let threads = done.is_some();
        while left > 0 || (threads && handed < conns.len()) {
            assert!(
                Instant::now() < deadline,
                "wire client: {left} devices not read in 60 s"
            );
            if inboxes.is_none()
                && let Some(r) = ready
            {
                // Once every device is read, only the threads are awaited.
                **inboxes = if left == 0 {
                    r.recv().ok()
                } else {
                    r.try_recv().ok()
                };
                if let Some(s) = inboxes.as_ref() {
                    for i in unhanded.drain(..) {
                        s[i].send(std::mem::take(&mut conns[i].answers)).unwrap();
                        handed += 1;
                    }
                }
            }
            if left == 0 {
                continue;
            }
            poll.poll(events, Some(Duration::from_millis(100))).unwrap();
            for ev in events.iter() {
                let i = ev.token().0;
                let c = &mut conns[i];
                if c.phase == Phase::Read {
                    continue;
                }
                c.link.flush().expect("write");
                match c.link.receive(&mut chunk, &mut c.buf) {
                    Ok(true) => {}
                    Ok(false) => panic!("device {i} closed"),
                    Err(e) => panic!("device {i}: {e}"),
                }
                if c.phase == Phase::Upgrade
                    && let Some(end) = find(&c.buf, b"\r\n\r\n")
                {
                    assert!(
                        c.buf.starts_with(b"HTTP/1.1 101"),
                        "device {i} did not upgrade"
                    );
                    c.buf.drain(..end + 4);
                    c.phase = Phase::Calls;
                    let calls = [
                        masked(br#"{"id":1,"src":"floor","method":"Shelly.GetDeviceInfo"}"#),
                        masked(br#"{"id":2,"src":"floor","method":"Shelly.GetStatus"}"#),
                    ]
                    .concat();
                    c.link.send(&calls).expect("send");
                }
                if c.phase == Phase::Calls {
                    while let Some((f, used)) = next_frame(&c.buf, false) {
                        // Answers carry an id; notifications (a subscribed client gets them) do not.
                        if f.payload.starts_with(b"{\"id\":") {
                            c.awaited = c.awaited.saturating_sub(1);
                            c.answers.extend_from_slice(&f.payload);
                        }
                        c.buf.drain(..used);
                    }
                    if c.awaited == 0 {
                        c.phase = Phase::Read;
                        left -= 1;
                        match inboxes.as_ref() {
                            _ if !threads && !*keep_answers => c.answers.clear(),
                            _ if !threads => {}
                            Some(s) => {
                                s[i].send(std::mem::take(&mut c.answers)).unwrap();
                                handed += 1;
                            }
                            None => unhanded.push(i),
                        }
                    }
                }
            }
        }
        if let Some(done) = done {
            for _ in 0..conns.len() {
                done.recv().expect("a thread ended early");
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A client's text frame (masked with a fixed key: the floor does not need fresh noise).
fn masked(payload: &[u8]) -> Vec<u8> {
    frame::encode(Opcode::Text, true, payload, Some([0x12, 0x34, 0x56, 0x78]))
}

/// The first whole frame in `buf` (masked from a client) and the bytes it took; the peers are ours, so a
/// broken frame is a bug here.
fn next_frame(buf: &[u8], masked: bool) -> Option<(frame::Frame, usize)> {
    frame::decode(buf, masked, 1 << 20).expect("a valid frame")
}

/// The wire devices' child, seen from the parent.
struct WireChild {
    child: std::process::Child,
    ports: Vec<u16>,
    /// Over TLS, the certificate every device serves.
    fingerprint: String,
}

impl WireChild {
    fn start(n: usize, latency: u64, tls: bool) -> WireChild {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([WIRE_FLAG, &n.to_string(), &latency.to_string()])
            .args(tls.then_some("tls"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("wire devices");
        let mut out = io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let ports = line
            .strip_prefix("ports")
            .expect("ports")
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        line.clear();
        out.read_line(&mut line).unwrap();
        let fingerprint = line
            .strip_prefix("fingerprint")
            .expect("fingerprint")
            .trim()
            .to_string();
        WireChild {
            child,
            ports,
            fingerprint,
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// A wire device's connection.
struct Served {
    /// The device's index: its identity in the answers.
    dev: usize,
    link: Link,
    upgraded: bool,
    buf: Vec<u8>,
}

/// The wire devices: one thread, one poll. Tokens below N are listeners; connections take the next ones. Ends
/// when stdin closes (a thread watches it). With `tls`, every device serves one self-signed certificate (TLS 1.2
/// alone, as Shelly's stack); its fingerprint is printed after the ports.
fn wire_devices(n: usize, latency: Duration, tls: bool) {
    let mut poll = Poll::new().unwrap();
    let mut listeners = Vec::new();
    let mut ports = Vec::new();
    for i in 0..n {
        let mut l = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        ports.push(l.local_addr().unwrap().port().to_string());
        poll.registry()
            .register(&mut l, Token(i), Interest::READABLE)
            .unwrap();
        listeners.push(l);
    }
    let (config, fingerprint) = match tls {
        true => {
            let (config, fingerprint) = tls::server_config();
            (Some(config), fingerprint)
        }
        false => (None, String::new()),
    };
    println!("ports {}", ports.join(" "));
    println!("fingerprint {fingerprint}");
    io::stdout().flush().unwrap();
    std::thread::spawn(|| {
        let _ = io::copy(&mut io::stdin(), &mut io::sink());
        std::process::exit(0);
    });
    // Each device's answers with its own MAC (the library checks identities), made before any client comes.
    let answers: Vec<[String; 3]> = (0..n)
        .map(|i| {
            let mac = format!("02AB{i:08X}");
            let own = |s: &str| {
                s.replace(MAC, &mac)
                    .replace(&MAC.to_lowercase(), &mac.to_lowercase())
            };
            let src = format!("shellyplus1pm-{}", mac.to_lowercase());
            [own(DEVICE_INFO), own(STATUS), src]
        })
        .collect();
    let mut conns: Vec<Option<Served>> = Vec::new();
    // (due, connection token, answer frame): one latency for all, so in order of arrival.
    let mut due: VecDeque<(Instant, usize, Vec<u8>)> = VecDeque::new();
    let mut events = Events::with_capacity(1024);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let timeout = due
            .front()
            .map(|(at, _, _)| at.saturating_duration_since(Instant::now()));
        poll.poll(&mut events, timeout).unwrap();
        for ev in events.iter() {
            let t = ev.token().0;
            if t < n {
                while let Ok((mut stream, _)) = listeners[t].accept() {
                    // Two answers in a row: the second must not wait for the client's delayed ACK.
                    stream.set_nodelay(true).unwrap();
                    let token = n + conns.len();
                    poll.registry()
                        .register(&mut stream, Token(token), Interest::READABLE)
                        .unwrap();
                    let link = match &config {
                        None => Link::plain(stream),
                        Some(config) => Link::tls(
                            stream,
                            rustls::ServerConnection::new(Arc::clone(config)).expect("TLS"),
                        ),
                    };
                    conns.push(Some(Served {
                        dev: t,
                        link,
                        upgraded: false,
                        buf: Vec::new(),
                    }));
                }
                continue;
            }
            let Some(c) = conns[t - n].as_mut() else {
                continue;
            };
            let closed = !c.link.receive(&mut chunk, &mut c.buf).unwrap_or(false);
            if closed {
                conns[t - n] = None;
                continue;
            }
            if !c.upgraded {
                let Some(end) = find(&c.buf, b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&c.buf[..end]).into_owned();
                c.buf.drain(..end + 4);
                let key = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                let accept = smartdev::ws::accept_key(&key);
                let answer = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                     Sec-WebSocket-Accept: {accept}\r\n\r\n"
                );
                c.upgraded = true;
                // Small: the socket takes it at once (a client gone meanwhile is seen at its next read).
                let _ = c.link.send(answer.as_bytes());
            }
            while let Some((f, used)) = next_frame(&c.buf, true) {
                c.buf.drain(..used);
                let text = String::from_utf8_lossy(&f.payload);
                let id: String = text
                    .split("\"id\":")
                    .nth(1)
                    .unwrap_or("0")
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let [info, status, src] = &answers[c.dev];
                let result = if text.contains("GetDeviceInfo") {
                    info
                } else if text.contains("Webhook.ListSupported") {
                    SUPPORTED
                } else {
                    status
                };
                let answer =
                    format!(r#"{{"id":{id},"src":"{src}","dst":"floor","result":{result}}}"#);
                due.push_back((
                    Instant::now() + latency,
                    t,
                    frame::encode(Opcode::Text, true, answer.as_bytes(), None),
                ));
            }
        }
        let now = Instant::now();
        while due.front().is_some_and(|(at, _, _)| *at <= now) {
            let (_, t, frame) = due.pop_front().unwrap();
            if let Some(c) = conns[t - n].as_mut() {
                let _ = c.link.send(&frame);
            }
        }
    }
}
