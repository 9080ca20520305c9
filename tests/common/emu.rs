//! Running the controller against the in-process device emulator.

use smartdev::emulator::{DeviceSpec, Emulator};
use smartdev::{Controller, ModelLibrary, Settings};

/// One configured device pointing at an emulated one: (YAML device block without the port, spec).
pub struct Emulated {
    pub emu: Emulator,
    pub ctl: Controller,
}

/// Timing used by the tests: short timeouts so faults resolve quickly.
pub const FAST: &str = "  ResponseTimeout: 0.4\n  RetryCount: 2\n  RetryDelay: 0.05\n  PingAllowed: false\n  FollowMoves: false\n";

/// Starts the emulator with `specs` and opens a controller whose devices are `blocks[i]` with
/// `Hostname: 127.0.0.1` and `Port:` of emulated device i appended. `extra` goes into the root block.
pub fn start(specs: Vec<DeviceSpec>, blocks: &[&str], extra: &str) -> Emulated {
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator starts");
    let ctl = open(&emu, blocks, extra).expect("controller opens");
    Emulated { emu, ctl }
}

/// The settings for `blocks` against `emu`.
pub fn settings(emu: &Emulator, blocks: &[&str], extra: &str) -> Settings {
    // No background refreshes unless the test asks for them: they would add requests to the counts.
    let refresh = if extra.contains("RefreshInterval") {
        ""
    } else {
        "  RefreshInterval: 0\n"
    };
    // `extra` may override a FAST setting.
    let fast: String = FAST
        .lines()
        .filter(|l| {
            let key = l.trim().split(':').next().unwrap_or_default();
            !extra.contains(&format!("{key}:"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    // No CoIoT listener unless the test asks: 5683 is one port for every test, and its fetch of `/cit/d`
    // would add requests to the counts.
    let coiot = if extra.contains("CoIoT") {
        ""
    } else {
        "  CoIoT: false\n"
    };
    let mut yaml = format!("SmartDevices:\n{fast}{refresh}{coiot}{extra}  Devices:\n");
    for (i, b) in blocks.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{{b}, Hostname: 127.0.0.1, Port: {}}}\n",
            emu.port(i)
        ));
    }
    Settings::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// Opens a controller for `blocks` against `emu`.
pub fn open(emu: &Emulator, blocks: &[&str], extra: &str) -> smartdev::Result<Controller> {
    Controller::open(settings(emu, blocks, extra), None)
}

/// Asserts that `got` is within `tol` of `want`.
#[track_caller]
pub fn near(got: Option<f64>, want: f64, tol: f64) {
    let g = got.unwrap_or_else(|| panic!("expected {want}, got None"));
    assert!((g - want).abs() <= tol, "expected {want} ± {tol}, got {g}");
}
