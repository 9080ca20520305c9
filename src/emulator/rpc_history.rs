//! `EMData` / `EM1Data` `GetRecords` and `GetData` on emulated Gen2+ meters, shaped as transports-and-apis.md
//! §8.2–8.3 (<https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/EMData>): `GetRecords {id, ts}` →
//! `{data_blocks: [{ts, period, records}]}`; `GetData {id, ts, end_ts, add_keys}` → `{keys, data: [{ts,
//! period, values}], next_record_ts?}` with at most [`PAGE_ROWS`] rows a page.

use serde_json::{Map, Value, json};

use super::history::{Cell, PAGE_ROWS, Row};
use super::rpc_params::{RpcError, missing, opt_number};
use super::state::{DeviceState, round};

/// The `EM1Data` keys (Wh, VARh, W, VA, V, A), in the device's order.
const EM1_KEYS: [&str; 14] = [
    "total_act_energy",
    "total_act_ret_energy",
    "lag_react_energy",
    "lead_react_energy",
    "max_act_power",
    "min_act_power",
    "max_aprt_power",
    "min_aprt_power",
    "max_voltage",
    "min_voltage",
    "avg_voltage",
    "max_current",
    "min_current",
    "avg_current",
];

/// The per-phase `EMData` keys (each with `a_`, `b_`, `c_`).
const EM_KEYS: [&str; 16] = [
    "total_act_energy",
    "fund_act_energy",
    "total_act_ret_energy",
    "fund_act_ret_energy",
    "lag_react_energy",
    "lead_react_energy",
    "max_act_power",
    "min_act_power",
    "max_aprt_power",
    "min_aprt_power",
    "max_voltage",
    "min_voltage",
    "avg_voltage",
    "max_current",
    "min_current",
    "avg_current",
];

/// Which meters a database holds: `emdata:0` all phases, `em1data:N` meter N.
pub(crate) enum Database {
    Phases,
    Channel(usize),
}

/// `GetRecords` / `GetData` of one database (`method` lower-case, the component's prefix removed).
pub(crate) fn serve(
    s: &DeviceState,
    db: Database,
    method: &str,
    p: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let Some(h) = &s.history else {
        return Err(RpcError::unknown());
    };
    let ts = |name: &str| opt_number(p, name).map(|v| v.map(|v| v as i64));
    match method {
        "getrecords" => {
            let from = ts("ts")?.unwrap_or(0);
            let blocks: Vec<Value> = h
                .runs(from, i64::MAX)
                .iter()
                .map(
                    |(start, rows)| json!({"ts": start, "period": h.period, "records": rows.len()}),
                )
                .collect();
            Ok(json!({ "data_blocks": blocks }))
        }
        "getdata" => {
            let from = ts("ts")?.ok_or_else(|| missing("ts"))?;
            let to = ts("end_ts")?.unwrap_or(i64::MAX);
            let add_keys = !matches!(p.get("add_keys"), Some(Value::Bool(false)));
            let mut rows = h.rows(from, to);
            let page: Vec<&Row> = rows.by_ref().take(PAGE_ROWS).collect();
            let next = rows.next().map(|r| r.ts);
            let mut runs: Vec<(i64, Vec<Value>)> = Vec::new();
            for r in page {
                let values = values(&db, r, h.period);
                match runs.last_mut() {
                    Some((start, v)) if *start + v.len() as i64 * h.period == r.ts => {
                        v.push(values)
                    }
                    _ => runs.push((r.ts, vec![values])),
                }
            }
            let data: Vec<Value> = runs
                .into_iter()
                .map(|(ts, values)| json!({"ts": ts, "period": h.period, "values": values}))
                .collect();
            let mut out = Map::new();
            if add_keys {
                out.insert("keys".into(), keys(&db));
            }
            out.insert("data".into(), Value::Array(data));
            if let Some(n) = next {
                out.insert("next_record_ts".into(), json!(n));
            }
            Ok(Value::Object(out))
        }
        _ => Err(RpcError::unknown()),
    }
}

fn keys(db: &Database) -> Value {
    match db {
        Database::Channel(_) => json!(EM1_KEYS),
        Database::Phases => {
            let mut k: Vec<String> = ["a_", "b_", "c_"]
                .iter()
                .flat_map(|p| EM_KEYS.iter().map(move |k| format!("{p}{k}")))
                .collect();
            k.extend(["n_max_current", "n_min_current", "n_avg_current"].map(String::from));
            json!(k)
        }
    }
}

/// One row's values in the order of [`keys`].
fn values(db: &Database, r: &Row, period: i64) -> Value {
    let cell = |i: usize| r.cells.get(i).copied().unwrap_or_default();
    match db {
        Database::Channel(i) => json!(channel(&cell(*i), period, false)),
        Database::Phases => {
            let mut v: Vec<f64> = (0..3)
                .flat_map(|i| channel(&cell(i), period, true))
                .collect();
            v.extend([0.0, 0.0, 0.0]);
            json!(v)
        }
    }
}

/// One meter's values over a record: average power from the energy, voltage and current extremes.
fn channel(c: &Cell, period: i64, fundamental: bool) -> Vec<f64> {
    let watts = round((c.wh - c.ret_wh) * 3600.0 / period as f64, 1);
    let (wh, ret) = (round(c.wh, 4), round(c.ret_wh, 4));
    let mut v = vec![wh];
    if fundamental {
        v.push(wh);
    }
    v.push(ret);
    if fundamental {
        v.push(ret);
    }
    v.extend([
        0.0,
        0.0,
        watts,
        watts,
        watts.abs(),
        watts.abs(),
        round(c.v_max, 1),
        round(c.v_min, 1),
        round((c.v_min + c.v_max) / 2.0, 1),
        round(c.i_max, 3),
        round(c.i_min, 3),
        round((c.i_min + c.i_max) / 2.0, 3),
    ]);
    v
}
