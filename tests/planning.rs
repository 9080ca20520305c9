//! Installation rules: default IDs and names follow the anchor's scheme; every rule violation is an init error
//! naming the device and the rule.

mod common;

use common::TempDir;
use smartdev::config::{ComponentConfig, DeviceConfig};
use smartdev::{Controller, Error, Identity, Rule, Settings, ValidationDictionary, ValueType};

fn settings(dir: &TempDir, devices: &str) -> Settings {
    let mut dict = ValidationDictionary::builtin();
    dict.define(
        "SmartDevices.Devices.Outputs.Group",
        Rule::optional(ValueType::String),
    )
    .unwrap();
    smartdev::ConfigLoader::new()
        .with_dictionary(dict)
        .load_str(&format!(
            "SCSmartDevices:\n  SimulationFileFolder: '{}'\n  Devices:\n{devices}",
            dir.path().display()
        ))
        .unwrap()
}

fn check(dir: &TempDir, devices: &str) -> Vec<String> {
    settings(dir, devices)
        .check()
        .iter()
        .map(|p| p.to_string())
        .collect()
}

/// The configuration the anchor's own test suite uses (anchor-behaviour.md §11).
const FIXTURE: &str = "    - Name: Device Test 1
      Model: Shelly2PMG3
      Simulate: true
      Inputs: [{Name: Device 1.Input 1}, {Name: Device 1.Input 2}]
      Outputs: [{Name: Device 1.Output 1, Group: A}, {Name: Device 1.Output 2, Group: B}]
    - Name: Device Test 2
      Model: Tasmota
      Simulate: true
      Hostname: 192.168.1.21
      Outputs: [{Name: Device 2.Output 1}]
      Meters: [{Name: Device 2.Meter 1}]
";

#[test]
fn ids_and_names_follow_the_anchor_scheme() {
    let dir = TempDir::new("ids");
    let ctl = Controller::open(settings(&dir, FIXTURE), None).unwrap();
    let d1 = ctl.device(Identity::name("Device Test 1")).unwrap();
    let d2 = ctl.device(Identity::name("Device Test 2")).unwrap();
    assert_eq!((d1.id, d2.id), (1, 2));
    assert_eq!(
        d1.meters
            .iter()
            .map(|m| (m.id, m.name.as_str()))
            .collect::<Vec<_>>(),
        [(1, "Meter 1"), (2, "Meter 2")]
    );
    assert_eq!(d2.outputs[0].id, 3);
    assert_eq!(d2.meters[0].id, 3);
    assert_eq!(d2.meters[0].output_id, Some(3));
    assert_eq!(d1.meters[1].output_id, Some(2));
    assert!(d1.outputs[1].has_meter);
    assert_eq!(d1.outputs[0].custom["Group"], "A");
    assert!(d2.inputs.is_empty());
    ctl.close();
}

#[test]
fn counters_skip_configured_ids_across_devices() {
    let dir = TempDir::new("ids2");
    let ctl = Controller::open(
        settings(
            &dir,
            "    - {Model: ShellyPlus2PM, Simulate: true, Inputs: [{ID: 2}, {}]}
    - {ID: 1, Model: Shelly1PMG3, Simulate: true}
    - {Model: ShellyPro4PM, Simulate: true, Outputs: [{ID: 5}, {}, {}, {}]}
",
        ),
        None,
    )
    .unwrap();
    let devs = ctl.devices();
    assert_eq!(devs.iter().map(|d| d.id).collect::<Vec<_>>(), [2, 1, 3]);
    assert_eq!(
        devs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["Device 2", "Device 1", "Device 3"]
    );
    assert_eq!(
        devs[0].inputs.iter().map(|i| i.id).collect::<Vec<_>>(),
        [2, 1]
    );
    assert_eq!(devs[1].inputs[0].id, 3);
    assert_eq!(devs[1].inputs[0].name, "Input 3");
    // Output IDs: device 2 gets 1, 2; device 1 gets 3; device 3 has 5 then 4, 6, 7.
    let outs: Vec<i64> = ctl.outputs().iter().map(|o| o.id).collect();
    assert_eq!(outs, [1, 2, 3, 5, 4, 6, 7]);
    assert_eq!(ctl.output(Identity::Id(4)).unwrap().name, "Output 4");
    ctl.close();
}

