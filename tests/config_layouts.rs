//! Configuration: both layouts and every alias load to the same settings; validation reports every problem with
//! its key path; custom attributes are merged; defaults apply; the anchor's example configurations load.

mod common;

use std::time::Duration;

use common::TempDir;
use smartdev::config::Layout;
use smartdev::{ConfigLoader, Error, Rule, Settings, ValidationDictionary, ValueType};

const DEVICES: &str = "  Devices:
    - Name: Plug
      Model: ShellyPlus1PM
      Hostname: 192.168.1.20
      Outputs: [{Name: Lamp, Webhooks: true}]
";

fn layout_a(root: &str) -> String {
    format!(
        "{root}:
  ResponseTimeout: 3
  RetryCount: 2
  RetryDelay: 1.5
  PingAllowed: false
  WebhooksEnabled: true
  WebhookHost: 192.168.1.5
  WebhookPort: 9000
  WebhookPath: /hooks
  DefaultWebhooks:
    Inputs: [input.toggle_on]
    Outputs: [switch.on]
{DEVICES}"
    )
}

fn layout_b(root: &str, section: &str) -> String {
    format!(
        "{root}:
  ResponseTimeout: 3
  RetryCount: 2
  RetryDelay: 1.5
  PingAllowed: false
  {section}:
    Enabled: true
    Host: 192.168.1.5
    Port: 9000
    Path: /hooks
    DefaultWebhooks:
      Inputs: [input.toggle_on]
      Outputs: [switch.on]
{DEVICES}"
    )
}

fn problems(e: Error) -> Vec<String> {
    e.problems().iter().map(|p| p.to_string()).collect()
}

#[test]
fn both_layouts_and_all_aliases_normalise_to_the_same_settings() {
    let docs = [
        (layout_a("ShellyDevices"), Layout::A, "ShellyDevices"),
        (layout_a("VendorDevices"), Layout::A, "VendorDevices"),
        (
            layout_b("SCSmartDevices", "ShellyWebhooks"),
            Layout::B,
            "SCSmartDevices",
        ),
        (
            layout_b("SmartDevices", "VendorWebhooks"),
            Layout::B,
            "SmartDevices",
        ),
        (
            layout_b("SmartDevices", "ShellyWebhooks"),
            Layout::B,
            "SmartDevices",
        ),
    ];
    for (text, layout, root) in docs {
        let s = Settings::from_yaml_str(&text).unwrap_or_else(|e| panic!("{root}: {e}"));
        assert_eq!(s.layout, layout);
        assert_eq!(s.root_key, root);
        assert_eq!(s.response_timeout, Duration::from_secs(3));
        assert_eq!(s.retry_count, 2);
        assert_eq!(s.retry_delay, Duration::from_millis(1500));
        assert!(!s.ping_allowed);
        assert!(s.webhooks.enabled);
        assert_eq!(s.webhooks.host, "192.168.1.5");
        assert_eq!(s.webhooks.port, 9000);
        assert_eq!(s.webhooks.path, "/hooks");
        assert_eq!(s.webhooks.default_webhooks.inputs, ["input.toggle_on"]);
        assert_eq!(s.webhooks.default_webhooks.outputs, ["switch.on"]);
        assert_eq!(s.devices.len(), 1);
        assert_eq!(s.devices[0].model, "ShellyPlus1PM");
        assert!(s.devices[0].outputs.as_ref().unwrap()[0].webhooks);
        assert!(s.check().is_empty(), "{:?}", s.check());
    }
}

