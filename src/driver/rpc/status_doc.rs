//! A `Shelly.GetStatus` result read straight into the few fields a device object shows, without a JSON tree.
//!
//! A status is about 60 values in 12 objects; a `serde_json::Value` of it is some 100 allocations made on the
//! push poller and freed again, for the 20 values read. This reads the same text once, keeps those 20 and skips
//! the rest without allocating. It reads exactly what the `Value` readers (`driver/json.rs`) read: a field that
//! is missing, `null` or of another type is `None` (never an error: one odd field must not lose the status), a
//! flag is also 0/1, a repeated key keeps its last value, and a component key is `type:N` spelled as the
//! firmware spells it (`switch:01` is not `switch:1`). The same reader takes a `Value` (a status from HTTP, the
//! mirror, MQTT) through serde's `Deserializer` for `&Value`. `Shelly.GetDeviceInfo`, read with the status at
//! every push channel's open, is read the same way ([`DeviceInfo`]).

use std::fmt;

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

/// A number (`None`: missing, `null` or not a number).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Num(pub Option<f64>);

/// A boolean, or an integer taken as one (0 is false), as Gen1 inputs report.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Flag(pub Option<bool>);

/// A string.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Text(pub Option<String>);

/// Whether an object has members (`None`: not an object).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct NonEmpty(pub Option<bool>);

/// The first three numbers of an array (a light's `rgb`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Triple(pub [Option<f64>; 3]);

/// A reader that takes any JSON value: each kind of value gives `Self::default()` (a compound one skipped,
/// nothing kept) unless the reader says otherwise for it.
trait Leaf: Default + Sized {
    fn number(_: Number) -> Self {
        Self::default()
    }
    fn string(_: &str) -> Self {
        Self::default()
    }
    fn boolean(_: bool) -> Self {
        Self::default()
    }
    fn seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
    fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
}

/// A JSON number as serde hands it over.
#[derive(Clone, Copy)]
enum Number {
    Pos(u64),
    Neg(i64),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Pos(n) => n as f64,
            Number::Neg(n) => n as f64,
            Number::Float(f) => f,
        }
    }
}

struct LeafVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Leaf> Visitor<'de> for LeafVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<T, E> {
        Ok(T::boolean(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<T, E> {
        Ok(T::number(Number::Pos(n)))
    }
    fn visit_i64<E>(self, n: i64) -> Result<T, E> {
        Ok(T::number(if n < 0 {
            Number::Neg(n)
        } else {
            Number::Pos(n as u64)
        }))
    }
    fn visit_f64<E>(self, n: f64) -> Result<T, E> {
        Ok(T::number(Number::Float(n)))
    }
    fn visit_str<E>(self, s: &str) -> Result<T, E> {
        Ok(T::string(s))
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::map(map)
    }
}

/// `Deserialize` for a [`Leaf`]: any JSON value is accepted.
macro_rules! leaf_deserialize {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(LeafVisitor::<$t>(std::marker::PhantomData))
            }
        }
    )*};
}

impl Leaf for Num {
    fn number(n: Number) -> Self {
        Num(Some(n.as_f64()))
    }
}

impl Leaf for Flag {
    fn number(n: Number) -> Self {
        // As `Value::as_i64`: integers only, and a `u64` beyond `i64` is none.
        Flag(match n {
            Number::Pos(p) => i64::try_from(p).ok().map(|i| i != 0),
            Number::Neg(_) => Some(true),
            Number::Float(_) => None,
        })
    }
    fn boolean(b: bool) -> Self {
        Flag(Some(b))
    }
}

impl Leaf for Text {
    fn string(s: &str) -> Self {
        Text(Some(s.to_owned()))
    }
}

impl Leaf for NonEmpty {
    fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut any = false;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            any = true;
        }
        Ok(NonEmpty(Some(any)))
    }
}

impl Leaf for Triple {
    fn seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut t = [None; 3];
        for slot in &mut t {
            match seq.next_element::<Num>()? {
                Some(n) => *slot = n.0,
                None => return Ok(Triple(t)),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Triple(t))
    }
}

leaf_deserialize!(Num, Flag, Text, NonEmpty, Triple);

