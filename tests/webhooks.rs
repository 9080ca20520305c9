//! Webhooks end to end: installation on emulated Gen2 and Gen1 devices (owned hooks only, no duplicates),
//! events fired by the devices, the wake flag and its descriptor, every refusal, token and AllowedSources,
//! 10,000 events from several senders, and closing while requests are in flight.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::emu::settings;
use common::raw_http::send;
use serde_json::{Value, json};
use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, EventFilter, Identity, ModelLibrary, WakeFlag};

const HOOKS: &str = "  ShellyWebhooks:
    Enabled: true
    Port: 0
    DefaultWebhooks:
      Inputs: [input.toggle_on, input.toggle_off, input.button_triplepush]
      Outputs: [switch.on, switch.off]
";

const DEVICES: [&str; 2] = [
    "Name: Hall, Model: Shelly2PMG3, Inputs: [{Name: Hall In, Webhooks: true}, {Name: Hall In 2}], Outputs: [{Name: Hall Light}, {Name: Hall Fan, Webhooks: true}]",
    "Name: Shed, Model: Shelly2.5, Inputs: [{Name: Shed In, Webhooks: true}, {Name: Shed In 2}], Outputs: [{Name: Shed Light}, {Name: Shed Pump, Webhooks: true}]",
];

fn emulator() -> Emulator {
    Emulator::start(
        vec![DeviceSpec::new("Shelly2PMG3"), DeviceSpec::new("Shelly2.5")],
        &ModelLibrary::embedded(),
    )
    .unwrap()
}

/// One raw HTTP request; returns the status and body.
fn http(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, String) {
    let r = send(
        addr,
        method,
        target,
        &[],
        Some(body),
        Duration::from_secs(5),
    )
    .unwrap();
    (r.status, r.text())
}

fn local(addr: SocketAddr) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], addr.port()))
}

fn names(hooks: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = hooks
        .iter()
        .map(|h| h["name"].as_str().unwrap_or("").to_string())
        .collect();
    n.sort();
    n
}

