//! Mutable device state: outputs, inputs, meters (energy accumulated over wall time), probes, temperature and
//! installed webhooks. Protocol modules render it; they never store anything of their own.

use super::MeterReading;
use super::webhooks::HookStore;

/// Component counts and which output each meter measures.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub inputs: usize,
    pub outputs: usize,
    pub meters: usize,
    /// `Some(o)`: the meter's load flows only while output `o` is on; `None`: a separate meter, always.
    pub meter_output: Vec<Option<usize>>,
    /// Whether the device reports its internal temperature.
    pub temperature: bool,
}

/// Who switched an output last (rendered per protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Power-on state.
    Init,
    /// A request over the network.
    Remote,
    /// The test (physical switch).
    Local,
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
        let wh = watts * hours;
        if wh >= 0.0 {
            self.energy_wh += wh;
            self.minute_wh += wh;
        } else {
            self.returned_wh -= wh;
            self.ret_minute_wh -= wh;
        }
    }

    fn close_minute(&mut self) {
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

/// An add-on temperature probe.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub name: String,
    /// `None`: the sensor is missing.
    pub celsius: Option<f64>,
}

/// Everything that changes while a device runs.
#[derive(Debug)]
pub(crate) struct DeviceState {
    pub layout: Layout,
    pub outputs: Vec<bool>,
    pub sources: Vec<Source>,
    pub inputs: Vec<bool>,
    pub meters: Vec<Meter>,
    pub probes: Vec<Probe>,
    /// Device (chip/switch) temperature in °C.
    pub temperature: f64,
    pub hooks: HookStore,
    /// Tasmota `POWER` texts for on and off.
    pub power_text: [String; 2],
    /// Unix seconds when the emulator started.
    pub started_unix: f64,
    /// Unix seconds up to which energy is accounted; "now" for one answer.
    clock: f64,
}

impl DeviceState {
    pub(crate) fn new(layout: Layout, probes: &[String], now_unix: f64) -> Self {
        DeviceState {
            outputs: vec![false; layout.outputs],
            sources: vec![Source::Init; layout.outputs],
            inputs: vec![false; layout.inputs],
            meters: (0..layout.meters).map(|_| Meter::new()).collect(),
            probes: probes
                .iter()
                .enumerate()
                .map(|(i, n)| Probe {
                    name: n.clone(),
                    celsius: Some(21.5 + i as f64),
                })
                .collect(),
            layout,
            temperature: 45.0,
            hooks: HookStore::default(),
            power_text: ["ON".into(), "OFF".into()],
            started_unix: now_unix,
            clock: now_unix,
        }
    }

    /// The Unix time this answer is for.
    pub(crate) fn now(&self) -> f64 {
        self.clock
    }

    pub(crate) fn uptime(&self) -> u64 {
        // On the emulator's clock, like every other time it reports.
        (self.clock - self.started_unix).max(0.0) as u64
    }

    /// Whether meter `i`'s load flows now.
    pub(crate) fn flowing(&self, i: usize) -> bool {
        match self.layout.meter_output.get(i).copied().flatten() {
            Some(o) => self.outputs.get(o).copied().unwrap_or(false),
            None => true,
        }
    }

    /// Accounts energy up to `now` (Unix seconds), closing every minute boundary crossed on the way.
    pub(crate) fn advance(&mut self, now: f64) {
        let powers: Vec<f64> = (0..self.meters.len())
            .map(|i| {
                if self.flowing(i) {
                    self.meters[i].power
                } else {
                    0.0
                }
            })
            .collect();
        let mut t = self.clock;
        while t < now {
            let boundary = ((t / 60.0).floor() + 1.0) * 60.0;
            let end = boundary.min(now);
            let hours = (end - t) / 3600.0;
            for (m, p) in self.meters.iter_mut().zip(&powers) {
                m.add(*p, hours);
                if end >= boundary {
                    m.close_minute();
                }
            }
            t = end;
        }
        self.clock = self.clock.max(now);
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
        let layout = Layout {
            inputs: 1,
            outputs: 1,
            meters: meter_output.len(),
            meter_output,
            temperature: true,
        };
        DeviceState::new(layout, &[], 6000.0)
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
