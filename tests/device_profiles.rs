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