/// Creates a hook on an emulated Gen2 device as other software would.
fn foreign_hook(emu: &Emulator, device: usize) {
    let body = json!({"id": 1, "method": "Webhook.Create", "params": {"cid": 0, "enable": true, "event": "switch.on",
        "name": "home-assistant", "urls": ["http://10.0.0.2/ha"]}})
    .to_string();
    let addr = SocketAddr::from(([127, 0, 0, 1], emu.port(device)));
    let (status, answer) = http(addr, "POST", "/rpc", &body);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn hooks_are_installed_owned_and_reconciled_without_duplicates() {
    let emu = emulator();
    foreign_hook(&emu, 0);
    let first = Controller::open(settings(&emu, &DEVICES, HOOKS), None).unwrap();
    let gen2 = emu.webhooks(0);
    assert_eq!(
        names(&gen2),
        [
            "home-assistant",
            "smartdev:input:1:input.button_triplepush",
            "smartdev:input:1:input.toggle_off",
            "smartdev:input:1:input.toggle_on",
            "smartdev:output:2:switch.off",
            "smartdev:output:2:switch.on",
        ]
    );
    let port = first.webhook_address().unwrap().port();
    let on = gen2
        .iter()
        .find(|h| h["name"] == "smartdev:output:2:switch.on")
        .unwrap();
    assert_eq!(on["cid"], 1);
    assert_eq!(
        on["urls"][0],
        format!(
            "http://127.0.0.1:{port}/shelly/webhook?Event=switch.on&DeviceID=1&ObjectType=output&ComponentID=2"
        )
    );
    let dev = first.device(Identity::name("Hall")).unwrap();
    assert!(
        dev.supported_webhooks
            .contains(&"input.button_triplepush".to_string())
    );
    // Gen1: action URLs; triple push has no action there and is skipped.
    let gen1 = emu.webhooks(1);
    let events: Vec<&str> = gen1.iter().filter_map(|h| h["event"].as_str()).collect();
    assert_eq!(gen1.len(), 4, "{gen1:#?}");
    for e in [
        "input.toggle_on",
        "input.toggle_off",
        "switch.on",
        "switch.off",
    ] {
        assert!(events.contains(&e), "{e} in {events:?}");
    }
    first.close();

    // Opening again (the listener gets a new port): hooks are updated in place, not duplicated.
    let second = Controller::open(settings(&emu, &DEVICES, HOOKS), None).unwrap();
    assert_eq!(names(&emu.webhooks(0)).len(), 6);
    let port2 = second.webhook_address().unwrap().port();
    let urls: Vec<String> = emu
        .webhooks(0)
        .iter()
        .map(|h| h["urls"][0].as_str().unwrap().to_string())
        .collect();
    assert!(
        urls.iter()
            .filter(|u| u.contains("/shelly/webhook"))
            .all(|u| u.contains(&format!(":{port2}/")))
    );
    assert_eq!(emu.webhooks(1).len(), 4);
    second.close();

    // Webhooks off for the output: only smartdev's stale output hooks go; the foreign hook stays.
    let fewer = [
        "Name: Hall, Model: Shelly2PMG3, Inputs: [{Name: Hall In, Webhooks: true}, {Name: Hall In 2}], Outputs: [{Name: Hall Light}, {Name: Hall Fan}]",
        DEVICES[1],
    ];
    let third = Controller::open(settings(&emu, &fewer, HOOKS), None).unwrap();
    assert_eq!(
        names(&emu.webhooks(0)),
        [
            "home-assistant",
            "smartdev:input:1:input.button_triplepush",
            "smartdev:input:1:input.toggle_off",
            "smartdev:input:1:input.toggle_on",
        ]
    );
    third.close();
}

#[test]
fn device_events_arrive_with_their_fields_and_wake_the_application() {
    let emu = emulator();
    let wake = WakeFlag::new();
    let ctl = Controller::open(settings(&emu, &DEVICES, HOOKS), Some(wake.clone())).unwrap();
    assert!(!wake.is_set());
    assert!(ctl.pull_webhook_event().is_none());

    emu.set_input(0, 0, true);
    assert_eq!(emu.fire_event(0, "input.toggle_on", 0), 1);
    assert!(wake.wait(Duration::from_secs(5)));
    let e = ctl
        .pull_webhook_event()
        .expect("queued before the flag was set");
    assert_eq!(e.event, "input.toggle_on");
    assert_eq!((e.device.as_str(), e.device_id), ("Hall", Some(1)));
    assert_eq!((e.component.as_str(), e.component_id), ("Hall In", Some(1)));
    assert_eq!(e.object_type.as_deref(), Some("input"));
    assert_eq!(e.source, "127.0.0.1");
    assert!(e.received_at.ends_with('Z'));
    assert!(e.params.is_empty(), "{:?}", e.params);
    // The device's worker takes the input's state at once (a thread hop, then a read of the device).
    assert!(common::eventually(Duration::from_secs(5), || ctl
        .input(Identity::name("Hall In"))
        .unwrap()
        .state
        == Some(true)));
    wake.clear();
    assert!(!wake.is_set());

    // Gen1 action URL: output 2 of the Shed (channel 1) switches on.
    emu.set_output(1, 1, true);
    assert_eq!(emu.fire_event(1, "switch.on", 1), 1);
    assert!(wake.wait(Duration::from_secs(5)));
    let e = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        (e.event.as_str(), e.device.as_str(), e.component.as_str()),
        ("switch.on", "Shed", "Shed Pump")
    );
    assert!(common::eventually(Duration::from_secs(5), || ctl
        .output(Identity::name("Shed Pump"))
        .unwrap()
        .state
        == Some(true)));
    // ... and the worker refreshes the device.
    assert!(common::eventually(Duration::from_secs(5), || emu
        .counts(1)
        .get("GET /status")
        .copied()
        .unwrap_or(0)
        >= 2));

    // Filters take the oldest matching event and leave the rest.
    emu.fire_event(0, "switch.off", 1);
    emu.fire_event(1, "switch.off", 1);
    assert!(common::eventually(Duration::from_secs(5), || ctl
        .webhook_queue_stats()
        .waiting
        == 2));
    let shed = EventFilter {
        device: Some(Identity::name("Shed")),
        component: None,
    };
    assert_eq!(
        ctl.pull_webhook_event_matching(&shed).unwrap().device,
        "Shed"
    );
    assert!(ctl.pull_webhook_event_matching(&shed).is_none());
    let fan = EventFilter {
        device: None,
        component: Some(Identity::Id(2)),
    };
    assert_eq!(
        ctl.pull_webhook_event_matching(&fan).unwrap().component,
        "Hall Fan"
    );
    assert!(ctl.pull_webhook_event().is_none());
}

