//! The simulation file: format, reading into a device, patching single fields, atomic writes.
//!
//! Reads are bounded (regular files up to [`MAX_FILE`], nesting-checked JSON). Writers serialise on the sibling
//! lock `.<name>.lock` (`File::lock`, hence `rust-version` 1.89) and replace the file through a temporary file
//! of their own; temporary files left by killed writers are removed under the lock.
//!
//! The file is the device object (as `read_device` returns it) with `Inputs`, `Outputs`, `Meters`,
//! `TempProbes`, `Covers` and `Sensors` arrays. Components are matched by `ComponentIndex` (array position when absent), so files of
//! the anchor library and files of renamed components still load. Unknown keys are kept untouched.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value};

use crate::objects::{ComponentKind, CoverState, Device};

/// Key marking a file written (or migrated) by smartdev; its `Online` is honoured.
pub(crate) const FORMAT_KEY: &str = "FileFormat";
/// The value of [`FORMAT_KEY`].
pub(crate) const FORMAT: &str = "smartdev 1";

/// sc-smart-device writes `"Online": false` into every file it creates and never reads it back. A file of
/// its (it lists `customkeylist`) that smartdev has not marked yet is taken as the old library meant it:
/// online. The mark is added so that later edits of `Online` are honoured. Returns whether `doc` changed.
pub(crate) fn migrate_anchor(doc: &mut Map<String, Value>) -> bool {
    if doc.contains_key(FORMAT_KEY) || !doc.contains_key("customkeylist") {
        return false;
    }
    doc.insert("Online".into(), Value::Bool(true));
    doc.insert(FORMAT_KEY.into(), FORMAT.into());
    true
}

/// Key of a meter's last MockRate update (Unix seconds).
pub(crate) const MOCK_TIMESTAMP: &str = "MockTimestamp";

/// Largest simulation file read; one device's state is a few KiB.
pub(crate) const MAX_FILE: u64 = 4 * 1024 * 1024;

/// What identifies one version of the file: device and inode, size and modification time. A writer that does
/// not take our lock (an editor) changes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

/// The version of the file at `path` now (`None` when it does not exist).
pub(crate) fn version(path: &Path) -> Option<Version> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Version {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    })
}

/// Reads the file: `Ok(None)` when it does not exist, an error message when it is unreadable, not a regular
/// file (a FIFO or a device would be read forever), too big, or not a JSON object.
pub(crate) fn read(path: &Path) -> Result<Option<Map<String, Value>>, String> {
    use std::io::Read;
    let not_regular = "is not a regular file (a FIFO, device or folder); point SimulationFile(Folder) at a JSON file";
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Err(not_regular.into()),
        Ok(m) if m.len() > MAX_FILE => return Err(too_big(m.len())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    // Checked again on the open file: it may have been swapped since.
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(not_regular.into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(too_big(bytes.len() as u64));
    }
    match crate::untrusted_json::parse(&bytes) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(other) => Err(format!(
            "must hold a JSON object, found {}",
            crate::config::describe(&other)
        )),
        Err(e) => Err(format!(
            "is not valid JSON ({e}); fix or delete it — it is left as it is"
        )),
    }
}

fn too_big(len: u64) -> String {
    format!(
        "is {:.1} MiB, more than the {} MiB a simulation file may have; is this the right file?",
        len as f64 / (1024.0 * 1024.0),
        MAX_FILE / (1024 * 1024)
    )
}

