//! `print_device_status`: the anchor library's text layout, with custom attributes on every component.

use std::fmt::Write;

use serde_json::Value;

use crate::objects::{Attributes, Device};

/// Python-style rendering (`True`, `None`, `54.6`, `0.0`) so output matches the anchor's.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

fn py_state(b: Option<bool>) -> &'static str {
    match b {
        Some(b) => py_bool(b),
        None => "None",
    }
}

fn py_num(v: Option<f64>) -> String {
    match v {
        None => "None".into(),
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.1}"),
        Some(f) => format!("{f}"),
    }
}

fn py_opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "None".to_string(), |x| x.to_string())
}

fn py_value(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => py_bool(*b).into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn custom_suffix(custom: &Attributes) -> String {
    custom
        .iter()
        .map(|(k, v)| format!(", {k}: {}", py_value(v)))
        .collect()
}

/// Renders one device block.
pub(crate) fn device_status(d: &Device) -> String {
    let mut s = String::new();
    let online = if d.online { "online" } else { "offline" };
    let _ = writeln!(s, "{} (ID: {}) — {online}", d.name, d.id);
    if d.is_tasmota() {
        let _ = writeln!(s, "  Model: Tasmota  Firmware: {}", py_opt(&d.firmware));
    } else {
        let _ = writeln!(s, "  Model: {}", d.model_name);
    }
    let _ = writeln!(s, "  Simulation: {}", py_bool(d.simulate));
    match &d.hostname {
        Some(h) => {
            let _ = writeln!(s, "  Hostname: {h}:{}", d.port);
        }
        None => {
            let _ = writeln!(s, "  Hostname: None");
        }
    }
    let _ = writeln!(s, "  ExpectOffline: {}", py_bool(d.expect_offline));
    if !d.is_tasmota() {
        let _ = writeln!(
            s,
            "  Generation: {} / Protocol: {}",
            py_opt(&d.generation),
            py_opt(&d.protocol)
        );
    }
    for (k, v) in &d.custom {
        let _ = writeln!(s, "  {k}: {}", py_value(v));
    }
    if !d.is_tasmota() {
        let _ = writeln!(s, "  Inputs ({}):", d.inputs.len());
        for i in &d.inputs {
            let _ = writeln!(
                s,
                "    [{}] id={} name='{}' state={}{}",
                i.component_index,
                i.id,
                i.name,
                py_state(i.state),
                custom_suffix(&i.custom)
            );
        }
    }
    let _ = writeln!(s, "  Outputs ({}):", d.outputs.len());
    for o in &d.outputs {
        let _ = writeln!(
            s,
            "    [{}] id={} name='{}' state={} temp={}{}",
            o.component_index,
            o.id,
            o.name,
            py_state(o.state),
            py_num(o.temperature),
            custom_suffix(&o.custom)
        );
    }
    let _ = writeln!(s, "  Meters ({}):", d.meters.len());
    for m in &d.meters {
        let _ = writeln!(
            s,
            "    [{}] id={} name='{}' power={}W voltage={}V current={}A pf={} energy={}Wh{}",
            m.component_index,
            m.id,
            m.name,
            py_num(m.power),
            py_num(m.voltage),
            py_num(m.current),
            py_num(m.power_factor),
            py_num(m.energy),
            custom_suffix(&m.custom)
        );
    }
    if !d.covers.is_empty() {
        let _ = writeln!(s, "  Covers ({}):", d.covers.len());
        for c in &d.covers {
            let _ = writeln!(
                s,
                "    [{}] id={} name='{}' state={} position={}{}",
                c.component_index,
                c.id,
                c.name,
                py_opt(&c.state),
                py_num(c.position),
                custom_suffix(&c.custom)
            );
        }
    }
    if !d.sensors.is_empty() {
        let _ = writeln!(s, "  Sensors ({}):", d.sensors.len());
        for x in &d.sensors {
            let _ = writeln!(
                s,
                "    [{}] id={} name='{}' {}={}{}{}",
                x.component_index,
                x.id,
                x.name,
                x.quantity,
                py_num(x.value),
                x.unit,
                custom_suffix(&x.custom)
            );
        }
    }
    let _ = writeln!(s, "  TempProbes ({}):", d.temp_probes.len());
    for p in &d.temp_probes {
        let _ = writeln!(
            s,
            "    [{}] id={} name='{}' temp={}°C  last_read={}{}",
            p.component_index,
            p.id,
            p.name,
            py_num(p.temperature),
            py_opt(&p.last_reading_time),
            custom_suffix(&p.custom)
        );
    }
    let uptime = d.uptime.map_or("None".to_string(), |u| format!("{u}s"));
    let _ = writeln!(
        s,
        "  MAC: {}  Uptime: {uptime}  Temp: {}°C",
        py_opt(&d.mac_address),
        py_num(d.temperature)
    );
    let _ = writeln!(
        s,
        "  TotalPower: {}W  TotalEnergy: {}Wh",
        py_num(d.total_power),
        py_num(d.total_energy)
    );
    if d.is_tasmota() {
        let _ = writeln!(s, "  Webhooks: not supported");
    } else if d.supported_webhooks.is_empty() {
        let _ = writeln!(s, "  Webhooks not supported on this device.");
    } else {
        let _ = writeln!(s, "  Supported Webhooks: {}", d.supported_webhooks.len());
        for w in &d.supported_webhooks {
            let _ = writeln!(s, "    - {w}");
        }
    }
    if let Some(e) = &d.last_error {
        let _ = writeln!(s, "  Last error: {e}");
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Protocol;
    use crate::objects::Output;

    #[test]
    fn anchor_layout_with_custom_attributes() {
        let mut o = Output {
            id: 1,
            name: "Sydney Dev A O1".into(),
            state: Some(false),
            temperature: Some(54.6),
            ..Output::default()
        };
        o.custom.insert("Group".into(), "Living Room".into());
        o.custom.insert("Colour".into(), "Red".into());
        let d = Device {
            id: 1,
            name: "Sydney Dev A".into(),
            model_name: "Shelly 2PM Gen3".into(),
            generation: Some(3),
            protocol: Some(Protocol::Rpc),
            hostname: Some("192.168.86.30".into()),
            port: 80,
            online: true,
            total_power: Some(0.0),
            outputs: vec![o],
            ..Device::default()
        };
        let text = device_status(&d);
        assert!(
            text.starts_with("Sydney Dev A (ID: 1) — online\n  Model: Shelly 2PM Gen3\n"),
            "{text}"
        );
        assert!(text.contains("  Hostname: 192.168.86.30:80\n"));
        assert!(text.contains("  Generation: 3 / Protocol: RPC\n"));
        assert!(text.contains("    [0] id=1 name='Sydney Dev A O1' state=False temp=54.6, Group: Living Room, Colour: Red\n"));
        assert!(text.contains("  TotalPower: 0.0W  TotalEnergy: NoneWh"));
        assert!(text.ends_with("  Webhooks not supported on this device."));
    }
}
