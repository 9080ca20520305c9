//! The one switching rule for devices reached over the network.
//!
//! Only idempotent requests may be retried blindly (a retried toggle clicks a relay twice), so a toggle is
//! never sent: it becomes an absolute set computed from a fresh read of the output. The state before comes
//! from that read, or from the device's own answer where it reports it (Gen2+ `was_on`), never from a guess.

use super::OutputAction;
use crate::error::Result;
use crate::objects::{Device, OutputChange};

/// A device's answer to an absolute set.
pub(crate) struct SetAnswer {
    /// The state before, when the answer says (Gen2+ `was_on`).
    pub was: Option<bool>,
    /// The state after, as the device reports it.
    pub now: bool,
}

/// The two idempotent operations switching is built from.
pub(crate) trait Relay {
    /// Whether [`Relay::set_output`] reports the state before (then an on/off needs no read first).
    fn reports_previous(&self) -> bool;

    /// Reads output `index` (0-based) from the device.
    fn output_state(&mut self, dev: &mut Device, index: usize) -> Result<bool>;

    /// Sets output `index` to `on`. Safe to retry: sending it twice leaves the same state.
    fn set_output(&mut self, dev: &mut Device, index: usize, on: bool) -> Result<SetAnswer>;
}

/// Applies `action` to output `index` by the rule above and records the new state on `dev`.
pub(crate) fn switch(
    relay: &mut dyn Relay,
    dev: &mut Device,
    index: usize,
    action: OutputAction,
) -> Result<OutputChange> {
    let read_first = action == OutputAction::Toggle || !relay.reports_previous();
    let before = if read_first {
        Some(relay.output_state(dev, index)?)
    } else {
        None
    };
    let desired = action.apply(before.unwrap_or(false));
    let answer = relay.set_output(dev, index, desired)?;
    // Our own read wins over `was`: after a retried set, `was` may describe the effect of our first attempt.
    let before = before.or(answer.was).unwrap_or(answer.now);
    if let Some(o) = dev.outputs.get_mut(index) {
        o.state = Some(answer.now);
    }
    Ok(OutputChange {
        state: answer.now,
        did_change: answer.now != before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Output;

    /// A relay that records the requests it gets.
    struct Fake {
        on: bool,
        reports: bool,
        log: Vec<String>,
    }

    impl Relay for Fake {
        fn reports_previous(&self) -> bool {
            self.reports
        }
        fn output_state(&mut self, _: &mut Device, i: usize) -> Result<bool> {
            self.log.push(format!("read {i}"));
            Ok(self.on)
        }
        fn set_output(&mut self, _: &mut Device, i: usize, on: bool) -> Result<SetAnswer> {
            self.log.push(format!("set {i} {on}"));
            let was = self.on;
            self.on = on;
            Ok(SetAnswer {
                was: self.reports.then_some(was),
                now: on,
            })
        }
    }

    fn run(on: bool, reports: bool, action: OutputAction) -> (OutputChange, Vec<String>, bool) {
        let mut dev = Device {
            outputs: vec![Output::default(), Output::default()],
            ..Device::default()
        };
        let mut f = Fake {
            on,
            reports,
            log: Vec::new(),
        };
        let c = switch(&mut f, &mut dev, 1, action).unwrap();
        (c, f.log, dev.outputs[1].state == Some(true))
    }

    #[test]
    fn a_toggle_is_a_read_then_an_absolute_set() {
        for reports in [false, true] {
            let (c, log, state) = run(false, reports, OutputAction::Toggle);
            assert_eq!(log, ["read 1", "set 1 true"]);
            assert!(c.state && c.did_change && state);
            let (c, log, _) = run(true, reports, OutputAction::Toggle);
            assert_eq!(log, ["read 1", "set 1 false"]);
            assert!(!c.state && c.did_change);
        }
    }

    #[test]
    fn on_and_off_read_first_only_when_the_answer_lacks_the_old_state() {
        let (c, log, _) = run(true, true, OutputAction::On);
        assert_eq!(log, ["set 1 true"]);
        assert!(c.state && !c.did_change);
        let (c, log, _) = run(true, false, OutputAction::Off);
        assert_eq!(log, ["read 1", "set 1 false"]);
        assert!(!c.state && c.did_change);
    }
}
