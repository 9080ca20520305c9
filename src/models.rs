//! The model library: what inputs, outputs and meters each vendor model has and how its meters are read.
//!
//! `models/vendor_models.json` is embedded at build time; a caller may supply its own file in the same format
//! (the anchor library's `shelly_models.json` also loads: `meter_source` is then derived).

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

const EMBEDDED: &str = include_str!("../models/vendor_models.json");

/// The model value that selects the Tasmota family (the spec's `OtherVendor` is accepted too).
pub const TASMOTA: &str = "Tasmota";

/// How a vendor device is spoken to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    /// Shelly Gen1 HTTP REST (`/status`, `/relay/N`).
    #[serde(rename = "REST")]
    Rest,
    /// Shelly Gen2/3/4 JSON-RPC (`POST /rpc`).
    #[serde(rename = "RPC")]
    Rpc,
    /// Tasmota HTTP commands (`/cm?cmnd=`).
    #[serde(rename = "Tasmota")]
    Tasmota,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Rest => "REST",
            Protocol::Rpc => "RPC",
            Protocol::Tasmota => "Tasmota",
        })
    }
}

/// Where a model's meter readings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeterSource {
    /// The model has no meters.
    None,
    /// Meter i is part of RPC `switch:i` (apower, aenergy).
    Switch,
    /// Separate RPC `em1:i` + `em1data:i` channels.
    Em1,
    /// One RPC 3-phase `em:0` + `emdata:0`; meter i is phase a, b, c.
    Em,
    /// RPC `pm1:i` power meters.
    Pm1,
    /// Gen1 `meters[]` (totals in watt-minutes).
    Gen1Meters,
    /// Gen1 `emeters[]` (totals in Wh).
    Gen1Emeters,
}

impl fmt::Display for MeterSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self).ok();
        f.write_str(s.as_ref().and_then(|v| v.as_str()).unwrap_or("?"))
    }
}

/// One vendor model of the library.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// Model id used in configurations, e.g. `Shelly2PMG3`.
    pub model: String,
    /// Marketing name.
    #[serde(default = "unknown_name")]
    pub name: String,
    /// Product or API documentation page.
    #[serde(default)]
    pub url: Option<String>,
    /// Hardware generation (1–4); informational.
    #[serde(default = "default_generation")]
    pub generation: u8,
    /// How the device is spoken to.
    #[serde(default = "default_protocol")]
    pub protocol: Protocol,
    /// Number of digital inputs.
    #[serde(default)]
    pub inputs: usize,
    /// Number of relays.
    #[serde(default)]
    pub outputs: usize,
    /// Number of energy meters.
    #[serde(default)]
    pub meters: usize,
    /// True when meters are separate channels; false when meter i belongs to output i. The misspelling is kept
    /// for compatibility with existing files; `meters_separate` is accepted too.
    #[serde(rename = "meters_seperate", alias = "meters_separate", default)]
    pub meters_separate: bool,
    /// Whether the device reports its internal temperature.
    #[serde(default = "yes")]
    pub temperature_monitoring: bool,
    /// Where meter readings come from; derived from protocol and `meters_seperate` when absent.
    #[serde(default)]
    pub meter_source: Option<MeterSource>,
    /// Identifiers the device reports about itself (`/shelly` `type` on Gen1, `model` on Gen2+).
    #[serde(default)]
    pub reported_models: Vec<String>,
}

fn unknown_name() -> String {
    "Unknown".into()
}
fn default_generation() -> u8 {
    3
}
fn default_protocol() -> Protocol {
    Protocol::Rpc
}
fn yes() -> bool {
    true
}

impl ModelInfo {
    /// Where this model's meter readings come from.
    pub fn meter_source(&self) -> MeterSource {
        if self.meters == 0 {
            return MeterSource::None;
        }
        self.meter_source
            .unwrap_or(match (self.protocol, self.meters_separate) {
                (Protocol::Rest, _) => MeterSource::Gen1Meters,
                (_, false) => MeterSource::Switch,
                (_, true) => MeterSource::Em1,
            })
    }

    /// The output a meter measures, if the meter is part of an output.
    pub fn meter_output(&self, meter_index: usize) -> Option<usize> {
        match self.meter_source() {
            MeterSource::Switch if meter_index < self.outputs => Some(meter_index),
            MeterSource::Gen1Meters if self.meters == self.outputs => Some(meter_index),
            _ => None,
        }
    }

