//! JSON from outside (device answers, webhook bodies, simulation files), parsed with bounded nesting. Our
//! threads have small stacks (256 KiB), and serde_json's own limit (128 levels) is deeper than such a stack
//! holds in a debug build: a 100,000-deep `[[[…` overflowed a worker. No device sends more than a few levels.
//!
//! The value is built here, not by serde_json's own visitor: that one grows each object's map entry by entry
//! (with `preserve_order`, an `IndexMap`: its entries and its hash table reallocated and rehashed at 4, 8,
//! 16…), which was a fifth of the push poller's CPU reading 1,000 statuses. Here each object's entries are
//! gathered first in a list kept per nesting level, then moved into a map made at its final size. The result
//! is the same `Value`, keys in the same order (a repeated key keeps its first place and its last value).

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Deepest nesting accepted; real device answers use fewer than 10 levels.
pub(crate) const MAX_DEPTH: usize = 32;

/// Parses `bytes` as JSON, refusing arrays and objects nested more than [`MAX_DEPTH`] levels (counted as
/// they are entered: nothing deeper is ever visited). The error is a short phrase for a message.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, String> {
    let mut scratch = Scratch::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = Node {
        depth: 0,
        scratch: &mut scratch,
    }
    .deserialize(&mut de)
    .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// Whether arrays and objects in `bytes` nest at most [`MAX_DEPTH`] levels: one linear pass, for JSON read
/// some other way than [`parse`] (nothing is parsed here; brackets inside strings do not count).
pub(crate) fn within_depth(bytes: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// Per nesting level, the entries of the object or array being read there (reused by the next one).
#[derive(Default)]
struct Scratch {
    objects: Vec<Vec<(String, Value)>>,
    arrays: Vec<Vec<Value>>,
}

/// One value at `depth` (the number of arrays and objects around it).
struct Node<'s> {
    depth: usize,
    scratch: &'s mut Scratch,
}

impl Node<'_> {
    fn deeper<E: de::Error>(&mut self) -> Result<Node<'_>, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!(
                "JSON nested deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(Node {
            depth: self.depth + 1,
            scratch: self.scratch,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let level = self.depth;
        let mut items = take(&mut self.scratch.arrays, level);
        while let Some(v) = seq.next_element_seed(self.deeper()?)? {
            items.push(v);
        }
        // Allocated once, at its length; `items` keeps its capacity for the next array at this level.
        let mut array = Vec::with_capacity(items.len());
        array.append(&mut items);
        self.scratch.arrays[level] = items;
        Ok(Value::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let level = self.depth;
        let mut entries = take(&mut self.scratch.objects, level);
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.deeper()?)?;
            entries.push((key, value));
        }
        let mut object = Map::with_capacity(entries.len());
        for (k, v) in entries.drain(..) {
            object.insert(k, v);
        }
        self.scratch.objects[level] = entries;
        Ok(Value::Object(object))
    }
}

/// The list kept for `level`, taken out while that level's value is read (deeper levels use their own).
fn take<T>(lists: &mut Vec<Vec<T>>, level: usize) -> Vec<T> {
    if lists.len() <= level {
        lists.resize_with(level + 1, Vec::new);
    }
    std::mem::take(&mut lists[level])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_bounded_but_brackets_in_strings_do_not_count() {
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(ok.as_bytes()).is_ok());
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(
            parse(deep.as_bytes())
                .unwrap_err()
                .contains("deeper than 32")
        );
        assert!(parse("[".repeat(100_000).as_bytes()).is_err());
        let quoted = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(100), "{".repeat(100));
        assert_eq!(
            parse(quoted.as_bytes()).unwrap()["a"]
                .as_str()
                .unwrap()
                .len(),
            201
        );
        assert!(parse(b"{\"a\":").is_err());
    }

    /// Whatever serde_json's own parser makes of `text` (a value or an error), this one makes too.
    fn same_as_serde_json(text: &str) {
        let ours = parse(text.as_bytes());
        let theirs = serde_json::from_str::<Value>(text);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                // Same keys in the same order, at every level.
                assert_eq!(a.to_string(), b.to_string(), "{text}");
            }
            (Err(_), Err(_)) => {}
            _ => panic!("{text}: ours {ours:?}, serde_json {theirs:?}"),
        }
    }

    #[test]
    fn values_are_those_serde_json_makes() {
        for text in [
            r#"{"ble":{},"switch:0":{"id":0,"output":true,"apower":-12.5,"aenergy":{"total":1000.25,"by_minute":[0,1.5,-2]}},"sys":{"mac":"AABBCCDDEEFF","available_updates":{}}}"#,
            r#"{"b":1,"a":2,"b":3}"#,
            r#"{"z":{"y":{"x":[[],{},[{}],"\u00e9\"\\"]}},"a":null}"#,
            r#"[18446744073709551615,-9223372036854775808,1e308,-0.0,5e-324,1.7976931348623157e308]"#,
            r#"  "text"  "#,
            "true",
            "null",
            "[]",
            "{}",
            "",
            "{",
            r#"{"a":1,}"#,
            r#"[1,2]x"#,
            r#"{"a":1e400}"#,
            r#"{"\ud83d\ude00":"\ud83d"}"#,
            "[1,[2,[3,[4,{\"k\":[5]}]]]]",
        ] {
            same_as_serde_json(text);
        }
    }

    #[test]
    fn many_random_documents_parse_as_serde_json_parses_them() {
        // A fixed xorshift: the same documents each run.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        fn document(next: &mut dyn FnMut() -> u64, depth: usize, out: &mut String) {
            match next() % if depth > 3 { 5 } else { 8 } {
                0 => out.push_str("null"),
                1 => out.push_str(if next().is_multiple_of(2) {
                    "true"
                } else {
                    "false"
                }),
                2 => out.push_str(&(next() as i64).to_string()),
                3 => out.push_str(&format!("{}", (next() % 100_000) as f64 / 7.0)),
                4 => out.push_str(&format!("\"s{}\"", next() % 50)),
                5 | 6 => {
                    out.push('{');
                    for i in 0..next() % 10 {
                        if i > 0 {
                            out.push(',');
                        }
                        // Few distinct keys: repeats happen.
                        out.push_str(&format!("\"k{}\":", next() % 12));
                        document(next, depth + 1, out);
                    }
                    out.push('}');
                }
                _ => {
                    out.push('[');
                    for i in 0..next() % 10 {
                        if i > 0 {
                            out.push(',');
                        }
                        document(next, depth + 1, out);
                    }
                    out.push(']');
                }
            }
        }
        for _ in 0..2_000 {
            let mut text = String::new();
            document(&mut next, 0, &mut text);
            same_as_serde_json(&text);
            // Cut short, it is an error for both.
            if text.len() > 2 {
                same_as_serde_json(&text[..text.len() / 2]);
            }
        }
    }
}
