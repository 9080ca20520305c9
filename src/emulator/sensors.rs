//! Temperature, humidity and voltage readings: a model's built-in sensors (an H&T) and add-on sensors (DS18B20
//! probes, a DHT22's temperature and humidity pair, a voltmeter), with the RPC ids real devices give them.

use crate::models::SensorQuantity;

/// An add-on sensor of [`super::DeviceSpec::sensors`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddonSensor {
    /// The name the device reports (RPC component `name`, Tasmota: the sensor type for humidity, see
    /// [`super::DeviceSpec::sensors`]).
    pub name: String,
    /// `Temperature`: a DS18B20 probe; `Humidity`: a DHT22 (a temperature and a humidity reading with one id);
    /// `Voltage`: the add-on's analog voltmeter.
    pub quantity: SensorQuantity,
}

impl AddonSensor {
    /// A sensor called `name` measuring `quantity`.
    pub fn new(name: &str, quantity: SensorQuantity) -> Self {
        AddonSensor {
            name: name.to_string(),
            quantity,
        }
    }
}

/// Where a reading comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Part of the device (H&T): RPC ids from 0.
    Builtin,
    /// A DS18B20 probe.
    Probe,
    /// A DHT22: its temperature and humidity readings share one id.
    Dht22,
    /// The add-on voltmeter.
    Voltmeter,
}

/// One reading.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reading {
    pub quantity: SensorQuantity,
    pub origin: Origin,
    /// `None` for built-in sensors (they report `name: null`).
    pub name: Option<String>,
    /// RPC component id (`temperature:100`).
    pub id: usize,
    /// `None`: the sensor does not answer (a missing probe).
    pub value: Option<f64>,
}

/// First RPC id of add-on components.
pub(crate) const ADDON_BASE: usize = 100;

/// Every reading of a device in device order: built-in ones, probes, then the add-on sensors as given.
pub(crate) fn build(
    builtin: &[SensorQuantity],
    probes: &[String],
    addons: &[AddonSensor],
) -> Vec<Reading> {
    let mut out = Vec::new();
    for (k, q) in builtin.iter().enumerate() {
        let id = builtin[..k].iter().filter(|x| *x == q).count();
        out.push(Reading {
            quantity: *q,
            origin: Origin::Builtin,
            name: None,
            id,
            value: Some(default_value(*q, id)),
        });
    }
    let mut temp_id = ADDON_BASE;
    let mut volt_id = ADDON_BASE;
    for name in probes {
        out.push(Reading {
            quantity: SensorQuantity::Temperature,
            origin: Origin::Probe,
            name: Some(name.clone()),
            id: temp_id,
            value: Some(21.5 + (temp_id - ADDON_BASE) as f64),
        });
        temp_id += 1;
    }
    for a in addons {
        let name = Some(a.name.clone());
        match a.quantity {
            SensorQuantity::Temperature => {
                out.push(Reading {
                    quantity: SensorQuantity::Temperature,
                    origin: Origin::Probe,
                    name,
                    id: temp_id,
                    value: Some(21.5 + (temp_id - ADDON_BASE) as f64),
                });
                temp_id += 1;
            }
            SensorQuantity::Humidity => {
                for q in [SensorQuantity::Temperature, SensorQuantity::Humidity] {
                    out.push(Reading {
                        quantity: q,
                        origin: Origin::Dht22,
                        name: name.clone(),
                        id: temp_id,
                        value: Some(default_value(q, temp_id - ADDON_BASE)),
                    });
                }
                temp_id += 1;
            }
            SensorQuantity::Voltage => {
                out.push(Reading {
                    quantity: SensorQuantity::Voltage,
                    origin: Origin::Voltmeter,
                    name,
                    id: volt_id,
                    value: Some(default_value(SensorQuantity::Voltage, volt_id - ADDON_BASE)),
                });
                volt_id += 1;
            }
        }
    }
    out
}

fn default_value(q: SensorQuantity, n: usize) -> f64 {
    let n = n as f64;
    match q {
        SensorQuantity::Temperature => 22.0 + n,
        SensorQuantity::Humidity => 45.0 + n,
        SensorQuantity::Voltage => 12.0 + n,
    }
}

/// Indexes into `readings` of one quantity, in device order.
pub(crate) fn of(readings: &[Reading], q: SensorQuantity) -> impl Iterator<Item = usize> + '_ {
    readings
        .iter()
        .enumerate()
        .filter(move |(_, r)| r.quantity == q)
        .map(|(i, _)| i)
}

/// Indexes of the add-on temperature readings (probes and DHT22s): what `set_probe` counts.
pub(crate) fn addon_temperatures(readings: &[Reading]) -> Vec<usize> {
    of(readings, SensorQuantity::Temperature)
        .filter(|i| readings[*i].origin != Origin::Builtin)
        .collect()
}

/// The reading of `q` with RPC id `id`.
pub(crate) fn by_id(readings: &[Reading], q: SensorQuantity, id: u64) -> Option<usize> {
    of(readings, q).find(|i| readings[*i].id as u64 == id)
}

/// Dew point (°C) by the Magnus formula, as Tasmota adds it beside temperature and humidity.
pub(crate) fn dew_point(celsius: f64, rh: f64) -> f64 {
    let (a, b) = (17.62, 243.12);
    let rh = rh.clamp(0.1, 100.0);
    let g = (rh / 100.0).ln() + a * celsius / (b + celsius);
    b * g / (a - g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_addon_rules() {
        let r = build(
            &[SensorQuantity::Temperature, SensorQuantity::Humidity],
            &["Roof".into()],
            &[
                AddonSensor::new("Bath", SensorQuantity::Humidity),
                AddonSensor::new("Tank", SensorQuantity::Voltage),
            ],
        );
        let ids: Vec<(SensorQuantity, usize)> = r.iter().map(|x| (x.quantity, x.id)).collect();
        use SensorQuantity::*;
        assert_eq!(
            ids,
            [
                (Temperature, 0),
                (Humidity, 0),
                (Temperature, 100),
                (Temperature, 101),
                (Humidity, 101),
                (Voltage, 100)
            ]
        );
        assert_eq!(addon_temperatures(&r), [2, 3]);
        assert_eq!(by_id(&r, Humidity, 101), Some(4));
        assert!((dew_point(20.0, 50.0) - 9.3).abs() < 0.1);
    }
}