    fn check(&self) -> Vec<String> {
        let mut p = Vec::new();
        let m = &self.model;
        if m.trim().is_empty() {
            p.push("a model has an empty id".to_string());
        }
        if m == TASMOTA || m == "OtherVendor" {
            p.push(format!("{m}: this id is reserved for the Tasmota family"));
        }
        if !self.meters_separate && self.meters > 0 && self.meters != self.outputs {
            p.push(format!(
                "{m}: meters ({}) must equal outputs ({}) when meters are not separate",
                self.meters, self.outputs
            ));
        }
        let rest = self.protocol == Protocol::Rest;
        if self.protocol == Protocol::Tasmota {
            p.push(format!("{m}: protocol must be REST or RPC"));
        }
        if rest != (self.generation == 1) {
            p.push(format!(
                "{m}: generation {} does not match protocol {}",
                self.generation, self.protocol
            ));
        }
        let src = self.meter_source();
        let ok = match src {
            MeterSource::None => self.meters == 0,
            MeterSource::Gen1Meters | MeterSource::Gen1Emeters => rest,
            MeterSource::Switch => !rest && !self.meters_separate,
            MeterSource::Em1 | MeterSource::Em | MeterSource::Pm1 => !rest,
        };
        if !ok {
            p.push(format!(
                "{m}: meter_source {src} does not fit protocol {} with {} meter(s)",
                self.protocol, self.meters
            ));
        }
        p
    }
}

/// What a configured `Model` value resolves to.
#[derive(Clone, Copy, Debug)]
pub enum ModelRef<'a> {
    /// A vendor (Shelly) model from the library.
    Vendor(&'a ModelInfo),
    /// The Tasmota family: no library entry, every component is configured.
    Tasmota,
}

/// How much `print_model_library` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintMode {
    /// One line per model: id and name.
    Brief,
    /// One line per model with generation, counts, protocol and meter source.
    Detailed,
}

impl std::str::FromStr for PrintMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "brief" => Ok(PrintMode::Brief),
            "detailed" => Ok(PrintMode::Detailed),
            other => Err(Error::InvalidArgument(format!(
                "print mode '{other}' is unknown; use brief or detailed"
            ))),
        }
    }
}

/// The set of known vendor models.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelLibrary {
    models: Vec<ModelInfo>,
}

impl Default for ModelLibrary {
    fn default() -> Self {
        Self::embedded()
    }
}

impl ModelLibrary {
    /// The library built into smartdev (`models/vendor_models.json`).
    pub fn embedded() -> Self {
        Self::from_json_str(EMBEDDED).expect("the embedded model library is valid")
    }

    /// Parses a library from JSON text (an array of model objects) and checks it.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let models: Vec<ModelInfo> = serde_json::from_str(text)
            .map_err(|e| Error::ModelLibrary(format!("not a valid model list: {e}")))?;
        let mut problems: Vec<String> = models.iter().flat_map(ModelInfo::check).collect();
        for (i, m) in models.iter().enumerate() {
            if models[..i].iter().any(|o| o.model == m.model) {
                problems.push(format!("{}: listed more than once", m.model));
            }
        }
        if problems.is_empty() {
            Ok(ModelLibrary { models })
        } else {
            Err(Error::ModelLibrary(problems.join("; ")))
        }
    }

    /// Reads a library file supplied by the caller.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::ModelLibrary(format!("cannot read {}: {e}", path.display())))?;
        Self::from_json_str(&text)
            .map_err(|e| Error::ModelLibrary(format!("{}: {e}", path.display())))
    }

    /// All models in file order.
    pub fn models(&self) -> &[ModelInfo] {
        &self.models
    }

    /// Looks a model up by id. Accepts the spec's neutral spelling (`Vendor2PMG3` for `Shelly2PMG3`).
    pub fn get(&self, id: &str) -> Option<&ModelInfo> {
        let canonical = canonical_id(id);
        self.models.iter().find(|m| m.model == canonical)
    }

    /// Resolves a configured `Model` value: a library model or the Tasmota family.
    pub fn resolve(&self, id: &str) -> Option<ModelRef<'_>> {
        if is_tasmota(id) {
            Some(ModelRef::Tasmota)
        } else {
            self.get(id).map(ModelRef::Vendor)
        }
    }

    /// Library ids close to `id` (same letters ignoring case and punctuation), for "did you mean" hints.
    pub fn suggest(&self, id: &str) -> Vec<&str> {
        let key = |s: &str| -> String {
            s.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect()
        };
        let wanted = key(&canonical_id(id));
        let exact: Vec<&str> = self
            .models
            .iter()
            .filter(|m| key(&m.model) == wanted)
            .map(|m| m.model.as_str())
            .collect();
        if !exact.is_empty() {
            return exact;
        }
        self.models
            .iter()
            .filter(|m| {
                let k = key(&m.model);
                wanted.len() >= 4 && (k.contains(&wanted) || wanted.contains(&k))
            })
            .map(|m| m.model.as_str())
            .take(5)
            .collect()
    }

    /// Text listing of the library. `model` limits it to one model (or to Tasmota).
    pub fn print(&self, mode: PrintMode, model: Option<&str>) -> Result<String> {
        let wanted_tasmota = model.is_some_and(is_tasmota);
        let vendor: Vec<&ModelInfo> = match model {
            None => self.models.iter().collect(),
            Some(_) if wanted_tasmota => Vec::new(),
            Some(id) => vec![self.get(id).ok_or_else(|| Error::NotFound {
                kind: "model",
                identity: format!("'{id}'"),
            })?],
        };
        let mut out = String::new();
        if !vendor.is_empty() {
            out.push_str("Shelly Model Library:");
            for m in vendor {
                out.push_str(&format!("\n  {} — {}", m.model, m.name));
                if mode == PrintMode::Detailed {
                    out.push_str(&format!(
                        " gen{} in={} out={} meters={} protocol={} meter_source={}",
                        m.generation,
                        m.inputs,
                        m.outputs,
                        m.meters,
                        m.protocol,
                        m.meter_source()
                    ));
                }
            }
        }
        if model.is_none() || wanted_tasmota {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str("Tasmota Model Library:\n  Tasmota");
            if mode == PrintMode::Detailed {
                out.push_str(" — every input, output, meter and probe is configured explicitly");
            }
        }
        Ok(out)
    }
}

