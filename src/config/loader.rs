//! Loads a configuration document: parse, validate against the dictionary, normalise both layouts.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use serde_json::{Map, Value};

use super::dictionary::{Rule, ValidationDictionary};
use super::settings::*;
use super::validate::validate;
use crate::error::{Error, Problem, Result};
use crate::models::ModelLibrary;
use crate::objects::{Attributes, ComponentKind, reserved_keys};
use crate::verbosity::Verbosity;

static BUILTIN: LazyLock<ValidationDictionary> = LazyLock::new(ValidationDictionary::builtin);

/// Loads configurations with a chosen validation dictionary and model library.
#[derive(Clone, Debug, Default)]
pub struct ConfigLoader {
    dictionary: ValidationDictionary,
    models: Arc<ModelLibrary>,
}

impl ConfigLoader {
    /// A loader with the built-in dictionary and the embedded model library.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `dictionary` (usually the built-in one with custom attributes merged in).
    pub fn with_dictionary(mut self, dictionary: ValidationDictionary) -> Self {
        self.dictionary = dictionary;
        self
    }

    /// Uses a caller-supplied model library instead of the embedded one.
    pub fn with_models(mut self, models: ModelLibrary) -> Self {
        self.models = Arc::new(models);
        self
    }

    /// The dictionary, to inspect or extend it in place.
    pub fn dictionary_mut(&mut self) -> &mut ValidationDictionary {
        &mut self.dictionary
    }

    /// Loads a YAML file. Relative paths inside it resolve against the file's folder.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<Settings> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::config_one(
                &path.display().to_string(),
                "",
                format!("cannot read the file: {e}"),
            )
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        self.load(&text, &path.display().to_string(), &base)
    }

    /// Loads YAML text. Relative paths inside it stay relative to the current directory.
    pub fn load_str(&self, yaml: &str) -> Result<Settings> {
        self.load(yaml, "<string>", Path::new(""))
    }

    fn load(&self, text: &str, source: &str, base: &Path) -> Result<Settings> {
        let fail = |problems: Vec<Problem>| Error::Config {
            source: source.to_string(),
            problems,
        };
        let mut doc = crate::yaml::parse(text).map_err(fail)?;
        super::validate::integral_numbers(&mut doc, self.dictionary.root());
        let mut problems = validate(&doc, self.dictionary.root());
        // Normalising tolerates wrong types (it reads what it can), so its checks run even when validation
        // failed and every problem is reported at once; one per key path is enough.
        let mut n = Normaliser {
            problems: Vec::new(),
        };
        let settings = n.settings(&doc, source, base, self.models.clone());
        for p in n.problems {
            if !problems.iter().any(|q| q.path == p.path) {
                problems.push(p);
            }
        }
        // One round: the installation rules (models, counts, names) are reported with the schema problems,
        // except for devices whose block already has one (their values may be half read).
        if let Some(s) = &settings
            && !problems.is_empty()
        {
            for p in s.check() {
                let device = p.path.split(" (").next().unwrap_or(&p.path).to_string();
                if !problems.iter().any(|q| q.path.starts_with(&device)) {
                    problems.push(p);
                }
            }
        }
        // A file's problems say where: line and column of the key.
        if source != "<string>" {
            for p in &mut problems {
                if let Some((line, col)) = super::locate::locate(text, &p.path) {
                    p.path = format!("{} (line {line}, column {col})", p.path);
                }
            }
        }
        match settings {
            Some(s) if problems.is_empty() => Ok(s),
            _ => Err(fail(problems)),
        }
    }
}

impl Settings {
    /// Loads a YAML file with the built-in dictionary and model library.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Settings> {
        ConfigLoader::new().load_file(path)
    }

    /// Loads YAML text with the built-in dictionary and model library.
    pub fn from_yaml_str(yaml: &str) -> Result<Settings> {
        ConfigLoader::new().load_str(yaml)
    }
}

struct Normaliser {
    problems: Vec<Problem>,
}