#[test]
fn bad_requests_get_their_status_and_queue_nothing() {
    let emu = emulator();
    let wake = WakeFlag::new();
    let ctl = Controller::open(settings(&emu, &DEVICES, HOOKS), Some(wake.clone())).unwrap();
    let addr = local(ctl.webhook_address().unwrap());
    let cases: &[(&str, &str, &str, u16)] = &[
        ("GET", "/elsewhere?Event=switch.on", "", 404),
        ("PUT", "/shelly/webhook?Event=switch.on", "", 405),
        ("DELETE", "/shelly/webhook", "", 405),
        ("GET", "/shelly/webhook", "", 400),
        ("GET", "/shelly/webhook?Event=switch.explode", "", 400),
        (
            "GET",
            "/shelly/webhook?Event=switch.on&DeviceID=one",
            "",
            400,
        ),
        (
            "GET",
            "/shelly/webhook?Event=switch.on&ComponentID=1.5",
            "",
            400,
        ),
        ("POST", "/shelly/webhook", "{\"Event\": ", 400),
    ];
    for (method, target, body, status) in cases {
        assert_eq!(
            http(addr, method, target, body).0,
            *status,
            "{method} {target}"
        );
    }
    let big = format!("Event=switch.on&pad={}", "x".repeat(70 * 1024));
    assert_eq!(http(addr, "POST", "/shelly/webhook", &big).0, 413);
    assert_eq!(
        (
            ctl.webhook_queue_stats().waiting,
            ctl.webhook_queue_stats().dropped
        ),
        (0, 0)
    );
    assert!(!wake.is_set());

    // Unknown IDs are still events, with the names left empty; extra fields become Params.
    let (status, body) = http(
        addr,
        "POST",
        "/shelly/webhook?Event=switch.on",
        "DeviceID=99&ComponentID=7&ObjectType=output&tC=21.5",
    );
    assert_eq!(status, 200, "{body}");
    let e = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        (e.device.as_str(), e.device_id, e.component.as_str()),
        ("", Some(99), "")
    );
    assert_eq!(e.params["tC"], "21.5");
    let (status, _) = http(
        addr,
        "POST",
        "/shelly/webhook",
        r#"{"Event":"input.toggle_off","DeviceID":2,"ObjectType":"input","ComponentID":3}"#,
    );
    assert_eq!(status, 200);
    let e = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        (e.device.as_str(), e.component.as_str()),
        ("Shed", "Shed In")
    );
}