/// True for the Tasmota family's model values (`Tasmota`, `OtherVendor`).
pub fn is_tasmota(id: &str) -> bool {
    id == TASMOTA || id == "OtherVendor"
}

/// Maps the spec's neutral spelling to the vendor's (`Vendor2PMG3` → `Shelly2PMG3`).
fn canonical_id(id: &str) -> String {
    match id.strip_prefix("Vendor") {
        Some(rest) => format!("Shelly{rest}"),
        None => id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_library_holds_the_anchor_models_and_more() {
        let lib = ModelLibrary::embedded();
        assert!(lib.models().len() >= 45, "{}", lib.models().len());
        let m = lib.get("Shelly2PMG3").unwrap();
        assert_eq!((m.inputs, m.outputs, m.meters), (2, 2, 2));
        assert_eq!(m.protocol, Protocol::Rpc);
        assert_eq!(m.meter_source(), MeterSource::Switch);
        assert_eq!(lib.get("Vendor2PMG3").unwrap().model, "Shelly2PMG3");
        assert_eq!(lib.get("ShellyPro1PM").unwrap().meters, 1);
        assert_eq!(lib.get("ShellyEM").unwrap().protocol, Protocol::Rest);
        assert!(matches!(
            lib.resolve("OtherVendor"),
            Some(ModelRef::Tasmota)
        ));
        assert!(lib.resolve("Shelly9000").is_none());
    }

    #[test]
    fn anchor_format_file_loads_and_derives_meter_source() {
        let text = r#"[{"model":"ShellyEMG3","name":"Shelly EM Gen3","url":null,"generation":3,"protocol":"RPC",
            "inputs":0,"outputs":1,"meters":2,"meters_seperate":true,"temperature_monitoring":true}]"#;
        let lib = ModelLibrary::from_json_str(text).unwrap();
        let m = lib.get("ShellyEMG3").unwrap();
        assert!(m.meters_separate);
        assert_eq!(m.meter_source(), MeterSource::Em1);
        assert_eq!(m.meter_output(0), None);
    }

    #[test]
    fn inconsistent_library_is_refused_with_every_reason() {
        let text =
            r#"[{"model":"A","outputs":1,"meters":2},{"model":"A"},{"model":"B","generation":1}]"#;
        let e = ModelLibrary::from_json_str(text).unwrap_err().to_string();
        assert!(e.contains("A: meters (2) must equal outputs (1)"), "{e}");
        assert!(e.contains("A: listed more than once"), "{e}");
        assert!(
            e.contains("B: generation 1 does not match protocol RPC"),
            "{e}"
        );
    }

    #[test]
    fn print_modes_and_filter() {
        let lib = ModelLibrary::embedded();
        let brief = lib.print(PrintMode::Brief, None).unwrap();
        assert!(
            brief.starts_with("Shelly Model Library:\n  ShellyEM — Shelly EM\n"),
            "{brief}"
        );
        assert!(brief.ends_with("Tasmota Model Library:\n  Tasmota"));
        let one = lib.print(PrintMode::Detailed, Some("ShellyEM")).unwrap();
        assert_eq!(
            one,
            "Shelly Model Library:\n  ShellyEM — Shelly EM gen1 in=0 out=1 meters=2 protocol=REST meter_source=gen1_emeters"
        );
        assert!(lib.print(PrintMode::Brief, Some("Nope")).is_err());
        assert_eq!(
            lib.print(PrintMode::Brief, Some("OtherVendor")).unwrap(),
            "Tasmota Model Library:\n  Tasmota"
        );
        assert!("verbose".parse::<PrintMode>().is_err());
    }
}
