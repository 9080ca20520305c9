//! Energy history read from a meter's own memory (issue 28): the public types, how a device's records become a
//! history in time order with its gaps, and the times people write (`2026-11-25T00:00:00Z`, `-24h`).
//!
//! A gap is an entry of its own kind ([`HistoryEntry::Gap`]) with no energy field, so summing the records can
//! never count the time the device did not record as zero consumption.

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::error::{Error, Result};

/// At most this many records in one history (about 69 days of 1-minute records, beyond the 60 days a Pro 3EM
/// keeps): a device paging on and on is stopped, not followed until memory runs out.
pub const MAX_RECORDS: usize = 100_000;

/// A meter's energy history over `[from, to)`, as the device recorded it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EnergyHistory {
    /// The device's name.
    pub device: String,
    /// The meter asked for.
    pub meter: String,
    /// What each channel of a record is: the names of the meters the device records together (a 3-phase meter:
    /// its three phases, in the order of [`EnergyRecord::channels`]; otherwise the one meter).
    pub channels: Vec<String>,
    /// Start of the range asked for (Unix seconds, UTC; RFC 3339 in JSON).
    #[serde(serialize_with = "as_rfc3339")]
    pub from: i64,
    /// End of the range asked for, exclusive (Unix seconds, UTC; RFC 3339 in JSON).
    #[serde(serialize_with = "as_rfc3339")]
    pub to: i64,
    /// Records and gaps in time order, together covering `[from, to)`: the records whose interval overlaps it
    /// (the first may start before `from`, the last end after `to`), and gaps for the rest.
    pub entries: Vec<HistoryEntry>,
}

/// One entry of a history: a record of the device, or time it has no record for.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "Kind")]
pub enum HistoryEntry {
    /// The device's record of one interval.
    Record(EnergyRecord),
    /// Time within the range that the device has no record for (it was off, not yet recording, or the records
    /// are older than it keeps). Unknown energy: never zero.
    Gap(HistoryGap),
}

/// The device's record of one interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EnergyRecord {
    /// Start of the interval (Unix seconds, UTC; RFC 3339 in JSON).
    #[serde(serialize_with = "as_rfc3339")]
    pub start: i64,
    /// Length of the interval in seconds (60 on most meters, 300 on the 3EM-63 Gen3, 600 on Gen1 EM/3EM).
    pub period: u32,
    /// One entry per channel, in the order of [`EnergyHistory::channels`].
    pub channels: Vec<ChannelEnergy>,
}

/// One channel's (phase's) values in one record; what the device did not record is `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChannelEnergy {
    /// Active energy drawn during the interval, Wh.
    pub energy: Option<f64>,
    /// Active energy returned (exported) during the interval, Wh, where the device keeps it.
    pub returned_energy: Option<f64>,
    /// Lowest voltage during the interval, V.
    pub min_voltage: Option<f64>,
    /// Highest voltage during the interval, V.
    pub max_voltage: Option<f64>,
    /// Lowest current during the interval, A.
    pub min_current: Option<f64>,
    /// Highest current during the interval, A.
    pub max_current: Option<f64>,
}

/// Time the device has no record for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HistoryGap {
    /// Start (Unix seconds, UTC; RFC 3339 in JSON).
    #[serde(serialize_with = "as_rfc3339")]
    pub start: i64,
    /// End, exclusive (Unix seconds, UTC; RFC 3339 in JSON).
    #[serde(serialize_with = "as_rfc3339")]
    pub end: i64,
}

impl EnergyHistory {
    /// Builds the history of `[from, to)` from the device's records (any order, duplicates of one start kept
    /// once): records overlapping the range, and a gap wherever no record covers it (time not recorded yet at
    /// the end included).
    pub(crate) fn assemble(
        device: String,
        meter: String,
        channels: Vec<String>,
        (from, to): (i64, i64),
        mut records: Vec<EnergyRecord>,
    ) -> Self {
        records.retain(|r| r.period > 0 && r.start < to && r.start + i64::from(r.period) > from);
        records.sort_by_key(|r| r.start);
        records.dedup_by_key(|r| r.start);
        let mut entries = Vec::with_capacity(records.len() + 1);
        // The first record may start before `from` (it holds `from`); later ones start where the last ended.
        let mut covered = records.first().map_or(from, |r| r.start.min(from));
        for r in records {
            if r.start < covered {
                // Overlaps the record before (a hostile or confused device): the earlier one stands.
                continue;
            }
            if r.start > covered {
                entries.push(HistoryEntry::Gap(HistoryGap {
                    start: covered,
                    end: r.start,
                }));
            }
            covered = r.start + i64::from(r.period);
            entries.push(HistoryEntry::Record(r));
        }
        if covered < to {
            entries.push(HistoryEntry::Gap(HistoryGap {
                start: covered,
                end: to,
            }));
        }
        EnergyHistory {
            device,
            meter,
            channels,
            from,
            to,
            entries,
        }
    }

