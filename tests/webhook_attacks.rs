//! A loopback attacker against the webhook listener: one client can neither kill, stall, bloat nor hang it.
//! Tests here count the process's threads, so they take one lock and run one at a time.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use smartdev::{Controller, Settings, WakeFlag};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn open() -> (Controller, WakeFlag, SocketAddr) {
    let settings = Settings::from_yaml_str(
        "SmartDevices:\n  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n  Devices: []\n",
    )
    .unwrap();
    let wake = WakeFlag::new();
    let ctl = Controller::open(settings, Some(wake.clone())).unwrap();
    let addr = ctl.webhook_address().unwrap();
    (ctl, wake, addr)
}

/// Sends one request on a new connection and returns the status (0 when the connection broke).
fn request(addr: SocketAddr, raw: &[u8]) -> u16 {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(raw).is_err() {
        return 0;
    }
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn event(addr: SocketAddr, n: usize) -> u16 {
    request(
        addr,
        format!("GET /shelly/webhook?Event=switch.on&n={n} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
}

/// Live threads of this process whose name starts with `prefix` (a joined thread still leaving
/// `/proc/self/task` is not counted: `common::threads_named`).
fn threads(prefix: &str) -> usize {
    common::threads_named(prefix).len()
}

fn all_threads() -> usize {
    threads("")
}

#[test]
fn a_huge_declared_body_is_refused_without_allocating_it() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    for path in ["/shelly/webhook", "/anything"] {
        let raw =
            format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\n");
        assert_eq!(request(addr, raw.as_bytes()), 413, "{path}");
    }
    // Still alive and serving.
    assert_eq!(event(addr, 1), 200);
    assert_eq!(ctl.webhook_queue_stats().waiting, 1);
}

#[test]
fn stalled_bodies_do_not_stall_valid_events() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    let stalled: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"POST /shelly/webhook HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"Ev")
                .unwrap();
            s
        })
        .collect();
    for n in 0..5 {
        assert_eq!(event(addr, n), 200);
    }
    assert_eq!(ctl.webhook_queue_stats().waiting, 5);
    drop(stalled);
}

#[test]
fn close_returns_promptly_whatever_clients_do() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    let mut stalled = Vec::new();
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"POST /shelly/webhook HTTP/1.1\r\nContent-Length: 100\r\n\r\n")
            .unwrap();
        stalled.push(s);
        stalled.push(TcpStream::connect(addr).unwrap());
    }
    // Make sure the listener has taken them.
    assert_eq!(event(addr, 0), 200);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let closer = std::thread::spawn(move || {
        ctl.close();
        let _ = done_tx.send(());
    });
    // The old listener waited for the stalled clients (forever here); a request deadline is 5 s.
    assert!(
        done_rx.recv_timeout(Duration::from_secs(4)).is_ok(),
        "close is still waiting for stalled clients"
    );
    closer.join().unwrap();
    assert_eq!(
        threads("sd-webhook"),
        0,
        "the listener thread outlived close"
    );
    // The stalled connections were closed by the listener.
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 64];
        assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    }
}

#[test]
fn a_32_megabyte_header_is_cut_off_early() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /shelly/webhook?Event=switch.on HTTP/1.1\r\nX-Long: ")
        .unwrap();
    let block = vec![b'a'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 32 * 1024 * 1024 {
        match s.write(&block) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(
        sent < 32 * 1024 * 1024,
        "the listener read a 32 MB header to the end"
    );
    drop(s);
    assert_eq!(event(addr, 1), 200);
    assert_eq!(ctl.webhook_queue_stats().waiting, 1);
}

#[test]
fn hundreds_of_idle_connections_cost_no_threads_and_do_not_lock_out_senders() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    let before = all_threads();
    let idle: Vec<TcpStream> = (0..400)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(idle.len() >= 300);
    for n in 0..10 {
        assert_eq!(event(addr, n), 200, "event {n}");
    }
    assert_eq!(ctl.webhook_queue_stats().waiting, 10);
    let after = all_threads();
    assert!(
        after <= before + 2,
        "{} idle connections cost {} threads",
        idle.len(),
        after.saturating_sub(before)
    );
    // Beyond the connection cap the oldest idle ones were closed.
    let mut closed = 0;
    for mut s in idle.into_iter().take(100) {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        if matches!(s.read(&mut [0u8; 8]), Ok(0) | Err(_)) {
            closed += 1;
        }
    }
    assert!(closed > 0, "no idle connection was closed to make room");
}

