//! CoIoT datagrams (Shelly Gen1's CoAP dialect; reference `transports-and-apis.md` §4.2): a pure, strict and
//! bounded parser, and the encoder the emulator uses for the same format. A status is CoAP with the
//! non-standard code 0.30 to `cit/s`, the options 3332 (`<model>#<device id>#<revision>`), 3412 (validity)
//! and 3420 (serial), then `0xFF` and a JSON payload `{"G":[[channel, sensor id, value], ...]}`.
//!
//! Every datagram is hostile: the size is checked first, options are walked for real (an option byte may be
//! `0xFF`, so the payload marker is never searched for), their count and lengths are bounded, and the JSON goes
//! through `untrusted_json` (bounded nesting) with a bounded number of entries.

use serde_json::Value;

/// Largest datagram looked at; a real status is a few hundred bytes.
pub(crate) const MAX_DATAGRAM: usize = 2048;
/// Options accepted in one message (a status has about six).
const MAX_OPTIONS: usize = 16;
/// Uri-Path segments accepted.
const MAX_PATH: usize = 4;
/// Sensor values accepted in one status (a 4-relay device sends a few dozen).
pub(crate) const MAX_VALUES: usize = 256;
/// The periodic status code 0.30 (class 0, detail 30), which real firmware uses instead of a CoAP method.
pub(crate) const CODE_STATUS: u8 = 30;

const OPTION_URI_PATH: u16 = 11;
/// Shelly's global device id: `<model>#<device id>#<CoIoT revision>`.
pub(crate) const OPTION_DEVICE: u16 = 3332;
/// How long the status is valid.
pub(crate) const OPTION_VALIDITY: u16 = 3412;
/// Changes with every new status.
pub(crate) const OPTION_SERIAL: u16 = 3420;

/// What a datagram claims to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    /// CoAP message type: 0 CON, 1 NON, 2 ACK, 3 RST (periodic statuses are parsed whatever it is).
    pub kind: u8,
    /// CoAP code byte (`class << 5 | detail`); [`CODE_STATUS`] for a status.
    pub code: u8,
    pub message_id: u16,
    /// Uri-Path segments (`["cit", "s"]`).
    pub path: Vec<&'a str>,
    /// Option 3332.
    pub device: Option<DeviceTag<'a>>,
    /// Option 3412.
    pub validity: Option<u16>,
    /// Option 3420.
    pub serial: Option<u16>,
    pub payload: &'a [u8],
}

/// Option 3332, split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceTag<'a> {
    /// `SHSW-1`, `SHPLG-S`, ...
    pub model: &'a str,
    /// The device id: its MAC (12 hex digits) or its last 6.
    pub id: &'a str,
    /// CoIoT revision (1 or 2).
    pub revision: u8,
}

impl Message<'_> {
    /// A periodic status: code 0.30 to `cit/s`.
    pub(crate) fn is_status(&self) -> bool {
        self.code == CODE_STATUS && self.path == ["cit", "s"]
    }
}

