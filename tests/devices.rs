//! Real-device drivers against the emulator: every field of the status mapping for each meter style, add-on
//! probes, switching with correct did_change.

mod common;

use common::emu::{near, start};
use smartdev::emulator::{DeviceSpec, MeterReading};
use smartdev::models::Protocol;
use smartdev::{Component, ComponentKind, Error, Identity};

fn reading(
    power: f64,
    voltage: f64,
    current: f64,
    pf: f64,
    energy_wh: f64,
    returned_wh: f64,
) -> MeterReading {
    MeterReading {
        power,
        voltage,
        current,
        pf,
        energy_wh,
        returned_wh,
    }
}

fn id(n: i64) -> Identity {
    Identity::Id(n)
}

#[test]
fn rpc_switch_embedded_meters_inputs_outputs_and_device_fields() {
    let t = start(
        vec![DeviceSpec::new("ShellyPlus2PM")],
        &["Name: Plus, Model: ShellyPlus2PM"],
        "",
    );
    t.emu.set_output(0, 0, true);
    t.emu.set_input(0, 1, true);
    t.emu
        .set_meter(0, 0, reading(-120.5, 231.4, 0.55, 0.91, 5000.0, 250.0));
    t.emu
        .set_meter(0, 1, reading(40.0, 230.0, 0.2, 0.8, 12.0, 0.0));
    t.emu.set_temperature(0, 48.5);
    let d = t.ctl.read_device(Identity::name("Plus")).unwrap();
    assert!(d.online);
    assert_eq!(d.protocol, Some(Protocol::Rpc));
    assert!(
        d.reported_model
            .as_deref()
            .is_some_and(|m| m.starts_with("SNSW-") && m.ends_with("P16EU"))
    );
    assert!(d.firmware.is_some());
    assert!(
        // One spelling, whatever the device's: AA:BB:CC:DD:EE:FF.
        d.mac_address
            .as_deref()
            .is_some_and(|m| smartdev::Mac::parse(m).is_ok_and(|p| p.to_string() == m)),
        "{:?}",
        d.mac_address
    );
    assert!(d.uptime.is_some());
    assert_eq!(d.restart_required, Some(false));
    assert!(d.inputs[0].state == Some(false) && d.inputs[1].state == Some(true));
    assert!(d.outputs[0].state == Some(true) && d.outputs[1].state == Some(false));
    assert_eq!(d.outputs[0].temperature, Some(48.5));
    assert_eq!(d.temperature, Some(48.5));
    let m = &d.meters[0];
    assert_eq!(
        (m.power, m.voltage, m.current, m.power_factor),
        (Some(-120.5), Some(231.4), Some(0.55), Some(0.91))
    );
    near(m.energy, 5000.0, 0.2);
    near(m.returned_energy, 250.0, 0.2);
    // Output 1 is off: no load flows, but the counters and voltage are still reported.
    let m1 = &d.meters[1];
    assert_eq!(m1.power, Some(0.0));
    assert_eq!(m1.voltage, Some(230.0));
    near(m1.energy, 12.0, 0.01);
    near(d.total_power, -120.5, 0.001);
    assert_eq!(t.ctl.meter(id(1)).unwrap().output_id, Some(1));
}

#[test]
fn rpc_em1_separate_meters() {
    let t = start(
        vec![DeviceSpec::new("ShellyProEM50")],
        &["Name: ProEM, Model: ShellyProEM50"],
        "",
    );
    t.emu
        .set_meter(0, 0, reading(1500.0, 229.9, 6.8, 0.96, 10_000.0, 0.0));
    t.emu
        .set_meter(0, 1, reading(-800.0, 229.9, 3.6, 0.97, 20.0, 3000.0));
    let d = t.ctl.read_device(id(1)).unwrap();
    let (a, b) = (&d.meters[0], &d.meters[1]);
    assert_eq!(
        (a.power, a.voltage, a.current, a.power_factor),
        (Some(1500.0), Some(229.9), Some(6.8), Some(0.96))
    );
    near(a.energy, 10_000.0, 2.0);
    assert_eq!(b.power, Some(-800.0));
    near(b.returned_energy, 3000.0, 2.0);
    assert_eq!(a.output_id, None, "separate meters belong to no output");
    near(d.total_power, 700.0, 0.001);
}

