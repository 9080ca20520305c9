//! Turns settings into the installation: IDs, default names, components per model, and every init rule.
//!
//! IDs follow the anchor's scheme: one counter per kind (devices, inputs, outputs, meters, probes) across all
//! devices, starting at 1 and skipping IDs that are configured anywhere. Unconfigured component kinds of a
//! vendor model get as many default components as the model has. Every rule violation is collected.
//!
//! A device whose shape the configuration leaves open (no `Profile`, no list of a kind that differs between
//! its model's profiles; a Tasmota device without `Covers`) is planned in its model's default shape and gets a
//! [`Follow`]: its components in every other profile, which its first contact at open picks from. Their IDs are
//! fixed here, from the configuration alone: the default shape's components keep theirs, and the ones another
//! profile has beyond them (a 2PM's cover) take IDs reserved after every planned ID of their kind, device by
//! device in configuration order. So no device's IDs depend on what another reported, or on whether it answered.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::config::{Channel, ComponentConfig, DeviceConfig, Settings};
use crate::error::Problem;
use crate::models::{ModelRef, Protocol, SensorQuantity, Shape};
use crate::objects::{ComponentKind, Cover, Device, Input, Meter, Output, Sensor, TempProbe};

/// At most this many add-on probes per device.
pub const MAX_TEMP_PROBES: usize = 5;

/// Builds the initial device objects, or every problem that prevents it.
pub(crate) fn plan(settings: &Settings) -> Result<Vec<Device>, Vec<Problem>> {
    plan_following(settings).map(|(devices, _)| devices)
}

/// Builds the initial device objects and, per device, what its first contact may still decide (`None`: its
/// shape is fixed by the configuration, or it is simulated), or every problem that prevents it.
pub(crate) fn plan_following(settings: &Settings) -> Result<Planned, Vec<Problem>> {
    let (devices, follows, problems) = plan_all(settings);
    if problems.is_empty() {
        Ok((devices, follows))
    } else {
        Err(problems)
    }
}

/// The planned devices and, by position, what each one's first contact may decide.
pub(crate) type Planned = (Vec<Device>, Vec<Option<std::sync::Arc<Follow>>>);

/// Most shutters a Tasmota device reports (`Shutter1`…`Shutter4`): cover IDs reserved for a Tasmota device
/// without `Covers`.
pub(crate) const TASMOTA_SHUTTERS: usize = 4;

/// The components one device may take at its first contact at open, when the configuration leaves its shape
/// to the device (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Follow {
    /// Shelly: the device's components in each profile other than the planned one.
    pub(crate) profiles: Vec<(String, Components)>,
    /// Tasmota: the covers its shutters become, the first n for n shutters.
    pub(crate) shutters: Vec<Cover>,
}

impl Follow {
    /// The components in profile `name` (names compare without regard to case).
    pub(crate) fn profile(&self, name: &str) -> Option<&Components> {
        self.profiles
            .iter()
            .find(|(p, _)| p.eq_ignore_ascii_case(name))
            .map(|(_, c)| c)
    }
}

/// A device's inputs, outputs, meters and covers in one profile, meters linked to what they measure.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Components {
    pub(crate) inputs: Vec<Input>,
    pub(crate) outputs: Vec<Output>,
    pub(crate) meters: Vec<Meter>,
    pub(crate) covers: Vec<Cover>,
}

impl Components {
    /// Gives `dev` these components (their states unknown until read).
    pub(crate) fn apply(&self, dev: &mut Device) {
        dev.inputs = self.inputs.clone();
        dev.outputs = self.outputs.clone();
        dev.meters = self.meters.clone();
        dev.covers = self.covers.clone();
        dev.update_totals();
    }
}

/// Component counts sc-smart-device's model table had where smartdev's differs (the hardware has more):
/// defaults assigned after such a device shift compared with the old library.
const ANCHOR_COUNTS: [(&str, ComponentKind, usize); 1] = [("Shelly3EM", ComponentKind::Output, 0)];

