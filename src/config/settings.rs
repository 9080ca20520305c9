//! The normalised settings both configuration layouts load into.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Map;

use crate::models::ModelLibrary;
use crate::objects::Attributes;
use crate::verbosity::Verbosity;

/// Which configuration layout a document used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Root `ShellyDevices` / `VendorDevices`, flat webhook keys.
    A,
    /// Root `SCSmartDevices` / `SmartDevices`, webhook keys under `ShellyWebhooks` / `VendorWebhooks`.
    B,
}

/// Settings of the whole installation, the same for both layouts.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where the settings came from (file path or `<string>`), for messages.
    pub source: String,
    /// How Gen2+ devices are listened to by default (`Channel`); a device's own `Channel` overrides it.
    pub channel: Channel,
    /// The layout the document used.
    pub layout: Layout,
    /// The root key as written (e.g. `SmartDevices`), used in key paths of messages.
    pub root_key: String,
    /// `AllowDebugLogging`: log request and response bodies at trace level.
    pub allow_debug_logging: bool,
    /// `ResponseTimeout`: limit for each device request (connect and read). Default 5 s.
    pub response_timeout: Duration,
    /// `RetryCount`: further attempts after a timeout or connection failure. Default 1.
    pub retry_count: u32,
    /// `RetryDelay`: wait between attempts. Default 2 s.
    pub retry_delay: Duration,
    /// `PingAllowed`: whether ICMP echo may be used for liveness. Default true.
    pub ping_allowed: bool,
    /// `FollowMoves`: whether a device configured with a `MAC` is looked up (mDNS, at most once a minute for
    /// every missing device at once) when it does not answer at its address, and followed to where it answers
    /// with that MAC. Default true.
    pub follow_moves: bool,
    /// `CaFile` at the root, resolved against the config file's folder: the CA that verifies devices reached
    /// over HTTPS (unless a device names its own `CaFile` or a `CertSha256`).
    pub ca_file: Option<PathBuf>,
    /// `TrustFile`, or by default `<config file name>.trust.json` beside the config file (`None` for settings
    /// not read from a file): where certificates pinned at first use are kept.
    pub trust_file: Option<PathBuf>,
    /// `RefreshInterval`: period of background refreshes; `None` when 0 (off). Default 30 s.
    pub refresh_interval: Option<Duration>,
    /// `SimulationFileFolder`, resolved against the config file's folder. Default `simulation_files`.
    pub simulation_folder: PathBuf,
    /// Webhook listener and installation settings.
    pub webhooks: WebhookSettings,
    /// The Gen1 CoIoT listener (`CoIoT`, `CoIoTPort`, `CoIoTPeer`).
    pub coiot: CoiotSettings,
    /// The `Files` block, when present.
    pub logging: Option<LogSettings>,
    /// The `Mqtt` block: the broker devices with `Channel: mqtt` are reached through.
    pub mqtt: Option<MqttSettings>,
    /// The configured devices, in order.
    pub devices: Vec<DeviceConfig>,
    /// Root keys the caller added to the dictionary for its own use, kept for it.
    pub extra: Attributes,
    /// The model library the settings were checked against.
    pub models: Arc<ModelLibrary>,
}

/// The Gen1 CoIoT listener's settings (root keys `CoIoT`, `CoIoTPort`, `CoIoTPeer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoiotSettings {
    /// Whether the listener runs when Gen1 devices are configured (`CoIoT`). Default true.
    pub enabled: bool,
    /// UDP port (`CoIoTPort`; 0 picks a free port). Default 5683.
    pub port: u16,
    /// Whether each Gen1 device's CoIoT peer is pointed at the listener (`CoIoTPeer`). Default false.
    pub set_peer: bool,
}

impl Default for CoiotSettings {
    fn default() -> Self {
        CoiotSettings {
            enabled: true,
            port: 5683,
            set_peer: false,
        }
    }
}

/// Webhook settings (`ShellyWebhooks` in layout B, `Webhook*` keys in layout A).
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookSettings {
    /// Whether the listener runs. Default false.
    pub enabled: bool,
    /// Address to listen on and to put in callback URLs. Default `0.0.0.0`.
    pub host: String,
    /// Port. Default 8787.
    pub port: u16,
    /// URL path. Default `/shelly/webhook`.
    pub path: String,
    /// URL path of the outbound WebSocket server on the same listener (`WebsocketPath` /
    /// `WebhookWebsocketPath`), where devices configured for it connect when they wake. Default `/shelly/ws`.
    pub ws_path: String,
    /// Events installed on inputs and outputs that ask for webhooks.
    pub default_webhooks: DefaultWebhooks,
    /// Shared secret put in every callback URL and required on every request (`Token` / `WebhookToken`).
    pub token: Option<String>,
    /// Accept requests only from configured devices' addresses (`AllowedSources: devices`).
    pub only_from_devices: bool,
    /// Events kept in the queue before one is dropped: the oldest of the device with the most waiting
    /// (default 65,536).
    pub queue_capacity: usize,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            enabled: false,
            host: "0.0.0.0".into(),
            port: 8787,
            path: "/shelly/webhook".into(),
            ws_path: "/shelly/ws".into(),
            default_webhooks: DefaultWebhooks::default(),
            token: None,
            only_from_devices: false,
            queue_capacity: 65_536,
        }
    }
}