/// Child side of the open/close test: alone in its process, so every thread it sees is its own.
#[test]
fn child_open_close_cycles() {
    if std::env::var_os("SMARTDEV_CYCLES_CHILD").is_none() {
        return;
    }
    let mut before = common::threads_named("");
    for n in 0..200 {
        let (ctl, _wake, addr) = open();
        let _idle = TcpStream::connect(addr).unwrap();
        assert_eq!(event(addr, n), 200);
        drop(ctl);
    }
    let mut after = common::threads_named("");
    println!("THREADS {} {}", before.len(), after.len());
    // Named in the parent's failure message (it prints this child's output).
    before.sort();
    after.sort();
    assert_eq!(after, before, "threads before and after the cycles");
}

#[test]
fn many_open_and_close_cycles_leave_no_threads() {
    let _g = serial();
    let counts = common::child_report(
        "child_open_close_cycles",
        "SMARTDEV_CYCLES_CHILD",
        "THREADS ",
    );
    // The old listener left 4 pool threads per controller alive for ~5 s after close.
    assert_eq!(
        counts[1], counts[0],
        "threads before and after 200 open/close cycles"
    );
}

/// The child side of the descriptor-exhaustion test: runs under `ulimit -n 24` (below the per-source connection cap) in its own process, prints the
/// listener's address, and prints `GOT` when a valid event arrives.
#[test]
fn child_listener_under_a_descriptor_limit() {
    if std::env::var_os("SMARTDEV_FD_CHILD").is_none() {
        return;
    }
    let (ctl, wake, addr) = open();
    println!("ADDR {addr}");
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        wake.wait(Duration::from_millis(200));
        if ctl.pull_webhook_event().is_some() {
            println!("GOT");
            return;
        }
    }
    println!("NOTHING");
}

#[test]
fn descriptor_exhaustion_is_survived() {
    let _g = serial();
    let me = std::env::current_exe().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 24 && exec "$0" --exact child_listener_under_a_descriptor_limit --nocapture --test-threads 1"#)
        .arg(&me)
        .env("SMARTDEV_FD_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        // The harness may print its own text before ours on the same line.
        if let Some(i) = line.find("ADDR ") {
            addr = Some(line[i + 5..].trim().parse::<SocketAddr>().unwrap());
            break;
        }
        line.clear();
    }
    let addr = addr.expect("the child prints its address");
    // Far more connections than the child has descriptors; kept open.
    let hold: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(hold.len() > 24);
    // A valid event still gets through while they are open.
    let sent = common::eventually(Duration::from_secs(30), || event(addr, 1) == 200);
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let _ = child.wait();
    drop(hold);
    assert!(
        sent,
        "the listener stopped accepting after running out of descriptors"
    );
    assert!(rest.contains("GOT"), "{rest}");
}

#[test]
fn a_flood_of_64_kib_events_is_bounded_in_memory() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    let pad = "x".repeat(60 * 1024);
    let mut s = TcpStream::connect(addr).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    for n in 0..1000 {
        let body = format!("{{\"Event\":\"input.toggle_on\",\"n\":{n},\"pad\":\"{pad}\"}}");
        let head = format!(
            "POST /shelly/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        // One write: two would meet Nagle and delayed ACK (40 ms each).
        s.write_all(format!("{head}{body}").as_bytes()).unwrap();
        // Read the answer: status line, headers, body.
        let mut len = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut answer = vec![0; len];
        r.read_exact(&mut answer).unwrap();
    }
    let stats = ctl.webhook_queue_stats();
    let (queued, dropped) = (stats.waiting, stats.dropped);
    // 16 MiB hold about 270 such events; the count limit (65,536) would have kept all 1,000 (60 MiB).
    assert!(queued < 300, "{queued} events of 60 KiB queued");
    assert_eq!(queued as u64 + dropped, 1000);
    // The newest ones are kept, in order.
    let first = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        first.params["n"],
        serde_json::json!(1000 - queued as u64),
        "the oldest were dropped"
    );
}