/// An object read into named fields (each a [`Leaf`] or another such object); any other value, or a member
/// not named, is skipped.
macro_rules! fields {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty = $key:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub(crate) struct $name {
            $(pub $field: $ty,)*
        }

        impl Leaf for $name {
            fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
                let mut out = $name::default();
                const NAMES: &[&str] = &[$($key),*];
                let names = || Names { names: NAMES, components: false };
                while let Some(key) = map.next_key_seed(names())? {
                    match key {
                        $(Key::Name($key) => out.$field = map.next_value()?,)*
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }

        leaf_deserialize!($name);
    };
}

/// An object member's name as far as a reader cares: one of the names it reads (a static name: nothing
/// copied), a component (at the top of a status), or something else.
enum Key {
    Name(&'static str),
    Component(Kind, u32),
    Other,
}

/// Reads a member name as a [`Key`]: `names` are the reader's own, `components` whether `type:N` counts.
struct Names {
    names: &'static [&'static str],
    components: bool,
}

impl<'de> DeserializeSeed<'de> for Names {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Names {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, s: &str) -> Result<Key, E> {
        if let Some(n) = self.names.iter().find(|n| **n == s) {
            return Ok(Key::Name(n));
        }
        Ok(match component_key(s).filter(|_| self.components) {
            Some((kind, index)) => Key::Component(kind, index),
            None => Key::Other,
        })
    }
}

fields!(
    /// `{"total": …}` (`aenergy`, `ret_aenergy`).
    Total { total: Num = "total", }
);

fields!(
    /// `{"tC": …}` (a component's `temperature`).
    Celsius { t_c: Num = "tC", }
);

fields!(
    /// `{"percent": …}` (`devicepower`'s `battery`).
    Percent { percent: Num = "percent", }
);

fields!(
    /// A switch, light, cover or `pm1` channel: whatever of these it has.
    Channel {
        output: Flag = "output",
        apower: Num = "apower",
        voltage: Num = "voltage",
        current: Num = "current",
        pf: Num = "pf",
        freq: Num = "freq",
        aprtpower: Num = "aprtpower",
        aenergy: Total = "aenergy",
        ret_aenergy: Total = "ret_aenergy",
        temperature: Celsius = "temperature",
        brightness: Num = "brightness",
        ct: Num = "ct",
        rgb: Triple = "rgb",
        white: Num = "white",
        state: Text = "state",
        pos_control: Flag = "pos_control",
        current_pos: Num = "current_pos",
    }
);

fields!(
    /// `input:N`.
    Input { state: Flag = "state", }
);

fields!(
    /// `em1:N`: one channel of a per-channel energy meter.
    Em1 {
        act_power: Num = "act_power",
        voltage: Num = "voltage",
        current: Num = "current",
        pf: Num = "pf",
        freq: Num = "freq",
        aprt_power: Num = "aprt_power",
    }
);

fields!(
    /// `em1data:N`: its energy counters.
    Em1Data {
        total_act_energy: Num = "total_act_energy",
        total_act_ret_energy: Num = "total_act_ret_energy",
    }
);

fields!(
    /// `em:0`: a three-phase meter, phases `a`, `b`, `c`.
    Em {
        a_act_power: Num = "a_act_power",
        a_voltage: Num = "a_voltage",
        a_current: Num = "a_current",
        a_pf: Num = "a_pf",
        a_freq: Num = "a_freq",
        a_aprt_power: Num = "a_aprt_power",
        b_act_power: Num = "b_act_power",
        b_voltage: Num = "b_voltage",
        b_current: Num = "b_current",
        b_pf: Num = "b_pf",
        b_freq: Num = "b_freq",
        b_aprt_power: Num = "b_aprt_power",
        c_act_power: Num = "c_act_power",
        c_voltage: Num = "c_voltage",
        c_current: Num = "c_current",
        c_pf: Num = "c_pf",
        c_freq: Num = "c_freq",
        c_aprt_power: Num = "c_aprt_power",
        total_act_power: Num = "total_act_power",
    }
);

fields!(
    /// `emdata:0`: the three-phase meter's counters.
    EmData {
        a_total_act_energy: Num = "a_total_act_energy",
        a_total_act_ret_energy: Num = "a_total_act_ret_energy",
        b_total_act_energy: Num = "b_total_act_energy",
        b_total_act_ret_energy: Num = "b_total_act_ret_energy",
        c_total_act_energy: Num = "c_total_act_energy",
        c_total_act_ret_energy: Num = "c_total_act_ret_energy",
        total_act: Num = "total_act",
        total_act_ret: Num = "total_act_ret",
    }
);

fields!(
    /// A sensor component (`temperature:N`, `humidity:N`, `voltmeter:N`).
    Reading {
        t_c: Num = "tC",
        rh: Num = "rh",
        voltage: Num = "voltage",
    }
);

fields!(
    /// `devicepower:N`.
    DevicePower { battery: Percent = "battery", }
);

fields!(
    /// `sys`.
    Sys {
        mac: Text = "mac",
        wakeup_period: Num = "wakeup_period",
        uptime: Num = "uptime",
        restart_required: Flag = "restart_required",
        available_updates: NonEmpty = "available_updates",
    }
);

fields!(
    /// `Shelly.GetDeviceInfo` (or Gen1's `/shelly`), as far as a device's introduction reads it.
    DeviceInfo {
        ver: Text = "ver",
        fw_id: Text = "fw_id",
        mac: Text = "mac",
        model: Text = "model",
        kind: Text = "type",
        generation: Num = "gen",
        profile: Text = "profile",
    }
);

impl DeviceInfo {
    /// The answer frame to request `id`, its result read without building the frame; `None` as for
    /// [`StatusRead::from_answer`].
    pub(crate) fn from_answer(frame: &str, id: u64) -> Option<Box<DeviceInfo>> {
        let mut de = serde_json::Deserializer::from_str(answer_result(frame, id)?);
        let info = Box::new(DeviceInfo::deserialize(&mut de).ok()?);
        de.end().ok()?;
        Some(info)
    }

    /// Device information already parsed (anything but an object reads as none of its fields).
    pub(crate) fn from_value(v: &Value) -> Box<DeviceInfo> {
        Box::new(DeviceInfo::deserialize(v).unwrap_or_default())
    }
}

/// The component types a status is read for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Switch,
    Light,
    Cct,
    Rgb,
    Rgbw,
    Cover,
    Pm1,
    Input,
    Em,
    EmData,
    Em1,
    Em1Data,
    Temperature,
    Humidity,
    Voltmeter,
    DevicePower,
}

