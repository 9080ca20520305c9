//! # smartdev
//!
//! Manage networked smart switches, covers and energy meters — Shelly (Gen1 REST, Gen2/3/4 RPC) and Tasmota —
//! through one uniform, synchronous interface: device status, online state, inputs, outputs, meters, covers,
//! sensors and add-on temperature probes; switch relays, move covers, get woken when a device changes, and
//! develop against simulated devices kept in editable JSON files.
//!
//! ## A first program, no hardware needed
//!
//! ```
//! use smartdev::{Controller, CoverAction, Settings};
//!
//! fn main() -> Result<(), smartdev::Error> {
//!     let settings = Settings::from_yaml_str(
//!         "SmartDevices:
//!            Devices:
//!              - {Name: Garden, Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: Pool Pump}]}
//!              - {Name: Patio, Model: Shelly2PMG3, Simulate: true, Covers: [{Name: Awning}]}",
//!     )?;
//!     let ctl = Controller::open(settings, None)?; // simulated: files in ./simulation_files/
//!     let change = ctl.change_output("Pool Pump", true)?;
//!     assert!(change.state);
//!     let awning = ctl.move_cover("Awning", CoverAction::Open)?;
//!     println!("awning {:?} at {:?} %", awning.state, awning.position);
//!     println!("{}", ctl.print_device_status(None)?);
//!     Ok(())
//! }
//! ```
//!
//! Real devices take a `Hostname` instead of `Simulate: true` (and `Password` where one is set); the
//! configuration's keys are in the README and in `config/dictionary.yaml`.
//!
//! ## Where to go next
//!
//! - [`Controller`]: every operation; calls named `read_*`/`refresh_*` and the spec's `get_device` do device
//!   I/O, every other getter returns the last known state at once.
//!   Identities are `impl Into<Identity>` (`&str`/`String`: a name, `i64`: an ID, or `&Identity`); the structs
//!   handed out are `#[non_exhaustive]`; `Controller` is `Send + Sync`.
//! - [`ControllerBuilder`]: validation dictionary extensions, a model library file, a [`WakeFlag`].
//! - [`emulator`]: emulated Shelly and Tasmota devices over real HTTP on 127.0.0.1 (also `sdctl emulate`).
//! - `examples/basic.rs` (a tour), `examples/c/` (the C API with pkg-config), `examples/bench_*.rs`
//!   (the benchmarks behind `BENCHMARKS.md`); `bindings/go` and `bindings/python` for Go and Python.
//!
//! Threads: every device has its own worker (`sd-dev-<ID>`), a supervisor (`sd-supervisor`) refreshes devices
//! in the background, and an optional webhook listener (`sd-webhook`) queues device events. See
//! `ARCHITECTURE.md`.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod actor;
mod answer;
mod builder;
mod clock;
mod coiot;
pub mod config;
mod controller;
mod directory;
pub mod discovery;
mod driver;
#[cfg(feature = "emulator")]
pub mod emulator;
mod energy;
mod error;
mod event;
pub mod ffi;
mod firmware;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod hostname;
pub mod light;
mod log_scope;
pub mod logging;
mod mac;
pub mod models;
mod mqtt;
mod objects;
mod plan;
mod print;
mod sleep;
mod suggest;
mod table;
mod text;
mod trust;
mod untrusted_json;
mod url;
mod verbosity;
mod wake;
mod webhook;
mod yaml;

pub use builder::ControllerBuilder;
pub use config::{Channel, ConfigLoader, Rule, Settings, ValidationDictionary, ValueType};
pub use controller::{Controller, GetDeviceError, QueueStats, RefreshFailure, RefreshReport};
pub use discovery::{
    DiscoverOptions, Discovered, Finder, Lookup, MdnsFinder, discover, discover_with,
};
pub use driver::OutputAction;
/// Certificate fingerprints as smartdev writes (`AB:CD:…`) and reads them (`CertSha256`).
pub use driver::tls::{fingerprint as certificate_sha256, parse_fingerprint};
/// Preview of the push channel's transport (RFC 6455 client, Shelly JSON-RPC and notifications over it): not
/// wired into the drivers and not a stable API yet; public for the integration tests (`tests/ws_transport.rs`).
#[doc(hidden)]
pub use driver::ws;
pub use energy::{
    ChannelEnergy, EnergyHistory, EnergyRecord, HistoryEntry, HistoryGap, MAX_RECORDS,
    parse_history_time, rfc3339,
};
pub use error::{Error, Problem, Result};
pub use event::{
    EventChannel, EventFilter, KNOWN_EVENTS, PROFILE_CHANGED, SMARTDEV_EVENTS, WebhookEvent,
};
pub use firmware::{
    FirmwareChannel, FirmwareInfo, FirmwareUpdate, UpdateFailure, UpdateOptions, UpdateProgress,
};
pub use light::{LightCaps, LightChange};
pub use mac::{ACCEPTED_SPELLINGS as MAC_SPELLINGS, Mac};
pub use models::{ModelLibrary, PrintMode, SensorQuantity};
pub use objects::{
    Attributes, Component, ComponentKind, Cover, CoverAction, CoverState, Device, Identity, Input,
    Meter, Output, OutputChange, Sensor, TempProbe, Transport,
};
pub use plan::MAX_TEMP_PROBES;
pub use trust::{TrustChange, trust_certificate};
pub use wake::WakeFlag;

/// The library version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every Rust block of the README compiles and runs as a doctest, so what a user pastes works.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
