//! The objects the API hands out: devices and their components, as snapshots.
//!
//! Field names serialize in the PascalCase of the spec (`ID`, `Name`, `Online`, `State`, ...); custom attributes
//! from the configuration follow the built-in fields in configuration order. Readings a device does not report
//! are `None` (JSON `null`), never 0. Units: W, Wh, V, A, °C, seconds.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::models::{Protocol, SensorQuantity};

/// Custom attributes of a device or component, in configuration order.
pub type Attributes = Map<String, Value>;

/// `Clone` field by field, with a `clone_from` that keeps the target's allocations (a worker brings its spare
/// snapshot up to date from the published one at every read, `actor/worker.rs`). The pattern names every
/// field, so a field added to the struct and not here does not compile.
macro_rules! clone_by_fields {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Clone for $t {
            fn clone(&self) -> Self {
                let $t { $($f),* } = self;
                $t { $($f: $f.clone()),* }
            }

            fn clone_from(&mut self, source: &Self) {
                let $t { $($f),* } = source;
                $(self.$f.clone_from($f);)*
            }
        }
    };
}

clone_by_fields!(Device {
    id,
    name,
    object_type,
    model,
    model_name,
    generation,
    protocol,
    hostname,
    port,
    address,
    transport,
    simulate,
    expect_offline,
    online,
    sleeping,
    last_seen,
    wakeup_period,
    mac_address,
    temperature,
    battery,
    uptime,
    restart_required,
    update_available,
    firmware,
    reported_model,
    profile,
    config_mismatch,
    total_power,
    total_energy,
    total_returned_energy,
    supported_webhooks,
    last_error,
    simulation_file,
    inputs,
    outputs,
    meters,
    temp_probes,
    covers,
    sensors,
    custom
});
clone_by_fields!(Input {
    id,
    name,
    object_type,
    device_id,
    component_index,
    state,
    webhooks,
    custom
});
clone_by_fields!(Output {
    id,
    name,
    object_type,
    device_id,
    component_index,
    state,
    brightness,
    color_temperature,
    rgb,
    white,
    temperature,
    has_meter,
    webhooks,
    custom
});
clone_by_fields!(Meter {
    id,
    name,
    object_type,
    device_id,
    component_index,
    output_id,
    cover_id,
    power,
    apparent_power,
    frequency,
    voltage,
    current,
    power_factor,
    energy,
    returned_energy,
    mock_rate,
    custom
});
clone_by_fields!(TempProbe {
    id,
    name,
    object_type,
    device_id,
    component_index,
    temperature,
    last_reading_time,
    probe_id,
    requires_output,
    custom
});
clone_by_fields!(Cover {
    id,
    name,
    object_type,
    device_id,
    component_index,
    state,
    position,
    calibrated,
    temperature,
    has_meter,
    webhooks,
    custom
});
clone_by_fields!(Sensor {
    id,
    name,
    object_type,
    device_id,
    component_index,
    quantity,
    value,
    unit,
    last_reading_time,
    sensor_id,
    built_in,
    requires_output,
    custom
});

/// A name or a numeric ID. The API never guesses between the two.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// The `Name` of a device or component.
    Name(String),
    /// The `ID` of a device or component.
    Id(i64),
}

impl Identity {
    /// Shorthand for `Identity::Name`.
    pub fn name(n: impl Into<String>) -> Self {
        Identity::Name(n.into())
    }
}

impl From<i64> for Identity {
    fn from(id: i64) -> Self {
        Identity::Id(id)
    }
}

impl From<&str> for Identity {
    fn from(name: &str) -> Self {
        Identity::Name(name.to_string())
    }
}

impl From<String> for Identity {
    fn from(name: String) -> Self {
        Identity::Name(name)
    }
}

/// Lets a call take `&id` where an identity is kept for reuse.
impl From<&Identity> for Identity {
    fn from(id: &Identity) -> Self {
        id.clone()
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Name(n) => write!(f, "'{n}'"),
            Identity::Id(i) => write!(f, "ID {i}"),
        }
    }
}

/// The kinds of device component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ComponentKind {
    /// A digital input (switch or button terminal).
    Input,
    /// A relay output (or a dimmable light's on/off).
    Output,
    /// An energy meter.
    Meter,
    /// An add-on temperature probe.
    TempProbe,
    /// A cover (roller shutter, blind, garage door motor).
    Cover,
    /// A sensor: humidity, voltage, or a device's own temperature sensor.
    Sensor,
}

