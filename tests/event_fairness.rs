//! Fairness of the event queue, tested as the hostile device (`tests/fairness.rs` has the push channel's):
//! one device floods events (`NotifyEvent`s over its push channel, or webhooks) beside two healthy ones, with
//! `QueueCapacity: 10`. Whatever the flood, every event of the healthy devices is still queued, in the order
//! it came.

mod common;

use std::time::Duration;

use common::emu;
use common::eventually;
use common::raw_http::send;
use smartdev::Controller;
use smartdev::emulator::DeviceSpec;

/// A hang guard, never a timing assertion.
const LIMIT: Duration = Duration::from_secs(30);
const FLOOD: usize = 300;
/// The healthy devices' events are sent at these points of the flood (so on a drop-oldest queue every one
/// of them would be followed by at least 100 of the flood's).
const HEALTHY_AT: [usize; 3] = [0, 100, 200];

/// The push channel, with a heartbeat patient enough that a loaded machine does not drop a socket (and the
/// notifications on their way) in the middle of a test.
const PUSH: &str = "  Channel: auto\n  ResponseTimeout: 5\n";
const PUSH_10: &str = "  Channel: auto\n  ResponseTimeout: 5\n  ShellyWebhooks: {Enabled: false, QueueCapacity: 10}\n";

const BLOCKS: [&str; 3] = [
    "Name: Flood, Model: ShellyPlus1PM",
    "Name: Calm A, Model: ShellyPlus1PM",
    "Name: Calm B, Model: ShellyPlus1PM",
];

/// Pulls everything; returns (device, event name and its `n` parameter, if any) in the order pulled.
fn pull_all(ctl: &Controller) -> Vec<(String, String)> {
    std::iter::from_fn(|| ctl.pull_webhook_event())
        .map(|e| {
            let n = e.params.get("n").and_then(|n| n.as_str()).unwrap_or("");
            (e.device, format!("{} {n}", e.event).trim_end().to_string())
        })
        .collect()
}

/// Every healthy device's events must be there, in the order it sent them (across devices, the order is
/// the order they reached us: on separate sockets, not the order sent); the flood keeps the rest of the 10
/// places.
fn check(events: &[(String, String)], healthy: &[(String, String)]) {
    for device in ["Calm A", "Calm B"] {
        let of = |list: &[(String, String)]| -> Vec<String> {
            list.iter()
                .filter(|(d, _)| d == device)
                .map(|(_, e)| e.clone())
                .collect()
        };
        assert_eq!(of(events), of(healthy), "{device} lost events: {events:?}");
    }
    assert_eq!(events.len(), 10, "{events:?}");
}

/// Events the controller has taken so far: queued, or dropped by the queue.
fn taken(ctl: &Controller) -> u64 {
    let s = ctl.webhook_queue_stats();
    s.waiting as u64 + s.dropped
}

/// Device 0 fires `FLOOD` `NotifyEvent`s, devices 1 and 2 one each at `HEALTHY_AT`; returns the healthy
/// events sent. Paced by the controller: after every 32 events, until it has taken them, because the
/// emulator drops a notification when 64 are waiting for its socket writer (a loaded machine would lose
/// some of the flood, and the test could not tell when everything has arrived).
fn flood_over_push(e: &emu::Emulated) -> Vec<(String, String)> {
    let mut healthy = Vec::new();
    let mut fired = 0u64;
    for n in 0..FLOOD {
        if HEALTHY_AT.contains(&n) {
            for (d, name) in [(1, "Calm A"), (2, "Calm B")] {
                e.emu.fire_event(d, "input.button_push", 0);
                healthy.push((name.to_string(), "input.button_push".to_string()));
                fired += 1;
            }
        }
        e.emu.fire_event(0, "input.button_push", 0);
        fired += 1;
        if n % 32 == 31 || n == FLOOD - 1 {
            assert!(
                eventually(LIMIT, || taken(&e.ctl) >= fired),
                "{fired} fired: {:?}",
                e.ctl.webhook_queue_stats()
            );
        }
    }
    healthy
}

#[test]
fn a_device_flooding_notify_events_evicts_none_of_its_neighbours() {
    let specs = (0..3).map(|_| DeviceSpec::new("ShellyPlus1PM")).collect();
    let e = emu::start(specs, &BLOCKS, PUSH_10);
    assert!(
        eventually(LIMIT, || (0..3).all(|d| e.emu.ws_subscribed(d) == 1)),
        "the push channels subscribe"
    );
    let healthy = flood_over_push(&e);
    check(&pull_all(&e.ctl), &healthy);
    e.ctl.close();
}

#[test]
fn a_device_flooding_webhooks_evicts_none_of_its_neighbours() {
    let specs = (0..3).map(|_| DeviceSpec::new("ShellyPlus1PM")).collect();
    let e = emu::start(
        specs,
        &BLOCKS,
        "  Channel: http\n  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0, QueueCapacity: 10}\n",
    );
    let addr = e.ctl.webhook_address().unwrap();
    let hook = |device: i64, n: usize| {
        let target = format!("/shelly/webhook?Event=input.button_push&DeviceID={device}&n={n}");
        let r = send(addr, "GET", &target, &[], None, Duration::from_secs(10)).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    };
    let mut healthy = Vec::new();
    for n in 0..FLOOD {
        if HEALTHY_AT.contains(&n) {
            for (id, name) in [(2, "Calm A"), (3, "Calm B")] {
                hook(id, n);
                healthy.push((name.to_string(), format!("input.button_push {n}")));
            }
        }
        hook(1, n);
    }
    // Every request was answered, so every event was queued or dropped by now.
    assert_eq!(taken(&e.ctl), (FLOOD + healthy.len()) as u64);
    let events = pull_all(&e.ctl);
    check(&events, &healthy);
    // One sender, one request after another: here the order across devices is the order sent too.
    let calm: Vec<_> = events.into_iter().filter(|(d, _)| d != "Flood").collect();
    assert_eq!(calm, healthy);
    e.ctl.close();
}

#[test]
fn a_device_over_its_event_rate_is_cut_at_the_door_and_its_neighbours_are_not() {
    let specs = (0..3).map(|_| DeviceSpec::new("ShellyPlus1PM")).collect();
    let e = emu::start(specs, &BLOCKS, PUSH);
    assert!(
        eventually(LIMIT, || (0..3).all(|d| e.emu.ws_subscribed(d) == 1)),
        "the push channels subscribe"
    );
    let started = std::time::Instant::now();
    flood_over_push(&e);
    let events = pull_all(&e.ctl);
    let count = |device: &str| events.iter().filter(|(d, _)| d == device).count();
    // A burst of 50, then 20 per second: the bound grows with the time taken, so a slow machine cannot fail it.
    let bound = 50 + (20.0 * started.elapsed().as_secs_f64()).ceil() as usize + 1;
    let flood = count("Flood");
    assert!(
        flood >= 50 && flood <= bound,
        "{flood} queued (bound {bound})"
    );
    assert_eq!((count("Calm A"), count("Calm B")), (3, 3));
    assert_eq!(
        e.ctl.webhook_queue_stats().dropped,
        (FLOOD - flood) as u64,
        "the excess is counted"
    );
    e.ctl.close();
}
