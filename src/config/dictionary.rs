//! The validation dictionary: allowed keys, types, ranges and nesting, held as data.
//!
//! The built-in dictionary lives in `dictionary.yaml` next to this file. Callers inspect it, extend it with
//! their own custom attributes (`define`, `merge`, `merge_file`) and pass it to the [`ConfigLoader`].
//!
//! [`ConfigLoader`]: crate::config::ConfigLoader

use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Problem, Result};

const BUILTIN: &str = include_str!("dictionary.yaml");

/// The type a key's value must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ValueType {
    /// Any value.
    #[default]
    Any,
    /// A string.
    String,
    /// A whole number.
    Integer,
    /// A whole or decimal number (not a boolean).
    Number,
    /// `true` or `false`.
    Boolean,
    /// A mapping of keys to values.
    Dict,
    /// A sequence of values.
    List,
}

impl ValueType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "any" => ValueType::Any,
            "string" => ValueType::String,
            "integer" => ValueType::Integer,
            "number" | "float" => ValueType::Number,
            "boolean" => ValueType::Boolean,
            "dict" => ValueType::Dict,
            "list" => ValueType::List,
            _ => return None,
        })
    }

    /// The name used in dictionary files.
    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::Any => "any",
            ValueType::String => "string",
            ValueType::Integer => "integer",
            ValueType::Number => "number",
            ValueType::Boolean => "boolean",
            ValueType::Dict => "dict",
            ValueType::List => "list",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule for one key (or for every item of a list).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rule {
    /// The type the value must have.
    pub kind: ValueType,
    /// The key must be present (and, unless `nullable` says otherwise, not null).
    pub required: bool,
    /// Whether an explicit `null` ("use the default") is accepted. `None` means "unless required".
    pub nullable: Option<bool>,
    /// Smallest allowed number.
    pub min: Option<f64>,
    /// Largest allowed number.
    pub max: Option<f64>,
    /// Fewest list items.
    pub minlength: Option<usize>,
    /// Most list items.
    pub maxlength: Option<usize>,
    /// Whether an empty string is accepted (`None` = yes).
    pub empty: Option<bool>,
    /// The only values accepted.
    pub allowed: Option<Vec<Value>>,
    /// Other spellings of this key that mean the same.
    pub aliases: Vec<String>,
    /// Sibling keys that must not appear together with this one.
    pub excludes: Vec<String>,
    /// For dicts: keys without a rule are accepted.
    pub allow_unknown: bool,
    /// For dicts: the rules of its keys, in order.
    pub fields: Vec<(String, Rule)>,
    /// For lists: the rule every item must follow.
    pub items: Option<Box<Rule>>,
    /// Free text for people reading the dictionary.
    pub description: Option<String>,
}

impl Rule {
    /// An optional, nullable rule of the given type (the usual shape of a custom attribute).
    pub fn optional(kind: ValueType) -> Self {
        Rule {
            kind,
            ..Rule::default()
        }
    }

    /// Whether `null` is accepted for this key.
    pub fn accepts_null(&self) -> bool {
        self.nullable.unwrap_or(!self.required)
    }

    /// The rule of key `name` of a dict rule, looking through aliases.
    pub fn field(&self, name: &str) -> Option<&Rule> {
        self.field_entry(name).map(|(_, r)| r)
    }

    /// The canonical key name and rule for `name` (which may be an alias).
    pub fn field_entry(&self, name: &str) -> Option<(&str, &Rule)> {
        self.fields
            .iter()
            .find(|(k, r)| k == name || r.aliases.iter().any(|a| a == name))
            .map(|(k, r)| (k.as_str(), r))
    }

    fn field_mut(&mut self, name: &str) -> Option<&mut Rule> {
        self.fields
            .iter_mut()
            .find(|(k, r)| k == name || r.aliases.iter().any(|a| a == name))
            .map(|(_, r)| r)
    }

