//! Gen1 push over CoIoT against emulated Gen1 devices: a change reaches the snapshot without a poll (a refresh
//! interval of an hour cannot explain it) and is one event, also with the webhook for the same change;
//! forged, malformed and oversized datagrams change nothing; a flooding source is held to its budget while
//! another device's change still arrives; `CoIoT: false` binds nothing. Multicast runs in network namespaces.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::emu::{self, Emulated};
use common::eventually;
use smartdev::emulator::{DeviceSpec, MeterReading};
use smartdev::{Controller, EventChannel, Identity, WebhookEvent};

const LIMIT: Duration = Duration::from_secs(10);
const BLOCK: &str = "Name: Hall, Model: Shelly1PM, Inputs: [{Name: Hall In, Webhooks: true}], Outputs: [{Name: Hall Light, Webhooks: true}], Meters: [{Name: Hall Meter}]";
/// A free port, the peer set on the device, and polls an hour apart.
const COIOT: &str = "  CoIoTPort: 0\n  CoIoTPeer: true\n  RefreshInterval: 3600\n";
const COIOT_AND_HOOKS: &str = "  CoIoTPort: 0
  CoIoTPeer: true
  RefreshInterval: 3600
  ShellyWebhooks:
    Enabled: true
    Port: 0
    DefaultWebhooks:
      Inputs: [input.toggle_on, input.toggle_off]
      Outputs: [switch.on, switch.off]
";

fn light(ctl: &Controller) -> Option<bool> {
    ctl.output(Identity::name("Hall Light")).unwrap().state
}

fn hall_in(ctl: &Controller) -> Option<bool> {
    ctl.input(Identity::name("Hall In")).unwrap().state
}

/// Opens against one emulated Shelly 1PM and waits until the device described itself and took our peer;
/// then forgets the requests so far.
fn start(extra: &str) -> Emulated {
    let e = emu::start(vec![DeviceSpec::new("Shelly1PM")], &[BLOCK], extra);
    assert!(e.ctl.coiot_address().is_some(), "the listener runs");
    assert!(
        eventually(LIMIT, || e.emu.counts(0).get("GET /cit/d") == Some(&1)
            && e.emu
                .counts(0)
                .keys()
                .any(|k| k.starts_with("GET /settings"))),
        "{:?}",
        e.emu.counts(0)
    );
    // The first status (sent when the peer was set) has arrived once the temperature is the emulator's.
    e.emu.set_temperature(0, 47.5);
    assert!(eventually(LIMIT, || e
        .ctl
        .device(Identity::name("Hall"))
        .unwrap()
        .temperature
        == Some(47.5)));
    e.emu.reset_counts(0);
    e
}

fn events_until(ctl: &Controller, done: impl Fn(&[WebhookEvent]) -> bool) -> Vec<WebhookEvent> {
    let mut got = Vec::new();
    let came = eventually(LIMIT, || {
        got.extend(std::iter::from_fn(|| ctl.pull_webhook_event()));
        done(&got)
    });
    assert!(came, "got {got:#?}");
    got
}

fn names(events: &[WebhookEvent]) -> Vec<(&str, &str)> {
    events
        .iter()
        .map(|e| (e.event.as_str(), e.component.as_str()))
        .collect()
}

#[test]
fn a_change_reaches_the_snapshot_without_a_poll_and_is_one_event() {
    let e = start(COIOT);
    assert_eq!(light(&e.ctl), Some(false));
    e.emu.set_output(0, 0, true);
    assert!(eventually(LIMIT, || light(&e.ctl) == Some(true)));
    e.emu.set_meter(
        0,
        0,
        MeterReading {
            power: 120.5,
            voltage: 230.0,
            current: 0.5,
            pf: 1.0,
            energy_wh: 2500.0,
            returned_wh: 0.0,
        },
    );
    let meter = || e.ctl.meter(Identity::name("Hall Meter")).unwrap();
    assert!(eventually(LIMIT, || meter().power == Some(120.5)));
    // Energy travels in watt-minutes and is reported in Wh.
    common::emu::near(meter().energy, 2500.0, 0.1);
    for on in [true, false, true] {
        e.emu.set_input(0, 0, on);
    }
    let got = events_until(&e.ctl, |g| g.len() >= 4);
    assert_eq!(
        names(&got),
        [
            ("switch.on", "Hall Light"),
            ("input.toggle_on", "Hall In"),
            ("input.toggle_off", "Hall In"),
            ("input.toggle_on", "Hall In"),
        ]
    );
    for ev in &got {
        assert_eq!(ev.channel, EventChannel::Coiot, "{ev:?}");
        assert_eq!(ev.source, "127.0.0.1");
        assert_eq!(ev.device, "Hall");
    }
    // The worker applies the states it was handed just before the events were queued.
    assert!(eventually(LIMIT, || hall_in(&e.ctl) == Some(true)));
    // Nothing was asked of the device meanwhile: CoIoT alone brought it.
    assert_eq!(e.emu.total_requests(0), 0, "{:?}", e.emu.counts(0));
    e.ctl.close();
}

