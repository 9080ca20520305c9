//! Mapping a `Shelly.GetStatus` result onto a device: switches or lights, covers, inputs, meters
//! (switch/cover-embedded, em/emdata, em1/em1data, pm1), temperatures, sensors, system facts. Values the device
//! does not report stay `None`: a component the device does not have in its profile reads as unknown.

use super::status_doc::{Channel, Em, EmData, Kind, Num, Part, StatusDoc};
use crate::light::{LightCaps, rgb_from, white_from_byte};
use crate::models::{MeterSource, ModelInfo, SensorQuantity, Shape};
use crate::objects::{CoverState, Device, Output};

/// A `light:N`, `cct:N`, `rgb:N` or `rgbw:N` status into an output: what the light cannot have, or the status
/// does not give in range, is `None`.
pub(crate) fn apply_light(out: &mut Output, s: Option<&Channel>, caps: LightCaps) {
    let none = Channel::default();
    let c = s.unwrap_or(&none);
    if s.is_some() {
        out.state = c.output.0;
    }
    out.brightness = c
        .brightness
        .0
        .filter(|b| caps.brightness && (0.0..=100.0).contains(b));
    out.color_temperature =
        c.ct.0
            .filter(|k| caps.temperature.is_some() && (1000.0..=10_000.0).contains(k));
    out.rgb = rgb_from(c.rgb.0).filter(|_| caps.rgb);
    out.white = c.white.0.and_then(white_from_byte).filter(|_| caps.white);
}

/// Copies a `Shelly.GetStatus` result into the device. `shape` is what the device is now (its reported
/// profile). Values the device does not report become `None`.
pub(crate) fn apply_status(
    dev: &mut Device,
    model: &ModelInfo,
    shape: &Shape,
    s: &StatusDoc,
    now: &str,
) {
    dev.mac_address = s
        .sys
        .mac
        .0
        .as_deref()
        .and_then(crate::mac::normalise)
        .or(dev.mac_address.take());
    dev.battery = match s.part(Kind::DevicePower, 0) {
        Some(Part::DevicePower(p)) => p.battery.percent.0,
        _ => None,
    };
    dev.wakeup_period = s.sys.wakeup_period.0.filter(|p| *p > 0.0).map(|p| p as u64);
    dev.uptime = s.sys.uptime.0.map(|u| u.max(0.0) as u64);
    dev.restart_required = s.sys.restart_required.0;
    dev.update_available = s.sys.available_updates.0;
    for (i, input) in dev.inputs.iter_mut().enumerate() {
        // Inputs in button mode report state null: they have no state.
        input.state = match s.part(Kind::Input, i as u32) {
            Some(Part::Input(p)) => p.state.0,
            _ => None,
        };
    }
    let mut temps = Vec::new();
    let output_kind = Kind::of(shape.output_component()).unwrap_or(Kind::Switch);
    for (i, out) in dev.outputs.iter_mut().enumerate() {
        let c = s.channel(output_kind, i as u32);
        // A switch the device does not have (cover profile) has no state: unknown, not off.
        out.state = c.and_then(|c| c.output.0);
        match shape.light {
            Some(caps) => apply_light(out, c, caps),
            None => apply_light(out, None, LightCaps::dimmer()),
        }
        out.temperature = c
            .and_then(|c| c.temperature.t_c.0)
            .filter(|_| model.temperature_monitoring);
        temps.extend(out.temperature);
    }
    for (i, c) in dev.covers.iter_mut().enumerate() {
        apply_cover(c, s.channel(Kind::Cover, i as u32));
        c.temperature = c.temperature.filter(|_| model.temperature_monitoring);
        temps.extend(c.temperature);
    }
    dev.temperature = if temps.is_empty() {
        s.reading(Kind::Temperature, 0).and_then(|r| r.t_c.0)
    } else {
        Some(temps.iter().sum::<f64>() / temps.len() as f64)
    };
    let source = shape.meter_source;
    let (em, emdata) = match (s.part(Kind::Em, 0), s.part(Kind::EmData, 0)) {
        (Some(Part::Em(e)), Some(Part::EmData(d))) => (Some(&**e), Some(d)),
        (Some(Part::Em(e)), _) => (Some(&**e), None),
        (_, Some(Part::EmData(d))) => (None, Some(d)),
        _ => (None, None),
    };
    for (i, m) in dev.meters.iter_mut().enumerate() {
        // A meter planned as part of an output (or cover, or as a separate channel) is only read from a device
        // whose meters are that kind now: a 2PM in cover profile has no switch meters to read.
        let planned = match (m.output_id, m.cover_id) {
            (Some(_), _) => MeterSource::Switch,
            (_, Some(_)) => MeterSource::Cover,
            _ => source,
        };
        let same_role = planned == source
            || (!matches!(planned, MeterSource::Switch | MeterSource::Cover)
                && !matches!(source, MeterSource::Switch | MeterSource::Cover));
        let n = i as u32;
        let r = match source {
            _ if !same_role || i >= shape.meters => [None; 8],
            MeterSource::Switch | MeterSource::Cover | MeterSource::Pm1 => {
                let kind = match source {
                    MeterSource::Switch => Kind::Switch,
                    MeterSource::Cover => Kind::Cover,
                    _ => Kind::Pm1,
                };
                match s.channel(kind, n) {
                    Some(c) => [
                        c.apower.0,
                        c.voltage.0,
                        c.current.0,
                        c.pf.0,
                        c.aenergy.total.0,
                        c.ret_aenergy.total.0,
                        c.freq.0,
                        c.aprtpower.0,
                    ],
                    None => [None; 8],
                }
            }
            MeterSource::Em1 => {
                let (k, d) = match (s.part(Kind::Em1, n), s.part(Kind::Em1Data, n)) {
                    (Some(Part::Em1(k)), Some(Part::Em1Data(d))) => (Some(k), Some(d)),
                    (Some(Part::Em1(k)), _) => (Some(k), None),
                    (_, Some(Part::Em1Data(d))) => (None, Some(d)),
                    _ => (None, None),
                };
                [
                    k.and_then(|k| k.act_power.0),
                    k.and_then(|k| k.voltage.0),
                    k.and_then(|k| k.current.0),
                    k.and_then(|k| k.pf.0),
                    d.and_then(|d| d.total_act_energy.0),
                    d.and_then(|d| d.total_act_ret_energy.0),
                    k.and_then(|k| k.freq.0),
                    k.and_then(|k| k.aprt_power.0),
                ]
            }
            MeterSource::Em => phase(em, emdata, i),
            _ => [None; 8],
        };
        [
            m.power,
            m.voltage,
            m.current,
            m.power_factor,
            m.energy,
            m.returned_energy,
            m.frequency,
            m.apparent_power,
        ] = r;
    }
    dev.update_totals();
    if source == MeterSource::Em {
        // The 3-phase meter reports its own totals.
        dev.total_power = em.and_then(|e| e.total_act_power.0).or(dev.total_power);
        dev.total_energy = emdata.and_then(|d| d.total_act.0).or(dev.total_energy);
        dev.total_returned_energy = emdata
            .and_then(|d| d.total_act_ret.0)
            .or(dev.total_returned_energy);
    }
    let device_temp = dev.temperature;
    dev.update_probes(now, |p| match p.probe_id {
        Some(-1) => device_temp,
        Some(id) => u32::try_from(id)
            .ok()
            .and_then(|id| s.reading(Kind::Temperature, id))
            .and_then(|r| r.t_c.0),
        None => None,
    });
    dev.update_sensors(now, |x| {
        let id = u32::try_from(x.sensor_id?).ok()?;
        let kind = Kind::of(x.quantity.rpc_component())?;
        let r = s.reading(kind, id)?;
        match x.quantity {
            SensorQuantity::Temperature => r.t_c.0,
            SensorQuantity::Humidity => r.rh.0,
            SensorQuantity::Voltage => r.voltage.0,
        }
    });
}

