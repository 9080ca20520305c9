//! Untrusted text (device answers, headers, requests) made safe to quote in errors and logs.

/// `s` cut to at most `max` bytes on a character boundary, with `…` when something was cut. Byte offsets
/// into device text must never be used to cut it directly: a multi-byte character at the cut would panic.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// `s` clipped to `max` bytes and quoted with control characters escaped (`"a\nb"`), so that a device or a
/// client cannot start a new log line or hide text with terminal escapes.
pub(crate) fn quote(s: &str, max: usize) -> String {
    format!("{:?}", clip(s, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_never_splits_a_character() {
        // Every cut position through 1-, 2-, 3- and 4-byte characters.
        let s = "aü€😀b".repeat(5);
        for max in 0..=s.len() + 1 {
            let c = clip(&s, max);
            let kept = c.strip_suffix('…').unwrap_or(&c);
            assert!(kept.len() <= max && s.starts_with(kept), "{max}: {c}");
            assert!(
                s.len() - kept.len() < 4 || c.ends_with('…'),
                "a cut is marked"
            );
        }
        assert_eq!(clip("short", 80), "short");
    }

    #[test]
    fn quote_escapes_line_breaks_and_controls() {
        assert_eq!(quote("a\r\nb\0\u{1b}[31m", 80), r#""a\r\nb\0\u{1b}[31m""#);
        assert_eq!(quote("ääää", 3), "\"ä…\"");
    }
}
