//! Tests' walk over every Gen2+ model of the library in one emulator: each device idle, then every output
//! switched on, every meter loaded, the first input on and two minutes passed (what a status shows changes
//! in every part).

use super::device::Device;
use super::{DeviceSpec, EmuClock, Emulator};
use crate::ModelLibrary;
use crate::models::Protocol;

/// Calls `check(model, device, round)` for every Gen2+ model, in round 0 idle and in round 1 loaded.
pub(crate) fn each_rpc_model_idle_then_loaded(mut check: impl FnMut(&str, &Device, usize)) {
    let lib = ModelLibrary::embedded();
    let models: Vec<&str> = lib
        .models()
        .iter()
        .filter(|m| m.protocol == Protocol::Rpc)
        .map(|m| m.model.as_str())
        .collect();
    assert!(models.len() > 20, "{models:?}");
    let clock = EmuClock::manual();
    let specs = models.iter().map(|m| DeviceSpec::new(m)).collect();
    let emu = Emulator::start_with_clock(specs, &lib, clock.clone()).unwrap();
    for round in 0..2 {
        if round == 1 {
            for i in 0..models.len() {
                let (outputs, meters) = {
                    let s = emu.dev(i).state();
                    (s.outputs.len(), s.meters.len())
                };
                for o in 0..outputs {
                    emu.set_output(i, o, true);
                }
                for m in 0..meters {
                    emu.set_load(i, m, 123.4 + m as f64);
                }
                // Refused by a device without inputs, or whose first input is a button.
                let _ = emu.dev(i).set_input(0, true);
            }
            clock.advance(std::time::Duration::from_secs(125));
        }
        for (i, model) in models.iter().enumerate() {
            check(model, emu.dev(i), round);
        }
    }
}