/// Holds the file's sibling lock `.<name>.lock` (an advisory lock shared by every process using smartdev), so
/// read-merge-write is one critical section across processes. Released on drop.
pub(crate) struct Lock(#[allow(dead_code)] std::fs::File);

/// Takes the lock of the simulation file at `path`, creating its folder and lock file when needed.
pub(crate) fn lock(path: &Path) -> Result<Lock, String> {
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(folder) = folder {
        std::fs::create_dir_all(folder)
            .map_err(|e| format!("cannot create folder {}: {e}", folder.display()))?;
    }
    let lock_path = path.with_file_name(format!(".{}.lock", file_name(path)));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open its lock file {}: {e}", lock_path.display()))?;
    file.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    Ok(Lock(file))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes the file atomically: a temporary file of this writer's own in the same folder, then renamed over the
/// old one. A SIGKILL at any moment leaves the old or the new file, never a mix (no fsync: a power cut is not
/// what this guards against, and it would cost milliseconds per switch). Call it holding the
/// [`Lock`]: then any other temporary file of this name is a leftover of a killed writer and is removed.
pub(crate) fn write_atomic(
    path: &Path,
    doc: &Map<String, Value>,
    _held: &Lock,
) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = file_name(path);
    let prefix = format!(".{name}.");
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(entries) = std::fs::read_dir(folder)
    {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&prefix) && n.ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let tmp = path.with_file_name(format!(
        "{prefix}{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    text.push('\n');
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write it: {e}")
    })
}

/// The whole file for a device that has none yet: a new simulated device starts with everything off and its
/// covers closed and calibrated (the states it then reports are the file's, so they are known).
pub(crate) fn document(dev: &mut Device) -> Map<String, Value> {
    for i in &mut dev.inputs {
        i.state.get_or_insert(false);
    }
    for o in &mut dev.outputs {
        o.state.get_or_insert(false);
    }
    for c in &mut dev.covers {
        c.state.get_or_insert(CoverState::Closed);
        c.position.get_or_insert(0.0);
        c.calibrated.get_or_insert(true);
    }
    let mut doc = match serde_json::to_value(&*dev) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    doc.insert(FORMAT_KEY.into(), FORMAT.into());
    doc
}

/// Finds the array element of component `index` of `kind` in the file.
fn element(
    doc: &Map<String, Value>,
    kind: ComponentKind,
    index: usize,
) -> Option<&Map<String, Value>> {
    let list = doc.get(kind.config_key())?.as_array()?;
    list.iter()
        .filter_map(Value::as_object)
        .find(|e| e.get("ComponentIndex").and_then(Value::as_u64) == Some(index as u64))
        .or_else(|| {
            let by_position = list.get(index)?.as_object()?;
            by_position
                .get("ComponentIndex")
                .is_none()
                .then_some(by_position)
        })
}

/// Sets `field` of component `index` of `kind`, creating the array or element if the user removed them.
pub(crate) fn set(
    doc: &mut Map<String, Value>,
    kind: ComponentKind,
    index: usize,
    field: &str,
    value: Value,
) {
    let list = doc
        .entry(kind.config_key())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let arr = list.as_array_mut().expect("made an array above");
    let pos = arr
        .iter()
        .position(|e| e.get("ComponentIndex").and_then(Value::as_u64) == Some(index as u64))
        .or_else(|| {
            (index < arr.len() && arr[index].get("ComponentIndex").is_none()).then_some(index)
        });
    let pos = match pos {
        Some(p) if arr[p].is_object() => p,
        _ => {
            let mut e = Map::new();
            e.insert("ComponentIndex".into(), index.into());
            arr.push(Value::Object(e));
            arr.len() - 1
        }
    };
    if let Some(obj) = arr[pos].as_object_mut() {
        obj.insert(field.to_string(), value);
    }
}

/// Typed reads of file values with a message naming the key path on a wrong type.
struct Reader<'a> {
    doc: &'a Map<String, Value>,
}

fn bad(path: &str, want: &str, v: &Value) -> String {
    format!(
        "{path}: expected {want}, found {}",
        crate::config::describe(v)
    )
}

fn number(v: &Value, path: &str) -> Result<Option<f64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        other => Err(bad(path, "a number or null", other)),
    }
}

/// A percentage (0–100) or null.
fn percent(v: &Value, path: &str) -> Result<Option<f64>, String> {
    let n = number(v, path)?;
    if n.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
        return Err(format!("{path}: expected 0 to 100 (%)"));
    }
    Ok(n)
}

/// `[r, g, b]` (0–255 each) or null.
fn rgb(v: &Value, path: &str) -> Result<Option<[u8; 3]>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let parts = v.as_array().filter(|a| a.len() == 3);
    let each = |i: usize| parts.and_then(|a| a[i].as_u64()).map(|n| n as f64);
    crate::light::rgb_from([each(0), each(1), each(2)])
        .map(Some)
        .ok_or_else(|| bad(path, "[red, green, blue] with 0 to 255 each, or null", v))
}

fn cover_state(v: &Value, path: &str) -> Result<Option<CoverState>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => CoverState::parse(s).map(Some).ok_or_else(|| {
            format!(
                "{path}: '{}' is not a cover state; use open, closed, opening, closing, stopped or calibrating",
                crate::text::clip(s, 40)
            )
        }),
        other => Err(bad(path, "a cover state (a string) or null", other)),
    }
}

fn state(v: &Value, path: &str) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        // Gen1 inputs were stored as 0/1 by the anchor library.
        Value::Number(n) if n.as_i64() == Some(0) => Ok(false),
        Value::Number(n) if n.as_i64() == Some(1) => Ok(true),
        other => Err(bad(path, "true or false", other)),
    }
}

