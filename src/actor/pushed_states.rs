//! The input and output states of a status text, read without a JSON tree: what the push channel compares
//! notifications with after open and after a reconnect (`push::state_events`).
//!
//! At open the poller took that baseline from every device's mirror as a whole `serde_json::Value` (some 100
//! allocations for 60 values) to look at two of them: a tenth of its CPU for the open of 1,000 devices. This
//! reads the same text once and keeps only `input:N` `state` and `<output type>:N` `output`, as the entries
//! a full parse gives `state_events`: the key as sent, an object holding the field when the device sent it
//! (its last value when repeated), an empty object when not (a value that is no object has no field either).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::objects::ComponentKind;

/// The entries `state_events` reads from `text` (a status object), or `None` when it is no JSON object.
pub(crate) fn states_in(text: &str, output_type: &str) -> Option<Map<String, Value>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let states = de.deserialize_map(Top { output_type }).ok()?;
    de.end().ok()?;
    Some(states)
}

/// The state a status entry `key` (`type:N`) carries for `state_events`: the component's kind, its index and
/// the field (`state` of an input, `output` of an output of the device's `output_type`).
pub(crate) fn state_of(
    key: &str,
    output_type: &str,
) -> Option<(ComponentKind, usize, &'static str)> {
    let (kind, n) = key.split_once(':')?;
    let n = n.parse::<usize>().ok()?;
    if kind == "input" {
        Some((ComponentKind::Input, n, "state"))
    } else if kind == output_type {
        Some((ComponentKind::Output, n, "output"))
    } else {
        None
    }
}

/// The field [`state_of`] names for `key`.
fn field_of(key: &str, output_type: &str) -> Option<&'static str> {
    state_of(key, output_type).map(|(_, _, field)| field)
}

struct Top<'a> {
    output_type: &'a str,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a status object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(wanted) = map.next_key_seed(Key(self.output_type))? {
            match wanted {
                Some((key, field)) => {
                    let mut fields = Map::new();
                    if let Some(v) = map.next_value_seed(Field(field))? {
                        fields.insert(field.to_string(), v);
                    }
                    out.insert(key, Value::Object(fields));
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// A top-level key: itself and its field when `state_events` reads it, else `None` (nothing allocated).
struct Key<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<(String, &'static str)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<(String, &'static str)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(field_of(key, self.0).map(|field| (key.to_string(), field)))
    }
}

/// A component's value: the named field's value when it is an object that has it (the last one sent).
struct Field(&'static str);

impl<'de> DeserializeSeed<'de> for Field {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Field {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_field) = map.next_key_seed(Named(self.0))? {
            if is_field {
                found = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    // Any other value has no field: skipped.
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// Whether a component's key is the field looked for.
struct Named(&'static str);

impl<'de> DeserializeSeed<'de> for Named {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Named {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `state_events` reads from a full parse: per relevant key, the field's value (or none).
    fn read_by_tree(text: &str, output_type: &str) -> Option<Vec<(String, Option<Value>)>> {
        let Ok(Value::Object(m)) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        Some(
            m.iter()
                .filter_map(|(k, v)| {
                    let field = field_of(k, output_type)?;
                    Some((k.clone(), v.get(field).cloned()))
                })
                .collect(),
        )
    }

    fn read_here(text: &str, output_type: &str) -> Option<Vec<(String, Option<Value>)>> {
        let m = states_in(text, output_type)?;
        Some(
            m.iter()
                .map(|(k, v)| {
                    let field = field_of(k, output_type).expect("only read keys are kept");
                    (k.clone(), v.get(field).cloned())
                })
                .collect(),
        )
    }

    #[test]
    fn the_states_read_are_those_a_whole_parse_gives() {
        let texts = [
            // A ShellyPlus1PM as the firmware sends it.
            r#"{"ble":{},"input:0":{"id":0,"state":false},"switch:0":{"id":0,"source":"init","output":true,"apower":0,"aenergy":{"total":0,"by_minute":[0,0,0]},"temperature":{"tC":45}},"sys":{"mac":"A"}}"#,
            // Unknown, null and odd states; several inputs; keys out of order.
            r#"{"switch:1":{"output":null},"input:2":{"state":null},"input:0":{"id":0},"input:1":{"state":1},"switch:0":{"output":"on"}}"#,
            // A repeated key (the last wins, as in a tree) and a repeated field.
            r#"{"input:0":{"state":true},"input:0":{"state":false,"state":true},"switch:0":{"output":true},"switch:0":{"id":0}}"#,
            // Components that are no object, keys that are not `type:N`, escapes, nesting.
            r#"{"input:0":5,"switch:0":[1,{"output":true}],"switch:x":{"output":true},"switch":{"output":true},"inp\u0075t:3":{"st\u0061te":true},"switch:4":{"nested":{"output":false},"output":{"deep":[1,2]}}}"#,
            // The light types.
            r#"{"light:0":{"output":true},"rgbw:0":{"output":false},"cct:1":{"output":true},"input:0":{"state":false}}"#,
            r#"{}"#,
        ];
        for text in texts {
            for output_type in ["switch", "light", "rgbw", "cct", "rgb"] {
                assert_eq!(
                    read_here(text, output_type),
                    read_by_tree(text, output_type),
                    "{output_type}: {text}"
                );
            }
        }
    }

    #[test]
    fn what_is_no_status_object_reads_as_none() {
        for text in [
            "",
            "[]",
            "null",
            "\"input:0\"",
            r#"{"input:0":{"state":true}"#,
            r#"{"input:0":{"state":true}} x"#,
            r#"{"input:0":{"state":tru}}"#,
        ] {
            assert_eq!(states_in(text, "switch"), None, "{text}");
            assert_eq!(read_by_tree(text, "switch"), None, "{text}");
        }
        // Deep nesting inside a skipped component is skipped without recursion (a tree parse refuses it at 128
        // levels): no stack overflow, and no state in it either way.
        let deep = format!(
            r#"{{"sys":{}1{},"input:0":{{"state":true}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let states = states_in(&deep, "switch").expect("skipped, not refused");
        assert_eq!(
            states.get("input:0"),
            Some(&serde_json::json!({"state": true}))
        );
    }
}
