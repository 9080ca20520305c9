//! sdctl end to end, run as a separate process: output, JSON, exit codes.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{TempDir, read_json, write_json};
use serde_json::{Value, json};
use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, ModelLibrary, Settings};

/// Runs sdctl in `cwd`; the embedded demo keeps its files in `cwd/demo` (each test has its own demo).
fn sdctl(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args(args)
        .current_dir(cwd)
        .env("SMARTDEV_DEMO_DIR", cwd.join("demo"))
        .output()
        .expect("sdctl runs")
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_out(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn the_demo_runs_without_a_config_and_says_where_its_files_go() {
    let dir = TempDir::new("cli-demo");
    let o = sdctl(dir.path(), &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Demo 2PM (ID: 1) — online"), "{out}");
    assert!(
        out.contains("  Outputs\n    1  Hall Light   off  (Group: Lighting)\n"),
        "{out}"
    );
    assert!(
        out.contains("Demo Plug (ID: 3) — online\n  Model      Tasmota\n"),
        "{out}"
    );
    for python_ism in ["None", "True", "False", "NoneW"] {
        assert!(!out.contains(python_ism), "{python_ism} in {out}");
    }
    // One short line on stderr names the folder; the files go there, not into the current directory.
    let demo = dir.join("demo");
    assert_eq!(
        stderr(&o),
        format!(
            "sdctl: no --config: embedded demo, simulated devices in {}\n",
            demo.display()
        )
    );
    for f in ["Demo_2PM.json", "Demo_Pump.json", "Demo_Plug.json"] {
        assert!(demo.join(f).exists(), "{f}");
    }
    assert_eq!(listing(dir.path()), ["demo"]);

    let all = json_out(&sdctl(dir.path(), &["--json", "status"]));
    assert_eq!(all.as_array().unwrap().len(), 3);
    assert_eq!(all[0]["Outputs"][0]["Group"], "Lighting");
    assert_eq!(all[1]["Room"], "Garden");
    assert_eq!(all[2]["Model"], "Tasmota");
    let one = json_out(&sdctl(dir.path(), &["--json", "status", "Demo Pump"]));
    assert_eq!(one["Meters"][0]["MockRate"], 0.25);
}

/// Without SMARTDEV_DEMO_DIR the demo lives in the XDG state folder (or ~/.local/state), wherever sdctl runs,
/// and leaves the current directory as it was.
#[test]
fn the_demo_keeps_its_files_in_one_per_user_folder() {
    let dir = TempDir::new("cli-demo-home");
    let (work, other, home) = (dir.join("work"), dir.join("other"), dir.join("home"));
    for d in [&work, &other, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let run = |cwd: &Path, args: &[&str], xdg: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sdctl"));
        cmd.args(args)
            .current_dir(cwd)
            .env_remove("SMARTDEV_DEMO_DIR")
            .env("HOME", &home);
        match xdg {
            Some(x) => cmd.env("XDG_STATE_HOME", x),
            None => cmd.env_remove("XDG_STATE_HOME"),
        };
        let o = cmd.output().expect("sdctl runs");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        o
    };
    // ~/.local/state/smartdev/demo: a change made from one folder is seen from another.
    let o = run(&work, &["set", "Hall Light", "on"], None);
    let state = home.join(".local/state/smartdev/demo");
    assert!(
        stderr(&o).contains(&format!("simulated devices in {}", state.display())),
        "{}",
        stderr(&o)
    );
    assert!(state.join("Demo_2PM.json").exists());
    let out = json_out(&run(&other, &["get", "output", "Hall Light"], None));
    assert_eq!(out["State"], true);
    // $XDG_STATE_HOME/smartdev/demo when it is set (a relative one is ignored, as the XDG rules say).
    let xdg = dir.join("xdg");
    let o = run(&work, &["status"], Some(&xdg));
    assert!(
        stderr(&o).contains(&xdg.join("smartdev/demo").display().to_string()),
        "{}",
        stderr(&o)
    );
    assert!(xdg.join("smartdev/demo/Demo_Plug.json").exists());
    let o = run(&work, &["status"], Some(Path::new("relative")));
    assert!(
        stderr(&o).contains(&state.display().to_string()),
        "{}",
        stderr(&o)
    );
    assert!(listing(&work).is_empty(), "{:?}", listing(&work));
    assert!(listing(&other).is_empty(), "{:?}", listing(&other));
}

#[test]
fn set_and_get_through_the_demo() {
    let dir = TempDir::new("cli-set");
    let o = sdctl(dir.path(), &["set", "Hall Light", "on"]);
    assert_eq!(
        stdout(&o).trim(),
        "Hall Light (ID: 1): on (changed)",
        "{}",
        stderr(&o)
    );
    let o = sdctl(dir.path(), &["set", "Hall Light", "on"]);
    assert_eq!(stdout(&o).trim(), "Hall Light (ID: 1): on (unchanged)");
    let change = json_out(&sdctl(dir.path(), &["--json", "set", "1", "toggle"]));
    assert_eq!(change, json!({"State": false, "DidChange": true}));

    let out = json_out(&sdctl(dir.path(), &["get", "output", "Stair Light"]));
    assert_eq!(out["ID"], 2);
    assert_eq!(out["State"], false);
    assert_eq!(out["ObjectType"], "output");
    let dev = json_out(&sdctl(dir.path(), &["--json", "get", "device", "3"]));
    // read device reads it now; the same object.
    let read = json_out(&sdctl(dir.path(), &["--json", "read", "device", "3"]));
    assert_eq!(read["ID"], dev["ID"]);
    assert_eq!(dev["Name"], "Demo Plug");
    // Without --json a device is its status block.
    let o = sdctl(dir.path(), &["get", "device", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("Demo Plug (ID: 3) — online\n  Model      Tasmota\n"),
        "{}",
        stdout(&o)
    );
    let probe = json_out(&sdctl(dir.path(), &["get", "temp-probe", "Pool Water"]));
    assert_eq!(probe["RequiresOutput"], "Pool Pump");
    let input = json_out(&sdctl(dir.path(), &["get", "input", "3"]));
    assert_eq!(input["Name"], "Input 3");
}

#[test]
fn exit_codes_separate_usage_errors_from_failed_operations() {
    let dir = TempDir::new("cli-codes");
    let usage = sdctl(dir.path(), &[]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(stderr(&usage).contains("usage: sdctl"));
    assert_eq!(
        sdctl(dir.path(), &["set", "x", "up"]).status.code(),
        Some(2)
    );
    let o = sdctl(dir.path(), &["--name", "get", "output", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("output '1' not found"),
        "{}",
        stderr(&o)
    );
    // A misspelt name points at the one meant.
    let o = sdctl(dir.path(), &["set", "Hall Lihgt", "on"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).lines().last().unwrap_or(""),
        "sdctl: output 'Hall Lihgt' not found; did you mean 'Hall Light'?"
    );

    // A simulated device that is offline makes the operation fail with exit code 1.
    let cfg = dir.write(
        "c.yaml",
        "SmartDevices:\n  SimulationFileFolder: sims\n  Devices:\n    - {Name: Plug, Model: Tasmota, Simulate: true, Outputs: [{Name: Heater}]}\n",
    );
    assert_eq!(
        sdctl(dir.path(), &["--config", "c.yaml", "status"])
            .status
            .code(),
        Some(0)
    );
    let file = dir.join("sims/Plug.json");
    let mut doc = read_json(&file);
    doc["Online"] = json!(false);
    write_json(&file, &doc);
    let o = sdctl(
        dir.path(),
        &["--config", cfg.to_str().unwrap(), "set", "Heater", "on"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("device Plug (ID: 1) is offline"),
        "{}",
        stderr(&o)
    );
    let o = sdctl(dir.path(), &["--config", "c.yaml", "status"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("Plug (ID: 1) — offline"),
        "{}",
        stdout(&o)
    );
}

/// A real device nobody answers for (a closed port on 127.0.0.1) and a simulated one: `get device`, `read
/// device` and `get output` print the offline device's object, say in one line why it is offline, and exit 1.
#[test]
fn an_offline_device_is_printed_and_fails_with_one_line() {
    let dir = TempDir::new("cli-offline");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:\n  ResponseTimeout: 0.3\n  RetryCount: 0\n  PingAllowed: false\n  RefreshInterval: 0\n  SimulationFileFolder: sims\n  Devices:\n    - {{Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n    - {{Name: Plug, Model: Tasmota, Simulate: true, Outputs: [{{Name: Heater}}]}}\n"
        ),
    );
    let run = |args: &[&str]| {
        let mut all = vec!["--config", "c.yaml"];
        all.extend_from_slice(args);
        sdctl(dir.path(), &all)
    };
    let said = "sdctl: device Shed (ID: 1): offline; last error: GET /shelly: connection refused (after 1 attempt)\n";

    let o = run(&["--json", "get", "device", "Shed"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o), said);
    let dev: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(dev["Online"], false);
    assert_eq!(
        dev["LastError"],
        "GET /shelly: connection refused (after 1 attempt)"
    );
    assert_eq!(dev["Model"], "ShellyPlus1PM");
    assert_eq!(dev["Outputs"][0]["State"], Value::Null);

    let o = run(&["get", "device", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), said);
    let text = stdout(&o);
    assert!(text.starts_with("Shed (ID: 1) — offline\n"), "{text}");
    assert!(
        text.contains("  Last error  GET /shelly: connection refused"),
        "{text}"
    );

    // read device tries now, fails, and still prints what it knows.
    let o = run(&["--json", "read", "device", "Shed"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), said);
    let dev: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(dev["Online"], false);

    let o = run(&["get", "output", "Output 1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), said);
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (out["Name"].clone(), out["State"].clone()),
        (json!("Output 1"), Value::Null)
    );

    // The online device beside it is fine; an unknown name stays a usage error without output.
    let o = run(&["get", "device", "Plug"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let o = run(&["get", "device", "Nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o), "");

    // A simulated device whose file says it is offline: no error to show beyond that.
    let file = dir.join("sims/Plug.json");
    let mut doc = read_json(&file);
    doc["Online"] = json!(false);
    write_json(&file, &doc);
    let o = run(&["--json", "get", "device", "Plug"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "sdctl: device Plug (ID: 2): offline\n");
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).unwrap()["Online"],
        false
    );
}

/// A simulated Shelly 2PM Gen3 in cover profile (cover "Blind") and a simulated H&T Gen3 (built-in sensors).
const COVERS: &str = "SmartDevices:\n  SimulationFileFolder: sims\n  RefreshInterval: 0\n  Devices:\n    - {Name: Shutter, Model: Shelly2PMG3, Simulate: true, Profile: cover, Covers: [{Name: Blind}]}\n    - {Name: Bath, Model: ShellyHTG3, Simulate: true, Sensors: [{Name: Bath Temperature}, {Name: Bath Humidity}]}\n";

#[test]
fn covers_move_and_report_through_sdctl() {
    let dir = TempDir::new("cli-covers");
    dir.write("c.yaml", COVERS);
    let run = |args: &[&str]| {
        let mut all = vec!["--config", "c.yaml"];
        all.extend_from_slice(args);
        sdctl(dir.path(), &all)
    };
    let o = run(&["cover", "Blind", "open"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "Blind (ID: 1): open, position 100 %");
    let c = json_out(&run(&["--json", "cover", "Blind", "position", "40"]));
    assert_eq!(
        (c["State"].clone(), c["Position"].clone()),
        (json!("stopped"), json!(40.0))
    );
    // Each sdctl run is a new process: the simulated cover kept its position in its file.
    let c = json_out(&run(&["get", "cover", "Blind"]));
    assert_eq!(
        (c["ObjectType"].clone(), c["Position"].clone()),
        (json!("cover"), json!(40.0))
    );
    let o = run(&["cover", "1", "stop"]);
    assert_eq!(stdout(&o).trim(), "Blind (ID: 1): stopped, position 40 %");
    let o = run(&["cover", "Blind", "close"]);
    assert_eq!(stdout(&o).trim(), "Blind (ID: 1): closed, position 0 %");
    let o = run(&["status", "Shutter"]);
    let text = stdout(&o);
    assert!(
        text.contains("  Covers\n    1  Blind  closed  0 % open\n"),
        "{text}"
    );
    let dev = json_out(&run(&["--json", "status", "Shutter"]));
    assert_eq!(dev["Profile"], "cover");
    assert_eq!(dev["Covers"][0]["State"], "closed");

    // Usage errors (2) say what to do, and send nothing.
    for (args, says) in [
        (
            &["cover", "Blind", "position", "150"][..],
            "use 0 (closed) to 100 (open)",
        ),
        (&["cover", "Blind", "position", "x"], "whole number"),
        (&["cover", "Blind", "position"], "needs a number"),
        (
            &["cover", "Blind", "sideways"],
            "open, close, stop or position N",
        ),
        (&["cover", "Blind"], "e.g. cover Blind position 40"),
        (&["cover", "Nope", "open"], "cover 'Nope' not found"),
        (&["get", "thing", "1"], "cover or sensor"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(json_out(&run(&["get", "cover", "Blind"]))["Position"], 0.0);

    // Uncalibrated (edited in the simulation file): a position is a failed operation (1) saying why.
    let file = dir.join("sims/Shutter.json");
    let mut doc = read_json(&file);
    doc["Covers"][0]["Calibrated"] = json!(false);
    write_json(&file, &doc);
    let o = run(&["cover", "Blind", "position", "30"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not calibrated"), "{}", stderr(&o));
    let o = run(&["cover", "Blind", "open"]);
    assert_eq!(
        stdout(&o).trim(),
        "Blind (ID: 1): open, not calibrated (no position)"
    );
}

#[test]
fn sensors_are_null_until_reported_through_sdctl() {
    let dir = TempDir::new("cli-sensors");
    dir.write("c.yaml", COVERS);
    let run = |args: &[&str]| {
        let mut all = vec!["--config", "c.yaml"];
        all.extend_from_slice(args);
        sdctl(dir.path(), &all)
    };
    let s = json_out(&run(&["get", "sensor", "Bath Humidity"]));
    assert_eq!(s["Value"], Value::Null);
    assert_eq!(
        (s["Quantity"].clone(), s["Unit"].clone()),
        (json!("humidity"), json!("%RH"))
    );
    let file = dir.join("sims/Bath.json");
    let mut doc = read_json(&file);
    doc["Sensors"][1]["Value"] = json!(48.5);
    write_json(&file, &doc);
    let s = json_out(&run(&["get", "sensor", "2"]));
    assert_eq!(s["Value"], 48.5);
    assert_eq!(
        json_out(&run(&["get", "sensor", "Bath Temperature"]))["Value"],
        Value::Null
    );
    let o = run(&["status", "Bath"]);
    let text = stdout(&o);
    assert!(
        text.contains("    2  Bath Humidity     humidity     48.5 %RH\n"),
        "{text}"
    );
    assert!(
        text.contains("    1  Bath Temperature  temperature  –\n"),
        "unknown is a dash: {text}"
    );
}

#[test]
fn check_prints_every_problem_and_schema_files_add_custom_attributes() {
    let dir = TempDir::new("cli-check");
    dir.write(
        "bad.yaml",
        "SmartDevices:\n  RetryCount: 99\n  Devices:\n    - {Name: A, Model: Shelly2PMG3, Simulate: true, Outputs: [{Colour: red}]}\n",
    );
    let o = sdctl(dir.path(), &["--config", "bad.yaml", "check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("SmartDevices.RetryCount (line 2, column 3): 99 is above the maximum 10"),
        "{err}"
    );
    assert!(
        err.contains("SmartDevices.Devices[0].Outputs[0].Colour (line 4, column 64): unknown key"),
        "{err}"
    );

    dir.write(
        "good.yaml",
        "SmartDevices:\n  Devices:\n    - {Name: A, Model: Shelly2PMG3, Simulate: true, Outputs: [{Colour: red}, {}]}\n",
    );
    dir.write(
        "schema.yaml",
        "SmartDevices:\n  type: dict\n  schema:\n    Devices:\n      type: list\n      schema:\n        type: dict\n        schema:\n          Outputs:\n            type: list\n            schema:\n              type: dict\n              schema:\n                Colour: {type: string}\n",
    );
    assert_eq!(
        sdctl(dir.path(), &["--config", "good.yaml", "check"])
            .status
            .code(),
        Some(2)
    );
    let o = sdctl(
        dir.path(),
        &["--config", "good.yaml", "--schema", "schema.yaml", "check"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("valid (1 device(s)"));
    let o = sdctl(
        dir.path(),
        &[
            "--config",
            "good.yaml",
            "--schema",
            "schema.yaml",
            "--json",
            "status",
        ],
    );
    assert_eq!(json_out(&o)[0]["Outputs"][0]["Colour"], "red");

    // Installation rules are part of check too.
    dir.write("rules.yaml", "SmartDevices:\n  Devices:\n    - {Name: A, Model: Shelly2PMG3, Simulate: true, Outputs: [{}]}\n");
    let o = sdctl(dir.path(), &["--config", "rules.yaml", "check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has 2 output(s) but 1 are configured"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn models_command_lists_the_library() {
    let dir = TempDir::new("cli-models");
    let o = sdctl(dir.path(), &["models"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.starts_with("Shelly models ("), "{out}");
    assert!(out.contains("\n  Shelly2PMG3 "), "{out}");
    assert!(out.trim_end().ends_with("Tasmota:\n  Tasmota"), "{out}");
    let o = sdctl(dir.path(), &["models", "--detailed", "Vendor2PMG3"]);
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Shelly models (1):");
    assert!(lines[1].trim_start().starts_with("Model "), "{text}");
    assert!(
        lines[2].contains("Shelly 2PM Gen3") && lines[2].contains("switch, cover"),
        "{text}"
    );
    // --json: the library entries as data.
    let o = sdctl(dir.path(), &["--json", "models", "Shelly2PMG3"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["model"], "Shelly2PMG3");
    assert_eq!(v[0]["profiles"]["cover"]["covers"], 1);
    assert_eq!(
        sdctl(dir.path(), &["models", "Nope"]).status.code(),
        Some(2)
    );
}

/// Hostile arguments and configuration edges end with a clear error (exit 2) or a normal run, never a panic.
#[test]
fn no_argument_or_config_edge_panics() {
    let dir = TempDir::new("cli-edges");
    let huge_id = dir.write(
        "huge-id.yaml",
        "SmartDevices:\n  Devices:\n    - {Name: A, ID: 10000000000000000000, Model: Shelly1, Simulate: true}\n",
    );
    let null_root = dir.write("null.yaml", "SmartDevices: ~\n");
    let tiny_refresh = dir.write(
        "refresh.yaml",
        "SmartDevices:\n  RefreshInterval: 1e-9\n  Devices: []\n",
    );
    let long_name = dir.write(
        "long.yaml",
        &format!(
            "SmartDevices:\n  Devices:\n    - {{Name: {}, Model: Shelly1, Simulate: true}}\n",
            "N".repeat(300)
        ),
    );
    let deep = dir.write(
        "deep.yaml",
        &format!("SmartDevices: {}\n", "[".repeat(100_000)),
    );
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (
            vec![
                "events".into(),
                "--timeout".into(),
                "1e20".into(),
                "--count".into(),
                "0".into(),
            ],
            0,
            "",
        ),
        (
            vec!["events".into(), "--timeout".into(), "nan".into()],
            2,
            "--timeout needs seconds",
        ),
        (
            vec![
                "events".into(),
                "--count".into(),
                "99999999999999999999999".into(),
            ],
            2,
            "--count needs a whole number",
        ),
        (
            vec![
                "--config".into(),
                huge_id.display().to_string(),
                "check".into(),
            ],
            2,
            "out of range",
        ),
        (
            vec![
                "--config".into(),
                null_root.display().to_string(),
                "check".into(),
            ],
            2,
            "SmartDevices (line 1, column 1): is empty",
        ),
        (
            vec![
                "--config".into(),
                tiny_refresh.display().to_string(),
                "check".into(),
            ],
            2,
            "too short; use 0",
        ),
        (
            vec![
                "--config".into(),
                long_name.display().to_string(),
                "check".into(),
            ],
            2,
            "300 characters long; use at most 100",
        ),
        (
            vec![
                "--config".into(),
                deep.display().to_string(),
                "check".into(),
            ],
            2,
            "nested more than 64 levels",
        ),
        (
            vec![
                "emulate".into(),
                "Tasmota,outputs=99999999999999999999".into(),
            ],
            2,
            "outputs",
        ),
        (
            vec![
                "emulate".into(),
                "Tasmota,latency=99999999999999999999".into(),
            ],
            2,
            "latency",
        ),
        (
            vec!["emulate".into(), "Tasmota,outputs=100000000".into()],
            1,
            "at most 32 outputs",
        ),
        (
            vec!["get".into(), "device".into(), "99999999999999999999".into()],
            2,
            "",
        ),
        (vec!["set".into(), "\u{202e}x".into(), "on".into()], 2, ""),
    ];
    for (args, code, says) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = sdctl(dir.path(), &a);
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{a:?}: {err}");
        assert_eq!(o.status.code(), Some(code), "{a:?}: {err}");
        assert!(err.contains(says), "{a:?}: expected '{says}' in: {err}");
    }
}

/// The README's covers-and-sensors configuration example passes `sdctl check` (the first YAML example is
/// checked by `tests/config_layouts.rs`).
#[test]
fn the_readme_covers_example_is_valid() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .find("### Covers, sensors and profiles")
        .expect("README has the covers section");
    let start = section + readme[section..].find("```yaml\n").unwrap() + 8;
    let end = start + readme[start..].find("```").unwrap();
    let dir = TempDir::new("cli-readme-covers");
    dir.write("c.yaml", &readme[start..end]);
    let o = sdctl(dir.path(), &["--config", "c.yaml", "check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("valid (3 device(s)"), "{}", stdout(&o));
}

#[test]
fn configuration_problems_come_in_one_round_with_file_line_and_column() {
    let dir = TempDir::new("cli-one-round");
    dir.write(
        "bad.yaml",
        "SmartDevices:\n  ResponseTimout: 3\n  Devices:\n    - Name: A\n      Model: Shelly2PMG9\n      Simulate: true\n    - Name: B\n      Model: ShellyPlus1PM\n      ID: 1.5\n      Simulate: true\n      Outputs: [{Name: a, Colour: red}]\n",
    );
    let o = sdctl(dir.path(), &["--config", "bad.yaml", "check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let expected = "\
sdctl: configuration bad.yaml: 4 problem(s)
  - SmartDevices.ResponseTimout (line 2, column 3): unknown key; did you mean 'ResponseTimeout'?
  - SmartDevices.Devices[1].ID (line 9, column 7): expected integer, found number 1.5 (no decimals)
  - SmartDevices.Devices[1].Outputs[0].Colour (line 11, column 27): unknown key; if it is a custom attribute of yours, add it to the validation dictionary (ValidationDictionary::define, or sdctl --schema FILE)
  - SmartDevices.Devices[0] ('A', ID 1): Model: 'Shelly2PMG9' is not in the model library (sdctl models lists them; use Tasmota for Tasmota devices); did you mean Shelly2PMG3 or Shelly2PMG4?
";
    assert!(err.ends_with(expected), "{err}");
    // --json: the same problems as data, still exit 2.
    let o = sdctl(dir.path(), &["--json", "--config", "bad.yaml", "check"]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["Valid"], false);
    assert_eq!(v["Problems"].as_array().unwrap().len(), 4);
    assert_eq!(
        v["Problems"][0]["Message"],
        "unknown key; did you mean 'ResponseTimeout'?"
    );
}

/// An application's configuration for two emulated devices (Gen2 and Gen1) with webhooks on `port`.
fn app_yaml(emu: &Emulator, port: u16) -> String {
    format!(
        "SmartDevices:
  ResponseTimeout: 2
  PingAllowed: false
  RefreshInterval: 0
  ShellyWebhooks: {{Enabled: true, Host: 127.0.0.1, Port: {port}}}
  Devices:
    - {{Name: Hall, Model: Shelly2PMG3, Hostname: 127.0.0.1, Port: {}, Inputs: [{{Name: Hall In, Webhooks: true}}, {{}}], Outputs: [{{Name: Hall Light, Webhooks: true}}, {{}}]}}
    - {{Name: Shed, Model: Shelly2.5, Hostname: 127.0.0.1, Port: {}, Inputs: [{{Name: Shed In, Webhooks: true}}, {{}}], Outputs: [{{Name: Shed Pump, Webhooks: true}}, {{}}]}}
",
        emu.port(0),
        emu.port(1)
    )
}

/// sdctl next to a running application with the same file: one-shot commands neither take the listener's port
/// nor touch the application's hooks on the devices; `events` and `--listen` do listen.
#[test]
fn one_shot_commands_work_next_to_an_application_and_leave_its_hooks_alone() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("Shelly2PMG3"), DeviceSpec::new("Shelly2.5")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let app = Controller::open(Settings::from_yaml_str(&app_yaml(&emu, 0)).unwrap(), None).unwrap();
    let port = app.webhook_address().unwrap().port();
    let hooks = (emu.webhooks(0), emu.webhooks(1));
    assert_eq!((hooks.0.len(), hooks.1.len()), (4, 4), "{hooks:#?}");

    let dir = TempDir::new("cli-next-to-app");
    // The application's own file (its port), and one with Port 0, where a listener would get another port
    // and so rewrite every hook to point at itself.
    dir.write("app.yaml", &app_yaml(&emu, port));
    dir.write("any-port.yaml", &app_yaml(&emu, 0));
    for file in ["app.yaml", "any-port.yaml"] {
        for args in [
            &["status"][..],
            &["set", "Hall Light", "on"],
            &["read", "device", "Shed"],
        ] {
            let mut all = vec!["--config", file];
            all.extend_from_slice(args);
            let o = sdctl(dir.path(), &all);
            assert_eq!(o.status.code(), Some(0), "{all:?}: {}", stderr(&o));
            assert!(!stderr(&o).contains("listening"), "{all:?}: {}", stderr(&o));
            assert_eq!((emu.webhooks(0), emu.webhooks(1)), hooks, "{all:?}");
        }
    }
    // The hooks still reach the application.
    assert_eq!(emu.fire_event(0, "switch.on", 0), 1);
    assert!(common::eventually(
        std::time::Duration::from_secs(5),
        || app
            .pull_webhook_event()
            .is_some_and(|e| e.event == "switch.on")
    ));

    // Listening is asked for: the application's port is taken, and sdctl says so (exit 1).
    for args in [
        &["--listen", "--config", "app.yaml", "status"][..],
        &["--config", "app.yaml", "events", "--timeout", "0"],
    ] {
        let o = sdctl(dir.path(), args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("127.0.0.1:{port}")),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // With a free port, --listen runs the listener and installs the hooks as an application would.
    let o = sdctl(
        dir.path(),
        &["--listen", "--config", "any-port.yaml", "status"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("sdctl: listening for webhooks on http://127.0.0.1:"),
        "{}",
        stderr(&o)
    );
    assert_ne!(
        emu.webhooks(0),
        hooks.0,
        "--listen installs hooks for its own port"
    );
    app.close();
}