/// Phase `i` (`a`, `b`, `c`) of a three-phase meter: power, voltage, current, power factor, energy, returned
/// energy, frequency, apparent power.
fn phase(em: Option<&Em>, data: Option<&EmData>, i: usize) -> [Option<f64>; 8] {
    let p = match (em, i) {
        (Some(e), 0) => [
            e.a_act_power,
            e.a_voltage,
            e.a_current,
            e.a_pf,
            e.a_freq,
            e.a_aprt_power,
        ],
        (Some(e), 1) => [
            e.b_act_power,
            e.b_voltage,
            e.b_current,
            e.b_pf,
            e.b_freq,
            e.b_aprt_power,
        ],
        (Some(e), 2) => [
            e.c_act_power,
            e.c_voltage,
            e.c_current,
            e.c_pf,
            e.c_freq,
            e.c_aprt_power,
        ],
        _ => [Num(None); 6],
    };
    let d = match (data, i) {
        (Some(d), 0) => [d.a_total_act_energy, d.a_total_act_ret_energy],
        (Some(d), 1) => [d.b_total_act_energy, d.b_total_act_ret_energy],
        (Some(d), 2) => [d.c_total_act_energy, d.c_total_act_ret_energy],
        _ => [Num(None); 2],
    };
    [
        p[0].0, p[1].0, p[2].0, p[3].0, d[0].0, d[1].0, p[4].0, p[5].0,
    ]
}

/// Copies one `cover:N` status (a `Shelly.GetStatus` member or a `Cover.GetStatus` result) into `c`; `None`
/// (the device has no such cover now) makes everything unknown.
pub(crate) fn apply_cover(c: &mut crate::objects::Cover, v: Option<&Channel>) {
    let none = Channel::default();
    let v = v.unwrap_or(&none);
    c.state = v.state.0.as_deref().and_then(CoverState::parse);
    c.calibrated = v.pos_control.0;
    // `current_pos` is only meaningful on a calibrated cover.
    c.position = v
        .current_pos
        .0
        .filter(|p| (0.0..=100.0).contains(p) && c.calibrated != Some(false));
    c.temperature = v.temperature.t_c.0;
}
