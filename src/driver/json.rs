//! Small readers for device JSON: a missing or mistyped value is `None`, never 0.

use serde_json::Value;

/// The value at `path` (object keys), if present and not null.
pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |cur, key| cur.get(key))
        .filter(|x| !x.is_null())
}

/// A number at `path`.
pub(crate) fn num(v: &Value, path: &[&str]) -> Option<f64> {
    at(v, path)?.as_f64()
}

/// A boolean at `path` (also 0/1, as Gen1 inputs report).
pub(crate) fn flag(v: &Value, path: &[&str]) -> Option<bool> {
    match at(v, path)? {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_i64().map(|i| i != 0),
        _ => None,
    }
}

/// A MAC address at `path`, in the one spelling (`AA:BB:CC:DD:EE:FF`); `None` when missing or not a MAC.
pub(crate) fn mac(v: &Value, path: &[&str]) -> Option<String> {
    text(v, path).and_then(|m| crate::mac::normalise(&m))
}

/// A string at `path`.
pub(crate) fn text(v: &Value, path: &[&str]) -> Option<String> {
    at(v, path)?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_null_and_wrong_types_are_none() {
        let v: Value = serde_json::json!({"a": {"b": 2.5, "n": null, "s": "x", "i": 1}});
        assert_eq!(num(&v, &["a", "b"]), Some(2.5));
        assert_eq!(num(&v, &["a", "n"]), None);
        assert_eq!(num(&v, &["a", "s"]), None);
        assert_eq!(num(&v, &["z"]), None);
        assert_eq!(flag(&v, &["a", "i"]), Some(true));
        assert_eq!(text(&v, &["a", "s"]).as_deref(), Some("x"));
    }
}
