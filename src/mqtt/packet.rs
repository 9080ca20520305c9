//! MQTT 3.1.1 control packets (OASIS standard, 2014): pure encode and decode, no I/O.
//!
//! Bytes from a broker are hostile: `decode` checks the remaining length against a caller's limit before it
//! allocates, reads every length-prefixed field within the packet, and answers `Err` for anything malformed
//! (never a panic). Only what a client and an emulated device need is modelled; a server's packets are
//! decoded too, so tests and fuzzing can play either side.

use std::fmt;

/// The largest remaining length MQTT can express (four length bytes).
#[cfg_attr(not(test), allow(dead_code))] // tests decode without a limit
pub(crate) const MAX_REMAINING: usize = 268_435_455;

/// A last will: published by the broker for us when the connection dies without a DISCONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Will {
    pub topic: String,
    pub payload: Vec<u8>,
    pub qos: u8,
    pub retain: bool,
}

/// CONNECT: a client's first packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Connect {
    pub client_id: String,
    /// Seconds; 0 turns keep-alive off.
    pub keep_alive: u16,
    pub clean_session: bool,
    pub will: Option<Will>,
    pub username: Option<String>,
    pub password: Option<Vec<u8>>,
}

/// PUBLISH, either way. `id` is present exactly when `qos > 0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Publish {
    pub topic: String,
    pub payload: Vec<u8>,
    pub qos: u8,
    pub retain: bool,
    pub dup: bool,
    pub id: Option<u16>,
}

/// One MQTT 3.1.1 control packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Packet {
    Connect(Connect),
    /// `code` 0 is accepted; 1–5 are the standard refusals (see [`connack_reason`]).
    ConnAck {
        session_present: bool,
        code: u8,
    },
    Publish(Publish),
    PubAck(u16),
    PubRec(u16),
    PubRel(u16),
    PubComp(u16),
    /// Topic filters with their requested QoS.
    Subscribe {
        id: u16,
        filters: Vec<(String, u8)>,
    },
    /// Granted QoS per filter, 0x80 for a refused one.
    SubAck {
        id: u16,
        codes: Vec<u8>,
    },
    Unsubscribe {
        id: u16,
        filters: Vec<String>,
    },
    UnsubAck(u16),
    PingReq,
    PingResp,
    Disconnect,
}

/// Why bytes are not an MQTT packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PacketError {
    /// The remaining length is above the caller's limit (the packet is not read).
    TooLarge { length: usize, limit: usize },
    /// Anything else malformed, with what was wrong.
    Malformed(&'static str),
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::TooLarge { length, limit } => {
                write!(
                    f,
                    "an MQTT packet of {length} bytes, above the limit of {limit} bytes"
                )
            }
            PacketError::Malformed(what) => write!(f, "a malformed MQTT packet: {what}"),
        }
    }
}

/// What a CONNACK refusal code means, in words a person can act on.
pub(crate) fn connack_reason(code: u8) -> &'static str {
    match code {
        0 => "accepted",
        1 => "the broker does not speak MQTT 3.1.1",
        2 => "the broker refused the client id (set Mqtt: ClientId to another value)",
        3 => "the broker is unavailable",
        4 => "the broker refused the user name or password (check Mqtt: User and Password)",
        // Mosquitto answers a wrong password with 5, not 4.
        5 => {
            "the broker says this client is not authorised (check Mqtt: User and Password, then the broker's ACL for this user)"
        }
        _ => "an unknown refusal code",
    }
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Fields are at most 65,535 bytes; longer ones are cut rather than framed wrongly.
    let b = &b[..b.len().min(u16::MAX as usize)];
    put_u16(out, b.len() as u16);
    out.extend_from_slice(b);
}

fn put_remaining(out: &mut Vec<u8>, mut len: usize) {
    loop {
        let mut byte = (len % 128) as u8;
        len /= 128;
        if len > 0 {
            byte |= 0x80;
        }
        out.push(byte);
        if len == 0 {
            break;
        }
    }
}

