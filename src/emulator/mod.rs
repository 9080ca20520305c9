//! Device emulator: Shelly Gen1 (REST), Shelly Gen2+ (JSON-RPC) and Tasmota devices served over real HTTP on
//! 127.0.0.1, for testing applications without hardware.
//!
//! Every device listens on its own port and generates its payloads from its own state (outputs, inputs, meters
//! with energy accumulated over the emulator clock, covers, sensors, installed webhooks), shaped like real
//! devices' answers. Faults and latency can be injected per device; an admin HTTP endpoint exposes the same
//! controls to other processes (`sdctl emulate` runs one from the command line).
//!
//! What a device has follows the model library's shape for its profile ([`DeviceSpec::profile`],
//! [`Emulator::set_profile`]: a 2PM as `switch:0/1` or `cover:0`, a Shelly 2.5 in relay or roller mode, a Pro 3EM
//! `triphase` or `monophase`):
//! - Gen2+ covers (`Cover.Open/Close/Stop/GoToPosition/Calibrate`), Gen1 rollers (`/roller/N`) and Tasmota
//!   shutters ([`DeviceSpec::shutters`], `ShutterOpen1`...) move over the clock in
//!   [`DeviceSpec::cover_travel`] and draw power while moving ([`Emulator::cover`], [`Emulator::set_cover_position`],
//!   [`Emulator::set_cover_calibrated`]);
//! - dimmers (`light:N`, Gen1 `/light/N`) switch and dim ([`Emulator::set_light`]);
//! - inputs can be buttons (`state: null`, [`Emulator::set_input_type`], [`Emulator::press_button`]);
//! - meters report the fields their component has on real devices (frequency, apparent power, returned
//!   energy; [`Emulator::set_frequency`]);
//! - sensors: built-in (H&T: `temperature:0`, `humidity:0`, `devicepower:0`) and add-on ([`DeviceSpec::probes`],
//!   [`DeviceSpec::sensors`]: DHT22, voltmeter), set with [`Emulator::set_sensor`] and [`Emulator::set_battery`].
//! - firmware: the version it runs and the newer ones on offer ([`DeviceSpec::firmware`],
//!   [`Emulator::set_firmware_offer`]), and an update's whole cycle (download, a restart refusing connections, the
//!   new version everywhere it is reported), or a failure ([`Emulator::set_update_outcome`]).
//!
//! With a manual clock ([`Emulator::start_with_clock`], [`EmuClock::manual`]) tests move covers and energy by
//! stepping time.
//!
//! With [`DeviceSpec::password`] a device authenticates like the real one: Gen1 HTTP Basic, Gen2+ HTTP Digest
//! (RFC 7616, SHA-256 or MD5) with the nonce rules of firmware 2.x (reusable nonces, `stale=true`, 32 slots,
//! 429) or before 2.0 ([`AuthMode`]), Tasmota `user=`/`password=` parameters. [`Emulator::auth_stats`] counts
//! what happened.
//!
//! ```
//! use std::io::{Read, Write};
//! use smartdev::ModelLibrary;
//! use smartdev::emulator::{DeviceSpec, Emulator};
//!
//! let emu = Emulator::start(vec![DeviceSpec::new("Shelly2PMG3")], &ModelLibrary::embedded())?;
//! let mut s = std::net::TcpStream::connect(("127.0.0.1", emu.port(0))).unwrap();
//! s.write_all(b"GET /rpc/Switch.Set?id=1&on=true HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
//! let mut answer = String::new();
//! s.read_to_string(&mut answer).unwrap();
//! assert!(answer.ends_with(r#"{"was_on":false}"#));
//! assert!(emu.output(0, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod clock;
mod coap_server;
pub use clock::EmuClock;
mod accepting;
mod admin;
mod announce;
mod api;
mod auth;
mod cert;
mod coiot;
mod coiot_out;
mod components;
mod cover;
mod device;
mod device_ops;
mod duplex;
#[cfg(test)]
mod every_model;
mod family;
mod faults;
mod fields;
mod firmware;
mod firmware_api;
mod front;
mod gen1;
mod gen1_outputs;
mod history;
mod kvs;
mod layout;
mod lock;
mod mqtt_client;
mod mqtt_gen1;
mod mqtt_link;
mod mqtt_rpc;
mod mqtt_tasmota;
mod notify;
mod port;
mod rpc;
mod rpc_cover;
mod rpc_history;
mod rpc_light;
mod rpc_params;
mod rpc_sensors;
mod rpc_system;
mod rpc_webhook;
mod scripts;
mod sensors;
mod server;
mod sleeper;
mod source;
mod state;
mod tasmota;
mod tasmota_light;
mod tasmota_shutter;
mod update;
mod webhooks;
mod ws;
mod ws_answer;
mod ws_hub;
mod ws_out;
mod ws_poller;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use crate::models::ModelLibrary;
use device::{Device, Identity};
use faults::NetControl;
use port::Server;
use server::Service;

pub use auth::{AuthMode, AuthStats};
pub use cert::{CertAuthority, CertSpec};
pub use cover::{CoverReport, CoverState};
pub use firmware::{FirmwareSpec, UpdateOutcome};
pub use mqtt_link::MqttSpec;
pub use sensors::AddonSensor;
pub use state::InputType;

