//! The push channel's transport: the RFC 6455 client and Shelly RPC over it, against the emulator's WebSocket
//! `/rpc` (calls, pushed notifications, in-frame digest auth, faults) and against a fake server sending
//! hostile frames. Waits are deadlines on the socket, never fixed sleeps.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use smartdev::ModelLibrary;
use smartdev::emulator::{AuthMode, DeviceSpec, EmuClock, Emulator, InputType, Press};
use smartdev::ws::client::{Connection, Timeouts, WsError};
use smartdev::ws::frame::ProtocolError;
use smartdev::ws::rpc::{CallError, Notification, RpcSocket};

mod common;

use common::raw_http::{local, request};

const LIMIT: Duration = Duration::from_secs(10);

fn emulator(spec: DeviceSpec) -> Emulator {
    Emulator::start(vec![spec], &ModelLibrary::embedded()).unwrap()
}

fn socket(port: u16, password: Option<&str>, call_timeout: Duration) -> RpcSocket {
    RpcSocket::connect(
        local(port),
        "127.0.0.1",
        "ws-test",
        password,
        Timeouts::default(),
        call_timeout,
    )
    .unwrap()
}

/// The first notification `pick` accepts, reading until the hang guard.
fn wait_for<T>(s: &mut RpcSocket, mut pick: impl FnMut(&Notification) -> Option<T>) -> T {
    let deadline = Instant::now() + LIMIT;
    loop {
        match s.next_notification(deadline) {
            Ok(Some(n)) => {
                if let Some(t) = pick(&n) {
                    return t;
                }
            }
            Ok(None) => panic!("no matching notification in {LIMIT:?}"),
            Err(e) => panic!("socket failed: {e}"),
        }
    }
}

