//! An emulated energy meter's interval records, as Pro 3EM / EM Gen3 / Gen1 EM keep them: one row per period on
//! the emulator clock (60 s; 300 s on the 3EM-63 Gen3; 600 s on Gen1, transports-and-apis.md §8.1, §8.4),
//! oldest dropped past the retention (60 days, the Pro 3EM's), rows missing where the device was off
//! ([`History::remove`], `Emulator::set_history_gap`). Served by `rpc_history.rs` and `gen1.rs`.

use std::collections::VecDeque;

/// Rows answered per `GetData` page; the rest follows from `next_record_ts` (the real page size is not
/// documented; paging is what matters).
pub(crate) const PAGE_ROWS: usize = 720;

/// How long a meter keeps its rows by default: the Pro 3EM's 60 days.
pub(crate) const RETENTION_SECS: i64 = 60 * 86_400;

/// The length of a model's records: 600 s on Gen1 EM/3EM, 300 s on the 3EM-63 Gen3, else 60 s.
pub(crate) fn record_period(info: &crate::models::ModelInfo) -> i64 {
    if info.meter_source() == crate::models::MeterSource::Gen1Emeters {
        600
    } else if info.model == "Shelly3EM63G3" {
        300
    } else {
        60
    }
}

/// One meter's values over one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Cell {
    /// Energy drawn, Wh.
    pub wh: f64,
    /// Energy returned, Wh.
    pub ret_wh: f64,
    pub v_min: f64,
    pub v_max: f64,
    pub i_min: f64,
    pub i_max: f64,
}

impl Cell {
    /// This interval followed by `next`: energy adds, extremes widen.
    fn merge(self, next: Cell) -> Cell {
        Cell {
            wh: self.wh + next.wh,
            ret_wh: self.ret_wh + next.ret_wh,
            v_min: self.v_min.min(next.v_min),
            v_max: self.v_max.max(next.v_max),
            i_min: self.i_min.min(next.i_min),
            i_max: self.i_max.max(next.i_max),
        }
    }
}

/// One record: its start and every meter's cell.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub ts: i64,
    pub cells: Vec<Cell>,
}

/// The records of one device.
#[derive(Debug)]
pub(crate) struct History {
    pub period: i64,
    retention: i64,
    rows: VecDeque<Row>,
    /// The period being filled: minutes closed so far.
    pending: Option<Vec<Cell>>,
}

impl History {
    pub(crate) fn new(period: i64) -> Self {
        History {
            period,
            retention: RETENTION_SECS,
            rows: VecDeque::new(),
            pending: None,
        }
    }

    /// A minute ending at `end` (Unix seconds, a multiple of 60) closed with these cells.
    pub(crate) fn minute(&mut self, end: i64, cells: Vec<Cell>) {
        let merged = match self.pending.take() {
            Some(p) => p.into_iter().zip(cells).map(|(a, b)| a.merge(b)).collect(),
            None => cells,
        };
        if end % self.period != 0 {
            self.pending = Some(merged);
            return;
        }
        self.rows.push_back(Row {
            ts: end - self.period,
            cells: merged,
        });
        self.trim(end);
    }

    /// Keeps only what is younger than the retention at `now`.
    fn trim(&mut self, now: i64) {
        while self
            .rows
            .front()
            .is_some_and(|r| r.ts < now - self.retention)
        {
            self.rows.pop_front();
        }
    }

    /// Sets how long rows are kept and drops older ones.
    pub(crate) fn set_retention(&mut self, secs: i64, now: i64) {
        self.retention = secs.max(self.period);
        self.trim(now);
    }

    /// Records for the `secs` before `now` where there are none, each with `cells` (a demo's or a test's past:
    /// the device ran at that load).
    pub(crate) fn backfill(&mut self, now: i64, secs: i64, cells: &[Cell]) {
        let end = now - now.rem_euclid(self.period);
        let start = end - secs.clamp(0, self.retention);
        let mut rows: VecDeque<Row> = (0..(end - start) / self.period)
            .map(|k| start + k * self.period)
            .filter(|ts| self.rows.binary_search_by_key(ts, |r| r.ts).is_err())
            .map(|ts| Row {
                ts,
                cells: cells.to_vec(),
            })
            .collect();
        rows.extend(self.rows.drain(..));
        rows.make_contiguous().sort_by_key(|r| r.ts);
        self.rows = rows;
        self.trim(now);
    }

    /// The device recorded nothing in `[from, to)` (it was off).
    pub(crate) fn remove(&mut self, from: i64, to: i64) {
        self.rows.retain(|r| r.ts < from || r.ts >= to);
    }

    /// Rows starting in `[from, to]`, oldest first.
    pub(crate) fn rows(&self, from: i64, to: i64) -> impl Iterator<Item = &Row> {
        let first = self.rows.partition_point(|r| r.ts < from);
        self.rows.range(first..).take_while(move |r| r.ts <= to)
    }

    /// Runs of consecutive rows from `from` to `to`: `(start, rows)`; a new run after every missing period.
    pub(crate) fn runs(&self, from: i64, to: i64) -> Vec<(i64, Vec<&Row>)> {
        let mut runs: Vec<(i64, Vec<&Row>)> = Vec::new();
        for r in self.rows(from, to) {
            match runs.last_mut() {
                Some((start, rows)) if *start + rows.len() as i64 * self.period == r.ts => {
                    rows.push(r)
                }
                _ => runs.push((r.ts, vec![r])),
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(wh: f64) -> Vec<Cell> {
        vec![Cell {
            wh,
            v_min: 230.0,
            v_max: 230.0,
            ..Cell::default()
        }]
    }

    #[test]
    fn minutes_fill_periods_and_gaps_split_runs() {
        let mut h = History::new(300);
        for m in 1..=20 {
            h.minute(m * 60, cell(1.0));
        }
        let all: Vec<_> = h.rows(0, i64::MAX).map(|r| (r.ts, r.cells[0].wh)).collect();
        assert_eq!(all, [(0, 5.0), (300, 5.0), (600, 5.0), (900, 5.0)]);
        h.remove(300, 600);
        let runs: Vec<_> = h.runs(0, 900).iter().map(|(s, r)| (*s, r.len())).collect();
        assert_eq!(runs, [(0, 1), (600, 2)]);
    }

    #[test]
    fn a_backfill_adds_only_missing_rows_in_order() {
        let mut h = History::new(60);
        h.minute(600, cell(1.0));
        h.backfill(630, 300, &cell(2.0));
        let all: Vec<_> = h.rows(0, i64::MAX).map(|r| (r.ts, r.cells[0].wh)).collect();
        assert_eq!(
            all,
            [(300, 2.0), (360, 2.0), (420, 2.0), (480, 2.0), (540, 1.0)]
        );
    }

    #[test]
    fn old_rows_go_past_the_retention() {
        let mut h = History::new(60);
        for m in 1..=10 {
            h.minute(m * 60, cell(1.0));
        }
        h.set_retention(240, 600);
        assert_eq!(h.rows(0, i64::MAX).next().unwrap().ts, 360);
    }
}
