//! MAC addresses: the one identity of a network device. Every spelling devices and people use is read
//! (`AA:BB:CC:DD:EE:FF`, `aa-bb-cc-dd-ee-ff`, `aabbccddeeff`, `AABB.CCDD.EEFF`), and one is written:
//! upper-case, colon-separated `AA:BB:CC:DD:EE:FF`, in snapshots, messages and logs.

use std::fmt;

/// The spellings [`Mac::parse`] accepts, for messages.
pub const ACCEPTED_SPELLINGS: &str =
    "AA:BB:CC:DD:EE:FF, AA-BB-CC-DD-EE-FF, AABBCCDDEEFF or AABB.CCDD.EEFF (any case)";

/// A MAC address (EUI-48). Displayed as `AA:BB:CC:DD:EE:FF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mac([u8; 6]);

impl Mac {
    /// Reads any common spelling: six pairs of hex digits separated by `:` or `-`, twelve hex digits with no
    /// separator, or three groups of four separated by `.`; upper or lower case, surrounding blanks ignored.
    /// Anything else is an error saying what was wrong (quoted safely) and which spellings are accepted.
    pub fn parse(text: &str) -> Result<Mac, String> {
        let t = text.trim();
        let bad = |why: &str| not_a_mac(text, why);
        if t.is_empty() {
            return Err(bad("it is empty"));
        }
        if t.len() > 17 {
            return Err(bad("too long"));
        }
        // Read without allocating: every status read checks the MAC its device reports.
        let sep = [':', '-', '.'].into_iter().find(|&c| t.contains(c));
        let mut parts = [""; 6];
        let mut n = 0;
        match sep {
            Some(c) => {
                for g in t.split(c) {
                    if let Some(slot) = parts.get_mut(n) {
                        *slot = g;
                    }
                    n += 1;
                }
            }
            None => {
                parts[0] = t;
                n = 1;
            }
        }
        let dotted = sep == Some('.');
        let expected_width = match n {
            1 => 12,
            3 if dotted => 4,
            6 if !dotted => 2,
            _ => return Err(bad("wrong number of groups")),
        };
        let groups = &parts[..n];
        if groups.iter().any(|g| g.len() != expected_width) {
            return Err(if groups.len() == 1 {
                bad("without separators a MAC has 12 hex digits")
            } else {
                bad(&format!("each group must have {expected_width} hex digits"))
            });
        }
        let mut bytes = [0u8; 6];
        let digits = groups.iter().flat_map(|g| g.bytes());
        for (k, c) in digits.enumerate() {
            let v = char::from(c)
                .to_digit(16)
                .ok_or_else(|| bad("only hex digits 0-9 and A-F are allowed"))?;
            bytes[k / 2] = (bytes[k / 2] << 4) | v as u8;
        }
        Ok(Mac(bytes))
    }

    /// A stable, locally administered MAC (first byte `x2`, never a vendor's) derived from `seed`: for
    /// simulated devices without one, so that they have an identity too.
    pub fn derived(seed: &str) -> Mac {
        let h = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let b = h.to_be_bytes();
        Mac([(b[2] & 0xF0) | 0x02, b[3], b[4], b[5], b[6], b[7]])
    }

    /// The six bytes.
    pub fn bytes(&self) -> [u8; 6] {
        self.0
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let mut text = [b':'; 17];
        for (i, b) in self.0.iter().enumerate() {
            text[3 * i] = HEX[usize::from(b >> 4)];
            text[3 * i + 1] = HEX[usize::from(b & 15)];
        }
        // Only ASCII was written.
        f.write_str(std::str::from_utf8(&text).unwrap_or_default())
    }
}

impl std::str::FromStr for Mac {
    type Err = String;
    fn from_str(s: &str) -> Result<Mac, String> {
        Mac::parse(s)
    }
}