/// Appends `packet`'s bytes to `out`.
pub(crate) fn encode(packet: &Packet, out: &mut Vec<u8>) {
    let mut body = Vec::new();
    let first: u8 = match packet {
        Packet::Connect(c) => {
            put_bytes(&mut body, b"MQTT");
            body.push(4); // protocol level 3.1.1
            let mut flags = 0u8;
            if c.clean_session {
                flags |= 0x02;
            }
            if let Some(w) = &c.will {
                flags |= 0x04 | ((w.qos.min(2)) << 3);
                if w.retain {
                    flags |= 0x20;
                }
            }
            if c.password.is_some() {
                flags |= 0x40;
            }
            if c.username.is_some() {
                flags |= 0x80;
            }
            body.push(flags);
            put_u16(&mut body, c.keep_alive);
            put_bytes(&mut body, c.client_id.as_bytes());
            if let Some(w) = &c.will {
                put_bytes(&mut body, w.topic.as_bytes());
                put_bytes(&mut body, &w.payload);
            }
            if let Some(u) = &c.username {
                put_bytes(&mut body, u.as_bytes());
            }
            if let Some(p) = &c.password {
                put_bytes(&mut body, p);
            }
            0x10
        }
        Packet::ConnAck {
            session_present,
            code,
        } => {
            body.push(u8::from(*session_present));
            body.push(*code);
            0x20
        }
        Packet::Publish(p) => {
            put_bytes(&mut body, p.topic.as_bytes());
            if p.qos > 0 {
                put_u16(&mut body, p.id.unwrap_or(1));
            }
            body.extend_from_slice(&p.payload);
            0x30 | (u8::from(p.dup) << 3) | (p.qos.min(2) << 1) | u8::from(p.retain)
        }
        Packet::PubAck(id) => {
            put_u16(&mut body, *id);
            0x40
        }
        Packet::PubRec(id) => {
            put_u16(&mut body, *id);
            0x50
        }
        Packet::PubRel(id) => {
            put_u16(&mut body, *id);
            0x62
        }
        Packet::PubComp(id) => {
            put_u16(&mut body, *id);
            0x70
        }
        Packet::Subscribe { id, filters } => {
            put_u16(&mut body, *id);
            for (f, q) in filters {
                put_bytes(&mut body, f.as_bytes());
                body.push((*q).min(2));
            }
            0x82
        }
        Packet::SubAck { id, codes } => {
            put_u16(&mut body, *id);
            body.extend_from_slice(codes);
            0x90
        }
        Packet::Unsubscribe { id, filters } => {
            put_u16(&mut body, *id);
            for f in filters {
                put_bytes(&mut body, f.as_bytes());
            }
            0xA2
        }
        Packet::UnsubAck(id) => {
            put_u16(&mut body, *id);
            0xB0
        }
        Packet::PingReq => 0xC0,
        Packet::PingResp => 0xD0,
        Packet::Disconnect => 0xE0,
    };
    out.push(first);
    put_remaining(out, body.len());
    out.extend_from_slice(&body);
}

/// The packet's bytes in a new buffer.
pub(crate) fn to_bytes(packet: &Packet) -> Vec<u8> {
    let mut out = Vec::new();
    encode(packet, &mut out);
    out
}

/// Reads a fixed header's remaining length. `Ok(None)`: more bytes are needed.
fn remaining(buf: &[u8]) -> Result<Option<(usize, usize)>, PacketError> {
    let mut len = 0usize;
    let mut mult = 1usize;
    for i in 0..4 {
        let Some(&b) = buf.get(1 + i) else {
            return Ok(None);
        };
        len += usize::from(b & 0x7F) * mult;
        if b & 0x80 == 0 {
            return Ok(Some((len, 2 + i)));
        }
        mult *= 128;
    }
    Err(PacketError::Malformed(
        "a remaining length longer than four bytes",
    ))
}

/// A cursor over one packet's variable header and payload.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, PacketError> {
        let b = *self
            .buf
            .get(self.at)
            .ok_or(PacketError::Malformed("a field runs past the packet"))?;
        self.at += 1;
        Ok(b)
    }

    fn u16(&mut self) -> Result<u16, PacketError> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }

    fn bytes(&mut self) -> Result<&'a [u8], PacketError> {
        let n = usize::from(self.u16()?);
        let end = self.at + n;
        let b = self
            .buf
            .get(self.at..end)
            .ok_or(PacketError::Malformed("a field runs past the packet"))?;
        self.at = end;
        Ok(b)
    }

    fn string(&mut self) -> Result<String, PacketError> {
        let b = self.bytes()?;
        let s = std::str::from_utf8(b)
            .map_err(|_| PacketError::Malformed("a string that is not UTF-8"))?;
        if s.contains('\0') {
            return Err(PacketError::Malformed("a string with a NUL character"));
        }
        Ok(s.to_owned())
    }

    fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.at.min(self.buf.len())..];
        self.at = self.buf.len();
        r
    }

    fn done(&self) -> bool {
        self.at >= self.buf.len()
    }

    fn end(&self) -> Result<(), PacketError> {
        if self.done() {
            Ok(())
        } else {
            Err(PacketError::Malformed(
                "bytes after the packet's last field",
            ))
        }
    }
}

