//! The only place that touches the YAML crate: YAML text in, a neutral JSON tree out.
//!
//! Keeping YAML behind this one function lets the YAML crate be swapped without touching the
//! validation or settings code, which work on `serde_json::Value` (key order preserved).

use serde_json::{Map, Number, Value};
use serde_yaml::Value as Yaml;

use crate::error::Problem;

/// Parses a YAML document into a JSON value tree.
///
/// Duplicate keys, non-string keys, tags and non-finite numbers are reported as problems with their path.
/// `<<` merge keys are applied.
pub(crate) fn parse(text: &str) -> Result<Value, Vec<Problem>> {
    check_nesting(text)?;
    let mut doc: Yaml = serde_yaml::from_str(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!("line {}, column {}", l.line(), l.column()))
            .unwrap_or_default();
        vec![Problem::new(at, format!("not valid YAML: {e}"))]
    })?;
    doc.apply_merge()
        .map_err(|e| vec![Problem::new("", format!("YAML merge key: {e}"))])?;
    let mut problems = Vec::new();
    let value = convert(doc, "", &mut problems);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems)
    }
}

/// Deepest `[`/`{` nesting accepted; configuration files use three or four levels.
const MAX_FLOW_DEPTH: usize = 64;

/// Refuses flow collections nested deeper than [`MAX_FLOW_DEPTH`] in one linear pass, before the YAML parser
/// sees them: it spends quadratic time on deep flow nesting (100,000 levels, 200 KB, took 44 s of CPU).
/// Quoted scalars and comments are skipped; anything this pass gets wrong the parser still reports.
fn check_nesting(text: &str) -> Result<(), Vec<Problem>> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut quote: Option<char> = None;
    let mut prev = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        }
        match quote {
            Some('"') if c == '\\' => {
                chars.next();
            }
            Some(q) if c == q => {
                // '' inside a single-quoted scalar is an escaped quote.
                if q == '\'' && chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    quote = None;
                }
            }
            Some(_) => {}
            None => match c {
                '#' if prev.is_whitespace() => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            line += 1;
                            break;
                        }
                    }
                    prev = '\n';
                    continue;
                }
                '"' | '\'' if !prev.is_alphanumeric() => quote = Some(c),
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Err(vec![Problem::new(
                            format!("line {line}"),
                            format!(
                                "lists or mappings nested more than {MAX_FLOW_DEPTH} levels deep; a configuration needs a few"
                            ),
                        )]);
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn convert(y: Yaml, path: &str, problems: &mut Vec<Problem>) -> Value {
    match y {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match Number::from_f64(f) {
                    Some(num) => Value::Number(num),
                    None => {
                        problems.push(Problem::new(
                            path,
                            "number must be finite (not .nan or .inf)",
                        ));
                        Value::Null
                    }
                }
            }
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(seq) => Value::Array(
            seq.into_iter()
                .enumerate()
                .map(|(i, v)| convert(v, &format!("{path}[{i}]"), problems))
                .collect(),
        ),
        Yaml::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match k {
                    Yaml::String(s) => s,
                    other => {
                        let shown = serde_yaml::to_string(&other).unwrap_or_default();
                        problems.push(Problem::new(
                            path,
                            format!("key {} must be a string", shown.trim()),
                        ));
                        continue;
                    }
                };
                let child = convert(v, &join(path, &key), problems);
                out.insert(key, child);
            }
            Value::Object(out)
        }
        Yaml::Tagged(t) => {
            problems.push(Problem::new(
                path,
                format!("YAML tag {} is not supported", t.tag),
            ));
            Value::Null
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing_and_quotes_and_comments_do_not_count() {
        let deep = format!("a: {}", "[".repeat(100_000));
        let p = super::parse(&deep).unwrap_err();
        assert!(
            p[0].to_string().contains("nested more than 64 levels"),
            "{p:?}"
        );
        let ok = format!("a: {}1{}\n", "[".repeat(64), "]".repeat(64));
        assert!(super::parse(&ok).is_ok());
        let brackets = "a: '[[[[''[[[['\nb: \"{{{{\\\"{{{{\"\n# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n";
        let many = brackets.repeat(20);
        assert!(super::check_nesting(&many).is_ok());
    }

    use super::*;

    #[test]
    fn keeps_key_order_and_types() {
        let v = parse("b: 1\na: [x, 2.5, true, null]\n").unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(v["a"][1], 2.5);
        assert_eq!(v["a"][2], true);
        assert!(v["a"][3].is_null());
    }

    #[test]
    fn duplicate_key_is_an_error_with_location() {
        let e = parse("a: 1\na: 2\n").unwrap_err();
        assert!(e[0].message.contains("duplicate"), "{e:?}");
    }

    #[test]
    fn non_string_key_names_the_path() {
        let e = parse("Root:\n  1: x\n").unwrap_err();
        assert_eq!(e[0].path, "Root");
        assert!(e[0].message.contains("must be a string"));
    }

    #[test]
    fn merge_keys_are_applied() {
        let v = parse("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n").unwrap();
        assert_eq!(v["other"]["x"], 1);
        assert_eq!(v["other"]["y"], 2);
    }

    #[test]
    fn nan_is_rejected() {
        let e = parse("a: .nan\n").unwrap_err();
        assert_eq!(e[0].path, "a");
    }
}