/// What to emulate.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// A model id of the library (e.g. `Shelly2PMG3`, `ShellyEM`, `ShellyPro3EM`) or `Tasmota`.
    pub model: String,
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Device id as reported; default `<model>-<12 hex of a fake MAC>` (Tasmota `tasmota-XXXXXX`). The MAC is
    /// derived from the id unless `mac` is given.
    pub id: Option<String>,
    /// The device's MAC in any common spelling (`A8:03:2A:B1:23:45`, `a8032ab12345`, ...); default: derived
    /// from the id, or a stable fake one. Reported as real devices do: Shelly `/shelly` and status `mac`
    /// `A8032AB12345`, Tasmota `StatusNET.Mac` `A8:03:2A:B1:23:45`.
    pub mac: Option<String>,
    /// Tasmota only (Shelly counts come from the model library); default 1.
    pub outputs: Option<usize>,
    /// Tasmota only; default = outputs. Meter i measures output i while i < outputs, otherwise it is separate.
    pub meters: Option<usize>,
    /// Add-on temperature probe names (RPC `temperature:100`…, Gen1 `ext_temperature` `"0"`…, Tasmota
    /// `DS18B20-1`… with `Id` = the name).
    pub probes: Vec<String>,
    /// Further add-on sensors, after the probes: a `Temperature` one is another DS18B20; a `Humidity` one is a
    /// DHT22 (RPC `temperature:N` and `humidity:N` with one id, Gen1 `ext_temperature` and `ext_humidity`,
    /// Tasmota an object named after the sensor type: `AM2301` unless the name is `SI7021` or `BME280`); a
    /// `Voltage` one the add-on's voltmeter (RPC `voltmeter:100`; Gen2+ only).
    pub sensors: Vec<AddonSensor>,
    /// The profile to start in (e.g. `cover` for a 2PM, `roller` for a Shelly 2.5, `monophase` for a Pro 3EM);
    /// default: the model's default profile. Changeable at runtime with [`Emulator::set_profile`].
    pub profile: Option<String>,
    /// Tasmota only: shutters, each driven by two consecutive relays (shutter 1: relays 1 and 2, which switch
    /// while it moves); outputs then default to twice the shutters. Switching those relays with `Power` does
    /// not move the shutter.
    pub shutters: usize,
    /// How long a cover, roller or shutter takes from fully closed to fully open (default 20 s), on the
    /// emulator clock.
    pub cover_travel: Duration,
    /// Overrides what `/shelly` reports as the model (to test model-mismatch warnings). Shelly models only.
    pub reported_model: Option<String>,
    /// Enables authentication like a real device with this password (`None`: no auth). Shelly Gen1: HTTP
    /// Basic on everything but `/shelly`; Gen2+: HTTP Digest on `/rpc` except `Shelly.GetDeviceInfo`; Tasmota:
    /// `user=` and `password=` parameters on `/cm`. Changeable at runtime with [`Emulator::set_password`].
    pub password: Option<String>,
    /// Shelly Gen1 and Tasmota: the user name (default `admin`). Gen2+ devices always use `admin` (any other
    /// name is an error).
    pub username: Option<String>,
    /// Shelly Gen2+: firmware 2.x (default) or pre-2.0 nonce rules.
    pub auth_mode: AuthMode,
    /// Shelly Gen2+: how long a nonce lives (and holds one of 32 slots under [`AuthMode::Fw2`]); default 1 h.
    pub nonce_lifetime: Duration,
    /// Shelly Gen2+: challenge with (and accept only) `algorithm=MD5` instead of `SHA-256`.
    pub digest_md5: bool,
    /// Tasmota: answer missing or wrong credentials with HTTP 200 (firmware before 8.2.3) instead of 401; the
    /// body is the same `{"WARNING":"Need user=<username>&password=<password>"}`.
    pub tasmota_old_auth: bool,
    /// Shelly Gen2+: a battery device that sleeps, waking every this long (emulator clock): it refuses HTTP
    /// while asleep, and at each wake-up connects to the outbound WebSocket server its `Ws.SetConfig` named,
    /// pushes `NotifyFullStatus` and sleeps again. It starts asleep; [`Emulator::set_awake`] holds it awake (its
    /// button, for setup) and [`Emulator::wake`] wakes it now. `None`: always awake.
    pub sleep: Option<Duration>,
    /// The firmware it runs, the versions on offer and how an update goes (download, restart); changeable at
    /// runtime with [`Emulator::set_firmware_offer`] and [`Emulator::set_update_outcome`].
    pub firmware: FirmwareSpec,
    /// Serve HTTPS and WSS with a self-signed certificate for `localhost` and `127.0.0.1`
    /// made at start; [`Emulator::certificate_sha256`] gives its fingerprint and [`Emulator::set_certificate`]
    /// switches it.
    pub tls: bool,
    /// Tasmota: the last output is a light that can do this (it reports `Dimmer`, and `CT`, `Color`, `White` as
    /// the capabilities say). `None`: relays only.
    pub tasmota_light: Option<crate::light::LightCaps>,
    /// Shelly Gen2+: report `"enhanced_security": true` in `/shelly` and `Shelly.GetDeviceInfo`, as firmware
    /// 2.0 does with Enhanced Security on (which does not mean it serves HTTPS: see `tls`).
    pub enhanced_security: bool,
    /// Be the MQTT client of this broker as the firmware is (last will, `online` announcements, RPC or
    /// commands on its topics, notifications and telemetry; Shelly Gen2+, Gen1 relays and inputs, Tasmota),
    /// besides serving HTTP. `None`: no MQTT. Not with `sleep`.
    pub mqtt: Option<MqttSpec>,
    /// Shelly Gen1: send CoIoT statuses to the multicast group 224.0.1.187 (port 5683) while no CoIoT peer is
    /// set, as firmware does; off by default, so an emulator sends no multicast unasked (a peer set with
    /// `/settings?coiot_peer=` always gets them). An emulator on 127.0.0.1 multicasts on loopback only.
    pub coiot_multicast: bool,
    /// Shelly Gen1: answer CoAP `GET cit/d` and `cit/s` on UDP 5683 at the device's address, as firmware does
    /// (clients such as aioshelly's block device ask that way). 5683 is one port per address: give such a
    /// device an address of its own (`Emulator::start_listening_on`, `sdctl emulate --listen-on 127.0.0.2`).
    pub coap: bool,
}