impl ComponentKind {
    /// All kinds in configuration order.
    pub const ALL: [ComponentKind; 6] = [
        ComponentKind::Input,
        ComponentKind::Output,
        ComponentKind::Meter,
        ComponentKind::TempProbe,
        ComponentKind::Cover,
        ComponentKind::Sensor,
    ];

    /// The `ObjectType` string (`input`, `output`, `meter`, `temp_probe`, `cover`, `sensor`).
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Input => "input",
            ComponentKind::Output => "output",
            ComponentKind::Meter => "meter",
            ComponentKind::TempProbe => "temp_probe",
            ComponentKind::Cover => "cover",
            ComponentKind::Sensor => "sensor",
        }
    }

    /// The configuration key of this kind's list (`Inputs`, `Outputs`, `Meters`, `TempProbes`, `Covers`,
    /// `Sensors`).
    pub fn config_key(self) -> &'static str {
        match self {
            ComponentKind::Input => "Inputs",
            ComponentKind::Output => "Outputs",
            ComponentKind::Meter => "Meters",
            ComponentKind::TempProbe => "TempProbes",
            ComponentKind::Cover => "Covers",
            ComponentKind::Sensor => "Sensors",
        }
    }

    /// The prefix of default names (`Input 3`, `TempProbe 1`, `Cover 1`).
    pub fn default_name_prefix(self) -> &'static str {
        match self {
            ComponentKind::Input => "Input",
            ComponentKind::Output => "Output",
            ComponentKind::Meter => "Meter",
            ComponentKind::TempProbe => "TempProbe",
            ComponentKind::Cover => "Cover",
            ComponentKind::Sensor => "Sensor",
        }
    }
}

impl std::str::FromStr for ComponentKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "input" => Ok(ComponentKind::Input),
            "output" => Ok(ComponentKind::Output),
            "meter" => Ok(ComponentKind::Meter),
            "temp_probe" | "tempprobe" => Ok(ComponentKind::TempProbe),
            "cover" => Ok(ComponentKind::Cover),
            "sensor" => Ok(ComponentKind::Sensor),
            other => Err(crate::Error::InvalidArgument(format!(
                "component type '{other}' is unknown; use input, output, meter, temp_probe, cover or sensor"
            ))),
        }
    }
}

/// What a cover is doing, as the device reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CoverState {
    /// Fully open and still.
    Open,
    /// Fully closed and still.
    Closed,
    /// Moving towards open.
    Opening,
    /// Moving towards closed.
    Closing,
    /// Still, somewhere between open and closed (or position unknown).
    Stopped,
    /// Running its calibration.
    Calibrating,
}

impl CoverState {
    /// The word used in JSON and text (`open`, `closing`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CoverState::Open => "open",
            CoverState::Closed => "closed",
            CoverState::Opening => "opening",
            CoverState::Closing => "closing",
            CoverState::Stopped => "stopped",
            CoverState::Calibrating => "calibrating",
        }
    }

    /// Parses a Gen2+ state word as devices and simulation files write it (`close` and `stop` are accepted as
    /// `closed` and `stopped` in files). Gen1 roller words mean motion, not position: `driver/gen1.rs` maps them.
    pub fn parse(s: &str) -> Option<CoverState> {
        Some(match s {
            "open" => CoverState::Open,
            "closed" | "close" => CoverState::Closed,
            "opening" => CoverState::Opening,
            "closing" => CoverState::Closing,
            "stopped" | "stop" => CoverState::Stopped,
            "calibrating" => CoverState::Calibrating,
            _ => return None,
        })
    }
}

impl fmt::Display for CoverState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to make a cover do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoverAction {
    /// Move to fully open.
    Open,
    /// Move to fully closed.
    Close,
    /// Stop moving.
    Stop,
    /// Move to a position, 0 (closed) to 100 (open); needs a calibrated cover.
    Position(u8),
}

impl CoverAction {
    /// `open`, `close`, `stop`, `position 40`: for messages.
    pub fn describe(self) -> String {
        match self {
            CoverAction::Open => "open".into(),
            CoverAction::Close => "close".into(),
            CoverAction::Stop => "stop".into(),
            CoverAction::Position(p) => format!("position {p}"),
        }
    }
}

