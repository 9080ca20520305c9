//! What `open` asks each device family, per configuration: only what the configuration needs (no add-on
//! mapping without add-ons, no webhook lists without webhooks), and nothing again right after it. Counted on
//! the emulator's per-endpoint counters, with `Channel: http` (with the default `auto`, open reads a Gen2+
//! device over its push connection alone: `open_reads_a_gen2_device_over_its_push_connection_alone`).

mod common;

use std::collections::BTreeMap;

use common::emu::settings;
use smartdev::emulator::{AddonSensor, DeviceSpec, Emulator};
use smartdev::{Controller, ModelLibrary, SensorQuantity};

const HOOKS: &str = "  ShellyWebhooks:
    Enabled: true
    Port: 0
    DefaultWebhooks:
      Inputs: [input.toggle_on, input.toggle_off]
      Outputs: [switch.on, switch.off]
";

/// One family member each: Gen2 (one channel, four channels), Gen1, Tasmota.
const MODELS: [&str; 4] = ["ShellyPlus1PM", "ShellyPro4PM", "Shelly1PM", "Tasmota"];

/// `[{Name: <kind><i><model>}, …]` with as many entries as the model has channels.
fn channels(model: &str, kind: &str, webhooks: bool) -> String {
    let n = if model == "ShellyPro4PM" { 4 } else { 1 };
    let w = if webhooks { ", Webhooks: true" } else { "" };
    let v: Vec<String> = (0..n)
        .map(|i| format!("{{Name: {kind}{i}{model}{w}}}"))
        .collect();
    format!("[{}]", v.join(", "))
}

/// Opens `blocks` against emulated `specs` and returns the requests each device got during `open`, counters
/// reset afterwards. Background refreshes are off unless `extra` sets them.
fn open_counting(
    specs: Vec<DeviceSpec>,
    blocks: &[String],
    extra: &str,
) -> (Emulator, Controller, Vec<BTreeMap<String, u64>>) {
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).unwrap();
    let refs: Vec<&str> = blocks.iter().map(String::as_str).collect();
    // HTTP counts: the push channel (tests/push.rs) connects in the background, after open.
    let extra = format!("  Channel: http\n{extra}");
    let ctl = Controller::open(settings(&emu, &refs, &extra), None).unwrap();
    let counts = (0..blocks.len())
        .map(|i| {
            let c = emu.counts(i);
            emu.reset_counts(i);
            c
        })
        .collect();
    (emu, ctl, counts)
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// Gen2 devices ask `Shelly.GetConfig` once to map add-on probes or sensors; Gen1 and Tasmota get them with
/// the status (by position, by Id).
fn one_mapping_on_gen2_only(at_open: &[BTreeMap<String, u64>]) {
    let gen2 = counts(&[
        ("GET /shelly", 1),
        ("rpc Shelly.GetConfig", 1),
        ("rpc Shelly.GetStatus", 1),
    ]);
    assert_eq!(at_open[0], gen2, "ShellyPlus1PM");
    assert_eq!(at_open[1], gen2, "ShellyPro4PM");
    assert_eq!(
        at_open[2],
        counts(&[("GET /shelly", 1), ("GET /status", 1)])
    );
    assert_eq!(at_open[3], counts(&[("cm Status 0", 1)]));
}

fn plain_blocks() -> Vec<String> {
    MODELS
        .iter()
        .map(|m| {
            format!(
                "Name: D{m}, Model: {m}, Outputs: {}",
                channels(m, "O", false)
            )
        })
        .collect()
}

fn specs() -> Vec<DeviceSpec> {
    MODELS.iter().map(|m| DeviceSpec::new(m)).collect()
}

#[test]
fn a_plain_configuration_costs_two_requests_per_shelly_and_one_per_tasmota() {
    let (emu, ctl, at_open) = open_counting(specs(), &plain_blocks(), "");
    let gen2 = counts(&[("GET /shelly", 1), ("rpc Shelly.GetStatus", 1)]);
    assert_eq!(at_open[0], gen2, "ShellyPlus1PM");
    assert_eq!(at_open[1], gen2, "ShellyPro4PM");
    assert_eq!(
        at_open[2],
        counts(&[("GET /shelly", 1), ("GET /status", 1)]),
        "Shelly1PM"
    );
    assert_eq!(at_open[3], counts(&[("cm Status 0", 1)]), "Tasmota");
    // Not asked at open, so not reported yet (empty, documented as "not known yet").
    assert!(
        ctl.device("DShellyPlus1PM")
            .unwrap()
            .supported_webhooks
            .is_empty()
    );
    // The first read after open learns the supported events; later reads are one request again.
    assert!(ctl.refresh_all().unwrap().is_ok());
    for (i, model) in MODELS.iter().enumerate().take(2) {
        assert_eq!(
            emu.counts(i),
            counts(&[
                ("rpc Shelly.GetStatus", 1),
                ("rpc Webhook.ListSupported", 1)
            ]),
            "{}",
            model
        );
    }
    let d = ctl.device("DShellyPlus1PM").unwrap();
    assert!(
        d.supported_webhooks.contains(&"switch.on".to_string()),
        "{:?}",
        d.supported_webhooks
    );
    for i in 0..4 {
        emu.reset_counts(i);
    }
    assert!(ctl.refresh_all().unwrap().is_ok());
    assert_eq!(emu.counts(0), counts(&[("rpc Shelly.GetStatus", 1)]));
    assert_eq!(emu.counts(2), counts(&[("GET /status", 1)]));
    assert_eq!(emu.counts(3), counts(&[("cm Status 0", 1)]));
}

