//! Many threads at once: switching stays consistent, refresh_all fans out, reads never block on writes.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{TempDir, read_json};
use smartdev::{Controller, Identity, Settings};

fn open(dir: &TempDir, devices: usize) -> Controller {
    let mut yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  Devices:\n",
        dir.path().display()
    );
    for d in 0..devices {
        yaml.push_str(&format!(
            "    - {{Name: Dev {d}, Model: Shelly2PMG3, Simulate: true}}\n"
        ));
    }
    Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap()
}

#[test]
fn sixteen_threads_switching_end_in_a_consistent_state() {
    let dir = TempDir::new("threads");
    let ctl = Arc::new(open(&dir, 4));
    let outputs: Vec<i64> = ctl.outputs().iter().map(|o| o.id).collect();
    assert_eq!(outputs.len(), 8);
    let handles: Vec<_> = (0..16u64)
        .map(|t| {
            let ctl = ctl.clone();
            let outputs = outputs.clone();
            std::thread::spawn(move || {
                let mut toggles: HashMap<i64, u32> = HashMap::new();
                let mut x = t * 7919 + 17;
                for _ in 0..60 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let id = outputs[(x >> 33) as usize % outputs.len()];
                    let c = ctl.toggle_output(Identity::Id(id)).unwrap();
                    assert!(c.did_change, "a toggle always changes the state");
                    *toggles.entry(id).or_default() += 1;
                    // Reads from other threads never wait for a switch in progress.
                    let _ = ctl.outputs();
                }
                toggles
            })
        })
        .collect();
    let mut total: HashMap<i64, u32> = HashMap::new();
    for h in handles {
        for (id, n) in h.join().unwrap() {
            *total.entry(id).or_default() += n;
        }
    }
    for o in ctl.outputs() {
        let expected = total.get(&o.id).copied().unwrap_or(0) % 2 == 1;
        assert_eq!(
            o.state,
            Some(expected),
            "output {} toggled {:?} times",
            o.id,
            total.get(&o.id)
        );
        let dev = ctl.device(Identity::Id(o.device_id)).unwrap();
        let file = read_json(dev.simulation_file.as_ref().unwrap());
        assert_eq!(
            file["Outputs"][o.component_index]["State"], expected,
            "file agrees for output {}",
            o.id
        );
    }
    // Setting every output on from many threads: exactly one caller per output sees did_change.
    let changed: u32 = (0..16)
        .map(|_| {
            let ctl = ctl.clone();
            let outputs = outputs.clone();
            std::thread::spawn(move || {
                outputs
                    .iter()
                    .filter(|&&id| {
                        ctl.change_output(Identity::Id(id), true)
                            .unwrap()
                            .did_change
                    })
                    .count() as u32
            })
        })
        .map(|h| h.join().unwrap())
        .sum();
    let were_off = total.values().filter(|n| *n % 2 == 0).count() as u32 + (8 - total.len() as u32);
    assert_eq!(changed, were_off);
    assert!(ctl.outputs().iter().all(|o| o.state == Some(true)));
}

#[test]
fn refresh_all_reports_each_device_and_one_failure_does_not_stop_the_others() {
    let dir = TempDir::new("fanout");
    let ctl = open(&dir, 10);
    std::fs::write(dir.join("Dev_3.json"), "not json").unwrap();
    let report = ctl.refresh_all().unwrap();
    assert_eq!(report.refreshed, 9);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].device_name, "Dev 3");
    assert!(!report.is_ok());
}
