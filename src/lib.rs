//! # smartdev
//!
//! Manage networked smart switches and energy meters — Shelly (Gen1 REST, Gen2/3/4 RPC) and Tasmota — through
//! one uniform, synchronous interface: read device status, online state, inputs, outputs, energy meters and
//! add-on temperature probes, switch relays, and develop against simulated devices.
//!
//! ```no_run
//! use smartdev::{Controller, Identity, Settings};
//!
//! let settings = Settings::from_file("devices.yaml")?;
//! let ctl = Controller::open(settings, None)?;
//! let change = ctl.change_output(&Identity::name("Pool Pump"), true)?;
//! println!("on={} changed={}", change.state, change.did_change);
//! println!("{}", ctl.print_device_status(None)?);
//! # Ok::<(), smartdev::Error>(())
//! ```
//!
//! Threads: every device has its own worker (`sd-dev-<ID>`), a supervisor (`sd-supervisor`) refreshes devices
//! in the background. See `ARCHITECTURE.md`.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod actor;
mod builder;
mod clock;
pub mod config;
mod controller;
mod directory;
mod driver;
#[cfg(feature = "emulator")]
pub mod emulator;
mod error;
mod event;
pub mod ffi;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod hostname;
mod log_scope;
pub mod logging;
pub mod models;
mod objects;
mod plan;
mod print;
mod suggest;
mod text;
mod untrusted_json;
mod url;
mod wake;
mod webhook;
mod yaml;

pub use builder::ControllerBuilder;
pub use config::{ConfigLoader, Rule, Settings, ValidationDictionary, ValueType};
pub use controller::{Controller, QueueStats, RefreshFailure, RefreshReport};
pub use driver::OutputAction;
pub use error::{Error, Problem, Result};
pub use event::{EventFilter, KNOWN_EVENTS, WebhookEvent};
pub use models::{ModelLibrary, PrintMode, SensorQuantity};
pub use objects::{
    Attributes, Component, ComponentKind, Cover, CoverAction, CoverState, Device, Identity, Input,
    Meter, Output, OutputChange, Sensor, TempProbe,
};
pub use plan::MAX_TEMP_PROBES;
pub use wake::WakeFlag;

/// The library version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
