//! Device drivers: one per way of reaching a device, behind one small trait. A driver is owned by the device's
//! worker thread, so it never needs locks.

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod canned;
pub(crate) mod digest;
pub(crate) mod gen1;
pub(crate) mod gen1_energy;
mod gen1_firmware;
pub(crate) mod http;
mod icmp;
mod json;
mod key_shares;
pub(crate) mod profile;
mod resolve;
pub(crate) mod rpc;
mod simfile;
pub(crate) mod simulated;
mod switching;
pub(crate) mod tasmota;
mod tasmota_firmware;
mod tasmota_light;
pub(crate) mod tls;
pub(crate) mod tls_transport;
pub mod ws;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::config::Settings;
use crate::error::{Error, Result};
use crate::firmware::{FirmwareChannel, FirmwareInfo};
use crate::light::{LightCaps, LightChange};
use crate::models::{ModelInfo, ModelRef};
use crate::objects::{ComponentKind, CoverAction, Device, OutputChange};

/// What to do with an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputAction {
    /// Switch on.
    On,
    /// Switch off.
    Off,
    /// Switch to the opposite of the current state.
    Toggle,
}

impl OutputAction {
    /// The action that sets `desired`.
    pub fn set(desired: bool) -> Self {
        if desired {
            OutputAction::On
        } else {
            OutputAction::Off
        }
    }

    /// The state after applying this action to `current`.
    pub fn apply(self, current: bool) -> bool {
        match self {
            OutputAction::On => true,
            OutputAction::Off => false,
            OutputAction::Toggle => !current,
        }
    }
}

/// What a look at a device during a firmware update sees.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FirmwareState {
    /// The version it runs (shortened, see `firmware::short_version`), if it said.
    pub version: Option<String>,
    /// It says it is updating (Gen1 `update.status`); the other families do not say over HTTP.
    pub updating: bool,
    /// Seconds since it started, if it said: a smaller number than at the last look proves a restart.
    pub uptime: Option<u64>,
}

/// How the worker talks to one device. The worker owns the device state and decides `Online` from
/// [`Driver::reach`]; a driver reads and changes the device and reports what it saw.
pub(crate) trait Driver: Send {
    /// Reads the device's current state into `dev` (the first contact included: creating or loading a
    /// simulation file, learning what the device is).
    fn read(&mut self, dev: &mut Device) -> Result<()>;

    /// [`Driver::read`], with its status request already sent (`Controller::refresh_all` over the push
    /// channel): the driver takes its answer when it would have sent that request first, else reads as usual.
    fn read_sent(&mut self, dev: &mut Device, pre: ws::tunnel::PreRead) -> Result<()> {
        drop(pre);
        self.read(dev)
    }

    /// Applies `action` to output `index` (0-based channel) and reports the state before and after, as the
    /// device reports them.
    fn switch(
        &mut self,
        dev: &mut Device,
        index: usize,
        action: OutputAction,
    ) -> Result<OutputChange>;

    /// Makes cover `index` (0-based channel) open, close, stop or go to a position, and stores the cover's state
    /// as the device reports it afterwards.
    fn cover(&mut self, dev: &mut Device, _index: usize, _action: CoverAction) -> Result<()> {
        Err(Error::Unsupported {
            device: dev.label(),
            message: "this device's driver cannot move covers".into(),
        })
    }

    /// Whether the light can take `change` (its capabilities, its ranges), from what the driver knows without
    /// I/O; the worker asks before anything else, so a refusal sends nothing (not even an identity check).
    fn check_light(&self, dev: &Device, _index: usize, _change: &LightChange) -> Result<()> {
        light_caps(dev, None, &dev.model).map(|_| ())
    }

    /// Sets light output `index` (0-based channel) as `change` asks (already checked for ranges that need no
    /// device) and stores the light as the device reports it afterwards. Capabilities the light lacks are
    /// refused before anything is sent.
    fn light(&mut self, dev: &mut Device, _index: usize, _change: &LightChange) -> Result<()> {
        Err(Error::Unsupported {
            device: dev.label(),
            message: "this device's driver cannot set lights".into(),
        })
    }

    /// Webhook events implied these component states (`(kind, channel, on)`): take them, and read the device
    /// when `read` is set. Simulated devices ignore them: their file is the truth.
    fn hook(
        &mut self,
        dev: &mut Device,
        states: &[(ComponentKind, usize, bool)],
        read: bool,
    ) -> Result<()> {
        for &(kind, index, on) in states {
            apply_hook_state(dev, kind, index, on);
        }
        if read {
            self.read_for_event(dev)
        } else {
            Ok(())
        }
    }

