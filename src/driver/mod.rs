//! Device drivers: one per way of reaching a device, behind one small trait. A driver is owned by the device's
//! worker thread, so it never needs locks.

mod simfile;
pub(crate) mod simulated;

use crate::config::Settings;
use crate::error::Result;
use crate::objects::{Device, OutputChange};

/// What to do with an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputAction {
    /// Switch on.
    On,
    /// Switch off.
    Off,
    /// Switch to the opposite of the current state.
    Toggle,
}

impl OutputAction {
    /// The action that sets `desired`.
    pub fn set(desired: bool) -> Self {
        if desired {
            OutputAction::On
        } else {
            OutputAction::Off
        }
    }

    /// The state after applying this action to `current`.
    pub fn apply(self, current: bool) -> bool {
        match self {
            OutputAction::On => true,
            OutputAction::Off => false,
            OutputAction::Toggle => !current,
        }
    }
}

/// How the worker talks to one device.
pub(crate) trait Driver: Send {
    /// First contact, on the worker thread before any command (e.g. create or load a simulation file).
    fn start(&mut self, dev: &mut Device) -> Result<()>;

    /// Reads the device's current state into `dev`.
    fn refresh(&mut self, dev: &mut Device) -> Result<()>;

    /// Applies `action` to output `index` (0-based channel) and reports the state before and after, as the
    /// device reports them.
    fn switch(
        &mut self,
        dev: &mut Device,
        index: usize,
        action: OutputAction,
    ) -> Result<OutputChange>;
}

/// The driver for a planned device.
pub(crate) fn for_device(dev: &Device, _settings: &Settings) -> Result<Box<dyn Driver>> {
    match &dev.simulation_file {
        Some(file) if dev.simulate => Ok(Box::new(simulated::Simulated::new(file.clone()))),
        _ => Err(crate::Error::Unsupported {
            device: dev.label(),
            message: "only simulated devices (Simulate: true) can be driven in this version".into(),
        }),
    }
}