#[test]
fn rpc_three_phase_meter_with_device_totals() {
    let t = start(
        vec![DeviceSpec::new("ShellyPro3EM")],
        &["Name: Grid, Model: ShellyPro3EM"],
        "",
    );
    t.emu
        .set_meter(0, 0, reading(1000.0, 230.0, 4.5, 0.97, 100.0, 0.0));
    t.emu
        .set_meter(0, 1, reading(-200.0, 231.0, 1.0, 0.9, 50.0, 75.0));
    t.emu
        .set_meter(0, 2, reading(300.0, 232.0, 1.4, 0.93, 10.0, 0.0));
    let d = t.ctl.read_device(id(1)).unwrap();
    assert_eq!(d.meters.len(), 3);
    assert_eq!(d.meters[1].voltage, Some(231.0));
    assert_eq!(d.meters[1].power, Some(-200.0));
    near(d.meters[1].returned_energy, 75.0, 0.1);
    near(d.meters[2].power_factor, 0.93, 1e-9);
    near(d.total_power, 1100.0, 0.01);
    near(d.total_energy, 160.0, 0.5);
}

#[test]
fn rpc_pm1_meter() {
    let t = start(
        vec![DeviceSpec::new("ShellyPlusPMMini")],
        &["Name: PM, Model: ShellyPlusPMMini"],
        "",
    );
    t.emu
        .set_meter(0, 0, reading(60.0, 228.0, 0.27, 1.0, 42.0, 1.5));
    let m = t
        .ctl
        .read_device(id(1))
        .map(|d| d.meters[0].clone())
        .unwrap();
    assert_eq!(
        (m.power, m.voltage, m.current),
        (Some(60.0), Some(228.0), Some(0.27))
    );
    near(m.energy, 42.0, 0.1);
    near(m.returned_energy, 1.5, 0.01);
}

#[test]
fn gen1_relay_meters_are_reported_in_wh() {
    let t = start(
        vec![DeviceSpec::new("Shelly2.5")],
        &["Name: Shed, Model: Shelly2.5"],
        "",
    );
    t.emu.set_output(0, 1, true);
    t.emu.set_input(0, 0, true);
    t.emu
        .set_meter(0, 1, reading(75.0, 240.0, 0.3, 1.0, 30.0, 0.0));
    t.emu.set_temperature(0, 51.5);
    let d = t.ctl.read_device(id(1)).unwrap();
    assert_eq!(d.protocol, Some(Protocol::Rest));
    assert_eq!(d.reported_model.as_deref(), Some("SHSW-25"));
    assert!(d.inputs[0].state == Some(true) && d.inputs[1].state == Some(false));
    assert!(d.outputs[0].state == Some(false) && d.outputs[1].state == Some(true));
    assert_eq!(d.meters[1].power, Some(75.0));
    near(d.meters[1].energy, 30.0, 0.1);
    assert_eq!(
        d.meters[1].current, None,
        "Gen1 relay meters do not report current"
    );
    assert_eq!(d.temperature, Some(51.5));
    assert_eq!(d.outputs[0].temperature, Some(51.5));
    assert!(d.update_available.is_some());
}

#[test]
fn gen1_emeters_with_returned_energy() {
    let t = start(
        vec![DeviceSpec::new("Shelly3EM")],
        &["Name: 3EM, Model: Shelly3EM"],
        "",
    );
    t.emu
        .set_meter(0, 0, reading(500.0, 231.2, 2.3, 0.94, 8000.0, 0.0));
    t.emu
        .set_meter(0, 2, reading(-250.0, 229.0, 1.1, 0.99, 1.0, 900.0));
    let d = t.ctl.read_device(id(1)).unwrap();
    let m = &d.meters[0];
    assert_eq!(
        (m.power, m.voltage, m.current, m.power_factor),
        (Some(500.0), Some(231.2), Some(2.3), Some(0.94))
    );
    near(m.energy, 8000.0, 1.0);
    assert_eq!(d.meters[2].power, Some(-250.0));
    near(d.meters[2].returned_energy, 900.0, 1.0);
    assert_eq!(d.temperature, None);
}

