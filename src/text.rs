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

/// `s` with every control character written as an escape (`\n`, `\r`, `\0`, `\u{1b}`), so that one log
/// record stays one line whatever text it carries. Borrowed when there is nothing to escape.
pub(crate) fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape_controls("plain ü"), "plain ü");
        assert_eq!(
            escape_controls("a\r\nb\0c\u{1b}[2J"),
            "a\\r\\nb\\u{0}c\\u{1b}[2J"
        );
    }

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