fn get<'a>(map: &'a Map<String, Value>, rule: &Rule, key: &str) -> Option<&'a Value> {
    // Accept any alias the dictionary knows for `key`.
    let aliases: &[String] = rule.field(key).map(|r| r.aliases.as_slice()).unwrap_or(&[]);
    std::iter::once(key)
        .chain(aliases.iter().map(String::as_str))
        .find_map(|k| map.get(k))
        .filter(|v| !v.is_null())
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    if p.is_absolute() { p } else { base.join(p) }
}

/// Shortest background refresh interval (0 turns it off).
pub(crate) const MIN_REFRESH: Duration = Duration::from_millis(10);

fn secs(v: Option<&Value>, default: f64) -> Duration {
    // A negative or huge value (reported by validation's min/max) falls back to the default instead of panicking.
    v.and_then(Value::as_f64)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or_else(|| Duration::from_secs_f64(default))
}

fn string_list(v: Option<&Value>) -> Option<Vec<String>> {
    let list: Vec<String> = v?
        .as_array()?
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect();
    (!list.is_empty()).then_some(list)
}

impl Normaliser {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::new(path, message));
    }

    fn settings(
        &mut self,
        doc: &Value,
        source: &str,
        base: &Path,
        models: Arc<ModelLibrary>,
    ) -> Option<Settings> {
        let doc = doc.as_object()?;
        let root_rule = BUILTIN.root();
        let mut found = None;
        for (key, value) in doc {
            match root_rule.field_entry(key).map(|(c, _)| c) {
                Some("ShellyDevices") => found = Some((Layout::A, key, value)),
                Some("SCSmartDevices") => found = Some((Layout::B, key, value)),
                _ => {}
            }
        }
        let Some((layout, root_key, root)) = found else {
            self.problem(
                "",
                "no device settings: add a root key SCSmartDevices (or SmartDevices) or ShellyDevices (or VendorDevices)",
            );
            return None;
        };
        let canonical = if layout == Layout::A {
            "ShellyDevices"
        } else {
            "SCSmartDevices"
        };
        let rule = root_rule.field(canonical)?;
        let rk = root_key.as_str();
        let Some(root) = root.as_object() else {
            let found = if root.is_null() {
                "is empty".to_string()
            } else {
                format!("is {}, not a mapping", super::describe(root))
            };
            self.problem(
                rk,
                format!(
                    "{found}; give it the settings and a device list, e.g. `{rk}: {{Devices: []}}`"
                ),
            );
            return None;
        };

        let webhooks = match layout {
            Layout::A => self.webhooks_a(root, rule, rk),
            Layout::B => self.webhooks_b(root, rule, rk),
        };
        let refresh = secs(root.get("RefreshInterval").filter(|v| !v.is_null()), 30.0);
        if !refresh.is_zero() && refresh < MIN_REFRESH {
            // A near-zero interval makes the supervisor and every worker spin.
            self.problem(
                format!("{rk}.RefreshInterval"),
                format!(
                    "{} s is too short; use 0 (no background refresh) or at least {} s",
                    refresh.as_secs_f64(),
                    MIN_REFRESH.as_secs_f64()
                ),
            );
        }
        let mut devices: Vec<DeviceConfig> = get(root, rule, "Devices")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .enumerate()
                    .filter_map(|(i, d)| {
                        self.device(d.as_object()?, i, &format!("{rk}.Devices[{i}]"), base)
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Kept for the controller's life: no room for devices that are not there (up to half of it).
        devices.shrink_to_fit();
        self.unique_macs(&devices, rk);
        let extra: Attributes = doc
            .iter()
            .filter(|(k, _)| root_rule.field(k).is_none())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(Settings {
            source: source.to_string(),
            channel: channel_of(root).unwrap_or_default(),
            layout,
            root_key: rk.to_string(),
            allow_debug_logging: root
                .get("AllowDebugLogging")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            response_timeout: secs(root.get("ResponseTimeout"), 5.0),
            retry_count: root.get("RetryCount").and_then(Value::as_u64).unwrap_or(1) as u32,
            retry_delay: secs(root.get("RetryDelay"), 2.0),
            ping_allowed: root
                .get("PingAllowed")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            follow_moves: root
                .get("FollowMoves")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            ca_file: root
                .get("CaFile")
                .and_then(Value::as_str)
                .map(|f| resolve(base, f)),
            trust_file: match root.get("TrustFile").and_then(Value::as_str) {
                Some(f) => Some(resolve(base, f)),
                None if source != "<string>" => {
                    let name = Path::new(source)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "smartdev".into());
                    Some(base.join(format!("{name}.trust.json")))
                }
                None => None,
            },
            refresh_interval: (!refresh.is_zero()).then_some(refresh),
            simulation_folder: resolve(
                base,
                root.get("SimulationFileFolder")
                    .and_then(Value::as_str)
                    .unwrap_or("simulation_files"),
            ),
            webhooks,
            coiot: crate::config::settings::CoiotSettings {
                enabled: root.get("CoIoT").and_then(Value::as_bool).unwrap_or(true),
                port: root
                    .get("CoIoTPort")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(5683),
                set_peer: root
                    .get("CoIoTPeer")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            logging: doc
                .get("Files")
                .and_then(Value::as_object)
                .map(|f| self.files(f, base)),
            mqtt: get(root, rule, "Mqtt")
                .and_then(Value::as_object)
                .map(|m| self.mqtt(m, &format!("{rk}.Mqtt"), source, base)),
            devices,
            extra,
            models,
        })
    }

    fn files(&mut self, f: &Map<String, Value>, base: &Path) -> LogSettings {
        let verbosity = |key: &str, default: Verbosity| {
            f.get(key)
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(default)
        };
        LogSettings {
            logfile: f
                .get("LogfileName")
                .and_then(Value::as_str)
                .map(|p| resolve(base, p)),
            logfile_verbosity: verbosity("LogfileVerbosity", Verbosity::Detailed),
            console_verbosity: verbosity("ConsoleVerbosity", Verbosity::Summary),
            thread_ids: f
                .get("LogThreadID")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }

    /// The `Mqtt` block. The default client id is `smartdev-` + 8 hex digits of a hash of this host's name and
    /// the configuration's path: the same controller gets the same id after a restart (the broker then
    /// replaces a half-dead old session at once), two controllers on two machines or with two files get two.
    fn mqtt(
        &mut self,
        m: &Map<String, Value>,
        at: &str,
        source: &str,
        base: &Path,
    ) -> MqttSettings {
        let tls = m.get("Tls").and_then(Value::as_bool).unwrap_or(false);
        let host = m
            .get("Host")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !host.is_empty()
            && let Err(why) = crate::hostname::check(&host)
        {
            self.problem(format!("{at}.Host"), format!("'{host}' {why}"));
        }
        let client_id = match m.get("ClientId").and_then(Value::as_str) {
            Some(id) => {
                // It is the first level of the topics devices answer us on: one topic level, no wildcards.
                if id.contains(['/', '+', '#']) || !crate::mqtt::packet::valid_topic(id) {
                    self.problem(
                        format!("{at}.ClientId"),
                        format!(
                            "'{}' cannot be a topic level (devices answer on <ClientId>/...): leave out '/', '+' and '#'",
                            crate::text::clip(id, 60)
                        ),
                    );
                }
                id.to_string()
            }
            None => default_client_id(source),
        };
        let keep_alive = secs(m.get("KeepAlive"), 30.0);
        if tls && m.get("CaFile").and_then(Value::as_str).is_none() {
            self.problem(
                format!("{at}.Tls"),
                "Tls needs CaFile: the PEM file of the CA that signed the broker's certificate (it is always verified)",
            );
        }
        MqttSettings {
            host,
            port: m
                .get("Port")
                .and_then(Value::as_u64)
                .map_or(if tls { 8883 } else { 1883 }, |p| p as u16),
            user: self.credential(m.get("User"), &format!("{at}.User")),
            password: self
                .credential(m.get("Password"), &format!("{at}.Password"))
                .map(Secret::new),
            client_id,
            tls,
            ca_file: m
                .get("CaFile")
                .and_then(Value::as_str)
                .map(|f| resolve(base, f)),
            keep_alive,
        }
    }

    fn webhooks_a(&mut self, root: &Map<String, Value>, _rule: &Rule, rk: &str) -> WebhookSettings {
        self.webhook_common(
            root,
            [
                "WebhooksEnabled",
                "WebhookHost",
                "WebhookPort",
                "WebhookPath",
                "DefaultWebhooks",
                "WebhookToken",
                "WebhookAllowedSources",
                "WebhookQueueCapacity",
                "WebhookWebsocketPath",
            ],
            rk,
        )
    }

    fn webhooks_b(&mut self, root: &Map<String, Value>, rule: &Rule, rk: &str) -> WebhookSettings {
        match get(root, rule, "ShellyWebhooks").and_then(Value::as_object) {
            Some(section) => self.webhook_common(
                section,
                [
                    "Enabled",
                    "Host",
                    "Port",
                    "Path",
                    "DefaultWebhooks",
                    "Token",
                    "AllowedSources",
                    "QueueCapacity",
                    "WebsocketPath",
                ],
                &format!("{rk}.ShellyWebhooks"),
            ),
            None => WebhookSettings::default(),
        }
    }

    fn webhook_common(
        &mut self,
        m: &Map<String, Value>,
        keys: [&str; 9],
        at: &str,
    ) -> WebhookSettings {
        let [
            enabled,
            host,
            port,
            path,
            defaults,
            token,
            sources,
            capacity,
            ws_path,
        ] = keys;
        let mut w = WebhookSettings::default();
        let nn = |k: &str| m.get(k).filter(|v| !v.is_null());
        if let Some(b) = nn(enabled).and_then(Value::as_bool) {
            w.enabled = b;
        }
        if let Some(h) = nn(host).and_then(Value::as_str) {
            if let Err(why) = crate::hostname::check(h) {
                self.problem(format!("{at}.{host}"), format!("'{h}' {why}"));
            }
            w.host = h.to_string();
        }
        if let Some(p) = nn(port).and_then(Value::as_u64) {
            w.port = p as u16;
        }
        for (key, slot) in [(path, &mut w.path), (ws_path, &mut w.ws_path)] {
            if let Some(p) = nn(key).and_then(Value::as_str) {
                if !p.starts_with('/')
                    || p.contains('?')
                    || p.contains('#')
                    || p.contains(char::is_whitespace)
                {
                    self.problem(
                        format!("{at}.{key}"),
                        format!("'{p}' must be a URL path starting with '/' (no query, no spaces)"),
                    );
                }
                *slot = p.to_string();
            }
        }
        if w.path == w.ws_path {
            self.problem(
                format!("{at}.{ws_path}"),
                format!(
                    "'{}' is also the webhook path: the outbound WebSocket needs a path of its own",
                    w.ws_path
                ),
            );
        }
        w.token = nn(token).and_then(Value::as_str).map(str::to_string);
        w.only_from_devices = nn(sources).and_then(Value::as_str) == Some("devices");
        if let Some(c) = nn(capacity).and_then(Value::as_u64) {
            w.queue_capacity = c as usize;
        }
        if let Some(d) = nn(defaults).and_then(Value::as_object) {
            // Any event a Shelly device documents is accepted (each device installs what it lists as
            // supported); a name that exists nowhere is a typo.
            for (key, list) in d {
                for (i, e) in list.as_array().into_iter().flatten().enumerate() {
                    let Some(e) = e.as_str() else { continue };
                    if !crate::event::KNOWN_EVENTS.contains(&e) {
                        self.problem(
                            format!("{at}.{defaults}.{key}[{i}]"),
                            format!(
                                "'{}' is not an event any Shelly device sends{}",
                                crate::text::clip(e, 60),
                                crate::suggest::hint(e, crate::event::KNOWN_EVENTS.iter().copied())
                            ),
                        );
                    }
                }
            }
            let builtin = DefaultWebhooks::default();
            w.default_webhooks = DefaultWebhooks {
                inputs: string_list(d.get("Inputs")).unwrap_or(builtin.inputs),
                outputs: string_list(d.get("Outputs")).unwrap_or(builtin.outputs),
                meters: string_list(d.get("Meters")).unwrap_or(builtin.meters),
                covers: string_list(d.get("Covers")).unwrap_or(builtin.covers),
            };
        }
        w
    }

    /// A credential value; `env:NAME` reads the environment variable NAME now (missing → a problem that names
    /// the variable, never the value).
    fn credential(&mut self, v: Option<&Value>, at: &str) -> Option<String> {
        let text = v?.as_str()?;
        match text.strip_prefix("env:") {
            Some(name) => match std::env::var(name) {
                Ok(value) if !value.is_empty() => Some(value),
                Ok(_) => {
                    self.problem(at, format!("environment variable {name} is empty"));
                    None
                }
                Err(_) => {
                    self.problem(at, format!("environment variable {name} is not set"));
                    None
                }
            },
            None => Some(text.to_string()),
        }
    }

    /// Splits a block into its built-in keys (handled by the caller) and custom attributes, refusing custom keys
    /// that would clash with a field of the runtime object.
    fn custom(
        &mut self,
        m: &Map<String, Value>,
        builtin: &Rule,
        kind: Option<ComponentKind>,
        at: &str,
    ) -> Attributes {
        let reserved = reserved_keys(kind);
        let mut out = Map::new();
        for (k, v) in m {
            if builtin.field(k).is_some() {
                continue;
            }
            if reserved.iter().any(|r| r == k) {
                let what = kind.map(ComponentKind::as_str).unwrap_or("device");
                self.problem(
                    format!("{at}.{k}"),
                    format!("custom attribute '{k}' clashes with the built-in field '{k}' of the {what} object; rename it"),
                );
                continue;
            }
            out.insert(k.clone(), v.clone());
        }
        out
    }

    /// Two devices with one MAC: one of them is not what the configuration says.
    fn unique_macs(&mut self, devices: &[DeviceConfig], rk: &str) {
        let mut seen: std::collections::HashMap<crate::mac::Mac, &DeviceConfig> =
            std::collections::HashMap::new();
        let label = |d: &DeviceConfig| match &d.name {
            Some(n) => format!("{} (Devices[{}])", crate::text::quote(n, 60), d.index),
            None => format!("Devices[{}]", d.index),
        };
        for d in devices {
            let Some(mac) = d.mac else { continue };
            match seen.get(&mac) {
                Some(first) => {
                    let message = format!(
                        "MAC {mac} is also the MAC of device {}; a MAC identifies one device: correct one of them",
                        label(first)
                    );
                    self.problem(format!("{rk}.Devices[{}].MAC", d.index), message);
                }
                None => {
                    seen.insert(mac, d);
                }
            }
        }
    }

    fn device(
        &mut self,
        m: &Map<String, Value>,
        index: usize,
        at: &str,
        base: &Path,
    ) -> Option<DeviceConfig> {
        let str_of = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        // `Hostname: https://host` says Tls; the scheme is not part of the address.
        let (hostname, https) = match str_of("Hostname") {
            Some(h) => match h.strip_prefix("https://") {
                Some(rest) => (Some(rest.trim_end_matches('/').to_string()), true),
                None => (Some(h), false),
            },
            None => (None, false),
        };
        let tls_key = m.get("Tls").and_then(Value::as_bool);
        if https && tls_key == Some(false) {
            self.problem(
                format!("{at}.Tls"),
                "Tls is false but Hostname starts with https://: drop one of them",
            );
        }
        let cert_sha256 = match m.get("CertSha256").and_then(Value::as_str) {
            Some(t) => match crate::driver::tls::parse_fingerprint(t) {
                Ok(f) => Some(f),
                Err(why) => {
                    self.problem(format!("{at}.CertSha256"), why);
                    None
                }
            },
            None => None,
        };
        let bool_of = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
        if m.get("Tasmota").is_some_and(|v| !v.is_null()) {
            log::warn!("{at}.Tasmota: this key has no effect and is accepted only for older files");
        }
        let components = |this: &mut Self, kind: ComponentKind| -> Option<Vec<ComponentConfig>> {
            let key = kind.config_key();
            let list = m.get(key)?.as_array()?;
            // Exactly as long as the list: collected through `filter_map` it would have room for at least
            // four, some 500 bytes of a one-component list kept per device for the controller's life.
            let mut kept: Vec<ComponentConfig> = list
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let c = c.as_object()?;
                    let cat = format!("{at}.{key}[{i}]");
                    Some(ComponentConfig {
                        name: c.get("Name").and_then(Value::as_str).map(str::to_string),
                        id: c.get("ID").and_then(Value::as_i64),
                        webhooks: c.get("Webhooks").and_then(Value::as_bool).unwrap_or(false),
                        mock_rate: c.get("MockRate").and_then(Value::as_f64),
                        requires_output: c
                            .get("RequiresOutput")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        quantity: c
                            .get("Quantity")
                            .and_then(Value::as_str)
                            .and_then(|q| q.parse().ok()),
                        custom: this.custom(c, builtin_item(kind), Some(kind), &cat),
                    })
                })
                .collect();
            kept.shrink_to_fit();
            Some(kept)
        };
        let username = self.credential(m.get("Username"), &format!("{at}.Username"));
        let password = self
            .credential(m.get("Password"), &format!("{at}.Password"))
            .map(Secret::new);
        let inputs = components(self, ComponentKind::Input);
        let outputs = components(self, ComponentKind::Output);
        let meters = components(self, ComponentKind::Meter);
        let temp_probes = components(self, ComponentKind::TempProbe);
        let covers = components(self, ComponentKind::Cover);
        let sensors = components(self, ComponentKind::Sensor);
        let custom = self.custom(m, builtin_device(), None, at);
        let mac = match m.get("MAC").and_then(Value::as_str) {
            Some(text) => match crate::mac::Mac::parse(text) {
                Ok(mac) => Some(mac),
                Err(why) => {
                    let who = str_of("Name").map_or_else(
                        || format!("device {}", index + 1),
                        |n| format!("device {}", crate::text::quote(&n, 60)),
                    );
                    self.problem(format!("{at}.MAC"), format!("{who}: {why}"));
                    None
                }
            },
            None => None,
        };
        Some(DeviceConfig {
            index,
            channel: channel_of(m),
            mqtt_topic: str_of("MqttTopic"),
            mqtt_full_topic: str_of("MqttFullTopic"),
            name: str_of("Name"),
            id: m.get("ID").and_then(Value::as_i64),
            model: str_of("Model").unwrap_or_default(),
            hostname,
            mac,
            tls: https || tls_key.unwrap_or(false),
            ca_file: m
                .get("CaFile")
                .and_then(Value::as_str)
                .map(|f| resolve(base, f)),
            cert_sha256,
            port: m.get("Port").and_then(Value::as_u64).map(|p| p as u16),
            simulate: bool_of("Simulate"),
            expect_offline: bool_of("ExpectOffline"),
            outbound_websocket: m.get("OutboundWebsocket").and_then(Value::as_bool),
            report_period: m
                .get("ReportPeriod")
                .and_then(Value::as_f64)
                .filter(|s| *s > 0.0)
                .map(std::time::Duration::from_secs_f64),
            username,
            password,
            inputs,
            outputs,
            meters,
            temp_probes,
            covers,
            sensors,
            profile: str_of("Profile"),
            custom,
        })
    }
}

