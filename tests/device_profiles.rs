//! Real-device profiles end to end, drivers against the emulator: a 2PM in cover profile read and moved as a
//! cover (and reported, not misread, when configured as switches), Gen1 rollers, Tasmota shutters, the Pro 3EM
//! monophase profile, fuller energy readings, add-on and built-in sensors, input-only devices and dimmers.

mod common;

use std::time::Duration;

use smartdev::emulator::{AddonSensor, DeviceSpec, EmuClock, Emulator, InputType};
use smartdev::models::SensorQuantity;
use smartdev::{Controller, CoverAction, CoverState, Error, ModelLibrary};

fn spec(model: &str, profile: Option<&str>) -> DeviceSpec {
    let mut s = DeviceSpec::new(model);
    s.profile = profile.map(str::to_string);
    s
}

fn manual(specs: Vec<DeviceSpec>) -> (Emulator, EmuClock) {
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(specs, &ModelLibrary::embedded(), clock.clone()).unwrap();
    (emu, clock)
}

fn open(emu: &Emulator, blocks: &[&str]) -> Controller {
    common::emu::open(emu, blocks, "").unwrap()
}

#[test]
fn a_2pm_gen4_in_cover_profile_configured_as_switches_is_reported_not_misread() {
    let (emu, _clock) = manual(vec![spec("Shelly2PMG4", Some("cover"))]);
    // Outputs listed: the configuration names a shape (a bare one would follow the device, below).
    let ctl = open(
        &emu,
        &["Name: Blinds, Model: Shelly2PMG4, Outputs: [{Name: Left}, {Name: Right}]"],
    );
    let d = ctl.device("Blinds").unwrap();
    assert!(d.online);
    assert_eq!(d.profile.as_deref(), Some("cover"));
    let m = d.config_mismatch.clone().expect("the mismatch is reported");
    assert!(
        m.contains("in profile cover (2 inputs, 1 cover, 1 meter)")
            && m.contains("expects profile switch (2 inputs, 2 outputs, 2 meters)")
            && m.contains("set Profile: cover"),
        "{m}"
    );
    assert!(
        d.outputs.iter().all(|o| o.state.is_none()),
        "no invented false: {:?}",
        d.outputs
    );
    assert!(d.meters.iter().all(|m| m.power.is_none()));
    match ctl.change_output("Left", true) {
        Err(Error::Unsupported { message, .. }) => {
            assert!(message.contains("set Profile: cover"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let text = ctl.print_device_status(None).unwrap();
    assert!(text.contains("Mismatch"), "{text}");
}

#[test]
fn a_2pm_gen4_configured_as_a_cover_reads_and_moves_as_one() {
    let (emu, clock) = manual(vec![spec("Shelly2PMG4", Some("cover"))]);
    let ctl = open(
        &emu,
        &["Name: Blinds, Model: Shelly2PMG4, Profile: cover, Covers: [{Name: Terrace}]"],
    );
    let d = ctl.device("Blinds").unwrap();
    assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
    let c = ctl.cover("Terrace").unwrap();
    assert_eq!(
        (c.state, c.position, c.calibrated),
        (Some(CoverState::Closed), Some(0.0), Some(true))
    );
    let c = ctl.move_cover("Terrace", CoverAction::Open).unwrap();
    assert_eq!(c.state, Some(CoverState::Opening));
    clock.advance(Duration::from_secs(10));
    ctl.read_device("Blinds").unwrap();
    let c = ctl.cover("Terrace").unwrap();
    assert_eq!(c.state, Some(CoverState::Opening));
    assert!(c.position.is_some_and(|p| p > 0.0 && p < 100.0), "{c:?}");
    let m = &ctl.device("Blinds").unwrap().meters[0];
    assert!(
        m.power.is_some_and(|p| p > 0.0),
        "the motor draws power: {m:?}"
    );
    assert_eq!(m.cover_id, Some(c.id));
    clock.advance(Duration::from_secs(30));
    ctl.read_device("Blinds").unwrap();
    let c = ctl.cover("Terrace").unwrap();
    assert_eq!((c.state, c.position), (Some(CoverState::Open), Some(100.0)));
    let c = ctl
        .move_cover("Terrace", CoverAction::Position(30))
        .unwrap();
    assert_eq!(c.state, Some(CoverState::Closing));
    ctl.move_cover("Terrace", CoverAction::Stop).unwrap();
    // Uncalibrated: a position is refused before anything is sent, open still works.
    emu.set_cover_calibrated(0, 0, false);
    ctl.read_device("Blinds").unwrap();
    let c = ctl.cover("Terrace").unwrap();
    assert_eq!((c.calibrated, c.position), (Some(false), None));
    match ctl.move_cover("Terrace", CoverAction::Position(50)) {
        Err(Error::Unsupported { message, .. }) => {
            assert!(message.contains("not calibrated"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    ctl.move_cover("Terrace", CoverAction::Close).unwrap();
    // The user switches the device back to switches in the app: reported, outputs readable again.
    emu.set_profile(0, "switch").unwrap();
    ctl.close();
    let ctl = open(
        &emu,
        &["Name: Blinds, Model: Shelly2PMG4, Profile: cover, Covers: [{Name: Terrace}]"],
    );
    let d = ctl.device("Blinds").unwrap();
    assert!(d.config_mismatch.is_some());
    assert_eq!(
        d.covers[0].state, None,
        "a cover the device does not have is unknown"
    );
}

#[test]
fn a_shelly_25_in_roller_mode_moves_its_roller() {
    let (emu, clock) = manual(vec![spec("Shelly2.5", Some("roller"))]);
    let ctl = open(
        &emu,
        &["Name: Garage, Model: Shelly2.5, Profile: roller, Covers: [{Name: Door}]"],
    );
    let d = ctl.device("Garage").unwrap();
    assert_eq!(d.profile.as_deref(), Some("roller"));
    assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
    ctl.move_cover("Door", CoverAction::Open).unwrap();
    clock.advance(Duration::from_secs(60));
    ctl.read_device("Garage").unwrap();
    let c = ctl.cover("Door").unwrap();
    assert_eq!((c.state, c.position), (Some(CoverState::Open), Some(100.0)));
    ctl.move_cover("Door", CoverAction::Position(25)).unwrap();
    clock.advance(Duration::from_secs(60));
    ctl.read_device("Garage").unwrap();
    assert_eq!(ctl.cover("Door").unwrap().position, Some(25.0));
    assert_eq!(emu.cover(0, 0).position, 25.0);
}

#[test]
fn a_tasmota_shutter_moves_and_a_missing_one_says_how_to_enable_it() {
    let mut s = DeviceSpec::new("Tasmota");
    s.shutters = 1;
    let (emu, clock) = manual(vec![s, DeviceSpec::new("Tasmota")]);
    let ctl = open(
        &emu,
        &[
            "Name: Shade, Model: Tasmota, Outputs: [{Name: Up}, {Name: Down}], Covers: [{Name: Awning}]",
            "Name: Plain, Model: Tasmota, Outputs: [{Name: Lamp}], Covers: [{Name: Phantom}]",
        ],
    );
    ctl.move_cover("Awning", CoverAction::Position(60)).unwrap();
    clock.advance(Duration::from_secs(60));
    ctl.read_device("Shade").unwrap();
    let c = ctl.cover("Awning").unwrap();
    assert_eq!(
        (c.state, c.position),
        (Some(CoverState::Stopped), Some(60.0))
    );
    let plain = ctl.device("Plain").unwrap();
    assert!(
        plain
            .config_mismatch
            .as_deref()
            .is_some_and(|m| m.contains("SetOption80")),
        "{:?}",
        plain.config_mismatch
    );
    assert_eq!(plain.covers[0].state, None);
}

#[test]
fn a_pro_3em_in_monophase_reads_three_channels_with_frequency_and_returned_energy() {
    let (emu, _clock) = manual(vec![spec("ShellyPro3EM", Some("monophase"))]);
    emu.set_load(0, 1, -250.0);
    emu.set_frequency(0, 1, 49.9);
    let ctl = open(
        &emu,
        &["Name: Mains, Model: ShellyPro3EM, Profile: monophase"],
    );
    let d = ctl.device("Mains").unwrap();
    assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
    assert_eq!(d.meters.len(), 3);
    assert_eq!(d.meters[1].power, Some(-250.0));
    assert_eq!(d.meters[1].frequency, Some(49.9));
    assert!(d.meters[1].apparent_power.is_some(), "{:?}", d.meters[1]);
    assert!(d.meters[0].returned_energy.is_some());
    // Without a Profile in the configuration the device's own profile decides how its meters are read (both
    // profiles have three meters, so nothing configured disagrees with it).
    let ctl2 = open(&emu, &["Name: Mains, Model: ShellyPro3EM"]);
    let d = ctl2.device("Mains").unwrap();
    assert_eq!(d.profile.as_deref(), Some("monophase"));
    assert!(d.config_mismatch.is_none());
    assert_eq!(
        d.meters[1].power,
        Some(-250.0),
        "read from em1:1, not a missing em:0"
    );
}

#[test]
fn switch_meters_report_frequency_only_where_the_device_does() {
    let (emu, _clock) = manual(vec![
        DeviceSpec::new("Shelly1PMG3"),
        DeviceSpec::new("ShellyPlus1PM"),
    ]);
    let ctl = open(
        &emu,
        &[
            "Name: G3, Model: Shelly1PMG3",
            "Name: Plus, Model: ShellyPlus1PM",
        ],
    );
    assert!(ctl.device("G3").unwrap().meters[0].frequency.is_some());
    assert_eq!(
        ctl.device("Plus").unwrap().meters[0].frequency,
        None,
        "not reported: null, not 0"
    );
}

#[test]
fn add_on_humidity_and_voltage_and_an_h_and_t_sensors_are_read() {
    let mut plus = DeviceSpec::new("ShellyPlus1");
    plus.sensors = vec![
        AddonSensor {
            name: "Cellar".into(),
            quantity: SensorQuantity::Humidity,
        },
        AddonSensor {
            name: "Tank".into(),
            quantity: SensorQuantity::Voltage,
        },
    ];
    let (emu, _clock) = manual(vec![plus, DeviceSpec::new("ShellyHTG3")]);
    emu.set_sensor(0, SensorQuantity::Humidity, 0, Some(61.5));
    emu.set_sensor(0, SensorQuantity::Voltage, 0, Some(7.25));
    emu.set_sensor(1, SensorQuantity::Humidity, 0, Some(48.0));
    emu.set_sensor(1, SensorQuantity::Temperature, 0, Some(21.5));
    let ctl = open(
        &emu,
        &[
            "Name: Pump, Model: ShellyPlus1, Sensors: [{Name: Cellar, Quantity: humidity}, {Name: Tank, Quantity: voltage}, {Name: Ghost, Quantity: humidity}]",
            "Name: Bath, Model: ShellyHTG3",
        ],
    );
    assert_eq!(ctl.sensor("Cellar").unwrap().value, Some(61.5));
    assert_eq!(ctl.sensor("Tank").unwrap().value, Some(7.25));
    assert_eq!(
        ctl.sensor("Ghost").unwrap().value,
        None,
        "no such peripheral: unknown"
    );
    let bath = ctl.device("Bath").unwrap();
    let values: Vec<Option<f64>> = bath.sensors.iter().map(|s| s.value).collect();
    assert_eq!(values, [Some(21.5), Some(48.0)]);
}

#[test]
fn an_i4_has_inputs_only_and_a_button_has_no_state() {
    let (emu, _clock) = manual(vec![DeviceSpec::new("ShellyI4G3")]);
    emu.set_input_type(0, 1, InputType::Button);
    emu.set_input(0, 0, true);
    let ctl = open(&emu, &["Name: Panel, Model: ShellyI4G3"]);
    let d = ctl.device("Panel").unwrap();
    assert_eq!((d.inputs.len(), d.outputs.len()), (4, 0));
    assert_eq!(d.inputs[0].state, Some(true));
    assert_eq!(d.inputs[1].state, None, "a button has no state");
    // Without webhooks the supported events are learnt at the first read after open.
    let d = ctl.read_device("Panel").unwrap();
    assert!(
        d.supported_webhooks
            .contains(&"input.button_push".to_string())
    );
}

#[test]
fn a_dimmer_switches_as_an_output_and_reports_its_brightness() {
    let (emu, _clock) = manual(vec![
        DeviceSpec::new("ShellyProDimmer1PM"),
        DeviceSpec::new("ShellyDimmer2"),
    ]);
    emu.set_light(0, 0, false, 40);
    emu.set_light(1, 0, true, 70);
    let ctl = open(
        &emu,
        &[
            "Name: Hall Dimmer, Model: ShellyProDimmer1PM",
            "Name: Old Dimmer, Model: ShellyDimmer2",
        ],
    );
    let d = ctl.device("Hall Dimmer").unwrap();
    assert_eq!(
        (d.outputs[0].state, d.outputs[0].brightness),
        (Some(false), Some(40.0))
    );
    let c = ctl.change_output(d.outputs[0].id, true).unwrap();
    assert!(c.state && c.did_change);
    assert_eq!(emu.light(0, 0), (true, 40));
    let old = ctl.device("Old Dimmer").unwrap();
    assert_eq!(
        (old.outputs[0].state, old.outputs[0].brightness),
        (Some(true), Some(70.0))
    );
    let c = ctl.toggle_output(old.outputs[0].id).unwrap();
    assert!(!c.state && c.did_change);
    assert!(!emu.light(1, 0).0);
}

#[test]
fn cover_events_are_installed_where_the_device_lists_them_and_arrive_named() {
    let (emu, _clock) = manual(vec![spec("Shelly2PMG3", Some("cover"))]);
    let wake = smartdev::WakeFlag::new();
    let s = common::emu::settings(
        &emu,
        &[
            "Name: Blinds, Model: Shelly2PMG3, Profile: cover, Covers: [{Name: Terrace, Webhooks: true}]",
        ],
        "  ShellyWebhooks:\n    Enabled: true\n    Host: 127.0.0.1\n    Port: 0\n",
    );
    let ctl = Controller::open(s, Some(wake.clone())).unwrap();
    let mut names: Vec<String> = emu
        .webhooks(0)
        .iter()
        .map(|h| h["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "smartdev:cover:1:cover.closed",
            "smartdev:cover:1:cover.open",
            "smartdev:cover:1:cover.stopped"
        ]
    );
    assert_eq!(emu.fire_event(0, "cover.open", 0), 1);
    assert!(wake.wait(Duration::from_secs(5)));
    let e = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        (e.event.as_str(), e.component.as_str(), e.device.as_str()),
        ("cover.open", "Terrace", "Blinds")
    );
    assert_eq!(e.object_type.as_deref(), Some("cover"));
}

/// A bare configuration (Name, Model, address) of a device set to its cover (roller) profile: the profile it
/// reports at open decides its components, so the cover and its meters are there and move, with nothing
/// reported as wrong; a configured shape that does not match is still reported.
fn a_bare_device_follows_its_cover_profile(model: &str, profile: &str, meters: usize) {
    let (emu, clock) = manual(vec![spec(model, Some(profile))]);
    let ctl = open(&emu, &[&format!("Name: Blinds, Model: {model}")]);
    let d = ctl.device("Blinds").unwrap();
    assert!(d.online, "{:?}", d.last_error);
    assert_eq!(d.profile.as_deref(), Some(profile));
    assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
    assert_eq!(
        (d.outputs.len(), d.covers.len(), d.meters.len()),
        (0, 1, meters)
    );
    // The default shape's first meter keeps its ID; the cover gets the one reserved for it.
    assert_eq!((d.covers[0].id, d.covers[0].name.as_str()), (1, "Cover 1"));
    assert_eq!((d.meters[0].id, d.meters[0].name.as_str()), (1, "Meter 1"));
    assert_eq!(
        d.covers[0].state,
        Some(CoverState::Closed),
        "read at open: {:?}",
        d.covers[0]
    );
    let c = ctl
        .move_cover("Cover 1", CoverAction::Position(30))
        .unwrap();
    assert_eq!(c.state, Some(CoverState::Opening));
    clock.advance(Duration::from_secs(60));
    ctl.read_device("Blinds").unwrap();
    assert_eq!(ctl.cover(1).unwrap().position, Some(30.0));
    assert_eq!(emu.cover(0, 0).position, 30.0);
    let text = ctl.print_device_status(None).unwrap();
    assert!(
        text.contains("Cover 1") && text.contains(&format!("Profile      {profile}")),
        "{text}"
    );
    assert!(!text.contains("Mismatch"), "{text}");
    ctl.close();
    // Outputs listed: a shape the device does not have, reported as before.
    let ctl = open(
        &emu,
        &[&format!(
            "Name: Blinds, Model: {model}, Outputs: [{{Name: Left}}, {{Name: Right}}]"
        )],
    );
    let d = ctl.device("Blinds").unwrap();
    let m = d
        .config_mismatch
        .expect("a configured shape that does not match");
    assert!(m.contains(&format!("set Profile: {profile}")), "{m}");
    assert!(ctl.cover("Cover 1").is_err(), "no cover was configured");
}

#[test]
fn a_bare_2pm_gen4_in_cover_profile_works() {
    a_bare_device_follows_its_cover_profile("Shelly2PMG4", "cover", 1);
}

#[test]
fn a_bare_2pm_gen3_in_cover_profile_works() {
    a_bare_device_follows_its_cover_profile("Shelly2PMG3", "cover", 1);
}

#[test]
fn a_bare_plus_2pm_in_cover_profile_works() {
    a_bare_device_follows_its_cover_profile("ShellyPlus2PM", "cover", 1);
}

#[test]
fn a_bare_pro_2pm_in_cover_profile_works() {
    a_bare_device_follows_its_cover_profile("ShellyPro2PM", "cover", 1);
}

#[test]
fn a_bare_shelly_25_in_roller_mode_works() {
    a_bare_device_follows_its_cover_profile("Shelly2.5", "roller", 2);
}

/// A bare Pro 3EM or 3EM-63 in `monophase` reads its three `em1` channels; in `triphase` its `em` phases.
fn a_bare_energy_meter_follows_its_profile(model: &str) {
    let (emu, _clock) = manual(vec![
        spec(model, Some("monophase")),
        spec(model, Some("triphase")),
    ]);
    emu.set_load(0, 2, 120.0);
    emu.set_load(1, 2, 80.0);
    let ctl = open(
        &emu,
        &[
            &format!("Name: Mono, Model: {model}"),
            &format!("Name: Three, Model: {model}"),
        ],
    );
    for (name, profile, watts) in [("Mono", "monophase", 120.0), ("Three", "triphase", 80.0)] {
        let d = ctl.device(name).unwrap();
        assert_eq!(d.profile.as_deref(), Some(profile));
        assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
        assert_eq!(d.meters.len(), 3);
        assert_eq!(d.meters[2].power, Some(watts), "{name}: {:?}", d.meters[2]);
    }
    // Meter IDs are the planned ones: 1-3 and 4-6.
    assert_eq!(
        ctl.meter(6).unwrap().device_id,
        ctl.device("Three").unwrap().id
    );
}

#[test]
fn a_bare_pro_3em_follows_its_profile() {
    a_bare_energy_meter_follows_its_profile("ShellyPro3EM");
}

#[test]
fn a_bare_3em_63_follows_its_profile() {
    a_bare_energy_meter_follows_its_profile("Shelly3EM63G3");
}

#[test]
fn a_bare_tasmota_device_takes_its_shutters_as_covers() {
    let mut shade = DeviceSpec::new("Tasmota");
    shade.shutters = 1;
    let (emu, clock) = manual(vec![shade, DeviceSpec::new("Tasmota")]);
    let ctl = open(
        &emu,
        &["Name: Shade, Model: Tasmota", "Name: Plain, Model: Tasmota"],
    );
    let d = ctl.device("Shade").unwrap();
    assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
    assert_eq!(d.covers.len(), 1);
    // Four cover IDs are reserved per Tasmota device without Covers, in configuration order.
    assert_eq!((d.covers[0].id, d.covers[0].name.as_str()), (1, "Cover 1"));
    let plain = ctl.device("Plain").unwrap();
    assert!((plain.covers.is_empty(), plain.config_mismatch.is_none()) == (true, true));
    ctl.move_cover("Cover 1", CoverAction::Position(60))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    ctl.read_device("Shade").unwrap();
    let c = ctl.cover("Cover 1").unwrap();
    assert_eq!(
        (c.state, c.position),
        (Some(CoverState::Stopped), Some(60.0))
    );
    ctl.close();
    // Two covers listed for one shutter: the configured shape that does not match is reported.
    let ctl = open(
        &emu,
        &["Name: Shade, Model: Tasmota, Covers: [{Name: A}, {Name: B}]"],
    );
    let m = ctl.device("Shade").unwrap().config_mismatch;
    assert!(
        m.as_deref().is_some_and(|m| m.contains("SetOption80")),
        "{m:?}"
    );
}

#[test]
fn ids_of_other_devices_do_not_depend_on_what_a_bare_device_reported() {
    let (emu, _clock) = manual(vec![
        spec("Shelly2PMG4", Some("cover")),
        spec("Shelly2PMG4", Some("switch")),
        DeviceSpec::new("ShellyPlus1PM"),
        spec("Shelly2PMG3", Some("cover")),
    ]);
    let blocks = [
        "Name: A, Model: Shelly2PMG4",
        "Name: B, Model: Shelly2PMG4",
        "Name: C, Model: ShellyPlus1PM",
        "Name: D, Model: Shelly2PMG3, Profile: cover, Covers: [{Name: Awning}]",
    ];
    let ids = |ctl: &Controller| -> Vec<(Vec<i64>, Vec<i64>, Vec<i64>)> {
        ctl.devices()
            .iter()
            .map(|d| {
                (
                    d.outputs.iter().map(|c| c.id).collect(),
                    d.meters.iter().map(|c| c.id).collect(),
                    d.covers.iter().map(|c| c.id).collect(),
                )
            })
            .collect()
    };
    // HTTP only: the profile change below must be noticed by the test's read, not by a push connection that
    // happens to come back first (that is right too, but names the channel `push`).
    let open = |emu: &Emulator, blocks: &[&str]| {
        common::emu::open(emu, blocks, "  Channel: http\n").unwrap()
    };
    let ctl = open(&emu, &blocks);
    // A keeps its default shape's first meter (1) and gets the cover ID reserved for it after the planned
    // covers (D's Awning is 1); B, C and D have the IDs they would have with A in its default shape.
    assert_eq!(
        ids(&ctl),
        [
            (vec![], vec![1], vec![2]),
            (vec![3, 4], vec![3, 4], vec![]),
            (vec![5], vec![5], vec![]),
            (vec![], vec![6], vec![1]),
        ]
    );
    ctl.close();
    // A unreachable at open: its default shape stays (until the next open), and nobody else's IDs move.
    emu.set_fault(0, smartdev::emulator::Fault::Refuse);
    let ctl = open(&emu, &blocks);
    let a = ctl.device("A").unwrap();
    assert!(!a.online);
    assert_eq!(a.profile.as_deref(), Some("switch"));
    let got = ids(&ctl);
    assert_eq!(got[0], (vec![1, 2], vec![1, 2], vec![]));
    assert_eq!(
        got[1..],
        [
            (vec![3, 4], vec![3, 4], vec![]),
            (vec![5], vec![5], vec![]),
            (vec![], vec![6], vec![1]),
        ]
    );
    // Back online in its cover profile: reported, not followed, until the next open.
    emu.set_fault(0, smartdev::emulator::Fault::None);
    ctl.read_device("A").unwrap();
    let a = ctl.device("A").unwrap();
    assert_eq!(a.profile.as_deref(), Some("cover"));
    assert!(
        a.config_mismatch
            .as_deref()
            .is_some_and(|m| m.contains("set Profile: cover")),
        "{:?}",
        a.config_mismatch
    );
    let e = ctl
        .pull_webhook_event()
        .expect("the profile change is an event");
    assert_eq!(
        (e.event.as_str(), e.device.as_str(), e.channel),
        (smartdev::PROFILE_CHANGED, "A", smartdev::EventChannel::Read)
    );
}

#[test]
fn a_profile_switched_while_running_is_reported_at_once_and_followed_at_the_next_open() {
    let (emu, clock) = manual(vec![spec("Shelly2PMG4", Some("switch"))]);
    let wake = smartdev::WakeFlag::new();
    // The push channel (the default) brings the new full status the device sends after the switch.
    let s = common::emu::settings(&emu, &["Name: Blinds, Model: Shelly2PMG4"], "");
    let ctl = Controller::open(s, Some(wake.clone())).unwrap();
    let d = ctl.device("Blinds").unwrap();
    assert_eq!((d.profile.as_deref(), d.outputs.len()), (Some("switch"), 2));
    emu.set_profile(0, "cover").unwrap();
    // No read asked for: the notification alone brings it.
    assert!(common::eventually(Duration::from_secs(20), || {
        ctl.device("Blinds").unwrap().config_mismatch.is_some()
    }));
    let d = ctl.device("Blinds").unwrap();
    assert_eq!(d.profile.as_deref(), Some("cover"));
    assert!(
        d.config_mismatch
            .as_deref()
            .is_some_and(|m| m.contains("in profile cover") && m.contains("set Profile: cover")),
        "{:?}",
        d.config_mismatch
    );
    assert!(
        d.outputs.iter().all(|o| o.state.is_none()),
        "unknown, not off"
    );
    assert!(common::eventually(Duration::from_secs(20), || {
        ctl.webhook_queue_stats().waiting > 0
    }));
    let e = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        (e.event.as_str(), e.device.as_str(), e.channel),
        (
            "device.profile_changed",
            "Blinds",
            smartdev::EventChannel::Push
        )
    );
    assert_eq!(
        (
            e.params["Profile"].as_str(),
            e.params["PreviousProfile"].as_str()
        ),
        (Some("cover"), Some("switch"))
    );
    assert!(e.params["ConfigMismatch"].is_string());
    ctl.close();
    // The next open follows it.
    let ctl = open(&emu, &["Name: Blinds, Model: Shelly2PMG4"]);
    let d = ctl.device("Blinds").unwrap();
    assert!(d.config_mismatch.is_none(), "{:?}", d.config_mismatch);
    assert_eq!((d.outputs.len(), d.covers.len()), (0, 1));
    // Subscribed first: a read right after the subscription may take its answer, which is older than the
    // manual clock's jump below (a real device would notify the cover's stop; the emulator's clock does not).
    assert!(common::eventually(Duration::from_secs(20), || {
        emu.ws_subscribed(0) > 0
    }));
    ctl.move_cover("Cover 1", CoverAction::Open).unwrap();
    clock.advance(Duration::from_secs(60));
    ctl.read_device("Blinds").unwrap();
    assert_eq!(ctl.cover("Cover 1").unwrap().state, Some(CoverState::Open));
}

#[test]
fn a_gen1_mode_switched_while_running_is_reported_at_the_next_read() {
    let (emu, _clock) = manual(vec![spec("Shelly2.5", Some("relay"))]);
    let ctl = open(&emu, &["Name: Shed, Model: Shelly2.5"]);
    assert_eq!(ctl.device("Shed").unwrap().outputs.len(), 2);
    emu.set_profile(0, "roller").unwrap();
    let d = ctl.read_device("Shed").unwrap();
    assert_eq!(d.profile.as_deref(), Some("roller"));
    assert!(
        d.config_mismatch
            .as_deref()
            .is_some_and(|m| m.contains("set Profile: roller")),
        "{:?}",
        d.config_mismatch
    );
    let e = ctl.pull_webhook_event().unwrap();
    assert_eq!(
        (e.event.as_str(), e.channel),
        ("device.profile_changed", smartdev::EventChannel::Read)
    );
}

/// A simulated device has no profile to report: its file and `print_device_status` show the planned shape
/// (here `Profile: cover` alone: one cover and its meter, no outputs).
#[test]
fn a_simulated_device_shows_its_planned_profile_in_its_file_and_status() {
    let dir = common::TempDir::new("sim-profile");
    let yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  Devices:\n    - {{Name: Terrace, Model: Shelly2PMG3, Simulate: true, Profile: cover}}\n",
        dir.path().display()
    );
    let ctl = Controller::builder().open_yaml(&yaml).unwrap();
    let file = common::read_json(&dir.join("Terrace.json"));
    assert_eq!(file["Profile"], "cover", "{file}");
    assert_eq!(
        (
            file["Outputs"].as_array().map(Vec::len),
            file["Covers"].as_array().map(Vec::len),
            file["Meters"].as_array().map(Vec::len)
        ),
        (Some(0), Some(1), Some(1)),
        "{file}"
    );
    let text = ctl.print_device_status(None).unwrap();
    let profile_line = text
        .lines()
        .any(|l| l.trim_start().starts_with("Profile") && l.trim_end().ends_with(" cover"));
    assert!(
        profile_line && text.contains("Cover 1") && !text.contains("Mismatch"),
        "{text}"
    );
}
