//! Mutable device state: outputs, inputs, meters (energy accumulated over the emulator clock), covers, sensor
//! readings, temperature and installed webhooks. Protocol modules render it; they never store anything of their
//! own.

use super::MeterReading;
use super::cover::{Cover, Direction};
use super::history::{Cell, History};
use super::layout::{Layout, MeterLink};
use super::sensors::{self, AddonSensor, Reading};
pub(crate) use super::source::Source;
use super::webhooks::HookStore;
use crate::models::MeterSource;

/// How an input is configured (Gen2+ `input:N` `type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputType {
    /// A switch: the status `state` is its position.
    #[default]
    Switch,
    /// A momentary button: the status `state` is `null`; presses are events (`input.button_push`, ...).
    Button,
}

impl InputType {
    /// The RPC name (`switch`, `button`).
    pub fn as_str(self) -> &'static str {
        match self {
            InputType::Switch => "switch",
            InputType::Button => "button",
        }
    }
}

/// One meter's settings and counters.
#[derive(Clone, Debug)]
pub(crate) struct Meter {
    /// Load in W while flowing; negative = export.
    pub power: f64,
    pub voltage: f64,
    pub current: f64,
    pub pf: f64,
    pub freq: f64,
    pub energy_wh: f64,
    pub returned_wh: f64,
    /// Energy at emulator start (Tasmota `Today`).
    pub start_wh: f64,
    /// mWh of the last three complete minutes, newest first.
    pub by_minute: [f64; 3],
    pub ret_by_minute: [f64; 3],
    minute_wh: f64,
    ret_minute_wh: f64,
    /// Lowest and highest current in the minute so far.
    minute_amps: Option<(f64, f64)>,
}

impl Meter {
    fn new() -> Self {
        let mut m = Meter {
            power: 0.0,
            voltage: 230.1,
            current: 0.0,
            pf: 0.95,
            freq: 50.0,
            energy_wh: 0.0,
            returned_wh: 0.0,
            start_wh: 0.0,
            by_minute: [0.0; 3],
            ret_by_minute: [0.0; 3],
            minute_wh: 0.0,
            ret_minute_wh: 0.0,
            minute_amps: None,
        };
        m.set_load(100.0);
        m
    }

    /// Sets the load; current follows from P / (V · pf).
    pub(crate) fn set_load(&mut self, watts: f64) {
        self.power = watts;
        let va = self.voltage * if self.pf > 0.0 { self.pf } else { 1.0 };
        self.current = if va > 0.0 { watts.abs() / va } else { 0.0 };
    }

    pub(crate) fn set_reading(&mut self, r: &MeterReading) {
        self.power = r.power;
        self.voltage = r.voltage;
        self.current = r.current;
        self.pf = r.pf;
        self.energy_wh = r.energy_wh;
        self.returned_wh = r.returned_wh;
        self.start_wh = r.energy_wh;
    }

    fn add(&mut self, watts: f64, hours: f64) {
        let amps = if watts == 0.0 { 0.0 } else { self.current };
        self.minute_amps = Some(match self.minute_amps {
            Some((lo, hi)) => (lo.min(amps), hi.max(amps)),
            None => (amps, amps),
        });
        let wh = watts * hours;
        if wh >= 0.0 {
            self.energy_wh += wh;
            self.minute_wh += wh;
        } else {
            self.returned_wh -= wh;
            self.ret_minute_wh -= wh;
        }
    }

    /// Ends the minute: the last three minutes move on, and the minute's record cell is returned.
    fn close_minute(&mut self) -> Cell {
        let (i_min, i_max) = self.minute_amps.take().unwrap_or((0.0, 0.0));
        let cell = Cell {
            wh: self.minute_wh,
            ret_wh: self.ret_minute_wh,
            v_min: self.voltage,
            v_max: self.voltage,
            i_min,
            i_max,
        };
        self.by_minute = [
            self.minute_wh * 1000.0,
            self.by_minute[0],
            self.by_minute[1],
        ];
        self.ret_by_minute = [
            self.ret_minute_wh * 1000.0,
            self.ret_by_minute[0],
            self.ret_by_minute[1],
        ];
        self.minute_wh = 0.0;
        self.ret_minute_wh = 0.0;
        cell
    }
}

