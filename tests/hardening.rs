//! Fault hardening: processes killed while writing simulation files, slow-loris webhook clients, and 1,000
//! concurrent switch calls across 50 devices.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::TempDir;
use smartdev::{Controller, Identity, Settings, WakeFlag};

/// Builds and locates `examples/sim_writer`.
fn sim_writer() -> PathBuf {
    common::cargo_build(&["--example", "sim_writer"]).join("examples/sim_writer")
}

#[test]
fn simulation_files_stay_valid_json_when_the_writer_is_killed() {
    let exe = sim_writer();
    let dir = TempDir::new("sigkill");
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..50 {
        let mut child = Command::new(&exe)
            .arg(dir.path())
            .arg("5")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until it writes, then kill it at a random moment of its write loop.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "round {round}");
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 40_000));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".json") {
                let text = std::fs::read_to_string(e.path()).unwrap();
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|err| {
                    panic!("round {round}: {name} is not valid JSON ({err}): {text:?}")
                });
                assert!(v.is_object(), "round {round}: {name}");
            } else {
                // Per-writer temporary files (`.<name>.json.<pid>.<n>.tmp`) and the lock files.
                assert!(
                    name.starts_with('.')
                        && (name.ends_with(".tmp") || name.ends_with(".json.lock")),
                    "unexpected file {name}"
                );
            }
        }
    }
    // A writer killed mid-write leaves at most one temporary file per device (the next writer removes it),
    // never a broken file in use: 5 files, 5 locks, at most 5 temporary files.
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(files <= 15, "{files} files");
    // And the next run reads everything back.
    let mut yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  Devices:\n",
        dir.path().display()
    );
    for i in 0..5 {
        yaml.push_str(&format!(
            "    - {{Name: W{i}, Model: ShellyPlus2PM, Simulate: true}}\n"
        ));
    }
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    assert!(ctl.refresh_all().unwrap().is_ok());
}

#[test]
fn slow_loris_clients_do_not_stop_valid_webhooks() {
    let wake = WakeFlag::new();
    let ctl = Controller::open(
        Settings::from_yaml_str("SmartDevices:\n  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n  Devices: []\n").unwrap(),
        Some(wake.clone()),
    )
    .unwrap();
    let addr: SocketAddr = ctl.webhook_address().unwrap();
    // 200 connections that start a request and never finish it, and 50 that send nothing at all.
    let mut loris = Vec::new();
    for i in 0..250 {
        let mut s = TcpStream::connect(addr).unwrap();
        if i < 200 {
            s.write_all(b"GET /shelly/webhook?Event=swi").unwrap();
        }
        loris.push(s);
    }
    for n in 0..20 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!(
            "GET /shelly/webhook?Event=switch.on&n={n} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    assert!(wake.is_set());
    assert_eq!(ctl.webhook_queue_stats().waiting, 20);
    drop(loris);
    ctl.close();
}

#[test]
fn a_thousand_concurrent_switches_across_fifty_devices() {
    let dir = TempDir::new("thousand");
    let mut yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0.05\n  Devices:\n",
        dir.path().display()
    );
    for d in 0..50 {
        yaml.push_str(&format!(
            "    - {{Name: S{d}, Model: ShellyPlus2PM, Simulate: true}}\n"
        ));
    }
    let ctl = Arc::new(Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap());
    // 16 threads × 64 calls = 1,024 toggles over 100 outputs; with background refreshes running too.
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let ctl = ctl.clone();
            std::thread::spawn(move || {
                let mut counts = vec![0u32; 101];
                let mut x = t
                    .wrapping_mul(2_862_933_555_777_941_757)
                    .wrapping_add(3_037_000_493);
                for _ in 0..64 {
                    x ^= x >> 33;
                    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
                    let id = 1 + (x % 100) as i64;
                    let c = ctl.toggle_output(Identity::Id(id)).unwrap();
                    assert!(c.did_change);
                    counts[id as usize] += 1;
                }
                counts
            })
        })
        .collect();
    let mut total = vec![0u32; 101];
    for t in threads {
        for (i, n) in t
            .join()
            .expect("no thread panicked or deadlocked")
            .into_iter()
            .enumerate()
        {
            total[i] += n;
        }
    }
    assert_eq!(total.iter().sum::<u32>(), 1024);
    for o in ctl.outputs() {
        assert_eq!(
            o.state,
            Some(total[o.id as usize] % 2 == 1),
            "output {}",
            o.id
        );
    }
    // The files agree after a fresh read.
    assert!(ctl.refresh_all().unwrap().is_ok());
    for o in ctl.outputs() {
        assert_eq!(
            o.state,
            Some(total[o.id as usize] % 2 == 1),
            "output {} after refresh",
            o.id
        );
    }
}