    /// Parses a rule from its dictionary form, collecting every problem.
    fn from_value(v: &Value, path: &str, problems: &mut Vec<Problem>) -> Rule {
        let Some(map) = v.as_object() else {
            problems.push(Problem::new(
                path,
                "a rule must be a mapping such as {type: string}",
            ));
            return Rule::default();
        };
        let mut rule = Rule::default();
        let mut schema = None;
        for (key, val) in map {
            let at = format!("{path}.{key}");
            let bad = |problems: &mut Vec<Problem>, what: &str| {
                problems.push(Problem::new(&at, format!("must be {what}")));
            };
            match key.as_str() {
                "type" => match val.as_str().and_then(ValueType::parse) {
                    Some(t) => rule.kind = t,
                    None => bad(
                        problems,
                        "one of any, string, integer, number, float, boolean, dict, list",
                    ),
                },
                "required" => match val.as_bool() {
                    Some(b) => rule.required = b,
                    None => bad(problems, "true or false"),
                },
                "nullable" => match val.as_bool() {
                    Some(b) => rule.nullable = Some(b),
                    None => bad(problems, "true or false"),
                },
                "empty" => match val.as_bool() {
                    Some(b) => rule.empty = Some(b),
                    None => bad(problems, "true or false"),
                },
                "allow_unknown" => match val.as_bool() {
                    Some(b) => rule.allow_unknown = b,
                    None => bad(problems, "true or false"),
                },
                "min" | "max" => match val.as_f64() {
                    Some(n) if key == "min" => rule.min = Some(n),
                    Some(n) => rule.max = Some(n),
                    None => bad(problems, "a number"),
                },
                "minlength" | "maxlength" => match val.as_u64() {
                    Some(n) if key == "minlength" => rule.minlength = Some(n as usize),
                    Some(n) => rule.maxlength = Some(n as usize),
                    None => bad(problems, "a whole number ≥ 0"),
                },
                "allowed" => match val.as_array() {
                    Some(a) => rule.allowed = Some(a.clone()),
                    None => bad(problems, "a list of values"),
                },
                "aliases" | "excludes" => match string_list(val) {
                    Some(l) if key == "aliases" => rule.aliases = l,
                    Some(l) => rule.excludes = l,
                    None => bad(problems, "a list of key names"),
                },
                "description" | "meta" => rule.description = val.as_str().map(str::to_string),
                "schema" => schema = Some((val, at)),
                other => problems.push(Problem::new(
                    &at,
                    format!(
                        "unknown rule key '{other}' (use type, required, nullable, min, max, minlength, \
                         maxlength, empty, allowed, aliases, excludes, allow_unknown, schema, description)"
                    ),
                )),
            }
        }
        if let Some((val, at)) = schema {
            // An extension may leave out the type its base already has (the anchor library deep-merges its
            // extensions): a schema whose keys are all rule words describes list items, else dict fields.
            let kind = match rule.kind {
                ValueType::Any if is_rule_shaped(val) => ValueType::List,
                ValueType::Any if val.is_object() => ValueType::Dict,
                k => k,
            };
            match kind {
                ValueType::Dict => rule.fields = fields_from_value(val, &at, problems),
                ValueType::List => {
                    rule.items = Some(Box::new(Rule::from_value(val, &at, problems)))
                }
                other => problems.push(Problem::new(
                    at,
                    format!("'schema' needs type dict or list, not {other}"),
                )),
            }
        }
        rule
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), self.kind.as_str().into());
        if self.required {
            m.insert("required".into(), true.into());
        }
        if let Some(n) = self.nullable {
            m.insert("nullable".into(), n.into());
        }
        for (k, v) in [("min", self.min), ("max", self.max)] {
            if let Some(v) = v {
                m.insert(k.into(), number(v));
            }
        }
        for (k, v) in [("minlength", self.minlength), ("maxlength", self.maxlength)] {
            if let Some(v) = v {
                m.insert(k.into(), v.into());
            }
        }
        if let Some(e) = self.empty {
            m.insert("empty".into(), e.into());
        }
        if let Some(a) = &self.allowed {
            m.insert("allowed".into(), Value::Array(a.clone()));
        }
        if !self.aliases.is_empty() {
            m.insert("aliases".into(), self.aliases.clone().into());
        }
        if !self.excludes.is_empty() {
            m.insert("excludes".into(), self.excludes.clone().into());
        }
        if self.allow_unknown {
            m.insert("allow_unknown".into(), true.into());
        }
        if let Some(d) = &self.description {
            m.insert("description".into(), d.clone().into());
        }
        if !self.fields.is_empty() {
            m.insert("schema".into(), fields_to_value(&self.fields));
        } else if let Some(items) = &self.items {
            m.insert("schema".into(), items.to_value());
        }
        Value::Object(m)
    }

    /// Merges `ext` into this rule: its settings win, its fields are merged key by key.
    fn merge(&mut self, ext: &Rule, path: &str, problems: &mut Vec<Problem>) {
        if ext.kind != self.kind && ext.kind != ValueType::Any && self.kind != ValueType::Any {
            problems.push(Problem::new(
                path,
                format!(
                    "cannot change the type of an existing key from {} to {}",
                    self.kind, ext.kind
                ),
            ));
            return;
        }
        if self.kind == ValueType::Any {
            self.kind = ext.kind;
        }
        self.required |= ext.required;
        macro_rules! take {
            ($($f:ident),*) => { $( if ext.$f.is_some() { self.$f = ext.$f.clone(); } )* };
        }
        take!(
            nullable,
            min,
            max,
            minlength,
            maxlength,
            empty,
            allowed,
            description
        );
        for a in &ext.aliases {
            if !self.aliases.contains(a) {
                self.aliases.push(a.clone());
            }
        }
        for e in &ext.excludes {
            if !self.excludes.contains(e) {
                self.excludes.push(e.clone());
            }
        }
        self.allow_unknown |= ext.allow_unknown;
        for (name, rule) in &ext.fields {
            let at = format!("{path}.{name}");
            match self.field_mut(name) {
                Some(existing) => existing.merge(rule, &at, problems),
                None => self.fields.push((name.clone(), rule.clone())),
            }
        }
        if let Some(items) = &ext.items {
            match &mut self.items {
                Some(mine) => mine.merge(items, &format!("{path}[]"), problems),
                None => self.items = Some(items.clone()),
            }
        }
    }
}

