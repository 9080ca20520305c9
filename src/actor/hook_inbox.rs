//! Webhook events on their way to a device's worker. The listener posts the state an event implies and
//! whether it may cause a device read; the worker takes everything posted since its last look in one go. Only
//! the latest state per component is kept and at most one wake-up command waits, so a flood of events costs
//! neither inbox slots nor device reads, and the worker stays the only writer of the device.

use std::sync::Mutex;
use std::time::Instant;

use crate::objects::ComponentKind;

/// What waits for one device.
#[derive(Default)]
pub(crate) struct HookInbox(Mutex<Waiting>);

#[derive(Default)]
struct Waiting {
    /// Latest implied state per component.
    states: Vec<(ComponentKind, usize, bool)>,
    /// When each of `states` came (same order): kept apart so `take` hands the states over without a copy.
    arrived: Vec<Instant>,
    /// Some event asked for a device read.
    read: bool,
    /// A `Command::Hook` is on its way to the worker.
    queued: bool,
    /// Latest measured value per (what, channel) a CoIoT status brought.
    measures: Vec<(Measure, usize, f64)>,
}

/// A measured value a status may bring without a read (CoIoT, `coiot/description.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Measure {
    /// Meter power, W.
    Power,
    /// Meter energy, Wh.
    Energy,
    /// The device's own temperature, °C (channel 0).
    DeviceTemperature,
}

impl Measure {
    /// Whether `v` can be a reading (a sensor's "invalid" marker, -1 W or 999 °C, cannot).
    pub(crate) fn plausible(self, v: f64) -> bool {
        v.is_finite()
            && match self {
                Measure::Power => v.abs() < 1e6 && v != -1.0,
                Measure::Energy => (0.0..1e13).contains(&v),
                Measure::DeviceTemperature => (-40.0..=300.0).contains(&v),
            }
    }

    /// Writes a value into the device (the worker's hands only).
    pub(crate) fn apply(self, dev: &mut crate::objects::Device, channel: usize, v: f64) {
        match self {
            Measure::Power => {
                if let Some(m) = dev.meters.get_mut(channel) {
                    m.power = Some(v);
                }
            }
            Measure::Energy => {
                if let Some(m) = dev.meters.get_mut(channel) {
                    m.energy = Some(v);
                }
            }
            // Only where a read showed that the device reports it (models without temperature monitoring).
            Measure::DeviceTemperature => {
                if dev.temperature.is_some() {
                    dev.temperature = Some(v);
                    let outputs = dev.outputs.iter_mut().map(|o| &mut o.temperature);
                    let covers = dev.covers.iter_mut().map(|c| &mut c.temperature);
                    for t in outputs.chain(covers).filter(|t| t.is_some()) {
                        *t = Some(v);
                    }
                }
            }
        }
    }
}

impl Waiting {
    /// The latest state per component; a read asked stays asked until taken.
    fn keep(&mut self, kind: ComponentKind, index: usize, state: Option<bool>, read: bool) {
        if let Some(on) = state {
            let now = Instant::now();
            match self
                .states
                .iter()
                .position(|(k, i, _)| *k == kind && *i == index)
            {
                Some(n) => (self.states[n].2, self.arrived[n]) = (on, now),
                None => {
                    self.states.push((kind, index, on));
                    self.arrived.push(now);
                }
            }
        }
        self.read |= read;
    }
}

/// What a post asks of the caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Post {
    /// Send the worker a `Command::Hook`; call [`HookInbox::unqueue`] if that fails.
    Wake,
    /// A command is already on its way; it will take this event too.
    Queued,
}

