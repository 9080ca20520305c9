//! The simulated device: state lives in a JSON file the user may edit.
//!
//! Every operation re-reads the file first, so edits are picked up and never lost; a write changes only the
//! fields the operation changed and replaces the file atomically. A meter with `MockRate` grows its energy by
//! MockRate Wh per elapsed second (only while its output is on, if it belongs to one); the time of the last
//! update is kept in the file, so the counter is monotonic across restarts.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::simfile::{self, MOCK_TIMESTAMP};
use super::{Driver, OutputAction};
use crate::clock;
use crate::error::{Error, Result};
use crate::objects::{ComponentKind, Device, OutputChange};

/// Drives one simulated device.
pub(crate) struct Simulated {
    file: PathBuf,
}

impl Simulated {
    /// A driver keeping its state in `file`.
    pub(crate) fn new(file: PathBuf) -> Self {
        Simulated { file }
    }

    fn error(&self, dev: &Device, message: String) -> Error {
        Error::Simulation {
            device: dev.label(),
            file: self.file.clone(),
            message,
        }
    }

    /// Reads the file into `dev` (creating it from `dev` when missing) and returns the document.
    fn load(&self, dev: &mut Device) -> Result<Map<String, Value>> {
        let now = clock::rfc3339_now();
        match simfile::read(&self.file).map_err(|m| self.error(dev, m))? {
            Some(doc) => {
                simfile::merge(&doc, dev, &now).map_err(|m| self.error(dev, m))?;
                Ok(doc)
            }
            None => {
                dev.online = true;
                let mut doc = simfile::document(dev);
                let ts = clock::unix_now();
                for m in dev
                    .meters
                    .iter()
                    .filter(|m| m.mock_rate.is_some_and(|r| r > 0.0))
                {
                    simfile::set(
                        &mut doc,
                        ComponentKind::Meter,
                        m.component_index,
                        MOCK_TIMESTAMP,
                        ts.into(),
                    );
                }
                self.save(dev, &doc)?;
                Ok(doc)
            }
        }
    }

    fn save(&self, dev: &Device, doc: &Map<String, Value>) -> Result<()> {
        simfile::write_atomic(&self.file, doc).map_err(|m| self.error(dev, m))
    }

    /// Advances MockRate meters to now and records their new values in `doc`. Returns whether anything changed.
    fn advance_mock(&self, dev: &mut Device, doc: &mut Map<String, Value>) -> Result<bool> {
        let now = clock::unix_now();
        let mut changed = false;
        for i in 0..dev.meters.len() {
            let Some(rate) = dev.meters[i].mock_rate.filter(|r| *r > 0.0) else {
                continue;
            };
            let since = simfile::mock_timestamp(doc, i).map_err(|m| self.error(dev, m))?;
            let running = match dev.meters[i].output_id {
                Some(oid) => dev.outputs.iter().any(|o| o.id == oid && o.state),
                None => true,
            };
            let meter = &mut dev.meters[i];
            // A clock that went backwards adds nothing rather than subtracting.
            let elapsed = since.map_or(0.0, |t| (now - t).max(0.0));
            if running {
                meter.energy = Some(meter.energy.unwrap_or(0.0) + rate * elapsed);
                meter.power = Some(rate * 3600.0);
            } else {
                meter.energy = Some(meter.energy.unwrap_or(0.0));
                meter.power = Some(0.0);
            }
            let ci = meter.component_index;
            simfile::set(
                doc,
                ComponentKind::Meter,
                ci,
                "Energy",
                json_number(meter.energy),
            );
            simfile::set(
                doc,
                ComponentKind::Meter,
                ci,
                "Power",
                json_number(meter.power),
            );
            simfile::set(doc, ComponentKind::Meter, ci, MOCK_TIMESTAMP, now.into());
            changed = true;
        }
        dev.update_totals();
        Ok(changed)
    }

    fn offline(dev: &Device) -> Error {
        Error::Offline {
            device: dev.label(),
        }
    }
}

fn json_number(v: Option<f64>) -> Value {
    v.and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

impl Driver for Simulated {
    /// A file has no timeouts, so `attempts` does not matter here.
    fn read(&mut self, dev: &mut Device, _attempts: Option<u32>) -> Result<()> {
        let mut doc = self.load(dev)?;
        if !dev.online {
            return Err(Self::offline(dev));
        }
        if self.advance_mock(dev, &mut doc)? {
            self.save(dev, &doc)?;
        }
        Ok(())
    }

    fn switch(
        &mut self,
        dev: &mut Device,
        index: usize,
        action: OutputAction,
    ) -> Result<OutputChange> {
        let mut doc = self.load(dev)?;
        if !dev.online {
            return Err(Self::offline(dev));
        }
        // Energy up to now accrues with the output's old state.
        let mut dirty = self.advance_mock(dev, &mut doc)?;
        let before = dev.outputs[index].state;
        let after = action.apply(before);
        if after != before {
            dev.outputs[index].state = after;
            simfile::set(
                &mut doc,
                ComponentKind::Output,
                index,
                "State",
                after.into(),
            );
            // Power of MockRate meters follows the new state (no time has passed, so energy stays).
            self.advance_mock(dev, &mut doc)?;
            dirty = true;
        }
        if dirty {
            self.save(dev, &doc)?;
        }
        Ok(OutputChange {
            state: after,
            did_change: after != before,
        })
    }
}
