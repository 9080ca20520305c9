//! Energy history of Shelly Gen2+ meters: `EMData.GetData` (a 3-phase meter's `emdata:0`, all phases in one
//! record) and `EM1Data.GetData` (one channel's `em1data:N`).
//!
//! Shapes (transports-and-apis.md §8.2–8.3; <https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/EMData>
//! and …/EM1Data): `GetData {id, ts, end_ts, add_keys}` → `{keys: [...], data: [{ts, period, values: [[...]]}],
//! next_record_ts?}`. Each `data` item is a run of rows, one per `period` seconds from `ts` (a new item where
//! recording was interrupted); a value's meaning is its column's key (`a_total_act_energy`, Wh within the
//! period). A large answer is cut by the device: the rest starts at `next_record_ts`. `GetRecords` is not needed:
//! the runs in `GetData` already show where the records stop and start again.

use serde_json::{Value, json};

use super::Rpc;
use crate::driver::json::num;
use crate::energy::{ChannelEnergy, EnergyHistory, EnergyRecord, MAX_RECORDS};
use crate::error::{Error, Result};
use crate::models::MeterSource;
use crate::objects::Device;

/// At most this many pages for one history: enough for 60 days at 60 records a page; a device that keeps
/// paging beyond is stopped with an error, not followed for ever.
pub(crate) const MAX_PAGES: usize = 2000;

/// The first `ts` asked: the range's start rounded down to 10 minutes, so the record holding `from` is among
/// the answers on every period (60, 300, 600 s); records before `from` are dropped when the history is built.
const ALIGN: i64 = 600;

/// The longest period believed (one day): a longer one is a broken answer, not a record.
const MAX_PERIOD: i64 = 86_400;

impl Rpc {
    pub(super) fn keeps(&self, index: usize) -> bool {
        match self.shape.meter_source {
            MeterSource::Em | MeterSource::Em1 => index < self.shape.meters,
            _ => false,
        }
    }

    pub(super) fn history(
        &mut self,
        dev: &mut Device,
        index: usize,
        (from, to): (i64, i64),
    ) -> Result<EnergyHistory> {
        let name = |i: usize| {
            dev.meters
                .get(i)
                .map(|m| m.name.clone())
                .unwrap_or_default()
        };
        let (method, id, prefixes, channels) = match self.shape.meter_source {
            MeterSource::Em => {
                let n = self.shape.meters.min(3);
                let prefixes: Vec<String> = ["a_", "b_", "c_"][..n]
                    .iter()
                    .map(|p| p.to_string())
                    .collect();
                ("EMData.GetData", 0, prefixes, (0..n).map(name).collect())
            }
            _ => (
                "EM1Data.GetData",
                index,
                vec![String::new()],
                vec![name(index)],
            ),
        };
        let meter = name(index);
        let label = dev.label();
        let records = pages(&label, method, from, to, |ts| {
            let params = json!({"id": id, "ts": ts, "end_ts": to, "add_keys": true});
            self.call(dev, method, Some(params))
        })
        .and_then(|pages| {
            let mut records = Vec::new();
            for page in &pages {
                read_page(page, &prefixes, &mut records).map_err(|m| Error::Device {
                    device: label.clone(),
                    message: format!("RPC {method}: {m}"),
                })?;
            }
            Ok(records)
        })?;
        Ok(EnergyHistory::assemble(
            dev.name.clone(),
            meter,
            channels,
            (from, to),
            records,
        ))
    }
}

/// Asks pages from the range's start, following `next_record_ts` while it moves forward and stays before `to`,
/// at most [`MAX_PAGES`].
pub(crate) fn pages(
    device: &str,
    method: &str,
    from: i64,
    to: i64,
    mut fetch: impl FnMut(i64) -> Result<Value>,
) -> Result<Vec<Value>> {
    let mut ts = from - from.rem_euclid(ALIGN);
    let mut pages = Vec::new();
    let mut rows = 0usize;
    loop {
        if pages.len() == MAX_PAGES {
            return Err(Error::Device {
                device: device.to_string(),
                message: format!(
                    "RPC {method}: the device kept paging after {MAX_PAGES} pages; ask a shorter range"
                ),
            });
        }
        let page = fetch(ts)?;
        rows += row_count(&page);
        if rows > MAX_RECORDS {
            return Err(Error::Device {
                device: device.to_string(),
                message: format!(
                    "RPC {method}: the device sent more than {MAX_RECORDS} records for the range; ask a shorter range"
                ),
            });
        }
        let next = page.get("next_record_ts").and_then(Value::as_i64);
        pages.push(page);
        match next {
            Some(n) if n >= to => break,
            Some(n) if n > ts => ts = n,
            Some(n) => {
                return Err(Error::Device {
                    device: device.to_string(),
                    message: format!(
                        "RPC {method}: the device's next page ({n}) does not move past the last one ({ts}); its records cannot be read"
                    ),
                });
            }
            None => break,
        }
    }
    Ok(pages)
}

/// Rows in one page, for the bound on records.
fn row_count(page: &Value) -> usize {
    page.get("data")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("values").and_then(Value::as_array))
                .map(Vec::len)
                .sum()
        })
        .unwrap_or(0)
}