impl Reader<'_> {
    fn component_fields<'b>(
        &'b self,
        kind: ComponentKind,
        index: usize,
        fields: &'b [&'b str],
    ) -> impl Iterator<Item = (&'b str, &'b Value, String)> + 'b {
        element(self.doc, kind, index)
            .into_iter()
            .flat_map(move |e| {
                fields.iter().filter_map(move |f| {
                    e.get(*f).map(|v| {
                        (
                            *f,
                            v,
                            format!("{}[ComponentIndex {index}].{f}", kind.config_key()),
                        )
                    })
                })
            })
    }
}

/// Copies the values a user may edit from the file into `dev`. Keys that are absent keep the device's value.
/// Probes whose `RequiresOutput` is off keep their previous temperature.
pub(crate) fn merge(
    doc: &Map<String, Value>,
    dev: &mut Device,
    now_rfc3339: &str,
) -> Result<(), String> {
    let r = Reader { doc };
    if let Some(v) = doc.get("Online") {
        dev.online = state(v, "Online")?;
    } else {
        dev.online = true;
    }
    for key in ["MacAddress", "MACAddress"] {
        match doc.get(key) {
            Some(Value::String(s)) => {
                let mac = crate::mac::Mac::parse(s).map_err(|e| format!("{key}: {e}"))?;
                dev.mac_address = Some(mac.to_string());
            }
            Some(Value::Null) | None => {}
            Some(other) => return Err(bad(key, "a string or null", other)),
        }
    }
    match doc.get("Firmware") {
        Some(Value::String(s)) => dev.firmware = Some(s.clone()),
        Some(Value::Null) => dev.firmware = None,
        None => {}
        Some(other) => return Err(bad("Firmware", "a string or null", other)),
    }
    if let Some(v) = doc.get("Uptime") {
        dev.uptime = number(v, "Uptime")?.map(|u| u.max(0.0) as u64);
    }
    if let Some(v) = doc.get("Temperature") {
        dev.temperature = number(v, "Temperature")?;
    }
    for key in ["RestartRequired", "UpdateAvailable"] {
        let slot = if key == "RestartRequired" {
            &mut dev.restart_required
        } else {
            &mut dev.update_available
        };
        match doc.get(key) {
            Some(Value::Null) => *slot = None,
            Some(v) => *slot = Some(state(v, key)?),
            None => {}
        }
    }
    for i in 0..dev.inputs.len() {
        for (_, v, path) in r.component_fields(ComponentKind::Input, i, &["State"]) {
            dev.inputs[i].state = Some(state(v, &path)?);
        }
    }
    for i in 0..dev.outputs.len() {
        const OUTPUT: [&str; 6] = [
            "State",
            "Temperature",
            "Brightness",
            "ColorTemperature",
            "Rgb",
            "White",
        ];
        for (f, v, path) in r.component_fields(ComponentKind::Output, i, &OUTPUT) {
            let o = &mut dev.outputs[i];
            match f {
                "State" => o.state = Some(state(v, &path)?),
                "Brightness" => o.brightness = percent(v, &path)?,
                "White" => o.white = percent(v, &path)?,
                "ColorTemperature" => o.color_temperature = number(v, &path)?,
                "Rgb" => o.rgb = rgb(v, &path)?,
                _ => o.temperature = number(v, &path)?,
            }
        }
    }
    for i in 0..dev.covers.len() {
        const COVER: [&str; 4] = ["State", "Position", "Calibrated", "Temperature"];
        for (f, v, path) in r.component_fields(ComponentKind::Cover, i, &COVER) {
            let c = &mut dev.covers[i];
            match f {
                "State" => c.state = cover_state(v, &path)?,
                "Position" => {
                    c.position = number(v, &path)?;
                    if c.position.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
                        return Err(format!("{path}: expected 0 to 100 (percent open)"));
                    }
                }
                "Calibrated" => c.calibrated = Some(state(v, &path)?),
                _ => c.temperature = number(v, &path)?,
            }
        }
        // An uncalibrated cover does not know its position.
        if dev.covers[i].calibrated == Some(false) {
            dev.covers[i].position = None;
        }
    }
    const METER: [&str; 8] = [
        "Power",
        "Voltage",
        "Current",
        "PowerFactor",
        "Energy",
        "ReturnedEnergy",
        "Frequency",
        "ApparentPower",
    ];
    for i in 0..dev.meters.len() {
        for (f, v, path) in r.component_fields(ComponentKind::Meter, i, &METER) {
            let n = number(v, &path)?;
            let m = &mut dev.meters[i];
            match f {
                "Power" => m.power = n,
                "Voltage" => m.voltage = n,
                "Current" => m.current = n,
                "PowerFactor" => m.power_factor = n,
                "Energy" => m.energy = n,
                "Frequency" => m.frequency = n,
                "ApparentPower" => m.apparent_power = n,
                _ => m.returned_energy = n,
            }
        }
    }
    let mut probe_values = Vec::with_capacity(dev.temp_probes.len());
    for i in 0..dev.temp_probes.len() {
        let mut value = dev.temp_probes[i].temperature;
        for (_, v, path) in r.component_fields(ComponentKind::TempProbe, i, &["Temperature"]) {
            value = number(v, &path)?;
        }
        probe_values.push(value);
    }
    dev.update_probes(now_rfc3339, |p| probe_values[p.component_index]);
    let mut sensor_values = Vec::with_capacity(dev.sensors.len());
    for i in 0..dev.sensors.len() {
        let mut value = dev.sensors[i].value;
        for (_, v, path) in r.component_fields(ComponentKind::Sensor, i, &["Value"]) {
            value = number(v, &path)?;
        }
        sensor_values.push(value);
    }
    dev.update_sensors(now_rfc3339, |s| sensor_values[s.component_index]);
    dev.update_totals();
    Ok(())
}