/// The default MQTT client id: `smartdev-` + 8 hex digits of an FNV-1a hash of the host name and the
/// configuration's source (its path, or `<string>`). Stable across restarts; hashed so it says nothing about
/// the machine to the broker's other clients and fits every broker's length limit (23 bytes in MQTT 3.1.1).
fn default_client_id(source: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let path = std::fs::canonicalize(source)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| source.to_string());
    let hash = format!("{}\n{path}", host.trim())
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("smartdev-{:08x}", hash as u32 ^ (hash >> 32) as u32)
}

/// `Channel` of a root or device block (the dictionary allows only `http`, `auto` and `mqtt`).
fn channel_of(block: &serde_json::Map<String, Value>) -> Option<Channel> {
    match block.get("Channel").and_then(Value::as_str)? {
        "auto" => Some(Channel::Auto),
        "http" => Some(Channel::Http),
        "mqtt" => Some(Channel::Mqtt),
        _ => None,
    }
}

/// The built-in rule of a device block (custom attributes are the keys it does not define).
fn builtin_device() -> &'static Rule {
    BUILTIN
        .rule("SCSmartDevices.Devices")
        .and_then(|r| r.items.as_deref())
        .expect("built-in dictionary defines devices")
}

fn builtin_item(kind: ComponentKind) -> &'static Rule {
    builtin_device()
        .field(kind.config_key())
        .and_then(|r| r.items.as_deref())
        .expect("built-in dictionary defines every component kind")
}
