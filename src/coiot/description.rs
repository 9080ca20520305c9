//! A Gen1 device's CoIoT description (`GET /cit/d`, reference `transports-and-apis.md` §4.3): which sensor id
//! is which output, input, meter or temperature. The meaning comes from each sensor's type `T`, name `D` and
//! unit `U`, and the channel from the block `L` it belongs to (`relay_0`, `light_1`, `emeter_2`), never from
//! the id alone. Before a description is known (or on firmware that serves none over HTTP), a CoIoT v2
//! device's documented ids (§4.4) stand in.

use std::collections::HashMap;

use serde_json::Value;

use super::message::Reading;
use crate::actor::hook_inbox::Measure;

/// Sensors and blocks accepted in one description (a 4-channel device lists a few dozen).
const MAX_ENTRIES: usize = 256;

/// What a sensor id stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// Output `n` on (1) or off (0).
    Output(usize),
    /// Input `n`.
    Input(usize),
    /// A measured value of channel `n` (device temperature: channel 0), with the factor to our unit.
    Measure(Measure, usize, Factor),
}

/// Energy in Wmin is reported in Wh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Factor {
    One,
    PerMinuteToHour,
}

/// The meaning of every sensor id a device described.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Description(HashMap<i64, Meaning>);

impl Description {
    /// Parses a `/cit/d` answer; sensors of no meaning to us are left out. The error is a short phrase.
    pub(crate) fn parse(v: &Value) -> Result<Description, &'static str> {
        let list = |k: &str| -> Result<&Vec<Value>, &'static str> {
            let l = v
                .get(k)
                .and_then(Value::as_array)
                .ok_or("no blk or sen list")?;
            if l.len() > MAX_ENTRIES {
                return Err("more than 256 entries");
            }
            Ok(l)
        };
        let blocks: HashMap<i64, &str> = list("blk")?
            .iter()
            .filter_map(|b| Some((b.get("I")?.as_i64()?, b.get("D")?.as_str()?)))
            .collect();
        let mut out = HashMap::new();
        for s in list("sen")? {
            let (Some(id), Some(t), Some(d)) = (
                s.get("I").and_then(Value::as_i64),
                s.get("T").and_then(Value::as_str),
                s.get("D").and_then(Value::as_str),
            ) else {
                continue;
            };
            let unit = s.get("U").and_then(Value::as_str).unwrap_or_default();
            // `L` is one block or a list; a sensor of several blocks has no single channel.
            let block = match s.get("L") {
                Some(Value::Number(n)) => n.as_i64().and_then(|b| blocks.get(&b)).copied(),
                Some(Value::Array(a)) if a.len() == 1 => {
                    a[0].as_i64().and_then(|b| blocks.get(&b)).copied()
                }
                _ => None,
            };
            let channel = block.and_then(channel_of);
            let meaning = match (t, d, unit, channel) {
                ("S", "output", _, Some(n)) => Meaning::Output(n),
                ("S", "input", _, Some(n)) => Meaning::Input(n),
                ("P", "power", "W", Some(n)) => Meaning::Measure(Measure::Power, n, Factor::One),
                ("E", "energy", "Wmin", Some(n)) => {
                    Meaning::Measure(Measure::Energy, n, Factor::PerMinuteToHour)
                }
                ("E", "energy", "Wh", Some(n)) => Meaning::Measure(Measure::Energy, n, Factor::One),
                ("T", "deviceTemp", "C", _) => {
                    Meaning::Measure(Measure::DeviceTemperature, 0, Factor::One)
                }
                _ => continue,
            };
            out.insert(id, meaning);
        }
        Ok(Description(out))
    }

    /// CoIoT v2's documented ids (`transports-and-apis.md` §4.4), for a device whose description is not
    /// known: relay outputs 1101…1401, inputs 2101…2401, relay power 4101… W and energy 4103… Wmin, device
    /// temperature 3104 °C.
    pub(crate) fn v2_defaults() -> Description {
        let mut m = HashMap::new();
        for n in 0..4 {
            let base = 100 * (n as i64 + 1);
            m.insert(1001 + base, Meaning::Output(n));
            m.insert(2001 + base, Meaning::Input(n));
            m.insert(
                4001 + base,
                Meaning::Measure(Measure::Power, n, Factor::One),
            );
            m.insert(
                4003 + base,
                Meaning::Measure(Measure::Energy, n, Factor::PerMinuteToHour),
            );
        }
        m.insert(
            3104,
            Meaning::Measure(Measure::DeviceTemperature, 0, Factor::One),
        );
        Description(m)
    }

    /// What a status says, in our terms: states of outputs and inputs, measured values. Values out of their
    /// range (a sensor's "invalid" value such as -1 W or 999 °C, a state that is not 0/1) say nothing.
    pub(crate) fn read(&self, readings: &[Reading]) -> Said {
        let mut said = Said::default();
        for r in readings {
            let Some(meaning) = self.0.get(&r.sensor) else {
                continue;
            };
            match *meaning {
                Meaning::Output(n) | Meaning::Input(n) => {
                    let on = match r.value.as_i64() {
                        Some(0) => false,
                        Some(1) => true,
                        _ => continue,
                    };
                    let list = match meaning {
                        Meaning::Output(_) => &mut said.outputs,
                        _ => &mut said.inputs,
                    };
                    list.push((n, on));
                }
                Meaning::Measure(what, n, factor) => {
                    let Some(v) = r.value.as_f64().filter(|v| what.plausible(*v)) else {
                        continue;
                    };
                    let v = match factor {
                        Factor::One => v,
                        Factor::PerMinuteToHour => v / 60.0,
                    };
                    said.measures.push((what, n, v));
                }
            }
        }
        said
    }
}