impl fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a device is reached over the network (`Transport` in the device object).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Transport {
    /// Plain HTTP (and WebSocket for the push channel).
    #[serde(rename = "http")]
    Http,
    /// HTTPS with the certificate verified (`Tls: true`, or `Hostname: https://…`). A device is never moved
    /// to HTTP behind the user's back, nor to HTTPS because it reports Enhanced Security.
    #[serde(rename = "https")]
    Https,
    /// Through the MQTT broker of the `Mqtt` block (`Channel: mqtt`).
    #[serde(rename = "mqtt")]
    Mqtt,
}

/// A device and all its components, as last read.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct Device {
    /// Numeric ID (configured or assigned).
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name (configured or `Device <ID>`).
    pub name: String,
    /// `"device"`.
    pub object_type: &'static str,
    /// Model id (`Shelly2PMG3`) or `Tasmota`.
    pub model: String,
    /// Marketing name of the model (`Tasmota` for Tasmota devices).
    pub model_name: String,
    /// Hardware generation (Shelly only).
    pub generation: Option<u8>,
    /// How the device is spoken to.
    pub protocol: Option<Protocol>,
    /// Network address as configured (absent for simulated devices without one, and for a device configured
    /// by its `MAC` alone).
    pub hostname: Option<String>,
    /// HTTP port: the configured one, or the one the device answers on since it moved (see `address`).
    pub port: u16,
    /// The address the device is reached at now: the configured `Hostname`, or where discovery found a device
    /// configured with a `MAC` after it moved (its `port` too). `None` while no address is known (a device
    /// configured by its MAC alone, not found yet) and for simulated devices.
    pub address: Option<String>,
    /// `http`, `https` or `mqtt`: how the device is spoken to (`None` for simulated devices).
    pub transport: Option<Transport>,
    /// Whether the device is simulated from a local JSON file.
    pub simulate: bool,
    /// Whether the device is expected to be offline at times (no warnings then).
    pub expect_offline: bool,
    /// Whether the last contact succeeded. For a device that sleeps between reports (`Sleeping`): whether it
    /// reported within its period (plus a margin); it is not offline while it sleeps.
    pub online: bool,
    /// Whether the device sleeps between reports (a battery device reporting through the outbound WebSocket,
    /// see README "Battery devices") and is within its reporting period: its values are its last report,
    /// commands fail with [`Error::Sleeping`](crate::Error::Sleeping). False for devices that are always
    /// awake, and for a sleeping device that missed its period (then it is offline).
    pub sleeping: bool,
    /// When a sleeping device last reported (RFC 3339, UTC); `None` for devices that do not sleep and before
    /// the first report.
    pub last_seen: Option<String>,
    /// Seconds between a sleeping device's reports as the device states them (Gen2+ `sys.wakeup_period`);
    /// `None` for devices that do not say (and for every device that is always awake).
    pub wakeup_period: Option<u64>,
    /// MAC address, the device's identity, always spelt `AA:BB:CC:DD:EE:FF`: the configured `MAC`, or the one
    /// the device reported (a device answering with another MAC than this is refused, see
    /// [`Error::WrongDevice`](crate::Error::WrongDevice)). A simulated device without one has a stable MAC
    /// derived from its ID. `None` until known.
    pub mac_address: Option<String>,
    /// Device temperature in °C.
    pub temperature: Option<f64>,
    /// Battery charge in percent (battery devices, Gen2+ `devicepower:0`).
    pub battery: Option<f64>,
    /// Seconds since the device started.
    pub uptime: Option<u64>,
    /// The device asks for a restart (Gen2+), if it says.
    pub restart_required: Option<bool>,
    /// A firmware update is available, if the device says.
    pub update_available: Option<bool>,
    /// Firmware version as reported.
    pub firmware: Option<String>,
    /// The model the device reports about itself, when it differs from the configured one or is known.
    pub reported_model: Option<String>,
    /// The profile the device reports it is in (`switch`, `cover`, `triphase`, Gen1 `relay`/`roller`); for
    /// simulated devices and before the first contact the planned one (configured, else the model's default).
    /// `None` for models with one shape. Where the configuration leaves the shape open, the profile reported
    /// at the first contact at open decides the components.
    pub profile: Option<String>,
    /// Set when the device is not what the configuration says (e.g. in `cover` profile while outputs are
    /// configured), or no longer what it was at open (switched to another profile since, also announced by a
    /// `device.profile_changed` event): what differs and how to fix it. Components the device does not have
    /// then stay `null`.
    pub config_mismatch: Option<String>,
    /// Sum of the power of the device's meters in W.
    pub total_power: Option<f64>,
    /// Sum of the energy of the device's meters in Wh.
    pub total_energy: Option<f64>,
    /// Sum of the returned (exported) energy of the device's meters in Wh, where the device reports it.
    pub total_returned_energy: Option<f64>,
    /// Webhook events the device can send. Empty while not known: a Gen2+ device is asked at `open` only when
    /// webhooks are wanted on it, otherwise at the first read after `open` (`read_device`, a refresh); Gen1
    /// devices report it only when webhooks are on.
    pub supported_webhooks: Vec<String>,
    /// The last failure talking to (or simulating) the device, cleared by the next success.
    pub last_error: Option<String>,
    /// The simulation file of a simulated device.
    pub simulation_file: Option<PathBuf>,
    /// Inputs in hardware order.
    pub inputs: Vec<Input>,
    /// Outputs in hardware order.
    pub outputs: Vec<Output>,
    /// Meters in hardware order.
    pub meters: Vec<Meter>,
    /// Add-on temperature probes.
    pub temp_probes: Vec<TempProbe>,
    /// Covers in hardware order.
    pub covers: Vec<Cover>,
    /// Sensors: the device's own (an H&T's) and add-on humidity/voltage/temperature sensors.
    pub sensors: Vec<Sensor>,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

