//! Simulated devices: the file round trip, user edits that survive, atomic writes, corrupt files, MockRate.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{TempDir, read_json, write_json};
use serde_json::json;
use smartdev::{Controller, Error, Identity, Settings};

fn open(dir: &TempDir, devices: &str) -> Controller {
    let s = Settings::from_yaml_str(&format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  Devices:\n{devices}",
        dir.path().display()
    ))
    .unwrap();
    Controller::open(s, None).unwrap()
}

const TWO_PM: &str = "    - Name: Kitchen 2PM
      Model: Shelly2PMG3
      Simulate: true
      Outputs: [{Name: Light}, {Name: Fan}]
";

fn name(s: &str) -> Identity {
    Identity::name(s)
}

#[test]
fn the_file_is_created_written_and_read_back_after_a_restart() {
    let dir = TempDir::new("roundtrip");
    let file = dir.join("Kitchen_2PM.json");
    {
        let ctl = open(&dir, TWO_PM);
        let doc = read_json(&file);
        assert_eq!(doc["Name"], "Kitchen 2PM");
        assert_eq!(doc["Model"], "Shelly2PMG3");
        assert_eq!(doc["Online"], true);
        assert_eq!(doc["Outputs"][1]["Name"], "Fan");
        assert_eq!(doc["Outputs"][1]["State"], false);
        assert_eq!(doc["Meters"].as_array().unwrap().len(), 2);
        let c = ctl.change_output(name("Fan"), true).unwrap();
        assert!(c.state && c.did_change);
        assert_eq!(read_json(&file)["Outputs"][1]["State"], true);
    }
    let ctl = open(&dir, TWO_PM);
    assert_eq!(ctl.output(name("Fan")).unwrap().state, Some(true));
    assert_eq!(ctl.output(name("Light")).unwrap().state, Some(false));
}

#[test]
fn did_change_reports_real_changes_only() {
    let dir = TempDir::new("didchange");
    let ctl = open(&dir, TWO_PM);
    let light = name("Light");
    let c = ctl.change_output(&light, true).unwrap();
    assert_eq!((c.state, c.did_change), (true, true));
    let c = ctl.change_output(&light, true).unwrap();
    assert_eq!((c.state, c.did_change), (true, false));
    let c = ctl.change_output(Identity::Id(1), false).unwrap();
    assert_eq!((c.state, c.did_change), (false, true));
    let c = ctl.toggle_output(&light).unwrap();
    assert_eq!((c.state, c.did_change), (true, true));
    // The user switches it off in the file: asking for off then changes nothing, asking for on changes it.
    let file = dir.join("Kitchen_2PM.json");
    let mut doc = read_json(&file);
    doc["Outputs"][0]["State"] = json!(false);
    write_json(&file, &doc);
    let c = ctl.change_output(&light, false).unwrap();
    assert_eq!((c.state, c.did_change), (false, false));
    let c = ctl.change_output(&light, true).unwrap();
    assert_eq!((c.state, c.did_change), (true, true));
}

#[test]
fn edits_made_between_operations_survive_a_write() {
    let dir = TempDir::new("edits");
    let ctl = open(&dir, TWO_PM);
    let file = dir.join("Kitchen_2PM.json");
    let mut doc = read_json(&file);
    doc["Inputs"][1]["State"] = json!(true);
    doc["Outputs"][1]["State"] = json!(true);
    doc["Meters"][0]["Power"] = json!(-42.5);
    doc["Meters"][0]["Energy"] = json!(1234.5);
    doc["MacAddress"] = json!("AABBCCDDEEFF");
    doc["MyNote"] = json!("kept");
    write_json(&file, &doc);

    ctl.change_output(name("Light"), true).unwrap();

    let after = read_json(&file);
    assert_eq!(after["Inputs"][1]["State"], true);
    assert_eq!(after["Outputs"][1]["State"], true);
    assert_eq!(after["Outputs"][0]["State"], true);
    assert_eq!(after["Meters"][0]["Power"], -42.5);
    assert_eq!(after["MyNote"], "kept");
    // The controller's view picked the edits up too.
    let d = ctl.device(name("Kitchen 2PM")).unwrap();
    assert!(d.inputs[1].state == Some(true));
    assert_eq!(d.meters[0].power, Some(-42.5));
    assert_eq!(d.meters[0].energy, Some(1234.5));
    assert_eq!(d.total_power, Some(-42.5));
    assert_eq!(d.mac_address.as_deref(), Some("AA:BB:CC:DD:EE:FF"));
}