    /// The read an event (a webhook, a push notification) asks for: a full read, unless the driver holds what
    /// the device just told it (the RPC driver's push mirror).
    fn read_for_event(&mut self, dev: &mut Device) -> Result<()> {
        self.read(dev)
    }

    /// Installs or reconciles the webhooks this device should call (nothing by default). The worker calls it
    /// after a successful read, once per online period; a failure is logged and retried next time.
    fn sync_hooks(&mut self, _dev: &mut Device) -> Result<()> {
        Ok(())
    }

    /// The device was unreachable: whatever it said about itself (firmware, add-ons, hooks) may have changed.
    fn forget(&mut self) {}

    /// Whether a live connection proves who is at the address (the RPC driver's push socket, whose
    /// subscription showed the MAC): a command then needs no read to confirm the device first.
    fn pinned(&self) -> bool {
        false
    }

    /// When the last answer the driver waited for was read off a push connection (the RPC driver's socket or
    /// broker): notifications read before it are older than that answer. `None` elsewhere.
    fn answered_at(&self) -> Option<std::time::Instant> {
        None
    }

    /// The device is being followed to another address (this driver is built for it): a connection to the
    /// old address shared with the push channel must not serve it any longer.
    fn moved(&mut self) {}

    /// One attempt per request (`true`, the quick first contact at open) or the retry policy.
    fn set_quick(&mut self, _quick: bool) {}

    /// Whether an operation since the last call took the worker's stack deeper than a read does (the generic
    /// RPC call: commands, the webhook list): its pages below are then worth giving back.
    fn went_deep(&mut self) -> bool {
        false
    }

    /// The components the device may take from the profile it reports at its first contact at open (the
    /// worker gives them for that contact only, then `None`: the shape is fixed for the controller's life).
    fn follow(&mut self, _follow: Option<Arc<crate::plan::Follow>>) {}

    /// Whether the device answered during the operations since the last call (`None`: nothing learned, for
    /// example a simulated device, whose `Online` is in its file).
    fn reach(&mut self) -> Option<bool> {
        None
    }

    /// The firmware the device runs and the newer versions on offer (`Checked` false where the device cannot
    /// tell). Stores the running version in `dev.firmware`.
    fn check_firmware(&mut self, dev: &mut Device) -> Result<FirmwareInfo> {
        Err(no_firmware(dev))
    }

    /// Asks the device to install the latest version on `channel` (one attempt: never sent twice). A device
    /// that answers with a refusal gives [`Error::Firmware`] (`Refused`). `Ok(Some(v))`: it named the version
    /// it installs.
    fn start_update(
        &mut self,
        dev: &mut Device,
        _channel: FirmwareChannel,
    ) -> Result<Option<String>> {
        Err(no_firmware(dev))
    }

    /// One look at the device while it updates: the version it runs, whether it says it is updating.
    fn firmware_state(&mut self, dev: &mut Device) -> Result<FirmwareState> {
        Err(no_firmware(dev))
    }

    /// Whether meter `index` keeps interval records on the device (asked before [`Driver::energy_history`], so a
    /// meter without any is refused without touching the device or its `LastError`).
    fn keeps_history(&self, _index: usize) -> bool {
        false
    }

    /// The device's own energy records of meter `index` (0-based) over `[from, to)` (Unix seconds), in time
    /// order with gaps (`energy.rs`). A meter that keeps none gives [`Error::NoHistory`].
    fn energy_history(
        &mut self,
        dev: &mut Device,
        index: usize,
        _range: (i64, i64),
    ) -> Result<crate::energy::EnergyHistory> {
        Err(no_history(dev, index))
    }

    /// One light, unauthenticated attempt to see whether an offline device answers at all. It does not change
    /// the device: only a real refresh decides Online (and sees that the device came back).
    fn probe(&mut self, _dev: &Device) -> bool {
        true
    }
}

/// What the outputs of `dev` can do as lights, or why a light change is refused: they are relays.
pub(crate) fn light_caps(dev: &Device, caps: Option<LightCaps>, model: &str) -> Result<LightCaps> {
    caps.ok_or_else(|| Error::Unsupported {
        device: dev.label(),
        message: format!(
            "the outputs of {model} are relays, not lights: brightness and colour cannot be set; use change_output to switch them"
        ),
    })
}