impl Device {
    /// `Name (ID: n)`, the label used in messages.
    pub fn label(&self) -> String {
        format!("{} (ID: {})", self.name, self.id)
    }

    /// True for Tasmota devices.
    pub fn is_tasmota(&self) -> bool {
        self.protocol == Some(Protocol::Tasmota)
    }

    /// A device with default components in these numbers; outputs are named `O0`, `O1`, ... (for tests and
    /// the fuzzing entry points).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn with_components(inputs: usize, outputs: usize, meters: usize) -> Self {
        Device {
            inputs: (0..inputs).map(|_| Input::default()).collect(),
            outputs: (0..outputs)
                .map(|n| Output {
                    name: format!("O{n}"),
                    ..Output::default()
                })
                .collect(),
            meters: (0..meters).map(|_| Meter::default()).collect(),
            ..Device::default()
        }
    }

    /// Stores new probe readings from `read`, except for probes whose `RequiresOutput` is off (they keep their
    /// last reading); stamps `LastReadingTime` with `now` when a value arrives.
    pub(crate) fn update_probes(
        &mut self,
        now: &str,
        mut read: impl FnMut(&TempProbe) -> Option<f64>,
    ) {
        for p in &mut self.temp_probes {
            // An output of another device is checked by the worker, which sees the other devices.
            if let Some(req) = &p.requires_output
                && self
                    .outputs
                    .iter()
                    .any(|o| &o.name == req && o.state != Some(true))
            {
                continue;
            }
            p.temperature = read(p);
            if p.temperature.is_some() {
                p.last_reading_time = Some(now.to_string());
            }
        }
    }

    /// Stores new sensor readings like [`Device::update_probes`] does for probes.
    pub(crate) fn update_sensors(
        &mut self,
        now: &str,
        mut read: impl FnMut(&Sensor) -> Option<f64>,
    ) {
        for s in &mut self.sensors {
            // An output of another device is checked by the worker, which sees the other devices.
            if let Some(req) = &s.requires_output
                && self
                    .outputs
                    .iter()
                    .any(|o| &o.name == req && o.state != Some(true))
            {
                continue;
            }
            s.value = read(s);
            if s.value.is_some() {
                s.last_reading_time = Some(now.to_string());
            }
        }
    }

    /// Recomputes `TotalPower` and `TotalEnergy` from the meters (absent when no meter reports a value).
    pub fn update_totals(&mut self) {
        fn sum(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
            values
                .flatten()
                .fold(None, |acc, v| Some(acc.unwrap_or(0.0) + v))
        }
        self.total_power = sum(self.meters.iter().map(|m| m.power));
        self.total_energy = sum(self.meters.iter().map(|m| m.energy));
        self.total_returned_energy = sum(self.meters.iter().map(|m| m.returned_energy));
    }
}

