//! Shared by the benchmarks that measure the library's process alone: the emulated devices run in a child
//! process (this same executable re-run with `--emulator N LATENCY_MS`), driven through lines on its stdin;
//! plus readers of `/proc/self` for threads, RSS and CPU time.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use smartdev::ModelLibrary;
use smartdev::emulator::{DeviceSpec, Emulator};

/// The `sdctl` built beside the running example (`target/release/sdctl` for `target/release/examples/*`);
/// when it is missing, says how to build it and exits with 2. `bench` names the example in the message.
pub fn sdctl_or_exit(bench: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let sdctl = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("sdctl"))
        .expect("target directory");
    if !sdctl.is_file() {
        eprintln!(
            "{bench}: {} is missing; build it first with `cargo build --release --bins --examples`",
            sdctl.display()
        );
        std::process::exit(2);
    }
    sdctl
}

/// The hidden first argument that makes the executable the emulator child.
pub const CHILD_FLAG: &str = "--emulator";

/// Runs the child when the first argument is [`CHILD_FLAG`]; returns otherwise. Protocol (one line each way):
/// start → `ports P0 P1 ...` then `admin PORT`; `out I 0|1` → `ok` (sets output 0 of device I);
/// `fire I EVENT` → `ok` (sets input 0 on, fires EVENT on component 0); `sub` → number of devices with a
/// subscribed WebSocket; `hold I 1|0` → `ok` (device I holds its upgrade requests unanswered, or ends the
/// held ones); `storm` → drops every device's WebSocket, waits until each is subscribed again (at
/// most 120 s) and answers `storm MS...` (per device, ms from the drop to its new subscription, -1 = not
/// back). Ends when stdin closes.
pub fn maybe_child() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(CHILD_FLAG) {
        return;
    }
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let latency: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(20);
    // `tls` after the latency: every device serves HTTPS (a self-signed certificate each).
    let tls = args.get(4).map(String::as_str) == Some("tls");
    let specs = (0..n)
        .map(|_| {
            let mut s = DeviceSpec::new("ShellyPlus1PM");
            s.tls = tls;
            s
        })
        .collect();
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator");
    for i in 0..n {
        emu.set_latency(i, Duration::from_millis(latency));
    }
    let mut out = std::io::stdout().lock();
    let ports: Vec<String> = (0..n).map(|i| emu.port(i).to_string()).collect();
    writeln!(out, "ports {}", ports.join(" ")).unwrap();
    writeln!(out, "admin {}", emu.admin_port()).unwrap();
    // HTTPS devices' certificate fingerprints (for `CertSha256`), else an empty list.
    let prints: Vec<String> = (0..n).filter_map(|i| emu.certificate_sha256(i)).collect();
    writeln!(out, "fingerprints {}", prints.join(" ")).unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        let reply = match w.as_slice() {
            ["out", i, s] => {
                emu.set_output(i.parse().unwrap(), 0, *s == "1");
                "ok".to_string()
            }
            ["fire", i, ev] => {
                let i = i.parse().unwrap();
                emu.set_input(i, 0, true);
                emu.fire_event(i, ev, 0);
                "ok".to_string()
            }
            ["flood", i, bytes] => {
                let bytes: usize = bytes.parse().unwrap();
                emu.flood_ws(i.parse().unwrap(), (bytes > 0).then_some(bytes));
                "ok".to_string()
            }
            ["drop", i] => {
                emu.drop_ws(i.parse().unwrap());
                "ok".to_string()
            }
            ["hold", i, s] => {
                emu.hold_ws_upgrades(i.parse().unwrap(), *s == "1");
                "ok".to_string()
            }
            ["flooded", i] => emu.ws_flooded(i.parse().unwrap()).to_string(),
            ["sub"] => (0..n)
                .filter(|&i| emu.ws_subscribed(i) >= 1)
                .count()
                .to_string(),
            ["storm"] => {
                let t = Instant::now();
                for i in 0..n {
                    emu.drop_ws(i);
                }
                let mut back: Vec<Option<f64>> = vec![None; n];
                let mut left = n;
                while left > 0 && t.elapsed() < Duration::from_secs(120) {
                    for (i, b) in back.iter_mut().enumerate() {
                        if b.is_none() && emu.ws_subscribed(i) >= 1 {
                            *b = Some(t.elapsed().as_secs_f64() * 1000.0);
                            left -= 1;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                let ms: Vec<String> = back
                    .iter()
                    .map(|b| format!("{:.1}", b.unwrap_or(-1.0)))
                    .collect();
                format!("storm {}", ms.join(" "))
            }
            _ => format!("error: unknown command '{line}'"),
        };
        writeln!(out, "{reply}").unwrap();
        out.flush().unwrap();
    }
    drop(emu);
    std::process::exit(0);
}

/// The emulator child seen from the parent.
pub struct EmuChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub ports: Vec<u16>,
    pub admin_port: u16,
    /// Per device, its certificate's SHA-256 fingerprint (HTTPS devices; empty otherwise).
    pub fingerprints: Vec<String>,
}

impl EmuChild {
    /// Starts `n` ShellyPlus1PM devices answering after `latency_ms` in a child process.
    pub fn start(n: usize, latency_ms: u64) -> EmuChild {
        Self::start_with(n, latency_ms, false)
    }