impl Kind {
    /// The type of an RPC component name (`switch`, `em1data`, ...).
    pub(crate) fn of(name: &str) -> Option<Kind> {
        Some(match name {
            "switch" => Kind::Switch,
            "light" => Kind::Light,
            "cct" => Kind::Cct,
            "rgb" => Kind::Rgb,
            "rgbw" => Kind::Rgbw,
            "cover" => Kind::Cover,
            "pm1" => Kind::Pm1,
            "input" => Kind::Input,
            "em" => Kind::Em,
            "emdata" => Kind::EmData,
            "em1" => Kind::Em1,
            "em1data" => Kind::Em1Data,
            "temperature" => Kind::Temperature,
            "humidity" => Kind::Humidity,
            "voltmeter" => Kind::Voltmeter,
            "devicepower" => Kind::DevicePower,
            _ => return None,
        })
    }
}

/// `type:N` as the firmware writes it (no sign, no leading zero), for a type read here.
fn component_key(s: &str) -> Option<(Kind, u32)> {
    let (name, n) = s.split_once(':')?;
    let canonical = !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && (n.len() == 1 || !n.starts_with('0'));
    if !canonical {
        return None;
    }
    Some((Kind::of(name)?, n.parse().ok()?))
}

/// One component's status.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Channel(Channel),
    Input(Input),
    Em(Box<Em>),
    EmData(EmData),
    Em1(Em1),
    Em1Data(Em1Data),
    Reading(Reading),
    DevicePower(DevicePower),
}

/// Components kept from one status. A real device has fewer than 30 of the types read here (a Pro 4PM with an
/// add-on); the bound keeps a hostile one's thousands of `switch:N` from costing the push poller, which every
/// device shares, a search of all those before per key.
const MAX_PARTS: usize = 64;

/// What a `Shelly.GetStatus` result says, reduced to what is read from it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StatusDoc {
    /// `sys` (empty when absent).
    pub sys: Sys,
    /// Every component read, with its type and id, in the order first seen.
    parts: Vec<(Kind, u32, Part)>,
}

/// A status read: its result's text (the push channel's mirror keeps it as it came) and what it says.
#[derive(Debug)]
pub(crate) struct StatusRead {
    pub text: Box<str>,
    pub doc: StatusDoc,
}