/// The one spelling of a MAC a device reported (`None` when it is not a MAC: the text is then kept out of
/// the snapshot rather than shown in a second spelling).
pub(crate) fn normalise(reported: &str) -> Option<String> {
    // What devices report (12 hex digits) needs no parse: this runs at every status read, on the worker's
    // stack, where the parse's frame was the deepest of a read.
    let digits = reported.as_bytes();
    if digits.len() == 12 && digits.iter().all(u8::is_ascii_hexdigit) {
        let mut out = String::with_capacity(17);
        for (i, pair) in digits.chunks(2).enumerate() {
            if i > 0 {
                out.push(':');
            }
            out.extend(pair.iter().map(|b| char::from(b.to_ascii_uppercase())));
        }
        return Some(out);
    }
    Mac::parse(reported).ok().map(|m| m.to_string())
}

/// Why `text` is not a MAC, and how to write one. Out of line: every status read parses its device's MAC on
/// the worker's stack, and only a bad one needs the message's formatting.
#[cold]
#[inline(never)]
fn not_a_mac(text: &str, why: &str) -> String {
    format!(
        "{} is not a MAC address ({why}); write it as {ACCEPTED_SPELLINGS}",
        crate::text::quote(text, 40)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_common_spelling_reads_as_one_mac() {
        let want = "A8:03:2A:B1:23:45";
        for s in [
            "A8:03:2A:B1:23:45",
            "a8:03:2a:b1:23:45",
            "a8-03-2A-b1-23-45",
            "A8032AB12345",
            "a8032ab12345",
            "A803.2AB1.2345",
            "  A8032AB12345\n",
        ] {
            assert_eq!(Mac::parse(s).unwrap().to_string(), want, "{s:?}");
        }
        assert_eq!(
            normalise("3494547bf36c").as_deref(),
            Some("34:94:54:7B:F3:6C")
        );
        // Twelve hex digits take a short way; anything else is parsed.
        assert_eq!(normalise("A8032AB12345").as_deref(), Some(want));
        assert_eq!(normalise("a8-03-2A-b1-23-45").as_deref(), Some(want));
        assert_eq!(normalise("A8032AB1234G"), None);
        assert_eq!(normalise("A8032AB1234"), None);
    }

    #[test]
    fn hostile_input_is_refused_with_the_accepted_spellings() {
        for s in [
            "",
            "   ",
            "AA",
            "A8032AB1234",
            "A8032AB123456",
            "A8:03:2A:B1:23",
            "A8:03:2A:B1:23:45:67",
            "A8:03:2A:B1:2:345",
            "G8:03:2A:B1:23:45",
            "A8:03-2A:B1:23:45",
            "A8.03.2A.B1.23.45",
            "A803:2AB1:2345",
            "+8032AB12345",
            "A8032AB1234\u{e9}",
            "\u{1b}[31mA8032AB12345",
            &"A".repeat(10_000),
        ] {
            let e = Mac::parse(s).unwrap_err();
            assert!(e.contains("AA:BB:CC:DD:EE:FF"), "{s:?}: {e}");
            assert!(e.len() < 300, "{e}");
            assert!(!e.contains('\u{1b}'), "{e}");
        }
    }

    /// Every short string over separators, hex and non-hex, multi-byte and blank characters: never a panic,
    /// and whatever parses writes back in the one spelling.
    #[test]
    fn no_text_makes_it_panic() {
        let alphabet = [":", "-", ".", "a", "F", "0", "g", "\u{e9}", " ", "AB"];
        let mut texts = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = texts
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(longer);
            texts.dedup();
        }
        for t in texts.iter().chain([
            &"AB:".repeat(6),
            &"\u{e9}".repeat(6),
            &"0".repeat(17),
            &"ABCD.".repeat(3),
        ]) {
            if let Ok(m) = Mac::parse(t) {
                assert_eq!(Mac::parse(&m.to_string()), Ok(m), "{t:?}");
            }
        }
    }

    #[test]
    fn derived_macs_are_stable_local_and_distinct() {
        let a = Mac::derived("sim-1");
        assert_eq!(a, Mac::derived("sim-1"));
        assert_ne!(a, Mac::derived("sim-2"));
        assert_eq!(a.bytes()[0] & 0x0F, 0x02, "locally administered, unicast");
        assert_eq!(Mac::parse(&a.to_string()).unwrap(), a);
    }
}
