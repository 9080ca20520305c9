//! Connecting fairly, written as the stalling device: Gen2 devices that take the TCP connection and never
//! answer the WebSocket upgrade, or whose TCP connect itself never completes, listed before healthy ones. The
//! healthy devices must get their push channel while every stalled handshake is still pending (no stalled
//! device holds a place another one waits for, whatever the order of the configuration), and `close()` must
//! end every connection in progress at once rather than after its timeout.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::eventually;
use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, Identity, ModelLibrary, Settings};

/// Hang guard of every wait: far beyond what any step takes, far below the handshakes' timeout.
const LIMIT: Duration = Duration::from_secs(30);

/// The tests load the machine: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device whose TCP connect never completes: a listener with no backlog, filled by one connection of ours
/// that it never accepts, so the kernel drops every later SYN.
struct Unreachable {
    _listener: socket2::Socket,
    _filler: TcpStream,
    port: u16,
}

impl Unreachable {
    fn new() -> Unreachable {
        use socket2::{Domain, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        s.listen(0).unwrap();
        let port = s.local_addr().unwrap().as_socket().unwrap().port();
        let filler = TcpStream::connect(("127.0.0.1", port)).expect("the filler connects");
        Unreachable {
            _listener: s,
            _filler: filler,
            port,
        }
    }
}

/// `unreachable` Gen2 devices at these ports first, then the emulator's `stalled` devices (they hold their
/// upgrades), then its healthy ones; every one with `Channel: auto`.
fn settings(
    unreachable: &[u16],
    emu: &Emulator,
    stalled: usize,
    healthy: usize,
    rt: u64,
) -> Settings {
    let mut yaml = format!(
        "SmartDevices:\n  Channel: auto\n  ResponseTimeout: {rt}\n  RetryCount: 0\n  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n"
    );
    for (i, port) in unreachable.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{Name: Unreachable {i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n"
        ));
    }
    for d in 0..stalled + healthy {
        let name = if d < stalled { "Stalled" } else { "Healthy" };
        yaml.push_str(&format!(
            "    - {{Name: {name} {d}, Model: ShellyPlus1PM, Outputs: [{{Name: Light {d}}}], Hostname: 127.0.0.1, Port: {}}}\n",
            emu.port(d)
        ));
    }
    Settings::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// An emulator whose first `stalled` devices hold their WebSocket upgrades (HTTP answers as usual).
fn emulator(stalled: usize, healthy: usize) -> Emulator {
    let specs = (0..stalled + healthy)
        .map(|_| DeviceSpec::new("ShellyPlus1PM"))
        .collect();
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator starts");
    for d in 0..stalled {
        emu.hold_ws_upgrades(d, true);
    }
    emu
}

/// Closes `ctl` on another thread; true when it returned within the hang guard.
fn closes_promptly(ctl: Controller) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        ctl.close();
        let _ = tx.send(());
    });
    rx.recv_timeout(LIMIT).is_ok()
}

/// 100 devices that stall the upgrade, listed before 20 healthy ones: every healthy device subscribes while
/// every stalled upgrade is still held and none was given up (before, 32 connector places were held by stalled
/// devices until their timeout, so the healthy ones waited for several timeouts), and pushed changes reach the
/// snapshot.
#[test]
fn stalled_upgrades_listed_first_do_not_delay_the_healthy_channels() {
    let _serial = serial();
    const STALLED: usize = 100;
    const HEALTHY: usize = 20;
    let emu = emulator(STALLED, HEALTHY);
    let ctl = Controller::open(settings(&[], &emu, STALLED, HEALTHY, 120), None).expect("opens");
    let healthy = STALLED..STALLED + HEALTHY;
    assert!(
        eventually(LIMIT, || healthy.clone().all(|d| emu.ws_subscribed(d) == 1)),
        "every healthy device subscribes"
    );
    let given_up: usize = (0..STALLED).map(|d| emu.ws_held_upgrades(d).1).sum();
    assert_eq!(
        given_up, 0,
        "no stalled upgrade had to time out before the healthy devices subscribed"
    );
    // Every stalled device has its own handshake pending meanwhile: none waits in line for a place.
    let waiting = || {
        (0..STALLED)
            .filter(|&d| emu.ws_held_upgrades(d).0 != 1)
            .count()
    };
    assert!(
        eventually(LIMIT, || waiting() == 0),
        "{} stalled devices have no upgrade pending",
        waiting()
    );
    for d in healthy.clone() {
        emu.set_output(d, 0, true);
    }
    assert!(
        eventually(LIMIT, || healthy.clone().all(|d| {
            ctl.output(Identity::name(format!("Light {d}").as_str()))
                .is_ok_and(|o| o.state == Some(true))
        })),
        "the healthy channels carry changes"
    );
    assert!(
        closes_promptly(ctl),
        "close waited for the stalled upgrades"
    );
    assert!(
        eventually(LIMIT, || (0..STALLED)
            .all(|d| emu.ws_held_upgrades(d).0 == 0)),
        "close ended every upgrade in progress"
    );
}

/// A device whose TCP connect never completes and one that stalls the upgrade: `close()` returns at once,
/// not after the handshakes' timeout (before, a connector in its connect or upgrade could not be
/// interrupted). The first contact with the unreachable device at open takes the timeout too, so it is
/// shorter here; the close is given a third of it.
#[test]
fn close_interrupts_connects_and_upgrades_in_progress() {
    let _serial = serial();
    const RT: u64 = 30;
    let unreachable = Unreachable::new();
    let emu = emulator(1, 1);
    let ctl = Controller::open(settings(&[unreachable.port], &emu, 1, 1, RT), None).expect("opens");
    assert!(
        eventually(LIMIT, || emu.ws_subscribed(1) == 1),
        "the healthy device subscribes"
    );
    assert!(
        eventually(LIMIT, || emu.ws_held_upgrades(0).0 == 1),
        "the stalled upgrade is pending"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        ctl.close();
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(RT / 3)).is_ok(),
        "close waited for a connect or an upgrade in progress"
    );
    assert!(
        eventually(LIMIT, || emu.ws_held_upgrades(0).0 == 0),
        "the pending upgrade was ended"
    );
}

/// A device whose TCP connect never completes is unreachable at open after the push channel's connect timed
/// out, and its error says what was tried (not an HTTP request that was never sent); the healthy device beside
/// it is read and subscribed.
#[test]
fn a_device_taking_no_connection_at_open_says_what_was_tried() {
    let _serial = serial();
    let unreachable = Unreachable::new();
    let emu = emulator(0, 1);
    let ctl = Controller::open(settings(&[unreachable.port], &emu, 0, 1, 1), None).expect("opens");
    let dead = ctl.device("Unreachable 0").unwrap();
    assert!(!dead.online);
    let why = dead.last_error.clone().unwrap_or_default();
    assert!(
        why.contains("no TCP connection within 1.0 s") && why.contains("WebSocket at open"),
        "{why}"
    );
    let healthy = ctl.device("Healthy 0").unwrap();
    assert!(healthy.online && healthy.outputs[0].state.is_some());
    assert_eq!(emu.ws_subscribed(0), 1);
    assert!(closes_promptly(ctl));
}
