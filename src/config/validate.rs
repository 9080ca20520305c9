//! Checks a document against the validation dictionary and reports every problem with its full key path.

use serde_json::Value;

use super::dictionary::{Rule, ValueType};
use crate::error::Problem;

/// Validates `doc` (the whole configuration document) against `root` and returns every problem found.
pub(crate) fn validate(doc: &Value, root: &Rule) -> Vec<Problem> {
    let mut problems = Vec::new();
    match doc {
        Value::Object(_) => check_value(doc, root, "", &mut problems),
        Value::Null => problems.push(Problem::new("", "the configuration is empty")),
        other => problems.push(Problem::new(
            "",
            format!(
                "the configuration must be a mapping of keys, found {}",
                describe(other)
            ),
        )),
    }
    problems
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Short description of a value for messages: its kind and, for scalars, the value itself.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string \"{s}\""),
        Value::Array(a) => format!("a list of {} item(s)", a.len()),
        Value::Object(_) => "a mapping".into(),
    }
}

/// Turns whole numbers written with a decimal point (`ID: 3.0`, `RetryCount: 2.0`) into integers where the
/// dictionary asks for an integer: they have one clear meaning, and the anchor library accepted them.
pub(crate) fn integral_numbers(v: &mut Value, rule: &Rule) {
    match v {
        Value::Number(n) if rule.kind == ValueType::Integer && !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(items) => {
            if let Some(item_rule) = &rule.items {
                for item in items {
                    integral_numbers(item, item_rule);
                }
            }
        }
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if let Some(field_rule) = rule.field(key) {
                    integral_numbers(value, field_rule);
                }
            }
        }
        _ => {}
    }
}

fn type_matches(v: &Value, t: ValueType) -> bool {
    match t {
        ValueType::Any => true,
        ValueType::String => v.is_string(),
        ValueType::Integer => v.is_i64() || v.is_u64(),
        ValueType::Number => v.is_number(),
        ValueType::Boolean => v.is_boolean(),
        ValueType::Dict => v.is_object(),
        ValueType::List => v.is_array(),
    }
}

fn check_value(v: &Value, rule: &Rule, path: &str, problems: &mut Vec<Problem>) {
    if v.is_null() {
        if !rule.accepts_null() {
            problems.push(Problem::new(path, "must not be null"));
        }
        return;
    }
    if rule.kind == ValueType::Integer
        && let Value::Number(n) = v
        && n.as_i64().is_none()
        && (n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0))
    {
        // Above i64::MAX: taken as no value at all, it would silently become an automatic ID.
        problems.push(Problem::new(
            path,
            format!("{n} is out of range; integers go up to {}", i64::MAX),
        ));
        return;
    }
    if !type_matches(v, rule.kind) {
        let hint = match (rule.kind, v) {
            (ValueType::String, Value::Number(_) | Value::Bool(_)) => " (put it in quotes)",
            (ValueType::Integer, Value::Number(_)) => " (no decimals)",
            _ => "",
        };
        problems.push(Problem::new(
            path,
            format!("expected {}, found {}{hint}", rule.kind, describe(v)),
        ));
        return;
    }
    if let Some(allowed) = &rule.allowed
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed
            .iter()
            .map(|a| {
                a.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| a.to_string())
            })
            .collect();
        problems.push(Problem::new(
            path,
            format!(
                "{} is not allowed; use one of: {}",
                describe(v),
                list.join(", ")
            ),
        ));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = rule.min
            && n < min
        {
            problems.push(Problem::new(
                path,
                format!("{n} is below the minimum {min}"),
            ));
        }
        if let Some(max) = rule.max
            && n > max
        {
            problems.push(Problem::new(
                path,
                format!("{n} is above the maximum {max}"),
            ));
        }
    }
    match v {
        Value::String(s) if s.trim().is_empty() && rule.empty == Some(false) => {
            problems.push(Problem::new(path, "must not be empty"));
        }
        Value::Array(items) => {
            if let Some(min) = rule.minlength
                && items.len() < min
            {
                problems.push(Problem::new(
                    path,
                    format!("has {} item(s); at least {min} needed", items.len()),
                ));
            }
            if let Some(max) = rule.maxlength
                && items.len() > max
            {
                problems.push(Problem::new(
                    path,
                    format!("has {} item(s); at most {max} allowed", items.len()),
                ));
            }
            if let Some(item_rule) = &rule.items {
                for (i, item) in items.iter().enumerate() {
                    check_value(item, item_rule, &format!("{path}[{i}]"), problems);
                }
            }
        }
        Value::Object(map) => check_map(map, rule, path, problems),
        _ => {}
    }
}

