//! The spec's names in Rust (issue 22): `get_device` reads the device and, when the read fails, reports the
//! error together with the device object; `get_device_component` is `component`; the 0.1.0 names renamed in
//! 0.2.0 still work, deprecated, with their 0.1.0 meaning.

mod common;

use common::TempDir;
use smartdev::{ComponentKind, Controller, Error, Settings};

/// A local port where nothing listens (bound once, then released), so connecting to it is refused.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn open(dir: &TempDir) -> Controller {
    let yaml = format!(
        "SmartDevices:
  SimulationFileFolder: {}
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 0
  Devices:
    - {{Name: Garden, Model: ShellyPlus1PM, Simulate: true, Outputs: [{{Name: Pool Pump}}], Meters: [{{Name: Pump Meter}}]}}
    - {{Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}
",
        dir.path().display(),
        closed_port()
    );
    Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap()
}

#[test]
fn get_device_reads_the_device() {
    let dir = TempDir::new("spec-get-device");
    let ctl = open(&dir);
    assert_eq!(ctl.output("Pool Pump").unwrap().state, Some(false));
    dir.write(
        "Garden.json",
        r#"{"Outputs": [{"ComponentIndex": 0, "State": true}]}"#,
    );
    assert_eq!(ctl.device("Garden").unwrap().outputs[0].state, Some(false));
    let dev = ctl.get_device("Garden").unwrap();
    assert!(dev.online);
    assert_eq!(dev.outputs[0].state, Some(true), "read, not last known");
}

#[test]
fn get_device_reports_the_error_and_the_object() {
    let dir = TempDir::new("spec-get-device-offline");
    let ctl = open(&dir);
    let failed = ctl.get_device("Shed").unwrap_err();
    assert!(matches!(failed.error, Error::Device { .. }), "{failed:?}");
    assert!(failed.to_string().contains("Shed"), "{failed}");
    let dev = failed.device.expect("the object comes with the error");
    assert_eq!(dev.name, "Shed");
    assert!(!dev.online);
    let why = dev.last_error.expect("LastError says why");
    assert!(why.contains("connection refused"), "{why}");
    // No such device: the error without an object.
    let missing = ctl.get_device("Nowhere").unwrap_err();
    assert!(matches!(missing.error, Error::NotFound { .. }));
    assert!(missing.device.is_none());
    // `?` gives the plain Error.
    let plain = || -> smartdev::Result<()> {
        ctl.get_device("Shed")?;
        Ok(())
    };
    assert!(matches!(plain(), Err(Error::Device { .. })));
}

#[test]
fn get_device_component_is_component() {
    let dir = TempDir::new("spec-component");
    let ctl = open(&dir);
    let by_spec = ctl
        .get_device_component(ComponentKind::Output, "Pool Pump")
        .unwrap();
    let by_rule = ctl.component(ComponentKind::Output, "Pool Pump").unwrap();
    assert_eq!(
        serde_json::to_value(&by_spec).unwrap(),
        serde_json::to_value(&by_rule).unwrap()
    );
}

#[test]
#[allow(deprecated)]
fn renamed_names_still_work_with_their_old_meaning() {
    let dir = TempDir::new("spec-deprecated");
    let ctl = open(&dir);
    ctl.change_output("Pool Pump", true).unwrap();
    assert_eq!(ctl.get_output("Pool Pump").unwrap().state, Some(true));
    assert_eq!(ctl.get_input(1).unwrap().name, ctl.input(1).unwrap().name);
    assert_eq!(ctl.get_meter("Pump Meter").unwrap().name, "Pump Meter");
    assert!(ctl.get_temp_probe("Nowhere").is_err());
    assert_eq!(ctl.get_outputs().len(), ctl.outputs().len());
    assert_eq!(ctl.get_inputs().len(), ctl.inputs().len());
    assert_eq!(ctl.get_meters().len(), ctl.meters().len());
    assert_eq!(ctl.get_temp_probes().len(), ctl.temp_probes().len());
}