#[test]
fn component_counts_must_match_the_model() {
    let dir = TempDir::new("counts");
    let p = check(
        &dir,
        "    - {Name: K, Model: Shelly2PMG3, Simulate: true, Outputs: [{}], Inputs: []}\n",
    );
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        p.iter().any(|x| x.contains("('K', ID 1)")
            && x.contains("Outputs: model Shelly2PMG3 has 2 output(s) but 1 are configured")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|x| x.contains("Inputs: model Shelly2PMG3 has 2 input(s) but 0 are configured")),
        "{p:?}"
    );
}

#[test]
fn tasmota_rules() {
    let dir = TempDir::new("tas");
    let p = check(
        &dir,
        "    - {Name: T, Model: OtherVendor, Simulate: true, Inputs: [{Name: I}]}\n",
    );
    assert!(p[0].contains("Tasmota devices have no inputs"), "{p:?}");
    assert!(
        check(
            &dir,
            "    - {Name: T, Model: Tasmota, Simulate: true, Inputs: []}\n"
        )
        .is_empty()
    );
}

#[test]
fn unknown_models_get_a_suggestion_and_neutral_spelling_is_accepted() {
    let dir = TempDir::new("model");
    let p = check(
        &dir,
        "    - {Name: X, Model: shelly2pmg3, Simulate: true}\n",
    );
    assert!(
        p[0].contains("'shelly2pmg3' is not in the model library")
            && p[0].contains("did you mean Shelly2PMG3?"),
        "{p:?}"
    );
    assert!(
        check(
            &dir,
            "    - {Name: X, Model: Vendor2PMG3, Simulate: true}\n"
        )
        .is_empty()
    );
}

#[test]
fn hostnames_are_required_for_real_devices_and_must_be_valid() {
    let dir = TempDir::new("host");
    let p = check(
        &dir,
        "    - {Name: A, Model: ShellyPlus1PM}\n    - {Name: B, Model: ShellyPlus1PM, Hostname: 'plug:80'}\n    - {Name: C, Model: ShellyPlus1PM, Hostname: 10.0.0.999}\n",
    );
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(
        p[0].contains("('A', ID 1)") && p[0].contains("Hostname is required for a real device")
    );
    assert!(p[1].contains("Hostname 'plug:80' contains a port; put the port in the Port key"));
    assert!(p[2].contains("Hostname '10.0.0.999'"));
}

#[test]
fn names_and_ids_are_unique_per_kind_across_devices() {
    let dir = TempDir::new("uniq");
    let p = check(
        &dir,
        "    - {Name: A, ID: 4, Model: Tasmota, Simulate: true, Outputs: [{Name: Lamp}], Meters: [{ID: 9}]}
    - {Name: A, Model: Tasmota, Simulate: true, Outputs: [{Name: Lamp}]}
    - {Name: C, ID: 4, Model: Tasmota, Simulate: true, Meters: [{ID: 9}]}
",
    );
    let has = |s: &str| p.iter().any(|x| x.contains(s));
    assert!(
        has("device ID 4 is used by both Devices[0] ('A') and Devices[2] ('C')"),
        "{p:?}"
    );
    assert!(
        has("device Name 'A' is used by both Devices[0] ('A') and Devices[1] ('A')"),
        "{p:?}"
    );
    assert!(
        has(
            "output Name 'Lamp' is used by both Devices[0] ('A') Outputs[0] and Devices[1] ('A') Outputs[0]"
        ),
        "{p:?}"
    );
    assert!(
        has("meter ID 9 is used by both Devices[0] ('A') Meters[0] and Devices[2] ('C') Meters[0]"),
        "{p:?}"
    );
    assert!(has("would share the simulation file"), "{p:?}");
}