#[test]
fn defaults_apply_and_explicit_null_means_default() {
    let s = Settings::from_yaml_str(
        "SmartDevices:
  ResponseTimeout: null
  RetryCount: null
  ShellyWebhooks: {Enabled: null, Port: null}
  Devices:
    - {Model: Tasmota, Simulate: true, Port: null, Outputs: [{Name: null}]}
",
    )
    .unwrap();
    assert_eq!(s.response_timeout, Duration::from_secs(5));
    assert_eq!(s.retry_count, 1);
    assert_eq!(s.retry_delay, Duration::from_secs(2));
    assert!(s.ping_allowed);
    assert_eq!(
        s.simulation_folder,
        std::path::PathBuf::from("simulation_files")
    );
    assert!(!s.webhooks.enabled);
    assert_eq!(s.webhooks.host, "0.0.0.0");
    assert_eq!(s.webhooks.port, 8787);
    assert_eq!(s.webhooks.path, "/shelly/webhook");
    assert_eq!(
        s.webhooks.default_webhooks.inputs,
        ["input.toggle_on", "input.toggle_off"]
    );
    assert_eq!(
        s.webhooks.default_webhooks.outputs,
        ["switch.on", "switch.off"]
    );
    assert_eq!(s.devices[0].port, None);
    assert_eq!(s.devices[0].outputs.as_ref().unwrap()[0].name, None);
}

#[test]
fn relative_paths_resolve_against_the_config_files_folder() {
    let dir = TempDir::new("cfgpath");
    let path = dir.write(
        "devices.yaml",
        "Files: {LogfileName: logs/app.log, ConsoleVerbosity: warning}\nSmartDevices:\n  SimulationFileFolder: sims\n  Devices: []\n",
    );
    let s = Settings::from_file(&path).unwrap();
    assert_eq!(s.simulation_folder, dir.join("sims"));
    let log = s.logging.unwrap();
    assert_eq!(log.logfile.unwrap(), dir.join("logs/app.log"));
    assert_eq!(log.console_verbosity, smartdev::logging::Verbosity::Warning);
    assert_eq!(
        log.logfile_verbosity,
        smartdev::logging::Verbosity::Detailed
    );
}

#[test]
fn every_problem_is_reported_with_its_full_key_path() {
    let e = Settings::from_yaml_str(
        "SmartDevices:
  ResponseTimeout: 0
  RetryCount: -1
  PingAllowed: yes please
  ShellyWebhooks: {Port: 70000, Path: hooks}
  Devices:
    - Name: A
      Model: Shelly2PMG3
      ID: 1.5
      Outputs:
        - {Name: O1, Colour: red}
    - Name: ''
    - Model: Tasmota
      Simulate: true
      Meters: [{MockRate: -2}]
      TempProbes: [{ID: 3}]
",
    )
    .unwrap_err();
    assert!(matches!(e, Error::Config { .. }));
    let p = problems(e);
    let expect = [
        "SmartDevices.ResponseTimeout: 0 is below the minimum 0.05",
        "SmartDevices.RetryCount: -1 is below the minimum 0",
        "SmartDevices.PingAllowed: expected boolean, found string \"yes please\"",
        "SmartDevices.ShellyWebhooks.Port: 70000 is above the maximum 65535",
        "SmartDevices.Devices[0].ID: expected integer, found number 1.5 (no decimals)",
        "SmartDevices.Devices[0].Outputs[0].Colour: unknown key; if it is a custom attribute of yours, add it to the validation dictionary (ValidationDictionary::define, or sdctl --schema FILE)",
        "SmartDevices.Devices[1].Name: must not be empty",
        "SmartDevices.Devices[1].Model: required key is missing",
        "SmartDevices.Devices[2].Meters[0].MockRate: -2 is below the minimum 0",
        "SmartDevices.Devices[2].TempProbes[0].Name: required key is missing",
        "SmartDevices.ShellyWebhooks.Path: 'hooks' must be a URL path starting with '/' (no query, no spaces)",
    ];
    for want in expect {
        assert!(p.iter().any(|x| x == want), "missing {want:?} in {p:#?}");
    }
    assert_eq!(p.len(), expect.len(), "{p:#?}");
}

