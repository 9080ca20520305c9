//! Following a device that moved (issue 24 §3) on a virtual LAN (`tests/common/netns.rs`): emulated devices
//! announce themselves over mDNS in their hosts (`sdctl emulate --announce`), the controller runs in another
//! host (this test binary re-executed there, `child_role`), and hosts change addresses (`Lan::readdress`) or
//! are unplugged (`Lan::down`/`up`). What was switched is read from the emulated devices themselves. Without
//! root and `ip(8)` these tests are ignored, saying why.
//!
//! The parent and its controller child share the filesystem: the parent tells the child to go on by writing a
//! file, the child reports on stdout after `MARK`.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::netns::{Lan, Proc, child_role};
use common::{TempDir, eventually};
use smartdev::{Controller, Identity, Settings};

const LIMIT: Duration = Duration::from_secs(30);
/// The hang guard for a device that came back: one lookup a minute, plus the browse and the checks.
const FOLLOW_LIMIT: Duration = Duration::from_secs(90);
const MARK: &str = "NETNS-CHILD ";
const MDNS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);
const PORT: u16 = 8080;
const MAC_A: &str = "AA:00:00:00:00:01";
const MAC_B: &str = "AA:00:00:00:00:02";

fn out(s: String) {
    println!("{MARK}{s}");
    std::io::stdout().flush().unwrap();
}

fn name(n: &str) -> Identity {
    Identity::Name(n.into())
}

/// An emulated ShellyPlus1PM on port 8080 with MAC `mac`, announced, listening on every address of `host`.
fn device(lan: &Lan, host: usize, mac: &str) -> common::netns::Emulate {
    let spec = format!("ShellyPlus1PM:{PORT},mac={}", mac.replace(':', ""));
    lan.emulate(host, &["--announce", &spec])
}

/// `GET path` on `addr`: the JSON body.
fn get(addr: SocketAddr, path: &str) -> serde_json::Value {
    let mut s = TcpStream::connect_timeout(&addr, LIMIT).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The device answering at `ip`:8080, asked from `host` (a child): (its MAC, its relay).
fn ask(lan: &Lan, host: usize, test: &str, ip: Ipv4Addr) -> (String, bool) {
    let p = lan.spawn_self(host, test, "get", &[("NETNS_ARG", &ip.to_string())]);
    let line = p.marked(MARK, LIMIT).expect("the device's answer");
    let mut w = line.split_whitespace();
    let mac = w.next().unwrap().to_string();
    let on = w.next().unwrap() == "true";
    (mac, on)
}

/// The child's side of `ask`.
fn child_get() {
    let ip: Ipv4Addr = std::env::var("NETNS_ARG").unwrap().parse().unwrap();
    let addr = SocketAddr::from((ip, PORT));
    let mac = get(addr, "/shelly")["mac"].as_str().unwrap().to_string();
    let on = get(addr, "/rpc/Switch.GetStatus?id=0")["output"] == true;
    out(format!("{} {on}", smartdev::Mac::parse(&mac).unwrap()));
}

/// Joins the mDNS group on ARG (our address) and reports every query packet: `QUERY <ms> <sender>`.
fn child_count_queries() {
    let me: Ipv4Addr = std::env::var("NETNS_ARG").unwrap().parse().unwrap();
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 5353)).unwrap();
    s.join_multicast_v4(&MDNS, &me).unwrap();
    out("READY".into());
    let start = Instant::now();
    let mut buf = [0u8; 9000];
    loop {
        let Ok((n, from)) = s.recv_from(&mut buf) else {
            continue;
        };
        // A DNS message: flags in bytes 2-3, QR (the top bit) 0 for a query.
        if n >= 12 && buf[2] & 0x80 == 0 {
            out(format!(
                "QUERY {} {}",
                start.elapsed().as_millis(),
                from.ip()
            ));
        }
    }
}

/// Waits (hang guard) until `file` exists: the parent says go on.
fn wait_for(file: &Path) {
    assert!(
        eventually(Duration::from_secs(120), || file.exists()),
        "{} never came",
        file.display()
    );
}

/// Opens the configuration in `NETNS_ARG`, logging to stdout (the parent reads the lines).
fn child_controller() -> (Controller, PathBuf) {
    // smartdev's own records, DEBUG included (the parent waits for some).
    let config = simplelog::ConfigBuilder::new()
        .add_filter_allow_str("smartdev")
        .build();
    let _ = simplelog::SimpleLogger::init(log::LevelFilter::Debug, config);
    let yaml = PathBuf::from(std::env::var("NETNS_ARG").unwrap());
    let dir = yaml.parent().unwrap().to_path_buf();
    let ctl = Controller::open(Settings::from_file(&yaml).unwrap(), None).unwrap();
    (ctl, dir)
}

fn config(dir: &TempDir, devices: &str) -> PathBuf {
    dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:
  ResponseTimeout: 0.5
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 1
  Devices:
{devices}"
        ),
    )
}