#[test]
fn token_and_allowed_sources() {
    let emu = emulator();
    let extra = format!("{HOOKS}    Token: 's3cret&more'\n    AllowedSources: devices\n");
    let ctl = Controller::open(settings(&emu, &DEVICES, &extra), None).unwrap();
    let addr = local(ctl.webhook_address().unwrap());
    let url = emu.webhooks(0)[0]["urls"][0].as_str().unwrap().to_string();
    assert!(url.ends_with("&token=s3cret%26more"), "{url}");
    // Devices call with the token they were given. The input is on, as on a device that sends toggle_on: a
    // status pushed meanwhile that said off would be a flip of its own (`input.toggle_off`).
    emu.set_input(0, 0, true);
    assert_eq!(emu.fire_event(0, "input.toggle_on", 0), 1);
    assert!(common::eventually(Duration::from_secs(5), || ctl
        .webhook_queue_stats()
        .waiting
        == 1));
    let e = ctl.pull_webhook_event().unwrap();
    assert!(!e.params.contains_key("token"));
    assert_eq!(
        http(addr, "GET", "/shelly/webhook?Event=switch.on", "").0,
        401
    );
    assert_eq!(
        http(
            addr,
            "GET",
            "/shelly/webhook?Event=switch.on&token=s3cret",
            ""
        )
        .0,
        401
    );
    assert_eq!(
        http(
            addr,
            "GET",
            "/shelly/webhook?Event=switch.on&token=s3cret%26more",
            ""
        )
        .0,
        200
    );
    // Another address on the loopback net is not a configured device.
    let mut s = {
        let sock = socket2_connect_from("127.0.0.2", addr);
        sock.unwrap()
    };
    write!(s, "GET /shelly/webhook?Event=switch.on&token=s3cret%26more HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}

/// Connects from a chosen local address (127.0.0.0/8 is all loopback on Linux).
fn socket2_connect_from(local_ip: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    let from: SocketAddr = format!("{local_ip}:0").parse().unwrap();
    sock.bind(&from.into())?;
    sock.connect(&to.into())?;
    Ok(sock.into())
}

#[test]
fn ten_thousand_events_from_four_senders_arrive_once_each_in_order() {
    let emu = emulator();
    let wake = WakeFlag::new();
    let ctl = Controller::open(settings(&emu, &DEVICES, HOOKS), Some(wake.clone())).unwrap();
    let addr = local(ctl.webhook_address().unwrap());
    const PER_SENDER: usize = 2500;
    let senders: Vec<_> = (0..4)
        .map(|s| {
            std::thread::spawn(move || {
                for n in 0..PER_SENDER {
                    let (status, body) = http(
                        addr,
                        "GET",
                        &format!("/shelly/webhook?Event=switch.on&sender={s}&n={n}"),
                        "",
                    );
                    assert_eq!(status, 200, "{body}");
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    assert!(wake.is_set());
    let mut next = [0usize; 4];
    let mut total = 0;
    while let Some(e) = ctl.pull_webhook_event() {
        let s: usize = e.params["sender"].as_str().unwrap().parse().unwrap();
        let n: usize = e.params["n"].as_str().unwrap().parse().unwrap();
        assert_eq!(n, next[s], "sender {s} out of order or duplicated");
        next[s] += 1;
        total += 1;
    }
    assert_eq!(total, 4 * PER_SENDER);
    assert_eq!(
        (
            ctl.webhook_queue_stats().waiting,
            ctl.webhook_queue_stats().dropped
        ),
        (0, 0)
    );
}

#[test]
fn a_full_queue_drops_the_oldest_and_counts_it() {
    let emu = emulator();
    let extra = format!("{HOOKS}    QueueCapacity: 3\n");
    let ctl = Controller::open(settings(&emu, &DEVICES, &extra), None).unwrap();
    let addr = local(ctl.webhook_address().unwrap());
    for n in 0..5 {
        assert_eq!(
            http(
                addr,
                "GET",
                &format!("/shelly/webhook?Event=switch.on&n={n}"),
                ""
            )
            .0,
            200
        );
    }
    let stats = ctl.webhook_queue_stats();
    assert_eq!((stats.waiting, stats.dropped), (3, 2));
    assert_eq!(ctl.pull_webhook_event().unwrap().params["n"], "2");
}

#[test]
fn close_stops_the_listener_while_requests_are_in_flight() {
    let emu = emulator();
    let ctl = Arc::new(Controller::open(settings(&emu, &DEVICES, HOOKS), None).unwrap());
    let addr = local(ctl.webhook_address().unwrap());
    let senders: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut ok = 0;
                for _ in 0..2000 {
                    match TcpStream::connect(addr) {
                        Ok(mut s) => {
                            let _ = write!(s, "GET /shelly/webhook?Event=switch.on HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                            let mut a = String::new();
                            let _ = s.read_to_string(&mut a);
                            ok += usize::from(a.starts_with("HTTP/1.1 200"));
                        }
                        Err(_) => break,
                    }
                }
                ok
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    ctl.close();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "close took {:?}",
        started.elapsed()
    );
    let delivered: usize = senders.into_iter().map(|s| s.join().unwrap()).sum();
    assert!(delivered > 0);
    // Nothing listens any more.
    assert!(common::eventually(Duration::from_secs(2), || {
        TcpStream::connect(addr).is_err()
    }));
}

#[test]
fn a_port_in_use_makes_open_fail_naming_the_address() {
    let emu = emulator();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let extra = format!("  ShellyWebhooks: {{Enabled: true, Host: 127.0.0.1, Port: {port}}}\n");
    let e = Controller::open(settings(&emu, &DEVICES, &extra), None).unwrap_err();
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[test]
fn hooks_are_installed_again_when_a_device_comes_back() {
    let emu = emulator();
    let extra = format!("{HOOKS}  RefreshInterval: 0.1\n");
    let ctl = Controller::open(settings(&emu, &DEVICES, &extra), None).unwrap();
    assert_eq!(emu.webhooks(0).len(), 5);
    emu.set_fault(0, smartdev::emulator::Fault::Refuse);
    assert!(common::eventually(Duration::from_secs(5), || !ctl
        .is_device_online(Identity::Id(1))
        .unwrap()));
    // Coming back, the hooks are checked again (and repaired if the device lost them meanwhile).
    emu.reset_counts(0);
    emu.set_fault(0, smartdev::emulator::Fault::None);
    assert!(common::eventually(Duration::from_secs(5), || ctl
        .is_device_online(Identity::Id(1))
        .unwrap()));
    assert!(common::eventually(Duration::from_secs(5), || emu
        .counts(0)
        .get("rpc Webhook.List")
        .copied()
        .unwrap_or(0)
        >= 1));
    assert_eq!(emu.webhooks(0).len(), 5, "no duplicates");
}
