//! The simulated device: state lives in a JSON file the user may edit.
//!
//! Every operation re-reads the file first, so edits are picked up and never lost; a write changes only the
//! fields the operation changed and replaces the file atomically. Read-merge-write holds the file's lock, so
//! processes sharing a file never lose each other's changes; a change by something that does not take the lock
//! (an editor) between our read and our rename is noticed and the operation is redone on the new content. A meter with `MockRate` grows its energy by
//! MockRate Wh per elapsed second (only while its output is on, if it belongs to one); the time of the last
//! update is kept in the file, so the counter is monotonic across restarts.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::simfile::{self, MOCK_TIMESTAMP};
use super::{Driver, OutputAction};
use crate::clock;
use crate::error::{Error, Result};
use crate::light::{LightCaps, LightChange};
use crate::objects::{ComponentKind, CoverAction, CoverState, Device, OutputChange};

/// How often an update is redone when the file keeps changing under it (an editor saving in a loop) before
/// our write goes ahead anyway.
const MAX_ROUNDS: u32 = 5;

/// Drives one simulated device.
pub(crate) struct Simulated {
    file: PathBuf,
    /// What its outputs can do as lights (its model's shape), `None` for relays.
    light: Option<LightCaps>,
}

impl Simulated {
    /// A driver keeping its state in `file`.
    pub(crate) fn new(file: PathBuf) -> Self {
        Simulated { file, light: None }
    }

    /// A driver for a device whose outputs are lights that can do `caps`.
    pub(crate) fn with_light(mut self, caps: Option<LightCaps>) -> Self {
        self.light = caps;
        self
    }

    fn error(&self, dev: &Device, message: String) -> Error {
        Error::Simulation {
            device: dev.label(),
            file: self.file.clone(),
            message,
        }
    }

    /// Runs `op` on the device and the file's document as one critical section: lock, read and merge, operate,
    /// and — when `op` says the document changed — write, unless the file changed under us (then redo).
    fn transaction<T>(
        &self,
        dev: &mut Device,
        mut op: impl FnMut(&Self, &mut Device, &mut Map<String, Value>) -> Result<(T, bool)>,
    ) -> Result<T> {
        let lock = simfile::lock(&self.file).map_err(|m| self.error(dev, m))?;
        let mut rounds = 0;
        loop {
            rounds += 1;
            let seen = simfile::version(&self.file);
            let mut doc = self.load(dev, &lock)?;
            let (out, dirty) = op(self, dev, &mut doc)?;
            if !dirty {
                return Ok(out);
            }
            // Created by `load` just now, or unchanged since we read it: our write loses nothing.
            if seen.is_none() || simfile::version(&self.file) == seen || rounds >= MAX_ROUNDS {
                self.save(dev, &doc, &lock)?;
                return Ok(out);
            }
            log::debug!(
                "device {}: simulation file {} changed while being updated; redoing the update",
                dev.label(),
                self.file.display()
            );
        }
    }

    /// Reads the file into `dev` (creating it from `dev` when missing) and returns the document.
    fn load(&self, dev: &mut Device, lock: &simfile::Lock) -> Result<Map<String, Value>> {
        let now = clock::rfc3339_now();
        match simfile::read(&self.file).map_err(|m| self.error(dev, m))? {
            Some(mut doc) => {
                if simfile::migrate_anchor(&mut doc) {
                    log::info!(
                        "device {}: simulation file {} was written by sc-smart-device; taken as online and marked as migrated (its other values are kept)",
                        dev.label(),
                        self.file.display()
                    );
                    self.save(dev, &doc, lock)?;
                }
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
                self.save(dev, &doc, lock)?;
                Ok(doc)
            }
        }
    }

