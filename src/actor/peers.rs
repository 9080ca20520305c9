//! What a worker may know of the other devices: the last published state of their outputs, for a probe or
//! sensor whose `RequiresOutput` names an output of another device (a pool pump on one device, its pipe probe
//! on another). Read-only: the worker of that device stays the only writer of it.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::slot::{Slot, snapshot};
use crate::objects::Device;

/// Every device's published slot (set once all workers run) and where each output lives.
#[derive(Default)]
pub(crate) struct Peers {
    slots: OnceLock<Vec<Slot>>,
    outputs: HashMap<String, (usize, usize)>,
}

impl Peers {
    /// Output names of the planned devices (names are unique across the installation).
    pub(crate) fn new(devices: &[Device]) -> Self {
        let outputs = devices
            .iter()
            .enumerate()
            .flat_map(|(di, d)| {
                d.outputs
                    .iter()
                    .enumerate()
                    .map(move |(ci, o)| (o.name.clone(), (di, ci)))
            })
            .collect();
        Peers {
            slots: OnceLock::new(),
            outputs,
        }
    }

    /// Called once every worker has its slot.
    pub(crate) fn connect(&self, slots: Vec<Slot>) {
        let _ = self.slots.set(slots);
    }

    /// Whether output `name` is on as last published; `None` before the slots are connected or when the
    /// state is unknown (then a gated reading is not updated).
    pub(crate) fn output_on(&self, name: &str) -> Option<bool> {
        let (di, ci) = *self.outputs.get(name)?;
        let slot = self.slots.get()?.get(di)?;
        snapshot(slot).outputs.get(ci)?.state
    }

    /// Restores `before`'s readings of probes and sensors whose required output belongs to another device and
    /// is not known to be on.
    pub(crate) fn gate(&self, dev: &mut Device, before: &Device) {
        let remote_off = |req: &Option<String>, dev: &Device| {
            req.as_ref().is_some_and(|r| {
                !dev.outputs.iter().any(|o| &o.name == r) && self.output_on(r) != Some(true)
            })
        };
        for i in 0..dev.temp_probes.len().min(before.temp_probes.len()) {
            if remote_off(&dev.temp_probes[i].requires_output, dev) {
                dev.temp_probes[i].temperature = before.temp_probes[i].temperature;
                dev.temp_probes[i].last_reading_time =
                    before.temp_probes[i].last_reading_time.clone();
            }
        }
        for i in 0..dev.sensors.len().min(before.sensors.len()) {
            if remote_off(&dev.sensors[i].requires_output, dev) {
                dev.sensors[i].value = before.sensors[i].value;
                dev.sensors[i].last_reading_time = before.sensors[i].last_reading_time.clone();
            }
        }
    }

    /// Whether any of `dev`'s probes or sensors waits on another device's output.
    pub(crate) fn matters_for(dev: &Device) -> bool {
        let remote = |req: &Option<String>| {
            req.as_ref()
                .is_some_and(|r| !dev.outputs.iter().any(|o| &o.name == r))
        };
        dev.temp_probes.iter().any(|p| remote(&p.requires_output))
            || dev.sensors.iter().any(|s| remote(&s.requires_output))
    }
}
