//! `sdctl energy METER [--from TIME] [--to TIME] [--csv]`: a meter's own interval records, one line per interval
//! (and per gap) with units and a total; CSV for spreadsheets; JSON with `--json`.

use std::time::{SystemTime, UNIX_EPOCH};

use smartdev::{
    ChannelEnergy, Controller, EnergyHistory, Error, HistoryEntry, Identity, parse_history_time,
    rfc3339,
};

/// Reads the history of `meter` over `[from, to)` and prints it.
pub fn run(
    ctl: &Controller,
    meter: Identity,
    from: &str,
    to: &str,
    csv: bool,
    json: bool,
) -> Result<(), Error> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let from = parse_history_time(from, now).map_err(|e| prefix("--from", e))?;
    let to = parse_history_time(to, now).map_err(|e| prefix("--to", e))?;
    let history = ctl.energy_history(meter, from, to)?;
    if json {
        super::print_json(&history)
    } else if csv {
        super::print_text(csv_text(&history).trim_end());
        Ok(())
    } else {
        super::print_text(&human(&history));
        Ok(())
    }
}

fn prefix(option: &str, e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{option}: {m}")),
        other => other,
    }
}

/// `2026-11-25 13:00+00:00` (seconds only when not zero): UTC, with the offset shown.
fn when(unix: i64) -> String {
    let t = rfc3339(unix);
    let clock = if unix % 60 == 0 {
        t.get(11..16)
    } else {
        t.get(11..19)
    };
    match (t.get(..10), clock) {
        (Some(d), Some(c)) => format!("{d} {c}+00:00"),
        _ => t,
    }
}

/// Seconds as people read them: `60 s`, `20 min`, `2 h 30 min`, `3 d 4 h`.
fn span(secs: i64) -> String {
    match secs {
        ..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86400 => match (secs / 3600, secs % 3600 / 60) {
            (h, 0) => format!("{h} h"),
            (h, m) => format!("{h} h {m} min"),
        },
        _ => match (secs / 86400, secs % 86400 / 3600) {
            (d, 0) => format!("{d} d"),
            (d, h) => format!("{d} d {h} h"),
        },
    }
}

/// Energy with its unit: Wh with two decimals, kWh from 1,000 Wh.
fn energy(wh: Option<f64>) -> String {
    match wh {
        None => "unknown".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{:.3} kWh", v / 1000.0),
        Some(v) => format!("{v:.2} Wh"),
    }
}

/// One channel in one interval: `Grid A 10.00 Wh, returned 5.00 Wh, 229.8–230.4 V, 2.61–2.74 A`.
fn channel(name: &str, c: &ChannelEnergy) -> String {
    let mut parts = vec![format!("{name} {}", energy(c.energy))];
    if let Some(r) = c.returned_energy.filter(|r| *r != 0.0) {
        parts.push(format!("returned {}", energy(Some(r))));
    }
    if let (Some(lo), Some(hi)) = (c.min_voltage, c.max_voltage) {
        parts.push(format!("{lo:.1}–{hi:.1} V"));
    }
    if let (Some(lo), Some(hi)) = (c.min_current, c.max_current) {
        parts.push(format!("{lo:.2}–{hi:.2} A"));
    }
    parts.join(", ")
}

fn human(h: &EnergyHistory) -> String {
    let mut out = vec![format!(
        "{} ({}): energy history from {} to {}",
        h.meter,
        h.device,
        when(h.from),
        when(h.to)
    )];
    let mut missing = 0;
    for e in &h.entries {
        match e {
            HistoryEntry::Record(r) => {
                let chans: Vec<String> = h
                    .channels
                    .iter()
                    .zip(&r.channels)
                    .map(|(n, c)| channel(n, c))
                    .collect();
                out.push(format!(
                    "{}  {}  {}",
                    when(r.start),
                    span(i64::from(r.period)),
                    chans.join("; ")
                ));
            }
            HistoryEntry::Gap(g) => {
                missing += g.end - g.start;
                out.push(format!(
                    "{}  {}  no record (gap until {}): energy unknown",
                    when(g.start),
                    span(g.end - g.start),
                    when(g.end)
                ));
            }
        }
    }
    let totals: Vec<String> = h
        .channels
        .iter()
        .zip(h.total_energy().iter().zip(h.total_returned_energy()))
        .map(|(n, (e, r))| match r.filter(|r| *r != 0.0) {
            Some(r) => format!("{n} {}, returned {}", energy(*e), energy(Some(r))),
            None => format!("{n} {}", energy(*e)),
        })
        .collect();
    let records = h.records().count();
    out.push(format!(
        "Total of {records} record{}: {}",
        if records == 1 { "" } else { "s" },
        totals.join("; ")
    ));
    let gaps = h.gaps().count();
    if gaps > 0 {
        out.push(format!(
            "Not recorded: {} in {gaps} gap{} (not counted in the total)",
            span(missing),
            if gaps == 1 { "" } else { "s" }
        ));
    }
    out.join("\n")
}

/// A CSV cell: quoted when it holds a comma, a quote or a line break.
fn cell(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// A spreadsheet reads `2026-11-25 13:00:00` as a date and time; the header says it is UTC. A gap row has
/// empty values (unknown, which spreadsheets do not count), never 0.
fn csv_text(h: &EnergyHistory) -> String {
    let mut head = vec![
        "Start (UTC)".to_string(),
        "Seconds".into(),
        "Recorded".into(),
    ];
    for n in &h.channels {
        for what in [
            "Energy (Wh)",
            "Returned Energy (Wh)",
            "Min Voltage (V)",
            "Max Voltage (V)",
            "Min Current (A)",
            "Max Current (A)",
        ] {
            head.push(cell(&format!("{n} {what}")));
        }
    }
    let mut out = head.join(",") + "\n";
    let stamp = |unix: i64| rfc3339(unix).replace('T', " ").replace('Z', "");
    let num = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for e in &h.entries {
        let row: Vec<String> = match e {
            HistoryEntry::Record(r) => {
                let mut row = vec![stamp(r.start), r.period.to_string(), "yes".into()];
                for c in &r.channels {
                    row.extend(
                        [
                            c.energy,
                            c.returned_energy,
                            c.min_voltage,
                            c.max_voltage,
                            c.min_current,
                            c.max_current,
                        ]
                        .map(num),
                    );
                }
                row
            }
            HistoryEntry::Gap(g) => {
                let mut row = vec![stamp(g.start), (g.end - g.start).to_string(), "no".into()];
                row.extend(std::iter::repeat_n(String::new(), 6 * h.channels.len()));
                row
            }
        };
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}