/// Parses one datagram. The error is a short phrase for a log line.
pub(crate) fn parse(d: &[u8]) -> Result<Message<'_>, &'static str> {
    if d.len() > MAX_DATAGRAM {
        return Err("datagram larger than 2 KiB");
    }
    if d.len() < 4 {
        return Err("shorter than a CoAP header");
    }
    if d[0] >> 6 != 1 {
        return Err("not CoAP version 1");
    }
    let kind = (d[0] >> 4) & 3;
    let token = usize::from(d[0] & 0x0F);
    if token > 8 {
        return Err("token longer than 8 bytes");
    }
    let mut m = Message {
        kind,
        code: d[1],
        message_id: u16::from_be_bytes([d[2], d[3]]),
        path: Vec::new(),
        device: None,
        validity: None,
        serial: None,
        payload: &[],
    };
    let mut at = 4 + token;
    if at > d.len() {
        return Err("token cut short");
    }
    let (mut number, mut count) = (0u16, 0usize);
    while at < d.len() {
        let b = d[at];
        if b == 0xFF {
            if at + 1 == d.len() {
                return Err("payload marker without a payload");
            }
            m.payload = &d[at + 1..];
            return Ok(m);
        }
        at += 1;
        let delta = extended(b >> 4, d, &mut at)?;
        let len = usize::from(extended(b & 0x0F, d, &mut at)?);
        count += 1;
        if count > MAX_OPTIONS {
            return Err("more than 16 options");
        }
        number = number.checked_add(delta).ok_or("option number overflows")?;
        let value = d.get(at..at + len).ok_or("option cut short")?;
        at += len;
        match number {
            OPTION_URI_PATH => {
                if m.path.len() == MAX_PATH {
                    return Err("Uri-Path longer than 4 segments");
                }
                m.path
                    .push(std::str::from_utf8(value).map_err(|_| "Uri-Path not UTF-8")?);
            }
            OPTION_DEVICE => {
                if m.device.is_some() {
                    return Err("option 3332 twice");
                }
                m.device = Some(device_tag(value)?);
            }
            OPTION_VALIDITY => m.validity = Some(uint16(value, m.validity)?),
            OPTION_SERIAL => m.serial = Some(uint16(value, m.serial)?),
            // Other elective (even) options are skipped; an unknown critical (odd) one is refused as CoAP says.
            n if n % 2 == 1 && !matches!(n, 1 | 3 | 5 | 7 | 11 | 13 | 15 | 17 | 35 | 39 | 60) => {
                return Err("unknown critical option");
            }
            _ => {}
        }
    }
    Ok(m)
}

/// A nibble 0–12 is itself; 13 and 14 take one or two more bytes; 15 is reserved.
fn extended(nibble: u8, d: &[u8], at: &mut usize) -> Result<u16, &'static str> {
    match nibble {
        0..=12 => Ok(u16::from(nibble)),
        13 => {
            let b = *d.get(*at).ok_or("option header cut short")?;
            *at += 1;
            Ok(u16::from(b) + 13)
        }
        14 => {
            let v = d.get(*at..*at + 2).ok_or("option header cut short")?;
            *at += 2;
            u16::from_be_bytes([v[0], v[1]])
                .checked_add(269)
                .ok_or("option header overflows")
        }
        _ => Err("reserved option nibble 15"),
    }
}

fn uint16(v: &[u8], before: Option<u16>) -> Result<u16, &'static str> {
    if before.is_some() {
        return Err("option repeated");
    }
    match v {
        [] => Ok(0),
        [a] => Ok(u16::from(*a)),
        [a, b] => Ok(u16::from_be_bytes([*a, *b])),
        _ => Err("option longer than 2 bytes"),
    }
}

fn device_tag(v: &[u8]) -> Result<DeviceTag<'_>, &'static str> {
    let s = std::str::from_utf8(v).map_err(|_| "option 3332 not UTF-8")?;
    let mut parts = s.split('#');
    let (Some(model), Some(id), Some(rev), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("option 3332 is not model#id#revision");
    };
    let printable = |t: &str| t.bytes().all(|b| b.is_ascii_graphic());
    if model.is_empty() || model.len() > 32 || !printable(model) {
        return Err("option 3332: bad model");
    }
    if !(6..=12).contains(&id.len()) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("option 3332: the device id is not 6 to 12 hex digits");
    }
    let revision = rev.parse().map_err(|_| "option 3332: bad revision")?;
    Ok(DeviceTag {
        model,
        id,
        revision,
    })
}

/// One `[channel, sensor id, value]` of a status.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reading {
    pub channel: i64,
    pub sensor: i64,
    pub value: Value,
}

/// The `G` list of a status payload.
pub(crate) fn status_values(payload: &[u8]) -> Result<Vec<Reading>, &'static str> {
    let v = crate::untrusted_json::parse(payload).map_err(|_| "payload is not bounded JSON")?;
    let list = v
        .get("G")
        .and_then(Value::as_array)
        .ok_or("payload has no G list")?;
    if list.len() > MAX_VALUES {
        return Err("more than 256 values");
    }
    list.iter()
        .map(|e| match e.as_array().map(Vec::as_slice) {
            Some([c, s, value]) => Ok(Reading {
                channel: c.as_i64().ok_or("a channel is not an integer")?,
                sensor: s.as_i64().ok_or("a sensor id is not an integer")?,
                value: value.clone(),
            }),
            _ => Err("a G entry is not [channel, id, value]"),
        })
        .collect()
}