/// Whether `v` reads as one rule (every key is a rule word) rather than as a mapping of field names.
fn is_rule_shaped(v: &Value) -> bool {
    const WORDS: [&str; 16] = [
        "type",
        "required",
        "nullable",
        "empty",
        "allow_unknown",
        "min",
        "max",
        "minlength",
        "maxlength",
        "allowed",
        "aliases",
        "excludes",
        "description",
        "meta",
        "schema",
        "default",
    ];
    v.as_object()
        .is_some_and(|m| !m.is_empty() && m.keys().all(|k| WORDS.contains(&k.as_str())))
}

fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn fields_from_value(v: &Value, path: &str, problems: &mut Vec<Problem>) -> Vec<(String, Rule)> {
    match v.as_object() {
        Some(map) => map
            .iter()
            .map(|(k, r)| {
                let at = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                (k.clone(), Rule::from_value(r, &at, problems))
            })
            .collect(),
        None => {
            problems.push(Problem::new(
                path,
                "must be a mapping of key names to rules",
            ));
            Vec::new()
        }
    }
}

fn fields_to_value(fields: &[(String, Rule)]) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|(k, r)| (k.clone(), r.to_value()))
            .collect(),
    )
}

/// The validation dictionary: one rule per root key of a configuration document.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidationDictionary {
    root: Rule,
}

impl Default for ValidationDictionary {
    fn default() -> Self {
        Self::builtin()
    }
}

impl ValidationDictionary {
    /// The dictionary smartdev ships with (both layouts, `Files`).
    pub fn builtin() -> Self {
        Self::from_yaml_str(BUILTIN, "<built-in dictionary>")
            .expect("the built-in validation dictionary is valid")
    }