/// A meter as reported now: power, current and pf are zero while no load flows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MeterView {
    pub power: f64,
    pub voltage: f64,
    pub current: f64,
    pub pf: f64,
    pub freq: f64,
    pub energy_wh: f64,
    pub returned_wh: f64,
    pub today_wh: f64,
    pub by_minute: [f64; 3],
    pub ret_by_minute: [f64; 3],
    /// Start of the current minute (Unix seconds).
    pub minute_ts: i64,
}

/// What a device starts with besides its layout.
#[derive(Clone, Debug, Default)]
pub(crate) struct Extras {
    pub probes: Vec<String>,
    pub sensors: Vec<AddonSensor>,
    /// Seconds a cover takes from closed to open.
    pub travel: f64,
    /// Length of an energy record (60 s; 300 s on the 3EM-63 Gen3; 600 s on Gen1 EM/3EM).
    pub record_period: i64,
}

/// Everything that changes while a device runs.
#[derive(Debug)]
pub(crate) struct DeviceState {
    pub layout: Layout,
    pub outputs: Vec<bool>,
    pub sources: Vec<Source>,
    /// Light outputs: brightness in percent.
    pub brightness: Vec<u8>,
    /// Light outputs: colour temperature in K (within the light's range).
    pub ct: Vec<u32>,
    /// Light outputs: red, green, blue.
    pub rgb: Vec<[u8; 3]>,
    /// Light outputs: white channel, 0–255.
    pub white: Vec<u8>,
    pub inputs: Vec<bool>,
    pub input_types: Vec<InputType>,
    pub meters: Vec<Meter>,
    pub covers: Vec<Cover>,
    pub sensors: Vec<Reading>,
    /// Battery charge in percent (battery devices).
    pub battery: f64,
    /// Device (chip/switch) temperature in °C.
    pub temperature: f64,
    pub hooks: HookStore,
    /// Energy records, on meters that keep them (`history.rs`).
    pub history: Option<History>,
    record_period: i64,
    /// Tasmota `POWER` texts for on and off.
    pub power_text: [String; 2],
    /// Unix seconds when the device (re)started.
    pub started_unix: f64,
    travel: f64,
    /// Unix seconds up to which energy is accounted; "now" for one answer.
    clock: f64,
}

impl DeviceState {
    pub(crate) fn new(layout: Layout, extras: &Extras, now_unix: f64) -> Self {
        let sensors = sensors::build(&layout.builtin, &extras.probes, &extras.sensors);
        let mut s = DeviceState {
            outputs: Vec::new(),
            sources: Vec::new(),
            brightness: Vec::new(),
            ct: Vec::new(),
            rgb: Vec::new(),
            white: Vec::new(),
            inputs: Vec::new(),
            input_types: Vec::new(),
            meters: Vec::new(),
            covers: Vec::new(),
            sensors,
            battery: 86.0,
            layout,
            temperature: 45.0,
            hooks: HookStore::default(),
            history: None,
            record_period: if extras.record_period > 0 {
                extras.record_period
            } else {
                60
            },
            power_text: ["ON".into(), "OFF".into()],
            started_unix: now_unix,
            travel: extras.travel,
            clock: now_unix,
        };
        s.build_components();
        s
    }

    /// Fresh outputs, inputs, meters and covers for the layout (power-on state).
    fn build_components(&mut self) {
        let l = &self.layout;
        self.outputs = vec![false; l.outputs];
        self.sources = vec![Source::Init; l.outputs];
        self.brightness = vec![50; l.outputs];
        // Mid-range white, full-white colour: what a new bulb shows.
        let ct = l
            .light
            .and_then(|c| c.temperature)
            .map_or(4000, |[lo, hi]| (lo + hi) / 200 * 100);
        self.ct = vec![ct; l.outputs];
        self.rgb = vec![[255, 255, 255]; l.outputs];
        self.white = vec![0; l.outputs];
        self.inputs = vec![false; l.inputs];
        self.input_types = vec![InputType::Switch; l.inputs];
        self.meters = (0..l.meters).map(|_| Meter::new()).collect();
        self.covers = (0..l.covers).map(|_| Cover::new(self.travel)).collect();
        let keeps = matches!(
            l.meter_source,
            MeterSource::Em | MeterSource::Em1 | MeterSource::Gen1Emeters
        );
        self.history = keeps.then(|| History::new(self.record_period));
    }