impl HookInbox {
    /// Whether a device read is already asked for (then another event need not spend a read budget).
    pub(crate) fn read_asked(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).read
    }

    /// Posts an event's implied state (if any) and whether it may cause a read.
    pub(crate) fn post(
        &self,
        kind: ComponentKind,
        index: usize,
        state: Option<bool>,
        read: bool,
    ) -> Post {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.keep(kind, index, state, read);
        if std::mem::replace(&mut w.queued, true) {
            Post::Queued
        } else {
            Post::Wake
        }
    }

    /// Records a state (and whether it asks for a read) without claiming the wake-up: the caller wakes the
    /// worker later (a device held to its limits), or another post does.
    pub(crate) fn stash(&self, kind: ComponentKind, index: usize, state: Option<bool>, read: bool) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keep(kind, index, state, read);
    }

    /// The wake-up could not be sent (the worker's inbox is full): the next post tries again, and the worker
    /// takes what waits here with its next command anyway.
    pub(crate) fn unqueue(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).queued = false;
    }

    /// Records measured values (latest per value) without claiming the wake-up, like [`HookInbox::stash`].
    pub(crate) fn stash_measures(&self, measures: &[(Measure, usize, f64)]) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for &(what, channel, v) in measures {
            match w
                .measures
                .iter_mut()
                .find(|(m, c, _)| *m == what && *c == channel)
            {
                Some(x) => x.2 = v,
                None => w.measures.push((what, channel, v)),
            }
        }
    }

    /// Takes the measured values posted.
    pub(crate) fn take_measures(&self) -> Vec<(Measure, usize, f64)> {
        std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).measures)
    }

    /// Takes everything posted: the states and whether a read was asked for.
    pub(crate) fn take(&self) -> (Vec<(ComponentKind, usize, bool)>, bool) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.queued = false;
        w.arrived.clear();
        (std::mem::take(&mut w.states), std::mem::take(&mut w.read))
    }

    /// The worker's command set the component's state as of `answered` (when the device's answer came): a state
    /// that came before it is older than that answer and is dropped; one that came after stays.
    pub(crate) fn forget_older(&self, kind: ComponentKind, index: usize, answered: Instant) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let older = w
            .states
            .iter()
            .zip(&w.arrived)
            .position(|((k, i, _), at)| *k == kind && *i == index && *at <= answered);
        // One entry per component at most (`keep`).
        if let Some(n) = older {
            w.states.remove(n);
            w.arrived.remove(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_older_than_an_answer_is_forgotten_and_a_newer_one_and_other_components_stay() {
        let inbox = HookInbox::default();
        inbox.stash(ComponentKind::Output, 0, Some(true), false);
        inbox.stash(ComponentKind::Input, 0, Some(true), false);
        let answered = Instant::now();
        inbox.stash(ComponentKind::Output, 1, Some(true), false);
        inbox.forget_older(ComponentKind::Output, 0, answered);
        inbox.forget_older(ComponentKind::Output, 1, answered);
        let (states, _) = inbox.take();
        assert_eq!(
            states,
            [
                (ComponentKind::Input, 0, true),
                (ComponentKind::Output, 1, true)
            ]
        );
        // A newer state of the same component replaces the older one and takes its time.
        inbox.stash(ComponentKind::Output, 0, Some(false), false);
        let answered = Instant::now();
        inbox.stash(ComponentKind::Output, 0, Some(true), false);
        inbox.forget_older(ComponentKind::Output, 0, answered);
        assert_eq!(inbox.take().0, [(ComponentKind::Output, 0, true)]);
    }

    #[test]
    fn measures_keep_the_latest_per_value_and_apply_only_where_known() {
        let inbox = HookInbox::default();
        inbox.stash_measures(&[(Measure::Power, 0, 10.0), (Measure::Energy, 0, 5.0)]);
        inbox.stash_measures(&[(Measure::Power, 0, 12.0), (Measure::Power, 3, 1.0)]);
        let taken = inbox.take_measures();
        assert_eq!(
            taken,
            vec![
                (Measure::Power, 0, 12.0),
                (Measure::Energy, 0, 5.0),
                (Measure::Power, 3, 1.0)
            ]
        );
        assert!(inbox.take_measures().is_empty());
        let mut dev = crate::objects::Device {
            meters: vec![crate::objects::Meter::default()],
            outputs: vec![crate::objects::Output::default()],
            ..Default::default()
        };
        for (what, channel, v) in taken {
            // Channel 3 does not exist: nothing happens.
            what.apply(&mut dev, channel, v);
        }
        assert_eq!(
            (dev.meters[0].power, dev.meters[0].energy),
            (Some(12.0), Some(5.0))
        );
        // A device whose reads never showed a temperature gets none from CoIoT either.
        Measure::DeviceTemperature.apply(&mut dev, 0, 40.0);
        assert_eq!(dev.temperature, None);
        dev.temperature = Some(30.0);
        dev.outputs[0].temperature = Some(30.0);
        Measure::DeviceTemperature.apply(&mut dev, 0, 40.0);
        assert_eq!(
            (dev.temperature, dev.outputs[0].temperature),
            (Some(40.0), Some(40.0))
        );
        assert!(!Measure::DeviceTemperature.plausible(999.0));
        assert!(!Measure::Power.plausible(-1.0));
        assert!(Measure::Power.plausible(-250.0));
        assert!(!Measure::Energy.plausible(f64::NAN));
    }

    #[test]
    fn a_flood_is_one_wake_up_with_the_latest_state_per_component() {
        let inbox = HookInbox::default();
        assert_eq!(
            inbox.post(ComponentKind::Input, 0, Some(true), true),
            Post::Wake
        );
        for n in 0..1000 {
            let on = n % 2 == 1;
            assert_eq!(
                inbox.post(ComponentKind::Input, 0, Some(on), false),
                Post::Queued
            );
        }
        assert_eq!(
            inbox.post(ComponentKind::Output, 1, Some(true), false),
            Post::Queued
        );
        assert!(inbox.read_asked());
        let (states, read) = inbox.take();
        assert_eq!(
            states,
            vec![
                (ComponentKind::Input, 0, true),
                (ComponentKind::Output, 1, true)
            ]
        );
        assert!(read);
        assert!(!inbox.read_asked());
        // Stashed: kept, but the wake-up is left to the caller.
        inbox.stash(ComponentKind::Output, 0, Some(false), true);
        assert_eq!(
            inbox.take(),
            (vec![(ComponentKind::Output, 0, false)], true)
        );
        // After the worker took them, the next event wakes it again.
        assert_eq!(inbox.post(ComponentKind::Input, 0, None, false), Post::Wake);
        inbox.unqueue();
        assert_eq!(inbox.post(ComponentKind::Input, 0, None, false), Post::Wake);
    }
}