impl Default for DeviceSpec {
    fn default() -> Self {
        DeviceSpec {
            model: String::new(),
            port: 0,
            id: None,
            mac: None,
            outputs: None,
            meters: None,
            probes: Vec::new(),
            sensors: Vec::new(),
            profile: None,
            shutters: 0,
            cover_travel: DEFAULT_COVER_TRAVEL,
            reported_model: None,
            password: None,
            username: None,
            auth_mode: AuthMode::default(),
            nonce_lifetime: auth::DEFAULT_NONCE_LIFETIME,
            digest_md5: false,
            tasmota_old_auth: false,
            sleep: None,
            firmware: FirmwareSpec::default(),
            tls: false,
            tasmota_light: None,
            enhanced_security: false,
            mqtt: None,
            coiot_multicast: false,
            coap: false,
        }
    }
}

/// How a device tells its WebSocket clients and its MQTT broker of changes and events.
const NOTIFY: device::Notify = device::Notify {
    state: |dev, s, changed| {
        dev.ws.on_state(dev, s, changed);
        mqtt_client::on_state(dev, s, changed);
        coiot::on_state(dev, s);
    },
    event: |dev, event, cid| {
        dev.ws.on_event(dev, event, cid);
        mqtt_client::on_event(dev, event, cid);
    },
    sys: |dev, event, fields| {
        let params = notify::sys_event(dev, event, fields);
        dev.ws.on_sys(dev, &params);
        mqtt_client::on_sys(dev, &params);
    },
};

/// Default [`DeviceSpec::cover_travel`] (private: cbindgen would put a public const into the C header).
const DEFAULT_COVER_TRAVEL: Duration = Duration::from_secs(20);

impl DeviceSpec {
    /// A spec for `model` on a free port with every other field at its default.
    pub fn new(model: &str) -> Self {
        DeviceSpec {
            model: model.to_string(),
            ..DeviceSpec::default()
        }
    }
}

/// A network fault of one device. Faulted requests are still counted. `Http500`, `MalformedJson` and
/// `Blackhole` do not act on the request (no switching); `TruncatedBody` does and then cuts the answer.
/// WebSocket RPC requests get the same latency and, where a frame can show it, the same fault: no answer
/// (`Blackhole`), the frame `{"broken":` (`MalformedJson`), half the response frame and the connection closed
/// (`TruncatedBody`); `Refuse` also drops established connections, `Flapping` refuses new ones while it
/// refuses; `Http500` applies to HTTP only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    /// Serve normally.
    #[default]
    None,
    /// Accept and read the request, then hold the connection open without answering (released when the
    /// fault changes or the emulator stops).
    Blackhole,
    /// Stop listening: connections are refused until the fault changes; then the same port listens again.
    Refuse,
    /// Answer `500 Internal Server Error` with a short text body.
    Http500,
    /// Answer 200 with the body `{"broken":`.
    MalformedJson,
    /// Answer 200 with a `Content-Length` larger than the bytes sent, then close.
    TruncatedBody,
    /// Alternately refuse and serve, each for the period, starting with refusing.
    Flapping(Duration),
}

/// A button press on an input of type [`InputType::Button`] (see [`Emulator::press_button`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Press {
    /// `input.button_push`.
    Single,
    /// `input.button_doublepush`.
    Double,
    /// `input.button_triplepush`.
    Triple,
    /// `input.button_longpush`.
    Long,
}

impl Press {
    /// The RPC event it fires.
    pub fn event(self) -> &'static str {
        match self {
            Press::Single => "input.button_push",
            Press::Double => "input.button_doublepush",
            Press::Triple => "input.button_triplepush",
            Press::Long => "input.button_longpush",
        }
    }
}

/// All values of one meter at once (see [`Emulator::set_meter`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MeterReading {
    /// Active power in W while the load flows; negative = export.
    pub power: f64,
    /// Voltage in V.
    pub voltage: f64,
    /// Current in A while the load flows.
    pub current: f64,
    /// Power factor (0–1) while the load flows.
    pub pf: f64,
    /// Lifetime energy drawn, Wh.
    pub energy_wh: f64,
    /// Lifetime energy returned (exported), Wh.
    pub returned_wh: f64,
}