#[test]
fn add_on_probes_cost_one_mapping_on_gen2_and_nothing_elsewhere() {
    let blocks: Vec<String> = MODELS
        .iter()
        .map(|m| {
            format!(
                "Name: D{m}, Model: {m}, Outputs: {}, TempProbes: [{{Name: P{m}}}]",
                channels(m, "O", false)
            )
        })
        .collect();
    let specs = MODELS
        .iter()
        .map(|m| {
            let mut s = DeviceSpec::new(m);
            s.probes = vec![format!("P{m}")];
            s
        })
        .collect();
    let (_emu, ctl, at_open) = open_counting(specs, &blocks, "");
    one_mapping_on_gen2_only(&at_open);
    for m in MODELS {
        let p = &ctl.device(format!("D{m}").as_str()).unwrap().temp_probes[0];
        assert!(p.temperature.is_some(), "{m}: {p:?}");
    }
}

#[test]
fn add_on_sensors_cost_one_mapping_on_gen2_and_nothing_elsewhere() {
    let blocks: Vec<String> = MODELS
        .iter()
        .map(|m| {
            format!(
                "Name: D{m}, Model: {m}, Outputs: {}, Sensors: [{{Name: H{m}, Quantity: humidity}}]",
                channels(m, "O", false)
            )
        })
        .collect();
    let specs = MODELS
        .iter()
        .map(|m| {
            let mut s = DeviceSpec::new(m);
            s.sensors = vec![AddonSensor::new(&format!("H{m}"), SensorQuantity::Humidity)];
            s
        })
        .collect();
    let (_emu, _ctl, at_open) = open_counting(specs, &blocks, "");
    one_mapping_on_gen2_only(&at_open);
}

#[test]
fn webhooks_add_the_lists_and_one_request_per_hook() {
    let blocks: Vec<String> = MODELS
        .iter()
        .map(|m| {
            let inputs = if *m == "Tasmota" {
                "[]".to_string()
            } else {
                channels(m, "I", true)
            };
            format!(
                "Name: D{m}, Model: {m}, Inputs: {inputs}, Outputs: {}",
                channels(m, "O", true)
            )
        })
        .collect();
    let (_emu, ctl, at_open) = open_counting(specs(), &blocks, HOOKS);
    // Four hooks per channel pair (two input events, two output events).
    for (i, creates) in [(0, 4), (1, 16)] {
        assert_eq!(
            at_open[i],
            counts(&[
                ("GET /shelly", 1),
                ("rpc Shelly.GetStatus", 1),
                ("rpc Webhook.Create", creates),
                ("rpc Webhook.List", 1),
                ("rpc Webhook.ListSupported", 1),
            ]),
            "{}",
            MODELS[i]
        );
    }
    // Gen1: the action list, then one setting per action URL.
    assert_eq!(
        at_open[2],
        counts(&[
            ("GET /settings/actions", 5),
            ("GET /shelly", 1),
            ("GET /status", 1)
        ])
    );
    assert_eq!(
        at_open[3],
        counts(&[("cm Status 0", 1)]),
        "Tasmota takes no part"
    );
    let d = ctl.device("DShellyPlus1PM").unwrap();
    assert!(d.supported_webhooks.contains(&"switch.on".to_string()));
}

#[test]
fn webhooks_on_but_none_wanted_only_list_the_hooks_to_remove_stale_ones() {
    let (_emu, _ctl, at_open) = open_counting(specs(), &plain_blocks(), HOOKS);
    let gen2 = counts(&[
        ("GET /shelly", 1),
        ("rpc Shelly.GetStatus", 1),
        ("rpc Webhook.List", 1),
    ]);
    assert_eq!(at_open[0], gen2, "ShellyPlus1PM");
    assert_eq!(at_open[1], gen2, "ShellyPro4PM");
    assert_eq!(
        at_open[2],
        counts(&[
            ("GET /settings/actions", 1),
            ("GET /shelly", 1),
            ("GET /status", 1)
        ])
    );
    assert_eq!(at_open[3], counts(&[("cm Status 0", 1)]));
}