#[test]
fn semantic_config_problems_are_reported_too() {
    let p = problems(
        Settings::from_yaml_str(
            "SmartDevices:\n  ShellyWebhooks: {Path: hooks, Host: 'bad host'}\n  Devices:\n    - {Model: Tasmota, Simulate: true, State: 1}\n",
        )
        .unwrap_err(),
    );
    assert!(
        p.iter()
            .any(|x| x.starts_with("SmartDevices.ShellyWebhooks.Path: 'hooks' must be a URL path")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|x| x.starts_with("SmartDevices.ShellyWebhooks.Host: 'bad host'")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|x| x.starts_with("SmartDevices.Devices[0].State: unknown key")),
        "{p:?}"
    );
}

#[test]
fn both_roots_in_one_file_is_a_clear_error() {
    let text = format!(
        "{}{}",
        layout_a("ShellyDevices"),
        layout_b("SmartDevices", "ShellyWebhooks")
    );
    let p = problems(Settings::from_yaml_str(&text).unwrap_err());
    assert!(
        p.iter()
            .any(|x| x.contains("'ShellyDevices' and 'SmartDevices' cannot be used together")),
        "{p:?}"
    );
    let p = problems(Settings::from_yaml_str("Files: {}\n").unwrap_err());
    assert!(p[0].contains("no device settings"), "{p:?}");
}

#[test]
fn flat_webhook_keys_are_not_accepted_in_layout_b() {
    let p = problems(
        Settings::from_yaml_str("SmartDevices:\n  WebhookPort: 1\n  Devices: []\n").unwrap_err(),
    );
    assert_eq!(
        p,
        [
            "SmartDevices.WebhookPort: unknown key; it is a layout A (ShellyDevices) key: here write ShellyWebhooks: {Port: ...}"
        ]
    );
}

#[test]
fn yaml_syntax_errors_name_the_line() {
    let e = Settings::from_yaml_str("SmartDevices:\n  Devices: [\n").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("line"), "{text}");
    assert!(text.contains("not valid YAML"), "{text}");
}

#[test]
fn custom_attributes_need_the_dictionary_and_keep_their_order() {
    let text = "SmartDevices:
  Devices:
    - Name: D
      Model: Tasmota
      Simulate: true
      Location: Shed
      Outputs: [{Name: O, Size: Large, Group: Garden, Colour: null}]
      Meters: [{Name: M, Tariff: 0.31}]
      TempProbes: [{Name: P, Mount: Wall}]
";
    let p = problems(Settings::from_yaml_str(text).unwrap_err());
    assert_eq!(p.len(), 6, "{p:?}");

    let ext = "SmartDevices:
  type: dict
  schema:
    Devices:
      type: list
      schema:
        type: dict
        schema:
          Location: {type: string, required: false, nullable: true}
          Outputs:
            type: list
            schema:
              type: dict
              schema:
                Colour: {type: string, required: false, nullable: true}
                Group: {type: string, required: false, nullable: true}
                Size: {type: string, required: false, nullable: true}
";
    let mut dict = ValidationDictionary::builtin();
    dict.merge(&ValidationDictionary::from_yaml_str(ext, "ext").unwrap())
        .unwrap();
    dict.define(
        "SmartDevices.Devices.Meters.Tariff",
        Rule::optional(ValueType::Number),
    )
    .unwrap();
    dict.define(
        "SCSmartDevices.Devices.TempProbes.Mount",
        Rule::optional(ValueType::String),
    )
    .unwrap();
    let s = ConfigLoader::new()
        .with_dictionary(dict)
        .load_str(text)
        .unwrap();
    let d = &s.devices[0];
    assert_eq!(d.custom["Location"], "Shed");
    let o = &d.outputs.as_ref().unwrap()[0];
    let keys: Vec<&String> = o.custom.keys().collect();
    assert_eq!(keys, ["Size", "Group", "Colour"]);
    assert!(o.custom["Colour"].is_null());
    assert_eq!(d.meters.as_ref().unwrap()[0].custom["Tariff"], 0.31);
    assert_eq!(d.temp_probes.as_ref().unwrap()[0].custom["Mount"], "Wall");
}