fn check_map(
    map: &serde_json::Map<String, Value>,
    rule: &Rule,
    path: &str,
    problems: &mut Vec<Problem>,
) {
    // A rule with no fields and allow_unknown unset is still strict: every key must be defined.
    let mut seen: Vec<(&str, &str)> = Vec::new(); // (canonical, as written)
    for (key, value) in map {
        let at = child(path, key);
        match rule.field_entry(key) {
            Some((canonical, field_rule)) => {
                if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canonical) {
                    problems.push(Problem::new(
                        &at,
                        format!("'{key}' and '{first}' are the same key; keep one"),
                    ));
                    continue;
                }
                seen.push((canonical, key));
                check_value(value, field_rule, &at, problems);
            }
            None if rule.allow_unknown || rule.kind == ValueType::Any => {}
            None => {
                let known = rule.fields.iter().flat_map(|(k, r)| {
                    std::iter::once(k.as_str()).chain(r.aliases.iter().map(String::as_str))
                });
                // Layout A's flat webhook keys in layout B: say where they go instead.
                let nested = key
                    .strip_prefix("Webhook")
                    .map(|k| if k == "sEnabled" { "Enabled" } else { k })
                    .filter(|k| {
                        rule.field("ShellyWebhooks")
                            .and_then(|w| w.field(k))
                            .is_some()
                    });
                if let Some(k) = nested {
                    problems.push(Problem::new(
                        &at,
                        format!("unknown key; it is a layout A (ShellyDevices) key: here write ShellyWebhooks: {{{k}: ...}}"),
                    ));
                    continue;
                }
                match crate::suggest::closest(key, known) {
                    Some(k) => problems.push(Problem::new(
                        &at,
                        format!("unknown key; did you mean '{k}'?"),
                    )),
                    // The application's own blocks (Website, Email, Location, ...) sit beside ours at the top:
                    // they are the application's to validate unless it put rules for them into the dictionary.
                    None if path.is_empty() => {}
                    None => problems.push(Problem::new(
                        &at,
                        "unknown key; if it is a custom attribute of yours, add it to the validation dictionary (ValidationDictionary::define, or sdctl --schema FILE)",
                    )),
                }
            }
        }
    }
    let mut reported: Vec<(&str, &str)> = Vec::new();
    for (canonical, written) in &seen {
        let Some(field_rule) = rule.field(canonical) else {
            continue;
        };
        for excluded in &field_rule.excludes {
            let Some((_, other)) = seen.iter().find(|(c, w)| {
                *c == excluded.as_str()
                    || *w == excluded.as_str()
                    || rule
                        .field(c)
                        .is_some_and(|r| r.aliases.iter().any(|a| a == excluded))
            }) else {
                continue;
            };
            let pair = if written < other {
                (*written, *other)
            } else {
                (*other, *written)
            };
            if !reported.contains(&pair) {
                reported.push(pair);
                problems.push(Problem::new(
                    path,
                    format!(
                        "'{}' and '{}' cannot be used together; keep one layout",
                        pair.0, pair.1
                    ),
                ));
            }
        }
    }
    for (name, field_rule) in &rule.fields {
        if field_rule.required && !seen.iter().any(|(c, _)| c == name) {
            problems.push(Problem::new(child(path, name), "required key is missing"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ValidationDictionary;

    fn problems(yaml: &str) -> Vec<String> {
        let doc = crate::yaml::parse(yaml).unwrap();
        validate(&doc, ValidationDictionary::builtin().root())
            .into_iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn reports_every_problem_with_its_path() {
        let p = problems(
            "SmartDevices:\n  ResponseTimeout: fast\n  RetryCount: 1.5\n  Devices:\n    - Model: X\n      \
             Outputs: [{Name: a, Colour: red}]\n    - Name: b\n",
        );
        assert!(
            p.contains(
                &"SmartDevices.ResponseTimeout: expected number, found string \"fast\"".to_string()
            ),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|s| s.starts_with("SmartDevices.RetryCount: expected integer")),
            "{p:?}"
        );
        assert!(p.iter().any(|s| s.starts_with("SmartDevices.Devices[0].Outputs[0].Colour: unknown key; if it is a custom attribute of yours, add it to the validation dictionary")), "{p:?}");
        assert!(
            p.contains(&"SmartDevices.Devices[1].Model: required key is missing".to_string()),
            "{p:?}"
        );
        assert_eq!(p.len(), 4, "{p:?}");
    }

    #[test]
    fn null_means_default_but_not_for_required_keys() {
        assert!(problems("SmartDevices:\n  ResponseTimeout: null\n  Devices: []\n").is_empty());
        let p = problems("SmartDevices:\n  Devices: null\n");
        assert_eq!(p, ["SmartDevices.Devices: must not be null"]);
    }

    #[test]
    fn ranges_allowed_values_and_lengths() {
        let p = problems(
            "SmartDevices:\n  RetryCount: 11\n  Devices:\n    - Model: M\n      TempProbes: [{Name: a},{Name: b},{Name: c},{Name: d},{Name: e},{Name: f}]\nFiles:\n  ConsoleVerbosity: loud\n",
        );
        assert!(
            p.iter()
                .any(|s| s == "SmartDevices.RetryCount: 11 is above the maximum 10"),
            "{p:?}"
        );
        assert!(
            p.iter().any(
                |s| s == "SmartDevices.Devices[0].TempProbes: has 6 item(s); at most 5 allowed"
            ),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|s| s.starts_with("Files.ConsoleVerbosity: string \"loud\" is not allowed")),
            "{p:?}"
        );
    }

    #[test]
    fn both_roots_and_alias_pairs_are_refused() {
        let p = problems("ShellyDevices:\n  Devices: []\nSCSmartDevices:\n  Devices: []\n");
        assert!(
            p.iter().any(|s| s.contains("cannot be used together")),
            "{p:?}"
        );
        let p =
            problems("SmartDevices:\n  Devices: []\n  ShellyWebhooks: {}\n  VendorWebhooks: {}\n");
        assert!(p.iter().any(|s| s.contains("are the same key")), "{p:?}");
    }

    #[test]
    fn unknown_root_key_and_wrong_document_shape() {
        // The application's own blocks beside ours are its business; a near miss of ours is not.
        let p = problems(
            "Email: {}\nWebsite: {Port: 8080}\nHeartbeatMonitor: {}\nLocation: {}\nSmartDevices:\n  Devices: []\n",
        );
        assert!(p.is_empty(), "{p:?}");
        let p = problems("SmartDevice:\n  Devices: []\n");
        assert_eq!(
            p,
            ["SmartDevice: unknown key; did you mean 'SmartDevices'?"]
        );
        let p = problems("SmartDevices:\n  ResponseTimout: 3\n  Devices: []\n");
        assert_eq!(
            p,
            ["SmartDevices.ResponseTimout: unknown key; did you mean 'ResponseTimeout'?"]
        );
        assert_eq!(
            problems("- a\n"),
            ["the configuration must be a mapping of keys, found a list of 1 item(s)"]
        );
    }
}
