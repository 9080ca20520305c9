//! The model library: what inputs, outputs and meters each vendor model has and how its meters are read.
//!
//! `models/vendor_models.json` is embedded at build time; a caller may supply its own file in the same format
//! (the anchor library's `shelly_models.json` also loads: `meter_source` is then derived). Each embedded model's
//! shapes were checked against a vendor page or a device capture.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::light::LightCaps;

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
    /// Meter i is part of RPC `cover:i` (apower, aenergy) in the cover profile.
    Cover,
}

/// What a model's outputs are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// Relays: RPC `switch:N`, Gen1 `/relay/N`.
    #[default]
    Switch,
    /// Dimmable lights: RPC `light:N`, Gen1 `/light/N` (on/off and brightness).
    Light,
}

/// What a sensor measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SensorQuantity {
    /// Temperature in °C (RPC `temperature:N`).
    Temperature,
    /// Relative humidity in %RH (RPC `humidity:N`, Gen1 `ext_humidity`).
    Humidity,
    /// Voltage in V (RPC `voltmeter:N`, Gen1 `adcs`).
    Voltage,
}

impl SensorQuantity {
    /// Every quantity.
    pub const ALL: [SensorQuantity; 3] = [
        SensorQuantity::Temperature,
        SensorQuantity::Humidity,
        SensorQuantity::Voltage,
    ];

    /// The configuration and JSON word (`temperature`, `humidity`, `voltage`).
    pub fn as_str(self) -> &'static str {
        match self {
            SensorQuantity::Temperature => "temperature",
            SensorQuantity::Humidity => "humidity",
            SensorQuantity::Voltage => "voltage",
        }
    }

    /// The unit of its values (`°C`, `%RH`, `V`).
    pub fn unit(self) -> &'static str {
        match self {
            SensorQuantity::Temperature => "°C",
            SensorQuantity::Humidity => "%RH",
            SensorQuantity::Voltage => "V",
        }
    }

    /// The Gen2+ RPC component type that carries it (`temperature`, `humidity`, `voltmeter`).
    pub fn rpc_component(self) -> &'static str {
        match self {
            SensorQuantity::Temperature => "temperature",
            SensorQuantity::Humidity => "humidity",
            SensorQuantity::Voltage => "voltmeter",
        }
    }
}

impl fmt::Display for SensorQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SensorQuantity {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        SensorQuantity::ALL
            .into_iter()
            .find(|q| q.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "sensor quantity '{s}' is unknown; use temperature, humidity or voltage"
                ))
            })
    }
}

/// How a profile differs from a model's default shape (absent counts are the default's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileShape {
    /// Number of digital inputs in this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<usize>,
    /// Number of outputs in this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<usize>,
    /// Number of meters in this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meters: Option<usize>,
    /// Number of covers in this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers: Option<usize>,
    /// Where this profile's meter readings come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meter_source: Option<MeterSource>,
    /// What this profile's lights can do (the model's `light` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light: Option<LightCaps>,
}

/// The components a model has in one profile.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shape {
    /// The profile's name (`switch`, `cover`, `triphase`, Gen1 `relay`/`roller`), `None` for single-shape models.
    pub profile: Option<String>,
    /// Digital inputs.
    pub inputs: usize,
    /// Outputs.
    pub outputs: usize,
    /// Meters.
    pub meters: usize,
    /// Covers.
    pub covers: usize,
    /// Where meter readings come from.
    pub meter_source: MeterSource,
    /// What the outputs can do as lights; `None` when they are relays.
    pub light: Option<LightCaps>,
}