/// A digital input.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct Input {
    /// Numeric ID, unique among inputs.
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name, unique among inputs.
    pub name: String,
    /// `"input"`.
    pub object_type: &'static str,
    /// ID of the device it belongs to.
    #[serde(rename = "DeviceID")]
    pub device_id: i64,
    /// Hardware channel (0-based).
    pub component_index: usize,
    /// True when the input is on (closed); `None` until read, and for inputs in button mode (no state).
    pub state: Option<bool>,
    /// Whether default webhooks are installed for it.
    pub webhooks: bool,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

/// A relay output.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct Output {
    /// Numeric ID, unique among outputs.
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name, unique among outputs.
    pub name: String,
    /// `"output"`.
    pub object_type: &'static str,
    /// ID of the device it belongs to.
    #[serde(rename = "DeviceID")]
    pub device_id: i64,
    /// Hardware channel (0-based).
    pub component_index: usize,
    /// True when the relay (or light) is on; `None` until read or when the device has no such output now.
    pub state: Option<bool>,
    /// Brightness in % of a dimmable light output; `None` for relays.
    pub brightness: Option<f64>,
    /// Colour temperature in K of a tunable-white light; `None` for other outputs or until read.
    #[serde(rename = "ColorTemperature")]
    pub color_temperature: Option<f64>,
    /// Red, green, blue (0–255 each) of a colour light; `None` for other outputs or until read.
    pub rgb: Option<[u8; 3]>,
    /// White channel in % of an RGBW light; `None` for other outputs or until read.
    pub white: Option<f64>,
    /// Temperature of the switch in °C, where reported.
    pub temperature: Option<f64>,
    /// Whether a meter measures this output.
    pub has_meter: bool,
    /// Whether default webhooks are installed for it.
    pub webhooks: bool,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