#[test]
fn custom_attribute_types_are_enforced_and_may_not_clash_with_object_fields() {
    let mut dict = ValidationDictionary::builtin();
    dict.define(
        "SmartDevices.Devices.Outputs.Rank",
        Rule::optional(ValueType::Integer),
    )
    .unwrap();
    dict.define(
        "SmartDevices.Devices.Outputs.State",
        Rule::optional(ValueType::String),
    )
    .unwrap();
    let loader = ConfigLoader::new().with_dictionary(dict);
    let p = problems(
        loader
            .load_str("SmartDevices:\n  Devices:\n    - {Model: Tasmota, Simulate: true, Outputs: [{Rank: high, State: x}]}\n")
            .unwrap_err(),
    );
    assert!(
        p.contains(
            &"SmartDevices.Devices[0].Outputs[0].Rank: expected integer, found string \"high\""
                .to_string()
        ),
        "{p:?}"
    );
    let p = problems(
        loader
            .load_str("SmartDevices:\n  Devices:\n    - {Model: Tasmota, Simulate: true, Outputs: [{State: x}]}\n")
            .unwrap_err(),
    );
    assert!(
        p[0].contains("clashes with the built-in field 'State' of the output object"),
        "{p:?}"
    );
}

#[test]
fn schema_extension_from_a_json_file() {
    let dir = TempDir::new("schema");
    let path = dir.write(
        "ext.json",
        r#"{"VendorDevices":{"type":"dict","schema":{"Devices":{"type":"list","schema":{"type":"dict","schema":{"Floor":{"type":"integer","min":0}}}}}}}"#,
    );
    let mut dict = ValidationDictionary::builtin();
    dict.merge_file(&path).unwrap();
    // Defined under layout A's alias, usable in layout B too.
    let s = ConfigLoader::new()
        .with_dictionary(dict)
        .load_str("SmartDevices:\n  Devices:\n    - {Model: Tasmota, Simulate: true, Floor: 2}\n")
        .unwrap();
    assert_eq!(s.devices[0].custom["Floor"], 2);
}

/// The anchor's example configuration (anchor-behaviour.md §4.1) with its custom output keys.
const ANCHOR_EXAMPLE: &str = r#"SCSmartDevices:
  AllowDebugLogging: False
  ResponseTimeout: 3
  RetryCount: 1
  RetryDelay: 2
  PingAllowed: True
  SimulationFileFolder: simulation_files
  ShellyWebhooks:
    Enabled: True
    Host: 192.168.86.47
    Port: 8787
    Path: /shelly/webhook
    DefaultWebhooks:
      Inputs:  [input.toggle_on, input.toggle_off, input.button_push]
      Outputs: [switch.on, switch.off]
      Meters:  []
  Devices:
    - Name: Sydney Dev A
      Model: Shelly2PMG3
      Hostname: 192.168.86.30
      Simulate: False
      ExpectOffline: True
      Inputs:  [{Name: "Sydney Dev A I1", Webhooks: True}, {Name: "Sydney Dev A I2"}]
      Outputs: [{Name: "Sydney Dev A O1", Webhooks: True, Group: "Living Room", Colour: "Red"}, {Name: "Sydney Dev A O2"}]
      Meters:  [{Name: "Sydney Dev A M1"}, {Name: "Sydney Dev A M2"}]
      TempProbes: [{Name: "Sydney Dev A"}]
    - Name: Sydney Dev B
      Model: Tasmota
      Hostname: 192.168.86.37
      Outputs: [{Name: "Sydney Dev B O1"}]
      Meters:  [{Name: "Sydney Dev B M1"}]
      TempProbes: [{Name: "Sydney Dev B"}]
"#;

