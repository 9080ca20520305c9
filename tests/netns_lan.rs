//! Tests on a virtual network (`tests/common/netns.rs`): devices and the controller in separate Linux
//! network namespaces joined by a bridge, never on the machine's real interfaces. They need root and `ip`;
//! without them `build.rs` sets `cfg(smartdev_no_netns)` and every test here is ignored, saying why.
//!
//! A test that needs a process of its own in a host re-executes this binary there, running only itself with
//! `SMARTDEV_NETNS_CHILD` naming the role: each test starts with `if let Some(role) = child_role()`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Output, Stdio};
use std::time::Duration;

use common::netns::{self, Lan, child_role};
use common::{TempDir, eventually};

const LIMIT: Duration = Duration::from_secs(30);
/// Printed before the lines a child reports, to tell them from the test harness's.
const MARK: &str = "NETNS-CHILD ";
const MDNS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);

/// What a re-executed test does in its host; its arguments come in `NETNS_ARG`.
fn child(role: &str) {
    let arg = std::env::var("NETNS_ARG").unwrap_or_default();
    let out = |s: String| {
        println!("{MARK}{s}");
        std::io::stdout().flush().unwrap();
    };
    match role {
        // Accept one connection on ARG (ip), tell the peer its own address, report the peer.
        "listen" => {
            let l = TcpListener::bind((arg.parse::<Ipv4Addr>().unwrap(), 0)).unwrap();
            out(format!("PORT {}", l.local_addr().unwrap().port()));
            let (mut s, peer) = l.accept().unwrap();
            s.write_all(peer.ip().to_string().as_bytes()).unwrap();
            out(format!("PEER {}", peer.ip()));
        }
        // Connect to ARG (ip:port), report what the listener says our address is.
        "connect" => {
            let addr: SocketAddr = arg.parse().unwrap();
            let mut s = TcpStream::connect_timeout(&addr, LIMIT).unwrap();
            let mut seen = String::new();
            s.read_to_string(&mut seen).unwrap();
            out(format!("SEEN {seen}"));
        }
        // Join the mDNS group on ARG (our ip), report the first datagram's sender and text.
        "mcast-recv" => {
            let me: Ipv4Addr = arg.parse().unwrap();
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 5353)).unwrap();
            s.join_multicast_v4(&MDNS, &me).unwrap();
            s.set_read_timeout(Some(LIMIT)).unwrap();
            out("READY".into());
            let mut buf = [0u8; 512];
            let (n, from) = s.recv_from(&mut buf).unwrap();
            out(format!(
                "GOT {} {}",
                from.ip(),
                String::from_utf8_lossy(&buf[..n])
            ));
        }
        // Send to the mDNS group every 50 ms until killed (the receiver may join after the first ones).
        "mcast-send" => {
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
            loop {
                s.send_to(b"hello", (MDNS, 5353)).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // Make a Lan with a process in it, report both, and when told (a line on stdin) die without
        // dropping anything.
        "abandon" => {
            let lan = Lan::new(1);
            let p = lan.spawn(0, &["sleep", "600"]);
            out(format!("TAG {}", lan.tag()));
            out(format!("PID {}", p.pid()));
            out(format!("ADDR {}", lan.addr(0)));
            let _ = std::io::stdin().read_line(&mut String::new());
            std::process::abort();
        }
        other => panic!("unknown child role {other}"),
    }
}