/// The `DefaultWebhooks` mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultWebhooks {
    /// Events for inputs. Default `input.toggle_on`, `input.toggle_off`.
    pub inputs: Vec<String>,
    /// Events for outputs. Default `switch.on`, `switch.off`.
    pub outputs: Vec<String>,
    /// Events for meters. Default none.
    pub meters: Vec<String>,
    /// Events for covers. Default `cover.open`, `cover.closed`, `cover.stopped`.
    pub covers: Vec<String>,
}

impl Default for DefaultWebhooks {
    fn default() -> Self {
        DefaultWebhooks {
            inputs: vec!["input.toggle_on".into(), "input.toggle_off".into()],
            outputs: vec!["switch.on".into(), "switch.off".into()],
            meters: Vec::new(),
            covers: vec![
                "cover.open".into(),
                "cover.closed".into(),
                "cover.stopped".into(),
            ],
        }
    }
}

/// The `Files` block.
#[derive(Clone, Debug, PartialEq)]
pub struct LogSettings {
    /// `LogfileName`, resolved against the config file's folder.
    pub logfile: Option<PathBuf>,
    /// `LogfileVerbosity`. Default detailed.
    pub logfile_verbosity: Verbosity,
    /// `ConsoleVerbosity`. Default summary.
    pub console_verbosity: Verbosity,
    /// `LogThreadID`: name the thread in every record (default: only in debug records).
    pub thread_ids: bool,
}

/// The `Mqtt` block: one broker connection per controller (see README "Devices behind a broker").
#[derive(Clone, Debug, PartialEq)]
pub struct MqttSettings {
    /// `Host`: the broker's host name or address.
    pub host: String,
    /// `Port`: default 1883, 8883 with `Tls`.
    pub port: u16,
    /// `User`, resolved from `env:NAME`.
    pub user: Option<String>,
    /// `Password`, resolved from `env:NAME`; never logged or printed.
    pub password: Option<Secret>,
    /// `ClientId`: our client id at the broker, also the first level of the topics devices answer us on
    /// (`<ClientId>/<device ID>/rpc`). Default `smartdev-` + 8 hex digits of a hash of the host name and the
    /// configuration's path: stable across restarts, different for two controllers on two machines or
    /// with two files.
    pub client_id: String,
    /// `Tls`: MQTT over TLS, the broker's certificate verified against `CaFile` (else the system's roots are
    /// not used: a CA is required).
    pub tls: bool,
    /// `CaFile`, resolved against the config file's folder.
    pub ca_file: Option<PathBuf>,
    /// `KeepAlive`: seconds between pings when idle (default 30).
    pub keep_alive: Duration,
}

/// A credential: never shown by `Debug`, never written to logs, files or JSON.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The credential itself, for the one place that needs it (building a request).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// How a device is reached (`Channel`): `http` and `auto` matter for Gen2+ only (Gen1 and Tasmota ignore them);
/// `mqtt` is for Gen2+ and Tasmota.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Channel {
    /// HTTP only: reads, webhooks and background refreshes (the behaviour before the push channel).
    Http,
    /// The default: a persistent WebSocket per Gen2+ device for its notifications (`NotifyStatus`,
    /// `NotifyEvent`) and its requests; HTTP while the socket is down and for Gen1 and Tasmota.
    #[default]
    Auto,
    /// Through the broker of the `Mqtt` block (Gen2+ JSON-RPC over MQTT, Tasmota `cmnd`/`stat`/`tele`): every
    /// request, notification and telemetry; no HTTP, no `Hostname` needed.
    Mqtt,
}

