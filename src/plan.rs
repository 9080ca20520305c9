//! Turns settings into the installation: IDs, default names, components per model, and every init rule.
//!
//! IDs follow the anchor's scheme: one counter per kind (devices, inputs, outputs, meters, probes) across all
//! devices, starting at 1 and skipping IDs that are configured anywhere. Unconfigured component kinds of a
//! vendor model get as many default components as the model has. Every rule violation is collected.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::config::{ComponentConfig, DeviceConfig, Settings};
use crate::error::Problem;
use crate::models::{ModelRef, Protocol};
use crate::objects::{ComponentKind, Device, Input, Meter, Output, TempProbe};

/// At most this many add-on probes per device.
pub const MAX_TEMP_PROBES: usize = 5;

/// Builds the initial device objects, or every problem that prevents it.
pub(crate) fn plan(settings: &Settings) -> Result<Vec<Device>, Vec<Problem>> {
    let mut problems = Vec::new();
    let root = &settings.root_key;

    // Resolve models and synthesise placeholder components for unconfigured vendor kinds.
    let mut configs: Vec<DeviceConfig> = settings.devices.clone();
    let mut models = Vec::with_capacity(configs.len());
    for cfg in &mut configs {
        let model = settings.models.resolve(&cfg.model);
        if let Some(ModelRef::Vendor(info)) = model {
            for (kind, count) in [
                (ComponentKind::Input, info.inputs),
                (ComponentKind::Output, info.outputs),
                (ComponentKind::Meter, info.meters),
            ] {
                let list = list_mut(cfg, kind);
                if list.is_none() && count > 0 {
                    *list = Some(vec![ComponentConfig::default(); count]);
                }
            }
        }
        models.push(model);
    }

    // Assign IDs: explicit ones are reserved first, then counters fill the gaps in configuration order.
    let mut device_ids = Counter::new(configs.iter().filter_map(|c| c.id));
    let mut kind_ids: HashMap<ComponentKind, Counter> = ComponentKind::ALL
        .iter()
        .map(|&k| {
            let used = configs
                .iter()
                .flat_map(|c| list(c, k).iter().flatten().filter_map(|x| x.id));
            (k, Counter::new(used))
        })
        .collect();

    let mut devices = Vec::with_capacity(configs.len());
    for (cfg, model) in configs.iter().zip(&models) {
        let id = cfg.id.unwrap_or_else(|| device_ids.next());
        let name = cfg.name.clone().unwrap_or_else(|| format!("Device {id}"));
        let shown = if name.chars().any(char::is_control) {
            crate::text::quote(&name, 60)
        } else {
            format!("'{}'", crate::text::clip(&name, 60))
        };
        let at = format!("{root}.Devices[{}] ({shown}, ID {id})", cfg.index);
        if let Some(why) = name_problem(&name) {
            problems.push(Problem::new(&at, format!("Name {why}")));
        }
        for c in ComponentKind::ALL
            .iter()
            .flat_map(|&k| list(cfg, k).iter().flatten())
        {
            if let Some(why) = c.name.as_deref().and_then(name_problem) {
                problems.push(Problem::new(&at, format!("a component Name {why}")));
            }
        }
        let mut dev = Device {
            id,
            name,
            object_type: "device",
            model: cfg.model.clone(),
            hostname: cfg.hostname.clone(),
            port: cfg.port.unwrap_or(80),
            simulate: cfg.simulate,
            expect_offline: cfg.expect_offline,
            online: cfg.simulate,
            custom: cfg.custom.clone(),
            ..Device::default()
        };
        match model {
            Some(ModelRef::Vendor(info)) => {
                dev.model = info.model.clone();
                dev.model_name = info.name.clone();
                dev.generation = Some(info.generation);
                dev.protocol = Some(info.protocol);
                for (kind, count) in [
                    (ComponentKind::Input, info.inputs),
                    (ComponentKind::Output, info.outputs),
                    (ComponentKind::Meter, info.meters),
                ] {
                    let n = list(cfg, kind).as_ref().map_or(0, Vec::len);
                    if n != count {
                        problems.push(Problem::new(
                            &at,
                            format!(
                                "{}: model {} has {count} {}(s) but {n} are configured; list exactly {count} or leave the key out",
                                kind.config_key(),
                                info.model,
                                kind.as_str()
                            ),
                        ));
                    }
                }
            }
            Some(ModelRef::Tasmota) => {
                dev.model = crate::models::TASMOTA.into();
                dev.model_name = crate::models::TASMOTA.into();
                dev.protocol = Some(Protocol::Tasmota);
                if cfg.inputs.as_ref().is_some_and(|l| !l.is_empty()) {
                    problems.push(Problem::new(
                        &at,
                        "Inputs: Tasmota devices have no inputs (input events are not supported); remove the Inputs block",
                    ));
                }
                let hooks = ComponentKind::ALL
                    .iter()
                    .flat_map(|&k| list(cfg, k).iter().flatten())
                    .any(|c| c.webhooks);
                if hooks {
                    log::warn!("{at}: Webhooks has no effect on Tasmota devices");
                }
            }
            None => {
                let hints = settings.models.suggest(&cfg.model);
                let hint = if hints.is_empty() {
                    String::new()
                } else {
                    format!("; did you mean {}?", hints.join(" or "))
                };
                problems.push(Problem::new(
                    &at,
                    format!(
                        "Model: '{}' is not in the model library (sdctl models lists them; use Tasmota for Tasmota devices){hint}",
                        cfg.model
                    ),
                ));
            }
        }
        match (&cfg.hostname, cfg.simulate) {
            (None, false) => problems.push(Problem::new(
                &at,
                "Hostname is required for a real device (or set Simulate: true)",
            )),
            (Some(h), _) => {
                if let Err(why) = crate::hostname::check(h) {
                    problems.push(Problem::new(&at, format!("Hostname '{h}' {why}")));
                }
            }
            _ => {}
        }

        let ids = |kind: ComponentKind,
                   kind_ids: &mut HashMap<ComponentKind, Counter>|
         -> Vec<(i64, String)> {
            list(cfg, kind)
                .iter()
                .flatten()
                .map(|c| {
                    let cid =
                        c.id.unwrap_or_else(|| kind_ids.get_mut(&kind).expect("all kinds").next());
                    let cname = c
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("{} {cid}", kind.default_name_prefix()));
                    (cid, cname)
                })
                .collect()
        };
        let input_ids = ids(ComponentKind::Input, &mut kind_ids);
        let output_ids = ids(ComponentKind::Output, &mut kind_ids);
        let meter_ids = ids(ComponentKind::Meter, &mut kind_ids);
        let probe_ids = ids(ComponentKind::TempProbe, &mut kind_ids);

        let cfgs = |kind| list(cfg, kind).iter().flatten();
        dev.inputs = cfgs(ComponentKind::Input)
            .zip(input_ids)
            .enumerate()
            .map(|(i, (c, (cid, cname)))| Input {
                id: cid,
                name: cname,
                object_type: "input",
                device_id: id,
                component_index: i,
                webhooks: c.webhooks,
                custom: c.custom.clone(),
                ..Input::default()
            })
            .collect();
        dev.outputs = cfgs(ComponentKind::Output)
            .zip(output_ids)
            .enumerate()
            .map(|(i, (c, (cid, cname)))| Output {
                id: cid,
                name: cname,
                object_type: "output",
                device_id: id,
                component_index: i,
                webhooks: c.webhooks && dev.protocol != Some(Protocol::Tasmota),
                custom: c.custom.clone(),
                ..Output::default()
            })
            .collect();
        dev.meters = cfgs(ComponentKind::Meter)
            .zip(meter_ids)
            .enumerate()
            .map(|(i, (c, (cid, cname)))| Meter {
                id: cid,
                name: cname,
                object_type: "meter",
                device_id: id,
                component_index: i,
                mock_rate: c.mock_rate,
                custom: c.custom.clone(),
                ..Meter::default()
            })
            .collect();
        // Link meters to the outputs they measure.
        for i in 0..dev.meters.len() {
            let output = match model {
                Some(ModelRef::Vendor(info)) => info.meter_output(i),
                Some(ModelRef::Tasmota) => Some(i),
                None => None,
            }
            .filter(|&o| o < dev.outputs.len());
            if let Some(o) = output {
                dev.meters[i].output_id = Some(dev.outputs[o].id);
                dev.outputs[o].has_meter = true;
            }
        }
        if dev.inputs.iter().any(|i| i.webhooks) && dev.protocol == Some(Protocol::Tasmota) {
            dev.inputs.iter_mut().for_each(|i| i.webhooks = false);
        }
        let probe_cfgs: Vec<&ComponentConfig> = cfgs(ComponentKind::TempProbe).collect();
        if probe_cfgs.len() > MAX_TEMP_PROBES {
            problems.push(Problem::new(
                &at,
                format!(
                    "TempProbes: {} configured; an add-on takes at most {MAX_TEMP_PROBES}",
                    probe_cfgs.len()
                ),
            ));
        }
        dev.temp_probes = probe_cfgs
            .iter()
            .zip(probe_ids)
            .enumerate()
            .map(|(i, (c, (cid, cname)))| TempProbe {
                id: cid,
                object_type: "temp_probe",
                device_id: id,
                component_index: i,
                // A probe named like its device reports the device's own temperature (anchor behaviour).
                probe_id: (cname == dev.name).then_some(-1),
                name: cname,
                requires_output: c.requires_output.clone(),
                custom: c.custom.clone(),
                ..TempProbe::default()
            })
            .collect();
        for p in &dev.temp_probes {
            if let Some(req) = &p.requires_output
                && !dev.outputs.iter().any(|o| &o.name == req)
            {
                let names: Vec<&str> = dev.outputs.iter().map(|o| o.name.as_str()).collect();
                problems.push(Problem::new(
                    &at,
                    format!(
                        "TempProbes '{}': RequiresOutput '{req}' is not an output of this device (its outputs: {})",
                        p.name,
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ),
                ));
            }
        }
        if dev.simulate {
            dev.simulation_file = Some(simulation_file(settings, &dev.name));
            dev.supported_webhooks = simulated_webhooks(&dev);
        }
        devices.push(dev);
    }

    check_unique(&devices, &mut problems);
    if problems.is_empty() {
        Ok(devices)
    } else {
        Err(problems)
    }
}

