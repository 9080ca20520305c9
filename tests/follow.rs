//! Following a device that moved (issue 24 §3), without multicast: the finder is injected
//! (`ControllerBuilder::finder`) and answers what the test says is on the network; emulated devices on
//! 127.0.0.1 with different ports stand in for addresses. The emulator's own state (its outputs) shows what
//! was switched where. The same flows across real addresses and mDNS: tests/netns_follow.rs.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::eventually;
use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, Discovered, Error, Identity, Lookup, ModelLibrary, Settings};

const LIMIT: Duration = Duration::from_secs(20);

fn name(n: &str) -> Identity {
    Identity::Name(n.into())
}

fn spec(mac: &str) -> DeviceSpec {
    DeviceSpec {
        mac: Some(mac.into()),
        ..DeviceSpec::new("ShellyPlus1PM")
    }
}

/// What the injected finder says is on the network, and what it was asked.
#[derive(Clone, Default)]
struct Network {
    seen: Arc<Mutex<Vec<(String, u16)>>>,
    lookups: Arc<AtomicUsize>,
    asked: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Network {
    /// MAC `mac` answers at 127.0.0.1:`port` (replacing what was there for that MAC).
    fn put(&self, mac: &str, port: u16) {
        let mut s = self.seen.lock().unwrap();
        s.retain(|(m, _)| m != mac);
        s.push((mac.into(), port));
    }

    fn finder(&self) -> impl FnMut(&Lookup) -> smartdev::Result<Vec<Discovered>> + Send + 'static {
        let net = self.clone();
        move |lookup: &Lookup| {
            net.lookups.fetch_add(1, Ordering::SeqCst);
            net.asked.lock().unwrap().push(lookup.missing().to_vec());
            Ok(net
                .seen
                .lock()
                .unwrap()
                .iter()
                .map(|(mac, port)| found(mac, *port))
                .collect())
        }
    }
}

fn found(mac: &str, port: u16) -> Discovered {
    // Built the way a finder outside the crate builds it: every field is public.
    Discovered {
        mac_address: Some(mac.into()),
        model: Some("ShellyPlus1PM".into()),
        reported_model: Some("SNSW-001P16EU".into()),
        generation: Some(2),
        address: "127.0.0.1".parse().unwrap(),
        port,
        name: format!("emulated-{port}"),
        hostname: format!("emulated-{port}"),
        firmware: None,
        auth_required: Some(false),
        cert_sha256: None,
        configured: None,
    }
}

fn open(yaml: &str, net: &Network) -> Controller {
    let settings = Settings::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    Controller::builder()
        .finder(net.finder())
        .open(settings)
        .unwrap()
}

const ROOT: &str = "SmartDevices:\n  ResponseTimeout: 0.5\n  RetryCount: 0\n  PingAllowed: false\n";

#[test]
fn a_mac_only_device_opens_offline_and_is_found_shortly_after_with_its_push_channel() {
    let emu = Emulator::start(vec![spec("A8032AB12345")], &ModelLibrary::embedded()).unwrap();
    emu.set_output(0, 0, false);
    let net = Network::default();
    net.put("A8:03:2A:B1:23:45", emu.port(0));
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0\n  Channel: auto\n  Devices:\n    - {{Name: Kitchen, Model: ShellyPlus1PM, MAC: a8-03-2a-b1-23-45, Outputs: [{{Name: Kitchen Lamp}}]}}\n"
    );
    let ctl = open(&yaml, &net);
    assert!(
        eventually(LIMIT, || ctl.device(name("Kitchen")).unwrap().online),
        "{:?}",
        ctl.device(name("Kitchen")).unwrap().last_error
    );
    let d = ctl.device(name("Kitchen")).unwrap();
    assert_eq!(d.address.as_deref(), Some("127.0.0.1"));
    assert_eq!(d.port, emu.port(0));
    assert_eq!(d.hostname, None, "the configuration is not rewritten");
    assert_eq!(net.lookups.load(Ordering::SeqCst), 1);
    assert_eq!(
        net.asked.lock().unwrap()[0],
        ["A8:03:2A:B1:23:45".to_string()]
    );
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["Address"], "127.0.0.1");
    let shown = ctl.print_device_status(Some(&name("Kitchen"))).unwrap();
    assert!(
        shown.contains(&format!("127.0.0.1:{} (found by its MAC)", emu.port(0))),
        "{shown}"
    );

    // The push channel followed it: a change on the device reaches the snapshot with no read asked
    // (RefreshInterval 0).
    switch_then_see_a_change_on_the_device(&emu, &ctl);
}

/// Switches Kitchen Lamp on (it must reach emulated device 0), waits until the device's push channel is
/// subscribed again, then turns the output off on the device and waits for the snapshot to show it.
fn switch_then_see_a_change_on_the_device(emu: &Emulator, ctl: &Controller) {
    ctl.change_output(name("Kitchen Lamp"), true).unwrap();
    assert!(emu.output(0, 0));
    assert!(eventually(LIMIT, || emu.ws_subscribed(0) == 1));
    emu.set_output(0, 0, false);
    assert!(eventually(LIMIT, || ctl
        .output(name("Kitchen Lamp"))
        .unwrap()
        .state
        == Some(false)));
}