    /// The records, in time order.
    pub fn records(&self) -> impl Iterator<Item = &EnergyRecord> {
        self.entries.iter().filter_map(|e| match e {
            HistoryEntry::Record(r) => Some(r),
            HistoryEntry::Gap(_) => None,
        })
    }

    /// The gaps, in time order.
    pub fn gaps(&self) -> impl Iterator<Item = &HistoryGap> {
        self.entries.iter().filter_map(|e| match e {
            HistoryEntry::Gap(g) => Some(g),
            HistoryEntry::Record(_) => None,
        })
    }

    /// Energy drawn per channel over the recorded intervals, Wh (`None` where no record gave the channel's
    /// energy). Gaps are not in it: check [`gaps`](Self::gaps) before taking it as the range's total.
    pub fn total_energy(&self) -> Vec<Option<f64>> {
        self.sum(|c| c.energy)
    }

    /// Energy returned per channel over the recorded intervals, Wh (`None` where the device keeps none).
    pub fn total_returned_energy(&self) -> Vec<Option<f64>> {
        self.sum(|c| c.returned_energy)
    }

    fn sum(&self, value: impl Fn(&ChannelEnergy) -> Option<f64>) -> Vec<Option<f64>> {
        let mut totals = vec![None; self.channels.len()];
        for r in self.records() {
            for (t, c) in totals.iter_mut().zip(&r.channels) {
                if let Some(v) = value(c) {
                    *t = Some(t.unwrap_or(0.0) + v);
                }
            }
        }
        totals
    }
}

/// Checks a range asked for: `from` before `to`.
pub(crate) fn check_range(from: i64, to: i64) -> Result<()> {
    if from < to {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "the energy history range is empty: from ({}) is not before to ({}); give a start earlier than the end",
        rfc3339(from),
        rfc3339(to)
    )))
}

/// Unix seconds as RFC 3339 in UTC: `2026-11-25T13:00:00Z`.
pub fn rfc3339(unix: i64) -> String {
    match OffsetDateTime::from_unix_timestamp(unix) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => format!("@{unix}"),
    }
}

fn as_rfc3339<S: Serializer>(unix: &i64, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*unix))
}