fn list(cfg: &DeviceConfig, kind: ComponentKind) -> &Option<Vec<ComponentConfig>> {
    match kind {
        ComponentKind::Input => &cfg.inputs,
        ComponentKind::Output => &cfg.outputs,
        ComponentKind::Meter => &cfg.meters,
        ComponentKind::TempProbe => &cfg.temp_probes,
    }
}

fn list_mut(cfg: &mut DeviceConfig, kind: ComponentKind) -> &mut Option<Vec<ComponentConfig>> {
    match kind {
        ComponentKind::Input => &mut cfg.inputs,
        ComponentKind::Output => &mut cfg.outputs,
        ComponentKind::Meter => &mut cfg.meters,
        ComponentKind::TempProbe => &mut cfg.temp_probes,
    }
}

/// Hands out IDs from 1 upwards, skipping reserved ones.
struct Counter {
    used: HashSet<i64>,
    next: i64,
}

impl Counter {
    fn new(used: impl Iterator<Item = i64>) -> Self {
        Counter {
            used: used.collect(),
            next: 1,
        }
    }

    fn next(&mut self) -> i64 {
        while self.used.contains(&self.next) {
            self.next += 1;
        }
        self.used.insert(self.next);
        self.next
    }
}

/// Longest name accepted, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 100;