#[test]
fn tasmota_energy_channels_and_localised_relays() {
    let mut spec = DeviceSpec::new("Tasmota");
    spec.outputs = Some(2);
    spec.meters = Some(2);
    let t = start(
        vec![spec],
        &[
            "Name: Strip, Model: Tasmota, Outputs: [{Name: A}, {Name: B}], Meters: [{Name: MA}, {Name: MB}]",
        ],
        "",
    );
    t.emu.set_localised_power_text(0, "EIN", "AUS");
    t.emu.set_output(0, 1, true);
    t.emu
        .set_meter(0, 1, reading(100.0, 230.0, 0.45, 0.95, 1500.0, 0.0));
    let d = t.ctl.read_device(id(1)).unwrap();
    assert!(d.outputs[0].state == Some(false) && d.outputs[1].state == Some(true));
    assert_eq!(d.meters[1].power, Some(100.0));
    assert_eq!(d.meters[1].voltage, Some(230.0));
    near(d.meters[1].energy, 1500.0, 1.0);
    assert_eq!(d.meters[0].power, Some(0.0));
    assert!(d.firmware.is_some());
    assert!(d.uptime.is_some());
    // Switching with localised answers still reports the right state and change.
    let c = t.ctl.change_output(Identity::name("A"), true).unwrap();
    assert!(c.state && c.did_change);
    assert!(t.emu.output(0, 0));
    let c = t.ctl.change_output(Identity::name("B"), true).unwrap();
    assert!(c.state && !c.did_change);
    let c = t.ctl.toggle_output(Identity::name("B")).unwrap();
    assert!(!c.state && c.did_change);
    assert!(!t.emu.output(0, 1));
}

#[test]
fn add_on_probes_by_name_with_requires_output_and_a_probe_named_like_its_device() {
    let mut spec = DeviceSpec::new("Shelly1G3");
    spec.probes = vec!["Pool".into(), "Roof".into()];
    let t = start(
        vec![spec],
        &[
            "Name: Solar, Model: Shelly1G3, Outputs: [{Name: Pump}], TempProbes: [{Name: Roof}, {Name: Pool, RequiresOutput: Pump}, {Name: Solar}, {Name: Ghost}]",
        ],
        "",
    );
    t.emu.set_probe(0, 0, Some(24.5));
    t.emu.set_probe(0, 1, Some(61.0));
    t.emu.set_temperature(0, 40.0);
    let d = t.ctl.read_device(id(1)).unwrap();
    let p = &d.temp_probes;
    assert_eq!((p[0].probe_id, p[0].temperature), (Some(101), Some(61.0)));
    assert_eq!(p[1].probe_id, Some(100));
    assert_eq!(p[1].temperature, None, "pump is off");
    assert_eq!((p[2].probe_id, p[2].temperature), (Some(-1), Some(40.0)));
    assert_eq!((p[3].probe_id, p[3].temperature), (None, None));
    assert!(p[0].last_reading_time.is_some());
    t.ctl.change_output(Identity::name("Pump"), true).unwrap();
    t.ctl.refresh_all().unwrap();
    assert_eq!(
        t.ctl
            .temp_probe(Identity::name("Pool"))
            .unwrap()
            .temperature,
        Some(24.5)
    );
    // A missing sensor reads None, not 0.
    t.emu.set_probe(0, 1, None);
    t.ctl.refresh_all().unwrap();
    assert_eq!(
        t.ctl
            .temp_probe(Identity::name("Roof"))
            .unwrap()
            .temperature,
        None
    );
}