#[test]
fn two_devices_swapping_addresses_are_each_rebound_to_their_own_mac_and_nothing_is_switched_on_the_wrong_one()
 {
    let _ = swap("http");
}

/// With the push channel, each device's connection follows it: the old ones (now to the other device) are
/// dropped, and each device's pushed states reach the right configured device.
#[test]
fn after_a_swap_each_push_channel_follows_its_device() {
    let (emu, ctl) = swap("auto");
    // Each port got a new connection (its device's, after the move) and kept only that one: the connection
    // made before the swap, now to the other device, was dropped.
    assert!(eventually(LIMIT, || {
        (0..2).all(|i| emu.ws_upgrades(i) >= 2 && emu.ws_subscribed(i) == 1)
    }));
    // Kitchen (MAC …01) is the device at port 1 now: its state reaches Kitchen, not Hall.
    emu.set_output(1, 0, true);
    assert!(eventually(LIMIT, || ctl
        .output(name("Kitchen Lamp"))
        .unwrap()
        .state
        == Some(true)));
    assert_eq!(ctl.output(name("Hall Lamp")).unwrap().state, Some(true));
}

/// Swaps two emulated devices' addresses under a controller using `channel`; returns the emulator after both
/// devices were rebound (Kitchen off, Hall on), and the controller.
fn swap(channel: &str) -> (Emulator, Controller) {
    let emu = Emulator::start(
        vec![spec("AA0000000001"), spec("AA0000000002")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    emu.set_output(0, 0, false);
    emu.set_output(1, 0, false);
    let net = Network::default();
    net.put("AA:00:00:00:00:01", emu.port(0));
    net.put("AA:00:00:00:00:02", emu.port(1));
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0.2\n  Channel: {channel}\n  Devices:
    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}, MAC: AA0000000001, Outputs: [{{Name: Kitchen Lamp}}]}}
    - {{Name: Hall, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}, MAC: AA0000000002, Outputs: [{{Name: Hall Lamp}}]}}\n",
        emu.port(0),
        emu.port(1)
    );
    let ctl = open(&yaml, &net);
    assert!(ctl.device(name("Kitchen")).unwrap().online);
    assert!(ctl.device(name("Hall")).unwrap().online);

    // The two devices swap addresses: the device at port 0 is now Hall (MAC …02), at port 1 Kitchen.
    emu.set_mac(0, "AA0000000002");
    emu.set_mac(1, "AA0000000001");
    net.put("AA:00:00:00:00:01", emu.port(1));
    net.put("AA:00:00:00:00:02", emu.port(0));
    // Once the controller noticed (a background read saw the other MAC, or it already followed), a switch is
    // either refused or reaches the right device. (Before any read, the rule's documented limit applies: a
    // device replaced between two reads without a failure in between is noticed at the next read.)
    assert!(eventually(LIMIT, || {
        let d = ctl.device(name("Kitchen")).unwrap();
        !d.online || d.port == emu.port(1)
    }));
    match ctl.change_output(name("Kitchen Lamp"), true) {
        Ok(_) | Err(Error::WrongDevice { .. }) | Err(Error::Offline { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    assert!(
        !emu.output(0, 0),
        "Hall (now at port 0) was switched as Kitchen"
    );

    let bound = |n: &str, port: u16| {
        let d = ctl.device(name(n)).unwrap();
        d.online && d.port == port && d.address.as_deref() == Some("127.0.0.1")
    };
    assert!(
        eventually(LIMIT, || bound("Kitchen", emu.port(1))
            && bound("Hall", emu.port(0))),
        "{:?}\n{:?}",
        ctl.device(name("Kitchen")).unwrap(),
        ctl.device(name("Hall")).unwrap()
    );
    // One lookup served both: at once when both were missing then, else its results served the second.
    assert_eq!(
        net.lookups.load(Ordering::SeqCst),
        1,
        "{:?}",
        net.asked.lock().unwrap()
    );

    // By name, each switch reaches the device with that MAC.
    ctl.change_output(name("Kitchen Lamp"), true).unwrap();
    assert!(emu.output(1, 0), "Kitchen is the device at port 1 now");
    assert!(!emu.output(0, 0));
    ctl.change_output(name("Hall Lamp"), true).unwrap();
    assert!(emu.output(0, 0), "Hall is the device at port 0 now");
    ctl.change_output(name("Kitchen Lamp"), false).unwrap();
    assert!(!emu.output(1, 0));
    assert!(emu.output(0, 0));
    (emu, ctl)
}

#[test]
fn a_hint_where_another_mac_answers_moves_nothing_and_switches_nothing_there() {
    let emu = Emulator::start(
        vec![spec("112233445566"), spec("665544332211")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    emu.set_output(1, 0, false);
    let net = Network::default();
    // A lying finder: Kitchen's MAC "at" port 1, where another device answers.
    net.put("A8:03:2A:B1:23:45", emu.port(1));
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0\n  Channel: http\n  Devices:
    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}, MAC: A8032AB12345, Outputs: [{{Name: Kitchen Lamp}}]}}\n",
        emu.port(0)
    );
    let ctl = open(&yaml, &net);
    // The worker asked port 1 itself (the hint is checked), then the read queued after it runs.
    assert!(eventually(LIMIT, || emu.total_requests(1) > 0));
    let r = ctl.read_device(name("Kitchen"));
    assert!(matches!(r, Err(Error::WrongDevice { .. })), "{r:?}");
    let d = ctl.device(name("Kitchen")).unwrap();
    assert_eq!(d.port, emu.port(0), "not moved");
    assert!(!d.online);
    let r = ctl.change_output(name("Kitchen Lamp"), true);
    assert!(matches!(r, Err(Error::WrongDevice { .. })), "{r:?}");
    assert!(!emu.output(1, 0));
}