#[test]
fn get_status_and_switch_set_over_the_socket() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let mut s = socket(emu.port(0), None, LIMIT);
    let status = s.call("Shelly.GetStatus", None).unwrap();
    assert_eq!(status["switch:0"]["output"], json!(false));
    let info = s.call("Shelly.GetDeviceInfo", None).unwrap();
    assert_eq!(info["id"], json!(emu.device_id(0)));
    let r = s
        .call("Switch.Set", Some(json!({"id": 0, "on": true})))
        .unwrap();
    assert_eq!(r, json!({"was_on": false}));
    assert!(emu.output(0, 0));
    // The device's own errors come back as RPC errors; the connection stays usable.
    match s.call("Switch.Set", Some(json!({"id": 7, "on": true}))) {
        Err(CallError::Rpc { code: -105, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.call("Switch.GetStatus", Some(json!({"id": 0}))).unwrap()["output"],
        json!(true)
    );
    let counts = emu.counts(0);
    assert_eq!(counts.get("ws /rpc"), Some(&1));
    assert_eq!(counts.get("rpc Switch.Set"), Some(&2));
    assert_eq!(emu.ws_connections(0), 1);
    s.close();
    assert!(common::eventually(LIMIT, || emu.ws_connections(0) == 0));
}

#[test]
fn switching_by_the_admin_api_pushes_notify_status() {
    let emu = emulator(DeviceSpec::new("Shelly2PMG3"));
    let mut s = socket(emu.port(0), None, LIMIT);
    // Notifications start after a request with our src.
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    let r = request(
        emu.admin_port(),
        "POST",
        "/devices/0/output?id=1&state=true",
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let (ts, sw) = wait_for(&mut s, |n| match n {
        Notification::Status { ts, components } => {
            components.get("switch:1").map(|c| (*ts, c.clone()))
        }
        _ => None,
    });
    assert_eq!(sw["output"], json!(true));
    assert_eq!(sw["id"], json!(1));
    assert!(ts.is_some_and(|t| t > 1.6e9), "{ts:?}");
    // Only what changed: switch:0 is not part of a notification about switch:1.
    emu.set_load(0, 1, 250.0);
    let apower = wait_for(&mut s, |n| match n {
        Notification::Status { components, .. } => {
            assert!(!components.contains_key("switch:0"), "{components:?}");
            components.get("switch:1")?.get("apower").cloned()
        }
        _ => None,
    });
    assert_eq!(apower, json!(250));
}

#[test]
fn fired_events_push_notify_event() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    emu.set_input_type(0, 0, InputType::Button);
    let mut s = socket(emu.port(0), None, LIMIT);
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    emu.press_button(0, 0, Press::Double).unwrap();
    let ev = wait_for(&mut s, |n| match n {
        Notification::Event { events, .. } => events.first().cloned(),
        _ => None,
    });
    assert_eq!((ev.component.as_str(), ev.id), ("input:0", Some(0)));
    assert_eq!(ev.event, "double_push");
}

/// The first change after subscribing is notified, with only what changed, however the client subscribed:
/// `Shelly.GetStatus` (the device measures later changes against the status it answered), one it refused, and
/// another method.
#[test]
fn the_first_change_after_subscribing_is_notified() {
    for first in [
        r#"{"id": 1, "src": "t", "method": "Shelly.GetStatus"}"#,
        r#"{"id": 1, "src": "t", "method": "shelly.getstatus", "params": null}"#,
        r#"{"id": 1, "src": "t", "method": "Shelly.GetStatus", "params": [1]}"#,
        r#"{"id": 1, "src": "t", "method": "Switch.GetStatus", "params": {"id": 1}}"#,
    ] {
        let emu = emulator(DeviceSpec::new("Shelly2PMG3"));
        let mut c =
            Connection::connect(local(emu.port(0)), "127.0.0.1", "/rpc", Timeouts::default())
                .unwrap();
        let next = |c: &mut Connection| -> Value {
            serde_json::from_str(&c.recv(Instant::now() + LIMIT).unwrap().unwrap()).unwrap()
        };
        c.send_text(first).unwrap();
        let answer = next(&mut c);
        assert_eq!(answer["id"], json!(1), "{first}: {answer}");
        if let Some(status) = answer["result"].get("switch:1") {
            assert_eq!(status["output"], json!(false), "{first}");
        }
        emu.set_output(0, 1, true);
        let n = next(&mut c);
        assert_eq!(n["method"], json!("NotifyStatus"), "{first}: {n}");
        assert_eq!(
            n["params"]["switch:1"]["output"],
            json!(true),
            "{first}: {n}"
        );
        assert!(n["params"].get("switch:0").is_none(), "{first}: {n}");
        c.close();
    }
}

#[test]
fn a_client_without_src_gets_no_notifications() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let mut c =
        Connection::connect(local(emu.port(0)), "127.0.0.1", "/rpc", Timeouts::default()).unwrap();
    c.send_text(r#"{"id": 1, "method": "Shelly.GetDeviceInfo"}"#)
        .unwrap();
    let answer: Value =
        serde_json::from_str(&c.recv(Instant::now() + LIMIT).unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], json!(1));
    emu.set_output(0, 0, true);
    // The device writes in order: a notification would come before the answer to a later request.
    c.send_text(r#"{"id": 2, "method": "Switch.GetStatus", "params": {"id": 0}}"#)
        .unwrap();
    let next: Value =
        serde_json::from_str(&c.recv(Instant::now() + LIMIT).unwrap().unwrap()).unwrap();
    assert_eq!(next["id"], json!(2), "{next}");
    assert_eq!(next["result"]["output"], json!(true));
    // Pings are answered.
    c.ping(b"x").unwrap();
    c.send_text(r#"{"id": 3, "method": "Shelly.GetDeviceInfo"}"#)
        .unwrap();
    assert!(c.recv(Instant::now() + LIMIT).unwrap().is_some());
    assert!(c.last_pong().is_some());
    c.close();
}

#[test]
fn digest_auth_inside_the_frame() {
    let mut spec = DeviceSpec::new("ShellyPlus1PM");
    spec.password = Some("s3cret".into());
    let emu = emulator(spec);
    // Open without auth.
    let mut anon = socket(emu.port(0), None, LIMIT);
    assert!(anon.call("Shelly.GetDeviceInfo", None).is_ok());
    assert!(matches!(
        anon.call("Shelly.GetStatus", None),
        Err(CallError::AuthMissing)
    ));
    let mut good = socket(emu.port(0), Some("s3cret"), LIMIT);
    for _ in 0..3 {
        assert!(good.call("Shelly.GetStatus", None).unwrap()["switch:0"].is_object());
    }
    let stats = emu.auth_stats(0);
    assert_eq!(stats.accepted, 3, "{stats:?}");
    // One challenge for the anonymous call, one for the first authenticated one; the nonce is then reused.
    assert_eq!(stats.challenges, 2, "{stats:?}");
    let mut bad = socket(emu.port(0), Some("wrong"), LIMIT);
    match bad.call("Switch.Set", Some(json!({"id": 0, "on": true}))) {
        Err(e @ CallError::AuthRefused) => assert!(e.to_string().contains("wrong password")),
        other => panic!("{other:?}"),
    }
    assert!(!emu.output(0, 0));
    // A refused client is not subscribed: nothing is pushed to it before the answer to a later request.
    emu.set_output(0, 0, true);
    bad.call("Shelly.GetDeviceInfo", None).unwrap();
    assert_eq!(bad.next_notification(Instant::now()).unwrap(), None);
}

#[test]
fn digest_auth_with_pre_2_0_numeric_nonces() {
    let mut spec = DeviceSpec::new("ShellyPlus1PM");
    spec.password = Some("pw".into());
    spec.auth_mode = AuthMode::Fw1;
    let emu = emulator(spec);
    let mut s = socket(emu.port(0), Some("pw"), LIMIT);
    // Each nonce is good once: every call is challenged and answered.
    for _ in 0..2 {
        s.call("Switch.Set", Some(json!({"id": 0, "on": true})))
            .unwrap();
    }
    assert_eq!(emu.auth_stats(0).accepted, 2);
}

#[test]
fn a_dropped_connection_is_noticed() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let mut s = socket(emu.port(0), None, LIMIT);
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    emu.drop_ws(0);
    match s.next_notification(Instant::now() + LIMIT) {
        Err(CallError::Ws(WsError::Dropped { .. } | WsError::Io(_))) => {}
        other => panic!("{other:?}"),
    }
    assert!(s.connection().is_broken());
    assert!(matches!(
        s.call("Shelly.GetStatus", None),
        Err(CallError::Ws(WsError::Broken))
    ));
    // The admin endpoint drops connections too.
    let mut s = socket(emu.port(0), None, LIMIT);
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    let r = request(emu.admin_port(), "POST", "/devices/0/ws?action=drop", None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(s.next_notification(Instant::now() + LIMIT).is_err());
}

#[test]
fn a_stalled_connection_times_out_and_recovers() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let mut s = socket(emu.port(0), None, Duration::from_millis(300));
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    emu.stall_ws(0, true);
    assert!(matches!(
        s.call("Shelly.GetStatus", None),
        Err(CallError::Timeout)
    ));
    emu.stall_ws(0, false);
    // The late answer to the timed-out call is skipped; this call gets its own.
    let info = s.call("Shelly.GetDeviceInfo", None);
    assert_eq!(info.unwrap()["id"], json!(emu.device_id(0)));
}

#[test]
fn gen1_devices_do_not_upgrade() {
    let emu = emulator(DeviceSpec::new("Shelly1PM"));
    match Connection::connect(local(emu.port(0)), "127.0.0.1", "/rpc", Timeouts::default()) {
        Err(WsError::Handshake(m)) => assert!(m.contains("instead of 101"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

// ---- a fake server sending hostile bytes ----

/// Accepts one connection, answers the handshake (with `accept` or the right key), then sends `bytes` and
/// keeps the socket open until the client goes (or closes it when `close`).
fn fake_server(bytes: Vec<u8>, wrong_accept: bool, close: bool) -> (SocketAddr, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).unwrap_or(0) == 0 {
                return;
            }
            head.push(b[0]);
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let key = text
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap()
            .trim()
            .to_string();
        let accept = if wrong_accept {
            "AAAAAAAAAAAAAAAAAAAAAAAAAAA=".to_string()
        } else {
            smartdev::ws::accept_key(&key)
        };
        let _ = write!(
            s,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        );
        let _ = s.write_all(&bytes);
        if close {
            return;
        }
        // Until the client closes.
        let mut sink = [0u8; 1024];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    (addr, t)
}

fn recv_from_fake(bytes: Vec<u8>, close: bool) -> (WsError, usize) {
    let (addr, t) = fake_server(bytes, false, close);
    let mut c = Connection::connect(addr, "fake", "/rpc", Timeouts::default()).unwrap();
    let e = loop {
        match c.recv(Instant::now() + LIMIT) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("no error in time"),
            Err(e) => break e,
        }
    };
    let held = c.buffered();
    drop(c);
    t.join().unwrap();
    (e, held)
}

#[test]
fn hostile_frames_give_clean_errors() {
    // 2^62 bytes declared: refused from the header, nothing buffered beyond it.
    let mut huge = vec![0x81, 127];
    huge.extend_from_slice(&(1u64 << 62).to_be_bytes());
    huge.extend_from_slice(&[b'x'; 4096]);
    let (e, held) = recv_from_fake(huge, false);
    assert!(
        matches!(e, WsError::Protocol(ProtocolError::TooLarge(n)) if n == 1 << 62),
        "{e:?}"
    );
    assert!(held < 16 * 1024, "{held}");
    // Just over 1 MiB.
    let mut over = vec![0x81, 127];
    over.extend_from_slice(&(1024u64 * 1024 + 1).to_be_bytes());
    let (e, _) = recv_from_fake(over, false);
    assert!(
        matches!(e, WsError::Protocol(ProtocolError::TooLarge(_))),
        "{e:?}"
    );
    // Fragments adding up to more than 1 MiB.
    let mut frags = vec![0x01, 127];
    frags.extend_from_slice(&(1024u64 * 1024).to_be_bytes());
    frags.extend(std::iter::repeat_n(b'a', 1024 * 1024));
    frags.extend_from_slice(&[0x80, 1, b'a']);
    let (e, _) = recv_from_fake(frags, false);
    assert!(
        matches!(e, WsError::Protocol(ProtocolError::TooLarge(_))),
        "{e:?}"
    );
    // A server must not mask.
    let (e, _) = recv_from_fake(vec![0x81, 0x81, 1, 2, 3, 4, b'x'], false);
    assert!(
        matches!(e, WsError::Protocol(ProtocolError::Masking)),
        "{e:?}"
    );
    let (e, _) = recv_from_fake(vec![0x83, 0], false);
    assert!(
        matches!(e, WsError::Protocol(ProtocolError::BadOpcode(3))),
        "{e:?}"
    );
    let (e, _) = recv_from_fake(vec![0xA1, 0], false);
    assert!(
        matches!(e, WsError::Protocol(ProtocolError::Reserved)),
        "{e:?}"
    );
    let (e, _) = recv_from_fake(vec![0x81, 2, 0xff, 0xfe], false);
    assert!(matches!(e, WsError::Protocol(ProtocolError::Utf8)), "{e:?}");
    // Truncated: 100 bytes announced, 10 sent, then the server leaves.
    let mut cut = vec![0x81, 100];
    cut.extend_from_slice(&[b'x'; 10]);
    let (e, _) = recv_from_fake(cut, true);
    assert!(matches!(e, WsError::Dropped { mid_frame: true }), "{e:?}");
    // A clean close from the server.
    let (e, _) = recv_from_fake(vec![0x88, 4, 0x03, 0xe8, b'o', b'k'], false);
    match e {
        WsError::Closed { code, reason } => assert_eq!((code, reason.as_str()), (Some(1000), "ok")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wrong_accept_key_fails_the_handshake() {
    let (addr, t) = fake_server(Vec::new(), true, true);
    match Connection::connect(addr, "fake", "/rpc", Timeouts::default()) {
        Err(WsError::Handshake(m)) => assert!(m.contains("Accept"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    t.join().unwrap();
}

#[test]
fn pings_from_the_server_are_answered() {
    // The server pings, then sends a text; the client answers the pong on the way to the text.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut b).unwrap(), 1);
            head.push(b[0]);
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let key = text
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap()
            .trim()
            .to_string();
        write!(
            s,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
            smartdev::ws::accept_key(&key)
        )
        .unwrap();
        s.write_all(&[0x89, 2, b'h', b'i', 0x81, 2, b'o', b'k'])
            .unwrap();
        // The pong: masked, payload "hi".
        let mut pong = [0u8; 8];
        s.read_exact(&mut pong).unwrap();
        assert_eq!(pong[0], 0x8A);
        assert_eq!(pong[1], 0x82);
        let mask = [pong[2], pong[3], pong[4], pong[5]];
        assert_eq!([pong[6] ^ mask[0], pong[7] ^ mask[1]], *b"hi");
    });
    let mut c = Connection::connect(addr, "fake", "/rpc", Timeouts::default()).unwrap();
    assert_eq!(
        c.recv(Instant::now() + LIMIT).unwrap().as_deref(),
        Some("ok")
    );
    t.join().unwrap();
}

/// A Shelly 2PM Gen3 in its cover profile.
fn cover_device() -> DeviceSpec {
    let mut spec = DeviceSpec::new("Shelly2PMG3");
    spec.profile = Some("cover".into());
    spec
}

/// The next `NotifyStatus` value of `cover:0`'s `field`.
fn next_cover_field(s: &mut RpcSocket, field: &str) -> Value {
    wait_for(s, |n| match n {
        Notification::Status { components, .. } => components.get("cover:0")?.get(field).cloned(),
        _ => None,
    })
}

#[test]
fn a_cover_move_pushes_its_state() {
    let emu = emulator(cover_device());
    emu.set_cover_calibrated(0, 0, true);
    let mut s = socket(emu.port(0), None, LIMIT);
    s.call("Cover.Open", Some(json!({"id": 0}))).unwrap();
    assert_eq!(next_cover_field(&mut s, "state"), json!("opening"));
}

/// A read changes nothing, so it notifies nothing, except while a cover moves: time alone moves it, and each
/// read says where it is now, then that it stopped.
#[test]
fn while_a_cover_moves_every_read_notifies_its_position() {
    let mut spec = cover_device();
    spec.cover_travel = Duration::from_secs(20);
    let clock = EmuClock::manual();
    let emu =
        Emulator::start_with_clock(vec![spec], &ModelLibrary::embedded(), clock.clone()).unwrap();
    emu.set_cover_position(0, 0, 0.0);
    let mut s = socket(emu.port(0), None, LIMIT);
    s.call("Cover.GoToPosition", Some(json!({"id": 0, "pos": 100})))
        .unwrap();
    let mut positions = Vec::new();
    for _ in 0..3 {
        clock.advance(Duration::from_secs(4));
        // A read: it writes nothing.
        s.call("Shelly.GetDeviceInfo", None).unwrap();
        let pos = next_cover_field(&mut s, "current_pos");
        positions.push(pos.as_f64().unwrap_or_else(|| panic!("{pos}")));
    }
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]) && positions[2] < 100.0,
        "{positions:?}"
    );
    clock.advance(Duration::from_secs(20));
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    assert_eq!(next_cover_field(&mut s, "state"), json!("open"));
}

/// The scripts are listed in the status but kept outside the device's state: one created over the socket is
/// notified (a new component: `NotifyFullStatus`) at the next access, even a read.
#[test]
fn a_created_script_is_notified_at_the_next_read() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let mut s = socket(emu.port(0), None, LIMIT);
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    let r = s
        .call("Script.Create", Some(json!({"name": "lights"})))
        .unwrap();
    let id = r["id"].as_u64().unwrap();
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    let status = wait_for(&mut s, |n| match n {
        Notification::FullStatus { status, .. } => Some(status.clone()),
        _ => None,
    });
    assert_eq!(status[&format!("script:{id}")]["running"], json!(false));
}

/// A device answers and notifies from one loop: an answer reflects every change notified before it on the
/// wire. (The emulator computed an answer, then a change's notification overtook it: the client took the
/// older answer over the newer notification and kept a light off that was on.)
#[test]
fn no_notification_overtakes_an_answer_older_than_it() {
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    // A meter draws its load while the output is on.
    emu.set_output(0, 0, true);
    let mut c =
        Connection::connect(local(emu.port(0)), "127.0.0.1", "/rpc", Timeouts::default()).unwrap();
    let ask = |c: &mut Connection, id: u64| {
        let f = json!({"id": id, "src": "order-test", "method": "Shelly.GetStatus"});
        c.send_text(&f.to_string()).unwrap();
    };
    // The first request subscribes; its answer comes before any change.
    ask(&mut c, 0);
    let first: Value =
        serde_json::from_str(&c.recv(Instant::now() + LIMIT).unwrap().unwrap()).unwrap();
    assert_eq!(first["id"], json!(0));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut answers, mut notes) = (0u64, 0u64);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = 1u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                emu.set_load(0, 0, f64::from(w));
                w += 1;
            }
        });
        let mut notified = 0.0f64;
        for id in 1..=400u64 {
            ask(&mut c, id);
            loop {
                let text = c
                    .recv(Instant::now() + LIMIT)
                    .unwrap()
                    .expect("an answer within LIMIT");
                let f: Value = serde_json::from_str(&text).unwrap();
                let power = |v: &Value| v["switch:0"]["apower"].as_f64();
                if f["method"] == json!("NotifyStatus") {
                    if let Some(p) = power(&f["params"]) {
                        notified = notified.max(p);
                        notes += 1;
                    }
                    continue;
                }
                assert_eq!(f["id"], json!(id), "{text}");
                let answered = power(&f["result"]).unwrap();
                if answered < notified {
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    panic!("answer {id} says {answered} W after a notification of {notified} W");
                }
                answers += 1;
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    assert_eq!(answers, 400);
    assert!(notes > 0, "the changes were notified");
}

/// Requests pipelined in one write came together, so they are answered together: one latency after they came,
/// as over a network of that latency, not one latency after another (a dial's two calls at open).
#[test]
fn requests_that_came_together_are_answered_together() {
    use smartdev::ws::frame::{self, Opcode};
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let latency = Duration::from_secs(2);
    emu.set_latency(0, latency);
    let mut buf = Vec::new();
    let mut s = raw_upgrade(emu.port(0), &mut buf);
    let mut chunk = [0u8; 4096];
    let two: Vec<u8> = ["Shelly.GetDeviceInfo", "Shelly.GetStatus"]
        .iter()
        .enumerate()
        .flat_map(|(id, method)| {
            let call = json!({"id": id + 1, "src": "pipelined", "method": method}).to_string();
            frame::encode(Opcode::Text, true, call.as_bytes(), Some([7, 1, 9, 3]))
        })
        .collect();
    let sent = Instant::now();
    s.write_all(&two).unwrap();
    let mut answered = Vec::new();
    while answered.len() < 2 {
        match frame::decode(&buf, false, 1 << 20).unwrap() {
            Some((f, used)) => {
                buf.drain(..used);
                let v: Value = serde_json::from_slice(&f.payload).unwrap();
                if v.get("id").is_some() {
                    assert!(v.get("result").is_some(), "{v}");
                    answered.push((v["id"].clone(), Instant::now()));
                }
            }
            None => {
                let k = s.read(&mut chunk).unwrap();
                assert!(k > 0, "closed before both answers");
                buf.extend_from_slice(&chunk[..k]);
            }
        }
    }
    assert_eq!((&answered[0].0, &answered[1].0), (&json!(1), &json!(2)));
    // The latency still holds for each...
    assert!(answered[0].1 - sent >= latency);
    // ...and the second is not held a second latency. Held, it came at least a latency after the first (the
    // old behaviour); now microseconds after it: the bound is that latency, not a guess at the machine's speed.
    let apart = answered[1].1 - answered[0].1;
    assert!(apart < latency, "answers {apart:?} apart");
}

/// A valid upgrade request for `/rpc`.
const UPGRADE: &[u8] =
    b"GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// Upgrades a raw connection to device `port`'s `/rpc`; what came after the upgrade's answer stays in `buf`.
fn raw_upgrade(port: u16, buf: &mut Vec<u8>) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(local(port)).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(UPGRADE).unwrap();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let k = s.read(&mut chunk).unwrap();
        assert!(k > 0, "closed before the upgrade");
        buf.extend_from_slice(&chunk[..k]);
    };
    assert!(
        buf.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(buf)
    );
    buf.drain(..end + 4);
    s
}