/// One element of `Devices`, as configured (IDs and names not yet assigned).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceConfig {
    /// Position in the `Devices` list.
    pub index: usize,
    /// The device's own `Channel`, when given (else the root's).
    pub channel: Option<Channel>,
    /// `MqttTopic`: Gen2+ the device's `topic_prefix` (default its device id, `<model id>-<mac>` in lower case,
    /// which needs `MAC`); Tasmota its `%topic%` (default `tasmota_` + the MAC's last 6 hex digits).
    pub mqtt_topic: Option<String>,
    /// `MqttFullTopic` (Tasmota): its `FullTopic` when not the default `%prefix%/%topic%/`.
    pub mqtt_full_topic: Option<String>,
    /// `Name`.
    pub name: Option<String>,
    /// `ID`.
    pub id: Option<i64>,
    /// `Model` as written.
    pub model: String,
    /// `Hostname`.
    pub hostname: Option<String>,
    /// `MAC`: the device's identity, read from any common spelling. A device answering at `hostname` with
    /// another MAC is refused (`Error::WrongDevice`). With a MAC, `hostname` may be left out.
    pub mac: Option<crate::mac::Mac>,
    /// `Port` (default 80).
    pub port: Option<u16>,
    /// `Tls`, or a `Hostname` written `https://…`: HTTPS to the device (default port 443).
    pub tls: bool,
    /// The device's own `CaFile`, resolved against the config file's folder.
    pub ca_file: Option<PathBuf>,
    /// `CertSha256`, in the canonical spelling `AB:CD:…`.
    pub cert_sha256: Option<String>,
    /// `Simulate`.
    pub simulate: bool,
    /// `ExpectOffline`.
    pub expect_offline: bool,
    /// `OutboundWebsocket`: install our outbound WebSocket server on the device (Gen2+ `Ws.SetConfig`) and
    /// take its reports there. `None`: yes for models that sleep (battery devices), no for others.
    pub outbound_websocket: Option<bool>,
    /// `ReportPeriod` in seconds: how often a sleeping device reports at least; `None`: what the device
    /// reports (`sys.wakeup_period`), else the default (see `objects` / README "Battery devices").
    pub report_period: Option<std::time::Duration>,
    /// `Username` (Gen1 and Tasmota; Gen2+ always use `admin`), resolved from `env:NAME`.
    pub username: Option<String>,
    /// `Password`, resolved from `env:NAME`.
    pub password: Option<Secret>,
    /// `Inputs`; `None` when not configured.
    pub inputs: Option<Vec<ComponentConfig>>,
    /// `Outputs`; `None` when not configured.
    pub outputs: Option<Vec<ComponentConfig>>,
    /// `Meters`; `None` when not configured.
    pub meters: Option<Vec<ComponentConfig>>,
    /// `TempProbes`; `None` when not configured.
    pub temp_probes: Option<Vec<ComponentConfig>>,
    /// `Covers`; `None` when not configured.
    pub covers: Option<Vec<ComponentConfig>>,
    /// `Sensors`; `None` when not configured.
    pub sensors: Option<Vec<ComponentConfig>>,
    /// `Profile`: the profile the device is set to (`cover`, `roller`, `monophase`, ...); `None`: the model's
    /// default, or `cover` when `Covers` are configured.
    pub profile: Option<String>,
    /// Custom attributes, in order.
    pub custom: Attributes,
}

/// One element of a component list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComponentConfig {
    /// `Name`.
    pub name: Option<String>,
    /// `ID`.
    pub id: Option<i64>,
    /// `Webhooks` (inputs and outputs).
    pub webhooks: bool,
    /// `MockRate` in Wh per second (meters).
    pub mock_rate: Option<f64>,
    /// `RequiresOutput` (temperature probes and sensors).
    pub requires_output: Option<String>,
    /// `Quantity` (sensors): `temperature`, `humidity` or `voltage`.
    pub quantity: Option<crate::models::SensorQuantity>,
    /// Custom attributes, in order.
    pub custom: Attributes,
}

impl Settings {
    /// The channel device `cfg` uses: its own `Channel`, else the root's.
    pub fn channel_of(&self, cfg: &DeviceConfig) -> Channel {
        cfg.channel.unwrap_or(self.channel)
    }

    /// How each device is reached, for `sdctl check`: its name (or `Devices[i]`) and `mqtt`, `auto` (Gen2+
    /// WebSocket, HTTP while it is down), `http` or `simulated`.
    pub fn device_channels(&self) -> Vec<(String, &'static str)> {
        use crate::models::{ModelRef, Protocol};
        self.devices
            .iter()
            .map(|cfg| {
                let name = cfg
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("Devices[{}]", cfg.index));
                let gen2 = matches!(
                    self.models.resolve(&cfg.model),
                    Some(ModelRef::Vendor(m)) if m.protocol == Protocol::Rpc
                );
                let channel = match self.channel_of(cfg) {
                    _ if cfg.simulate => "simulated",
                    Channel::Mqtt => "mqtt",
                    Channel::Auto if gen2 => "auto",
                    _ => "http",
                };
                (name, channel)
            })
            .collect()
    }

    /// Settings with every default and no devices; handy for tests and programmatic set-up.
    pub fn with_defaults(devices: Vec<DeviceConfig>) -> Self {
        Settings {
            source: "<code>".into(),
            channel: Channel::Auto,
            layout: Layout::B,
            root_key: "SCSmartDevices".into(),
            allow_debug_logging: false,
            response_timeout: Duration::from_secs(5),
            retry_count: 1,
            retry_delay: Duration::from_secs(2),
            ping_allowed: true,
            follow_moves: true,
            ca_file: None,
            trust_file: None,
            refresh_interval: Some(Duration::from_secs(30)),
            simulation_folder: PathBuf::from("simulation_files"),
            webhooks: WebhookSettings::default(),
            coiot: CoiotSettings::default(),
            logging: None,
            mqtt: None,
            devices,
            extra: Map::new(),
            models: Arc::new(ModelLibrary::embedded()),
        }
    }
}