    /// [`EmuChild::start`], the devices serving HTTPS when `tls`.
    pub fn start_with(n: usize, latency_ms: u64, tls: bool) -> EmuChild {
        let exe = std::env::current_exe().expect("current_exe");
        let mut child = Command::new(exe)
            .args([CHILD_FLAG, &n.to_string(), &latency_ms.to_string()])
            .args(tls.then_some("tls"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the emulator child");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let ports: Vec<u16> = line
            .strip_prefix("ports")
            .unwrap_or_else(|| panic!("emulator child: {line:?}"))
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(ports.len(), n);
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let admin_port = line.trim().strip_prefix("admin ").unwrap().parse().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let fingerprints = line
            .trim_end()
            .strip_prefix("fingerprints")
            .unwrap_or_else(|| panic!("emulator child: {line:?}"))
            .split_whitespace()
            .map(String::from)
            .collect();
        EmuChild {
            fingerprints,
            child,
            stdin,
            stdout,
            ports,
            admin_port,
        }
    }

    /// Writes a command line (flushed at once), without waiting for the answer.
    pub fn send(&mut self, cmd: &str) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
        s.flush().unwrap();
    }

    /// Reads the answer to the last command.
    pub fn reply(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.starts_with("error"), "emulator child: {line}");
        line.trim_end().to_string()
    }

    pub fn ask(&mut self, cmd: &str) -> String {
        self.send(cmd);
        self.reply()
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's CPU time so far (utime + stime) in clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        cpu_ticks_of(&self.child.id().to_string())
    }

    /// Devices with a subscribed push channel.
    pub fn subscribed(&mut self) -> usize {
        self.ask("sub").parse().unwrap()
    }

    /// Closes the child's stdin and waits for it to exit.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A field of `/proc/self/status` in KiB (`VmRSS:`, `VmHWM:`).
pub fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of this process in clock ticks (`/proc/self/stat` fields 14 and 15; 100 per second on Linux).
pub fn cpu_ticks() -> u64 {
    cpu_ticks_of("self")
}

/// utime + stime of process `pid` (`self` or a number) in clock ticks.
pub fn cpu_ticks_of(pid: &str) -> u64 {
    stat_sum(pid, &[14, 15])
}

/// The CPU time (user + system, in clock ticks) of this process's children that have ended and been waited
/// for: a difference across runs of `sdctl` is those runs' own CPU.
pub fn waited_children_ticks() -> u64 {
    stat_sum("self", &[16, 17])
}

/// The sum of fields `ks` (numbered as in proc(5)) of `/proc/<pid>/stat`.
fn stat_sum(pid: &str, ks: &[usize]) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name in parentheses may hold spaces: count fields after the last ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': field 3 (state) is f[0], so field k is f[k - 3].
    ks.iter()
        .map(|k| {
            f.get(k - 3)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// A thread's name with a trailing number or id cut off (`sd-dev-12` → `sd-dev-*`).
fn group(name: &str) -> String {
    match name.rsplit_once('-') {
        Some((head, tail)) if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) => {
            format!("{head}-*")
        }
        _ => name.to_string(),
    }
}

/// This process's threads: (group name, CPU time in ns from schedstat) each.
fn threads() -> Vec<(String, u64)> {
    let mut v = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc/self/task") {
        for e in entries.flatten() {
            let name = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            let s = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
            let ns = s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            v.push((group(name.trim()), ns));
        }
    }
    v
}

/// This process's threads grouped by name (see [`group`]), most numerous first.
pub fn threads_by_name() -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for (name, _) in threads() {
        *counts.entry(name).or_default() += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// CPU time (ns) of the live threads by group name.
pub fn cpu_ns_by_name() -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for (name, ns) in threads() {
        *m.entry(name).or_default() += ns;
    }
    m
}

pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Resident memory by kind of mapping from `/proc/self/smaps`: (kind, KiB resident, mappings). Anonymous
/// mappings are grouped by size, so N thread stacks of one size show as one line.
pub fn rss_by_mapping() -> Vec<(String, u64, usize)> {
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut groups = std::collections::BTreeMap::<String, (u64, usize)>::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            let mut parts = line.split_whitespace();
            let range = parts.next().unwrap_or("");
            let path = parts.nth(4).unwrap_or("");
            let (a, b) = range.split_once('-').unwrap_or(("0", "0"));
            let size =
                u64::from_str_radix(b, 16).unwrap_or(0) - u64::from_str_radix(a, 16).unwrap_or(0);
            current = Some(if path.is_empty() {
                format!("anonymous {} KiB", size / 1024)
            } else if path.starts_with('[') {
                path.to_string()
            } else {
                "files (binary, libs)".to_string()
            });
        } else if let (Some(k), Some(v)) = (current.as_ref(), line.strip_prefix("Rss:")) {
            let kib: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            let e = groups.entry(k.clone()).or_default();
            e.0 += kib;
            e.1 += 1;
        }
    }
    // Anonymous sizes seen fewer than 10 times (malloc arenas, buffers) as one line.
    let mut other = (0, 0);
    groups.retain(|k, (r, c)| {
        let keep = !k.starts_with("anonymous") || *c >= 10;
        if !keep {
            other.0 += *r;
            other.1 += *c;
        }
        keep
    });
    groups.insert("anonymous, other sizes (malloc arenas...)".into(), other);
    let mut v: Vec<_> = groups.into_iter().map(|(k, (r, c))| (k, r, c)).collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v
}

/// The value at quantile `q` of sorted `v`.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// "N samples: p50 …, p99 …, max … ms" of latencies in ms (sorted here), or that there were none.
pub fn latency_summary(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    match v.last() {
        None => "no samples".into(),
        Some(max) => format!(
            "{} samples: p50 {:.2} ms, p99 {:.2} ms, max {max:.2} ms",
            v.len(),
            quantile(v, 0.5),
            quantile(v, 0.99)
        ),
    }
}

/// Cores available.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |c| c.get())
}

/// The 1-minute load average (how busy the machine was).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}
