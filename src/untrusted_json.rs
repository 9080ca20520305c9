//! JSON from outside (device answers, webhook bodies, simulation files), parsed with bounded nesting. Our
//! threads have small stacks (256 KiB), and serde_json's own limit (128 levels) is deeper than such a stack
//! holds in a debug build: a 100,000-deep `[[[…` overflowed a worker. No device sends more than a few levels.

use serde_json::Value;

/// Deepest nesting accepted; real device answers use fewer than 10 levels.
pub(crate) const MAX_DEPTH: usize = 32;

/// Parses `bytes` as JSON after checking, in one linear pass, that arrays and objects nest at most
/// [`MAX_DEPTH`] levels. The error is a short phrase for a message.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!("JSON nested deeper than {MAX_DEPTH} levels"));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_bounded_but_brackets_in_strings_do_not_count() {
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(ok.as_bytes()).is_ok());
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(
            parse(deep.as_bytes())
                .unwrap_err()
                .contains("deeper than 32")
        );
        assert!(parse("[".repeat(100_000).as_bytes()).is_err());
        let quoted = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(100), "{".repeat(100));
        assert_eq!(
            parse(quoted.as_bytes()).unwrap()["a"]
                .as_str()
                .unwrap()
                .len(),
            201
        );
        assert!(parse(b"{\"a\":").is_err());
    }
}