/// The same flip as a webhook (the action URL) and as a CoIoT status: one event, whichever comes first.
#[test]
fn with_webhooks_too_each_change_is_one_event() {
    let e = start(COIOT_AND_HOOKS);
    assert!(
        eventually(LIMIT, || e.emu.webhooks(0).len() >= 4),
        "{:?}",
        e.emu.webhooks(0)
    );
    let flips = [true, false, true, false];
    for on in flips {
        e.emu.set_input(0, 0, on);
        let event = if on {
            "input.toggle_on"
        } else {
            "input.toggle_off"
        };
        assert_eq!(e.emu.fire_event(0, event, 0), 1, "the webhook");
    }
    e.emu.set_output(0, 0, true);
    assert_eq!(e.emu.fire_event(0, "switch.on", 0), 1);
    let got = events_until(&e.ctl, |g| g.iter().any(|x| x.event == "switch.on"));
    // Late twins must not slip in after the first arrival either.
    assert!(eventually(LIMIT, || e.ctl.webhook_queue_stats().duplicates == 5));
    let mut all = got;
    all.extend(std::iter::from_fn(|| e.ctl.pull_webhook_event()));
    assert_eq!(
        names(&all),
        [
            ("input.toggle_on", "Hall In"),
            ("input.toggle_off", "Hall In"),
            ("input.toggle_on", "Hall In"),
            ("input.toggle_off", "Hall In"),
            ("switch.on", "Hall Light"),
        ]
    );
    e.ctl.close();
}

/// A status datagram as the firmware sends it (the layout `coiot/message.rs` parses).
fn status(tag: &str, g: &str) -> Vec<u8> {
    let mut d = vec![0x50, 30, 0x12, 0x34];
    // Uri-Path "cit", Uri-Path "s".
    d.extend([0xB3, b'c', b'i', b't', 0x01, b's']);
    // Option 3332 (delta 3321 = 14: 269 + 3052), length as extended 13 when needed.
    let delta = 3332 - 11 - 269;
    let len = tag.len();
    let (ln, lx) = if len < 13 {
        (len as u8, vec![])
    } else {
        (13, vec![(len - 13) as u8])
    };
    d.push(0xE0 | ln);
    d.extend((delta as u16).to_be_bytes());
    d.extend(lx);
    d.extend(tag.as_bytes());
    d.push(0xFF);
    d.extend(format!("{{\"G\":{g}}}").as_bytes());
    d
}

fn sender(ip: &str) -> UdpSocket {
    UdpSocket::bind((ip, 0)).expect("a loopback address to send from")
}

#[test]
fn forged_malformed_and_oversized_datagrams_change_nothing() {
    let e = start(COIOT);
    let to: SocketAddr = ([127, 0, 0, 1], e.ctl.coiot_address().unwrap().port()).into();
    let mac = e.emu.mac(0).replace(':', "");
    let tag = format!("SHSW-PM#{mac}#2");
    let on = "[[0,1101,1],[0,4101,999.5]]";
    // The right device id from another address; an unknown id from the device's address; its id, malformed.
    sender("127.0.0.2").send_to(&status(&tag, on), to).unwrap();
    let local = sender("127.0.0.1");
    local
        .send_to(&status("SHSW-PM#A1B2C3D4E5F6#2", on), to)
        .unwrap();
    let mut bad = status(&tag, on);
    bad[0] = 0x90;
    local.send_to(&bad, to).unwrap();
    let mut cut = status(&tag, on);
    cut.truncate(20);
    local.send_to(&cut, to).unwrap();
    local
        .send_to(&status(&tag, "[[0,1101,1],[0,4101"), to)
        .unwrap();
    let mut big = status(&tag, on);
    big.splice(big.len() - 1..big.len() - 1, vec![b' '; 3000]);
    local.send_to(&big, to).unwrap();
    // Loopback datagrams are queued in the order sent: once the device's own next change is seen, every
    // datagram above was handled.
    e.emu.set_input(0, 0, true);
    assert!(eventually(LIMIT, || hall_in(&e.ctl) == Some(true)));
    assert_eq!(light(&e.ctl), Some(false));
    assert_ne!(
        e.ctl.meter(Identity::name("Hall Meter")).unwrap().power,
        Some(999.5)
    );
    // Its event is queued after its state is posted; whatever the forgeries caused would be queued before it.
    let got = events_until(&e.ctl, |g| !g.is_empty());
    assert_eq!(names(&got), [("input.toggle_on", "Hall In")]);
    // The genuine layout is accepted from the right place: the forgery differed only in where it came from.
    local.send_to(&status(&tag, on), to).unwrap();
    assert!(eventually(LIMIT, || light(&e.ctl) == Some(true)));
    e.ctl.close();
}