/// Firmware updates on a device whose driver has none (simulated, no address).
fn no_firmware(dev: &Device) -> Error {
    Error::Unsupported {
        device: dev.label(),
        message: "firmware updates need a real device at a known address".into(),
    }
}

/// Energy history from a meter that keeps none: says which meter and what the caller can do instead.
pub(crate) fn no_history(dev: &Device, index: usize) -> Error {
    let meter = dev
        .meters
        .get(index)
        .map(|m| crate::text::quote(&m.name, 60))
        .unwrap_or_else(|| format!("{index}"));
    Error::NoHistory {
        device: dev.label(),
        message: format!(
            "meter {meter} only counts a running total (only Shelly energy meters such as the Pro 3EM, 3EM-63, EM Gen3, Pro EM and Gen1 EM/3EM keep interval records); read its lifetime Energy counter at the times you need and take the differences"
        ),
    }
}

/// The driver of a device configured by its MAC alone: there is no address to talk to yet, so every operation
/// fails with the reason, and the device stays offline.
struct Unaddressed;

impl Unaddressed {
    fn error(dev: &Device) -> Error {
        let mac = dev.mac_address.as_deref().unwrap_or("(none)");
        Error::Device {
            device: dev.label(),
            message: format!(
                "no address is known yet: the configuration gives only its MAC {mac}, no Hostname; it stays offline until discovery finds it on the network (or add Hostname to its block)"
            ),
        }
    }
}

impl Driver for Unaddressed {
    fn read(&mut self, dev: &mut Device) -> Result<()> {
        dev.online = false;
        Err(Self::error(dev))
    }

    fn switch(&mut self, dev: &mut Device, _: usize, _: OutputAction) -> Result<OutputChange> {
        Err(Self::error(dev))
    }

    fn cover(&mut self, dev: &mut Device, _: usize, _: CoverAction) -> Result<()> {
        Err(Self::error(dev))
    }

    fn check_light(&self, _: &Device, _: usize, _: &LightChange) -> Result<()> {
        Ok(())
    }

    fn light(&mut self, dev: &mut Device, _: usize, _: &LightChange) -> Result<()> {
        Err(Self::error(dev))
    }

    fn hook(
        &mut self,
        dev: &mut Device,
        _: &[(ComponentKind, usize, bool)],
        _: bool,
    ) -> Result<()> {
        Err(Self::error(dev))
    }

    fn reach(&mut self) -> Option<bool> {
        Some(false)
    }

    /// Unknown until the device is found: the read says why it cannot be asked.
    fn keeps_history(&self, _: usize) -> bool {
        true
    }

    fn energy_history(
        &mut self,
        dev: &mut Device,
        _: usize,
        _: (i64, i64),
    ) -> Result<crate::energy::EnergyHistory> {
        Err(Self::error(dev))
    }

    /// The read is free (no I/O) and says why: a background check must not replace that with "offline".
    fn probe(&mut self, _dev: &Device) -> bool {
        true
    }
}

/// Sets the state a webhook implies on an input or output (no-op for other kinds or unknown channels).
pub(crate) fn apply_hook_state(dev: &mut Device, kind: ComponentKind, index: usize, on: bool) {
    match kind {
        ComponentKind::Input => {
            if let Some(i) = dev.inputs.get_mut(index) {
                i.state = Some(on);
            }
        }
        ComponentKind::Output => {
            if let Some(o) = dev.outputs.get_mut(index) {
                o.state = Some(on);
            }
        }
        _ => {}
    }
}

/// Why a device refused a request, in the one wording every driver uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuthProblem {
    /// No credentials were configured; `user` says whether a user name can be set (Gen1, Tasmota) or the
    /// user is always `admin` (Gen2+).
    Missing { user: bool },
    /// The configured credentials were refused.
    Refused { user: bool },
    /// A Gen2+ device asked for digest authentication without a usable challenge.
    NoChallenge,
    /// A Gen2+ device answered every fresh nonce with another challenge.
    KeptAsking,
}

/// The authentication error for `what` (the request, as named in messages) on `dev`.
pub(crate) fn auth_error(dev: &Device, what: &str, problem: AuthProblem) -> crate::Error {
    let why = match problem {
        AuthProblem::Missing { user: true } => {
            "the device requires a password; set Username and Password for it"
        }
        AuthProblem::Missing { user: false } => {
            "the device requires a password; set Password for it (the user is always admin)"
        }
        AuthProblem::Refused { user: true } => "the device refused the user name or password",
        AuthProblem::Refused { user: false } => "the device refused the password (wrong password)",
        AuthProblem::NoChallenge => "the device sent no usable digest challenge",
        AuthProblem::KeptAsking => "the device kept asking for new credentials",
    };
    crate::Error::Auth {
        device: dev.label(),
        message: format!("{what}: {why}"),
    }
}