/// `relay_0` → 0 (any `<name>_<n>` block).
fn channel_of(block: &str) -> Option<usize> {
    let (_, n) = block.rsplit_once('_')?;
    n.parse().ok().filter(|n| *n < 64)
}

/// What one status says.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Said {
    pub outputs: Vec<(usize, bool)>,
    pub inputs: Vec<(usize, bool)>,
    pub measures: Vec<(Measure, usize, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reading(sensor: i64, value: Value) -> Reading {
        Reading {
            channel: 0,
            sensor,
            value,
        }
    }

    #[test]
    fn meanings_come_from_the_description_not_the_ids() {
        // A Plug S as documented, plus ids no v2 table has: the description decides.
        let d = Description::parse(&json!({
            "blk": [{"I": 1, "D": "relay_0"}, {"I": 2, "D": "device"}, {"I": 3, "D": "relay_1"}],
            "sen": [
                {"I": 1101, "T": "S", "D": "output", "R": "0/1", "L": 1},
                {"I": 4101, "T": "P", "D": "power", "U": "W", "R": ["0/2500", "-1"], "L": 1},
                {"I": 4103, "T": "E", "D": "energy", "U": "Wmin", "R": ["U32", "-1"], "L": 1},
                {"I": 3104, "T": "T", "D": "deviceTemp", "U": "C", "R": ["-40/300", "999"], "L": 2},
                {"I": 6102, "T": "A", "D": "overpower", "L": 1},
                {"I": 77, "T": "S", "D": "output", "L": [3]},
                {"I": 78, "T": "S", "D": "input", "L": 3},
                {"I": 79, "T": "S", "D": "input", "L": [1, 3]}
            ]
        }))
        .unwrap();
        let said = d.read(&[
            reading(1101, json!(1)),
            reading(4101, json!(12.5)),
            reading(4103, json!(600)),
            reading(3104, json!(41.2)),
            reading(6102, json!(0)),
            reading(77, json!(0)),
            reading(78, json!(1)),
            reading(79, json!(1)),
            reading(2101, json!(1)),
        ]);
        assert_eq!(said.outputs, vec![(0, true), (1, false)]);
        assert_eq!(said.inputs, vec![(1, true)]);
        assert_eq!(
            said.measures,
            vec![
                (Measure::Power, 0, 12.5),
                (Measure::Energy, 0, 10.0),
                (Measure::DeviceTemperature, 0, 41.2)
            ]
        );
    }

    #[test]
    fn invalid_values_and_hostile_descriptions_say_nothing() {
        let d = Description::v2_defaults();
        let said = d.read(&[
            reading(1101, json!(2)),
            reading(2101, json!("S")),
            reading(4101, json!(-1)),
            reading(3104, json!(999)),
            reading(4103, json!(null)),
        ]);
        assert_eq!(said, Said::default());
        assert!(Description::parse(&json!({"sen": []})).is_err());
        let many: Vec<Value> = (0..300).map(|i| json!({"I": i})).collect();
        assert!(Description::parse(&json!({"blk": [], "sen": many})).is_err());
        assert_eq!(channel_of("relay_99"), None);
        assert_eq!(channel_of("emeter_2"), Some(2));
    }
}