/// Whether process `pid` is gone (or a zombie: dead, only not yet reaped by a parent that is not us).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => matches!(
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next()),
            Some(Some('Z' | 'X'))
        ),
    }
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn hosts_reach_each_other_by_tcp_and_multicast() {
    if let Some(role) = child_role() {
        return child(&role);
    }
    const ME: &str = "hosts_reach_each_other_by_tcp_and_multicast";
    let lan = Lan::new(2);
    for (a, b) in [(0, 1), (1, 0)] {
        let ip_a = lan.addr(a).to_string();
        let listener = lan.spawn_self(a, ME, "listen", &[("NETNS_ARG", &ip_a)]);
        let port = listener.marked(MARK, LIMIT).expect("listener's port");
        let port = port.strip_prefix("PORT ").unwrap();
        let target = format!("{ip_a}:{port}");
        let client = lan.spawn_self(b, ME, "connect", &[("NETNS_ARG", &target)]);
        let seen = client.marked(MARK, LIMIT).expect("client's report");
        assert_eq!(seen, format!("SEEN {}", lan.addr(b)), "{b} → {a}");
        let peer = listener.marked(MARK, LIMIT).expect("listener's report");
        assert_eq!(peer, format!("PEER {}", lan.addr(b)));
    }
    // Multicast crosses the bridge: host 1 hears host 0's mDNS-group datagrams.
    let recv = lan.spawn_self(
        1,
        ME,
        "mcast-recv",
        &[("NETNS_ARG", &lan.addr(1).to_string())],
    );
    assert_eq!(recv.marked(MARK, LIMIT).as_deref(), Some("READY"));
    let send = lan.spawn_self(0, ME, "mcast-send", &[]);
    assert_eq!(
        recv.marked(MARK, LIMIT),
        Some(format!("GOT {} hello", lan.addr(0)))
    );
    // Dropping the Lan ends what still runs in it (the sender never ends by itself) and its namespaces.
    let (tag, sender) = (lan.tag().to_string(), send.pid());
    drop(lan);
    assert_eq!(netns::namespaces(&tag), Vec::<String>::new());
    assert!(dead(sender) || send.wait(LIMIT).code().is_none(), "killed");
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn a_panicking_test_leaves_no_namespace_or_process() {
    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::panic::catch_unwind(move || {
        let lan = Lan::new(2);
        // Started without a guard: only the Lan's drop can end it.
        let sleeper = lan.command(1, &["sleep", "600"]).spawn().unwrap();
        tx.send((lan.tag().to_string(), sleeper)).unwrap();
        assert_eq!(
            netns::namespaces(lan.tag()).len(),
            3,
            "a bridge and two hosts"
        );
        panic!("the test fails here");
    });
    assert!(r.is_err());
    let (tag, mut sleeper) = rx.recv().unwrap();
    assert_eq!(netns::namespaces(&tag), Vec::<String>::new());
    let status = sleeper.wait().unwrap();
    assert!(!status.success(), "the sleeper was killed: {status:?}");
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn a_killed_test_run_leaves_nothing_after_the_next_sweep() {
    if let Some(role) = child_role() {
        return child(&role);
    }
    // This binary again, outside any namespace: it makes a Lan like a test and aborts, so no drop runs.
    let exe = std::env::current_exe().unwrap();
    let mut run = std::process::Command::new(exe)
        .args([
            "--exact",
            "a_killed_test_run_leaves_nothing_after_the_next_sweep",
            "--nocapture",
            "--include-ignored",
        ])
        .env(netns::CHILD_ENV, "abandon")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(run.stdout.take().unwrap()).lines();
    let mut field = |k: &str| loop {
        let l = lines.next().expect("the child's report").unwrap();
        if let Some(v) = l.split_once(MARK).and_then(|(_, l)| l.strip_prefix(k)) {
            return v.to_string();
        }
    };
    let (tag, pid) = (field("TAG "), field("PID ").parse::<u32>().unwrap());
    let addr: Ipv4Addr = field("ADDR ").parse().unwrap();
    // While the run lives, its namespaces and process are there, and no sweep takes them.
    netns::sweep();
    assert_eq!(netns::namespaces(&tag).len(), 2, "a bridge and a host");
    assert!(!dead(pid));
    // A Lan made now would not take that run's subnet.
    let o = addr.octets();
    assert!(netns::subnets_in_use().contains(&[o[0], o[1], o[2]]));
    run.stdin.take().unwrap().write_all(b"die\n").unwrap();
    assert!(!run.wait().unwrap().success(), "it aborted");
    // Its namespaces may already be gone: the sweep of any test that started a Lan since takes them.
    netns::sweep();
    assert_eq!(netns::namespaces(&tag), Vec::<String>::new());
    assert!(eventually(LIMIT, || dead(pid)), "process {pid} survived");
}

/// `sdctl --config FILE --json ARGS` in `host`.
fn sdctl(lan: &Lan, host: usize, config: &std::path::Path, args: &[&str]) -> Output {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_sdctl"),
        "--config",
        config.to_str().unwrap(),
        "--json",
    ];
    argv.extend_from_slice(args);
    lan.run(host, &argv)
}

/// A configuration with one ShellyPlus2PM named Hall at `ip:port`, quick to call it offline.
fn config(dir: &TempDir, ip: Ipv4Addr, port: u16) -> std::path::PathBuf {
    dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:
  ResponseTimeout: 0.5
  RetryCount: 1
  RetryDelay: 0.1
  PingAllowed: false
  Devices:
    - {{Name: Hall, Model: ShellyPlus2PM, Hostname: {ip}, Port: {port}}}
"
        ),
    )
}

