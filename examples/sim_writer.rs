//! Keeps switching the outputs of simulated devices as fast as it can, writing their files each time.
//! Used by the hardening test that kills it with SIGKILL mid-write. `sim_writer FOLDER [DEVICES=5]`

use smartdev::{Controller, Identity, Settings};

fn main() {
    let folder = std::env::args()
        .nth(1)
        .expect("usage: sim_writer FOLDER [DEVICES]");
    let n: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let mut yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{folder}'\n  RefreshInterval: 0\n  Devices:\n"
    );
    for i in 0..n {
        yaml.push_str(&format!(
            "    - {{Name: W{i}, Model: ShellyPlus2PM, Simulate: true, Meters: [{{MockRate: 1}}, {{}}]}}\n"
        ));
    }
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).expect("valid"), None).expect("open");
    println!("ready");
    let outputs = (2 * n) as i64;
    let mut k = 0i64;
    loop {
        ctl.toggle_output(Identity::Id(1 + k % outputs))
            .expect("toggle");
        k += 1;
    }
}
