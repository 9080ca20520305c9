//! A motorised cover (Gen2+ `cover:N`, Gen1 roller, Tasmota shutter): where it is and where it goes, computed
//! from the emulator clock, so tests move it by stepping time.
//!
//! Positions are percent open (0 closed, 100 open) as `f64`; protocols round them. The cover always knows its
//! physical position; "not calibrated" only hides it and refuses positioning, like the real devices.

use super::source::Source;

/// Which way a cover moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Towards 100.
    Open,
    /// Towards 0.
    Close,
}

/// What a cover does now: the library's own type, whose words are Gen2+ `cover:N` `state`'s.
pub use crate::objects::CoverState;

/// A cover as [`super::Emulator::cover`] reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoverReport {
    /// What it does now.
    pub state: CoverState,
    /// Physical position in percent open (also known while the cover is not calibrated).
    pub position: f64,
    /// Where a movement ends, while one runs.
    pub target: Option<f64>,
    /// Whether positioning is possible (Gen2+ `pos_control`, Gen1 `positioning`).
    pub calibrated: bool,
}

/// A running movement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Motion {
    /// Unix seconds when it began.
    pub started: f64,
    pub from: f64,
    pub target: f64,
    pub dir: Direction,
    /// Asked for a position (`GoToPosition`, `to_pos`): the status then shows `target_pos`.
    pub to_position: bool,
    /// Seconds the device gives the movement (`move_timeout`).
    pub timeout: f64,
}

/// What the motor does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Phase {
    Idle,
    Moving(Motion),
    /// Fully open, then fully closed: twice the travel time.
    Calibrating {
        started: f64,
    },
}

/// Why a request to move was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Positioning needs calibration.
    NotCalibrated,
    /// Calibration cannot start (or be repeated) while the cover moves or calibrates.
    Busy,
}

/// One cover.
#[derive(Clone, Debug)]
pub(crate) struct Cover {
    /// Seconds from fully closed to fully open (and back).
    pub travel: f64,
    /// The configured `maxtime_open`/`maxtime_close` (seconds), reported as `move_timeout`.
    pub maxtime: f64,
    pub calibrated: bool,
    /// Position when the phase began (or now, when idle).
    pub pos: f64,
    pub phase: Phase,
    pub last_direction: Option<Direction>,
    pub source: Source,
}

/// Default `maxtime_open`/`maxtime_close` of real Gen2+ covers.
pub(crate) const DEFAULT_MAXTIME: f64 = 60.0;

impl Cover {
    /// A calibrated, closed, idle cover.
    pub(crate) fn new(travel: f64) -> Self {
        Cover {
            travel: if travel.is_finite() && travel > 0.0 {
                travel
            } else {
                1.0
            },
            maxtime: DEFAULT_MAXTIME,
            calibrated: true,
            pos: 0.0,
            phase: Phase::Idle,
            last_direction: None,
            source: Source::Init,
        }
    }

    /// When the current phase ends, or `None` when idle.
    pub(crate) fn finish_time(&self) -> Option<f64> {
        match self.phase {
            Phase::Idle => None,
            Phase::Moving(m) => Some(m.started + (m.target - m.from).abs() / 100.0 * self.travel),
            Phase::Calibrating { started } => Some(started + 2.0 * self.travel),
        }
    }

    /// The next instant after `t` at which the motor changes what it does (a meter's load starts or stops).
    pub(crate) fn next_change(&self, t: f64) -> Option<f64> {
        match self.phase {
            Phase::Calibrating { started } if t < started + self.travel => {
                Some(started + self.travel)
            }
            _ => self.finish_time(),
        }
    }

    /// Which way the motor turns at `t` (`None`: it stands).
    pub(crate) fn turning(&self, t: f64) -> Option<Direction> {
        let end = self.finish_time()?;
        if t >= end {
            return None;
        }
        match self.phase {
            Phase::Idle => None,
            Phase::Moving(m) => Some(m.dir),
            Phase::Calibrating { started } => Some(if t < started + self.travel {
                Direction::Open
            } else {
                Direction::Close
            }),
        }
    }

    /// The position at `t`.
    pub(crate) fn position_at(&self, t: f64) -> f64 {
        match self.phase {
            Phase::Idle => self.pos,
            Phase::Moving(m) => {
                let moved =
                    ((t - m.started).max(0.0) / self.travel * 100.0).min((m.target - m.from).abs());
                match m.dir {
                    Direction::Open => m.from + moved,
                    Direction::Close => m.from - moved,
                }
            }
            Phase::Calibrating { started } => {
                let half = self.travel;
                let e = (t - started).max(0.0);
                if e < half {
                    // Opens from where it was.
                    (self.pos + e / half * 100.0).min(100.0)
                } else {
                    (100.0 - (e - half) / half * 100.0).max(0.0)
                }
            }
        }
    }

    /// Ends a phase that is over by `t`: the cover stands at its target (calibration done: closed).
    pub(crate) fn settle(&mut self, t: f64) {
        let Some(end) = self.finish_time() else {
            return;
        };
        if t < end {
            return;
        }
        match self.phase {
            Phase::Moving(m) => self.pos = m.target,
            Phase::Calibrating { .. } => {
                self.pos = 0.0;
                self.calibrated = true;
                self.last_direction = Some(Direction::Close);
            }
            Phase::Idle => {}
        }
        self.phase = Phase::Idle;
    }

    /// The state at `t` (after [`Cover::settle`]).
    pub(crate) fn state_at(&self, t: f64) -> CoverState {
        match self.phase {
            Phase::Calibrating { .. } => CoverState::Calibrating,
            Phase::Moving(m) if self.finish_time().is_some_and(|e| t < e) => match m.dir {
                Direction::Open => CoverState::Opening,
                Direction::Close => CoverState::Closing,
            },
            _ => {
                let p = self.position_at(t);
                if p >= 100.0 {
                    CoverState::Open
                } else if p <= 0.0 {
                    CoverState::Closed
                } else {
                    CoverState::Stopped
                }
            }
        }
    }