/// Running emulated devices plus the admin endpoint. Stops (and frees every port) on [`Emulator::stop`] or
/// drop.
///
/// Methods taking `device` (an index into the specs given to [`Emulator::start`]) or a component index panic
/// when the index does not exist, like slice indexing.
pub struct Emulator {
    devices: Arc<Vec<Arc<Device>>>,
    servers: Vec<Server>,
    admin: Option<Server>,
    announcer: Arc<announce::Announcer>,
    /// Wakes sleeping devices (only when there are some).
    sleeper: Option<sleeper::Sleeper>,
    /// Sends Tasmota telemetry over MQTT (only when a Tasmota device has MQTT).
    telemetry: Option<mqtt_tasmota::Telemetry>,
    /// Gen1 devices' periodic CoIoT statuses (only when there are some).
    coiot: Option<coiot::Periodic>,
    /// Gen1 devices answering CoAP requests ([`DeviceSpec::coap`]).
    coap: Vec<coap_server::CoapServer>,
}

impl Emulator {
    /// Starts every device and the admin endpoint (on a free port). An unknown model, an option that does not
    /// apply to the model, or a port that cannot be bound is an error naming it; nothing keeps running then.
    pub fn start(specs: Vec<DeviceSpec>, models: &ModelLibrary) -> crate::Result<Emulator> {
        Self::start_with_admin_port(specs, models, 0)
    }

    /// Like [`Emulator::start`] on `clock` (for tests: [`EmuClock::manual`], moved with `advance`).
    pub fn start_with_clock(
        specs: Vec<DeviceSpec>,
        models: &ModelLibrary,
        clock: EmuClock,
    ) -> crate::Result<Emulator> {
        Self::start_full(specs, models, 0, clock)
    }

    /// Like [`Emulator::start`] with the admin endpoint on `admin_port` (0 = a free port).
    pub fn start_with_admin_port(
        specs: Vec<DeviceSpec>,
        models: &ModelLibrary,
        admin_port: u16,
    ) -> crate::Result<Emulator> {
        Self::start_full(specs, models, admin_port, EmuClock::real())
    }

    /// Like [`Emulator::start_with_admin_port`], with the devices and the admin endpoint listening on
    /// `address`: `127.0.0.1` (what the other constructors use) or `0.0.0.0` (every address of the host, for
    /// discovery inside a network namespace; on a real network, other hosts can then reach the devices).
    pub fn start_listening_on(
        specs: Vec<DeviceSpec>,
        models: &ModelLibrary,
        admin_port: u16,
        address: Ipv4Addr,
    ) -> crate::Result<Emulator> {
        if !(address.is_loopback() || address.is_unspecified()) {
            return Err(crate::Error::InvalidArgument(format!(
                "emulator: cannot listen on {address}; use a loopback address (127.0.0.1, 127.0.0.2, ...) or 0.0.0.0"
            )));
        }
        Self::start_on(specs, models, admin_port, EmuClock::real(), address)
    }

    fn start_full(
        specs: Vec<DeviceSpec>,
        models: &ModelLibrary,
        admin_port: u16,
        clock: EmuClock,
    ) -> crate::Result<Emulator> {
        Self::start_on(specs, models, admin_port, clock, Ipv4Addr::LOCALHOST)
    }

