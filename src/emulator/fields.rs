//! Payload pieces that `components.rs` and the RPC component modules (`rpc_cover.rs`, `rpc_light.rs`) both
//! render: a leaf, so `components.rs` can assemble the status from those modules without a cycle
//! (`components.rs` re-exports them).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::layout::MeterFields;
use super::source::Source;
use super::state::{MeterView, fahrenheit, round};

/// How `source` fields name who acted last.
pub(crate) fn source_name(source: Source) -> &'static str {
    match source {
        Source::Init => "init",
        Source::Remote => "HTTP_in",
        Source::Local => "button",
    }
}

/// An `aenergy`-shaped object: total, the last three minutes, the current minute's start.
pub(crate) struct Energy<'a> {
    pub total_wh: f64,
    pub by_minute: &'a [f64; 3],
    pub minute_ts: i64,
}

impl Serialize for Energy<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(3))?;
        m.serialize_entry("total", &round(self.total_wh, 3))?;
        m.serialize_entry("by_minute", &self.by_minute.map(|v| round(v, 3)))?;
        m.serialize_entry("minute_ts", &self.minute_ts)?;
        m.end()
    }
}

pub(crate) fn energy(total_wh: f64, by_minute: &[f64; 3], minute_ts: i64) -> Value {
    to_tree(&Energy {
        total_wh,
        by_minute,
        minute_ts,
    })
}

/// A component's `temperature` object.
pub(crate) struct Temperature(pub f64);

impl Serialize for Temperature {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(2))?;
        m.serialize_entry("tC", &round(self.0, 1))?;
        m.serialize_entry("tF", &fahrenheit(self.0))?;
        m.end()
    }
}

pub(crate) fn temperature(c: f64) -> Value {
    to_tree(&Temperature(c))
}

/// Meter fields inside a switch or cover status, in the order real devices send them, added to a map being
/// serialized.
pub(crate) fn meter_entries<M: SerializeMap>(
    m: &mut M,
    v: &MeterView,
    f: MeterFields,
) -> Result<(), M::Error> {
    m.serialize_entry("apower", &round(v.power, 1))?;
    m.serialize_entry("voltage", &round(v.voltage, 1))?;
    let freq = round(v.freq, 1);
    if f.freq && !f.freq_last {
        m.serialize_entry("freq", &freq)?;
    }
    m.serialize_entry("current", &round(v.current, 3))?;
    if f.pf {
        m.serialize_entry("pf", &round(v.pf, 2))?;
    }
    if f.freq && f.freq_last {
        m.serialize_entry("freq", &freq)?;
    }
    let energy = |total_wh, by_minute| Energy {
        total_wh,
        by_minute,
        minute_ts: v.minute_ts,
    };
    m.serialize_entry("aenergy", &energy(v.energy_wh, &v.by_minute))?;
    if f.ret {
        m.serialize_entry("ret_aenergy", &energy(v.returned_wh, &v.ret_by_minute))?;
    }
    Ok(())
}

/// [`meter_entries`] added to a map of values.
pub(crate) fn meter_fields(m: &mut Map<String, Value>, v: &MeterView, f: MeterFields) {
    struct Fields<'a>(&'a MeterView, MeterFields);
    impl Serialize for Fields<'_> {
        fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
            let mut m = ser.serialize_map(None)?;
            meter_entries(&mut m, self.0, self.1)?;
            m.end()
        }
    }
    if let Value::Object(fields) = to_tree(&Fields(v, f)) {
        m.extend(fields);
    }
}

/// `value` as a tree of JSON values. What these payloads serialize is numbers, strings and maps with string
/// keys, which always convert; `null` would only say that changed.
pub(crate) fn to_tree<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