/// An energy meter. Power keeps its sign: negative means energy flows back (e.g. solar export).
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct Meter {
    /// Numeric ID, unique among meters.
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name, unique among meters.
    pub name: String,
    /// `"meter"`.
    pub object_type: &'static str,
    /// ID of the device it belongs to.
    #[serde(rename = "DeviceID")]
    pub device_id: i64,
    /// Hardware channel (0-based).
    pub component_index: usize,
    /// ID of the output this meter measures, if it is part of one.
    #[serde(rename = "OutputID")]
    pub output_id: Option<i64>,
    /// ID of the cover this meter measures, if it is part of one.
    #[serde(rename = "CoverID")]
    pub cover_id: Option<i64>,
    /// Active power in W.
    pub power: Option<f64>,
    /// Apparent power in VA.
    pub apparent_power: Option<f64>,
    /// Mains frequency in Hz.
    pub frequency: Option<f64>,
    /// Voltage in V.
    pub voltage: Option<f64>,
    /// Current in A.
    pub current: Option<f64>,
    /// Power factor (-1..1).
    pub power_factor: Option<f64>,
    /// Energy consumed in Wh (lifetime counter).
    pub energy: Option<f64>,
    /// Energy returned (exported) in Wh.
    pub returned_energy: Option<f64>,
    /// Simulated growth of `Energy` in Wh per second.
    pub mock_rate: Option<f64>,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

/// An add-on temperature probe.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct TempProbe {
    /// Numeric ID, unique among probes.
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name, equal to the probe's name in the vendor app.
    pub name: String,
    /// `"temp_probe"`.
    pub object_type: &'static str,
    /// ID of the device it belongs to.
    #[serde(rename = "DeviceID")]
    pub device_id: i64,
    /// Position in the device's probe list (0-based).
    pub component_index: usize,
    /// Temperature in °C.
    pub temperature: Option<f64>,
    /// When the temperature was last read (RFC 3339, UTC).
    pub last_reading_time: Option<String>,
    /// The device's own id of the probe (`temperature:100` → 100), once mapped.
    #[serde(rename = "ProbeID")]
    pub probe_id: Option<i64>,
    /// Name of the output that must be on for the reading to be updated.
    pub requires_output: Option<String>,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

/// A cover (roller shutter, blind): Gen2+ `cover:N`, Gen1 `rollers[N]`, Tasmota `Shutter<N+1>`.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct Cover {
    /// Numeric ID, unique among covers.
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name, unique among covers.
    pub name: String,
    /// `"cover"`.
    pub object_type: &'static str,
    /// ID of the device it belongs to.
    #[serde(rename = "DeviceID")]
    pub device_id: i64,
    /// Hardware channel (0-based).
    pub component_index: usize,
    /// What the cover is doing; `None` until read.
    pub state: Option<CoverState>,
    /// Position in % (0 closed, 100 open); `None` until read or while the cover is not calibrated.
    pub position: Option<f64>,
    /// Whether the cover knows its position (calibrated); `None` until read.
    pub calibrated: Option<bool>,
    /// Temperature of the device's cover channel in °C, where reported.
    pub temperature: Option<f64>,
    /// Whether a meter measures this cover.
    pub has_meter: bool,
    /// Whether default webhooks are installed for it.
    pub webhooks: bool,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

/// A sensor: an add-on's humidity or voltage input, or a device's own sensor (an H&T's temperature and
/// humidity). Add-on sensors are matched by name like temperature probes.
#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct Sensor {
    /// Numeric ID, unique among sensors.
    #[serde(rename = "ID")]
    pub id: i64,
    /// Name; for add-on sensors equal to the peripheral's name in the vendor app.
    pub name: String,
    /// `"sensor"`.
    pub object_type: &'static str,
    /// ID of the device it belongs to.
    #[serde(rename = "DeviceID")]
    pub device_id: i64,
    /// Position in the device's sensor list (0-based).
    pub component_index: usize,
    /// What it measures.
    pub quantity: SensorQuantity,
    /// The reading, in `Unit`; `None` until read.
    pub value: Option<f64>,
    /// `°C`, `%RH` or `V`.
    pub unit: &'static str,
    /// When the value was last read (RFC 3339, UTC).
    pub last_reading_time: Option<String>,
    /// The device's own id of the sensor (`humidity:100` → 100), once mapped.
    #[serde(rename = "SensorID")]
    pub sensor_id: Option<i64>,
    /// Whether it is the device's own sensor (not an add-on peripheral).
    pub built_in: bool,
    /// Name of the output that must be on for the reading to be updated.
    pub requires_output: Option<String>,
    /// Custom attributes from the configuration.
    #[serde(flatten)]
    pub custom: Attributes,
}

impl Default for Sensor {
    fn default() -> Self {
        Sensor {
            id: 0,
            name: String::new(),
            object_type: "sensor",
            device_id: 0,
            component_index: 0,
            quantity: SensorQuantity::Humidity,
            value: None,
            unit: SensorQuantity::Humidity.unit(),
            last_reading_time: None,
            sensor_id: None,
            built_in: false,
            requires_output: None,
            custom: Attributes::new(),
        }
    }
}

/// Any one component, as returned by `Controller::component`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Component {
    /// An input.
    Input(Input),
    /// An output.
    Output(Output),
    /// A meter.
    Meter(Meter),
    /// A temperature probe.
    TempProbe(TempProbe),
    /// A cover.
    Cover(Cover),
    /// A sensor.
    Sensor(Sensor),
}

impl Component {
    /// The component's ID.
    pub fn id(&self) -> i64 {
        match self {
            Component::Input(c) => c.id,
            Component::Output(c) => c.id,
            Component::Meter(c) => c.id,
            Component::TempProbe(c) => c.id,
            Component::Cover(c) => c.id,
            Component::Sensor(c) => c.id,
        }
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        match self {
            Component::Input(c) => &c.name,
            Component::Output(c) => &c.name,
            Component::Meter(c) => &c.name,
            Component::TempProbe(c) => &c.name,
            Component::Cover(c) => &c.name,
            Component::Sensor(c) => &c.name,
        }
    }

    /// The ID of the device the component belongs to.
    pub fn device_id(&self) -> i64 {
        match self {
            Component::Input(c) => c.device_id,
            Component::Output(c) => c.device_id,
            Component::Meter(c) => c.device_id,
            Component::TempProbe(c) => c.device_id,
            Component::Cover(c) => c.device_id,
            Component::Sensor(c) => c.device_id,
        }
    }
}