    /// An empty dictionary, the starting point for an extension built in code.
    pub fn empty() -> Self {
        ValidationDictionary {
            root: Rule::optional(ValueType::Dict),
        }
    }

    /// Parses a dictionary (or an extension) from YAML or JSON text. `source` names it in errors.
    pub fn from_yaml_str(text: &str, source: &str) -> Result<Self> {
        let value = crate::yaml::parse(text).map_err(|problems| Error::Config {
            source: source.to_string(),
            problems,
        })?;
        Self::from_value(&value, source)
    }

    /// Reads a dictionary (or an extension) from a YAML or JSON file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
            context: format!("reading validation dictionary {}", path.display()),
            source: e,
        })?;
        Self::from_yaml_str(&text, &path.display().to_string())
    }

    /// Builds a dictionary from its JSON form (a mapping of root keys to rules).
    pub fn from_value(value: &Value, source: &str) -> Result<Self> {
        let mut problems = Vec::new();
        let fields = fields_from_value(value, "", &mut problems);
        if !problems.is_empty() {
            return Err(Error::Config {
                source: source.to_string(),
                problems,
            });
        }
        Ok(ValidationDictionary {
            root: Rule {
                kind: ValueType::Dict,
                fields,
                ..Rule::default()
            },
        })
    }

    /// The dictionary in its file form, for inspection or saving.
    pub fn to_value(&self) -> Value {
        fields_to_value(&self.root.fields)
    }

    /// The rule of the document root (a dict whose fields are the root keys).
    pub fn root(&self) -> &Rule {
        &self.root
    }

    /// The rule at a dotted key path such as `SmartDevices.Devices.Outputs.Group`. List items are stepped
    /// through implicitly; aliases are accepted.
    pub fn rule(&self, path: &str) -> Option<&Rule> {
        let mut rule = &self.root;
        for part in path.split('.') {
            while let Some(items) = &rule.items {
                rule = items;
            }
            rule = rule.field(part)?;
        }
        Some(rule)
    }

    /// Adds (or merges) the rule of one key at a dotted path, e.g.
    /// `define("SmartDevices.Devices.Outputs.Group", Rule::optional(ValueType::String))`.
    /// Every dict and list on the way must already exist.
    pub fn define(&mut self, path: &str, rule: Rule) -> Result<()> {
        let mut ext = rule;
        let parts: Vec<&str> = path.split('.').collect();
        // Build the extension from the leaf upwards, mirroring the nesting of the existing dictionary.
        for depth in (0..parts.len()).rev() {
            let name = parts[depth].to_string();
            let parent_path = parts[..depth].join(".");
            let parent = if depth == 0 {
                Some(&self.root)
            } else {
                self.rule(&parent_path)
            };
            let Some(parent) = parent else {
                return Err(Error::config_one(
                    "<define>",
                    &parent_path,
                    "no such key in the validation dictionary",
                ));
            };
            let mut wrapper = Rule::optional(ValueType::Dict);
            wrapper.fields.push((name, ext));
            ext = wrap_lists(parent, wrapper);
        }
        let mut ext_dict = ValidationDictionary::empty();
        ext_dict.root = ext;
        self.merge(&ext_dict)
    }

    /// Merges an extension into this dictionary. Root keys may be written with any alias. The `Devices` rules
    /// of an extension apply to every layout (every root key that has `Devices`), so custom attributes are
    /// defined once for both layouts.
    pub fn merge(&mut self, ext: &ValidationDictionary) -> Result<()> {
        let mut problems = Vec::new();
        for (name, rule) in &ext.root.fields {
            let canonical = self.root.field_entry(name).map(|(k, _)| k.to_string());
            match canonical {
                Some(key) => {
                    if let Some(devices) = rule.field("Devices") {
                        let mut only_devices = Rule::optional(ValueType::Dict);
                        only_devices
                            .fields
                            .push(("Devices".to_string(), devices.clone()));
                        for (other, other_rule) in &mut self.root.fields {
                            if *other != key && other_rule.field("Devices").is_some() {
                                other_rule.merge(&only_devices, other, &mut problems);
                            }
                        }
                    }
                    let target = self.root.field_mut(&key).expect("key found above");
                    target.merge(rule, &key, &mut problems);
                }
                None => self.root.fields.push((name.clone(), rule.clone())),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Config {
                source: "<dictionary merge>".to_string(),
                problems,
            })
        }
    }

    /// Reads an extension from a YAML or JSON file and merges it (what `sdctl --schema FILE` does).
    pub fn merge_file(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let ext = Self::from_file(path)?;
        self.merge(&ext)
    }
}

