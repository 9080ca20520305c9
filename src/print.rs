//! `print_device_status`: a device as a person reads it — units after real numbers, sensible rounding, `–` for
//! what the device has not reported, words for states, aligned columns. JSON output stays exact; this is
//! for people.

use std::fmt::Write;

use serde_json::Value;

use crate::objects::{Attributes, Device};
use crate::table::Table;

/// Shown for a value the device has not reported.
pub(crate) const MISSING: &str = "–";

/// `12.3 W` with `decimals` digits, or `–`.
pub(crate) fn quantity(v: Option<f64>, decimals: usize, unit: &str) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.decimals$} {unit}"),
        _ => MISSING.into(),
    }
}

/// Energy: Wh to 0.1 below 10 kWh, kWh with 3 decimals above.
pub(crate) fn energy(wh: Option<f64>) -> String {
    match wh {
        Some(x) if x.is_finite() && x.abs() >= 10_000.0 => format!("{:.3} kWh", x / 1000.0),
        other => quantity(other, 1, "Wh"),
    }
}

/// `3d 04:05:06` (days only when there are any).
pub(crate) fn uptime(secs: Option<u64>) -> String {
    let Some(s) = secs else {
        return MISSING.into();
    };
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn on_off(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => MISSING,
    }
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => MISSING,
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Null => MISSING.into(),
        Value::Bool(b) => yes_no(Some(*b)).into(),
        Value::String(s) => crate::text::escape_controls(s).into_owned(),
        Value::Number(n) => n.to_string(),
        other => crate::text::escape_controls(&other.to_string()).into_owned(),
    }
}

/// `text` followed by the custom attributes in parentheses (two spaces apart when both are there).
fn with_custom(text: &str, custom: &Attributes) -> String {
    if custom.is_empty() {
        return text.to_string();
    }
    let parts: Vec<String> = custom
        .iter()
        .map(|(k, v)| format!("{k}: {}", value_text(v)))
        .collect();
    let attrs = format!("({})", parts.join(", "));
    if text.is_empty() {
        attrs
    } else {
        format!("{text}  {attrs}")
    }
}

/// `asleep, last heard 12 min ago` (or `asleep, not heard since open`): a sleeping device within its period.
fn asleep(d: &Device) -> String {
    let ago = d
        .last_seen
        .as_deref()
        .and_then(crate::clock::seconds_since)
        .map(|s| crate::clock::human_duration(std::time::Duration::from_secs_f64(s)));
    match ago {
        Some(a) => format!("asleep, last heard {a} ago"),
        None => "asleep, not heard since open".into(),
    }
}