/// What `change_output` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct OutputChange {
    /// The output's state after the call, as reported by the device.
    pub state: bool,
    /// True exactly when the state actually changed.
    pub did_change: bool,
}

/// The keys an object of `kind` (or a device, for `None`) already uses; custom attributes must not reuse them.
/// Worked out once per kind: the loader asks for every block of every device.
pub(crate) fn reserved_keys(kind: Option<ComponentKind>) -> &'static [String] {
    static KEYS: [std::sync::OnceLock<Vec<String>>; 7] = [const { std::sync::OnceLock::new() }; 7];
    let (slot, value): (usize, fn() -> serde_json::Result<Value>) = match kind {
        None => (0, || serde_json::to_value(Device::default())),
        Some(ComponentKind::Input) => (1, || serde_json::to_value(Input::default())),
        Some(ComponentKind::Output) => (2, || serde_json::to_value(Output::default())),
        Some(ComponentKind::Meter) => (3, || serde_json::to_value(Meter::default())),
        Some(ComponentKind::TempProbe) => (4, || serde_json::to_value(TempProbe::default())),
        Some(ComponentKind::Cover) => (5, || serde_json::to_value(Cover::default())),
        Some(ComponentKind::Sensor) => (6, || serde_json::to_value(Sensor::default())),
    };
    KEYS[slot].get_or_init(|| match value() {
        Ok(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `clone_from` makes the same device as `clone`, and keeps the target's allocations where they fit.
    #[test]
    fn clone_from_equals_clone_and_keeps_allocations() {
        let mut custom = Attributes::new();
        custom.insert("Room".into(), "hall".into());
        let mut source = Device::with_components(2, 2, 1);
        source.name = "Hall light".into();
        source.mac_address = Some("AA:BB:CC:DD:EE:FF".into());
        source.supported_webhooks = vec!["switch.on".into(), "switch.off".into()];
        source.outputs[1].name = "Lamp".into();
        source.outputs[1].custom = custom;
        source.temp_probes = vec![TempProbe {
            name: "Probe".into(),
            last_reading_time: Some("T".into()),
            ..TempProbe::default()
        }];
        let mut target = source.clone();
        target.name = "x".repeat(64);
        target.mac_address = Some("y".repeat(64));
        target.outputs.push(Output::default());
        let (name, mac) = (
            target.name.as_ptr(),
            target.mac_address.as_ref().unwrap().as_ptr(),
        );
        target.clone_from(&source);
        assert_eq!(target, source);
        assert_eq!(target, source.clone());
        assert_eq!(target.name.as_ptr(), name, "the name's buffer kept");
        assert_eq!(target.mac_address.as_ref().unwrap().as_ptr(), mac);
        let mut empty = Device::default();
        empty.clone_from(&source);
        assert_eq!(empty, source);
    }

    #[test]
    fn json_uses_spec_field_names_and_custom_attributes_follow() {
        let mut o = Output {
            id: 3,
            name: "Pump".into(),
            object_type: "output",
            state: Some(true),
            ..Output::default()
        };
        o.custom.insert("Group".into(), "Garden".into());
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["ID"], 3);
        assert_eq!(v["State"], true);
        assert!(v["Temperature"].is_null());
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys.last().unwrap(), "Group");
    }

    #[test]
    fn totals_are_absent_without_readings() {
        let mut d = Device::default();
        d.meters.push(Meter::default());
        d.update_totals();
        assert_eq!(d.total_power, None);
        d.meters[0].power = Some(-12.5);
        d.meters.push(Meter {
            power: Some(2.5),
            ..Meter::default()
        });
        d.update_totals();
        assert_eq!(d.total_power, Some(-10.0));
    }

    #[test]
    fn reserved_keys_list_builtin_fields() {
        let keys = reserved_keys(Some(ComponentKind::Output));
        assert!(keys.contains(&"State".to_string()));
        assert!(
            !keys.contains(&"Online".to_string()),
            "a device's, not an output's"
        );
        assert!(reserved_keys(None).contains(&"Online".to_string()));
        assert!(reserved_keys(Some(ComponentKind::Meter)).contains(&"Power".to_string()));
    }
}