/// How the worker decides whether an offline device is back.
#[derive(Clone, Debug)]
pub(crate) struct Liveness {
    /// `PingAllowed`: try ICMP first.
    pub ping_allowed: bool,
    /// Wait for an echo reply this long.
    pub timeout: Duration,
    /// Set when the controller closes: an echo wait ends early.
    pub closing: Arc<AtomicBool>,
}

impl Liveness {
    /// Whether an offline device is worth a full refresh now. ICMP silence keeps it offline; ICMP that is not
    /// permitted here never does — the driver's HTTP probe decides instead.
    pub(crate) fn worth_refresh(&self, dev: &Device, driver: &mut dyn Driver) -> bool {
        if self.ping_allowed
            && let Some(host) = dev.hostname.clone()
        {
            match icmp::ping(&host, self.timeout, &self.closing) {
                icmp::Echo::Reply => return true,
                icmp::Echo::NoReply => return false,
                icmp::Echo::Unavailable => {}
            }
        }
        driver.probe(dev)
    }
}

/// Records what the device says it is and warns once when that differs from the configured model.
pub(crate) fn identify(
    dev: &mut Device,
    model: &ModelInfo,
    reported: Option<&str>,
    looks_gen1: bool,
) {
    let Some(reported) = reported else {
        return;
    };
    let changed = dev.reported_model.as_deref() != Some(reported);
    dev.reported_model = Some(reported.to_string());
    let wrong_family = looks_gen1 != (model.protocol == crate::models::Protocol::Rest);
    let known = &model.reported_models;
    let mismatch = wrong_family
        || (!known.is_empty() && !known.iter().any(|k| k.eq_ignore_ascii_case(reported)));
    if mismatch && changed {
        log::warn!(
            "device {}: configured as {} ({}, expects {}) but the device reports itself as {} ({}); check Model",
            dev.label(),
            model.model,
            model.protocol,
            if known.is_empty() {
                "any".to_string()
            } else {
                known.join(" or ")
            },
            crate::text::quote(reported, 80),
            if looks_gen1 { "Gen1" } else { "Gen2+" }
        );
    }
}

/// What a device needs to log in.
#[derive(Clone, Debug, Default)]
pub(crate) struct Credentials {
    /// Gen1 and Tasmota user (default `admin`); Gen2+ always use `admin`.
    pub username: Option<String>,
    /// The password, if the device has one.
    pub password: Option<crate::config::Secret>,
}

impl Credentials {
    /// The user name to send (`admin` unless configured).
    pub(crate) fn user(&self) -> &str {
        self.username.as_deref().unwrap_or("admin")
    }
}

/// What a device's driver may use besides HTTP: its push tunnel (Gen2+ `Channel: auto`), its broker port
/// (`Channel: mqtt`), its CoIoT link with the peer to set (Gen1).
#[derive(Default)]
pub(crate) struct Links {
    pub(crate) tunnel: Option<Arc<ws::tunnel::Tunnel>>,
    pub(crate) mqtt: Option<Arc<crate::mqtt::link::Port>>,
    pub(crate) coiot: Option<(Arc<crate::coiot::Link>, Option<String>)>,
}

/// What a driver factory keeps of a planned device to build drivers from later (after a panic, at a new
/// address): the fields [`for_device`] and the hook plan (`webhook::install::plan`) read, and of the components
/// only those asking for webhooks, by their IDs. A whole `Device` (704 bytes inline, its meters, names and the
/// model's name on the heap) cost about 1.2 KB more per device, kept for the controller's life (issue 30).
pub(crate) struct Blueprint {
    id: i64,
    name: String,
    model: String,
    protocol: Option<crate::models::Protocol>,
    hostname: Option<String>,
    port: u16,
    transport: Option<crate::objects::Transport>,
    simulate: bool,
    sleeping: bool,
    profile: Option<String>,
    simulation_file: Option<std::path::PathBuf>,
    /// The components with `Webhooks: true`: kind, ID, channel.
    hooked: Box<[(ComponentKind, i64, usize)]>,
}