impl Shape {
    /// The Gen2+ component type of the outputs: `switch`, or a light's `light`, `cct`, `rgb` or `rgbw`.
    pub fn output_component(&self) -> &'static str {
        self.light.map_or("switch", |l| l.rpc_component())
    }

    /// The output a meter measures, if the meter is part of an output.
    pub fn meter_output(&self, meter_index: usize) -> Option<usize> {
        match self.meter_source {
            MeterSource::Switch if meter_index < self.outputs => Some(meter_index),
            MeterSource::Gen1Meters if self.meters == self.outputs => Some(meter_index),
            _ => None,
        }
    }

    /// The cover a meter measures, if the meter is part of a cover.
    pub fn meter_cover(&self, meter_index: usize) -> Option<usize> {
        match self.meter_source {
            MeterSource::Cover if meter_index < self.covers => Some(meter_index),
            _ => None,
        }
    }

    /// `2 outputs, 2 meters` — the shape in words, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (n, word) in [
            (self.inputs, "input"),
            (self.outputs, "output"),
            (self.covers, "cover"),
            (self.meters, "meter"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {word}{}", if n == 1 { "" } else { "s" }));
            }
        }
        if parts.is_empty() {
            "no components".into()
        } else {
            parts.join(", ")
        }
    }
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
    /// Number of covers (roller shutters) in the default profile.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub covers: usize,
    /// What the outputs are: relays (`switch`, the default) or dimmable lights (`light`).
    #[serde(default, skip_serializing_if = "is_switch")]
    pub output_kind: OutputKind,
    /// The device's own sensors in device order (an H&T: `temperature`, `humidity`); add-on sensors are
    /// configured, not listed here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensors: Vec<SensorQuantity>,
    /// The name the device reports for the profile the counts above describe (Gen2+ `/shelly` `profile`,
    /// Gen1 `/settings` `mode`), for models that can switch profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The model's other profiles, each with what differs from the default shape.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, ProfileShape>,
    /// Battery devices that sleep between reports: not answering is their normal state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sleeps: bool,
    /// What the lights of a light model can do in the default profile (a dimmer when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light: Option<LightCaps>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