/// Every device's connections share the emulator's one poller: a client that asks and never reads its
/// answers, and a client that is flooded as fast as it reads, leave another device's calls answered; the
/// one that does not read is dropped once its writes have been blocked for a while, as a device drops it.
#[test]
fn a_client_that_does_not_read_or_one_flooded_slows_no_other_device() {
    use smartdev::ws::frame::{self, Opcode};
    let emu = Emulator::start(
        vec![
            DeviceSpec::new("ShellyPlus1PM"),
            DeviceSpec::new("ShellyPlus1PM"),
            DeviceSpec::new("ShellyPlus1PM"),
        ],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    // Device 0: far more answers than the socket buffers hold, none read.
    let mut buf = Vec::new();
    let mut stuck = raw_upgrade(emu.port(0), &mut buf);
    let call = json!({"id": 1, "src": "stuck", "method": "Shelly.GetStatus"}).to_string();
    let one = frame::encode(Opcode::Text, true, call.as_bytes(), Some([1, 2, 3, 4]));
    // Written until the device stops reading them: it has stopped once its own writes are blocked.
    stuck
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut sent = 0;
    while stuck.write_all(&one).is_ok() {
        sent += 1;
        assert!(sent < 2_000_000, "the device never stopped reading");
    }
    // Device 1: flooded with 64 KiB frames while its client reads.
    let mut flooded = socket(emu.port(1), None, LIMIT);
    flooded.call("Shelly.GetDeviceInfo", None).unwrap();
    emu.flood_ws(1, Some(64 * 1024));
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + LIMIT;
        let mut frames = 0;
        while frames < 200 {
            match flooded.next_notification(deadline) {
                Ok(Some(_)) => frames += 1,
                Ok(None) | Err(_) => break,
            }
        }
        frames
    });
    // Device 2 answers every call meanwhile.
    let mut other = socket(emu.port(2), None, LIMIT);
    for _ in 0..20 {
        let status = other.call("Shelly.GetStatus", None).unwrap();
        assert!(status.get("switch:0").is_some(), "{status}");
    }
    assert_eq!(
        reader.join().unwrap(),
        200,
        "the flooded client got its frames"
    );
    emu.flood_ws(1, None);
    assert!(emu.ws_flooded(1) >= 200);
    // The client that reads nothing is let go (its writes blocked for 2 s).
    let deadline = Instant::now() + LIMIT;
    while emu.ws_connections(0) > 0 {
        assert!(
            Instant::now() < deadline,
            "the stuck client was never dropped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        emu.ws_requests(0) >= 64,
        "{sent} sent, {} read",
        emu.ws_requests(0)
    );
}