fn id_only(r: &mut Reader<'_>) -> Result<u16, PacketError> {
    let id = r.u16()?;
    r.end()?;
    Ok(id)
}

/// Decodes the first packet in `buf`. `Ok(None)`: the packet is not complete yet (read more, unless
/// `buf` already holds `limit` bytes). `Ok(Some((packet, used)))`: `used` bytes were the packet.
/// A remaining length above `limit` is refused before anything of the packet is read.
pub(crate) fn decode(buf: &[u8], limit: usize) -> Result<Option<(Packet, usize)>, PacketError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let Some((length, head)) = remaining(buf)? else {
        return Ok(None);
    };
    if length > limit {
        return Err(PacketError::TooLarge { length, limit });
    }
    let Some(body) = buf.get(head..head + length) else {
        return Ok(None);
    };
    let mut r = Reader { buf: body, at: 0 };
    let flags = first & 0x0F;
    let fixed_flags = |want: u8| {
        if flags == want {
            Ok(())
        } else {
            Err(PacketError::Malformed(
                "reserved flags set in the fixed header",
            ))
        }
    };
    let packet = match first >> 4 {
        1 => {
            fixed_flags(0)?;
            if r.bytes()? != b"MQTT" {
                return Err(PacketError::Malformed(
                    "a CONNECT for another protocol than MQTT",
                ));
            }
            if r.u8()? != 4 {
                return Err(PacketError::Malformed(
                    "a CONNECT for another MQTT version than 3.1.1",
                ));
            }
            let cf = r.u8()?;
            if cf & 0x01 != 0 {
                return Err(PacketError::Malformed("the CONNECT reserved flag is set"));
            }
            let keep_alive = r.u16()?;
            let client_id = r.string()?;
            let will = if cf & 0x04 != 0 {
                let qos = (cf >> 3) & 0x03;
                if qos > 2 {
                    return Err(PacketError::Malformed("a will QoS of 3"));
                }
                Some(Will {
                    topic: r.string()?,
                    payload: r.bytes()?.to_vec(),
                    qos,
                    retain: cf & 0x20 != 0,
                })
            } else {
                None
            };
            let username = if cf & 0x80 != 0 {
                Some(r.string()?)
            } else {
                None
            };
            let password = if cf & 0x40 != 0 {
                Some(r.bytes()?.to_vec())
            } else {
                None
            };
            r.end()?;
            Packet::Connect(Connect {
                client_id,
                keep_alive,
                clean_session: cf & 0x02 != 0,
                will,
                username,
                password,
            })
        }
        2 => {
            fixed_flags(0)?;
            let ack = r.u8()?;
            let code = r.u8()?;
            r.end()?;
            Packet::ConnAck {
                session_present: ack & 0x01 != 0,
                code,
            }
        }
        3 => {
            let qos = (flags >> 1) & 0x03;
            if qos == 3 {
                return Err(PacketError::Malformed("a PUBLISH with QoS 3"));
            }
            let topic = r.string()?;
            if topic.contains(['+', '#']) {
                return Err(PacketError::Malformed("a PUBLISH topic with a wildcard"));
            }
            let id = if qos > 0 { Some(r.u16()?) } else { None };
            Packet::Publish(Publish {
                topic,
                payload: r.rest().to_vec(),
                qos,
                retain: flags & 0x01 != 0,
                dup: flags & 0x08 != 0,
                id,
            })
        }
        4 => {
            fixed_flags(0)?;
            Packet::PubAck(id_only(&mut r)?)
        }
        5 => {
            fixed_flags(0)?;
            Packet::PubRec(id_only(&mut r)?)
        }
        6 => {
            fixed_flags(2)?;
            Packet::PubRel(id_only(&mut r)?)
        }
        7 => {
            fixed_flags(0)?;
            Packet::PubComp(id_only(&mut r)?)
        }
        8 => {
            fixed_flags(2)?;
            let id = r.u16()?;
            let mut filters = Vec::new();
            while !r.done() {
                let f = r.string()?;
                let q = r.u8()?;
                if q > 2 {
                    return Err(PacketError::Malformed("a SUBSCRIBE with QoS above 2"));
                }
                filters.push((f, q));
            }
            if filters.is_empty() {
                return Err(PacketError::Malformed("a SUBSCRIBE without a topic filter"));
            }
            Packet::Subscribe { id, filters }
        }
        9 => {
            fixed_flags(0)?;
            let id = r.u16()?;
            let codes = r.rest().to_vec();
            if codes.iter().any(|c| *c > 2 && *c != 0x80) {
                return Err(PacketError::Malformed(
                    "a SUBACK with an unknown return code",
                ));
            }
            Packet::SubAck { id, codes }
        }
        10 => {
            fixed_flags(2)?;
            let id = r.u16()?;
            let mut filters = Vec::new();
            while !r.done() {
                filters.push(r.string()?);
            }
            Packet::Unsubscribe { id, filters }
        }
        11 => {
            fixed_flags(0)?;
            Packet::UnsubAck(id_only(&mut r)?)
        }
        12..=14 => {
            fixed_flags(0)?;
            r.end()?;
            match first >> 4 {
                12 => Packet::PingReq,
                13 => Packet::PingResp,
                _ => Packet::Disconnect,
            }
        }
        _ => return Err(PacketError::Malformed("an unknown packet type")),
    };
    Ok(Some((packet, head + length)))
}