/// The result's text of the answer frame to request `id`, found without building the frame; `None` for a
/// frame of any other shape (another id, an error, a notification, a repeated member, nesting past
/// `untrusted_json`'s bound), which then goes the usual way.
fn answer_result(frame: &str, id: u64) -> Option<&str> {
    /// The members of an answer frame this looks at; the rest are skipped.
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        id: Option<u64>,
        #[serde(borrow)]
        result: Option<&'a serde_json::value::RawValue>,
        error: Option<IgnoredAny>,
    }
    if !crate::untrusted_json::within_depth(frame.as_bytes()) {
        return None;
    }
    // A repeated member is an error here (serde's rule).
    let Ok(Head {
        id: Some(answers),
        result: Some(result),
        error: None,
    }) = serde_json::from_str::<Head>(frame)
    else {
        return None;
    };
    (answers == id).then(|| result.get())
}

impl StatusRead {
    /// The answer frame to request `id`, its result read as a status without building the frame; `None` for
    /// a frame of any other shape ([`answer_result`]) or a result that is no object, which then goes the usual
    /// way.
    pub(crate) fn from_answer(frame: &str, id: u64) -> Option<StatusRead> {
        let result = answer_result(frame, id)?;
        let doc = StatusDoc::parse(result)?;
        Some(StatusRead {
            text: result.into(),
            doc,
        })
    }

    /// The text as a value (tests: what was read, to compare).
    #[cfg(test)]
    pub(crate) fn value(&self) -> Value {
        serde_json::from_str(&self.text).expect("a status read is JSON")
    }

    /// A status already parsed; `None` when it is no object.
    pub(crate) fn from_value(v: &Value) -> Option<StatusRead> {
        v.is_object().then(|| StatusRead {
            text: v.to_string().into_boxed_str(),
            doc: StatusDoc::from_value(v),
        })
    }
}

impl StatusDoc {
    /// Reads a status from its JSON text (`None`: not JSON, or not an object).
    pub(crate) fn parse(text: &str) -> Option<StatusDoc> {
        let mut de = serde_json::Deserializer::from_str(text);
        let doc = Read::deserialize(&mut de).ok()?;
        de.end().ok()?;
        doc.object.then_some(doc.doc)
    }

    /// Reads a status already parsed (anything but an object reads as an empty status).
    pub(crate) fn from_value(v: &Value) -> StatusDoc {
        Read::deserialize(v).map_or_else(|_| StatusDoc::default(), |d| d.doc)
    }

    /// Component `kind:index`, if the status has it.
    pub(crate) fn part(&self, kind: Kind, index: u32) -> Option<&Part> {
        self.parts
            .iter()
            .find(|(k, i, _)| *k == kind && *i == index)
            .map(|(_, _, p)| p)
    }

    /// Whether the status has component `kind:index` (whatever its value).
    pub(crate) fn has(&self, kind: Kind, index: u32) -> bool {
        self.part(kind, index).is_some()
    }

    /// Channel `kind:index` (a switch, light, cover or `pm1`).
    pub(crate) fn channel(&self, kind: Kind, index: u32) -> Option<&Channel> {
        match self.part(kind, index)? {
            Part::Channel(c) => Some(c),
            _ => None,
        }
    }

    /// Sensor component `kind:index`.
    pub(crate) fn reading(&self, kind: Kind, index: u32) -> Option<&Reading> {
        match self.part(kind, index)? {
            Part::Reading(r) => Some(r),
            _ => None,
        }
    }

    fn put(&mut self, kind: Kind, index: u32, part: Part) {
        // A repeated key: the last one counts, in the first one's place (as a JSON object keeps it).
        let full = self.parts.len() >= MAX_PARTS;
        match self
            .parts
            .iter_mut()
            .find(|(k, i, _)| *k == kind && *i == index)
        {
            Some(slot) => slot.2 = part,
            None if !full => self.parts.push((kind, index, part)),
            None => {}
        }
    }
}

/// A status, and whether its text was an object at all.
#[derive(Default)]
struct Read {
    doc: StatusDoc,
    object: bool,
}

impl Leaf for Read {
    fn map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut doc = StatusDoc::default();
        let names = || Names {
            names: &["sys"],
            components: true,
        };
        while let Some(key) = map.next_key_seed(names())? {
            let (kind, index) = match key {
                Key::Name("sys") => {
                    doc.sys = map.next_value()?;
                    continue;
                }
                Key::Component(kind, index) => (kind, index),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let part = match kind {
                Kind::Switch
                | Kind::Light
                | Kind::Cct
                | Kind::Rgb
                | Kind::Rgbw
                | Kind::Cover
                | Kind::Pm1 => Part::Channel(map.next_value()?),
                Kind::Input => Part::Input(map.next_value()?),
                Kind::Em => Part::Em(Box::new(map.next_value()?)),
                Kind::EmData => Part::EmData(map.next_value()?),
                Kind::Em1 => Part::Em1(map.next_value()?),
                Kind::Em1Data => Part::Em1Data(map.next_value()?),
                Kind::Temperature | Kind::Humidity | Kind::Voltmeter => {
                    Part::Reading(map.next_value()?)
                }
                Kind::DevicePower => Part::DevicePower(map.next_value()?),
            };
            doc.put(kind, index, part);
        }
        Ok(Read { doc, object: true })
    }
}