#[test]
fn a_flood_of_events_does_not_become_a_flood_of_device_reads() {
    use smartdev::ModelLibrary;
    use smartdev::emulator::{DeviceSpec, Emulator};
    let _g = serial();
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let yaml = format!(
        "SmartDevices:\n  Channel: http\n  RefreshInterval: 0\n  PingAllowed: false\n  ShellyWebhooks: {{Enabled: true, Host: 127.0.0.1, Port: 0}}\n  Devices:\n    - {{Name: P, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n",
        emu.port(0)
    );
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let addr = ctl.webhook_address().unwrap();
    let reads = || {
        emu.counts(0)
            .get("rpc Shelly.GetStatus")
            .copied()
            .unwrap_or(0)
    };
    let input = ctl.inputs()[0].id;
    let target = |n: usize| {
        format!(
            "/shelly/webhook?Event=input.toggle_{}&DeviceID=1&ObjectType=input&ComponentID={input}",
            if n.is_multiple_of(2) { "on" } else { "off" }
        )
    };
    // One event: one read.
    let opened = Instant::now();
    let before = reads();
    assert_eq!(event_to(addr, &target(0)), 200);
    assert!(common::eventually(Duration::from_secs(10), || reads() == before + 1));

    // 2,000 events on one keep-alive connection as fast as they go.
    let before = reads();
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    for n in 0..2000 {
        s.write_all(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", target(n)).as_bytes())
            .unwrap();
        let mut len = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut answer = vec![0; len];
        r.read_exact(&mut answer).unwrap();
    }
    // The device's own event rate (a burst of 50, then 20 per second) dropped the rest at the door, counted;
    // each event's state was still posted, so the reads below are the read budget's doing alone.
    let stats = ctl.webhook_queue_stats();
    assert_eq!(stats.waiting as u64 + stats.dropped, 2001);
    let bound = 50 + (20.0 * opened.elapsed().as_secs_f64()).ceil() as usize + 1;
    assert!(
        stats.waiting >= 50 && stats.waiting <= bound,
        "{} events queued (bound {bound})",
        stats.waiting
    );
    // At most the burst of the sender's budget (10) plus its rate (5/s) over the time taken, not 2,000; the
    // bound grows with the time, so a slow machine cannot fail it.
    let caused = reads() - before;
    let bound = 10 + (5.0 * started.elapsed().as_secs_f64()).ceil() as u64 + 1;
    assert!(
        caused >= 1 && caused <= bound,
        "{caused} device reads for 2,000 events (bound {bound})"
    );
}

fn event_to(addr: SocketAddr, target: &str) -> u16 {
    request(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

#[test]
fn cr_lf_and_nul_in_fields_are_answered_escaped() {
    let _g = serial();
    let (ctl, _wake, addr) = open();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /shelly/webhook?Event=x%0d%0a2026%20[ERROR]%20forged%00 HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    assert!(
        body.contains(r#"unknown event "x\r\n2026 [ERROR] forged\0""#),
        "{body:?}"
    );
    assert_eq!(body.matches('\n').count(), 1, "{body:?}");
    assert_eq!(ctl.webhook_queue_stats().waiting, 0);
}

#[test]
fn a_request_that_never_completes_is_closed_at_its_deadline() {
    let _g = serial();
    let (_ctl, _wake, addr) = open();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"POST /shelly/webhook HTTP/1.1\r\nContent-Le")
        .unwrap();
    let started = Instant::now();
    // Hang guard far above the 5 s request deadline.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 16];
    let r = s.read(&mut buf);
    assert!(matches!(r, Ok(0)), "{r:?}");
    // Closed by the deadline, not earlier.
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}