/// Components whose default ID or name differs from what sc-smart-device assigned for the same file, each
/// with how to pin it. Empty when nothing differs (IDs and names configured, or no affected model).
pub(crate) fn anchor_differences(settings: &Settings) -> Vec<Problem> {
    let mut old = settings.clone();
    let mut affected = false;
    for cfg in &mut old.devices {
        let canonical = settings.models.get(&cfg.model).map(|m| m.model.as_str());
        for (model, kind, count) in ANCHOR_COUNTS {
            if canonical == Some(model) && list(cfg, kind).is_none() {
                *list_mut(cfg, kind) = Some(vec![ComponentConfig::default(); count]);
                affected = true;
            }
        }
    }
    if !affected {
        return Vec::new();
    }
    let (new_devices, _, _) = plan_all(settings);
    let (old_devices, _, _) = plan_all(&old);
    let root = &settings.root_key;
    let mut notes = Vec::new();
    for ((cfg, new), old) in settings.devices.iter().zip(&new_devices).zip(&old_devices) {
        let at = format!(
            "{root}.Devices[{}] ('{}')",
            cfg.index,
            crate::text::clip(&new.name, 60)
        );
        for kind in [
            ComponentKind::Input,
            ComponentKind::Output,
            ComponentKind::Meter,
        ] {
            let pick = |d: &Device| -> Vec<(i64, String)> {
                match kind {
                    ComponentKind::Input => {
                        d.inputs.iter().map(|c| (c.id, c.name.clone())).collect()
                    }
                    ComponentKind::Output => {
                        d.outputs.iter().map(|c| (c.id, c.name.clone())).collect()
                    }
                    _ => d.meters.iter().map(|c| (c.id, c.name.clone())).collect(),
                }
            };
            let (now, before) = (pick(new), pick(old));
            for (i, (id, name)) in now.iter().enumerate() {
                let key = format!("{}[{i}]", kind.config_key());
                match before.get(i) {
                    Some((old_id, old_name)) if (old_id, old_name) != (id, name) => {
                        notes.push(Problem::new(
                            &at,
                            format!(
                                "{key} gets ID {id}, '{name}'; sc-smart-device gave it ID {old_id}, '{old_name}' (it did not know the Shelly3EM's relay). To keep the old ones, write ID: {old_id} and Name: {old_name} for it"
                            ),
                        ));
                    }
                    None => notes.push(Problem::new(
                        &at,
                        format!(
                            "{key} ('{name}', ID {id}) is new: sc-smart-device did not know this {}",
                            kind.as_str()
                        ),
                    )),
                    _ => {}
                }
            }
        }
    }
    notes
}

/// Plans every device and collects every problem (devices are built even where a rule failed).
/// Where a device's problems are reported (`SmartDevices.Devices[3] ('Hall', ID 4)`): written only for a
/// device that has one, as `open` plans every device before it dials the first.
struct Place<'a> {
    root: &'a str,
    cfg: &'a DeviceConfig,
    id: i64,
    text: std::cell::OnceCell<String>,
}

impl Place<'_> {
    fn text(&self) -> &str {
        self.text.get_or_init(|| {
            let id = self.id;
            let name = match &self.cfg.name {
                Some(n) => std::borrow::Cow::Borrowed(n.as_str()),
                None => std::borrow::Cow::Owned(format!("Device {id}")),
            };
            let shown = if name.chars().any(char::is_control) {
                crate::text::quote(&name, 60)
            } else {
                format!("'{}'", crate::text::clip(&name, 60))
            };
            format!(
                "{}.Devices[{}] ({shown}, ID {id})",
                self.root, self.cfg.index
            )
        })
    }
}