#[test]
fn the_anchor_example_configuration_loads_and_passes_every_rule() {
    let mut dict = ValidationDictionary::builtin();
    dict.define(
        "SmartDevices.Devices.Outputs.Group",
        Rule::optional(ValueType::String),
    )
    .unwrap();
    dict.define(
        "SmartDevices.Devices.Outputs.Colour",
        Rule::optional(ValueType::String),
    )
    .unwrap();
    let s = ConfigLoader::new()
        .with_dictionary(dict)
        .load_str(ANCHOR_EXAMPLE)
        .unwrap();
    assert_eq!(s.layout, Layout::B);
    assert_eq!(s.devices.len(), 2);
    assert!(s.devices[0].expect_offline);
    assert_eq!(s.webhooks.default_webhooks.inputs.len(), 3);
    assert!(s.check().is_empty(), "{:?}", s.check());
}

#[test]
fn the_anchor_legacy_layout_loads() {
    let legacy = "ShellyDevices:
  AllowDebugLogging: True
  ResponseTimeout: 3
  RetryCount: 1
  RetryDelay: 2
  PingAllowed: True
  WebhooksEnabled: True
  WebhookHost: 192.168.86.47
  WebhookPort: 8787
  WebhookPath: /shelly/webhook
  DefaultWebhooks:
    Inputs: [input.toggle_on]
    Outputs: [switch.on, switch.off]
  Devices:
    - Name: Shed
      Model: Shelly2.5
      Hostname: shelly-shed.local
    - Name: Meter
      Model: ShellyEM
      Hostname: 192.168.86.31
      ExpectOffline: True
";
    let s = Settings::from_yaml_str(legacy).unwrap();
    assert_eq!(s.layout, Layout::A);
    assert!(s.allow_debug_logging);
    assert!(s.check().is_empty(), "{:?}", s.check());
}

#[test]
fn logger_set_up_failure_is_a_clear_error() {
    let dir = TempDir::new("logfail");
    let s = Settings::from_yaml_str(&format!(
        "Files: {{LogfileName: '{}'}}\nSmartDevices: {{Devices: []}}\n",
        dir.path().display()
    ))
    .unwrap();
    let e = smartdev::logging::init(s.logging.as_ref().unwrap()).unwrap_err();
    assert!(matches!(e, Error::Logger(_)));
    assert!(e.to_string().contains(&dir.path().display().to_string()));
}

#[test]
fn the_readme_configuration_example_is_valid() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("```yaml\n").expect("README has a YAML example") + 8;
    let end = start + readme[start..].find("```").unwrap();
    let s = Settings::from_yaml_str(&readme[start..end]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.devices.len(), 3);
    assert!(s.check().is_empty(), "{:?}", s.check());
}

#[test]
fn passwords_come_from_the_file_or_the_environment_and_are_never_shown() {
    // Cargo sets CARGO_PKG_NAME (= "smartdev") for test processes: an environment variable to read.
    assert_eq!(std::env::var("CARGO_PKG_NAME").as_deref(), Ok("smartdev"));
    let s = Settings::from_yaml_str(
        "SmartDevices:\n  Devices:\n    - {Name: A, Model: ShellyPlus1PM, Hostname: 10.0.0.2, Password: 'env:CARGO_PKG_NAME'}\n    - {Name: B, Model: Tasmota, Hostname: 10.0.0.3, Username: me, Password: inline-secret, Outputs: [{}]}\n",
    )
    .unwrap();
    assert!(s.devices[0].password.is_some());
    let shown = format!("{:?}", s.devices);
    assert!(
        !shown.contains("smartdev") && !shown.contains("inline-secret"),
        "{shown}"
    );
    assert!(shown.contains("***"));
    assert_eq!(s.devices[1].username.as_deref(), Some("me"));
    let e = Settings::from_yaml_str(
        "SmartDevices:\n  Devices:\n    - {Name: A, Model: ShellyPlus1PM, Hostname: 10.0.0.2, Password: 'env:SMARTDEV_TEST_MISSING_1234'}\n",
    )
    .unwrap_err();
    assert_eq!(
        e.problems()[0].to_string(),
        "SmartDevices.Devices[0].Password: environment variable SMARTDEV_TEST_MISSING_1234 is not set"
    );
}