impl Blueprint {
    /// What the factory of `dev` keeps.
    pub(crate) fn of(dev: &Device) -> Self {
        let inputs = dev.inputs.iter().filter(|c| c.webhooks);
        let inputs = inputs.map(|c| (ComponentKind::Input, c.id, c.component_index));
        let outputs = dev.outputs.iter().filter(|c| c.webhooks);
        let outputs = outputs.map(|c| (ComponentKind::Output, c.id, c.component_index));
        let covers = dev.covers.iter().filter(|c| c.webhooks);
        let covers = covers.map(|c| (ComponentKind::Cover, c.id, c.component_index));
        Blueprint {
            id: dev.id,
            name: dev.name.clone(),
            model: dev.model.clone(),
            protocol: dev.protocol,
            hostname: dev.hostname.clone(),
            port: dev.port,
            transport: dev.transport,
            simulate: dev.simulate,
            sleeping: dev.sleeping,
            profile: dev.profile.clone(),
            simulation_file: dev.simulation_file.clone(),
            hooked: inputs.chain(outputs).chain(covers).collect(),
        }
    }

    /// A device with what was kept, for [`for_device`] and the hook plan (everything else is left default).
    pub(crate) fn device(&self) -> Device {
        let mut dev = Device {
            id: self.id,
            name: self.name.clone(),
            object_type: "device",
            model: self.model.clone(),
            protocol: self.protocol,
            hostname: self.hostname.clone(),
            port: self.port,
            transport: self.transport,
            simulate: self.simulate,
            sleeping: self.sleeping,
            profile: self.profile.clone(),
            simulation_file: self.simulation_file.clone(),
            ..Device::default()
        };
        for &(kind, id, component_index) in &self.hooked {
            match kind {
                ComponentKind::Input => dev.inputs.push(crate::objects::Input {
                    id,
                    component_index,
                    webhooks: true,
                    ..Default::default()
                }),
                ComponentKind::Output => dev.outputs.push(crate::objects::Output {
                    id,
                    component_index,
                    webhooks: true,
                    ..Default::default()
                }),
                _ => dev.covers.push(crate::objects::Cover {
                    id,
                    component_index,
                    webhooks: true,
                    ..Default::default()
                }),
            }
        }
        dev
    }
}