/// What is wrong with a device or component name, if anything: too long for a name or for the simulation file
/// it names, or holding control characters (a line break would split the one line per fact of every output).
fn name_problem(name: &str) -> Option<String> {
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Some(format!(
            "is {chars} characters long; use at most {MAX_NAME_CHARS}"
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Some(format!(
            "{} contains the control character {:?}; remove it",
            crate::text::quote(name, 60),
            c
        ));
    }
    // Simulation files are `<name with non-alphanumerics as _>.json`; most file systems allow 255 bytes.
    let file_bytes = name
        .chars()
        .map(|c| if c.is_alphanumeric() { c.len_utf8() } else { 1 })
        .sum::<usize>()
        + ".json".len();
    if file_bytes > 255 {
        return Some(format!(
            "would make a simulation file name of {file_bytes} bytes (file systems allow 255); shorten it"
        ));
    }
    None
}

/// The simulation file of a device: its name with every non-alphanumeric character replaced by `_`.
pub(crate) fn simulation_file(settings: &Settings, name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    settings.simulation_folder.join(format!("{safe}.json"))
}

/// The webhook events a simulated device reports, from its model's inputs and outputs.
fn simulated_webhooks(dev: &Device) -> Vec<String> {
    let mut events = Vec::new();
    match dev.protocol {
        Some(Protocol::Rpc) | Some(Protocol::Rest) => {
            if !dev.inputs.is_empty() {
                events.extend(
                    [
                        "input.toggle_on",
                        "input.toggle_off",
                        "input.button_push",
                        "input.button_longpush",
                    ]
                    .map(String::from),
                );
                if dev.protocol == Some(Protocol::Rpc) {
                    events.extend(
                        ["input.button_doublepush", "input.button_triplepush"].map(String::from),
                    );
                }
            }
            if !dev.outputs.is_empty() {
                events.extend(["switch.on", "switch.off"].map(String::from));
            }
        }
        _ => {}
    }
    events
}

fn check_unique(devices: &[Device], problems: &mut Vec<Problem>) {
    fn dupes<'a, K: std::hash::Hash + Eq + std::fmt::Display>(
        items: impl Iterator<Item = (K, &'a str)>,
        what: &str,
        field: &str,
        problems: &mut Vec<Problem>,
    ) {
        let mut seen: HashMap<K, &str> = HashMap::new();
        for (key, owner) in items {
            if let Some(first) = seen.get(&key) {
                problems.push(Problem::new(
                    "",
                    format!("{what} {field} {key} is used by both {first} and {owner}; {field}s must be unique"),
                ));
            } else {
                seen.insert(key, owner);
            }
        }
    }
    dupes(
        devices.iter().map(|d| (d.id, d.name.as_str())),
        "device",
        "ID",
        problems,
    );
    dupes(
        devices
            .iter()
            .map(|d| (format!("'{}'", d.name), d.name.as_str())),
        "device",
        "Name",
        problems,
    );
    let labels: Vec<String> = devices
        .iter()
        .map(|d| format!("device '{}'", d.name))
        .collect();
    macro_rules! per_kind {
        ($field:ident, $what:expr) => {
            let items: Vec<(i64, String, &str)> = devices
                .iter()
                .zip(&labels)
                .flat_map(|(d, l)| {
                    d.$field
                        .iter()
                        .map(move |c| (c.id, c.name.clone(), l.as_str()))
                })
                .collect();
            dupes(
                items.iter().map(|(id, _, l)| (*id, *l)),
                $what,
                "ID",
                problems,
            );
            dupes(
                items.iter().map(|(_, n, l)| (format!("'{n}'"), *l)),
                $what,
                "Name",
                problems,
            );
        };
    }
    per_kind!(inputs, "input");
    per_kind!(outputs, "output");
    per_kind!(meters, "meter");
    per_kind!(temp_probes, "temp_probe");
    let files: Vec<(String, &str)> = devices
        .iter()
        .filter_map(|d| {
            Some((
                d.simulation_file.as_ref()?.display().to_string(),
                d.name.as_str(),
            ))
        })
        .collect();
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (file, name) in &files {
        if let Some(first) = seen.insert(file, name) {
            problems.push(Problem::new(
                "",
                format!("simulated devices '{first}' and '{name}' would share the simulation file {file}; rename one"),
            ));
        }
    }
}

impl Settings {
    /// Checks every installation rule (models, component counts, hostnames, unique names and IDs, probe
    /// limits, ...) without starting anything. Empty when `Controller::open` would accept the settings.
    pub fn check(&self) -> Vec<Problem> {
        plan(self).err().unwrap_or_default()
    }
}