/// Reads a time as people write it, relative to `now` (Unix seconds): RFC 3339 with `Z` or an offset
/// (`2026-11-25T13:00:00+01:00`; seconds optional), a date (`2026-11-25`, midnight UTC), a space for the `T`,
/// `now`, or a time before now (`-24h`, `-90m`, `-7d`, `-30s`).
pub fn parse_history_time(text: &str, now: i64) -> Result<i64> {
    let t = text.trim();
    let bad = || {
        Error::InvalidArgument(format!(
            "{} is not a time: write RFC 3339 (2026-11-25T13:00:00Z or with an offset, +01:00), a date \
             (2026-11-25, UTC), 'now', or a time before now (-24h, -90m, -7d)",
            crate::text::quote(text, 40)
        ))
    };
    if t == "now" {
        return Ok(now);
    }
    if let Some(rel) = t.strip_prefix('-') {
        let (n, unit) = rel.split_at(rel.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
        let n: i64 = n.parse().map_err(|_| bad())?;
        let scale = match unit {
            "s" => 1,
            "m" | "min" => 60,
            "h" => 3600,
            "d" => 86400,
            _ => return Err(bad()),
        };
        return n
            .checked_mul(scale)
            .and_then(|s| now.checked_sub(s))
            .ok_or_else(bad);
    }
    parse_rfc3339(t).ok_or_else(bad)
}

/// `YYYY-MM-DD`, optionally `[T ]HH:MM[:SS[.fff]]` and `Z` / `±HH:MM` (no zone: UTC), read by hand (the time
/// crate's parser is a feature we do not build).
pub(crate) fn parse_rfc3339(t: &str) -> Option<i64> {
    let num = |s: &str| -> Option<u8> {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (date, rest) = (t.get(..10)?, t.get(10..)?);
    let (y, m, d) = (date.get(..4)?, date.get(5..7)?, date.get(8..10)?);
    if date.as_bytes()[4] != b'-'
        || date.as_bytes()[7] != b'-'
        || !y.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let month = time::Month::try_from(num(m)?).ok()?;
    let date = time::Date::from_calendar_date(y.parse().ok()?, month, num(d)?).ok()?;
    let (mut clock, mut offset) = (time::Time::MIDNIGHT, 0i64);
    if !rest.is_empty() {
        let rest = rest.strip_prefix(['T', 't', ' '])?;
        let zone_at = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
        let (hms, zone) = rest.split_at(zone_at);
        let hms = hms.split('.').next()?;
        let mut parts = hms.split(':');
        let h = num(parts.next()?)?;
        let min = num(parts.next()?)?;
        let s = match parts.next() {
            Some(s) => num(s)?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        clock = time::Time::from_hms(h, min, s).ok()?;
        offset = match zone {
            "" | "Z" | "z" => 0,
            z => {
                let sign = if z.starts_with('-') { -1 } else { 1 };
                let (oh, om) = z.get(1..)?.split_once(':')?;
                let (oh, om) = (i64::from(num(oh)?), i64::from(num(om)?));
                if oh > 23 || om > 59 {
                    return None;
                }
                sign * (oh * 3600 + om * 60)
            }
        };
    }
    Some(
        time::PrimitiveDateTime::new(date, clock)
            .assume_utc()
            .unix_timestamp()
            - offset,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(start: i64, wh: f64) -> EnergyRecord {
        EnergyRecord {
            start,
            period: 60,
            channels: vec![ChannelEnergy {
                energy: Some(wh),
                ..ChannelEnergy::default()
            }],
        }
    }

    #[test]
    fn gaps_fill_what_no_record_covers_and_are_not_summed() {
        let h = EnergyHistory::assemble(
            "D".into(),
            "M".into(),
            vec!["M".into()],
            (0, 600),
            vec![
                record(240, 2.0),
                record(60, 1.0),
                record(60, 9.0),
                record(120, 1.5),
            ],
        );
        let gaps: Vec<_> = h.gaps().map(|g| (g.start, g.end)).collect();
        assert_eq!(gaps, [(0, 60), (180, 240), (300, 600)]);
        assert_eq!(h.records().count(), 3);
        assert_eq!(h.total_energy(), [Some(4.5)]);
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(json["Entries"][0]["Kind"], "Gap");
        assert_eq!(json["Entries"][1]["Start"], "1970-01-01T00:01:00Z");
        assert!(json["Entries"][0].get("Energy").is_none());
        // The record holding `from` counts; one that ends at `from` does not.
        let h2 = EnergyHistory::assemble(
            "D".into(),
            "M".into(),
            vec!["M".into()],
            (90, 200),
            vec![
                record(30, 1.0),
                record(60, 1.0),
                record(120, 1.0),
                record(180, 1.0),
            ],
        );
        assert_eq!(
            h2.records().map(|r| r.start).collect::<Vec<_>>(),
            [60, 120, 180]
        );
        assert_eq!(h2.gaps().count(), 0);
    }

    #[test]
    fn no_record_is_one_gap_and_unknown_totals() {
        let h = EnergyHistory::assemble("D".into(), "M".into(), vec!["M".into()], (0, 60), vec![]);
        assert_eq!(h.gaps().count(), 1);
        assert_eq!(h.total_energy(), [None]);
    }

    #[test]
    fn times_people_write() {
        let now = 1_764_000_000;
        assert_eq!(parse_history_time("-24h", now).unwrap(), now - 86400);
        assert_eq!(parse_history_time("-90m", now).unwrap(), now - 5400);
        assert_eq!(parse_history_time("now", now).unwrap(), now);
        let z = parse_history_time("2026-11-25T13:00:00Z", now).unwrap();
        assert_eq!(rfc3339(z), "2026-11-25T13:00:00Z");
        assert_eq!(
            parse_history_time("2026-11-25T14:00+01:00", now).unwrap(),
            z
        );
        assert_eq!(parse_history_time("2026-11-25 13:00:00", now).unwrap(), z);
        assert_eq!(
            parse_history_time("2026-11-25", now).unwrap(),
            z - 13 * 3600
        );
        for bad in [
            "yesterday",
            "-24",
            "2026-13-01",
            "2026-11-25T25:00Z",
            "-h",
            "",
            "2026-11-25T13:00+1",
        ] {
            let e = parse_history_time(bad, now).unwrap_err().to_string();
            assert!(e.contains("RFC 3339"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_empty_range_is_refused_with_both_ends() {
        let e = check_range(120, 60).unwrap_err().to_string();
        assert!(
            e.contains("1970-01-01T00:02:00Z") && e.contains("earlier"),
            "{e}"
        );
        assert!(check_range(60, 60).is_err() && check_range(0, 60).is_ok());
    }
}
