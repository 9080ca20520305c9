//! `sdctl` against `sdctl emulate`, both as separate processes, over real HTTP.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::TempDir;
use common::raw_http::request;

struct Emulate(Child);

impl Drop for Emulate {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sdctl(dir: &TempDir, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap()
}

#[test]
fn sdctl_drives_emulated_devices_end_to_end() {
    let dir = TempDir::new("cli-emulate");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args(["emulate", "Shelly2PMG3", "Tasmota,outputs=1", "Shelly2.5"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let _guard = Emulate(child);
    let mut ports = Vec::new();
    let mut admin_port = 0;
    for line in out.lines() {
        let line = line.unwrap();
        let port: u16 = line.rsplit(':').next().unwrap().parse().unwrap();
        if line.starts_with("admin ") {
            admin_port = port;
            break;
        }
        ports.push(port);
    }
    assert_eq!(ports.len(), 3);
    dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:
  ResponseTimeout: 0.5
  RetryCount: 1
  RetryDelay: 0.1
  PingAllowed: false
  Devices:
    - {{Name: Hall, Model: Shelly2PMG3, Hostname: 127.0.0.1, Port: {}}}
    - {{Name: Plug, Model: Tasmota, Hostname: 127.0.0.1, Port: {}, Outputs: [{{Name: Heater}}], Meters: [{{Name: Heater Meter}}]}}
    - {{Name: Shed, Model: Shelly2.5, Hostname: 127.0.0.1, Port: {}}}
",
            ports[0], ports[1], ports[2]
        ),
    );
    let o = sdctl(&dir, &["--config", "c.yaml", "status"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("Hall (ID: 1) — online"), "{text}");
    assert!(text.contains("Plug (ID: 2) — online"), "{text}");
    assert!(
        text.contains("Shed (ID: 3) — online\n  Model        Shelly 2.5 (Shelly2.5), Gen1, REST\n"),
        "{text}"
    );

    let o = sdctl(&dir, &["--config", "c.yaml", "set", "Heater", "on"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "Heater (ID: 3): on (changed)"
    );
    let o = sdctl(
        &dir,
        &["--config", "c.yaml", "--json", "set", "Output 2", "toggle"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, serde_json::json!({"State": true, "DidChange": true}));
    let o = sdctl(&dir, &["--config", "c.yaml", "get", "output", "Output 2"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["State"], true);

    // Blackhole the first device through the admin endpoint: reading it now fails with exit code 1, one line
    // saying why, and its object (now offline) is still printed.
    assert_eq!(
        request(admin_port, "POST", "/devices/0/fault?kind=blackhole", None).status,
        200
    );
    let o = sdctl(&dir, &["--config", "c.yaml", "read", "device", "Hall"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err,
        "sdctl: device Hall (ID: 1): offline; last error: GET /shelly timed out after 2 attempts\n"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("Hall (ID: 1) — offline\n"), "{out}");
}

#[test]
fn sdctl_events_prints_one_json_line_per_event() {
    use smartdev::ModelLibrary;
    use smartdev::emulator::{DeviceSpec, Emulator};
    let dir = TempDir::new("cli-events");
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:
  PingAllowed: false
  ShellyWebhooks: {{Enabled: false, Port: 0}}
  Devices:
    - {{Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}, Outputs: [{{Name: Pump Out, Webhooks: true}}]}}
",
            emu.port(0)
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args([
            "--config",
            "c.yaml",
            "events",
            "--count",
            "2",
            "--timeout",
            "20",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening for webhooks") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "sdctl ended early");
    }
    // The listener installed its hooks on the device before it said so; let the device fire them.
    assert!(emu.webhooks(0).len() >= 2, "{:?}", emu.webhooks(0));
    // The device pushes each event on its socket as well: sdctl may have both from there and be gone before
    // the second webhook is sent, never before the first.
    assert_eq!(emu.fire_event(0, "switch.on", 0), 1);
    let second = emu.fire_event(0, "switch.off", 0);
    let out = child.wait_with_output().unwrap();
    assert!(second <= 1, "{second}");
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0]["Event"], "switch.on", "{stdout}");
    assert_eq!(lines[0]["Component"], "Pump Out");
    assert_eq!(lines[1]["Event"], "switch.off");
    assert_eq!(lines[1]["Device"], "Pump");

    // Waiting for an event that never comes ends with exit code 1.
    let o = Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args([
            "--config",
            "c.yaml",
            "events",
            "--count",
            "1",
            "--timeout",
            "0.3",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sdctl: received 0 of 1 webhook event within 0.3 s; stopped waiting"),
        "says what happened, not a device timeout: {err}"
    );
}

/// Issue 22: a 2PM Gen4 set to its cover profile, configured with only Name, Model and address, is moved by
/// `sdctl cover NAME position 30` (the profile it reports at open decides its components).
#[test]
fn sdctl_moves_the_cover_of_a_bare_2pm_gen4_in_cover_profile() {
    use smartdev::ModelLibrary;
    use smartdev::emulator::{DeviceSpec, Emulator};
    let dir = TempDir::new("cli-bare-cover");
    let mut spec = DeviceSpec::new("Shelly2PMG4");
    spec.profile = Some("cover".into());
    let emu = Emulator::start(vec![spec], &ModelLibrary::embedded()).unwrap();
    dir.write(
        "c.yaml",
        &format!(
            "SmartDevices:
  PingAllowed: false
  Devices:
    - {{Name: Blinds, Model: Shelly2PMG4, Hostname: 127.0.0.1, Port: {}}}
",
            emu.port(0)
        ),
    );
    let o = sdctl(
        &dir,
        &[
            "--config", "c.yaml", "--json", "cover", "Cover 1", "position", "30",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["State"], "opening", "{v}");
    let o = sdctl(&dir, &["--config", "c.yaml", "status"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Profile      cover")
            && text.contains("Cover 1")
            && !text.contains("Mismatch"),
        "{text}"
    );
}
