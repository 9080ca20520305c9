//! Payload pieces that `components.rs` and the RPC component modules (`rpc_cover.rs`, `rpc_light.rs`) both
//! render: a leaf, so `components.rs` can assemble the status from those modules without a cycle
//! (`components.rs` re-exports them).

use serde_json::{Map, Value, json};

use super::layout::MeterFields;
use super::source::Source;
use super::state::{MeterView, fahrenheit, round};

/// How `source` fields name who acted last.
pub(crate) fn source_name(source: Source) -> &'static str {
    match source {
        Source::Init => "init",
        Source::Remote => "HTTP_in",
        Source::Local => "button",
    }
}

pub(crate) fn energy(total_wh: f64, by_minute: &[f64; 3], minute_ts: i64) -> Value {
    json!({
        "total": round(total_wh, 3),
        "by_minute": by_minute.iter().map(|v| round(*v, 3)).collect::<Vec<_>>(),
        "minute_ts": minute_ts,
    })
}

pub(crate) fn temperature(c: f64) -> Value {
    json!({"tC": round(c, 1), "tF": fahrenheit(c)})
}

/// Meter fields inside a switch or cover status, in the order real devices send them.
pub(crate) fn meter_fields(m: &mut Map<String, Value>, v: &MeterView, f: MeterFields) {
    m.insert("apower".into(), json!(round(v.power, 1)));
    m.insert("voltage".into(), json!(round(v.voltage, 1)));
    let freq = json!(round(v.freq, 1));
    if f.freq && !f.freq_last {
        m.insert("freq".into(), freq.clone());
    }
    m.insert("current".into(), json!(round(v.current, 3)));
    if f.pf {
        m.insert("pf".into(), json!(round(v.pf, 2)));
    }
    if f.freq && f.freq_last {
        m.insert("freq".into(), freq);
    }
    m.insert(
        "aenergy".into(),
        energy(v.energy_wh, &v.by_minute, v.minute_ts),
    );
    if f.ret {
        m.insert(
            "ret_aenergy".into(),
            energy(v.returned_wh, &v.ret_by_minute, v.minute_ts),
        );
    }
}
