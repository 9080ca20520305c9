//! An sc-smart-device user's existing files carry over: their config file with the application's own blocks,
//! their schema extension, their simulation folder, their event names and number spellings. The old library's
//! shapes are written here from its behaviour reference; it is never installed.

mod common;

use common::{TempDir, read_json, write_json};
use serde_json::json;
use smartdev::{ConfigLoader, Controller, Identity, ValidationDictionary};

/// An application's config file as sc-foundation apps write it: their blocks beside ours.
const APP_CONFIG: &str = "\
Files:
  LogfileName: logs/app.log
  LogfileMaxLines: 5000
  LogfileVerbosity: detailed
  ConsoleVerbosity: summary
  TimestampFormat: '%Y-%m-%d %H:%M:%S'
  LogProcessID: false
  LogThreadID: true
Website:
  HostingIP: 0.0.0.0
  Port: 8000
Email:
  EnableEmail: false
  SendEmailsTo: someone@example.com
HeartbeatMonitor:
  Enabled: false
Location:
  Timezone: Australia/Sydney
SCSmartDevices:
  AllowDebugLogging: False
  ResponseTimeout: 3
  RetryCount: 2.0
  RetryDelay: 2
  PingAllowed: True
  SimulationFileFolder: sim
  ShellyWebhooks:
    Enabled: False
    DefaultWebhooks:
      Inputs: [input.toggle_on, input.toggle_off, input.analog_change]
      Outputs: [switch.on, switch.off]
      Meters: []
  Devices:
    - Name: Sydney Dev A
      ID: 1.0
      Model: Shelly2PMG3
      Simulate: True
      Inputs: [{Name: Sydney Dev A I1, Webhooks: True}, {Name: Sydney Dev A I2}]
      Outputs: [{Name: Sydney Dev A O1, Group: Living Room}, {Name: Sydney Dev A O2}]
      Meters: [{Name: Sydney Dev A M1}, {Name: Sydney Dev A M2}]
";

/// Their schema extension, written the old library's way: no `type` restated at any level.
const APP_SCHEMA: &str = "\
SCSmartDevices:
  schema:
    Devices:
      schema:
        schema:
          Outputs:
            schema:
              schema:
                Group: {type: string, required: false, nullable: true}
";

fn loader(dir: &TempDir) -> ConfigLoader {
    let mut dict = ValidationDictionary::builtin();
    dict.merge_file(dir.write("schema.yaml", APP_SCHEMA))
        .expect("an extension without restated types merges");
    ConfigLoader::new().with_dictionary(dict)
}

#[test]
fn their_config_file_and_schema_extension_load_unchanged() {
    let dir = TempDir::new("adopt-config");
    let path = dir.write("config.yaml", APP_CONFIG);
    let s = loader(&dir).load_file(&path).unwrap();
    assert_eq!(s.retry_count, 2, "RetryCount: 2.0 is 2");
    assert_eq!(s.devices[0].id, Some(1), "ID: 1.0 is 1");
    assert!(
        s.webhooks
            .default_webhooks
            .inputs
            .contains(&"input.analog_change".to_string())
    );
    assert!(
        s.logging.as_ref().unwrap().thread_ids,
        "LogThreadID is honoured"
    );
    assert!(s.check().is_empty(), "{:?}", s.check());
    // Without their extension the custom attribute is named with the way to declare it.
    let e = ConfigLoader::new()
        .load_file(&path)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Outputs[0].Group (line 38, column 41): unknown key; if it is a custom attribute of yours"),
        "{e}"
    );
    assert!(!e.contains("Website") && !e.contains("Email"), "{e}");
}