    fn save(&self, dev: &Device, doc: &Map<String, Value>, lock: &simfile::Lock) -> Result<()> {
        simfile::write_atomic(&self.file, doc, lock).map_err(|m| self.error(dev, m))
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
                Some(oid) => dev
                    .outputs
                    .iter()
                    .any(|o| o.id == oid && o.state == Some(true)),
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
    fn read(&mut self, dev: &mut Device) -> Result<()> {
        self.transaction(dev, |me, dev, doc| {
            if !dev.online {
                return Err(Self::offline(dev));
            }
            Ok(((), me.advance_mock(dev, doc)?))
        })
    }

    fn switch(
        &mut self,
        dev: &mut Device,
        index: usize,
        action: OutputAction,
    ) -> Result<OutputChange> {
        self.transaction(dev, |me, dev, doc| {
            if !dev.online {
                return Err(Self::offline(dev));
            }
            // Energy up to now accrues with the output's old state.
            let mut dirty = me.advance_mock(dev, doc)?;
            let before = dev.outputs[index].state.unwrap_or(false);
            let after = action.apply(before);
            if after != before {
                dev.outputs[index].state = Some(after);
                simfile::set(doc, ComponentKind::Output, index, "State", after.into());
                // Power of MockRate meters follows the new state (no time has passed, so energy stays).
                me.advance_mock(dev, doc)?;
                dirty = true;
            }
            let change = OutputChange {
                state: after,
                did_change: after != before,
            };
            Ok((change, dirty))
        })
    }

    /// A simulated cover moves at once: open → 100 %, close → 0 %, a position → that position (calibrated
    /// covers only, like real ones), stop → stays where it is.
    fn cover(&mut self, dev: &mut Device, index: usize, action: CoverAction) -> Result<()> {
        self.transaction(dev, |me, dev, doc| {
            if !dev.online {
                return Err(Self::offline(dev));
            }
            let c = &dev.covers[index];
            let (state, position) = match action {
                CoverAction::Open => (CoverState::Open, Some(100.0)),
                CoverAction::Close => (CoverState::Closed, Some(0.0)),
                CoverAction::Stop => (CoverState::Stopped, c.position),
                CoverAction::Position(p) => {
                    if c.calibrated != Some(true) {
                        return Err(Error::Unsupported {
                            device: dev.label(),
                            message: format!(
                                "cover '{}' is not calibrated, so it cannot go to a position; calibrate it in the vendor app (or set Calibrated: true in {})",
                                c.name,
                                me.file.display()
                            ),
                        });
                    }
                    let state = match p {
                        0 => CoverState::Closed,
                        100 => CoverState::Open,
                        _ => CoverState::Stopped,
                    };
                    (state, Some(f64::from(p)))
                }
            };
            let c = &mut dev.covers[index];
            // Uncalibrated covers know no position, even at an end stop.
            let position = position.filter(|_| c.calibrated != Some(false));
            c.state = Some(state);
            c.position = position;
            simfile::set(doc, ComponentKind::Cover, index, "State", state.as_str().into());
            if c.calibrated != Some(false) {
                simfile::set(doc, ComponentKind::Cover, index, "Position", position.into());
            }
            Ok(((), true))
        })
    }

    /// A simulated light takes the change at once (a transition is not simulated).
    fn check_light(&self, dev: &Device, _index: usize, change: &LightChange) -> Result<()> {
        let caps = super::light_caps(dev, self.light, &dev.model)?;
        change.check_caps(&caps, &dev.label(), &dev.model)
    }

    fn light(&mut self, dev: &mut Device, index: usize, change: &LightChange) -> Result<()> {
        self.check_light(dev, index, change)?;
        self.transaction(dev, |me, dev, doc| {
            if !dev.online {
                return Err(Self::offline(dev));
            }
            me.advance_mock(dev, doc)?;
            let o = &mut dev.outputs[index];
            let mut set =
                |field: &str, v: Value| simfile::set(doc, ComponentKind::Output, index, field, v);
            if let Some(on) = change.on {
                o.state = Some(on);
                set("State", on.into());
            }
            if let Some(b) = change.brightness {
                o.brightness = Some(b);
                set("Brightness", json_number(Some(b)));
            }
            if let Some(k) = change.temperature {
                o.color_temperature = Some(f64::from(k));
                set("ColorTemperature", k.into());
            }
            if let Some(rgb) = change.rgb {
                o.rgb = Some(rgb);
                set("Rgb", serde_json::json!(rgb));
            }
            if let Some(w) = change.white {
                o.white = Some(w);
                set("White", json_number(Some(w)));
            }
            // Power of MockRate meters follows the new state.
            me.advance_mock(dev, doc)?;
            Ok(((), true))
        })
    }

    /// The file is the truth for simulated devices: webhook events change nothing here.
    fn hook(&mut self, _: &mut Device, _: &[(ComponentKind, usize, bool)], _: bool) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Output;

    fn device() -> Device {
        Device {
            id: 1,
            name: "Sim".into(),
            simulate: true,
            online: true,
            outputs: (0..2)
                .map(|i| Output {
                    component_index: i,
                    ..Output::default()
                })
                .collect(),
            ..Device::default()
        }
    }

    fn folder(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("smartdev-simulated-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_change_made_between_our_read_and_our_write_is_kept_and_the_update_redone() {
        let dir = folder("editor");
        let file = dir.join("Sim.json");
        let sim = Simulated::new(file.clone());
        let mut dev = device();
        sim.read_now(&mut dev).unwrap();
        let mut calls = 0;
        let change = sim
            .transaction(&mut dev, |_, dev, doc| {
                calls += 1;
                if calls == 1 {
                    // An editor that takes no lock saves output 1 on, after we read and before we write.
                    let mut edited = simfile::read(&file).unwrap().unwrap();
                    simfile::set(&mut edited, ComponentKind::Output, 1, "State", true.into());
                    std::fs::write(&file, serde_json::to_string(&edited).unwrap()).unwrap();
                }
                dev.outputs[0].state = Some(true);
                simfile::set(doc, ComponentKind::Output, 0, "State", true.into());
                Ok(((), true))
            })
            .map(|()| calls);
        assert_eq!(change.unwrap(), 2, "the update was not redone");
        let doc = simfile::read(&file).unwrap().unwrap();
        let outputs = doc["Outputs"].as_array().unwrap();
        assert_eq!(outputs[0]["State"], true, "our change");
        assert_eq!(outputs[1]["State"], true, "the editor's change was lost");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn leftover_temporary_files_of_killed_writers_are_removed() {
        let dir = folder("leftover");
        std::fs::create_dir_all(&dir).unwrap();
        let stale = dir.join(".Sim.json.4242.0.tmp");
        std::fs::write(&stale, "{").unwrap();
        let sim = Simulated::new(dir.join("Sim.json"));
        let mut dev = device();
        sim.read_now(&mut dev).unwrap();
        assert!(!stale.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    impl Simulated {
        fn read_now(&self, dev: &mut Device) -> Result<()> {
            self.transaction(dev, |_, _, _| Ok(((), false)))
        }
    }
}
