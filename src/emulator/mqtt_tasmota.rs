//! Tasmota over MQTT, as the firmware speaks it with the default FullTopic `%prefix%/%topic%/` (the topic is
//! `tasmota_XXXXXX` unless given): last will `tele/<t>/LWT` `Offline` (retained), `Online` after connecting;
//! commands on `cmnd/<t>/<Command>` (and the group topic `cmnd/tasmotas/…`) run by the same handler as HTTP
//! `/cm` (`tasmota.rs`) and answered on `stat/<t>/RESULT`, power commands also on `stat/<t>/POWER<n>`,
//! `Status <n>` on `stat/<t>/STATUS<n>` (`Status 0`: one message per section; `Status0`: all in one on
//! `STATUS0`); a relay switched any other way publishes `stat/<t>/RESULT` and `stat/<t>/POWER<n>`; telemetry
//! `tele/<t>/STATE` and `tele/<t>/SENSOR` after connecting and every `TelePeriod` on the emulator clock
//! (thread `sd-emu-mqtt-tele`, looking every 10 ms, so a manual clock's `advance` is seen at once).

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::device::{Device, Family};
use super::lock::lock;
use super::state::DeviceState;
use super::{mqtt_gen1, tasmota};
use crate::mqtt::packet::Will;

/// Longest command payload taken.
const MAX_ARG: usize = 1024;
/// The group topic every Tasmota obeys by default.
const GROUP: &str = "tasmotas";
/// How often the telemetry thread looks at the clock.
const LOOK: Duration = Duration::from_millis(10);

