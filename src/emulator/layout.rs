//! What components a device has in its current profile (from the model library's shapes, or a Tasmota spec) and
//! how meters and covers are wired: which output or cover a meter's load follows, which relays drive a shutter.

use super::cover::Direction;
use crate::light::LightCaps;
use crate::models::{MeterSource, ModelInfo, OutputKind, SensorQuantity, Shape};

/// What a meter's load follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MeterLink {
    /// A separate meter: its load always flows.
    Always,
    /// Flows while output `o` is on.
    Output(usize),
    /// Flows while cover `c`'s motor turns (either way).
    Cover(usize),
    /// Flows while cover `c` turns one way (Gen1 roller: one meter per motor winding).
    CoverDir(usize, Direction),
}

/// Optional fields of a meter inside a switch or cover status, which differ between device lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MeterFields {
    pub freq: bool,
    pub pf: bool,
    pub ret: bool,
    /// `freq` after `pf` (covers) instead of after `voltage` (switches).
    pub freq_last: bool,
}

/// Component counts and wiring in the current profile.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// Reported profile (Gen2+ `profile`, Gen1 `mode`); `None` for single-shape models.
    pub profile: Option<String>,
    pub inputs: usize,
    pub outputs: usize,
    /// Outputs are dimmable lights (`light:N`, `cct:N`, `rgb:N`, `rgbw:N`; Gen1 `lights[]`).
    pub lights: bool,
    /// What the lights can do (Shelly: every output; Tasmota: the last output).
    pub light: Option<LightCaps>,
    pub covers: usize,
    pub meters: usize,
    pub meter_source: MeterSource,
    pub meter_links: Vec<MeterLink>,
    /// Tasmota: the (open, close) relays driving shutter k.
    pub cover_relays: Vec<Option<(usize, usize)>>,
    /// Whether the device reports its internal temperature.
    pub temperature: bool,
    /// The model's own sensors (H&T).
    pub builtin: Vec<SensorQuantity>,
    /// Battery powered (`devicepower:0`).
    pub battery: bool,
}

impl Layout {
    /// The Gen2+ component type of the outputs (`switch`, `light`, `cct`, `rgb`, `rgbw`).
    pub(crate) fn output_component(&self) -> &'static str {
        match self.light {
            Some(l) if self.lights => l.rpc_component(),
            _ => "switch",
        }
    }

    /// A Shelly model in one of its profiles.
    pub(crate) fn shelly(info: &ModelInfo, shape: &Shape) -> Layout {
        let meter_links = (0..shape.meters)
            .map(|i| {
                if let Some(o) = shape.meter_output(i) {
                    MeterLink::Output(o)
                } else if let Some(c) = shape.meter_cover(i) {
                    MeterLink::Cover(c)
                } else if shape.covers > 0 && shape.meter_source == MeterSource::Gen1Meters {
                    if shape.meters == 2 * shape.covers {
                        let dir = if i % 2 == 0 {
                            Direction::Open
                        } else {
                            Direction::Close
                        };
                        MeterLink::CoverDir(i / 2, dir)
                    } else {
                        MeterLink::Cover(i.min(shape.covers - 1))
                    }
                } else {
                    MeterLink::Always
                }
            })
            .collect();
        Layout {
            profile: shape.profile.clone(),
            inputs: shape.inputs,
            outputs: shape.outputs,
            lights: info.output_kind == OutputKind::Light,
            light: shape.light,
            covers: shape.covers,
            meters: shape.meters,
            meter_source: shape.meter_source,
            meter_links,
            cover_relays: vec![None; shape.covers],
            temperature: info.temperature_monitoring,
            builtin: info.sensors.clone(),
            battery: info.sleeps,
        }
    }

    /// A Tasmota device; shutter k runs on relays 2k (open) and 2k+1 (close), like `ShutterRelay1 1`.
    pub(crate) fn tasmota(outputs: usize, meters: usize, shutters: usize) -> Layout {
        Layout {
            profile: None,
            inputs: 0,
            outputs,
            lights: false,
            light: None,
            covers: shutters,
            meters,
            meter_source: MeterSource::None,
            meter_links: (0..meters)
                .map(|i| {
                    if i < outputs {
                        MeterLink::Output(i)
                    } else {
                        MeterLink::Always
                    }
                })
                .collect(),
            cover_relays: (0..shutters).map(|k| Some((2 * k, 2 * k + 1))).collect(),
            temperature: true,
            builtin: Vec::new(),
            battery: false,
        }
    }

    /// Whether meter `i` is part of a `switch:N` status.
    pub(crate) fn switch_meter(&self, i: usize) -> bool {
        self.meter_source == MeterSource::Switch
            && matches!(self.meter_links.get(i), Some(MeterLink::Output(_)))
    }

    /// The meter inside `cover:c`, if any.
    pub(crate) fn cover_meter(&self, c: usize) -> Option<usize> {
        if self.meter_source != MeterSource::Cover {
            return None;
        }
        self.meter_links
            .iter()
            .position(|l| *l == MeterLink::Cover(c))
    }
}