/// The child side of the poller's lifecycle test: alone in its process, so every `sd-emu-ws` thread is its
/// emulators'. Prints `POLLERS` with the count while a client is connected and after the emulator stopped.
#[test]
fn child_poller_lifecycle() {
    if std::env::var_os("SMARTDEV_WS_POLLER_CHILD").is_none() {
        return;
    }
    let pollers = || common::threads_named("sd-emu-ws").len();
    let before = pollers();
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM"); 3],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let mut clients: Vec<RpcSocket> = (0..3).map(|d| socket(emu.port(d), None, LIMIT)).collect();
    for c in &mut clients {
        c.call("Shelly.GetStatus", None).unwrap();
    }
    let during = pollers();
    emu.stop();
    // The clients see their connections end; the poller ends once it has had none for a while.
    for mut c in clients {
        let ended = c.next_notification(Instant::now() + LIMIT);
        assert!(ended.is_err(), "the connection did not end: {ended:?}");
    }
    let ended = common::eventually(LIMIT, || pollers() == before);
    println!("POLLERS {before} {during} {}", pollers());
    assert!(ended, "the poller thread never ended");
}

/// One poller serves every device's connections, and it does not outlive them: started with the first
/// connection, gone a while after the emulator stopped (checked in a child process, alone there).
#[test]
fn one_poller_serves_every_connection_and_ends_after_them() {
    let counts = common::child_report(
        "child_poller_lifecycle",
        "SMARTDEV_WS_POLLER_CHILD",
        "POLLERS ",
    );
    assert_eq!(
        counts,
        [0, 1, 0],
        "pollers before, with 3 devices' clients, after the stop"
    );
}