#[test]
fn event_names_exist_somewhere_or_get_a_did_you_mean() {
    let dir = TempDir::new("adopt-events");
    let bad = APP_CONFIG.replace("input.analog_change]", "input.toggle_onn]");
    let e = loader(&dir)
        .load_file(dir.write("config.yaml", &bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("DefaultWebhooks.Inputs[2] (line 29, column 7): 'input.toggle_onn' is not an event any Shelly device sends; did you mean 'input.toggle_on'?"),
        "{e}"
    );
}

/// A simulation file as sc-smart-device writes it when it creates one: `Online: false`, `customkeylist`.
fn anchor_file(dir: &TempDir) -> std::path::PathBuf {
    let file = dir.join("sim/Sydney_Dev_A.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    write_json(
        &file,
        &json!({
            "Index": 0, "Model": "Shelly2PMG3", "Name": "Sydney Dev A", "ClientName": "Sydney Dev A", "ID": 1,
            "ObjectType": "device", "Simulate": true, "Online": false, "MacAddress": null,
            "Inputs": [{"DeviceIndex": 0, "DeviceID": 1, "ComponentIndex": 0, "ObjectType": "input", "ID": 1,
                        "Name": "Sydney Dev A I1", "Webhooks": true, "customkeylist": [], "State": true}],
            "Outputs": [{"DeviceIndex": 0, "DeviceID": 1, "ComponentIndex": 1, "ObjectType": "output", "ID": 2,
                         "Name": "Sydney Dev A O2", "customkeylist": [], "HasMeter": true, "State": true,
                         "Temperature": null}],
            "Meters": [{"ComponentIndex": 0, "Power": 120.5, "Energy": 4000, "customkeylist": []}],
            "TempProbes": [], "MetersSeperate": false, "WebhookInstallPending": false,
            "customkeylist": [], "TotalPower": 0, "TotalEnergy": 0, "Label": "Sydney Dev A (ID: 1)"
        }),
    );
    file
}

#[test]
fn their_simulation_files_open_online_once_migrated_and_keep_their_values() {
    let dir = TempDir::new("adopt-sim");
    let file = anchor_file(&dir);
    let path = dir.write("config.yaml", APP_CONFIG);
    let open = || Controller::open(loader(&dir).load_file(&path).unwrap(), None).unwrap();
    let ctl = open();
    let d = ctl.device(Identity::name("Sydney Dev A")).unwrap();
    assert!(
        d.online,
        "the old library never honoured its own Online: false"
    );
    assert_eq!(d.outputs[1].state, Some(true));
    assert_eq!(d.inputs[0].state, Some(true));
    assert_eq!(d.meters[0].power, Some(120.5));
    let c = ctl
        .change_output(Identity::name("Sydney Dev A O1"), true)
        .unwrap();
    assert!(c.did_change);
    let doc = read_json(&file);
    assert_eq!(doc["Online"], true);
    assert_eq!(doc["FileFormat"], "smartdev 1");
    assert_eq!(doc["ClientName"], "Sydney Dev A", "their other values stay");
    assert_eq!(doc["WebhookInstallPending"], false);
    drop(ctl);
    // Migrated once: a later edit of Online is the user's and is honoured.
    let mut doc = read_json(&file);
    doc["Online"] = false.into();
    write_json(&file, &doc);
    let ctl = open();
    assert!(!ctl.device(Identity::name("Sydney Dev A")).unwrap().online);
}

#[test]
fn the_shelly3em_relay_shifts_default_ids_and_every_shift_is_named() {
    let yaml = "SmartDevices:\n  Devices:\n    - {Name: Meter, Model: Shelly3EM, Simulate: true}\n    - {Name: Pump, Model: ShellyPlus1PM, Simulate: true}\n";
    let s = ConfigLoader::new().load_str(yaml).unwrap();
    let notes: Vec<String> = s
        .anchor_differences()
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("('Meter')") && n.contains("Outputs[0] ('Output 1', ID 1) is new")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("('Pump')")
            && n.contains(
                "Outputs[0] gets ID 2, 'Output 2'; sc-smart-device gave it ID 1, 'Output 1'"
            )
            && n.contains("write ID: 1 and Name: Output 1")),
        "{notes:?}"
    );
    // Pinned IDs and names: nothing differs for the pinned output.
    let pinned = yaml.replace(
        "Model: ShellyPlus1PM, Simulate: true}",
        "Model: ShellyPlus1PM, Simulate: true, Outputs: [{ID: 1, Name: Output 1}]}",
    );
    let s = ConfigLoader::new().load_str(&pinned).unwrap();
    assert!(s.check().is_empty(), "{:?}", s.check());
    let notes: Vec<String> = s
        .anchor_differences()
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert!(!notes.iter().any(|n| n.contains("('Pump')")), "{notes:?}");
}

/// Creates a hook on an emulated Gen2 device the way sc-smart-device did: named `<component>: <event>`,
/// calling the listener at `base` with its query shape.
fn old_library_hook(
    emu: &smartdev::emulator::Emulator,
    name: &str,
    event: &str,
    cid: u64,
    url: &str,
) {
    let body = json!({"id": 1, "method": "Webhook.Create", "params": {"cid": cid, "enable": true,
        "event": event, "name": name, "urls": [url]}})
    .to_string();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], emu.port(0)));
    let r = common::raw_http::send(
        addr,
        "POST",
        "/rpc",
        &[],
        Some(&body),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn hooks_the_old_library_installed_are_adopted_so_no_event_arrives_twice() {
    use smartdev::ModelLibrary;
    use smartdev::emulator::{DeviceSpec, Emulator};
    let emu = Emulator::start(
        vec![DeviceSpec::new("Shelly2PMG3")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    // A port for our listener, known before it starts (the old library's hooks name it).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/shelly/webhook");
    old_library_hook(
        &emu,
        "Hall In: input.toggle_on",
        "input.toggle_on",
        0,
        &format!("{base}?Event=input.toggle_on&DeviceID=1&ObjectType=input&ComponentID=1"),
    );
    old_library_hook(
        &emu,
        "Hall In: input.button_push",
        "input.button_push",
        0,
        &format!("{base}?Event=input.button_push&DeviceID=1&ObjectType=input&ComponentID=1"),
    );
    old_library_hook(
        &emu,
        "Node-RED",
        "input.toggle_on",
        0,
        "http://127.0.0.9:1880/hook",
    );
    let hooks = format!(
        "  ShellyWebhooks:\n    Enabled: true\n    Host: 127.0.0.1\n    Port: {port}\n    DefaultWebhooks:\n      Inputs: [input.toggle_on, input.toggle_off]\n"
    );
    let ctl = common::emu::open(
        &emu,
        &["Name: Hall, Model: Shelly2PMG3, Inputs: [{Name: Hall In, Webhooks: true}, {Name: Hall In 2}]"],
        &hooks,
    )
    .unwrap();
    let mut names: Vec<String> = emu
        .webhooks(0)
        .iter()
        .map(|h| h["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "Node-RED",
            "smartdev:input:1:input.toggle_off",
            "smartdev:input:1:input.toggle_on",
        ],
        "the old toggle_on hook is adopted (renamed, not doubled), its button_push hook that nothing wants is gone, Node-RED's stays"
    );
    let toggles: Vec<_> = emu
        .webhooks(0)
        .into_iter()
        .filter(|h| {
            h["event"] == "input.toggle_on"
                && h["urls"][0].as_str().unwrap_or("").starts_with(&base)
        })
        .collect();
    assert_eq!(toggles.len(), 1, "exactly one hook calls us per event");
    drop(ctl);
}