    /// A reboot into another layout (a profile change): components start over, sensors, the device temperature,
    /// webhooks and texts stay, uptime restarts.
    pub(crate) fn reboot(&mut self, layout: Layout) {
        self.layout = layout;
        self.build_components();
        self.started_unix = self.clock;
    }

    /// A restart in the same layout (after a firmware update): everything stays but the uptime, which starts over.
    pub(crate) fn restart(&mut self) {
        self.started_unix = self.clock;
    }

    /// The Unix time this answer is for.
    pub(crate) fn now(&self) -> f64 {
        self.clock
    }

    pub(crate) fn uptime(&self) -> u64 {
        // On the emulator's clock, like every other time it reports.
        (self.clock - self.started_unix).max(0.0) as u64
    }

    /// Whether meter `i`'s load flows at `t`.
    fn flowing_at(&self, i: usize, t: f64) -> bool {
        match self.layout.meter_links.get(i).copied() {
            Some(MeterLink::Output(o)) => self.outputs.get(o).copied().unwrap_or(false),
            Some(MeterLink::Cover(c)) => self.covers.get(c).is_some_and(|c| c.turning(t).is_some()),
            Some(MeterLink::CoverDir(c, d)) => {
                self.covers.get(c).is_some_and(|c| c.turning(t) == Some(d))
            }
            Some(MeterLink::Always) | None => true,
        }
    }

    /// Whether meter `i`'s load flows now.
    pub(crate) fn flowing(&self, i: usize) -> bool {
        self.flowing_at(i, self.clock)
    }

    /// Accounts energy up to `now` (Unix seconds), closing every minute boundary crossed on the way and ending
    /// cover movements at their exact times (a meter's load stops with its motor).
    pub(crate) fn advance(&mut self, now: f64) {
        let mut t = self.clock;
        self.settle_covers(t);
        while t < now {
            let boundary = ((t / 60.0).floor() + 1.0) * 60.0;
            let change = self
                .covers
                .iter()
                .filter_map(|c| c.next_change(t))
                .filter(|x| *x > t)
                .fold(f64::INFINITY, f64::min);
            let end = boundary.min(now).min(change);
            let powers: Vec<f64> = (0..self.meters.len())
                .map(|i| {
                    if self.flowing_at(i, t) {
                        self.meters[i].power
                    } else {
                        0.0
                    }
                })
                .collect();
            let hours = (end - t) / 3600.0;
            let mut cells = Vec::new();
            for (m, p) in self.meters.iter_mut().zip(&powers) {
                m.add(*p, hours);
                if end >= boundary {
                    cells.push(m.close_minute());
                }
            }
            if end >= boundary
                && let Some(h) = &mut self.history
            {
                h.minute(boundary as i64, cells);
            }
            t = end;
            self.settle_covers(t);
        }
        self.clock = self.clock.max(now);
    }

    /// Ends cover movements that are over by `t`; a Tasmota shutter's relays switch off with its motor.
    fn settle_covers(&mut self, t: f64) {
        for k in 0..self.covers.len() {
            if self.covers[k].finish_time().is_some_and(|e| e <= t) {
                self.covers[k].settle(t);
                self.sync_relays(k, t);
            }
        }
    }

    /// Sets the relays driving cover `k` to what its motor does at `t`.
    pub(crate) fn sync_relays(&mut self, k: usize, t: f64) {
        let Some(Some((open, close))) = self.layout.cover_relays.get(k).copied() else {
            return;
        };
        let dir = self.covers[k].turning(t);
        for (o, on) in [
            (open, dir == Some(Direction::Open)),
            (close, dir == Some(Direction::Close)),
        ] {
            if o < self.outputs.len() && self.outputs[o] != on {
                self.outputs[o] = on;
                self.sources[o] = Source::Remote;
            }
        }
    }