#[test]
fn a_gen1_model_with_profiles_also_reads_its_mode() {
    let (_emu, _ctl, at_open) = open_counting(
        vec![DeviceSpec::new("Shelly2.5")],
        &["Name: S, Model: Shelly2.5".to_string()],
        "",
    );
    assert_eq!(
        at_open[0],
        counts(&[("GET /settings", 1), ("GET /shelly", 1), ("GET /status", 1)])
    );
}

#[test]
fn nothing_is_read_again_right_after_open() {
    // Background refreshes on, every hour: the supervisor's first tick is an hour after open, so a refresh
    // now is the only thing in each worker's inbox (commands are served in order) and the counts show
    // exactly one read.
    let (emu, ctl, _) = open_counting(specs(), &plain_blocks(), "  RefreshInterval: 3600\n");
    assert!(ctl.refresh_all().unwrap().is_ok());
    assert_eq!(
        emu.counts(0),
        counts(&[
            ("rpc Shelly.GetStatus", 1),
            ("rpc Webhook.ListSupported", 1)
        ])
    );
    assert_eq!(emu.counts(2), counts(&[("GET /status", 1)]));
    assert_eq!(emu.counts(3), counts(&[("cm Status 0", 1)]));
}

/// With the default `Channel: auto`, open reads a Gen2+ device over the one connection its push channel makes:
/// the upgrade, then `Shelly.GetDeviceInfo` (what `/shelly` says) and the subscribing `Shelly.GetStatus` in one
/// write. No HTTP request, one connection, subscribed when open returns.
#[test]
fn open_reads_a_gen2_device_over_its_push_connection_alone() {
    let emu = Emulator::start(specs(), &ModelLibrary::embedded()).unwrap();
    let blocks = plain_blocks();
    let refs: Vec<&str> = blocks.iter().map(String::as_str).collect();
    let ctl = Controller::open(settings(&emu, &refs, ""), None).unwrap();
    // The upgrade (`ws /rpc`), then both calls over the socket.
    let over_ws = counts(&[
        ("ws /rpc", 1),
        ("rpc Shelly.GetDeviceInfo", 1),
        ("rpc Shelly.GetStatus", 1),
    ]);
    for (i, model) in MODELS.iter().enumerate().take(2) {
        assert_eq!(emu.counts(i), over_ws, "{model}");
        assert_eq!(emu.ws_requests(i), 2, "{model}: both over the socket");
        assert_eq!(emu.ws_connections(i), 1, "{model}");
        assert_eq!(emu.ws_subscribed(i), 1, "{model}: subscribed at open");
        let d = ctl.device(format!("D{model}").as_str()).unwrap();
        assert!(d.online, "{model}");
        assert!(d.firmware.is_some() && d.mac_address.is_some(), "{model}");
        assert!(d.outputs.iter().all(|o| o.state.is_some()), "{model}");
    }
    // Gen1 and Tasmota have no push channel: HTTP as before.
    assert_eq!(
        emu.counts(2),
        counts(&[("GET /shelly", 1), ("GET /status", 1)])
    );
    assert_eq!(emu.counts(3), counts(&[("cm Status 0", 1)]));
    ctl.close();
}

/// A device that takes the connection but holds its WebSocket upgrade is read over HTTP after a short grace,
/// not after its `ResponseTimeout`: when open returns, the device is read and its upgrade is still pending.
#[test]
fn a_held_upgrade_does_not_hold_open_the_device_is_read_over_http() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    emu.hold_ws_upgrades(0, true);
    let ctl = Controller::open(
        settings(
            &emu,
            &["Name: Held, Model: ShellyPlus1PM, Outputs: [{Name: O}]"],
            "  ResponseTimeout: 120\n",
        ),
        None,
    )
    .unwrap();
    let d = ctl.device("Held").unwrap();
    assert!(d.online && d.outputs[0].state.is_some(), "{d:?}");
    // The held upgrade, and the reads over HTTP.
    assert_eq!(
        emu.counts(0),
        counts(&[
            ("ws /rpc", 1),
            ("GET /shelly", 1),
            ("rpc Shelly.GetStatus", 1)
        ])
    );
    assert_eq!(
        emu.ws_held_upgrades(0),
        (1, 0),
        "the upgrade is held, not given up"
    );
    emu.hold_ws_upgrades(0, false);
    ctl.close();
}