fn is_switch(k: &OutputKind) -> bool {
    *k == OutputKind::Switch
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

    /// The output a meter measures in the default profile, if the meter is part of an output.
    pub fn meter_output(&self, meter_index: usize) -> Option<usize> {
        self.default_shape().meter_output(meter_index)
    }

    /// The shape of the default profile.
    pub fn default_shape(&self) -> Shape {
        Shape {
            profile: self.profile.clone(),
            inputs: self.inputs,
            outputs: self.outputs,
            meters: self.meters,
            covers: self.covers,
            meter_source: self.meter_source(),
            light: self.light_caps(None),
        }
    }

    /// What the lights can do in profile `p` (`None`: the default one); `None` for relay models.
    fn light_caps(&self, p: Option<&ProfileShape>) -> Option<LightCaps> {
        (self.output_kind == OutputKind::Light)
            .then(|| p.and_then(|p| p.light).or(self.light).unwrap_or_default())
    }

    /// The shape in profile `name` (the default profile's name, or one of `profiles`), `None` when the model
    /// has no such profile. Names compare without regard to case.
    pub fn shape(&self, name: &str) -> Option<Shape> {
        if self
            .profile
            .as_deref()
            .is_some_and(|p| p.eq_ignore_ascii_case(name))
        {
            return Some(self.default_shape());
        }
        let (key, p) = self
            .profiles
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))?;
        let meters = p.meters.unwrap_or(self.meters);
        Some(Shape {
            profile: Some(key.clone()),
            inputs: p.inputs.unwrap_or(self.inputs),
            outputs: p.outputs.unwrap_or(self.outputs),
            meters,
            covers: p.covers.unwrap_or(self.covers),
            meter_source: if meters == 0 {
                MeterSource::None
            } else {
                p.meter_source.unwrap_or(self.meter_source())
            },
            light: self.light_caps(Some(p)),
        })
    }

    /// Every profile name the model knows, the default first.
    pub fn profile_names(&self) -> Vec<&str> {
        self.profile
            .iter()
            .map(String::as_str)
            .chain(self.profiles.keys().map(String::as_str))
            .collect()
    }

    /// The shape for a configured profile (`None`: the default), or why there is none.
    pub fn shape_for(&self, profile: Option<&str>) -> std::result::Result<Shape, String> {
        match profile {
            None => Ok(self.default_shape()),
            Some(name) => self.shape(name).ok_or_else(|| {
                let known = self.profile_names();
                if known.is_empty() {
                    format!("{} has no profiles; remove Profile", self.model)
                } else {
                    format!(
                        "{} has no profile '{name}'; use one of: {}",
                        self.model,
                        known.join(", ")
                    )
                }
            }),
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
        if !self.meters_separate
            && self.meters > 0
            && self.meters != self.outputs
            && self.meter_source() != MeterSource::Cover
        {
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
        if !self.profiles.is_empty() && self.profile.is_none() {
            p.push(format!(
                "{m}: lists other profiles but not the name of its default one (profile)"
            ));
        }
        if self.output_kind == OutputKind::Light && self.covers > 0 {
            p.push(format!("{m}: a light model cannot have covers"));
        }
        let lights = std::iter::once(self.light).chain(self.profiles.values().map(|p| p.light));
        for caps in lights.flatten() {
            if self.output_kind != OutputKind::Light {
                p.push(format!(
                    "{m}: light capabilities need \"output_kind\": \"light\""
                ));
            }
            p.extend(caps.check().map(|e| format!("{m}: {e}")));
        }
        for name in self.profile_names() {
            if let Some(shape) = self.shape(name) {
                let rest_ok = match shape.meter_source {
                    MeterSource::Gen1Meters | MeterSource::Gen1Emeters => rest,
                    MeterSource::None => shape.meters == 0,
                    MeterSource::Cover => !rest && shape.covers > 0,
                    _ => !rest,
                };
                if !rest_ok {
                    p.push(format!(
                        "{m}: profile {name}: meter_source {} does not fit protocol {} with {} meter(s) and {} cover(s)",
                        shape.meter_source, self.protocol, shape.meters, shape.covers
                    ));
                }
            }
        }
        let src = self.meter_source();
        let ok = match src {
            MeterSource::None => self.meters == 0,
            MeterSource::Gen1Meters | MeterSource::Gen1Emeters => rest,
            MeterSource::Switch => !rest && !self.meters_separate,
            MeterSource::Em1 | MeterSource::Em | MeterSource::Pm1 => !rest,
            MeterSource::Cover => !rest && self.covers > 0,
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
    /// Shared, never copied: every driver of a model points into it ([`SharedModel`]).
    models: Arc<[ModelInfo]>,
}

/// One library model as a driver keeps it: shared by every device of the model (a copy per device cost a few
/// hundred bytes each, issue 30), read through `Deref`.
#[derive(Clone, Debug)]
pub(crate) struct SharedModel {
    all: Arc<[ModelInfo]>,
    index: usize,
}

impl std::ops::Deref for SharedModel {
    type Target = ModelInfo;
    fn deref(&self) -> &ModelInfo {
        &self.all[self.index]
    }
}

/// A model of its own (tests, and models changed after lookup such as a driver test's variant).
impl From<ModelInfo> for SharedModel {
    fn from(m: ModelInfo) -> Self {
        SharedModel {
            all: Arc::from([m]),
            index: 0,
        }
    }
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
            Ok(ModelLibrary {
                models: models.into(),
            })
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

    /// `model` (one of this library's, as [`ModelLibrary::get`] or [`ModelLibrary::resolve`] gave it) shared,
    /// for a driver to keep; a model from elsewhere is copied once.
    pub(crate) fn share(&self, model: &ModelInfo) -> SharedModel {
        match self.models.iter().position(|m| std::ptr::eq(m, model)) {
            Some(index) => SharedModel {
                all: self.models.clone(),
                index,
            },
            None => model.clone().into(),
        }
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
        // A typo (Shelly2PMG9): the closest ids by edit distance.
        let canonical = canonical_id(id);
        if let Some(best) =
            crate::suggest::closest(&canonical, self.models.iter().map(|m| m.model.as_str()))
        {
            let d = crate::suggest::distance(&canonical, best);
            return self
                .models
                .iter()
                .map(|m| m.model.as_str())
                .filter(|m| crate::suggest::distance(&canonical, m) == d)
                .take(3)
                .collect();
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
                hint: String::new(),
            })?],
        };
        let mut out = String::new();
        if !vendor.is_empty() {
            out.push_str(&format!("Shelly models ({}):\n", vendor.len()));
            let mut t = crate::table::Table::new();
            if mode == PrintMode::Detailed {
                t.row(
                    [
                        "Model", "Name", "Gen", "Protocol", "Inputs", "Outputs", "Covers",
                        "Meters", "Sensors", "Profiles",
                    ]
                    .map(String::from)
                    .to_vec(),
                );
            }
            for m in vendor {
                if mode == PrintMode::Brief {
                    t.row(vec![m.model.clone(), m.name.clone()]);
                    continue;
                }
                let outputs = match m.output_kind {
                    OutputKind::Light if m.outputs > 0 => format!(
                        "{} (lights: {})",
                        m.outputs,
                        m.light.unwrap_or_default().describe()
                    ),
                    _ => m.outputs.to_string(),
                };
                let meters = match m.meter_source() {
                    MeterSource::None => "0".to_string(),
                    src => format!("{} ({src})", m.meters),
                };
                let sensors: Vec<&str> = m.sensors.iter().map(|q| q.as_str()).collect();
                t.row(vec![
                    m.model.clone(),
                    m.name.clone(),
                    m.generation.to_string(),
                    m.protocol.to_string(),
                    m.inputs.to_string(),
                    outputs,
                    m.covers.to_string(),
                    meters,
                    if sensors.is_empty() {
                        "–".into()
                    } else {
                        sensors.join(", ")
                    },
                    if m.profile.is_some() {
                        m.profile_names().join(", ")
                    } else {
                        "–".into()
                    },
                ]);
            }
            t.write(&mut out, "  ");
        }
        if model.is_none() || wanted_tasmota {
            out.push_str("Tasmota:\n  Tasmota");
            if mode == PrintMode::Detailed {
                out.push_str(" — every input, output, cover, meter, sensor and probe is configured explicitly");
            }
            out.push('\n');
        }
        let out = out.trim_end().to_string();
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

    /// A driver's model points into the library: one copy per model, not per device; a model from elsewhere
    /// is copied.
    #[test]
    fn shared_models_are_the_library_entries() {
        let lib = ModelLibrary::embedded();
        let m = lib.get("ShellyPlus1PM").unwrap();
        let (a, b) = (lib.share(m), lib.share(m));
        assert!(std::ptr::eq(&*a, m) && std::ptr::eq(&*b, m));
        assert_eq!(a.model, "ShellyPlus1PM");
        let other = m.clone();
        let c = lib.share(&other);
        assert!(!std::ptr::eq(&*c, m));
        assert_eq!(*c, *m);
    }

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
    fn embedded_library_has_at_least_80_models_each_with_its_source_page() {
        let lib = ModelLibrary::embedded();
        assert!(lib.models().len() >= 80, "{}", lib.models().len());
        for m in lib.models() {
            let url = m.url.as_deref().unwrap_or_default();
            assert!(url.starts_with("https://"), "{}: no source page", m.model);
            assert!(
                !m.reported_models.is_empty(),
                "{}: no reported model id",
                m.model
            );
        }
    }

    #[test]
    fn light_capabilities_per_model_and_profile() {
        let lib = ModelLibrary::embedded();
        let comp = |m: &str, p: Option<&str>| {
            let info = lib.get(m).unwrap();
            let shape = info.shape_for(p).unwrap();
            (shape.outputs, shape.output_component(), shape.light)
        };
        assert_eq!(comp("ShellyPlusRGBWPM", None).0, 4);
        assert_eq!(comp("ShellyPlusRGBWPM", None).1, "light");
        assert_eq!(comp("ShellyPlusRGBWPM", Some("rgb")).1, "rgb");
        assert_eq!(comp("ShellyPlusRGBWPM", Some("rgbw")).0, 1);
        assert_eq!(comp("ShellyPlusRGBWPM", Some("rgbw")).1, "rgbw");
        assert_eq!(comp("ShellyDuoBulbG3", None).1, "cct");
        let white = comp("ShellyBulb", Some("white")).2.unwrap();
        assert_eq!((white.temperature, white.rgb), (Some([3000, 6500]), false));
        assert_eq!(comp("ShellyDimmerG3", None).2, Some(LightCaps::dimmer()));
        assert_eq!(comp("ShellyPlus1PM", None).1, "switch");
        assert_eq!(comp("ShellyPlus1PM", None).2, None);
        // A relay model with light capabilities, or an inverted range, is refused.
        let mut bad = lib.get("ShellyPlus1PM").unwrap().clone();
        bad.light = Some(LightCaps {
            temperature: Some([6500, 2700]),
            ..LightCaps::dimmer()
        });
        let p = bad.check().join("\n");
        assert!(p.contains("output_kind") && p.contains("rising"), "{p}");
    }

    #[test]
    fn dimmers_have_light_outputs() {
        let lib = ModelLibrary::embedded();
        let g3 = lib.get("ShellyDimmerG3").unwrap();
        assert_eq!(g3.output_kind, OutputKind::Light);
        assert_eq!((g3.inputs, g3.outputs, g3.covers), (2, 1, 0));
        assert_eq!(g3.reported_models, ["S3DM-0A101WWL"]);
        let pro = lib.get("ShellyProDimmer2PM").unwrap();
        assert_eq!(pro.output_kind, OutputKind::Light);
        assert_eq!((pro.inputs, pro.outputs), (4, 2));
        assert_eq!(
            lib.get("ShellyPlusWallDimmer").unwrap().inputs,
            0,
            "the wall dimmer's buttons are not input components"
        );
        // Gen1 dimmers report their load in `meters[0]`.
        let d2 = lib.get("ShellyDimmer2").unwrap();
        assert_eq!(d2.meter_source(), MeterSource::Gen1Meters);
        assert_eq!(d2.meter_output(0), Some(0));
    }

    #[test]
    fn input_only_models_have_no_outputs_or_meters() {
        let lib = ModelLibrary::embedded();
        for (id, inputs, protocol) in [
            ("ShellyI3", 3, Protocol::Rest),
            ("ShellyPlusI4", 4, Protocol::Rpc),
            ("ShellyI4G4", 4, Protocol::Rpc),
        ] {
            let m = lib.get(id).unwrap();
            assert_eq!(
                (m.inputs, m.outputs, m.meters, m.covers),
                (inputs, 0, 0, 0),
                "{id}"
            );
            assert_eq!(m.protocol, protocol, "{id}");
            assert_eq!(m.meter_source(), MeterSource::None, "{id}");
            assert!(!m.sleeps, "{id}");
        }
    }

    #[test]
    fn sensor_models_list_their_own_sensors() {
        let lib = ModelLibrary::embedded();
        for id in ["ShellyHT", "ShellyPlusHT", "ShellyHTG3"] {
            let m = lib.get(id).unwrap();
            assert_eq!(
                m.sensors,
                [SensorQuantity::Temperature, SensorQuantity::Humidity],
                "{id}"
            );
            assert!(m.sleeps, "{id}");
            assert!(
                !m.temperature_monitoring,
                "{id}: the probe is a sensor, not the device's own temperature"
            );
            assert_eq!((m.inputs, m.outputs, m.meters), (0, 0, 0), "{id}");
        }
        let uni = lib.get("ShellyUni").unwrap();
        assert_eq!(uni.sensors, [SensorQuantity::Voltage]);
        assert_eq!((uni.inputs, uni.outputs), (2, 2));
        assert!(!uni.sleeps);
    }

    #[test]
    fn profiles_resolve_to_their_shapes() {
        let lib = ModelLibrary::embedded();
        let s25 = lib.get("Shelly2.5").unwrap();
        let roller = s25.shape("Roller").unwrap();
        assert_eq!(roller.profile.as_deref(), Some("roller"));
        assert_eq!(
            (roller.inputs, roller.outputs, roller.covers, roller.meters),
            (2, 0, 1, 2)
        );
        assert_eq!(roller.meter_source, MeterSource::Gen1Meters);
        assert_eq!(roller.meter_output(0), None);
        assert_eq!(s25.shape("relay").unwrap(), s25.default_shape());

        let g4 = lib.get("Shelly2PMG4").unwrap();
        let cover = g4.shape("cover").unwrap();
        assert_eq!(
            (cover.inputs, cover.outputs, cover.covers, cover.meters),
            (2, 0, 1, 1)
        );
        assert_eq!(cover.meter_cover(0), Some(0));
        assert_eq!(g4.profile_names(), ["switch", "cover"]);

        let mono = lib.get("ShellyPro3EM").unwrap().shape("monophase").unwrap();
        assert_eq!((mono.meters, mono.meter_source), (3, MeterSource::Em1));

        // The Shutter is a cover device without profiles.
        let shutter = lib.get("ShellyShutter").unwrap();
        let shape = shutter.default_shape();
        assert_eq!(
            (shape.inputs, shape.outputs, shape.covers, shape.meters),
            (2, 0, 1, 1)
        );
        assert_eq!(shape.meter_cover(0), Some(0));
        assert!(shutter.shape("cover").is_none());
        assert!(
            shutter
                .shape_for(Some("cover"))
                .unwrap_err()
                .contains("has no profiles")
        );
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
        let count = lib.models().len();
        assert!(
            brief.starts_with(&format!("Shelly models ({count}):\n  ShellyEM ")),
            "{brief}"
        );
        assert!(brief.ends_with("Tasmota:\n  Tasmota"));
        // Brief: two aligned columns.
        let col = |line: &str| line.find("Shelly ").unwrap_or(0);
        let lines: Vec<&str> = brief.lines().skip(1).take(count).collect();
        assert!(lines.iter().all(|l| col(l) == col(lines[0])), "{brief}");
        let one = lib.print(PrintMode::Detailed, Some("Shelly2PMG3")).unwrap();
        assert_eq!(
            one,
            "Shelly models (1):
  Model        Name             Gen  Protocol  Inputs  Outputs  Covers  Meters      Sensors  Profiles
  Shelly2PMG3  Shelly 2PM Gen3  3    RPC       2       2        0       2 (switch)  –        switch, cover"
        );
        assert!(lib.print(PrintMode::Brief, Some("Nope")).is_err());
        assert_eq!(
            lib.print(PrintMode::Brief, Some("OtherVendor")).unwrap(),
            "Tasmota:\n  Tasmota"
        );
        assert!("verbose".parse::<PrintMode>().is_err());
    }
}