thread_local! {
    /// Set while this thread runs a command that came over MQTT: its answer says what changed, so the state
    /// hook does not say it again.
    static IN_COMMAND: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn will(dev: &Device) -> Will {
    super::mqtt_link::retained_will(format!("tele/{}/LWT", dev.mqtt.prefix), b"Offline")
}

pub(crate) fn subscriptions(dev: &Device) -> Vec<String> {
    vec![
        format!("cmnd/{}/#", dev.mqtt.prefix),
        format!("cmnd/{GROUP}/#"),
    ]
}

/// After the CONNACK: `Online` (retained), the relay states changes are measured from, telemetry now.
pub(crate) fn on_connect(dev: &Device) {
    let t = &dev.mqtt.prefix;
    dev.mqtt.publish(&format!("tele/{t}/LWT"), b"Online", true);
    {
        let s = dev.state();
        *lock(&dev.mqtt.last) = Some(powers(&s));
    }
    dev.mqtt.schedule_tele(dev.clock.instant());
}

/// `POWER<n>` → `ON`/`OFF` for every relay.
fn powers(s: &DeviceState) -> Map<String, Value> {
    (0..s.outputs.len())
        .map(|i| (tasmota::power_key(s, i), json!(tasmota::power_text(s, i))))
        .collect()
}

/// A relay switched (not by an MQTT command, whose answer says it): `RESULT` and `POWER<n>`.
pub(crate) fn on_state(dev: &Device, s: &DeviceState) {
    let now = powers(s);
    let before = lock(&dev.mqtt.last).replace(now.clone());
    if IN_COMMAND.get() {
        return;
    }
    let Some(before) = before else {
        return;
    };
    let t = &dev.mqtt.prefix;
    for (k, v) in &now {
        if before.get(k) != Some(v) {
            let mut m = Map::new();
            m.insert(k.clone(), v.clone());
            dev.mqtt.publish(
                &format!("stat/{t}/RESULT"),
                Value::Object(m).to_string().as_bytes(),
                false,
            );
            let text = v.as_str().unwrap_or_default();
            dev.mqtt
                .publish(&format!("stat/{t}/{k}"), text.as_bytes(), false);
        }
    }
}

pub(crate) fn on_message(dev: &Device, topic: &str, payload: &[u8]) {
    let t = dev.mqtt.prefix.as_str();
    let Some(name) = topic
        .strip_prefix("cmnd/")
        .and_then(|r| r.strip_prefix(t).or_else(|| r.strip_prefix(GROUP)))
        .and_then(|r| r.strip_prefix('/'))
    else {
        return;
    };
    if name.is_empty() || name.contains('/') || payload.len() > MAX_ARG {
        return;
    }
    let arg = String::from_utf8_lossy(payload);
    let arg = arg.trim();
    let key = format!("cm {name}{}{arg}", if arg.is_empty() { "" } else { " " });
    dev.net.count(key);
    let lower = name.to_ascii_lowercase();
    IN_COMMAND.set(true);
    let answer = if lower == "status0" {
        tasmota::run(dev, "Status 0")
    } else {
        tasmota::run(dev, &format!("{name} {arg}"))
    };
    IN_COMMAND.set(false);
    let stat = |sub: &str, body: &[u8]| dev.mqtt.publish(&format!("stat/{t}/{sub}"), body, false);
    match lower.as_str() {
        "status0" => {
            stat("STATUS0", answer.to_string().as_bytes());
        }
        "status" => status(dev, arg, &answer),
        _ => {
            stat("RESULT", answer.to_string().as_bytes());
            if lower.starts_with("power") {
                for (k, v) in answer.as_object().into_iter().flatten() {
                    if k.starts_with("POWER") {
                        stat(k, v.as_str().unwrap_or_default().as_bytes());
                    }
                }
            }
        }
    }
}

/// `Status [n]`: on `STATUS<n>`; `Status 0` one message per section; an unknown one on `RESULT`.
fn status(dev: &Device, arg: &str, answer: &Value) {
    let t = &dev.mqtt.prefix;
    let Some(sections) = answer.as_object().filter(|m| !m.contains_key("Command")) else {
        dev.mqtt.publish(
            &format!("stat/{t}/RESULT"),
            answer.to_string().as_bytes(),
            false,
        );
        return;
    };
    for (k, v) in sections {
        let n = match arg {
            "0" => section_number(k),
            n => n.to_string(),
        };
        let mut one = Map::new();
        one.insert(k.clone(), v.clone());
        let sub = if n == "0" {
            "STATUS".to_string()
        } else {
            format!("STATUS{n}")
        };
        dev.mqtt.publish(
            &format!("stat/{t}/{sub}"),
            Value::Object(one).to_string().as_bytes(),
            false,
        );
    }
}

/// `StatusPRM` → `1` ... as `CmndStatus` numbers them (`Status` itself: `0`, published on `STATUS`).
fn section_number(key: &str) -> String {
    let n = match key {
        "StatusPRM" => 1,
        "StatusFWR" => 2,
        "StatusLOG" => 3,
        "StatusMEM" => 4,
        "StatusNET" => 5,
        "StatusMQT" => 6,
        "StatusTIM" => 7,
        "StatusPTH" => 9,
        "StatusSNS" => 10,
        "StatusSTS" => 11,
        _ => 0,
    };
    n.to_string()
}

/// `tele/<t>/STATE` and `tele/<t>/SENSOR`.
fn telemetry(dev: &Device) {
    let (state, sensor) = tasmota::telemetry(dev);
    let t = &dev.mqtt.prefix;
    dev.mqtt.publish(
        &format!("tele/{t}/STATE"),
        state.to_string().as_bytes(),
        false,
    );
    dev.mqtt.publish(
        &format!("tele/{t}/SENSOR"),
        sensor.to_string().as_bytes(),
        false,
    );
}

/// The thread that sends Tasmota telemetry and Gen1 updates when due; [`Telemetry::stop`] ends it.
pub(crate) struct Telemetry {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Telemetry {
    /// Starts the thread when a Tasmota or Gen1 device has MQTT (Gen1 publishes its values every
    /// `update_period`).
    pub(crate) fn start(devices: &[Arc<Device>]) -> std::io::Result<Option<Telemetry>> {
        let tasmotas: Vec<Arc<Device>> = devices
            .iter()
            .filter(|d| d.ident.family != Family::Rpc && d.mqtt.enabled())
            .cloned()
            .collect();
        if tasmotas.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("sd-emu-mqtt-tele".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                while !flag.load(Ordering::SeqCst) {
                    for d in &tasmotas {
                        if d.mqtt.connected() && d.mqtt.tele_due(d.clock.instant()) {
                            match d.ident.family {
                                Family::Gen1 => mqtt_gen1::update(d),
                                _ => telemetry(d),
                            }
                        }
                    }
                    std::thread::sleep(LOOK);
                }
            })?;
        Ok(Some(Telemetry { stop, thread }))
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}