#[test]
fn without_a_configured_mac_nothing_is_looked_up() {
    let emu = Emulator::start(vec![spec("A8032AB12345")], &ModelLibrary::embedded()).unwrap();
    let net = Network::default();
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0\n  Devices:\n    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n",
        emu.port(0)
    );
    let ctl = open(&yaml, &net);
    // The finder was dropped at open: no thread holds it, so it is never called.
    assert_eq!(Arc::strong_count(&net.lookups), 1);
    assert!(ctl.device(name("Kitchen")).unwrap().online);
}

#[test]
fn close_does_not_wait_for_a_lookup() {
    let (entered_tx, entered_rx) = crossbeam_channel::bounded::<()>(1);
    let finder = move |lookup: &Lookup| {
        let _ = entered_tx.try_send(());
        // A finder that honours the stop flag, as the mDNS one does every 50 ms.
        while !lookup.stopped() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Vec::new())
    };
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0\n  Devices:\n    - {{Name: Kitchen, Model: ShellyPlus1PM, MAC: A8032AB12345}}\n"
    );
    let ctl = Controller::builder()
        .finder(finder)
        .open(Settings::from_yaml_str(&yaml).unwrap())
        .unwrap();
    entered_rx.recv_timeout(LIMIT).expect("a lookup began");
    // Returns (the hang guard is the test's own timeout); the lookup saw the stop flag.
    ctl.close();
    assert!(!ctl.device(name("Kitchen")).unwrap().online);
}

#[test]
fn a_device_found_by_its_mac_gets_our_webhooks_with_the_callback_address_towards_it() {
    let emu = Emulator::start(vec![spec("A8032AB12345")], &ModelLibrary::embedded()).unwrap();
    let net = Network::default();
    net.put("A8:03:2A:B1:23:45", emu.port(0));
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0\n  Channel: http\n  ShellyWebhooks:\n    Enabled: true\n    Port: 0\n    DefaultWebhooks:\n      Outputs: [switch.on, switch.off]\n  Devices:
    - {{Name: Kitchen, Model: ShellyPlus1PM, MAC: A8032AB12345, Outputs: [{{Name: Kitchen Lamp, Webhooks: true}}]}}\n"
    );
    let ctl = open(&yaml, &net);
    assert!(eventually(LIMIT, || ctl
        .device(name("Kitchen"))
        .unwrap()
        .online));
    let port = ctl.webhook_address().unwrap().port();
    let hooks = emu.webhooks(0);
    let urls: Vec<String> = hooks
        .iter()
        .flat_map(|h| h["urls"].as_array().cloned().unwrap_or_default())
        .filter_map(|u| u.as_str().map(str::to_string))
        .collect();
    assert_eq!(urls.len(), 2, "{hooks:?}");
    for u in &urls {
        assert!(u.starts_with(&format!("http://127.0.0.1:{port}/")), "{u}");
    }
}

#[test]
fn a_device_moved_through_the_emulator_is_followed_with_its_push_channel() {
    let emu = Emulator::start(vec![spec("A8032AB12345")], &ModelLibrary::embedded()).unwrap();
    emu.set_output(0, 0, false);
    let first = emu.port(0);
    let net = Network::default();
    net.put("A8:03:2A:B1:23:45", first);
    let yaml = format!(
        "{ROOT}  RefreshInterval: 0.2\n  Channel: auto\n  Devices:
    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {first}, MAC: A8032AB12345, Outputs: [{{Name: Kitchen Lamp}}]}}\n"
    );
    let ctl = open(&yaml, &net);
    assert!(ctl.device(name("Kitchen")).unwrap().online);
    assert!(eventually(LIMIT, || emu.ws_subscribed(0) == 1));

    // The device leaves its address the way a DHCP lease change does (its old port refuses, the push
    // connection drops) and is now found elsewhere.
    let moved = emu.move_device(0, None, 0).unwrap();
    assert_ne!(moved.port(), first);
    net.put("A8:03:2A:B1:23:45", moved.port());
    assert!(
        eventually(LIMIT, || {
            let d = ctl.device(name("Kitchen")).unwrap();
            d.online && d.port == moved.port()
        }),
        "{:?}",
        ctl.device(name("Kitchen")).unwrap()
    );
    // The switch reaches the device at its new address, and the push channel subscribes there again (the
    // move ended its connection).
    switch_then_see_a_change_on_the_device(&emu, &ctl);
}