/// Whether the server still holds `c` open: nothing to read yet, and not closed.
fn still_open(c: &mut std::net::TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let open =
        matches!(c.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    c.set_nonblocking(false).unwrap();
    open
}

/// A device's port reads all its clients at once (on the emulator's poller): clients that connect and send
/// nothing, or half a request, hold up neither that device's other clients (HTTP and WebSocket) nor another
/// device; more idle clients than a port reads at once wait in the backlog and are read once the first go.
#[test]
fn idle_clients_hold_up_neither_their_device_nor_another() {
    use std::net::TcpStream;
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM"); 2],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    // Device 0: more idle clients than its port reads at once (16).
    let mut crowd: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(local(emu.port(0))).unwrap())
        .collect();
    // Device 1: two idle clients and one that sent half a request.
    let mut idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(local(emu.port(1))).unwrap())
        .collect();
    idle[2]
        .write_all(b"GET /shelly HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // Device 1 answers over HTTP and over a WebSocket meanwhile...
    let reply = request(emu.port(1), "GET", "/shelly", None);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let mut s = socket(emu.port(1), None, LIMIT);
    s.call("Shelly.GetDeviceInfo", None).unwrap();
    // ...while its idle clients are all still there: a port reading one client after another would have
    // answered only after each had timed out (2 s each) and been closed.
    for (i, c) in idle.iter_mut().enumerate() {
        assert!(still_open(c), "idle client {i} of device 1 was closed");
    }
    // The half request, finished now, is answered too.
    idle[2].write_all(b"Connection: close\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    idle[2]
        .set_read_timeout(Some(LIMIT))
        .and_then(|()| idle[2].read_to_end(&mut answer))
        .unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // The crowd's port read its first 16 and left the rest waiting; once the crowd leaves, it answers again.
    assert!(still_open(&mut crowd[0]));
    crowd.clear();
    let mut d0 = socket(emu.port(0), None, LIMIT);
    d0.call("Shelly.GetDeviceInfo", None).unwrap();
    assert_eq!(request(emu.port(0), "GET", "/shelly", None).status, 200);
}

/// Writes `bytes` in pieces of `piece` bytes, each its own segment, pausing so that the device's reads see them
/// apart (the pause only makes splits likely; nothing is timed).
fn write_in_pieces(s: &mut std::net::TcpStream, bytes: &[u8], piece: usize) {
    s.set_nodelay(true).unwrap();
    for p in bytes.chunks(piece) {
        s.write_all(p).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Everything the device sends, and whether it then closed the connection (not just fell silent).
fn read_until_closed(s: &mut std::net::TcpStream) -> (String, bool) {
    let mut out = Vec::new();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let closed = match s.read_to_end(&mut out) {
        Ok(_) => true,
        // Closed with bytes of ours unread: a reset.
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    (String::from_utf8_lossy(&out).into_owned(), closed)
}

/// The answer to a request, which ends with the connection.
fn read_all(s: &mut std::net::TcpStream) -> String {
    let (text, closed) = read_until_closed(s);
    assert!(closed, "the answer did not end with the connection: {text}");
    text
}

/// The device reads request heads however the client splits them (byte by byte, the blank line cut in two),
/// bodies that come after their head, and closes a head that never ends without answering it, while it
/// answers others.
#[test]
fn request_heads_split_anywhere_are_read_and_endless_ones_closed() {
    use std::net::TcpStream;
    let emu = emulator(DeviceSpec::new("ShellyPlus1PM"));
    let port = emu.port(0);
    // An upgrade, one byte a segment.
    let mut s = TcpStream::connect(local(port)).unwrap();
    write_in_pieces(&mut s, UPGRADE, 1);
    let mut head = [0u8; 12];
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 101");
    // A GET whose blank line is cut between "\r\n\r" and "\n".
    let get = b"GET /shelly HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let mut s = TcpStream::connect(local(port)).unwrap();
    let cut = get.len() - 1;
    write_in_pieces(&mut s, &get[..cut], cut);
    write_in_pieces(&mut s, &get[cut..], 1);
    let answer = read_all(&mut s);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"gen\":2"), "{answer}");
    // A POST whose body comes after its head, in pieces.
    let body = r#"{"id":7,"method":"Switch.Set","params":{"id":0,"on":true}}"#;
    let post = format!(
        "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = TcpStream::connect(local(port)).unwrap();
    write_in_pieces(&mut s, post.as_bytes(), post.len());
    write_in_pieces(&mut s, body.as_bytes(), 8);
    let answer = read_all(&mut s);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"was_on\":false"), "{answer}");
    assert_eq!(
        request(port, "GET", "/rpc/Switch.GetStatus?id=0", None).json()["output"],
        json!(true)
    );
    // A head that never ends: closed unanswered after 64 KiB, and the device answers the next client.
    let mut endless = TcpStream::connect(local(port)).unwrap();
    endless
        .write_all(b"GET /shelly HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let filler = format!("X-Filler: {}\r\n", "a".repeat(1000));
    // More than the limit (a refused write means it was closed already).
    for _ in 0..100 {
        if endless.write_all(filler.as_bytes()).is_err() {
            break;
        }
    }
    let (rest, closed) = read_until_closed(&mut endless);
    assert!(rest.is_empty(), "an endless head was answered: {rest}");
    assert!(closed, "the endless head's connection stayed open");
    assert_eq!(request(port, "GET", "/shelly", None).status, 200);
}