/// One device floods from its own address (127.0.0.2, configured with its MAC; nothing answers HTTP there):
/// at most its budget (a burst of 20, then 10 a second) is handled, while the emulated device's change at
/// 127.0.0.1 still arrives.
#[test]
fn a_flooding_source_is_held_to_its_budget_and_others_still_arrive() {
    let emu = smartdev::emulator::Emulator::start(
        vec![DeviceSpec::new("Shelly1PM")],
        &smartdev::ModelLibrary::embedded(),
    )
    .unwrap();
    let yaml = format!(
        "SmartDevices:\n{}  CoIoTPort: 0\n  CoIoTPeer: true\n  RefreshInterval: 3600\n  Devices:\n    - {{{BLOCK}, Hostname: 127.0.0.1, Port: {}}}\n    - {{Name: Shed, Model: Shelly1, MAC: 'AA:BB:CC:00:00:01', Hostname: 127.0.0.2, Port: 9, Inputs: [{{Name: Shed In, Webhooks: true}}]}}\n",
        common::emu::FAST,
        emu.port(0)
    );
    let ctl = Controller::open(smartdev::Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let to: SocketAddr = ([127, 0, 0, 1], ctl.coiot_address().unwrap().port()).into();
    assert!(eventually(LIMIT, || emu.counts(0).get("GET /cit/d") == Some(&1)));
    let flooder = sender("127.0.0.2");
    let started = Instant::now();
    for n in 0..3000 {
        let g = format!("[[0,2101,{}]]", (n + 1) % 2);
        let _ = flooder.send_to(&status("SHSW-1#AABBCC000001#2", &g), to);
    }
    emu.set_output(0, 0, true);
    // The kernel may drop datagrams while the flood fills the socket's buffer, the change among them: the
    // device says it again within 15 s, as firmware does, so this waits longer than one period.
    assert!(eventually(Duration::from_secs(30), || light(&ctl) == Some(true)));
    // The change's event is queued after its state is posted; whatever of the flood was handled came before.
    let got = events_until(&ctl, |g| g.iter().any(|ev| ev.device == "Hall"));
    let shed = got.iter().filter(|ev| ev.device == "Shed").count() as u32;
    let hall = got.len() as u32 - shed;
    let allowed = 20.0 + 10.0 * started.elapsed().as_secs_f64() + 1.0;
    assert!(shed >= 1, "some of the flood is handled");
    assert!(
        f64::from(shed) <= allowed,
        "{shed} events from the flood, at most {allowed} allowed"
    );
    assert_eq!(hall, 1, "the other device's change");
    ctl.close();
}

#[test]
fn coiot_false_binds_nothing_and_the_device_is_still_polled() {
    let e = emu::start(
        vec![DeviceSpec::new("Shelly1PM")],
        &[BLOCK],
        "  CoIoT: false\n  CoIoTPeer: true\n",
    );
    assert!(e.ctl.coiot_address().is_none());
    e.emu.set_output(0, 0, true);
    e.ctl.refresh_all().unwrap();
    assert_eq!(light(&e.ctl), Some(true));
    let counts = e.emu.counts(0);
    assert!(!counts.contains_key("GET /cit/d"), "{counts:?}");
    e.ctl.close();
}

#[test]
fn on_by_default_with_gen1_devices_only() {
    let gen1 = emu::start(
        vec![DeviceSpec::new("Shelly1PM")],
        &[BLOCK],
        "  CoIoTPort: 0\n",
    );
    assert!(gen1.ctl.coiot_address().is_some());
    gen1.ctl.close();
    let gen2 = emu::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &["Name: Hall, Model: ShellyPlus1PM"],
        "  CoIoTPort: 0\n",
    );
    assert!(gen2.ctl.coiot_address().is_none());
    gen2.ctl.close();
}