/// `sdctl --json status` of the one device: (exit code, the device).
fn status(lan: &Lan, host: usize, config: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let o = sdctl(lan, host, config, &["status"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), v[0].clone())
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn sdctl_in_one_host_reads_and_switches_an_emulated_gen2_device_in_another() {
    let lan = Lan::new(2);
    let emu = lan.emulate(0, &["ShellyPlus2PM"]);
    let dir = TempDir::new("netns-read");
    let cfg = config(&dir, lan.addr(0), emu.ports[0]);
    let (code, dev) = status(&lan, 1, &cfg);
    assert_eq!(code, Some(0), "{dev}");
    assert_eq!(dev["Online"], true, "{dev}");
    assert_eq!(dev["Hostname"], lan.addr(0).to_string());
    assert_eq!(dev["Address"], lan.addr(0).to_string());
    // The id's 12 hex digits, as smartdev writes every MAC (`AA:BB:CC:DD:EE:FF`).
    let mac = smartdev::Mac::parse(emu.ids[0].rsplit('-').next().unwrap()).unwrap();
    assert_eq!(dev["MacAddress"], mac.to_string().as_str());
    let outputs = dev["Outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 2, "{dev}");
    assert!(outputs.iter().all(|o| o["State"] == false), "{dev}");

    let o = sdctl(&lan, 1, &cfg, &["set", "Output 2", "on"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, dev) = status(&lan, 1, &cfg);
    assert_eq!(dev["Outputs"][0]["State"], false, "{dev}");
    assert_eq!(dev["Outputs"][1]["State"], true, "{dev}");
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn a_readdressed_device_answers_at_its_new_address_only() {
    let mut lan = Lan::new(2);
    let emu = lan.emulate(0, &["ShellyPlus2PM"]);
    let dir = TempDir::new("netns-move");
    let old = lan.addr(0);
    let (code, dev) = status(&lan, 1, &config(&dir, old, emu.ports[0]));
    assert_eq!((code, &dev["Online"]), (Some(0), &true.into()), "{dev}");

    let new = lan.spare(0);
    lan.readdress(0, new);
    assert_eq!(lan.addr(0), new);
    let (code, dev) = status(&lan, 1, &config(&dir, new, emu.ports[0]));
    assert_eq!((code, &dev["Online"]), (Some(0), &true.into()), "{dev}");
    let (code, dev) = status(&lan, 1, &config(&dir, old, emu.ports[0]));
    assert_eq!((code, &dev["Online"]), (Some(1), &false.into()), "{dev}");
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn an_unplugged_device_goes_offline_and_comes_back() {
    let lan = Lan::new(2);
    let emu = lan.emulate(0, &["ShellyPlus2PM"]);
    let dir = TempDir::new("netns-unplug");
    let cfg = config(&dir, lan.addr(0), emu.ports[0]);
    assert_eq!(status(&lan, 1, &cfg).1["Online"], true);
    lan.down(0);
    let (code, dev) = status(&lan, 1, &cfg);
    assert_eq!((code, &dev["Online"]), (Some(1), &false.into()), "{dev}");
    lan.up(0);
    // Carrier and the bridge port's forwarding state come back asynchronously: poll (hang guard).
    assert!(eventually(LIMIT, || status(&lan, 1, &cfg).1["Online"] == true));
}

/// `sdctl discover --json` in `host` until it has found `want` devices (a hang guard of one minute: each run
/// listens its 3 s); the last run's devices, how long that run took, and how many runs it took.
fn discover(lan: &Lan, host: usize, want: usize) -> (Vec<serde_json::Value>, Duration, usize) {
    let mut last = (Vec::new(), Duration::ZERO);
    let mut runs = 0;
    let found = eventually(Duration::from_secs(60), || {
        runs += 1;
        let start = std::time::Instant::now();
        let o = lan.run(host, &[env!("CARGO_BIN_EXE_sdctl"), "discover", "--json"]);
        let took = start.elapsed();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
        let n = v.len();
        last = (v, took);
        n >= want
    });
    assert!(found, "found only {:?}", last.0);
    (last.0, last.1, runs)
}

/// Every device of `hosts` (host i emulates `models[i]`, announced) was found once, at its host's address
/// and port, with its model and its MAC (Shelly: the 12 hex digits of its id; Tasmota: the last 6).
fn check_found(lan: &Lan, found: &[serde_json::Value], emus: &[(usize, &str, netns::Emulate)]) {
    assert_eq!(found.len(), emus.len(), "{found:#?}");
    for (host, model, emu) in emus {
        let addr = lan.addr(*host).to_string();
        let d = found
            .iter()
            .find(|d| d["Address"] == addr.as_str())
            .unwrap_or_else(|| panic!("nothing found at {addr} ({model}): {found:#?}"));
        assert_eq!(d["Model"], *model, "{d}");
        assert_eq!(d["Port"], emu.ports[0], "{d}");
        let mac = d["MacAddress"].as_str().unwrap().replace(':', "");
        let id_hex = emu.ids[0].rsplit('-').next().unwrap().to_uppercase();
        assert!(
            mac.ends_with(&id_hex) && mac.len() == 12,
            "{d}: id {}",
            emu.ids[0]
        );
    }
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn discover_finds_every_announced_device_across_the_namespaces() {
    let models = [
        "ShellyPlus2PM",
        "Shelly1PM",
        "Tasmota",
        "Shelly1G3",
        "ShellyPro3EM",
    ];
    let lan = Lan::new(models.len() + 1);
    let emus: Vec<_> = models
        .iter()
        .enumerate()
        .map(|(i, m)| (i, *m, lan.emulate(i, &["--announce", m])))
        .collect();
    let (found, _, _) = discover(&lan, models.len(), models.len());
    check_found(&lan, &found, &emus);
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn discover_finds_50_devices_in_50_hosts() {
    const N: usize = 50;
    let lan = Lan::new(N + 1);
    // Each emulator process would give its device 0 the same default id (and MAC): name them apart.
    let specs: Vec<String> = (0..N)
        .map(|i| format!("ShellyPlus1PM,id=shellyplus1pm-02ab000000{i:02x}"))
        .collect();
    let emus: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| (i, "ShellyPlus1PM", lan.emulate(i, &["--announce", s])))
        .collect();
    let (found, took, runs) = discover(&lan, N, N);
    check_found(&lan, &found, &emus);
    eprintln!("sdctl discover --json found {N} devices in {N} hosts in {took:?} (run {runs})");
}

/// A new user who read only the README's "Finding devices": its first block, run as pasted (each line by
/// `sh`, `sdctl` on the PATH, in an empty folder) in one host, while two announced devices run in others.
/// Discovery writes their blocks, and the second command uses them: both devices online.
#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn the_readme_finding_devices_block_runs_as_pasted() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme
        .find("## Finding devices")
        .expect("the README has the section")..];
    let start = section.find("```sh\n").expect("a sh block") + 6;
    let block = &section[start..start + section[start..].find("```").unwrap()];
    assert!(
        block
            .lines()
            .next()
            .unwrap()
            .starts_with("sdctl discover --yaml"),
        "the section starts with sdctl discover --yaml:\n{block}"
    );
    let lan = Lan::new(3);
    let _a = lan.emulate(
        0,
        &["--announce", "ShellyPlus1PM,id=shellyplus1pm-02ab00000a01"],
    );
    let _b = lan.emulate(1, &["--announce", "Shelly1PM,id=shelly1pm-02AB0B"]);
    let dir = TempDir::new("readme-discover");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_sdctl"))
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    // Announcements may take a moment to be heard: the whole block again until both devices are online.
    let mut last = String::new();
    let ok = eventually(Duration::from_secs(60), || {
        let o = lan
            .command(2, &["sh", "-e", "-c", block])
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        last = format!(
            "exit {:?}\n{}\n{}\nfile:\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            std::fs::read_to_string(dir.path().join("devices.yaml")).unwrap_or_default()
        );
        o.status.success() && last.matches("— online").count() == 2
    });
    assert!(ok, "the README's block did not work as pasted:\n{last}");
}