fn spawn_controller(lan: &Lan, host: usize, test: &str, cfg: &Path) -> Proc {
    lan.spawn_self(
        host,
        test,
        "controller",
        &[("NETNS_ARG", cfg.to_str().unwrap())],
    )
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn a_mac_only_configuration_opens_and_finds_its_device() {
    const ME: &str = "a_mac_only_configuration_opens_and_finds_its_device";
    match child_role().as_deref() {
        Some("get") => return child_get(),
        Some(_) => {
            let start = Instant::now();
            let (ctl, _) = child_controller();
            // Open does not wait for discovery: the device opens offline.
            let d = ctl.device(name("Kitchen")).unwrap();
            out(format!(
                "OPENED {} {}",
                d.online,
                start.elapsed().as_millis()
            ));
            assert!(eventually(LIMIT, || ctl
                .device(name("Kitchen"))
                .unwrap()
                .online));
            let d = ctl.device(name("Kitchen")).unwrap();
            out(format!(
                "FOUND {} {}:{}",
                start.elapsed().as_millis(),
                d.address.unwrap(),
                d.port
            ));
            ctl.change_output(name("Kitchen Lamp"), true).unwrap();
            out("SWITCHED".into());
            return;
        }
        None => {}
    }
    let lan = Lan::new(2);
    let _emu = device(&lan, 0, MAC_A);
    let dir = TempDir::new("netns-follow-open");
    let cfg = config(
        &dir,
        &format!(
            "    - {{Name: Kitchen, Model: ShellyPlus1PM, MAC: {MAC_A}, Outputs: [{{Name: Kitchen Lamp}}]}}\n"
        ),
    );
    let child = spawn_controller(&lan, 1, ME, &cfg);
    let opened = child.marked(MARK, LIMIT).expect("opened");
    assert!(opened.starts_with("OPENED false"), "{opened}");
    let found = child.marked(MARK, LIMIT).expect("found");
    let mut w = found.split_whitespace().skip(1);
    let ms: u64 = w.next().unwrap().parse().unwrap();
    assert_eq!(w.next().unwrap(), format!("{}:{PORT}", lan.addr(0)));
    println!("found a MAC-only device {ms} ms after open (includes the open)");
    assert_eq!(child.marked(MARK, LIMIT).as_deref(), Some("SWITCHED"));
    assert_eq!(ask(&lan, 1, ME, lan.addr(0)), (MAC_A.to_string(), true));
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn two_devices_swapping_addresses_are_rebound_and_nothing_is_switched_on_the_wrong_one() {
    const ME: &str =
        "two_devices_swapping_addresses_are_rebound_and_nothing_is_switched_on_the_wrong_one";
    match child_role().as_deref() {
        Some("get") => return child_get(),
        Some(_) => {
            let (ctl, dir) = child_controller();
            let online = |n: &str| ctl.device(name(n)).unwrap().online;
            assert!(eventually(LIMIT, || online("Kitchen") && online("Hall")));
            let at = |n: &str| ctl.device(name(n)).unwrap().address.unwrap();
            let (kitchen, hall) = (at("Kitchen"), at("Hall"));
            out("READY".into());
            wait_for(&dir.join("swapped"));
            // Once the controller noticed (offline: another MAC, or no answer; or already followed), a switch
            // is refused or reaches the right device.
            assert!(eventually(FOLLOW_LIMIT, || !online("Kitchen") || at("Kitchen") == hall));
            let early = ctl.change_output(name("Kitchen Lamp"), true);
            out(format!("EARLY {}", early.is_ok()));
            wait_for(&dir.join("checked-early"));
            assert!(eventually(FOLLOW_LIMIT, || {
                online("Kitchen")
                    && online("Hall")
                    && at("Kitchen") == hall
                    && at("Hall") == kitchen
            }));
            ctl.change_output(name("Kitchen Lamp"), true).unwrap();
            out("KITCHEN".into());
            wait_for(&dir.join("checked-kitchen"));
            ctl.change_output(name("Hall Lamp"), true).unwrap();
            out("HALL".into());
            return;
        }
        None => {}
    }
    let mut lan = Lan::new(3);
    let _a = device(&lan, 0, MAC_A);
    let _b = device(&lan, 1, MAC_B);
    let (ip0, ip1) = (lan.addr(0), lan.addr(1));
    let dir = TempDir::new("netns-follow-swap");
    let cfg = config(
        &dir,
        &format!(
            "    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: {ip0}, Port: {PORT}, MAC: {MAC_A}, Outputs: [{{Name: Kitchen Lamp}}]}}
    - {{Name: Hall, Model: ShellyPlus1PM, Hostname: {ip1}, Port: {PORT}, MAC: {MAC_B}, Outputs: [{{Name: Hall Lamp}}]}}\n"
        ),
    );
    let child = spawn_controller(&lan, 2, ME, &cfg);
    assert_eq!(child.marked(MARK, LIMIT).as_deref(), Some("READY"));
    // The swap: host 0 (Kitchen's device, MAC A) takes ip1, host 1 (Hall's, MAC B) takes ip0.
    let start = Instant::now();
    lan.readdress(0, lan.spare(0));
    lan.readdress(1, ip0);
    lan.readdress(0, ip1);
    // A device that takes an address announces it (gratuitous ARP, as DHCP clients do); `ip addr add` does
    // not, so the hosts forget their neighbours instead of sending to the old owner until the cache expires.
    for h in 0..3 {
        let o = lan.run(h, &["ip", "neigh", "flush", "all"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    dir.write("swapped", "");
    let early = child.marked(MARK, FOLLOW_LIMIT).expect("early switch");
    // Hall's device (now at ip0) was never switched, whatever the early attempt did.
    assert_eq!(ask(&lan, 2, ME, ip0), (MAC_B.to_string(), false), "{early}");
    dir.write("checked-early", "");
    assert_eq!(child.marked(MARK, FOLLOW_LIMIT).as_deref(), Some("KITCHEN"));
    println!(
        "both devices followed {} ms after the swap",
        start.elapsed().as_millis()
    );
    assert_eq!(ask(&lan, 2, ME, ip1), (MAC_A.to_string(), true));
    assert_eq!(ask(&lan, 2, ME, ip0), (MAC_B.to_string(), false));
    dir.write("checked-kitchen", "");
    assert_eq!(child.marked(MARK, LIMIT).as_deref(), Some("HALL"));
    assert_eq!(ask(&lan, 2, ME, ip0), (MAC_B.to_string(), true));
    assert_eq!(ask(&lan, 2, ME, ip1), (MAC_A.to_string(), true));
}

#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn a_device_that_disappears_comes_back_at_its_new_address_with_no_user_action() {
    const ME: &str = "a_device_that_disappears_comes_back_at_its_new_address_with_no_user_action";
    match child_role().as_deref() {
        Some("get") => return child_get(),
        Some("count") => return child_count_queries(),
        Some(_) => {
            let (ctl, _) = child_controller();
            let dev = || ctl.device(name("Kitchen")).unwrap();
            assert!(eventually(LIMIT, || dev().online));
            let old = dev().address.unwrap();
            out("READY".into());
            assert!(eventually(LIMIT, || !dev().online));
            out("OFFLINE".into());
            assert!(eventually(Duration::from_secs(180), || {
                let d = dev();
                d.online && d.address.as_deref() != Some(old.as_str())
            }));
            out(format!("BACK {}", dev().address.unwrap()));
            ctl.change_output(name("Kitchen Lamp"), true).unwrap();
            out("SWITCHED".into());
            return;
        }
        None => {}
    }
    let mut lan = Lan::new(3);
    let _emu = device(&lan, 0, MAC_A);
    let old = lan.addr(0);
    let counter = lan.spawn_self(2, ME, "count", &[("NETNS_ARG", &lan.addr(2).to_string())]);
    assert_eq!(counter.marked(MARK, LIMIT).as_deref(), Some("READY"));
    let dir = TempDir::new("netns-follow-gone");
    let cfg = config(
        &dir,
        &format!(
            "    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: {old}, Port: {PORT}, MAC: {MAC_A}, Outputs: [{{Name: Kitchen Lamp}}]}}\n"
        ),
    );
    let child = spawn_controller(&lan, 1, ME, &cfg);
    assert_eq!(child.marked(MARK, LIMIT).as_deref(), Some("READY"));
    lan.down(0);
    assert_eq!(child.marked(MARK, LIMIT).as_deref(), Some("OFFLINE"));
    let missing_since = Instant::now();
    // The first lookup finds nothing (the device is unplugged); then it comes back elsewhere, and the next
    // lookup (a minute after the first) finds it.
    let none = child
        .marked("discovery found ", LIMIT)
        .expect("a lookup while missing");
    assert!(none.starts_with("0 device"), "{none}");
    let new = lan.spare(1);
    lan.readdress(0, new);
    lan.up(0);
    let back_at = Instant::now();
    // The one INFO line, then the child's report.
    let moved = child
        .marked("Kitchen moved from", FOLLOW_LIMIT)
        .expect("the move is logged");
    assert_eq!(moved.trim(), format!("{old}:{PORT} to {new}:{PORT}"));
    let back = child.marked(MARK, LIMIT).expect("back");
    let followed = back_at.elapsed();
    let missing_for = missing_since.elapsed();
    assert_eq!(back, format!("BACK {new}"));
    assert_eq!(child.marked(MARK, LIMIT).as_deref(), Some("SWITCHED"));
    assert_eq!(ask(&lan, 1, ME, new), (MAC_A.to_string(), true));
    // mDNS queries the controller sent while the device was missing.
    let controller = lan.addr(1).to_string();
    let mut queries = 0;
    while let Some(l) = counter.line(Duration::from_millis(200)) {
        if l.contains("QUERY") && l.ends_with(&controller) {
            queries += 1;
        }
    }
    println!(
        "followed {:.1} s after the device came back at its new address; missing {:.1} s; {queries} mDNS query packets from the controller meanwhile ({:.1} a minute)",
        followed.as_secs_f64(),
        missing_for.as_secs_f64(),
        queries as f64 * 60.0 / missing_for.as_secs_f64()
    );
}