/// Another program holds the port: one warning, and the devices are polled as before.
#[test]
fn a_taken_port_leaves_polling_working() {
    let holder = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
    let port = holder.local_addr().unwrap().port();
    let e = emu::start(
        vec![DeviceSpec::new("Shelly1PM")],
        &[BLOCK],
        &format!("  CoIoTPort: {port}\n"),
    );
    assert!(e.ctl.coiot_address().is_none());
    assert!(e.ctl.device(Identity::name("Hall")).unwrap().online);
    e.emu.set_output(0, 0, true);
    e.ctl.refresh_all().unwrap();
    assert_eq!(light(&e.ctl), Some(true));
    e.ctl.close();
}

/// The controller's side of the multicast test, in its own host: ARG is `DEVICE_IP HTTP_PORT ADMIN_PORT`.
/// Reports the device's peer setting, then whether the admin's switch reached the snapshot, and the device's
/// status reads before and after.
fn multicast_child() {
    use std::io::Write;
    let arg = std::env::var("NETNS_ARG").unwrap();
    let [ip, port, admin]: [&str; 3] = arg.split(' ').collect::<Vec<_>>().try_into().unwrap();
    let out = |s: String| {
        println!("{MARK}{s}");
        std::io::stdout().flush().unwrap();
    };
    let yaml = format!(
        "SmartDevices:\n  PingAllowed: false\n  FollowMoves: false\n  RefreshInterval: 3600\n  Devices:\n    - {{{BLOCK}, Hostname: {ip}, Port: {port}}}\n"
    );
    let ctl = Controller::open(smartdev::Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let at = |p: &str| -> SocketAddr { format!("{ip}:{p}").parse().unwrap() };
    let get = |p: &str, target: &str, method: &str| {
        common::raw_http::send(at(p), method, target, &[], None, LIMIT)
            .unwrap()
            .json()
    };
    out(format!(
        "LISTENING {} PEER {:?}",
        ctl.coiot_address().map_or(0, |a| a.port()),
        get(port, "/settings", "GET")["coiot"]["peer"].as_str()
    ));
    let reads = || get(admin, "/devices/0/counts", "GET")["GET /status"].clone();
    let before = reads();
    get(admin, "/devices/0/output?id=0&state=true", "POST");
    let on = eventually(LIMIT, || light(&ctl) == Some(true));
    out(format!("ON {on} READS {before} {}", reads()));
    ctl.close();
}

/// A Gen1 device in one host multicasts its statuses (no peer set), the controller in another host hears
/// them through the group 224.0.1.187 on UDP 5683 (the default port), and the switch made on the device
/// reaches the snapshot with no read of the device.
#[test]
#[cfg_attr(
    smartdev_no_netns,
    ignore = "needs root and ip(8) for network namespaces"
)]
fn multicast_statuses_reach_a_controller_in_another_host() {
    if common::netns::child_role().is_some() {
        return multicast_child();
    }
    let lan = common::netns::Lan::new(2);
    let emu = lan.emulate(0, &["Shelly1PM,mcast"]);
    let arg = format!("{} {} {}", lan.addr(0), emu.ports[0], emu.admin_port);
    let ctl = lan.spawn_self(
        1,
        "multicast_statuses_reach_a_controller_in_another_host",
        "controller",
        &[("NETNS_ARG", &arg)],
    );
    let first = ctl
        .marked(MARK, LIMIT * 3)
        .expect("the controller's report");
    assert_eq!(first, "LISTENING 5683 PEER Some(\"\")", "no unicast peer");
    let second = ctl.marked(MARK, LIMIT * 3).expect("the switch's report");
    let (on, reads) = second.split_once(" READS ").unwrap();
    assert_eq!(on, "ON true");
    let (before, after) = reads.split_once(' ').unwrap();
    assert_eq!(before, after, "no status read explains it");
}

/// Printed before the lines a child reports.
const MARK: &str = "NETNS-CHILD ";

/// The README's CoIoT example loads with the values its comments give.
#[test]
fn the_readme_example_loads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme
        .find("## Gen1 push over CoIoT")
        .expect("README has the CoIoT section")..];
    let start = section.find("```yaml\n").unwrap() + 8;
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let s = smartdev::Settings::from_yaml_str(yaml).unwrap();
    assert_eq!(
        s.coiot,
        smartdev::config::CoiotSettings {
            enabled: true,
            port: 5683,
            set_peer: true
        }
    );
    let off =
        smartdev::Settings::from_yaml_str("SmartDevices: {CoIoT: false, Devices: []}").unwrap();
    assert!(!off.coiot.enabled);
    let typo = smartdev::Settings::from_yaml_str("SmartDevices: {CoIoTPorts: 1, Devices: []}")
        .unwrap_err()
        .to_string();
    assert!(typo.contains("CoIoTPort"), "{typo}");
}