leaf_deserialize!(Read);

impl<'de> Deserialize<'de> for StatusDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Read::deserialize(d).map(|r| r.doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_reads_the_fields_a_device_shows_and_nothing_else() {
        let text = r#"{"ble":{},"input:0":{"id":0,"state":false},"switch:0":{"id":0,"source":"init",
            "output":true,"apower":12.5,"voltage":230.1,"current":0,"aenergy":{"total":7,"by_minute":[0,1,2]},
            "temperature":{"tC":45,"tF":113}},"sys":{"mac":"028E7B42916F","uptime":1,"available_updates":{}},
            "wifi":{"rssi":-55}}"#;
        let d = StatusDoc::parse(text).unwrap();
        let c = d.channel(Kind::Switch, 0).unwrap();
        assert_eq!(
            (c.output, c.apower, c.current),
            (Flag(Some(true)), Num(Some(12.5)), Num(Some(0.0)))
        );
        assert_eq!(
            (c.aenergy.total, c.temperature.t_c),
            (Num(Some(7.0)), Num(Some(45.0)))
        );
        assert_eq!(c.pf, Num(None), "not reported is None");
        assert_eq!(
            d.part(Kind::Input, 0),
            Some(&Part::Input(Input {
                state: Flag(Some(false))
            }))
        );
        assert_eq!(d.sys.mac.0.as_deref(), Some("028E7B42916F"));
        assert_eq!(d.sys.available_updates, NonEmpty(Some(false)));
        assert!(!d.has(Kind::Switch, 1));
        assert_eq!(
            StatusDoc::from_value(&serde_json::from_str(text).unwrap()),
            d
        );
    }

    #[test]
    fn odd_values_are_none_not_errors() {
        let v = json!({
            "switch:0": {"output": 1, "apower": "12", "voltage": null, "aenergy": 5, "rgb": [1, "x", 3, 4]},
            "switch:1": {"output": 1.0, "apower": {"a": 1}, "current": [1]},
            "switch:2": 17,
            "input:0": {"state": 18446744073709551615u64},
            "sys": {"available_updates": {"stable": {}}, "restart_required": -1},
        });
        let d = StatusDoc::from_value(&v);
        let c0 = d.channel(Kind::Switch, 0).unwrap();
        assert_eq!(
            (c0.output, c0.apower, c0.voltage),
            (Flag(Some(true)), Num(None), Num(None))
        );
        assert_eq!(
            (c0.aenergy.total, c0.rgb),
            (Num(None), Triple([Some(1.0), None, Some(3.0)]))
        );
        let c1 = d.channel(Kind::Switch, 1).unwrap();
        assert_eq!(
            (c1.output, c1.apower, c1.current),
            (Flag(None), Num(None), Num(None))
        );
        // Present, though not an object: the key is there.
        assert_eq!(d.channel(Kind::Switch, 2), Some(&Channel::default()));
        assert_eq!(
            d.part(Kind::Input, 0),
            Some(&Part::Input(Input { state: Flag(None) }))
        );
        assert_eq!(d.sys.available_updates, NonEmpty(Some(true)));
        assert_eq!(d.sys.restart_required, Flag(Some(true)));
        // The same from the text.
        assert_eq!(StatusDoc::parse(&v.to_string()), Some(d));
    }

    #[test]
    fn keys_are_spelled_as_the_firmware_spells_them_and_the_last_repeat_counts() {
        let text = r#"{"switch:01":{"output":true},"switch:+1":{"output":true},"switch:":{},"Switch:0":{},
            "switch:1":{"output":false},"switch:1":{"output":true},"em1:4294967296":{}}"#;
        let d = StatusDoc::parse(text).unwrap();
        assert_eq!(d.parts.len(), 1, "{d:?}");
        assert_eq!(d.channel(Kind::Switch, 1).unwrap().output, Flag(Some(true)));
        // Escaped names are the same names.
        let d = StatusDoc::parse(r#"{"sw\u0069tch:0":{"\u006futput":true}}"#).unwrap();
        assert_eq!(d.channel(Kind::Switch, 0).unwrap().output, Flag(Some(true)));
    }

    /// A status with ever more components keeps the first `MAX_PARTS`; a repeat of one kept still counts.
    #[test]
    fn a_flood_of_components_is_bounded() {
        let mut text = String::from(r#"{"switch:0":{"output":false}"#);
        for i in 1..100_000 {
            text.push_str(&format!(r#","switch:{i}":{{"output":true}}"#));
        }
        text.push_str(r#","switch:0":{"output":true}}"#);
        let d = StatusDoc::parse(&text).unwrap();
        assert_eq!(d.parts.len(), MAX_PARTS);
        assert_eq!(d.channel(Kind::Switch, 0).unwrap().output, Flag(Some(true)));
        assert!(d.has(Kind::Switch, MAX_PARTS as u32 - 1));
        assert!(!d.has(Kind::Switch, MAX_PARTS as u32));
    }

    #[test]
    fn not_an_object_or_not_json_is_refused_from_text() {
        for text in [
            "[]",
            "5",
            "null",
            "",
            "{",
            r#"{"sys":{}} x"#,
            r#"{"switch:0":{"output":tru}}"#,
        ] {
            assert_eq!(StatusDoc::parse(text), None, "{text}");
        }
        assert_eq!(StatusDoc::from_value(&json!([1])), StatusDoc::default());
    }

    /// The device information is read as `driver/json.rs` reads it from a tree: strings only for text, numbers
    /// only for `gen`, the last of a repeated member, nothing from a result that is no object.
    #[test]
    fn device_information_reads_what_the_tree_readers_read() {
        use crate::driver::json::{num, text};
        let results = [
            r#"{"name":null,"id":"shellyplus1pm-028e7b42916f","mac":"028E7B42916F","slot":1,"model":"SNSW-001P16EU","gen":2,"fw_id":"20260311-095847/1.7.5-g0e0e0e0","ver":"1.7.5","app":"Plus1PM","auth_en":false,"auth_domain":null,"profile":"switch"}"#,
            r#"{"type":"SHSW-1","mac":"A4CF12F45B2C","fw":"20230913-112003/v1.14.0-gcb84623"}"#,
            r#"{"ver":null,"fw_id":"x","model":5,"type":"T","gen":"2","mac":{"a":1},"profile":[1]}"#,
            r#"{"model":"A","model":"B","gen":1,"gen":3.5,"ver":"1","ver":"2"}"#,
            r#"{"nested":{"model":"no","gen":9},"m\u006fdel":"escaped"}"#,
            r#"{}"#,
            r#"[1,2]"#,
            r#""text""#,
            r#"null"#,
        ];
        for (i, result) in results.iter().enumerate() {
            let v: Value = serde_json::from_str(result).unwrap();
            let frame = format!(r#"{{"id":{i},"src":"dev","result":{result}}}"#);
            // A `null` result is no result to the frame reader: it goes the usual way.
            let Some(read) = DeviceInfo::from_answer(&frame, i as u64) else {
                assert_eq!(*result, "null");
                continue;
            };
            assert_eq!(read, DeviceInfo::from_value(&v), "{result}");
            assert_eq!(read.ver.0, text(&v, &["ver"]), "{result}");
            assert_eq!(read.fw_id.0, text(&v, &["fw_id"]), "{result}");
            assert_eq!(read.mac.0, text(&v, &["mac"]), "{result}");
            assert_eq!(read.model.0, text(&v, &["model"]), "{result}");
            assert_eq!(read.kind.0, text(&v, &["type"]), "{result}");
            assert_eq!(read.generation.0, num(&v, &["gen"]), "{result}");
            assert_eq!(read.profile.0, text(&v, &["profile"]), "{result}");
            // Another id, an error, or no result: not this answer (the frame then goes the usual way).
            assert!(DeviceInfo::from_answer(&frame, i as u64 + 1).is_none());
        }
        for frame in [
            r#"{"id":1,"error":{"code":401,"message":"x"}}"#,
            r#"{"id":1,"result":{"ver":"1"},"error":{"code":1}}"#,
            r#"{"id":1,"id":1,"result":{"ver":"1"}}"#,
            r#"{"id":1,"result":{"ver":"1"}"#,
            r#"{"method":"NotifyStatus","params":{}}"#,
        ] {
            assert!(DeviceInfo::from_answer(frame, 1).is_none(), "{frame}");
        }
    }
}