/// The MockRate timestamp of meter `index` in the file, if any.
pub(crate) fn mock_timestamp(
    doc: &Map<String, Value>,
    index: usize,
) -> Result<Option<f64>, String> {
    match element(doc, ComponentKind::Meter, index).and_then(|e| e.get(MOCK_TIMESTAMP)) {
        Some(v) => number(
            v,
            &format!("Meters[ComponentIndex {index}].{MOCK_TIMESTAMP}"),
        ),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{Meter, Output};

    fn device() -> Device {
        Device {
            outputs: vec![
                Output {
                    component_index: 0,
                    ..Output::default()
                },
                Output {
                    component_index: 1,
                    ..Output::default()
                },
            ],
            meters: vec![Meter {
                component_index: 0,
                ..Meter::default()
            }],
            ..Device::default()
        }
    }

    #[test]
    fn anchor_files_load_by_component_index() {
        let doc: Map<String, Value> = serde_json::from_str(
            r#"{"Name":"Old","MACAddress":"aa-bb-cc-dd-ee-ff","Outputs":[{"ComponentIndex":1,"State":true},{"ComponentIndex":0,"State":false}],
                "Meters":[{"Power":12.5,"Energy":null}],"Inputs":[]}"#,
        )
        .unwrap();
        let mut d = device();
        merge(&doc, &mut d, "t").unwrap();
        assert!(d.outputs[0].state == Some(false) && d.outputs[1].state == Some(true));
        assert_eq!(d.meters[0].power, Some(12.5));
        assert_eq!(d.mac_address.as_deref(), Some("AA:BB:CC:DD:EE:FF"));
        assert!(d.online);
        assert_eq!(d.total_power, Some(12.5));
    }

    #[test]
    fn a_mac_address_that_is_not_a_mac_names_the_key_and_the_spellings() {
        let doc: Map<String, Value> = serde_json::from_str(r#"{"MacAddress":"AA:BB"}"#).unwrap();
        let e = merge(&doc, &mut device(), "t").unwrap_err();
        assert!(
            e.contains("MacAddress") && e.contains("AA:BB:CC:DD:EE:FF"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_name_the_key() {
        let doc: Map<String, Value> =
            serde_json::from_str(r#"{"Outputs":[{"ComponentIndex":0,"State":"yes"}]}"#).unwrap();
        let e = merge(&doc, &mut device(), "t").unwrap_err();
        assert_eq!(
            e,
            "Outputs[ComponentIndex 0].State: expected true or false, found string \"yes\""
        );
    }

    #[test]
    fn set_creates_missing_elements_and_keeps_other_keys() {
        let mut doc: Map<String, Value> = serde_json::from_str(
            r#"{"Note":"mine","Outputs":[{"ComponentIndex":0,"State":false,"X":1}]}"#,
        )
        .unwrap();
        set(&mut doc, ComponentKind::Output, 0, "State", true.into());
        set(&mut doc, ComponentKind::Output, 1, "State", true.into());
        assert_eq!(doc["Outputs"][0]["X"], 1);
        assert_eq!(doc["Outputs"][0]["State"], true);
        assert_eq!(doc["Outputs"][1]["ComponentIndex"], 1);
        assert_eq!(doc["Note"], "mine");
    }
}