    /// The running movement, if any.
    pub(crate) fn motion(&self) -> Option<Motion> {
        match self.phase {
            Phase::Moving(m) => Some(m),
            _ => None,
        }
    }

    pub(crate) fn report(&self, t: f64) -> CoverReport {
        CoverReport {
            state: self.state_at(t),
            position: self.position_at(t),
            target: self.motion().map(|m| m.target),
            calibrated: self.calibrated,
        }
    }

    /// Moves towards `target` (clamped to 0–100) from where the cover is at `now`; stops it when it is there.
    fn go(&mut self, now: f64, target: f64, to_position: bool, timeout: f64, source: Source) {
        let from = self.position_at(now);
        self.pos = from;
        self.source = source;
        let target = target.clamp(0.0, 100.0);
        if (target - from).abs() < 1e-9 {
            self.phase = Phase::Idle;
            return;
        }
        let dir = if target > from {
            Direction::Open
        } else {
            Direction::Close
        };
        self.last_direction = Some(dir);
        self.phase = Phase::Moving(Motion {
            started: now,
            from,
            target,
            dir,
            to_position,
            timeout,
        });
    }

    /// Open or close fully, or for `duration` seconds. Refused only while calibrating.
    pub(crate) fn drive(
        &mut self,
        now: f64,
        dir: Direction,
        duration: Option<f64>,
        source: Source,
    ) -> Result<(), Refusal> {
        if matches!(self.phase, Phase::Calibrating { .. }) {
            return Err(Refusal::Busy);
        }
        let from = self.position_at(now);
        let span = duration.map_or(100.0, |d| (d / self.travel * 100.0).clamp(0.0, 100.0));
        let target = match dir {
            Direction::Open => from + span,
            Direction::Close => from - span,
        };
        let timeout = duration.unwrap_or(self.maxtime);
        self.go(now, target, false, timeout, source);
        // A command in a direction the cover cannot go still counts as the last direction asked for.
        self.last_direction = Some(dir);
        Ok(())
    }

    /// Moves to a position; needs calibration.
    pub(crate) fn go_to(&mut self, now: f64, pos: f64, source: Source) -> Result<(), Refusal> {
        if !self.calibrated {
            return Err(Refusal::NotCalibrated);
        }
        if matches!(self.phase, Phase::Calibrating { .. }) {
            return Err(Refusal::Busy);
        }
        let timeout = self.maxtime;
        self.go(now, pos, true, timeout, source);
        Ok(())
    }

    /// Stops where the cover is (a calibration in progress is abandoned).
    pub(crate) fn stop(&mut self, now: f64, source: Source) {
        self.pos = self.position_at(now).clamp(0.0, 100.0);
        self.phase = Phase::Idle;
        self.source = source;
    }

    /// Starts calibrating; refused while the cover moves or already calibrates.
    pub(crate) fn calibrate(&mut self, now: f64, source: Source) -> Result<(), Refusal> {
        if !matches!(self.phase, Phase::Idle) {
            return Err(Refusal::Busy);
        }
        self.source = source;
        self.last_direction = Some(Direction::Open);
        self.phase = Phase::Calibrating { started: now };
        Ok(())
    }

    /// Puts the cover at `pos` and stops it (as if moved by hand while unpowered).
    pub(crate) fn place(&mut self, pos: f64) {
        self.pos = pos.clamp(0.0, 100.0);
        self.phase = Phase::Idle;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_over_time_and_stops_at_the_target() {
        let mut c = Cover::new(20.0);
        c.drive(1000.0, Direction::Open, None, Source::Remote)
            .unwrap();
        assert_eq!(c.state_at(1000.0), CoverState::Opening);
        assert!((c.position_at(1005.0) - 25.0).abs() < 1e-9);
        assert_eq!(c.turning(1005.0), Some(Direction::Open));
        assert_eq!(c.finish_time(), Some(1020.0));
        c.settle(1021.0);
        assert_eq!(c.state_at(1021.0), CoverState::Open);
        assert_eq!(c.turning(1021.0), None);
        c.go_to(1030.0, 40.0, Source::Remote).unwrap();
        assert_eq!(c.motion().map(|m| m.target), Some(40.0));
        c.stop(1036.0, Source::Remote);
        assert!((c.pos - 70.0).abs() < 1e-9);
        assert_eq!(c.state_at(1036.0), CoverState::Stopped);
        assert_eq!(c.last_direction, Some(Direction::Close));
    }

    #[test]
    fn calibration_opens_then_closes_and_positioning_needs_it() {
        let mut c = Cover::new(10.0);
        c.calibrated = false;
        assert_eq!(
            c.go_to(0.0, 50.0, Source::Remote),
            Err(Refusal::NotCalibrated)
        );
        c.calibrate(0.0, Source::Remote).unwrap();
        assert_eq!(c.calibrate(1.0, Source::Remote), Err(Refusal::Busy));
        assert_eq!(c.turning(5.0), Some(Direction::Open));
        assert_eq!(c.next_change(5.0), Some(10.0));
        assert_eq!(c.turning(15.0), Some(Direction::Close));
        assert_eq!(c.state_at(15.0), CoverState::Calibrating);
        c.settle(20.0);
        assert!(c.calibrated);
        assert_eq!(c.state_at(20.0), CoverState::Closed);
        c.drive(30.0, Direction::Open, Some(2.5), Source::Remote)
            .unwrap();
        c.settle(40.0);
        assert!((c.pos - 25.0).abs() < 1e-9);
    }
}