    fn start_on(
        specs: Vec<DeviceSpec>,
        models: &ModelLibrary,
        admin_port: u16,
        clock: EmuClock,
        address: Ipv4Addr,
    ) -> crate::Result<Emulator> {
        let resolved = specs
            .iter()
            .enumerate()
            .map(|(i, s)| Identity::from_spec(i, s, models))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| crate::Error::InvalidArgument(format!("emulator {m}")))?;
        let io = |context: String| move |source| crate::Error::Io { context, source };
        let bind = |port: u16, what: &str| {
            TcpListener::bind((address, port))
                .and_then(|l| Ok((l.local_addr()?.port(), l)))
                .map_err(|e| {
                    let fix = bind_fix(port, e.kind());
                    io(format!(
                        "emulator {what}: listening on {address}:{port}{fix}"
                    ))(e)
                })
        };
        let mut listeners = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            listeners.push(bind(s.port, &format!("device {i} ({})", s.model))?);
        }
        let admin_listener = bind(admin_port, "admin endpoint")?;

        let devices: Vec<Arc<Device>> = resolved
            .into_iter()
            .zip(&listeners)
            .zip(&specs)
            .enumerate()
            .map(|(i, (((ident, layout), (port, _)), spec))| {
                // The device knows its own `Arc`: an update's restart runs on a thread of its own.
                Arc::new_cyclic(|me| {
                    let dev = Device::new(i, ident, layout, spec, clock.clone(), NOTIFY)
                        .with_self(me.clone());
                    dev.net.set_local((address, *port).into());
                    dev
                })
            })
            .collect();
        let devices = Arc::new(devices);
        let announced = if address.is_unspecified() {
            Ipv4Addr::LOCALHOST
        } else {
            address
        };
        let announcer = Arc::new(announce::Announcer::new(
            Arc::clone(&devices),
            announced.into(),
        ));
        let mut emu = Emulator {
            devices: Arc::clone(&devices),
            servers: Vec::with_capacity(listeners.len()),
            admin: None,
            announcer: Arc::clone(&announcer),
            sleeper: None,
            telemetry: None,
            coiot: None,
            coap: Vec::new(),
        };
        // On an error below, dropping `emu` stops what already runs.
        for (dev, (port, listener)) in devices.iter().zip(listeners) {
            let service: Arc<dyn Service> = Arc::clone(dev) as Arc<dyn Service>;
            let server = Server::spawn(
                format!("sd-emu-{port}"),
                listener,
                service,
                Arc::clone(&dev.net),
            )
            .map_err(io(format!("emulator: starting the thread for port {port}")))?;
            emu.servers.push(server);
        }
        let admin: Arc<dyn Service> = Arc::new(admin::Admin::new(Arc::clone(&devices), announcer));
        let (_, listener) = admin_listener;
        emu.admin = Some(
            Server::spawn(
                "sd-emu-admin".into(),
                listener,
                admin,
                Arc::new(NetControl::new()),
            )
            .map_err(io("emulator: starting the admin thread".into()))?,
        );
        emu.sleeper = sleeper::Sleeper::start(Arc::clone(&devices))
            .map_err(io("emulator: starting the sleeper thread".into()))?;
        for dev in devices.iter() {
            mqtt_client::start(dev).map_err(io(format!(
                "emulator: starting the MQTT client of device {}",
                dev.index
            )))?;
        }
        emu.telemetry = mqtt_tasmota::Telemetry::start(&devices)
            .map_err(io("emulator: starting the MQTT telemetry thread".into()))?;
        let gen1 = devices
            .iter()
            .filter(|d| d.ident.family == family::Family::Gen1);
        emu.coiot = coiot::Periodic::start(gen1.cloned().collect())
            .map_err(io("emulator: starting the CoIoT thread".into()))?;
        for (dev, spec) in devices.iter().zip(&specs) {
            if spec.coap {
                if dev.ident.family != family::Family::Gen1 {
                    return Err(crate::Error::InvalidArgument(format!(
                        "emulator device {} ({}): coap is for Shelly Gen1 devices (Gen2+ answer RPC)",
                        dev.index, spec.model
                    )));
                }
                let server = coap_server::CoapServer::start(Arc::clone(dev))
                    .map_err(crate::Error::InvalidArgument)?;
                emu.coap.push(server);
            }
        }
        Ok(emu)
    }

    /// Starts announcing every device over mDNS on `interfaces`, as real devices do (see the records with
    /// [`Emulator::announcement`]). Off by default: it sends multicast. A device withdrawn with
    /// [`Emulator::set_announced`] stays withdrawn. An error says why mDNS could not start.
    pub fn start_announcing(&self, interfaces: &crate::discovery::Interfaces) -> crate::Result<()> {
        self.announcer
            .start(interfaces)
            .map_err(|e| crate::Error::Io {
                context: format!(
                    "emulator: {e}; mDNS needs UDP port 5353 and an interface with multicast"
                ),
                source: std::io::Error::other(e),
            })
    }

    /// Whether [`Emulator::start_announcing`] runs.
    pub fn announcing(&self) -> bool {
        self.announcer.running()
    }

    /// Withdraws (`false`: mDNS goodbyes, like a device leaving) or restores (`true`) one device's
    /// announcement. Before announcing starts, it decides whether the device will be announced.
    pub fn set_announced(&self, device: usize, on: bool) -> crate::Result<()> {
        self.dev(device);
        self.announcer
            .set(device, on)
            .map_err(|e| crate::Error::InvalidArgument(format!("emulator device {device}: {e}")))
    }

    /// Whether a device is (or will be) announced.
    pub fn announced(&self, device: usize) -> bool {
        self.dev(device);
        self.announcer.announced(device)
    }

    /// What a device announces, one record per service (Gen2+: `_shelly._tcp` and `_http._tcp`), as a browser
    /// resolves it: instance, host, address, port, TXT. The address is the one the devices listen on
    /// (127.0.0.1 when listening on 0.0.0.0); on the wire each interface announces its own. Works without
    /// announcing, so tests can feed the records to [`crate::discovery::confirm_all`] without multicast.
    pub fn announcement(&self, device: usize) -> Vec<crate::discovery::Announcement> {
        self.dev(device);
        self.announcer.records(device)
    }

    pub(crate) fn dev(&self, device: usize) -> &Device {
        match self.devices.get(device) {
            Some(d) => d,
            None => panic!(
                "the emulator has no device {device}; it has {}",
                self.devices.len()
            ),
        }
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// True when no devices run (the admin endpoint still does).
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The port a device listens on.
    pub fn port(&self, device: usize) -> u16 {
        self.dev(device).port()
    }

    /// Where a device listens now (`0.0.0.0` when on every address of the host).
    pub fn address(&self, device: usize) -> std::net::SocketAddr {
        self.dev(device).net.local()
    }

    /// Moves a device to another address, as a DHCP lease change does: it listens at `ip` (`None`: the same
    /// address as now; on Linux any 127.x.y.z works without setup) and `port` (0: a free one) from now on, the
    /// old address refuses connections, open connections (WebSocket included) end, and its state, MAC and
    /// password stay. An announced device announces its new address. Returns where it listens now; an address
    /// this host does not have (or a port in use) is an error naming it, and the device stays where it was.
    pub fn move_device(
        &self,
        device: usize,
        ip: Option<std::net::IpAddr>,
        port: u16,
    ) -> crate::Result<std::net::SocketAddr> {
        let new = self
            .dev(device)
            .relocate(ip, port)
            .map_err(crate::Error::InvalidArgument)?;
        self.announcer
            .refresh(device)
            .map_err(crate::Error::InvalidArgument)?;
        Ok(new)
    }

    /// The id a device reports (`/shelly` `id`, Gen1 hostname, Tasmota hostname).
    pub fn device_id(&self, device: usize) -> &str {
        &self.dev(device).ident.id
    }

    /// The admin endpoint's port.
    pub fn admin_port(&self) -> u16 {
        self.admin.as_ref().map_or(0, Server::port)
    }

    /// Sets a device's fault. Returns once a `Refuse` port is closed, or a serving port is listening again
    /// (waiting at most a few seconds while a request is still being answered).
    pub fn set_fault(&self, device: usize, fault: Fault) {
        self.dev(device).set_fault(fault);
    }

    /// A delay added before every answer (also faulted ones). The request acts at once; only the answer waits,
    /// and the port answers nothing else meanwhile (requests are handled one after another).
    pub fn set_latency(&self, device: usize, latency: Duration) {
        self.dev(device).set_latency(latency);
    }

    /// Limits the answer faults (`Blackhole`, `Http500`, `MalformedJson`, `TruncatedBody`) and the latency to
    /// requests whose [`Emulator::counts`] key, followed by `?` and the raw query when there is one, starts
    /// with `scope` (e.g. `rpc Switch.Set`, `GET /relay/0?turn=`, `cm Power1 `); `None` applies them to every
    /// request again. Connection faults (`Refuse`, `Flapping`)
    /// always apply to the whole port.
    pub fn set_fault_scope(&self, device: usize, scope: Option<&str>) {
        self.dev(device).set_fault_scope(scope.map(str::to_string));
    }

    /// Requests per endpoint since start or the last reset: Gen1 `GET /status` (path without query), RPC
    /// `rpc <Method>` (frames and `/rpc/<Method>`) and `GET /shelly`, Tasmota `cm <command>`. Refused
    /// connections are not counted, faulted and blackholed requests and those refused by auth are.
    pub fn counts(&self, device: usize) -> BTreeMap<String, u64> {
        self.dev(device).counts()
    }

    /// Sum of [`Emulator::counts`].
    pub fn total_requests(&self, device: usize) -> u64 {
        self.counts(device).values().sum()
    }

    /// Clears a device's request counts.
    pub fn reset_counts(&self, device: usize) {
        self.dev(device).net.reset_counts();
    }

    /// Sets an input's state (does not switch outputs or fire webhooks).
    pub fn set_input(&self, device: usize, input: usize, on: bool) {
        or_panic(self.dev(device).set_input(input, on));
    }

    /// Switches an output as a physical switch would.
    pub fn set_output(&self, device: usize, output: usize, on: bool) {
        or_panic(self.dev(device).set_output(output, on));
    }

    /// An output's state.
    pub fn output(&self, device: usize, output: usize) -> bool {
        or_panic(self.dev(device).output(output))
    }

    /// The power a meter draws while its output is on (a separate meter: always); negative = export. Current
    /// follows as P / (V · pf); energy (or returned energy) accumulates over wall time.
    pub fn set_load(&self, device: usize, meter: usize, watts: f64) {
        or_panic(self.dev(device).set_load(meter, watts));
    }

    /// Sets every value of a meter at once, including its energy counters.
    pub fn set_meter(&self, device: usize, meter: usize, reading: MeterReading) {
        or_panic(self.dev(device).set_meter(meter, &reading));
    }

    /// An energy meter (Pro 3EM, 3EM-63, EM Gen3, Pro EM, EM Mini, Gen1 EM/3EM) has no records for `[from, to)`
    /// (Unix seconds): as if it was off then. Its records are otherwise kept on the emulator clock, one per
    /// period, from the power [`set_load`](Self::set_load) and [`set_meter`](Self::set_meter) set.
    pub fn set_history_gap(&self, device: usize, from: i64, to: i64) {
        or_panic(self.dev(device).set_history_gap(from, to));
    }

    /// Gives an energy meter records for the `span` before now where it has none, at each meter's present load
    /// (as if it had run so): a past to read without moving the clock.
    pub fn backfill_history(&self, device: usize, span: Duration) {
        or_panic(self.dev(device).backfill_history(span.as_secs() as i64));
    }

    /// How long an energy meter keeps its records (60 days unless set); older ones are dropped.
    pub fn set_history_retention(&self, device: usize, keep: Duration) {
        or_panic(
            self.dev(device)
                .set_history_retention(keep.as_secs() as i64),
        );
    }

    /// A probe's temperature; `None` = sensor missing.
    pub fn set_probe(&self, device: usize, probe: usize, celsius: Option<f64>) {
        or_panic(self.dev(device).set_probe(probe, celsius));
    }

    /// The device's internal (switch/chip) temperature.
    pub fn set_temperature(&self, device: usize, celsius: f64) {
        or_panic(self.dev(device).set_temperature(celsius));
    }

    /// Tasmota: the texts of `POWER` values (default `ON`/`OFF`), e.g. `EIN`/`AUS` like localised builds.
    pub fn set_localised_power_text(&self, device: usize, on: &str, off: &str) {
        self.dev(device).set_power_text(on, off);
    }

    /// Installed webhooks as `Webhook.List` returns them (Gen1: action URLs in the same shape, `name` = the
    /// action, `event` = the matching RPC event).
    pub fn webhooks(&self, device: usize) -> Vec<serde_json::Value> {
        self.dev(device).webhooks()
    }

    /// GETs every enabled installed URL for `event` on component `component_id` (Gen1: the mapped action URL),
    /// one after another; URL tokens like `${...}` are sent as written. Returns how many calls were delivered.
    pub fn fire_event(&self, device: usize, event: &str, component_id: usize) -> usize {
        self.dev(device).fire_event(event, component_id)
    }

    /// The SHA-256 fingerprint (`AB:CD:…`) of the certificate device `device` serves; `None` when it serves
    /// plain HTTP ([`DeviceSpec::tls`]).
    pub fn certificate_sha256(&self, device: usize) -> Option<String> {
        self.dev(device).tls.as_ref().map(|t| t.fingerprint())
    }

    /// Makes device `device` serve another certificate from its next connection on (a new self-signed one,
    /// an expired one, one for other names, one signed by a CA), and ends its WebSocket connections, as the
    /// reboot that new TLS material needs does; returns its fingerprint. Only for a device
    /// started with [`DeviceSpec::tls`].
    pub fn set_certificate(&self, device: usize, spec: &CertSpec) -> crate::Result<String> {
        let tls = self.dev(device).tls.as_ref().ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "emulator: device {device} serves plain HTTP; start it with tls to give it a certificate"
            ))
        })?;
        let fp = tls
            .set(spec)
            .map_err(|e| crate::Error::InvalidArgument(format!("emulator: certificate: {e}")))?;
        // New TLS material takes a reboot on the device: its connections end.
        self.dev(device).ws.drop_all();
        Ok(fp)
    }

    /// Sets (or with `None` removes) a device's password at runtime; see [`DeviceSpec::password`]. Issued
    /// Gen2+ nonces and a running 429 throttle window are forgotten.
    pub fn set_password(&self, device: usize, password: Option<&str>) {
        self.dev(device).auth.set_password(password);
    }

    /// Makes device `device` report another MAC from now on (any common spelling), as if another device had
    /// taken its address: its WebSocket connections end (they were the other device's); everything else stays.
    ///
    /// # Panics
    ///
    /// When `mac` is not a MAC address (a test's mistake).
    pub fn set_mac(&self, device: usize, mac: &str) {
        let mac = crate::mac::Mac::parse(mac).unwrap_or_else(|e| panic!("set_mac: {e}"));
        self.dev(device).set_mac(mac);
    }

    /// The MAC device `device` reports now, as `AA:BB:CC:DD:EE:FF`.
    pub fn mac(&self, device: usize) -> String {
        self.dev(device).mac_colon()
    }

    /// A device's authentication counters since start.
    pub fn auth_stats(&self, device: usize) -> AuthStats {
        self.dev(device).auth.stats()
    }

    /// Stops every port and joins the threads; the ports are free afterwards.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Open WebSocket RPC connections of a device (Gen2+ serves `ws://127.0.0.1:<port>/rpc`).
    pub fn ws_connections(&self, device: usize) -> usize {
        self.dev(device).ws.connections()
    }

    /// WebSocket RPC connections of a device that receive notifications (their first request was let through
    /// by auth and named a `src`).
    pub fn ws_subscribed(&self, device: usize) -> usize {
        self.dev(device).ws.subscribed()
    }

    /// RPC requests a device received over WebSocket connections so far (counted in [`Emulator::counts`] too,
    /// under the same `rpc <Method>` keys as HTTP calls).
    pub fn ws_requests(&self, device: usize) -> u64 {
        self.dev(device).ws.requests()
    }

    /// WebSocket connections the device accepted (upgraded) so far.
    pub fn ws_upgrades(&self, device: usize) -> u64 {
        self.dev(device).ws.upgrades()
    }

    /// Makes the device's subscribed WebSocket connections send `NotifyStatus` frames of about `frame_bytes`
    /// (its power changes in each) as fast as they can; `None` stops it. Answers still go out between them.
    pub fn flood_ws(&self, device: usize, frame_bytes: Option<usize>) {
        self.dev(device).ws.set_flood(frame_bytes);
    }

    /// Flood frames ([`Emulator::flood_ws`]) the device wrote so far.
    pub fn ws_flooded(&self, device: usize) -> u64 {
        self.dev(device).ws.flooded()
    }

    /// Makes the device's WebSocket connections close right after answering their subscribing request.
    pub fn ws_hang_up(&self, device: usize, on: bool) {
        self.dev(device).ws.set_hang_up(on);
    }

    /// Cuts every WebSocket connection of a device without a close frame (a reboot, a lost network).
    pub fn drop_ws(&self, device: usize) {
        self.dev(device).ws.drop_all();
    }

    /// Holds the device's WebSocket upgrade requests unanswered from now on, the connections open (`true`: a
    /// device that stalls the handshake), or ends the held ones (`false`).
    pub fn hold_ws_upgrades(&self, device: usize, on: bool) {
        self.dev(device).ws.set_hold_upgrades(on);
    }

    /// Upgrade requests held now whose client still waits, and those its client gave up so far.
    pub fn ws_held_upgrades(&self, device: usize) -> (usize, usize) {
        self.dev(device).ws.held_upgrades()
    }

    /// Stalls (`true`) or releases a device's WebSocket connections: while stalled they read no requests and
    /// send no answers or notifications (the TCP connection stays open).
    pub fn stall_ws(&self, device: usize, stalled: bool) {
        self.dev(device).ws.set_stalled(stalled);
    }

    /// Holds a sleeping device awake (`true`: it answers HTTP, as when its button is pressed for setup; it
    /// still reports at its wake-ups) or lets it sleep (`false`: connections refused). Devices that do not
    /// sleep ignore it.
    pub fn set_awake(&self, device: usize, awake: bool) {
        sleeper::set_awake(self.dev(device), awake);
    }

    /// Wakes a sleeping device now, as its period or a reading crossing its threshold would: it reports to its
    /// outbound WebSocket server and sleeps again. Returns whether the report went out.
    pub fn wake(&self, device: usize) -> bool {
        sleeper::wake(self.dev(device))
    }

    /// The outbound WebSocket server a device connects to (its `Ws.SetConfig`), when enabled.
    pub fn ws_server(&self, device: usize) -> Option<String> {
        self.dev(device).ws_out.server()
    }

    /// Reports a device sent to its outbound WebSocket server so far.
    pub fn ws_reports(&self, device: usize) -> u64 {
        self.dev(device).ws_out.reports()
    }

    /// Whether a device's MQTT client is connected to its broker and subscribed to its topics (the broker
    /// confirmed them: a request published from now on reaches the device); false without MQTT.
    pub fn mqtt_connected(&self, device: usize) -> bool {
        self.dev(device).mqtt.subscribed()
    }

    /// Connections a device's broker accepted so far (a reconnect counts again).
    pub fn mqtt_connects(&self, device: usize) -> u64 {
        self.dev(device).mqtt.connects()
    }

    /// A device's MQTT topic: Shelly Gen2+ its `topic_prefix` (default the device id), Tasmota its `%topic%`
    /// (default `tasmota_XXXXXX`); `None` without MQTT.
    pub fn mqtt_topic(&self, device: usize) -> Option<&str> {
        let m = &self.dev(device).mqtt;
        m.enabled().then_some(m.prefix.as_str())
    }

    /// A device's MQTT client id (Shelly: the device id; Tasmota: `DVES_XXXXXX`).
    pub fn mqtt_client_id(&self, device: usize) -> &str {
        &self.dev(device).mqtt.client_id
    }

    /// Cuts a device's broker connection without DISCONNECT, as a lost network or a power cut does: the broker
    /// publishes its last will; the device connects again after its back-off (1 s at first) and announces
    /// itself again.
    pub fn mqtt_drop(&self, device: usize) {
        self.dev(device).mqtt.drop_connection();
    }

    /// Pauses (`true`: the connection is cut as by [`Emulator::mqtt_drop`] and the device stays away) or
    /// resumes (`false`: it connects again at once) a device's MQTT client.
    pub fn mqtt_pause(&self, device: usize, paused: bool) {
        self.dev(device).mqtt.set_paused(paused);
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.sleeper.take() {
            s.stop();
        }
        if let Some(t) = self.telemetry.take() {
            t.stop();
        }
        for d in self.devices.iter() {
            d.mqtt.begin_stop();
        }
        for d in self.devices.iter() {
            d.mqtt.join();
        }
        if let Some(c) = self.coiot.take() {
            c.stop();
        }
        for c in self.coap.drain(..) {
            c.stop();
        }
        self.announcer.stop();
        for s in self.servers.iter().chain(&self.admin) {
            s.begin_stop();
        }
        for d in self.devices.iter() {
            d.ws.begin_stop();
        }
        // Every device's connections end at once; the poller lets go of them within a turn or two.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        for d in self.devices.iter() {
            d.ws.await_stopped(deadline);
        }
        for s in self.servers.iter_mut().chain(&mut self.admin) {
            s.join();
        }
        self.servers.clear();
        self.admin = None;
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How to fix a port the emulator could not listen on (some clients talk to Gen1 devices on port 80 only).
fn bind_fix(port: u16, kind: std::io::ErrorKind) -> &'static str {
    match kind {
        std::io::ErrorKind::PermissionDenied if port < 1024 => {
            " (ports below 1024 need root or CAP_NET_BIND_SERVICE: run as root, or \
             `setcap cap_net_bind_service=+ep` on the program, or choose a port above 1023)"
        }
        std::io::ErrorKind::AddrInUse => {
            " (another program listens there: stop it or choose another port)"
        }
        _ => "",
    }
}

pub(crate) fn or_panic<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}