#[test]
fn edits_are_seen_at_the_next_refresh() {
    let dir = TempDir::new("refresh");
    let ctl = open(&dir, TWO_PM);
    let file = dir.join("Kitchen_2PM.json");
    let mut doc = read_json(&file);
    doc["Inputs"][0]["State"] = json!(true);
    doc["Temperature"] = json!(41.5);
    write_json(&file, &doc);
    assert!(
        ctl.input(Identity::Id(1)).unwrap().state == Some(false),
        "cached until refreshed"
    );
    let report = ctl.refresh_all().unwrap();
    assert!(report.is_ok());
    assert_eq!(report.refreshed, 1);
    assert_eq!(ctl.input(Identity::Id(1)).unwrap().state, Some(true));
    assert_eq!(
        ctl.read_device(Identity::Id(1)).unwrap().temperature,
        Some(41.5)
    );
}

#[test]
fn writes_are_atomic_for_concurrent_readers() {
    let dir = TempDir::new("atomic");
    let ctl = open(&dir, TWO_PM);
    let file = dir.join("Kitchen_2PM.json");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, file) = (stop.clone(), file.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let text = std::fs::read_to_string(&file).expect("the file always exists");
                serde_json::from_str::<serde_json::Value>(&text)
                    .expect("every read sees a whole file");
                reads += 1;
            }
            reads
        })
    };
    for _ in 0..300 {
        ctl.toggle_output(name("Light")).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        // The lock file stays on purpose: deleting it would let two processes lock different files.
        .filter(|n| n != "Kitchen_2PM.json" && n != ".Kitchen_2PM.json.lock")
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn a_corrupt_file_is_reported_and_never_overwritten() {
    let dir = TempDir::new("corrupt");
    let ctl = open(&dir, TWO_PM);
    let file = dir.join("Kitchen_2PM.json");
    let garbage = "{\"Outputs\": [ oops";
    std::fs::write(&file, garbage).unwrap();

    let e = ctl.read_device(name("Kitchen 2PM")).unwrap_err();
    assert!(matches!(e, Error::Simulation { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("Kitchen_2PM.json") && text.contains("not valid JSON"),
        "{text}"
    );
    assert!(ctl.change_output(name("Light"), true).is_err());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), garbage);
    assert!(
        ctl.device(name("Kitchen 2PM"))
            .unwrap()
            .last_error
            .unwrap()
            .contains("not valid JSON")
    );

    // Fixing the file makes the device usable again.
    std::fs::remove_file(&file).unwrap();
    assert!(ctl.change_output(name("Light"), true).unwrap().state);
    assert!(
        ctl.device(name("Kitchen 2PM"))
            .unwrap()
            .last_error
            .is_none()
    );
}

#[test]
fn open_refuses_a_corrupt_file_and_names_it() {
    let dir = TempDir::new("corruptopen");
    std::fs::write(dir.join("Kitchen_2PM.json"), "[1, 2]").unwrap();
    let s = Settings::from_yaml_str(&format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  Devices:\n{TWO_PM}",
        dir.path().display()
    ))
    .unwrap();
    let e = Controller::open(s, None).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("Kitchen_2PM.json") && text.contains("must hold a JSON object"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("Kitchen_2PM.json")).unwrap(),
        "[1, 2]"
    );
}

#[test]
fn a_wrong_value_type_in_the_file_names_the_key() {
    let dir = TempDir::new("types");
    let ctl = open(&dir, TWO_PM);
    let file = dir.join("Kitchen_2PM.json");
    let mut doc = read_json(&file);
    doc["Meters"][1]["Energy"] = json!("lots");
    write_json(&file, &doc);
    let text = ctl.refresh_all().unwrap().failures[0].error.to_string();
    assert!(
        text.contains(
            "Meters[ComponentIndex 1].Energy: expected a number or null, found string \"lots\""
        ),
        "{text}"
    );
}

