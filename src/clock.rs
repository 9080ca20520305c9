//! Wall-clock helpers: Unix seconds and RFC 3339 timestamps (UTC).

use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Seconds since the Unix epoch, with fractions.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The current time as RFC 3339 in UTC, e.g. `2026-11-21T10:15:30.123Z`.
pub(crate) fn rfc3339_now() -> String {
    let now = OffsetDateTime::now_utc();
    let millis = now
        .replace_nanosecond(now.millisecond() as u32 * 1_000_000)
        .unwrap_or(now);
    millis.format(&Rfc3339).unwrap_or_default()
}

/// Seconds since an RFC 3339 timestamp (as [`rfc3339_now`] writes them), `None` when unreadable.
pub(crate) fn seconds_since(rfc3339: &str) -> Option<f64> {
    // `YYYY-MM-DDTHH:MM:SS[.fff]Z`, read by hand (the time crate's parser is a feature we do not build).
    let b = rfc3339.as_bytes();
    let n = |r: std::ops::Range<usize>| rfc3339.get(r)?.parse::<i32>().ok();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' || !rfc3339.ends_with('Z') {
        return None;
    }
    let month = time::Month::try_from(n(5..7)? as u8).ok()?;
    let date = time::Date::from_calendar_date(n(0..4)?, month, n(8..10)? as u8).ok()?;
    let t = time::Time::from_hms(n(11..13)? as u8, n(14..16)? as u8, n(17..19)? as u8).ok()?;
    let then = time::PrimitiveDateTime::new(date, t).assume_utc();
    let d = OffsetDateTime::now_utc() - then;
    Some(d.as_seconds_f64().max(0.0))
}

/// A duration for people, to the unit that matters: `45 s`, `12 min`, `2 h 5 min`, `3 d 4 h`.
pub(crate) fn human_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => match (s / 3600, s % 3600 / 60) {
            (h, 0) => format!("{h} h"),
            (h, m) => format!("{h} h {m} min"),
        },
        _ => match (s / 86400, s % 86400 / 3600) {
            (days, 0) => format!("{days} d"),
            (days, h) => format!("{days} d {h} h"),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_in_the_unit_that_matters() {
        use std::time::Duration;
        let h = |s| super::human_duration(Duration::from_secs(s));
        assert_eq!(
            [h(45), h(720), h(7200), h(7500), h(86400 * 3 + 3600 * 4)],
            ["45 s", "12 min", "2 h", "2 h 5 min", "3 d 4 h"]
        );
        let ago = super::seconds_since(&super::rfc3339_now()).unwrap();
        assert!((0.0..60.0).contains(&ago), "{ago}");
    }

    #[test]
    fn rfc3339_has_date_time_and_zone() {
        let s = super::rfc3339_now();
        assert_eq!(&s[4..5], "-");
        assert_eq!(&s[10..11], "T");
        assert!(s.ends_with('Z'), "{s}");
        assert!(super::unix_now() > 1.7e9);
    }
}
