//! The MQTT channel (`Channel: mqtt`) against N emulated devices that are clients of a Mosquitto this benchmark
//! starts on loopback (its own configuration in a temporary folder; the `mosquitto` binary from the PATH or
//! /usr/sbin). The devices run in a child process (this executable re-run with `--mqtt-child`), so threads, RSS
//! and CPU are the library's process alone.
//!
//! `cargo run --release --example bench_mqtt -- gen2 [N=1000] [SAMPLES=300]`
//! `cargo run --release --example bench_mqtt -- gen2-http [N=1000]` (the same devices over HTTP, for RSS)
//! `cargo run --release --example bench_mqtt -- tasmota [N=1000] [SECONDS=60]`
//!
//! `gen2`: N ShellyPlus1PM; prints `open` (every device's first read goes through the broker before `open`
//! returns), threads, RSS, idle CPU, then change→snapshot (from writing the command to the child until
//! `ctl.output` shows the new state, polled every 50 µs) and change→wake (until the wake flag is set by the
//! `switch.on`/`off` event). `gen2-http`: the same devices with `Channel: http`, open and RSS only.
//! `tasmota`: N Tasmota with `TelePeriod 10` (set through the group topic): the controller's CPU over SECONDS
//! while every device publishes `STATE` and `SENSOR` every 10 s.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use smartdev::emulator::{DeviceSpec, Emulator, MqttSpec};
use smartdev::{Controller, Identity, ModelLibrary, Settings, WakeFlag};

const CHILD: &str = "--mqtt-child";

fn main() {
    child();
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    match args.get(1).map(String::as_str) {
        Some("gen2") => gen2(arg(2, 1000) as usize, arg(3, 300) as usize, false),
        Some("gen2-http") => gen2(arg(2, 1000) as usize, 0, true),
        Some("tasmota") => tasmota(arg(2, 1000) as usize, arg(3, 60)),
        _ => eprintln!(
            "usage: bench_mqtt gen2 [N] [SAMPLES] | gen2-http [N] | tasmota [N] [SECONDS]"
        ),
    }
}

/// The child: `--mqtt-child MODEL N BROKER_PORT`: starts the devices, waits until each is connected, prints
/// `topics T0 T1 …` and `ports P0 P1 …`, then serves `out I 0|1` → `ok` until stdin closes.
fn child() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(CHILD) {
        return;
    }
    let model = &args[2];
    let n: usize = args[3].parse().unwrap();
    let broker = format!("127.0.0.1:{}", args[4]);
    let specs = (0..n)
        .map(|_| {
            let mut d = DeviceSpec::new(model);
            d.mqtt = Some(MqttSpec::new(&broker));
            d
        })
        .collect();
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator");
    let end = Instant::now() + Duration::from_secs(120);
    while (0..n).any(|i| !emu.mqtt_connected(i)) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = std::io::stdout().lock();
    let topics: Vec<&str> = (0..n).map(|i| emu.mqtt_topic(i).unwrap()).collect();
    writeln!(out, "topics {}", topics.join(" ")).unwrap();
    let ports: Vec<String> = (0..n).map(|i| emu.port(i).to_string()).collect();
    writeln!(out, "ports {}", ports.join(" ")).unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        if let ["out", i, s] = w.as_slice() {
            emu.set_output(i.parse().unwrap(), 0, *s == "1");
        }
        writeln!(out, "ok").unwrap();
        out.flush().unwrap();
    }
    drop(emu);
    std::process::exit(0);
}