/// Wraps `inner` (a dict rule holding one field) in list rules so its shape matches `parent`, which may be a
/// list of dicts.
fn wrap_lists(parent: &Rule, inner: Rule) -> Rule {
    match &parent.items {
        Some(items) => Rule {
            kind: ValueType::List,
            items: Some(Box::new(wrap_lists(items, inner))),
            ..Rule::default()
        },
        None => inner,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_has_both_layouts_and_aliases() {
        let d = ValidationDictionary::builtin();
        assert!(d.rule("ShellyDevices.WebhookPort").is_some());
        assert!(d.rule("VendorDevices.Devices.Outputs.Webhooks").is_some());
        assert!(d.rule("SmartDevices.VendorWebhooks.Port").is_some());
        assert_eq!(
            d.rule("SCSmartDevices.Devices.TempProbes")
                .unwrap()
                .maxlength,
            Some(5)
        );
        assert!(d.rule("SCSmartDevices.Devices.Model").unwrap().required);
        assert!(d.rule("SCSmartDevices.Devices.Outputs.Colour").is_none());
    }

    #[test]
    fn cerberus_style_extension_merges_into_both_layouts() {
        let ext = "SmartDevices:\n  type: dict\n  schema:\n    Devices:\n      type: list\n      schema:\n        \
                   type: dict\n        schema:\n          Outputs:\n            type: list\n            schema:\n              \
                   type: dict\n              schema:\n                Group: {type: string, required: false, nullable: true}\n";
        let mut d = ValidationDictionary::builtin();
        d.merge(&ValidationDictionary::from_yaml_str(ext, "ext").unwrap())
            .unwrap();
        let g = d.rule("SCSmartDevices.Devices.Outputs.Group").unwrap();
        assert_eq!(g.kind, ValueType::String);
        assert!(d.rule("ShellyDevices.Devices.Outputs.Group").is_some());
        // Existing rules survive the merge.
        assert!(d.rule("SCSmartDevices.Devices.Outputs.Webhooks").is_some());
    }

    #[test]
    fn define_by_dotted_path() {
        let mut d = ValidationDictionary::builtin();
        d.define(
            "SmartDevices.Devices.Meters.Tariff",
            Rule::optional(ValueType::Number),
        )
        .unwrap();
        assert_eq!(
            d.rule("SCSmartDevices.Devices.Meters.Tariff").unwrap().kind,
            ValueType::Number
        );
        let e = d
            .define("SmartDevices.Nope.X", Rule::optional(ValueType::Number))
            .unwrap_err();
        assert!(e.to_string().contains("SmartDevices.Nope"), "{e}");
    }

    #[test]
    fn type_change_is_refused() {
        let mut d = ValidationDictionary::builtin();
        let e = d
            .define(
                "SmartDevices.Devices.Name",
                Rule::optional(ValueType::Integer),
            )
            .unwrap_err();
        assert!(e.to_string().contains("cannot change the type"), "{e}");
    }

    #[test]
    fn bad_rule_keys_are_reported_with_paths() {
        let e = ValidationDictionary::from_yaml_str("A: {type: strng, requird: true}\n", "x")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("A.type"), "{text}");
        assert!(text.contains("A.requird"), "{text}");
    }

    #[test]
    fn round_trips_through_its_file_form() {
        let d = ValidationDictionary::builtin();
        let again = ValidationDictionary::from_value(&d.to_value(), "again").unwrap();
        assert_eq!(d, again);
    }
}