#[test]
fn online_false_in_the_file_makes_the_device_offline() {
    let dir = TempDir::new("offline");
    let ctl = open(&dir, TWO_PM);
    let id = name("Kitchen 2PM");
    let file = dir.join("Kitchen_2PM.json");
    let mut doc = read_json(&file);
    doc["Online"] = json!(false);
    write_json(&file, &doc);
    assert!(matches!(ctl.read_device(&id), Err(Error::Offline { .. })));
    assert!(!ctl.is_device_online(&id).unwrap());
    assert!(matches!(
        ctl.change_output(name("Light"), true),
        Err(Error::Offline { .. })
    ));
    assert_eq!(read_json(&file)["Outputs"][0]["State"], false);
    doc["Online"] = json!(true);
    write_json(&file, &doc);
    assert!(ctl.read_device(&id).unwrap().online);
    assert!(ctl.is_device_online(&id).unwrap());
}

#[test]
fn mock_rate_grows_energy_only_while_the_output_is_on_and_survives_restarts() {
    let dir = TempDir::new("mock");
    let devices = "    - Name: Pump Box
      Model: ShellyPlus1PM
      Simulate: true
      Outputs: [{Name: Pump}]
      Meters: [{Name: Pump Meter, MockRate: 10}]
    - Name: Grid
      Model: ShellyEMMiniG4
      Simulate: true
      Meters: [{Name: Grid Meter, MockRate: 5}]
";
    let pump = name("Pump Meter");
    let energy = |ctl: &Controller, m: &Identity| {
        assert!(ctl.refresh_all().unwrap().is_ok());
        ctl.meter(m).unwrap()
    };
    let last;
    {
        let ctl = open(&dir, devices);
        let m0 = energy(&ctl, &pump);
        assert_eq!(m0.power, Some(0.0), "output is off");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(energy(&ctl, &pump).energy, m0.energy, "no growth while off");

        ctl.change_output(name("Pump"), true).unwrap();
        let m1 = energy(&ctl, &pump);
        assert_eq!(m1.power, Some(36000.0), "10 Wh per second is 36 kW");
        std::thread::sleep(Duration::from_millis(100));
        let m2 = energy(&ctl, &pump);
        let grown = m2.energy.unwrap() - m1.energy.unwrap();
        assert!((0.9..5.0).contains(&grown), "grew {grown} Wh in ~0.1 s");

        // A separate meter (no output) always runs.
        let g1 = energy(&ctl, &name("Grid Meter")).energy.unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(energy(&ctl, &name("Grid Meter")).energy.unwrap() > g1);
        last = m2.energy.unwrap();
    }
    // Persisted: a new controller continues from the stored counter.
    let ctl = open(&dir, devices);
    let again = ctl.meter(&pump).unwrap().energy.unwrap();
    assert!(again >= last, "{again} < {last}");
    let file = read_json(&dir.join("Pump_Box.json"));
    assert!(file["Meters"][0]["MockTimestamp"].as_f64().unwrap() > 1.7e9);
}