    pub(crate) fn meter(&self, i: usize) -> MeterView {
        let m = &self.meters[i];
        let on = self.flowing(i);
        let live = |v: f64| if on { v } else { 0.0 };
        MeterView {
            power: live(m.power),
            voltage: m.voltage,
            current: live(m.current),
            pf: live(m.pf),
            freq: m.freq,
            energy_wh: m.energy_wh,
            returned_wh: m.returned_wh,
            today_wh: (m.energy_wh - m.start_wh).max(0.0),
            by_minute: m.by_minute,
            ret_by_minute: m.ret_by_minute,
            minute_ts: ((self.clock / 60.0).floor() * 60.0) as i64,
        }
    }

    /// Switches an output; returns the previous state.
    pub(crate) fn set_output(&mut self, i: usize, on: bool, source: Source) -> bool {
        let was = self.outputs[i];
        self.outputs[i] = on;
        self.sources[i] = source;
        was
    }

    /// Relay bitmask (bit n = output n).
    pub(crate) fn power_mask(&self) -> u64 {
        self.outputs
            .iter()
            .enumerate()
            .filter(|(i, on)| **on && *i < 64)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The input's status `state`: its position, or `None` for a button.
    pub(crate) fn input_state(&self, i: usize) -> Option<bool> {
        match self.input_types.get(i) {
            Some(InputType::Button) => None,
            _ => self.inputs.get(i).copied(),
        }
    }
}

/// Rounds to `digits` decimals; never yields `-0`.
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f + 0.0
}

/// °C → °F, one decimal.
pub(crate) fn fahrenheit(c: f64) -> f64 {
    round(c * 9.0 / 5.0 + 32.0, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(meter_output: Vec<Option<usize>>) -> DeviceState {
        let mut layout = Layout::tasmota(1, meter_output.len(), 0);
        layout.meter_links = meter_output
            .iter()
            .map(|o| o.map_or(MeterLink::Always, MeterLink::Output))
            .collect();
        let extras = Extras {
            travel: 20.0,
            ..Extras::default()
        };
        DeviceState::new(layout, &extras, 6000.0)
    }

    #[test]
    fn energy_flows_only_while_the_output_is_on() {
        let mut s = state(vec![Some(0), None]);
        s.advance(6036.0);
        assert_eq!(s.meters[0].energy_wh, 0.0);
        assert!((s.meters[1].energy_wh - 1.0).abs() < 1e-9); // 100 W for 36 s
        s.set_output(0, true, Source::Local);
        s.meters[0].set_load(-200.0);
        s.advance(6072.0);
        assert!((s.meters[0].returned_wh - 2.0).abs() < 1e-9);
        assert_eq!(s.meters[0].energy_wh, 0.0);
        assert_eq!(s.meter(0).power, -200.0);
        assert!((s.meter(0).current - 200.0 / (230.1 * 0.95)).abs() < 1e-9);
    }

    #[test]
    fn minutes_close_at_wall_clock_boundaries() {
        let mut s = state(vec![None]);
        s.advance(6030.0); // 30 s into the minute: not closed yet
        assert_eq!(s.meters[0].by_minute, [0.0; 3]);
        s.advance(6150.0); // crosses 6060 and 6120
        let b = s.meters[0].by_minute;
        assert!((b[0] - 100.0 * 60.0 / 3.6).abs() < 1e-6, "{b:?}"); // 100 W for a full minute in mWh
        assert!((b[1] - 100.0 * 60.0 / 3.6).abs() < 1e-6, "{b:?}");
        assert_eq!(s.meter(0).minute_ts, 6120);
    }

    #[test]
    fn rounding_and_units() {
        assert_eq!(round(-0.0001, 2).to_string(), "0");
        assert_eq!(round(2.345, 1), 2.3);
        assert_eq!(fahrenheit(45.0), 113.0);
        let mut s = state(vec![]);
        s.outputs = vec![true, false, true];
        assert_eq!(s.power_mask(), 0b101);
    }
}