/// The CoAP GET code (0.01): how a client asks a Gen1 device for `cit/d` or `cit/s` over UDP.
#[cfg(any(test, feature = "emulator", feature = "fuzzing"))] // only devices (the emulator) write CoAP
pub(crate) const CODE_GET: u8 = 1;
/// The CoAP 2.05 Content code of an answer.
#[cfg(any(test, feature = "emulator", feature = "fuzzing"))] // only devices (the emulator) write CoAP
pub(crate) const CODE_CONTENT: u8 = 69;

/// A NON datagram with `code`, the options in ascending order, then `0xFF` and the payload.
#[cfg(any(test, feature = "emulator", feature = "fuzzing"))] // only devices (the emulator) write CoAP
fn encode(code: u8, message_id: u16, options: &[(u16, &[u8])], payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x50, code];
    out.extend_from_slice(&message_id.to_be_bytes());
    let mut last = 0u16;
    for (number, value) in options {
        let (delta, len) = (number - last, value.len() as u16);
        last = *number;
        let nibble = |n: u16| match n {
            0..=12 => (n as u8, Vec::new()),
            13..=268 => (13, vec![(n - 13) as u8]),
            _ => (14, (n - 269).to_be_bytes().to_vec()),
        };
        let ((dn, dx), (ln, lx)) = (nibble(delta), nibble(len));
        out.push(dn << 4 | ln);
        out.extend(dx);
        out.extend(lx);
        out.extend_from_slice(value);
    }
    out.push(0xFF);
    out.extend_from_slice(payload);
    out
}

/// A status datagram as firmware sends it (NON, code 0.30, `cit/s`, 3332, 3412, 3420, payload): what the
/// emulator sends and tests forge.
#[cfg(any(test, feature = "emulator", feature = "fuzzing"))] // only devices (the emulator) write CoAP
pub(crate) fn encode_status(
    message_id: u16,
    tag: &str,
    validity: u16,
    serial: u16,
    payload: &[u8],
) -> Vec<u8> {
    encode(
        CODE_STATUS,
        message_id,
        &[
            (OPTION_URI_PATH, b"cit"),
            (OPTION_URI_PATH, b"s"),
            (OPTION_DEVICE, tag.as_bytes()),
            (OPTION_VALIDITY, &validity.to_be_bytes()),
            (OPTION_SERIAL, &serial.to_be_bytes()),
        ],
        payload,
    )
}

