//! Percent-encoding and decoding, query strings and request targets: the few pieces of URL handling the
//! webhook listener, the drivers and the emulator need, so no crate.

/// Decodes `%XX` escapes; `+` becomes a space when `plus_is_space` (query strings, not paths). Invalid escapes
/// are kept as written, invalid UTF-8 is replaced.
pub(crate) fn decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => match (hex(b.get(i + 1)), hex(b.get(i + 2))) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: Option<&u8>) -> Option<u8> {
    (*c? as char).to_digit(16).map(|d| d as u8)
}

/// Form-style query pairs, decoded, in order; a pair without `=` has an empty value.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k, true), decode(v, true))
        })
        .collect()
}

/// Percent-encodes a query value or key: everything except unreserved characters (RFC 3986).
pub(crate) fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// Makes a URL's path-and-query sendable in a request line: spaces, controls and non-ASCII bytes are
/// percent-encoded, everything else (including `${...}` tokens) is left as written. (The emulator's webhook
/// calls.)
#[cfg(any(test, feature = "emulator"))]
pub(crate) fn encode_target(target: &str) -> String {
    let mut out = String::with_capacity(target.len());
    for &c in target.as_bytes() {
        if c.is_ascii_graphic() {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_encoding_round_trips() {
        let raw = "a b&c=d/é~";
        let enc = encode_component(raw);
        assert_eq!(enc, "a%20b%26c%3Dd%2F%C3%A9~");
        assert_eq!(decode(&enc, true), raw);
    }

    #[test]
    fn decodes_escapes_and_plus() {
        assert_eq!(decode("Power1%201", true), "Power1 1");
        assert_eq!(decode("Status+0", true), "Status 0");
        assert_eq!(decode("a+b", false), "a+b");
        assert_eq!(decode("100%", true), "100%");
        assert_eq!(decode("%zz%4", true), "%zz%4");
        assert_eq!(decode("%C3%A4", false), "ä");
    }

    #[test]
    fn query_pairs_keep_order_and_repeats() {
        let q = query_pairs("index=0&urls%5B%5D=http%3A%2F%2Fh%2Fa&urls[]=b&flag&&x=");
        let want = [
            ("index", "0"),
            ("urls[]", "http://h/a"),
            ("urls[]", "b"),
            ("flag", ""),
            ("x", ""),
        ];
        let got: Vec<(&str, &str)> = q.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn target_encoding_keeps_tokens() {
        assert_eq!(
            encode_target("/h?a=${ev.tC}&b=x y"),
            "/h?a=${ev.tC}&b=x%20y"
        );
    }
}
