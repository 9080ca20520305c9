//! Covers, profiles and sensors as a user configures them: planning rules per profile, simulated covers and
//! sensors through the public API, and unknown values that stay unknown.

mod common;

use common::{TempDir, read_json, write_json};
use smartdev::{Controller, CoverAction, CoverState, Error, Identity, SensorQuantity, Settings};

fn settings(dir: &TempDir, devices: &str) -> smartdev::Result<Settings> {
    Settings::from_yaml_str(&format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  Devices:\n{devices}",
        dir.path().display()
    ))
}

fn open(dir: &TempDir, devices: &str) -> Controller {
    Controller::open(settings(dir, devices).unwrap(), None).unwrap()
}

fn name(s: &str) -> Identity {
    Identity::name(s)
}

fn problems(dir: &TempDir, devices: &str) -> String {
    let s = settings(dir, devices).unwrap();
    s.check()
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn covers_configured_on_a_2pm_select_its_cover_profile() {
    let dir = TempDir::new("cover-profile");
    let ctl = open(
        &dir,
        "    - {Name: Blinds, Model: Shelly2PMG4, Simulate: true, Covers: [{Name: Living Blind}]}\n",
    );
    let d = ctl.device(name("Blinds")).unwrap();
    assert_eq!(d.profile.as_deref(), Some("cover"));
    assert!(
        d.outputs.is_empty(),
        "a 2PM in cover profile has no outputs"
    );
    assert_eq!(d.covers.len(), 1);
    assert_eq!(d.meters.len(), 1);
    assert_eq!(d.meters[0].cover_id, Some(d.covers[0].id));
    assert!(d.covers[0].has_meter);
    assert_eq!(d.inputs.len(), 2);
}

#[test]
fn profile_key_and_count_rule_per_profile() {
    let dir = TempDir::new("profile-rules");
    let ok = problems(
        &dir,
        "    - {Name: A, Model: Shelly2PMG3, Simulate: true, Profile: cover}\n",
    );
    assert!(ok.is_empty(), "{ok}");
    let p = problems(
        &dir,
        "    - {Name: A, Model: Shelly2PMG3, Simulate: true, Profile: roller}\n",
    );
    assert!(
        p.contains("Shelly2PMG3 has no profile 'roller'; use one of: switch, cover"),
        "{p}"
    );
    let p = problems(
        &dir,
        "    - {Name: A, Model: ShellyPlus1PM, Simulate: true, Profile: cover}\n",
    );
    assert!(
        p.contains("ShellyPlus1PM has no profiles; remove Profile"),
        "{p}"
    );
    // Outputs listed for a device set to its cover profile: the count rule names the profile.
    let p = problems(
        &dir,
        "    - {Name: A, Model: Shelly2PMG3, Simulate: true, Profile: cover, Outputs: [{Name: X}, {Name: Y}]}\n",
    );
    assert!(
        p.contains(
            "Outputs: model Shelly2PMG3 in profile cover has 0 output(s) but 2 are configured"
        ),
        "{p}"
    );
    assert!(p.contains("or set Profile: switch (it has 2)"), "{p}");
    let p = problems(
        &dir,
        "    - {Name: A, Model: ShellyPlus1PM, Simulate: true, Covers: [{Name: C}]}\n",
    );
    assert!(
        p.contains("has no covers in any profile; remove Covers"),
        "{p}"
    );
    let p = problems(
        &dir,
        "    - {Name: A, Model: Tasmota, Simulate: true, Profile: cover, Outputs: [{}]}\n",
    );
    assert!(p.contains("Tasmota devices have no profiles"), "{p}");
}

#[test]
fn a_simulated_cover_moves_and_its_file_records_it() {
    let dir = TempDir::new("cover-moves");
    let ctl = open(
        &dir,
        "    - {Name: Blinds, Model: Shelly2PMG3, Simulate: true, Profile: cover, Covers: [{Name: Blind}]}\n",
    );
    let c = ctl.cover(name("Blind")).unwrap();
    assert_eq!(
        c.state,
        Some(CoverState::Closed),
        "a new simulation starts closed"
    );
    assert_eq!(c.position, Some(0.0));
    let c = ctl.move_cover(name("Blind"), CoverAction::Open).unwrap();
    assert_eq!((c.state, c.position), (Some(CoverState::Open), Some(100.0)));
    let c = ctl
        .move_cover(name("Blind"), CoverAction::Position(40))
        .unwrap();
    assert_eq!(
        (c.state, c.position),
        (Some(CoverState::Stopped), Some(40.0))
    );
    let c = ctl.move_cover(name("Blind"), CoverAction::Stop).unwrap();
    assert_eq!(c.position, Some(40.0), "stop keeps the position");
    let doc = read_json(&dir.join("Blinds.json"));
    assert_eq!(doc["Covers"][0]["State"], "stopped");
    assert_eq!(doc["Covers"][0]["Position"], 40.0);
    // Out of range is the caller's mistake, said before anything is sent.
    match ctl.move_cover(name("Blind"), CoverAction::Position(101)) {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("use 0 (closed) to 100 (open)"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ctl.move_cover(name("Nope"), CoverAction::Open),
        Err(Error::NotFound { kind: "cover", .. })
    ));
}

#[test]
fn an_uncalibrated_cover_refuses_positions_but_opens() {
    let dir = TempDir::new("cover-uncal");
    let devices =
        "    - {Name: Blinds, Model: Shelly2PMG3, Simulate: true, Covers: [{Name: Blind}]}\n";
    let file = dir.join("Blinds.json");
    drop(open(&dir, devices));
    let mut doc = read_json(&file);
    doc["Covers"][0]["Calibrated"] = false.into();
    write_json(&file, &doc);
    let ctl = open(&dir, devices);
    let c = ctl.cover(name("Blind")).unwrap();
    assert_eq!(c.calibrated, Some(false));
    assert_eq!(c.position, None, "an uncalibrated cover knows no position");
    match ctl.move_cover(name("Blind"), CoverAction::Position(50)) {
        Err(Error::Unsupported { message, .. }) => {
            assert!(message.contains("not calibrated"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let c = ctl.move_cover(name("Blind"), CoverAction::Close).unwrap();
    assert_eq!((c.state, c.position), (Some(CoverState::Closed), None));
}

#[test]
fn a_bad_cover_state_in_the_file_is_named_with_its_fix() {
    let dir = TempDir::new("cover-bad");
    let devices =
        "    - {Name: Blinds, Model: Shelly2PMG3, Simulate: true, Covers: [{Name: Blind}]}\n";
    let file = dir.join("Blinds.json");
    drop(open(&dir, devices));
    let mut doc = read_json(&file);
    doc["Covers"][0]["State"] = "half".into();
    write_json(&file, &doc);
    let e = Controller::open(settings(&dir, devices).unwrap(), None).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("'half' is not a cover state; use open, closed"),
        "{m}"
    );
}

#[test]
fn an_h_and_t_has_its_own_sensors_and_add_on_sensors_need_a_quantity() {
    let dir = TempDir::new("sensors");
    let ctl = open(
        &dir,
        "    - {Name: Attic, Model: ShellyHTG3, Simulate: true}\n",
    );
    let d = ctl.device(name("Attic")).unwrap();
    let q: Vec<SensorQuantity> = d.sensors.iter().map(|s| s.quantity).collect();
    assert_eq!(q, [SensorQuantity::Temperature, SensorQuantity::Humidity]);
    assert!(d.sensors.iter().all(|s| s.built_in && s.value.is_none()));
    assert_eq!(d.sensors[1].unit, "%RH");
    assert!(
        d.expect_offline,
        "a sleeping device is expected offline at times"
    );
    // A value the user puts into the simulation file is read.
    let file = dir.join("Attic.json");
    let mut doc = read_json(&file);
    doc["Sensors"][1]["Value"] = 55.5.into();
    write_json(&file, &doc);
    ctl.read_device(name("Attic")).unwrap();
    let s = ctl.sensor(d.sensors[1].id).unwrap();
    assert_eq!(s.value, Some(55.5));
    assert!(s.last_reading_time.is_some());

    let p = problems(
        &dir,
        "    - {Name: Pump, Model: ShellyPlus1, Simulate: true, Sensors: [{Name: Pipe}, {Quantity: humidity}]}\n",
    );
    assert!(
        p.contains("Quantity is required for an add-on sensor"),
        "{p}"
    );
    assert!(p.contains("Name is required for an add-on sensor"), "{p}");
    let p = problems(
        &dir,
        "    - {Name: Attic, Model: ShellyHTG3, Simulate: true, Sensors: [{Quantity: humidity}, {}]}\n",
    );
    assert!(p.contains("measures temperature, not humidity"), "{p}");
}

#[test]
fn unknown_states_are_null_in_json_never_false() {
    let dir = TempDir::new("unknown");
    let s = settings(
        &dir,
        "    - {Name: Far, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: 9}\n",
    )
    .unwrap();
    let s = Settings {
        response_timeout: std::time::Duration::from_millis(200),
        retry_count: 0,
        ping_allowed: false,
        ..s
    };
    let ctl = Controller::open(s, None).unwrap();
    let d = ctl.device(name("Far")).unwrap();
    assert!(!d.online);
    let v = serde_json::to_value(&d).unwrap();
    assert!(v["Outputs"][0]["State"].is_null(), "{v}");
    assert!(v["Inputs"][0]["State"].is_null(), "{v}");
    assert!(v["Meters"][0]["Power"].is_null(), "{v}");
}