/// Mosquitto on a free loopback port with its own configuration; killed on drop.
struct Mosquitto {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Mosquitto {
    fn start() -> Mosquitto {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("bench-mqtt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "per_listener_settings false\npersistence false\nlog_dest none\nlistener {port} 127.0.0.1\nallow_anonymous true\nmax_connections -1\n"
            ),
        )
        .unwrap();
        let binary = std::env::var("PATH")
            .unwrap_or_default()
            .split(':')
            .map(|d| std::path::Path::new(d).join("mosquitto"))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("/usr/sbin/mosquitto"));
        let child = Command::new(binary)
            .args(["-c", conf.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto (Debian package mosquitto)");
        let end = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < end, "mosquitto did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Mosquitto { child, port, dir }
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The device child seen from here.
struct Devices {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    topics: Vec<String>,
    ports: Vec<u16>,
}

impl Devices {
    fn start(model: &str, n: usize, broker: u16) -> Devices {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([CHILD, model, &n.to_string(), &broker.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let topics = line
            .trim()
            .strip_prefix("topics ")
            .unwrap()
            .split(' ')
            .map(String::from)
            .collect();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let ports = line
            .trim()
            .strip_prefix("ports ")
            .unwrap()
            .split(' ')
            .map(|p| p.parse().unwrap())
            .collect();
        Devices {
            child,
            stdin,
            stdout,
            topics,
            ports,
        }
    }

    fn send(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line
    }
}

impl Drop for Devices {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn settings(devs: &Devices, broker: u16, model: &str, http: bool) -> Settings {
    let mut yaml = format!(
        "SmartDevices:\n  RefreshInterval: 0\n  FollowMoves: false\n  PingAllowed: false\n  Mqtt: {{Host: 127.0.0.1, Port: {broker}, ClientId: bench}}\n  Devices:\n"
    );
    for (i, (t, p)) in devs.topics.iter().zip(&devs.ports).enumerate() {
        let block = match model {
            "Tasmota" => format!(
                "Name: D{i}, Model: Tasmota, Outputs: [{{Name: O{i}}}], Meters: [{{Name: M{i}}}]"
            ),
            _ => format!("Name: D{i}, Model: {model}, Outputs: [{{Name: O{i}, Webhooks: true}}]"),
        };
        if http {
            yaml.push_str(&format!(
                "    - {{{block}, Channel: http, Hostname: 127.0.0.1, Port: {p}}}\n"
            ));
        } else {
            yaml.push_str(&format!(
                "    - {{{block}, Channel: mqtt, MqttTopic: '{t}'}}\n"
            ));
        }
    }
    Settings::from_yaml_str(&yaml).unwrap()
}

fn memory_and_threads() {
    let by_name = support::threads_by_name();
    let names: Vec<String> = by_name.iter().map(|(n, c)| format!("{n} {c}")).collect();
    println!(
        "threads: {} ({})",
        support::thread_count(),
        names.join(", ")
    );
    println!(
        "RSS: {:.1} MiB, peak (VmHWM) {:.1} MiB",
        support::status_kib("VmRSS:") as f64 / 1024.0,
        support::status_kib("VmHWM:") as f64 / 1024.0
    );
}

fn gen2(n: usize, samples: usize, http: bool) {
    let broker = Mosquitto::start();
    let t = Instant::now();
    let mut devs = Devices::start("ShellyPlus1PM", n, broker.port);
    println!(
        "{n} ShellyPlus1PM, MQTT clients of Mosquitto on 127.0.0.1:{} (child process), connected in {:.1} s; {} cores, load average {}; Channel: {}",
        broker.port,
        t.elapsed().as_secs_f64(),
        support::cores(),
        support::load_average(),
        if http { "http" } else { "mqtt" }
    );
    let rss_before = support::status_kib("VmRSS:");
    let wake = WakeFlag::new();
    let s = settings(&devs, broker.port, "ShellyPlus1PM", http);
    let t = Instant::now();
    let ctl = Controller::open(s, Some(wake.clone())).unwrap();
    let open = t.elapsed();
    let online = ctl.devices().iter().filter(|d| d.online).count();
    println!(
        "open (every device read): {:.0} ms; {online}/{n} online",
        open.as_secs_f64() * 1000.0
    );
    println!("RSS before open: {:.1} MiB", rss_before as f64 / 1024.0);
    memory_and_threads();
    let (c0, t0) = (support::cpu_ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(5));
    println!(
        "idle CPU over 5 s: {} ms ({:.2} % of one core)",
        (support::cpu_ticks() - c0) * 10,
        (support::cpu_ticks() - c0) as f64 * 10.0 / t0.elapsed().as_secs_f64() / 10.0
    );
    if http || samples == 0 {
        ctl.close();
        return;
    }
    let (mut snap, mut woke) = (Vec::new(), Vec::new());
    let mut missed = 0;
    for k in 0..samples {
        let i = (k * 7919) % n;
        let name = format!("O{i}");
        let want = ctl.output(Identity::name(&name)).unwrap().state != Some(true);
        while ctl.pull_webhook_event().is_some() {}
        wake.clear();
        let t = Instant::now();
        devs.send(&format!("out {i} {}", u8::from(want)));
        let mut seen = None;
        while t.elapsed() < Duration::from_secs(5) {
            if ctl.output(Identity::name(&name)).unwrap().state == Some(want) {
                seen = Some(t.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        match seen {
            Some(d) => snap.push(d.as_secs_f64() * 1000.0),
            None => missed += 1,
        }
        if wake.wait(Duration::from_secs(5)) {
            woke.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        devs.reply();
    }
    println!(
        "change→snapshot: {}; {missed} not seen within 5 s",
        support::latency_summary(&mut snap)
    );
    println!("change→wake: {}", support::latency_summary(&mut woke));
    memory_and_threads();
    let t = Instant::now();
    ctl.close();
    println!("close: {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
}

fn tasmota(n: usize, seconds: u64) {
    let broker = Mosquitto::start();
    let t = Instant::now();
    let devs = Devices::start("Tasmota", n, broker.port);
    println!(
        "{n} Tasmota, MQTT clients of Mosquitto on 127.0.0.1:{} (child process), connected in {:.1} s; {} cores, load average {}",
        broker.port,
        t.elapsed().as_secs_f64(),
        support::cores(),
        support::load_average()
    );
    let s = settings(&devs, broker.port, "Tasmota", false);
    let t = Instant::now();
    let ctl = Controller::open(s, None).unwrap();
    let online = ctl.devices().iter().filter(|d| d.online).count();
    println!(
        "open (every device read): {:.0} ms; {online}/{n} online",
        t.elapsed().as_secs_f64() * 1000.0
    );
    // Every device: telemetry every 10 s (the group topic reaches them all).
    let ok = Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &broker.port.to_string(),
            "-t",
            "cmnd/tasmotas/TelePeriod",
            "-m",
            "10",
        ])
        .status()
        .expect("mosquitto_pub (Debian package mosquitto-clients)");
    assert!(ok.success());
    // Let the first burst (every device publishes at once on the change) pass.
    std::thread::sleep(Duration::from_secs(12));
    memory_and_threads();
    let before = support::cpu_ns_by_name();
    let (c0, t0) = (support::cpu_ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let ticks = support::cpu_ticks() - c0;
    let wall = t0.elapsed().as_secs_f64();
    let after = support::cpu_ns_by_name();
    println!(
        "CPU over {wall:.0} s with {n} devices × STATE + SENSOR every 10 s ({:.0} messages/s): {} ms = {:.2} % of one core",
        n as f64 * 2.0 / 10.0,
        ticks * 10,
        ticks as f64 * 10.0 / wall / 10.0
    );
    let by: Vec<String> = after
        .iter()
        .map(|(k, v)| (k, v.saturating_sub(*before.get(k).unwrap_or(&0))))
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {:.0} ms", v as f64 / 1e6))
        .collect();
    println!("  by thread: {}", by.join(", "));
    let power = ctl
        .devices()
        .iter()
        .filter(|d| d.meters[0].power.is_some())
        .count();
    println!("  devices with a power reading: {power}/{n}");
    ctl.close();
}