/// Adds one page's rows to `out`: for each channel prefix (`a_` … or none), the values of its keys.
pub(crate) fn read_page(
    page: &Value,
    prefixes: &[String],
    out: &mut Vec<EnergyRecord>,
) -> Result<(), String> {
    let keys: Vec<&str> = page
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("the answer has no keys")?
        .iter()
        .map(|k| k.as_str().unwrap_or(""))
        .collect();
    let column = |key: String| keys.iter().position(|k| *k == key);
    let columns: Vec<[Option<usize>; 6]> = prefixes
        .iter()
        .map(|p| {
            [
                "total_act_energy",
                "total_act_ret_energy",
                "min_voltage",
                "max_voltage",
                "min_current",
                "max_current",
            ]
            .map(|k| column(format!("{p}{k}")))
        })
        .collect();
    if columns.iter().all(|c| c[0].is_none()) {
        return Err("the answer's keys name no active energy".into());
    }
    let Some(items) = page.get("data").and_then(Value::as_array) else {
        return Ok(());
    };
    for item in items {
        // The doc types `period` as a string while its examples show a number: both are read.
        let period = num(item, &["period"])
            .or_else(|| item.get("period")?.as_str()?.parse().ok())
            .filter(|p| *p >= 1.0 && *p <= MAX_PERIOD as f64);
        let (Some(start), Some(period), Some(rows)) = (
            item.get("ts").and_then(Value::as_i64),
            period,
            item.get("values").and_then(Value::as_array),
        ) else {
            continue;
        };
        let period = period as i64;
        for (k, row) in rows.iter().enumerate() {
            let Some(row) = row.as_array() else { continue };
            let Some(at) = (k as i64)
                .checked_mul(period)
                .and_then(|o| start.checked_add(o))
            else {
                break;
            };
            let value = |c: Option<usize>| {
                c.and_then(|c| row.get(c))
                    .and_then(Value::as_f64)
                    .filter(|v| v.is_finite())
            };
            out.push(EnergyRecord {
                start: at,
                period: period as u32,
                channels: columns
                    .iter()
                    .map(|c| ChannelEnergy {
                        energy: value(c[0]),
                        returned_energy: value(c[1]),
                        min_voltage: value(c[2]),
                        max_voltage: value(c[3]),
                        min_current: value(c[4]),
                        max_current: value(c[5]),
                    })
                    .collect(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_next_record_ts_until_the_range_ends() {
        let mut asked = Vec::new();
        let pages = pages("D", "EMData.GetData", 1000, 4000, |ts| {
            asked.push(ts);
            Ok(json!({"next_record_ts": ts + 1200}))
        })
        .unwrap();
        assert_eq!(asked, [600, 1800, 3000]);
        assert_eq!(pages.len(), 3);
    }

    #[test]
    fn endless_pages_stop_at_the_bound() {
        let mut n = 0;
        let e = pages("D", "EMData.GetData", 0, i64::MAX, |ts| {
            n += 1;
            Ok(json!({"next_record_ts": ts + 1}))
        })
        .unwrap_err();
        assert_eq!(n, MAX_PAGES);
        assert!(e.to_string().contains("shorter range"), "{e}");
    }

    #[test]
    fn a_page_that_does_not_move_is_an_error() {
        let e = pages("D", "EM1Data.GetData", 0, 10_000, |_| {
            Ok(json!({"next_record_ts": 0}))
        })
        .unwrap_err();
        assert!(e.to_string().contains("does not move"), "{e}");
    }

    #[test]
    fn too_many_rows_are_refused() {
        let rows = vec![json!([1.0]); MAX_RECORDS + 1];
        let e = pages("D", "EM1Data.GetData", 0, 10, |_| {
            Ok(json!({"data": [{"ts": 0, "period": 1, "values": rows}]}))
        })
        .unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
    }

    #[test]
    fn rows_are_read_by_their_keys_and_odd_values_are_unknown() {
        let page = json!({
            "keys": ["a_max_voltage", "a_total_act_energy", "b_total_act_energy", "junk"],
            "data": [
                {"ts": 60, "period": "60", "values": [[230.5, 1.5, 2.0, 9], [231, null, "x"], "bad"]},
                {"ts": 600, "period": 0, "values": [[1, 1, 1]]},
                {"ts": i64::MAX, "period": 60, "values": [[1, 1, 1], [1, 1, 1]]}
            ]
        });
        let mut out = Vec::new();
        read_page(&page, &["a_".into(), "b_".into()], &mut out).unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!((out[0].start, out[0].period), (60, 60));
        assert_eq!(out[0].channels[0].energy, Some(1.5));
        assert_eq!(out[0].channels[0].max_voltage, Some(230.5));
        assert_eq!(out[0].channels[0].min_voltage, None);
        assert_eq!(out[0].channels[1].energy, Some(2.0));
        assert_eq!(out[1].start, 120);
        assert_eq!(out[1].channels[0].energy, None);
        assert_eq!(out[1].channels[1].energy, None);
        assert!(read_page(&json!({"keys": ["x"]}), &["".into()], &mut out).is_err());
    }
}