#[test]
fn requires_output_names_an_output_of_any_device() {
    let dir = TempDir::new("req");
    // A pool pump on one device and the pipe probe on another is a real set-up.
    let p = check(
        &dir,
        "    - {Name: A, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pump}]}
    - {Name: B, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Heater}], TempProbes: [{Name: Water, RequiresOutput: Pump}]}
",
    );
    assert!(p.is_empty(), "{p:?}");
    let p = check(
        &dir,
        "    - {Name: A, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pump}]}
    - {Name: B, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Heater}], TempProbes: [{Name: Water, RequiresOutput: Pupm}]}
",
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("('B', ID 2)")
            && p[0].contains(
                "RequiresOutput 'Pupm' is not the name of any output; did you mean 'Pump'?"
            ),
        "{p:?}"
    );
}

#[test]
fn simulated_files_that_differ_only_in_punctuation_collide() {
    let dir = TempDir::new("collide");
    let p = check(
        &dir,
        "    - {Name: A B, Model: Tasmota, Simulate: true}\n    - {Name: A/B, Model: Tasmota, Simulate: true}\n",
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("'A B' and 'A/B' would share the simulation file"),
        "{p:?}"
    );
}

#[test]
fn at_most_five_probes_even_for_settings_built_in_code() {
    let probes = (0..6)
        .map(|i| ComponentConfig {
            name: Some(format!("P{i}")),
            ..ComponentConfig::default()
        })
        .collect();
    let s = Settings::with_defaults(vec![DeviceConfig {
        name: Some("Probe box".into()),
        model: "Shelly1G3".into(),
        simulate: true,
        temp_probes: Some(probes),
        ..DeviceConfig::default()
    }]);
    let p = s.check();
    assert_eq!(p.len(), 1);
    assert!(
        p[0].to_string()
            .contains("TempProbes: 6 configured; an add-on takes at most 5")
    );
}

#[test]
fn open_fails_with_every_rule_violation() {
    let dir = TempDir::new("openfail");
    let e = Controller::open(
        settings(
            &dir,
            "    - {Name: A, Model: Nope, Simulate: true}\n    - {Name: A, Model: Tasmota}\n",
        ),
        None,
    )
    .unwrap_err();
    assert!(matches!(e, Error::Init(_)));
    assert_eq!(e.problems().len(), 3, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("initialisation failed: 3 problem(s)"),
        "{text}"
    );
}

#[test]
fn a_probe_named_like_its_device_reads_the_device_temperature() {
    let dir = TempDir::new("selfprobe");
    let ctl = Controller::open(
        settings(&dir, "    - {Name: Solar, Model: ShellyPlus1PM, Simulate: true, TempProbes: [{Name: Solar}, {Name: Roof}]}\n"),
        None,
    )
    .unwrap();
    let probes = ctl.temp_probes();
    assert_eq!(probes[0].probe_id, Some(-1));
    assert_eq!(probes[1].probe_id, None);
}

/// A bare 2PM's cover in its cover profile would be `Cover 2` (the ID reserved after the planned covers); a
/// cover configured with that name elsewhere is refused at open rather than meaning two covers later.
#[test]
fn a_name_a_bare_device_may_take_from_its_profile_is_not_configured_elsewhere() {
    let dir = TempDir::new("plan-follow-names");
    let problems = check(
        &dir,
        "    - {Name: A, Model: Shelly2PMG4, Hostname: 192.0.2.1}\n    - {Name: B, Model: Shelly2PMG3, Hostname: 192.0.2.2, Covers: [{Name: Cover 2}]}\n",
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("Devices[0]")
            && problems[0].contains("cover 'Cover 2'")
            && problems[0].contains("rename that one, or set Profile"),
        "{problems:?}"
    );
    let fine = check(
        &dir,
        "    - {Name: A, Model: Shelly2PMG4, Hostname: 192.0.2.1}\n    - {Name: B, Model: Shelly2PMG3, Hostname: 192.0.2.2, Covers: [{Name: Cover 1}]}\n",
    );
    assert!(fine.is_empty(), "{fine:?}");
}