/// Which optional meter fields a model's `switch:N` reports. Captures: Plus 1PM reports none of them; 1PM
/// Gen3/Gen4 report `freq` and `ret_aenergy`; Plus 2PM, 2PM Gen3/Gen4 and Pro models also `pf`.
pub(crate) fn switch_meter_fields(info: &ModelInfo) -> MeterFields {
    let m = info.model.as_str();
    let two_pm = m.contains("2PM");
    match info.generation {
        2 if m.starts_with("ShellyPlus") && !two_pm => MeterFields::default(),
        2 => MeterFields {
            freq: true,
            pf: true,
            ret: true,
            freq_last: false,
        },
        _ => MeterFields {
            freq: true,
            pf: two_pm,
            ret: true,
            freq_last: false,
        },
    }
}

/// Meter fields of `cover:N` (2PM Gen3/Gen4 captures: `freq` and `pf`, no `ret_aenergy`).
pub(crate) const COVER_METER_FIELDS: MeterFields = MeterFields {
    freq: true,
    pf: true,
    ret: false,
    freq_last: true,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelLibrary;

    #[test]
    fn profiles_wire_meters_to_what_they_measure() {
        let lib = ModelLibrary::embedded();
        let g3 = lib.get("Shelly2PMG3").unwrap();
        let cover = Layout::shelly(g3, &g3.shape("cover").unwrap());
        assert_eq!((cover.outputs, cover.covers, cover.meters), (0, 1, 1));
        assert_eq!(cover.meter_links, [MeterLink::Cover(0)]);
        assert_eq!(cover.cover_meter(0), Some(0));
        let sw = Layout::shelly(g3, &g3.default_shape());
        assert_eq!(sw.meter_links, [MeterLink::Output(0), MeterLink::Output(1)]);
        assert!(sw.switch_meter(1));
        let g1 = lib.get("Shelly2.5").unwrap();
        let roller = Layout::shelly(g1, &g1.shape("roller").unwrap());
        assert_eq!(
            roller.meter_links,
            [
                MeterLink::CoverDir(0, Direction::Open),
                MeterLink::CoverDir(0, Direction::Close)
            ]
        );
        let t = Layout::tasmota(2, 2, 1);
        assert_eq!(t.cover_relays, [Some((0, 1))]);
    }

    #[test]
    fn meter_fields_per_device_line() {
        let lib = ModelLibrary::embedded();
        let f = |m: &str| switch_meter_fields(lib.get(m).unwrap());
        assert_eq!(f("ShellyPlus1PM"), MeterFields::default());
        assert_eq!(
            f("Shelly1PMG3"),
            MeterFields {
                freq: true,
                pf: false,
                ret: true,
                freq_last: false
            }
        );
        assert!(f("ShellyPlus2PM").pf && f("ShellyPro4PM").pf && f("Shelly2PMG4").pf);
    }
}