/// The driver for a planned device.
pub(crate) fn for_device(
    dev: &Device,
    settings: &Settings,
    http: &http::Http,
    hooks: Option<crate::webhook::install::HookPlan>,
    credentials: Credentials,
    links: Links,
) -> Result<Box<dyn Driver>> {
    let Links {
        tunnel,
        mqtt,
        coiot,
    } = links;
    if dev.simulate {
        let file = dev
            .simulation_file
            .clone()
            .unwrap_or_else(|| crate::plan::simulation_file(settings, &dev.name));
        let light = match settings.models.resolve(&dev.model) {
            Some(ModelRef::Vendor(m)) => m
                .shape_for(dev.profile.as_deref())
                .ok()
                .and_then(|s| s.light),
            _ => None,
        };
        return Ok(Box::new(simulated::Simulated::new(file).with_light(light)));
    }
    // Through the broker: no address, no hooks (events come as notifications).
    if let Some(port) = mqtt {
        let http = http.clone();
        return Ok(match settings.models.resolve(&dev.model) {
            Some(ModelRef::Vendor(m)) if m.protocol == crate::models::Protocol::Rpc => {
                let mut rpc = rpc::Rpc::new(
                    http,
                    String::new(),
                    settings.models.share(m),
                    None,
                    credentials,
                    tunnel,
                );
                rpc.mqtt = Some(port);
                Box::new(rpc)
            }
            Some(ModelRef::Tasmota) => {
                let mut t = tasmota::Tasmota::new(http, String::new(), credentials);
                t.mqtt = Some(port);
                Box::new(t)
            }
            _ => {
                return Err(crate::Error::Unsupported {
                    device: dev.label(),
                    message: "Channel: mqtt is for Shelly Gen2+ and Tasmota devices".into(),
                });
            }
        });
    }
    // A sleeping device needs no address: it reports through the outbound WebSocket (its driver takes the
    // reports, and has no address to ask).
    let scheme = match dev.transport {
        Some(crate::objects::Transport::Https) => "https",
        _ => "http",
    };
    let base = match dev.hostname.as_deref() {
        Some(host) => format!(
            "{scheme}://{}:{}",
            crate::hostname::url_host(host),
            dev.port
        ),
        None if dev.sleeping => String::new(),
        None => return Ok(Box::new(Unaddressed)),
    };
    let http = http.clone();
    Ok(match settings.models.resolve(&dev.model) {
        Some(ModelRef::Vendor(m)) if m.protocol == crate::models::Protocol::Rest => {
            let mut g = gen1::Gen1::new(http, base, settings.models.share(m), hooks, credentials);
            if let Some((link, peer)) = coiot {
                g.coiot = Some(link);
                g.coiot_peer = peer;
            }
            Box::new(g)
        }
        Some(ModelRef::Vendor(m)) => {
            let mut rpc = rpc::Rpc::new(
                http,
                base,
                settings.models.share(m),
                hooks,
                credentials,
                tunnel,
            );
            rpc.sleeps = dev.sleeping;
            Box::new(rpc)
        }
        Some(ModelRef::Tasmota) => Box::new(tasmota::Tasmota::new(http, base, credentials)),
        None => {
            return Err(crate::Error::Unsupported {
                device: dev.label(),
                message: format!("model '{}' is not in the model library", dev.model),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The factory's trimmed copy of a planned device gives the same hook plan and a driver at the same
    /// place as the whole device: webhooks on some components of each kind, meters, a Gen1 and a Gen2+ device.
    #[test]
    fn a_factory_builds_from_its_trimmed_copy_what_it_built_from_the_whole_device() {
        let yaml = "SmartDevices:\n  ShellyWebhooks:\n    Enabled: true\n    Host: 127.0.0.1\n    Port: 0\n    DefaultWebhooks:\n      Inputs: [input.toggle_on]\n      Outputs: [switch.on, switch.off]\n      Covers: [cover.open]\n  Devices:\n    - {Name: Hall, Model: Shelly2PMG3, Hostname: 127.0.0.1, Port: 8081, Inputs: [{Name: Hall In, Webhooks: true}, {Name: Hall In 2}], Outputs: [{Name: O1}, {Name: O2, Webhooks: true}], Meters: [{Name: M1}, {Name: M2}]}\n    - {Name: Blind, Model: Shelly2PMG3, Hostname: 127.0.0.1, Port: 8082, Profile: cover, Covers: [{Name: C1, Webhooks: true}]}\n    - {Name: Old, Model: Shelly1PM, Hostname: 127.0.0.1, Port: 8083, Outputs: [{Name: Old O, Webhooks: true}]}\n    - {Name: Sim, Model: Shelly2PMG3, Simulate: true}\n";
        let settings = crate::config::Settings::from_yaml_str(yaml).expect("valid");
        let devices = crate::plan::plan(&settings).expect("planned");
        let http = http::Http::new(&settings, Arc::default());
        let mut hooked = 0;
        for d in &devices {
            let kept = Blueprint::of(d).device();
            assert!(
                kept.meters.is_empty() && kept.model_name.is_empty(),
                "trimmed"
            );
            let (whole, trimmed) = (
                crate::webhook::install::plan(d, &settings.webhooks, 9),
                crate::webhook::install::plan(&kept, &settings.webhooks, 9),
            );
            assert_eq!(whole, trimmed, "{}", d.name);
            hooked += whole.map_or(0, |p| p.wanted.len());
            let built = |dev: &Device| {
                for_device(
                    dev,
                    &settings,
                    &http,
                    None,
                    Credentials::default(),
                    Links::default(),
                )
                .map(|_| ())
                .map_err(|e| e.to_string())
            };
            assert_eq!(built(d), built(&kept), "{}", d.name);
            assert_eq!(kept.label(), d.label());
        }
        assert_eq!(hooked, 1 + 2 + 1 + 2, "hooks on Hall, Blind and Old");
    }

    /// A device known by its MAC alone: a background check reads it (no I/O) rather than declaring it
    /// "offline", so its LastError keeps saying why.
    #[test]
    fn a_device_without_an_address_keeps_saying_why_after_a_background_check() {
        let mut dev = Device {
            name: "Kitchen".into(),
            mac_address: Some("A8:03:2A:B1:23:45".into()),
            ..Device::default()
        };
        let liveness = Liveness {
            ping_allowed: true,
            timeout: Duration::from_secs(1),
            closing: Arc::default(),
        };
        let mut driver = Unaddressed;
        assert!(liveness.worth_refresh(&dev, &mut driver));
        let e = driver.read(&mut dev).unwrap_err();
        assert!(
            e.reason().contains("no address is known yet")
                && e.reason().contains("A8:03:2A:B1:23:45")
                && e.reason().contains("discovery"),
            "{e}"
        );
        assert_eq!(driver.reach(), Some(false));
        assert!(!dev.online);
    }
}
