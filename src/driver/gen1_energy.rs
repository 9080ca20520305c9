//! Energy history of Shelly Gen1 EM / 3EM: the CSV download `GET /emeter/<i>/em_data.csv` (transports-and-apis.md
//! §8.4; openhab-addons `SHELLY_URL_DATA_EMETER`). Header `Date/time UTC,Active energy Wh (1),Returned energy Wh
//! (1),Min V,Max V`, rows like `2025-12-27 00:00,2.10,0.00,232.0,233.5`, oldest first; each row's energy is
//! its interval's (Wh). Columns are matched by prefix (peers see them with and without the `(1)` or a phase
//! letter). The device sends the whole file (it ignores a range), so the range is cut here; the file is bounded
//! by the HTTP body limit.

use crate::energy::{ChannelEnergy, EnergyRecord, MAX_RECORDS, parse_rfc3339};

/// One row per 10 minutes (§8.4), used when the file has a single row to tell the period by.
const DEFAULT_PERIOD: i64 = 600;

/// Reads the CSV into records (one channel each). The period is the smallest step between rows.
pub(crate) fn parse_csv(text: &str) -> Result<Vec<EnergyRecord>, String> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let header: Vec<String> = lines
        .next()
        .ok_or("the file is empty")?
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let column = |prefix: &str| header.iter().position(|c| c.starts_with(prefix));
    let (Some(at), Some(energy)) = (column("date"), column("active energy")) else {
        return Err(format!(
            "the header {} has no date and active energy columns",
            crate::text::quote(&header.join(","), 80)
        ));
    };
    let (returned, min_v, max_v) = (column("returned energy"), column("min v"), column("max v"));
    let mut rows: Vec<(i64, ChannelEnergy)> = Vec::new();
    for line in lines {
        if rows.len() == MAX_RECORDS {
            return Err(format!("more than {MAX_RECORDS} rows"));
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let Some(start) = cells.get(at).and_then(|c| parse_rfc3339(c)) else {
            continue;
        };
        let value = |c: Option<usize>| {
            c.and_then(|c| cells.get(c))
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite())
        };
        rows.push((
            start,
            ChannelEnergy {
                energy: value(Some(energy)),
                returned_energy: value(returned),
                min_voltage: value(min_v),
                max_voltage: value(max_v),
                min_current: None,
                max_current: None,
            },
        ));
    }
    rows.sort_by_key(|r| r.0);
    let period = rows
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .filter(|d| *d > 0)
        .min()
        .unwrap_or(DEFAULT_PERIOD)
        .min(86_400);
    Ok(rows
        .into_iter()
        .map(|(start, c)| EnergyRecord {
            start,
            period: period as u32,
            channels: vec![c],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_records_with_the_step_as_period() {
        let csv = "Date/time UTC,Active energy Wh (1),Returned energy Wh (1),Min V,Max V\n\
                   2025-12-27 00:10,2.50,0.00,231.0,233.0\n\
                   2025-12-27 00:00,2.10,0.10,232.0,233.5\n\
                   garbage,1,2\n\
                   2025-12-27 00:30,x,0,,\n";
        let r = parse_csv(csv).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(crate::energy::rfc3339(r[0].start), "2025-12-27T00:00:00Z");
        assert_eq!(r[0].period, 600);
        assert_eq!(r[0].channels[0].energy, Some(2.1));
        assert_eq!(r[0].channels[0].returned_energy, Some(0.1));
        assert_eq!(r[0].channels[0].min_voltage, Some(232.0));
        assert_eq!(r[2].channels[0].energy, None);
        assert_eq!(r[2].channels[0].max_voltage, None);
    }

    #[test]
    fn a_file_without_the_columns_is_refused() {
        assert!(parse_csv("").is_err());
        assert!(parse_csv("a,b\n1,2\n").unwrap_err().contains("header"));
    }
}
