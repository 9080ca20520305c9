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

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_has_date_time_and_zone() {
        let s = super::rfc3339_now();
        assert_eq!(&s[4..5], "-");
        assert_eq!(&s[10..11], "T");
        assert!(s.ends_with('Z'), "{s}");
        assert!(super::unix_now() > 1.7e9);
    }
}