#[test]
fn anchor_simulation_files_are_read() {
    let dir = TempDir::new("anchorfile");
    let anchor = json!({
        "Index": 0, "Model": "Shelly2PMG3", "Name": "Kitchen 2PM", "ClientName": "Kitchen 2PM", "ID": 1,
        "ObjectType": "device", "Simulate": true, "GetConfig": true, "MACAddress": "112233445566",
        "Inputs": [{"DeviceIndex": 0, "ComponentIndex": 0, "ObjectType": "input", "ID": 1, "Name": "I1", "State": 1},
                   {"DeviceIndex": 0, "ComponentIndex": 1, "ObjectType": "input", "ID": 2, "Name": "I2", "State": 0}],
        "Outputs": [{"ComponentIndex": 0, "ID": 1, "Name": "Old name", "State": true, "Temperature": 54.6,
                     "customkeylist": ["Size"], "Size": "Large"}],
        "Meters": [{"ComponentIndex": 1, "Power": 12.0, "Voltage": 231.0, "Current": 0.05, "PowerFactor": 0.9, "Energy": 100.0}],
        "TempProbes": [], "customkeylist": [], "TotalPower": 0, "TotalEnergy": 0
    });
    write_json(&dir.join("Kitchen_2PM.json"), &anchor);
    let ctl = open(&dir, TWO_PM);
    let d = ctl.device(name("Kitchen 2PM")).unwrap();
    assert!(d.inputs[0].state == Some(true) && d.inputs[1].state == Some(false));
    assert!(d.outputs[0].state == Some(true));
    assert_eq!(d.outputs[0].temperature, Some(54.6));
    assert_eq!(
        d.outputs[0].name, "Light",
        "names come from the configuration"
    );
    assert_eq!(d.meters[1].voltage, Some(231.0));
    assert_eq!(d.meters[0].power, None);
    assert_eq!(d.mac_address.as_deref(), Some("11:22:33:44:55:66"));
}

#[test]
fn requires_output_holds_the_probe_reading_while_the_output_is_off() {
    let dir = TempDir::new("probe");
    let ctl = open(
        &dir,
        "    - Name: Pool
      Model: ShellyPlus1PM
      Simulate: true
      Outputs: [{Name: Pump}]
      TempProbes: [{Name: Water, RequiresOutput: Pump}, {Name: Air}]
",
    );
    let file = dir.join("Pool.json");
    let set_temps = |w: f64, a: f64| {
        let mut doc = read_json(&file);
        doc["TempProbes"][0]["Temperature"] = json!(w);
        doc["TempProbes"][1]["Temperature"] = json!(a);
        write_json(&file, &doc);
    };
    set_temps(25.0, 18.0);
    ctl.refresh_all().unwrap();
    assert_eq!(
        ctl.temp_probe(name("Water")).unwrap().temperature,
        None,
        "pump off: not read"
    );
    let air = ctl.temp_probe(name("Air")).unwrap();
    assert_eq!(air.temperature, Some(18.0));
    assert!(air.last_reading_time.unwrap().ends_with('Z'));
    ctl.change_output(name("Pump"), true).unwrap();
    ctl.refresh_all().unwrap();
    assert_eq!(
        ctl.temp_probe(name("Water")).unwrap().temperature,
        Some(25.0)
    );
    ctl.change_output(name("Pump"), false).unwrap();
    set_temps(30.0, 19.0);
    ctl.refresh_all().unwrap();
    assert_eq!(
        ctl.temp_probe(name("Water")).unwrap().temperature,
        Some(25.0),
        "held while off"
    );
}

#[test]
fn requires_output_may_name_an_output_of_another_device() {
    let dir = TempDir::new("probe-remote");
    let ctl = open(
        &dir,
        "    - {Name: Pump Relay, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pump}]}
    - {Name: Pipe, Model: ShellyPlus1, Simulate: true, TempProbes: [{Name: Water, RequiresOutput: Pump}]}
",
    );
    let file = dir.join("Pipe.json");
    let set_temp = |w: f64| {
        let mut doc = read_json(&file);
        doc["TempProbes"][0]["Temperature"] = json!(w);
        write_json(&file, &doc);
    };
    set_temp(25.0);
    ctl.read_device(name("Pipe")).unwrap();
    assert_eq!(
        ctl.temp_probe(name("Water")).unwrap().temperature,
        None,
        "the pump on the other device is off: not read"
    );
    ctl.change_output(name("Pump"), true).unwrap();
    ctl.read_device(name("Pipe")).unwrap();
    assert_eq!(
        ctl.temp_probe(name("Water")).unwrap().temperature,
        Some(25.0)
    );
    ctl.change_output(name("Pump"), false).unwrap();
    set_temp(30.0);
    ctl.read_device(name("Pipe")).unwrap();
    assert_eq!(
        ctl.temp_probe(name("Water")).unwrap().temperature,
        Some(25.0),
        "held while the other device's pump is off"
    );
}