/// Renders one device block.
pub(crate) fn device_status(d: &Device) -> String {
    let mut s = String::new();
    let state = match (d.online, d.sleeping) {
        (true, true) => asleep(d),
        (true, false) => "online".into(),
        (false, _) => "offline".into(),
    };
    let _ = writeln!(s, "{} — {state}", d.label());
    let mut facts = Table::new();
    let model = if d.is_tasmota() {
        "Tasmota".to_string()
    } else {
        let mut m = format!("{} ({})", d.model_name, d.model);
        if let Some(g) = d.generation {
            m.push_str(&format!(", Gen{g}"));
        }
        if let Some(p) = d.protocol {
            m.push_str(&format!(", {p}"));
        }
        m
    };
    facts.row(vec!["Model".into(), model]);
    if let Some(p) = &d.profile {
        facts.row(vec!["Profile".into(), p.clone()]);
    }
    if d.simulate {
        let file = d
            .simulation_file
            .as_ref()
            .map(|f| format!(" ({})", f.display()))
            .unwrap_or_default();
        facts.row(vec!["Simulated".into(), format!("yes{file}")]);
    } else if let Some(h) = &d.address {
        let moved = match &d.hostname {
            Some(c) if c != h => format!(" (moved; configured {c})"),
            None => " (found by its MAC)".into(),
            _ => String::new(),
        };
        facts.row(vec!["Address".into(), format!("{h}:{}{moved}", d.port)]);
    } else if d.hostname.is_none() {
        facts.row(vec![
            "Address".into(),
            "none known yet (configured by its MAC)".into(),
        ]);
    }
    if d.expect_offline {
        facts.row(vec!["Expected offline".into(), "yes".into()]);
    }
    let firmware = d.firmware.clone().unwrap_or_else(|| MISSING.into());
    let update = match d.update_available {
        Some(true) => " (update available)",
        _ => "",
    };
    facts.row(vec!["Firmware".into(), format!("{firmware}{update}")]);
    if let Some(m) = &d.mac_address {
        facts.row(vec!["MAC".into(), m.clone()]);
    }
    facts.row(vec!["Uptime".into(), uptime(d.uptime)]);
    if d.temperature.is_some() {
        facts.row(vec!["Temperature".into(), quantity(d.temperature, 1, "°C")]);
    }
    if d.battery.is_some() {
        facts.row(vec!["Battery".into(), quantity(d.battery, 0, "%")]);
    }
    if let Some(p) = d.wakeup_period {
        let every = crate::clock::human_duration(std::time::Duration::from_secs(p));
        facts.row(vec!["Reports".into(), format!("every {every}")]);
    }
    if !d.meters.is_empty() {
        facts.row(vec!["Power".into(), quantity(d.total_power, 1, "W")]);
        let mut e = energy(d.total_energy);
        if d.total_returned_energy.is_some_and(|r| r != 0.0) {
            e.push_str(&format!(", returned {}", energy(d.total_returned_energy)));
        }
        facts.row(vec!["Energy".into(), e]);
    }
    if d.restart_required == Some(true) {
        facts.row(vec!["Restart required".into(), "yes".into()]);
    }
    for (k, v) in &d.custom {
        facts.row(vec![k.clone(), value_text(v)]);
    }
    if let Some(m) = &d.config_mismatch {
        facts.row(vec!["Mismatch".into(), m.clone()]);
    }
    if let Some(e) = &d.last_error {
        facts.row(vec!["Last error".into(), e.clone()]);
    }
    facts.write(&mut s, "  ");

    let section = |s: &mut String, title: &str, table: Table| {
        if !table.is_empty() {
            let _ = writeln!(s, "  {title}");
            table.write(s, "    ");
        }
    };
    let mut t = Table::new();
    for i in &d.inputs {
        t.row(vec![
            i.id.to_string(),
            i.name.clone(),
            with_custom(on_off(i.state), &i.custom),
        ]);
    }
    section(&mut s, "Inputs", t);
    let mut t = Table::new();
    for o in &d.outputs {
        let mut extra = Vec::new();
        if o.brightness.is_some() {
            extra.push(format!("brightness {}", quantity(o.brightness, 0, "%")));
        }
        if o.color_temperature.is_some() {
            extra.push(format!("colour {}", quantity(o.color_temperature, 0, "K")));
        }
        if let Some(rgb) = o.rgb {
            extra.push(format!("RGB {}", crate::light::format_rgb(rgb)));
        }
        if o.white.is_some() {
            extra.push(format!("white {}", quantity(o.white, 0, "%")));
        }
        if o.temperature.is_some() {
            extra.push(quantity(o.temperature, 1, "°C"));
        }
        t.row(vec![
            o.id.to_string(),
            o.name.clone(),
            on_off(o.state).into(),
            with_custom(&extra.join("  "), &o.custom),
        ]);
    }
    section(&mut s, "Outputs", t);
    let mut t = Table::new();
    for c in &d.covers {
        let position = match (c.position, c.calibrated) {
            (Some(_), _) => quantity(c.position, 0, "% open"),
            (None, Some(false)) => "not calibrated".into(),
            (None, _) => MISSING.into(),
        };
        t.row(vec![
            c.id.to_string(),
            c.name.clone(),
            c.state.map_or(MISSING, |x| x.as_str()).into(),
            with_custom(&position, &c.custom),
        ]);
    }
    section(&mut s, "Covers", t);
    let mut t = Table::new();
    if !d.meters.is_empty() {
        t.row(
            ["", "", "power", "voltage", "current", "pf", "energy"]
                .map(String::from)
                .to_vec(),
        );
    }
    for m in &d.meters {
        let mut row = vec![
            m.id.to_string(),
            m.name.clone(),
            quantity(m.power, 1, "W"),
            quantity(m.voltage, 2, "V"),
            quantity(m.current, 2, "A"),
            m.power_factor
                .filter(|p| p.is_finite())
                .map_or(MISSING.to_string(), |p| format!("{p:.2}")),
            energy(m.energy),
        ];
        let mut tail = Vec::new();
        if m.returned_energy.is_some_and(|r| r != 0.0) {
            tail.push(format!("returned {}", energy(m.returned_energy)));
        }
        if m.frequency.is_some() {
            tail.push(quantity(m.frequency, 1, "Hz"));
        }
        if m.apparent_power.is_some() {
            tail.push(quantity(m.apparent_power, 1, "VA"));
        }
        row.push(with_custom(&tail.join("  "), &m.custom));
        t.row(row);
    }
    section(&mut s, "Meters", t);
    let mut t = Table::new();
    for x in &d.sensors {
        let decimals = if x.unit == "V" { 2 } else { 1 };
        t.row(vec![
            x.id.to_string(),
            x.name.clone(),
            x.quantity.as_str().into(),
            with_custom(&quantity(x.value, decimals, x.unit), &x.custom),
        ]);
    }
    section(&mut s, "Sensors", t);
    let mut t = Table::new();
    for p in &d.temp_probes {
        let read = p
            .last_reading_time
            .as_deref()
            .map(|t| format!("read {t}"))
            .unwrap_or_default();
        let needs = p
            .requires_output
            .as_deref()
            .map(|o| format!("only while '{o}' is on"))
            .unwrap_or_default();
        t.row(vec![
            p.id.to_string(),
            p.name.clone(),
            quantity(p.temperature, 1, "°C"),
            with_custom(
                &[read, needs]
                    .into_iter()
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
                    .join(", "),
                &p.custom,
            ),
        ]);
    }
    section(&mut s, "Temperature probes", t);
    if !d.is_tasmota() && !d.supported_webhooks.is_empty() {
        let _ = writeln!(s, "  Webhook events: {}", d.supported_webhooks.join(", "));
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Protocol;
    use crate::objects::{Meter, Output};

    #[test]
    fn numbers_have_units_and_rounding_and_missing_values_a_dash() {
        assert_eq!(quantity(Some(12.345), 1, "W"), "12.3 W");
        assert_eq!(quantity(None, 1, "W"), "–");
        assert_eq!(quantity(Some(f64::NAN), 1, "W"), "–");
        assert_eq!(energy(Some(1.9924666285514832)), "2.0 Wh");
        assert_eq!(energy(Some(123_456.7)), "123.457 kWh");
        assert_eq!(
            uptime(Some(3 * 86_400 + 4 * 3600 + 5 * 60 + 6)),
            "3d 04:05:06"
        );
        assert_eq!(uptime(Some(59)), "00:00:59");
        assert_eq!(uptime(None), "–");
    }

    #[test]
    fn a_device_reads_like_a_person_wrote_it() {
        let mut o = Output {
            id: 1,
            name: "Sydney Dev A O1".into(),
            state: Some(false),
            temperature: Some(54.6),
            ..Output::default()
        };
        o.custom.insert("Group".into(), "Living Room".into());
        let d = Device {
            id: 1,
            name: "Sydney Dev A".into(),
            model: "Shelly2PMG3".into(),
            model_name: "Shelly 2PM Gen3".into(),
            generation: Some(3),
            protocol: Some(Protocol::Rpc),
            hostname: Some("192.168.86.30".into()),
            address: Some("192.168.86.30".into()),
            port: 80,
            online: true,
            uptime: Some(93_784),
            total_power: Some(0.0),
            outputs: vec![
                o,
                Output {
                    id: 2,
                    name: "Fan".into(),
                    ..Output::default()
                },
            ],
            meters: vec![Meter {
                id: 1,
                name: "M1".into(),
                power: Some(1.25),
                voltage: Some(230.123),
                ..Meter::default()
            }],
            ..Device::default()
        };
        let text = device_status(&d);
        let expected = "\
Sydney Dev A (ID: 1) — online
  Model     Shelly 2PM Gen3 (Shelly2PMG3), Gen3, RPC
  Address   192.168.86.30:80
  Firmware  –
  Uptime    1d 02:03:04
  Power     0.0 W
  Energy    –
  Outputs
    1  Sydney Dev A O1  off  54.6 °C  (Group: Living Room)
    2  Fan              –
  Meters
           power  voltage   current  pf  energy
    1  M1  1.2 W  230.12 V  –        –   –";
        assert_eq!(text, expected, "\n{text}");
        assert!(!text.contains("None") && !text.contains("True"));
    }
}