fn plan_all(
    settings: &Settings,
) -> (
    Vec<Device>,
    Vec<Option<std::sync::Arc<Follow>>>,
    Vec<Problem>,
) {
    let mut problems = Vec::new();
    let root = &settings.root_key;

    // Resolve models and synthesise placeholder components for unconfigured vendor kinds.
    let mut configs: Vec<DeviceConfig> = settings.devices.clone();
    let mut models = Vec::with_capacity(configs.len());
    let mut shapes: Vec<Result<Option<Shape>, String>> = Vec::with_capacity(configs.len());
    // Whether the device's first contact decides its shape (decided before placeholders fill its lists).
    let mut open_shape = Vec::with_capacity(configs.len());
    for cfg in &mut configs {
        let model = settings.models.resolve(&cfg.model);
        open_shape.push(!cfg.simulate && model.is_some_and(|m| shape_left_open(m, cfg)));
        let shape = match model {
            Some(ModelRef::Vendor(info)) => planned_shape(info, cfg).map(Some),
            Some(ModelRef::Tasmota) if cfg.profile.is_some() => {
                Err("Tasmota devices have no profiles; remove Profile".to_string())
            }
            _ => Ok(None),
        };
        if let (Some(ModelRef::Vendor(info)), Ok(Some(shape))) = (model, &shape) {
            for (kind, count) in [
                (ComponentKind::Input, shape.inputs),
                (ComponentKind::Output, shape.outputs),
                (ComponentKind::Meter, shape.meters),
                (ComponentKind::Cover, shape.covers),
            ] {
                let list = list_mut(cfg, kind);
                if list.is_none() && count > 0 {
                    *list = Some(vec![ComponentConfig::default(); count]);
                }
            }
            if cfg.sensors.is_none() && !info.sensors.is_empty() {
                cfg.sensors = Some(
                    info.sensors
                        .iter()
                        .map(|&q| ComponentConfig {
                            quantity: Some(q),
                            ..ComponentConfig::default()
                        })
                        .collect(),
                );
            }
        }
        models.push(model);
        shapes.push(shape);
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
    let mut places = Vec::with_capacity(configs.len());
    for ((cfg, model), shape) in configs.iter().zip(&models).zip(&shapes) {
        let id = cfg.id.unwrap_or_else(|| device_ids.next());
        let name = cfg.name.clone().unwrap_or_else(|| format!("Device {id}"));
        let place = Place {
            root,
            cfg,
            id,
            text: std::cell::OnceCell::new(),
        };
        let at = || place.text();
        if let Some(why) = name_problem(&name) {
            problems.push(Problem::new(at(), format!("Name {why}")));
        }
        for c in ComponentKind::ALL
            .iter()
            .flat_map(|&k| list(cfg, k).iter().flatten())
        {
            if let Some(why) = c.name.as_deref().and_then(name_problem) {
                problems.push(Problem::new(at(), format!("a component Name {why}")));
            }
        }
        let mut dev = Device {
            id,
            name,
            object_type: "device",
            model: cfg.model.clone(),
            hostname: cfg.hostname.clone(),
            address: cfg.hostname.clone().filter(|_| !cfg.simulate),
            // The configured MAC; a simulated device without one gets a stable one derived from its ID.
            mac_address: match (cfg.mac, cfg.simulate) {
                (Some(mac), _) => Some(mac.to_string()),
                (None, true) => {
                    Some(crate::mac::Mac::derived(&format!("simulated device {id}")).to_string())
                }
                (None, false) => None,
            },
            port: cfg.port.unwrap_or(if cfg.tls { 443 } else { 80 }),
            transport: (!cfg.simulate).then_some(if settings.channel_of(cfg) == Channel::Mqtt {
                crate::objects::Transport::Mqtt
            } else if cfg.tls {
                crate::objects::Transport::Https
            } else {
                crate::objects::Transport::Http
            }),
            simulate: cfg.simulate,
            expect_offline: cfg.expect_offline,
            online: cfg.simulate,
            // Reports through the outbound WebSocket when it wakes; not offline while it sleeps.
            sleeping: crate::sleep::sleeps(settings, cfg),
            custom: cfg.custom.clone(),
            ..Device::default()
        };
        if let Err(why) = shape {
            problems.push(Problem::new(at(), format!("Profile: {why}")));
        }
        let shape = shape.as_ref().ok().and_then(Option::as_ref);
        match (model, shape) {
            (Some(ModelRef::Vendor(info)), Some(shape)) => {
                dev.model = info.model.clone();
                dev.model_name = info.name.clone();
                dev.generation = Some(info.generation);
                dev.protocol = Some(info.protocol);
                dev.profile = shape.profile.clone();
                // A battery device asleep is not a device gone: no offline warnings for it, unless it reports
                // through the outbound WebSocket (then it is offline only when it misses its period).
                dev.expect_offline |= info.sleeps && !dev.sleeping;
                // Only a profile other than the default is worth naming.
                let in_profile = shape
                    .profile
                    .as_deref()
                    .filter(|_| shape.profile != info.profile)
                    .map(|p| format!(" in profile {p}"))
                    .unwrap_or_default();
                for (kind, count) in [
                    (ComponentKind::Input, shape.inputs),
                    (ComponentKind::Output, shape.outputs),
                    (ComponentKind::Meter, shape.meters),
                    (ComponentKind::Cover, shape.covers),
                ] {
                    let n = list(cfg, kind).as_ref().map_or(0, Vec::len);
                    if n != count {
                        let other = info
                            .profile_names()
                            .into_iter()
                            .filter_map(|p| info.shape(p))
                            .filter(|s| s.profile != shape.profile)
                            .find(|s| match kind {
                                ComponentKind::Input => s.inputs == n,
                                ComponentKind::Output => s.outputs == n,
                                ComponentKind::Meter => s.meters == n,
                                _ => s.covers == n,
                            })
                            .and_then(|s| s.profile);
                        let hint = match other {
                            Some(p) => format!("; or set Profile: {p} (it has {n})"),
                            None => String::new(),
                        };
                        problems.push(Problem::new(
                            at(),
                            format!(
                                "{}: model {}{in_profile} has {count} {}(s) but {n} are configured; list exactly {count} or leave the key out{hint}",
                                kind.config_key(),
                                info.model,
                                kind.as_str()
                            ),
                        ));
                    }
                }
            }
            (Some(ModelRef::Vendor(_)), None) => {}
            (Some(ModelRef::Tasmota), _) => {
                dev.model = crate::models::TASMOTA.into();
                dev.model_name = crate::models::TASMOTA.into();
                dev.protocol = Some(Protocol::Tasmota);
                if cfg.inputs.as_ref().is_some_and(|l| !l.is_empty()) {
                    problems.push(Problem::new(
                        at(),
                        "Inputs: Tasmota devices have no inputs (input events are not supported); remove the Inputs block",
                    ));
                }
                let hooks = ComponentKind::ALL
                    .iter()
                    .flat_map(|&k| list(cfg, k).iter().flatten())
                    .any(|c| c.webhooks);
                if hooks {
                    log::warn!("{}: Webhooks has no effect on Tasmota devices", at());
                }
            }
            (None, _) => {
                let hints = settings.models.suggest(&cfg.model);
                let hint = if hints.is_empty() {
                    String::new()
                } else {
                    format!("; did you mean {}?", hints.join(" or "))
                };
                problems.push(Problem::new(
                    at(),
                    format!(
                        "Model: '{}' is not in the model library (sdctl models lists them; use Tasmota for Tasmota devices){hint}",
                        cfg.model
                    ),
                ));
            }
        }
        let mqtt = settings.channel_of(cfg) == Channel::Mqtt && !cfg.simulate;
        if mqtt {
            problems.extend(mqtt_problems(settings, cfg, at()));
        }
        match (&cfg.hostname, cfg.simulate) {
            // With a MAC, discovery may find the address later; the device opens offline until then.
            (None, false) if cfg.mac.is_some() => {}
            // Reached through the broker: no address needed.
            (None, false) if mqtt => {}
            (None, false) => problems.push(Problem::new(
                at(),
                "Hostname is required for a real device (or give its MAC, or set Simulate: true)",
            )),
            (Some(h), _) => {
                if let Err(why) = crate::hostname::check(h) {
                    problems.push(Problem::new(at(), format!("Hostname '{h}' {why}")));
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
        let cover_ids = ids(ComponentKind::Cover, &mut kind_ids);
        let sensor_ids = ids(ComponentKind::Sensor, &mut kind_ids);

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
        dev.covers = cfgs(ComponentKind::Cover)
            .zip(cover_ids)
            .enumerate()
            .map(|(i, (c, (cid, cname)))| Cover {
                id: cid,
                name: cname,
                object_type: "cover",
                device_id: id,
                component_index: i,
                webhooks: c.webhooks && dev.protocol != Some(Protocol::Tasmota),
                custom: c.custom.clone(),
                ..Cover::default()
            })
            .collect();
        // Link meters to the outputs or covers they measure.
        for i in 0..dev.meters.len() {
            let (output, cover) = match (model, shape) {
                (Some(ModelRef::Vendor(_)), Some(shape)) => {
                    (shape.meter_output(i), shape.meter_cover(i))
                }
                (Some(ModelRef::Tasmota), _) => (Some(i), None),
                _ => (None, None),
            };
            if let Some(o) = output.filter(|&o| o < dev.outputs.len()) {
                dev.meters[i].output_id = Some(dev.outputs[o].id);
                dev.outputs[o].has_meter = true;
            }
            if let Some(c) = cover.filter(|&c| c < dev.covers.len()) {
                dev.meters[i].cover_id = Some(dev.covers[c].id);
                dev.covers[c].has_meter = true;
            }
        }
        let built_in: &[SensorQuantity] = match model {
            Some(ModelRef::Vendor(info)) => &info.sensors,
            _ => &[],
        };
        dev.sensors = cfgs(ComponentKind::Sensor)
            .zip(sensor_ids)
            .enumerate()
            .map(|(i, (c, (cid, cname)))| {
                let own = built_in.get(i).copied();
                let quantity = c.quantity.or(own).unwrap_or(SensorQuantity::Temperature);
                let sat = || format!("{} Sensors[{i}]", at());
                if let Some(own) = own
                    && quantity != own
                {
                    problems.push(Problem::new(
                        sat(),
                        format!(
                            "the device's own sensor {i} measures {own}, not {quantity}; list the built-in sensors first, in the model's order ({})",
                            built_in.iter().map(|q| q.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                if own.is_none() {
                    if c.quantity.is_none() {
                        problems.push(Problem::new(
                            sat(),
                            "Quantity is required for an add-on sensor: temperature, humidity or voltage",
                        ));
                    }
                    if c.name.is_none() {
                        problems.push(Problem::new(
                            sat(),
                            "Name is required for an add-on sensor: the peripheral's name as set in the vendor app",
                        ));
                    }
                }
                // A built-in sensor is the device's `<quantity>:0` (its n-th of that quantity).
                let sensor_id = own.map(|q| {
                    built_in[..i].iter().filter(|&&b| b == q).count() as i64
                });
                Sensor {
                    id: cid,
                    name: cname,
                    object_type: "sensor",
                    device_id: id,
                    component_index: i,
                    quantity,
                    unit: quantity.unit(),
                    sensor_id,
                    built_in: own.is_some(),
                    requires_output: c.requires_output.clone(),
                    custom: c.custom.clone(),
                    ..Sensor::default()
                }
            })
            .collect();
        if dev.inputs.iter().any(|i| i.webhooks) && dev.protocol == Some(Protocol::Tasmota) {
            dev.inputs.iter_mut().for_each(|i| i.webhooks = false);
        }
        let probe_cfgs: Vec<&ComponentConfig> = cfgs(ComponentKind::TempProbe).collect();
        if probe_cfgs.len() > MAX_TEMP_PROBES {
            problems.push(Problem::new(
                at(),
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
        places.push(place);
        if dev.simulate {
            dev.simulation_file = Some(simulation_file(settings, &dev.name));
            dev.supported_webhooks = simulated_webhooks(&dev);
        }
        devices.push(dev);
    }

    check_requires_output(&devices, &places, &mut problems);
    check_unique(&devices, &mut problems);
    let follows: Vec<Option<std::sync::Arc<Follow>>> = devices
        .iter()
        .zip(&models)
        .zip(&open_shape)
        .map(|((dev, model), &open)| {
            let model = (*model).filter(|_| open)?;
            Some(std::sync::Arc::new(follow(dev, model, &mut kind_ids)))
        })
        .collect();
    check_follow_names(&devices, &follows, &places, &mut problems);
    (devices, follows, problems)
}

/// A component a device may take from its reported profile is named `Cover <ID>` (etc.) with an ID no other
/// component has, so only a configured name can be the same; that would make the name mean two components.
fn check_follow_names(
    devices: &[Device],
    follows: &[Option<std::sync::Arc<Follow>>],
    places: &[Place],
    problems: &mut Vec<Problem>,
) {
    fn names<'a>(
        inputs: &'a [Input],
        outputs: &'a [Output],
        meters: &'a [Meter],
        covers: &'a [Cover],
    ) -> impl Iterator<Item = (ComponentKind, &'a str)> {
        let i = inputs
            .iter()
            .map(|c| (ComponentKind::Input, c.name.as_str()));
        let o = outputs
            .iter()
            .map(|c| (ComponentKind::Output, c.name.as_str()));
        let m = meters
            .iter()
            .map(|c| (ComponentKind::Meter, c.name.as_str()));
        let k = covers
            .iter()
            .map(|c| (ComponentKind::Cover, c.name.as_str()));
        i.chain(o).chain(m).chain(k)
    }
    fn of(d: &Device) -> Vec<(ComponentKind, &str)> {
        names(&d.inputs, &d.outputs, &d.meters, &d.covers).collect()
    }
    let planned: HashSet<(ComponentKind, &str)> = devices.iter().flat_map(of).collect();
    for ((dev, follow), at) in devices.iter().zip(follows).zip(places) {
        let Some(follow) = follow else { continue };
        let own: HashSet<(ComponentKind, &str)> = of(dev).into_iter().collect();
        let taken = follow
            .profiles
            .iter()
            .flat_map(|(_, c)| names(&c.inputs, &c.outputs, &c.meters, &c.covers))
            .chain(names(&[], &[], &[], &follow.shutters));
        let mut reported = HashSet::new();
        for (kind, name) in taken {
            if !own.contains(&(kind, name))
                && planned.contains(&(kind, name))
                && reported.insert(name)
            {
                problems.push(Problem::new(
                    at.text(),
                    format!(
                        "its {} '{name}' in a profile it may report has the name configured for another {}; rename that one, or set Profile (and its components) for this device",
                        kind.as_str(),
                        kind.as_str()
                    ),
                ));
            }
        }
    }
}

/// Whether the configuration leaves the device's shape to the device: a Shelly model with profiles, no
/// `Profile`, and no list of a kind whose count differs between the profiles; a Tasmota device without `Covers`.
/// What is wrong with a real device on `Channel: mqtt`: no `Mqtt` block, a family that does not speak it
/// here (Gen1), or no usable topic.
fn mqtt_problems(settings: &Settings, cfg: &DeviceConfig, at: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    if settings.mqtt.is_none() {
        out.push(Problem::new(
            at,
            format!(
                "Channel: mqtt needs the broker: add an Mqtt block under {} (e.g. Mqtt: {{Host: broker.local}}), or set another Channel",
                settings.root_key
            ),
        ));
    }
    let family = match settings.models.resolve(&cfg.model) {
        Some(ModelRef::Tasmota) => crate::mqtt::topics::Family::Tasmota,
        Some(ModelRef::Vendor(m)) if m.protocol == Protocol::Rpc => {
            crate::mqtt::topics::Family::Rpc
        }
        Some(ModelRef::Vendor(_)) => {
            out.push(Problem::new(
                at,
                "Channel: mqtt is for Shelly Gen2+ and Tasmota devices; smartdev speaks to Gen1 devices over HTTP only: set Channel: http for this device",
            ));
            return out;
        }
        // The unknown model is reported on its own.
        None => return out,
    };
    if let Err(why) = crate::mqtt::topics::for_device(cfg, family) {
        out.push(Problem::new(at, why));
    }
    out
}

fn shape_left_open(model: ModelRef<'_>, cfg: &DeviceConfig) -> bool {
    let info = match model {
        ModelRef::Tasmota => return cfg.covers.is_none(),
        ModelRef::Vendor(info) => info,
    };
    if cfg.profile.is_some() || info.profiles.is_empty() {
        return false;
    }
    let shapes: Vec<Shape> = info
        .profile_names()
        .into_iter()
        .filter_map(|p| info.shape(p))
        .collect();
    let count = |s: &Shape, kind| match kind {
        ComponentKind::Input => s.inputs,
        ComponentKind::Output => s.outputs,
        ComponentKind::Meter => s.meters,
        _ => s.covers,
    };
    [
        ComponentKind::Input,
        ComponentKind::Output,
        ComponentKind::Meter,
        ComponentKind::Cover,
    ]
    .into_iter()
    .all(|kind| {
        list(cfg, kind).is_none()
            || shapes
                .iter()
                .all(|s| count(s, kind) == count(&shapes[0], kind))
    })
}

/// The device's components in every profile but its planned one. Components the planned shape has keep
/// their IDs and names; the ones beyond get IDs reserved now, as many per kind as the largest profile needs.
fn follow(
    dev: &Device,
    model: ModelRef<'_>,
    kind_ids: &mut HashMap<ComponentKind, Counter>,
) -> Follow {
    let mut reserve = |kind: ComponentKind, n: usize| -> Vec<i64> {
        let counter = kind_ids.get_mut(&kind).expect("all kinds");
        (0..n).map(|_| counter.next()).collect()
    };
    let info = match model {
        ModelRef::Tasmota => {
            let ids = reserve(ComponentKind::Cover, TASMOTA_SHUTTERS);
            let shutters = ids
                .into_iter()
                .enumerate()
                .map(|(i, cid)| Cover {
                    id: cid,
                    name: format!("{} {cid}", ComponentKind::Cover.default_name_prefix()),
                    object_type: "cover",
                    device_id: dev.id,
                    component_index: i,
                    ..Cover::default()
                })
                .collect();
            return Follow {
                profiles: Vec::new(),
                shutters,
            };
        }
        ModelRef::Vendor(info) => info,
    };
    let others: Vec<Shape> = info
        .profile_names()
        .into_iter()
        .filter_map(|p| info.shape(p))
        .filter(|s| s.profile != dev.profile)
        .collect();
    let beyond = |have: usize, want: fn(&Shape) -> usize| {
        others
            .iter()
            .map(want)
            .max()
            .unwrap_or(0)
            .saturating_sub(have)
    };
    let extra_inputs = reserve(ComponentKind::Input, beyond(dev.inputs.len(), |s| s.inputs));
    let extra_outputs = reserve(
        ComponentKind::Output,
        beyond(dev.outputs.len(), |s| s.outputs),
    );
    let extra_meters = reserve(ComponentKind::Meter, beyond(dev.meters.len(), |s| s.meters));
    let extra_covers = reserve(ComponentKind::Cover, beyond(dev.covers.len(), |s| s.covers));
    let name = |kind: ComponentKind, cid: i64| format!("{} {cid}", kind.default_name_prefix());
    let profiles = others
        .iter()
        .map(|shape| {
            let mut c = Components {
                inputs: take(&dev.inputs, shape.inputs, &extra_inputs, |i, cid| Input {
                    id: cid,
                    name: name(ComponentKind::Input, cid),
                    object_type: "input",
                    device_id: dev.id,
                    component_index: i,
                    ..Input::default()
                }),
                outputs: take(&dev.outputs, shape.outputs, &extra_outputs, |i, cid| {
                    Output {
                        id: cid,
                        name: name(ComponentKind::Output, cid),
                        object_type: "output",
                        device_id: dev.id,
                        component_index: i,
                        ..Output::default()
                    }
                }),
                meters: take(&dev.meters, shape.meters, &extra_meters, |i, cid| Meter {
                    id: cid,
                    name: name(ComponentKind::Meter, cid),
                    object_type: "meter",
                    device_id: dev.id,
                    component_index: i,
                    ..Meter::default()
                }),
                covers: take(&dev.covers, shape.covers, &extra_covers, |i, cid| Cover {
                    id: cid,
                    name: name(ComponentKind::Cover, cid),
                    object_type: "cover",
                    device_id: dev.id,
                    component_index: i,
                    ..Cover::default()
                }),
            };
            // Meters measure what this profile wires them to.
            c.outputs.iter_mut().for_each(|o| o.has_meter = false);
            c.covers.iter_mut().for_each(|o| o.has_meter = false);
            for (i, m) in c.meters.iter_mut().enumerate() {
                m.output_id = None;
                m.cover_id = None;
                if let Some(o) = shape.meter_output(i).and_then(|o| c.outputs.get_mut(o)) {
                    m.output_id = Some(o.id);
                    o.has_meter = true;
                }
                if let Some(k) = shape.meter_cover(i).and_then(|k| c.covers.get_mut(k)) {
                    m.cover_id = Some(k.id);
                    k.has_meter = true;
                }
            }
            (shape.profile.clone().unwrap_or_default(), c)
        })
        .collect();
    Follow {
        profiles,
        shutters: Vec::new(),
    }
}

/// The first `n` of the planned components, then new ones made with the reserved IDs.
fn take<T: Clone>(
    planned: &[T],
    n: usize,
    reserved: &[i64],
    make: impl Fn(usize, i64) -> T,
) -> Vec<T> {
    (0..n)
        .map(|i| match planned.get(i) {
            Some(c) => c.clone(),
            None => make(i, reserved[i - planned.len()]),
        })
        .collect()
}

fn list(cfg: &DeviceConfig, kind: ComponentKind) -> &Option<Vec<ComponentConfig>> {
    match kind {
        ComponentKind::Input => &cfg.inputs,
        ComponentKind::Output => &cfg.outputs,
        ComponentKind::Meter => &cfg.meters,
        ComponentKind::TempProbe => &cfg.temp_probes,
        ComponentKind::Cover => &cfg.covers,
        ComponentKind::Sensor => &cfg.sensors,
    }
}

/// The shape a device is planned with: its configured `Profile`, else a profile with covers when `Covers` are
/// configured for a model whose default has none, else the model's default.
fn planned_shape(info: &crate::models::ModelInfo, cfg: &DeviceConfig) -> Result<Shape, String> {
    if let Some(p) = cfg.profile.as_deref() {
        return info.shape_for(Some(p));
    }
    let wants_covers = cfg.covers.as_ref().is_some_and(|c| !c.is_empty());
    if wants_covers && info.covers == 0 {
        return info
            .profile_names()
            .into_iter()
            .filter_map(|p| info.shape(p))
            .find(|s| s.covers > 0)
            .ok_or_else(|| format!("{} has no covers in any profile; remove Covers", info.model));
    }
    Ok(info.default_shape())
}

fn list_mut(cfg: &mut DeviceConfig, kind: ComponentKind) -> &mut Option<Vec<ComponentConfig>> {
    match kind {
        ComponentKind::Input => &mut cfg.inputs,
        ComponentKind::Output => &mut cfg.outputs,
        ComponentKind::Meter => &mut cfg.meters,
        ComponentKind::TempProbe => &mut cfg.temp_probes,
        ComponentKind::Cover => &mut cfg.covers,
        ComponentKind::Sensor => &mut cfg.sensors,
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
            if !dev.covers.is_empty() {
                events.extend(crate::event::COVER_EVENTS.map(String::from));
            }
        }
        _ => {}
    }
    events
}

/// `RequiresOutput` names an output of any device (a pool pump on one device, its pipe probe on another).
fn check_requires_output(devices: &[Device], places: &[Place], problems: &mut Vec<Problem>) {
    let outputs: Vec<&str> = devices
        .iter()
        .flat_map(|d| d.outputs.iter().map(|o| o.name.as_str()))
        .collect();
    for (dev, at) in devices.iter().zip(places) {
        let requirers = dev
            .temp_probes
            .iter()
            .map(|p| ("TempProbes", &p.name, &p.requires_output))
            .chain(
                dev.sensors
                    .iter()
                    .map(|p| ("Sensors", &p.name, &p.requires_output)),
            );
        for (key, pname, req) in requirers {
            if let Some(req) = req
                && !outputs.contains(&req.as_str())
            {
                problems.push(Problem::new(
                    at.text(),
                    format!(
                        "{key} '{pname}': RequiresOutput '{req}' is not the name of any output{}",
                        crate::suggest::hint(req, outputs.iter().copied())
                    ),
                ));
            }
        }
    }
}

/// Where a device or component is among the devices: the device's index and, for a component, its list's
/// key and its index there.
type Owner = (usize, Option<(&'static str, usize)>);

fn check_unique(devices: &[Device], problems: &mut Vec<Problem>) {
    // Owners are positions (`Devices[1] ('A')`, `Devices[0] ('A') Outputs[1]`): two devices may share a name.
    // Written only for a duplicate: `open` checks every device before it dials the first.
    let label = |(di, part): Owner| {
        let device = format!(
            "Devices[{di}] ('{}')",
            crate::text::clip(&devices[di].name, 60)
        );
        match part {
            Some((key, ci)) => format!("{device} {key}[{ci}]"),
            None => device,
        }
    };
    fn dupes<K: std::hash::Hash + Eq>(
        items: impl Iterator<Item = (K, Owner)>,
        shown: impl Fn(&K) -> String,
        label: &dyn Fn(Owner) -> String,
        (what, field): (&str, &str),
        problems: &mut Vec<Problem>,
    ) {
        let mut seen: HashMap<K, Owner> = HashMap::new();
        for (key, owner) in items {
            match seen.entry(key) {
                std::collections::hash_map::Entry::Occupied(first) => problems.push(Problem::new(
                    "",
                    format!(
                        "{what} {field} {} is used by both {} and {}; {field}s must be unique",
                        shown(first.key()),
                        label(*first.get()),
                        label(owner)
                    ),
                )),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(owner);
                }
            }
        }
    }
    let id = |i: &i64| i.to_string();
    let quoted = |n: &&str| format!("'{n}'");
    let each = || devices.iter().enumerate();
    dupes(
        each().map(|(di, d)| (d.id, (di, None))),
        id,
        &label,
        ("device", "ID"),
        problems,
    );
    dupes(
        each().map(|(di, d)| (d.name.as_str(), (di, None))),
        quoted,
        &label,
        ("device", "Name"),
        problems,
    );
    macro_rules! per_kind {
        ($field:ident, $what:expr, $key:expr) => {
            let parts = || {
                each().flat_map(|(di, d)| {
                    d.$field
                        .iter()
                        .enumerate()
                        .map(move |(ci, c)| (c, (di, Some(($key, ci)))))
                })
            };
            dupes(
                parts().map(|(c, o)| (c.id, o)),
                id,
                &label,
                ($what, "ID"),
                problems,
            );
            dupes(
                parts().map(|(c, o)| (c.name.as_str(), o)),
                quoted,
                &label,
                ($what, "Name"),
                problems,
            );
        };
    }
    per_kind!(inputs, "input", "Inputs");
    per_kind!(outputs, "output", "Outputs");
    per_kind!(meters, "meter", "Meters");
    per_kind!(temp_probes, "temp_probe", "TempProbes");
    per_kind!(covers, "cover", "Covers");
    per_kind!(sensors, "sensor", "Sensors");
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
        let mut problems = plan(self).err().unwrap_or_default();
        // HTTPS devices: a CA file that can be read, or a trust file for a certificate pinned at first use.
        let mut stores = Vec::new();
        for (i, cfg) in self.devices.iter().enumerate() {
            if cfg.tls && !cfg.simulate {
                let name = cfg
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("device {}", i + 1));
                if let Err(why) = crate::driver::tls::trust_for(cfg, &name, self, &mut stores) {
                    problems.push(Problem::new(format!("{}.Devices[{i}]", self.root_key), why));
                }
            }
        }
        problems
    }

    /// Components whose default ID or name differs from what sc-smart-device assigned for the same file (its
    /// model table lacked the Shelly3EM's relay), each with how to pin the old one. Not errors: `sdctl check`
    /// prints them and `open` logs them as warnings.
    pub fn anchor_differences(&self) -> Vec<Problem> {
        anchor_differences(self)
    }
}