#[test]
fn file_names_keep_unicode_letters_and_replace_the_rest() {
    let dir = TempDir::new("unicode");
    let _ctl = open(
        &dir,
        "    - {Name: 'C/ü é.x', Model: Tasmota, Simulate: true, Outputs: [{Name: O}]}\n",
    );
    assert!(dir.join("C_ü_é_x.json").exists());
}

/// Child side of the two-process test: toggles output `SMARTDEV_SIM_OUTPUT` of a shared simulated device
/// `SMARTDEV_SIM_TOGGLES` times and prints the state each toggle reported, one per line.
#[test]
fn child_toggler() {
    let (Some(folder), Some(output), Some(n)) = (
        std::env::var_os("SMARTDEV_SIM_FOLDER"),
        std::env::var("SMARTDEV_SIM_OUTPUT").ok(),
        std::env::var("SMARTDEV_SIM_TOGGLES").ok(),
    ) else {
        return;
    };
    let dir = TempDir(std::path::PathBuf::from(folder));
    let ctl = open(&dir, TWO_PM);
    let mut states = String::new();
    for _ in 0..n.parse::<usize>().unwrap() {
        let c = ctl.toggle_output(name(&output)).expect("toggle");
        states.push_str(if c.state { "1\n" } else { "0\n" });
    }
    print!("{states}");
    // The folder belongs to the parent test.
    std::mem::forget(dir);
}

#[test]
fn two_processes_toggling_different_outputs_lose_nothing() {
    let dir = TempDir::new("two-procs");
    drop(open(&dir, TWO_PM)); // creates the file
    let me = std::env::current_exe().unwrap();
    const N: usize = 200;
    let children: Vec<_> = ["Light", "Fan"]
        .iter()
        .map(|o| {
            std::process::Command::new(&me)
                .args([
                    "--exact",
                    "child_toggler",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env("SMARTDEV_SIM_FOLDER", dir.path())
                .env("SMARTDEV_SIM_OUTPUT", o)
                .env("SMARTDEV_SIM_TOGGLES", N.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Both run at once; only then collect.
    let children: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (o, out) in ["Light", "Fan"].iter().zip(&children) {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{o}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let states: Vec<&str> = text
            .lines()
            .filter(|l| *l == "0" || *l == "1" || l.ends_with(" 0") || l.ends_with(" 1"))
            .map(|l| &l[l.len() - 1..])
            .collect();
        assert_eq!(states.len(), N, "{o}: {text}");
        // Each toggle sees the state its previous one wrote: a lost update would repeat a state.
        for (i, pair) in states.windows(2).enumerate() {
            assert_ne!(pair[0], pair[1], "{o}: toggle {} saw a lost update", i + 1);
        }
    }
    // N toggles each from off: back to off, and the file is valid JSON.
    let doc = read_json(&dir.join("Kitchen_2PM.json"));
    assert_eq!(doc["Outputs"][0]["State"], false);
    assert_eq!(doc["Outputs"][1]["State"], false);
}

#[test]
fn fifos_devices_and_huge_files_are_refused_not_read_forever() {
    let dir = TempDir::new("bounded");
    let file = dir.join("Kitchen_2PM.json");
    let attempt = |what: &str| {
        let s = Settings::from_yaml_str(&format!(
            "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  Devices:\n{TWO_PM}",
            dir.path().display()
        ))
        .unwrap();
        // Hang guard: the old code read a FIFO or /dev/zero forever.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(
                Controller::open(s, None)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            );
        });
        let r = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{what}: open hangs"));
        r.expect_err(what)
    };
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    let e = attempt("/dev/zero");
    assert!(e.contains("is not a regular file"), "{e}");
    std::fs::remove_file(&file).unwrap();

    assert!(
        std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap()
            .success()
    );
    let e = attempt("FIFO");
    assert!(e.contains("is not a regular file"), "{e}");
    std::fs::remove_file(&file).unwrap();

    std::fs::write(
        &file,
        format!("{{\"x\":\"{}\"}}", "a".repeat(5 * 1024 * 1024)),
    )
    .unwrap();
    let e = attempt("5 MiB");
    assert!(e.contains("more than the 4 MiB"), "{e}");
}