/// Whether `topic` matches the subscription `filter` (`+` one level, `#` the rest, as MQTT 3.1.1 §4.7).
/// Topics starting with `$` match no filter that starts with a wildcard.
#[cfg_attr(not(test), allow(dead_code))] // a client routes by its own exact topics; tests and devices match
pub(crate) fn matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut f = filter.split('/');
    let mut t = topic.split('/');
    loop {
        match (f.next(), t.next()) {
            (Some("#"), _) => return true,
            (Some("+"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Whether `topic` is usable as a topic name we publish to or build filters from: 1–65,535 bytes, no
/// wildcard, no NUL. Configured topics are checked with it, so a wrong one is an error at open.
pub(crate) fn valid_topic(topic: &str) -> bool {
    !topic.is_empty() && topic.len() <= u16::MAX as usize && !topic.contains(['+', '#', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(p: Packet) {
        let bytes = to_bytes(&p);
        let (back, used) = decode(&bytes, MAX_REMAINING)
            .expect("decodes")
            .expect("complete");
        assert_eq!(back, p);
        assert_eq!(used, bytes.len());
        // Every proper prefix asks for more bytes, never a wrong packet.
        for cut in 0..bytes.len() {
            assert_eq!(
                decode(&bytes[..cut], MAX_REMAINING),
                Ok(None),
                "prefix {cut} of {p:?}"
            );
        }
    }

    #[test]
    fn every_packet_survives_a_round_trip() {
        round_trip(Packet::Connect(Connect {
            client_id: "smartdev-1".into(),
            keep_alive: 30,
            clean_session: true,
            will: Some(Will {
                topic: "shellyplus1pm-a8032ab12345/online".into(),
                payload: b"false".to_vec(),
                qos: 1,
                retain: true,
            }),
            username: Some("user".into()),
            password: Some(b"secret".to_vec()),
        }));
        round_trip(Packet::Connect(Connect {
            client_id: String::new(),
            keep_alive: 0,
            clean_session: false,
            will: None,
            username: None,
            password: None,
        }));
        round_trip(Packet::ConnAck {
            session_present: true,
            code: 0,
        });
        round_trip(Packet::Publish(Publish {
            topic: "stat/tasmota_1/RESULT".into(),
            payload: br#"{"POWER":"ON"}"#.to_vec(),
            qos: 1,
            retain: false,
            dup: true,
            id: Some(7),
        }));
        round_trip(Packet::Publish(Publish {
            topic: "tele/t/LWT".into(),
            payload: vec![0; 300], // a two-byte remaining length
            qos: 0,
            retain: true,
            dup: false,
            id: None,
        }));
        for p in [
            Packet::PubAck(1),
            Packet::PubRec(2),
            Packet::PubRel(3),
            Packet::PubComp(4),
            Packet::UnsubAck(5),
        ] {
            round_trip(p);
        }
        round_trip(Packet::Subscribe {
            id: 9,
            filters: vec![("a/+/c".into(), 1), ("d/#".into(), 0)],
        });
        round_trip(Packet::SubAck {
            id: 9,
            codes: vec![1, 0x80],
        });
        round_trip(Packet::Unsubscribe {
            id: 10,
            filters: vec!["a/b".into()],
        });
        round_trip(Packet::PingReq);
        round_trip(Packet::PingResp);
        round_trip(Packet::Disconnect);
    }

    #[test]
    fn the_limit_is_checked_before_the_packet_is_read() {
        // A PUBLISH announcing 2 MiB: refused from its five header bytes.
        let header = [0x30, 0x80, 0x80, 0x80, 0x01];
        assert_eq!(
            decode(&header, 65_536),
            Err(PacketError::TooLarge {
                length: 2_097_152,
                limit: 65_536
            })
        );
        assert!(decode(&[0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], MAX_REMAINING).is_err());
    }

    #[test]
    fn malformed_packets_are_errors_not_panics() {
        let bad: &[&[u8]] = &[
            &[0x00, 0x00],                               // type 0
            &[0xF0, 0x00],                               // type 15
            &[0x36, 0x00],                               // QoS 3
            &[0x30, 0x02, 0x00, 0x05],                   // topic longer than the packet
            &[0x30, 0x03, 0x00, 0x01, b'#'],             // wildcard in a PUBLISH topic
            &[0x30, 0x03, 0x00, 0x01, 0xFF],             // not UTF-8
            &[0x32, 0x03, 0x00, 0x01, b'a'],             // QoS 1 without its id
            &[0x40, 0x03, 0x00, 0x01, 0x00],             // PUBACK with a trailing byte
            &[0x82, 0x02, 0x00, 0x01],                   // SUBSCRIBE without a filter
            &[0x80, 0x05, 0x00, 0x01, 0x00, 0x01, b'a'], // SUBSCRIBE with wrong flags
            &[0x90, 0x03, 0x00, 0x01, 0x07],             // SUBACK code 7
            &[0x10, 0x02, 0x00, 0x04],                   // CONNECT cut short
            &[0xC1, 0x00],                               // PINGREQ with flags
        ];
        for b in bad {
            assert!(
                matches!(decode(b, MAX_REMAINING), Err(PacketError::Malformed(_))),
                "{b:02x?}"
            );
        }
    }

    #[test]
    fn two_packets_in_one_buffer_are_read_one_at_a_time() {
        let mut buf = to_bytes(&Packet::PingResp);
        encode(&Packet::PubAck(3), &mut buf);
        let (p, used) = decode(&buf, 16).unwrap().unwrap();
        assert_eq!(p, Packet::PingResp);
        let (p, _) = decode(&buf[used..], 16).unwrap().unwrap();
        assert_eq!(p, Packet::PubAck(3));
    }

    #[test]
    fn topic_filters_match_as_the_standard_says() {
        assert!(matches("shellies/+/relay/0", "shellies/shelly1-AB/relay/0"));
        assert!(!matches(
            "shellies/+/relay/0",
            "shellies/shelly1-AB/relay/1"
        ));
        assert!(matches("tele/t/#", "tele/t/SENSOR"));
        assert!(matches("tele/t/#", "tele/t"));
        assert!(matches("a/b", "a/b"));
        assert!(!matches("a/b", "a/b/c"));
        assert!(!matches("a/b/c", "a/b"));
        assert!(!matches("#", "$SYS/broker"));
        assert!(matches("+/+", "/x"));
        assert!(valid_topic("shellyplus1pm-a8032ab12345/rpc"));
        assert!(!valid_topic("a/+"));
        assert!(!valid_topic(""));
    }

    #[test]
    fn refusals_are_explained() {
        assert!(connack_reason(4).contains("User and Password"));
        assert_eq!(connack_reason(0), "accepted");
    }
}