#[test]
fn gen1_and_tasmota_probes() {
    let mut gen1 = DeviceSpec::new("Shelly1");
    gen1.probes = vec!["a".into(), "b".into()];
    let mut tas = DeviceSpec::new("Tasmota");
    tas.probes = vec!["01131B7A4B6F".into(), "0000000000AA".into()];
    let t = start(
        vec![gen1, tas],
        &[
            "Name: G, Model: Shelly1, TempProbes: [{Name: First}, {Name: Second}]",
            "Name: T, Model: Tasmota, Outputs: [{Name: TO}], TempProbes: [{Name: '0000000000AA'}, {Name: T}]",
        ],
        "",
    );
    t.emu.set_probe(0, 0, Some(10.0));
    t.emu.set_probe(0, 1, Some(11.0));
    t.emu.set_probe(1, 1, Some(-4.5));
    t.emu.set_temperature(1, 47.0);
    let r = t.ctl.refresh_all().unwrap();
    assert!(r.is_ok(), "{:?}", r.failures);
    let g = t.ctl.device(Identity::name("G")).unwrap();
    assert_eq!(g.temp_probes[0].temperature, Some(10.0));
    assert_eq!(g.temp_probes[1].temperature, Some(11.0));
    let d = t.ctl.device(Identity::name("T")).unwrap();
    assert_eq!(d.temp_probes[0].temperature, Some(-4.5));
    assert_eq!(d.temp_probes[1].temperature, Some(47.0));
    assert_eq!(d.temperature, Some(47.0));
}

#[test]
fn change_output_and_toggle_report_what_the_device_did() {
    let t = start(
        vec![
            DeviceSpec::new("Shelly2PMG3"),
            DeviceSpec::new("ShellyPlugS"),
            DeviceSpec::new("Tasmota"),
        ],
        &[
            "Name: RPC, Model: Shelly2PMG3",
            "Name: Gen1, Model: ShellyPlugS",
            "Name: Tas, Model: Tasmota, Outputs: [{Name: TasOut}]",
        ],
        "",
    );
    // Output IDs: RPC 1, 2; Gen1 3; Tasmota 4.
    for (out, dev, ch) in [(2, 0, 1), (3, 1, 0), (4, 2, 0)] {
        let c = t.ctl.change_output(id(out), true).unwrap();
        assert!(c.state && c.did_change, "output {out}");
        assert!(t.emu.output(dev, ch));
        let c = t.ctl.change_output(id(out), true).unwrap();
        assert!(c.state && !c.did_change, "output {out} already on");
        // Someone presses the button on the device: did_change comes from the device, not a cached state.
        t.emu.set_output(dev, ch, false);
        let c = t.ctl.change_output(id(out), true).unwrap();
        assert!(
            c.state && c.did_change,
            "output {out} was switched off behind our back"
        );
        let c = t.ctl.toggle_output(id(out)).unwrap();
        assert!(!c.state && c.did_change, "output {out} toggled");
        assert!(!t.emu.output(dev, ch));
        assert!(
            t.ctl.output(id(out)).unwrap().state == Some(false),
            "output {out} reads on after its toggle to off"
        );
    }
    let counts = t.emu.counts(0);
    // A toggle is a read and an absolute set (safe to retry), never a Switch.Toggle.
    assert_eq!(counts.get("rpc Switch.Set"), Some(&4));
    assert_eq!(counts.get("rpc Switch.GetStatus"), Some(&1));
    assert_eq!(counts.get("rpc Switch.Toggle"), None);
    match t.ctl.component(ComponentKind::Output, id(1)).unwrap() {
        Component::Output(o) => assert!(o.state == Some(false)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rpc_errors_carry_the_device_code_and_message() {
    // Configured with two outputs, but the device has one: switching output 2 asks for switch id 1.
    let t = start(
        vec![DeviceSpec::new("Shelly1PMG3")],
        &["Name: Small, Model: Shelly2PMG3"],
        "",
    );
    let e = t.ctl.change_output(id(2), true).unwrap_err();
    match &e {
        Error::Rpc {
            code,
            method,
            message,
            ..
        } => {
            assert_eq!(*code, -105);
            assert_eq!(method, "Switch.Set");
            assert!(message.contains("id"), "{message}");
        }
        other => panic!("expected an RPC error, got {other}"),
    }
    assert!(
        e.to_string()
            .starts_with("device Small (ID: 1): Switch.Set failed with error -105")
    );
    assert!(
        t.ctl.is_device_online(id(1)).unwrap(),
        "an RPC error is an answer: still online"
    );
    assert_eq!(
        t.ctl.device(id(1)).unwrap().reported_model.as_deref(),
        Some("S3SW-001P16EU")
    );
}