/// The answer to a client's `GET cit/d` or `cit/s` (NON, 2.05 Content, 3332, payload), as firmware answers
/// over UDP.
#[cfg(any(test, feature = "emulator", feature = "fuzzing"))] // only devices (the emulator) write CoAP
pub(crate) fn encode_reply(message_id: u16, tag: &str, payload: &[u8]) -> Vec<u8> {
    encode(
        CODE_CONTENT,
        message_id,
        &[(OPTION_DEVICE, tag.as_bytes())],
        payload,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_request_is_read_and_the_reply_carries_the_device_tag() {
        // What aioshelly sends for cit/s: NON GET, Uri-Path cit and s, a payload marker and one zero byte.
        let ask = b"\x50\x01\x00\x0A\xb3cit\x01s\xFF\x00";
        let m = parse(ask).unwrap();
        assert_eq!((m.code, m.path.as_slice()), (CODE_GET, &["cit", "s"][..]));
        let reply = encode_reply(
            m.message_id,
            "SHSW-1#A4CF12F45678#2",
            br#"{"G":[[0,1101,1]]}"#,
        );
        let r = parse(&reply).unwrap();
        assert_eq!((r.code, r.message_id), (CODE_CONTENT, 0x000A));
        assert_eq!(r.device.map(|d| d.id), Some("A4CF12F45678"));
        assert_eq!(r.payload, br#"{"G":[[0,1101,1]]}"#);
    }

    const PAYLOAD: &[u8] = br#"{"G":[[0,1101,1],[0,4101,12.5],[0,4103,600]]}"#;

    #[test]
    fn a_status_round_trips_and_a_0xff_option_byte_is_not_the_payload_marker() {
        // Serial 0x00FF and validity 0xFFFF put 0xFF bytes among the options.
        let d = encode_status(7, "SHSW-1#A4CF12F45678#2", 0xFFFF, 0x00FF, PAYLOAD);
        let m = parse(&d).unwrap();
        assert!(m.is_status());
        assert_eq!((m.kind, m.message_id), (1, 7));
        assert_eq!(
            m.device,
            Some(DeviceTag {
                model: "SHSW-1",
                id: "A4CF12F45678",
                revision: 2
            })
        );
        assert_eq!((m.validity, m.serial), (Some(0xFFFF), Some(0x00FF)));
        assert_eq!(m.payload, PAYLOAD);
        let values = status_values(m.payload).unwrap();
        assert_eq!(values.len(), 3);
        assert_eq!((values[1].channel, values[1].sensor), (0, 4101));
        assert_eq!(values[1].value.as_f64(), Some(12.5));
    }

    #[test]
    fn the_bytes_aioshelly_sends_parse_as_a_request_not_a_status() {
        // NON GET, message id 10, Uri-Path cit, Uri-Path s, payload marker and one byte.
        let d = [
            0x50, 0x01, 0x00, 0x0a, 0xb3, b'c', b'i', b't', 0x01, b's', 0xff, 0x00,
        ];
        let m = parse(&d).unwrap();
        assert_eq!((m.code, m.path.as_slice()), (1, ["cit", "s"].as_slice()));
        assert!(!m.is_status());
    }

    #[test]
    fn malformed_datagrams_are_refused_with_a_reason() {
        let good = encode_status(1, "SHSW-1#A4CF12F45678#2", 0, 1, PAYLOAD);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0x50, 30, 0], "shorter"),
            (vec![0x90, 30, 0, 0], "version"),
            (vec![0x59, 30, 0, 0], "token"),
            (vec![0x50, 30, 0, 0, 0xFF], "without a payload"),
            (vec![0x50, 30, 0, 0, 0xF0], "reserved"),
            (vec![0x50, 30, 0, 0, 0xD0], "cut short"),
            (vec![0x50, 30, 0, 0, 0x05, b'a'], "cut short"),
            (vec![0x50, 30, 0, 0, 0x91, 1], "critical"),
            ([&good[..], &vec![0; MAX_DATAGRAM]].concat(), "2 KiB"),
            (
                encode_status(1, "SHSW-1#A4CF12F45678", 0, 1, PAYLOAD),
                "model#id",
            ),
            (encode_status(1, "SHSW-1#xyz#2", 0, 1, PAYLOAD), "hex"),
        ];
        for (d, why) in cases {
            let e = parse(&d).unwrap_err();
            assert!(e.contains(why), "{d:?}: {e}");
        }
        // Too many options: 17 empty elective ones (number 0 + delta 0 are all option 0... use If-Match, 1).
        let mut many = vec![0x50, 30, 0, 0, 0x10];
        many.extend(std::iter::repeat_n(0x00, 16));
        assert!(parse(&many).unwrap_err().contains("16 options"));
    }

    #[test]
    fn payloads_are_strict_and_bounded() {
        assert!(status_values(b"{\"G\":[]}").unwrap().is_empty());
        for bad in [
            &b"{}"[..],
            b"{\"G\":[[0,1101]]}",
            b"{\"G\":[[0.5,1101,1]]}",
            b"{\"G\":[[0,\"x\",1]]}",
            b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
            b"not json",
        ] {
            assert!(status_values(bad).is_err(), "{bad:?}");
        }
        let many = format!("{{\"G\":[{}]}}", vec!["[0,1,1]"; MAX_VALUES + 1].join(","));
        assert!(status_values(many.as_bytes()).unwrap_err().contains("256"));
    }
}
