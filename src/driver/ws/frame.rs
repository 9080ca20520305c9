//! RFC 6455 framing, pure and incremental: [`decode`] takes the bytes received so far and answers "need more",
//! one frame, or an error as soon as the header shows one (a declared length over the limit is refused before a
//! byte of its payload is buffered). [`Assembler`] joins fragments into messages. Used by the client
//! (`client.rs`) and by the emulator's server side; no I/O here.
//!
//! Strict on purpose: no extensions (RSV bits must be 0), only the six defined opcodes, control frames
//! unfragmented and at most 125 bytes, lengths in their shortest encoding, the 64-bit length's top bit clear,
//! masking exactly as the role requires, text and close reasons valid UTF-8, close codes from the RFC's ranges.

use std::fmt;

/// Largest frame payload and largest reassembled message accepted (1 MiB); Shelly frames are a few KiB.
pub(crate) const MAX_MESSAGE: usize = 1024 * 1024;
/// Largest frame header: 2 + 8 (length) + 4 (mask).
pub(crate) const MAX_HEADER: usize = 14;

/// A frame opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// Continues a fragmented message.
    Continuation,
    /// UTF-8 text.
    Text,
    /// Binary data.
    Binary,
    /// Close handshake.
    Close,
    /// Ping (answered with a pong carrying the same payload).
    Ping,
    /// Pong.
    Pong,
}

impl Opcode {
    fn from_bits(b: u8) -> Option<Opcode> {
        Some(match b {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// One decoded frame (payload already unmasked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Final fragment of its message.
    pub fin: bool,
    /// Its opcode.
    pub opcode: Opcode,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Why bytes from the peer are not a valid frame or message. Every one ends the connection (close code 1002,
/// 1007 or 1009 as [`ProtocolError::close_code`] says).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// A frame or message longer than the limit (its declared length).
    TooLarge(u64),
    /// RSV bits set without a negotiated extension.
    Reserved,
    /// An opcode RFC 6455 does not define.
    BadOpcode(u8),
    /// A masked frame from a server, or an unmasked one from a client.
    Masking,
    /// A control frame that is fragmented or longer than 125 bytes.
    BadControl,
    /// A length not in its shortest form, or with the 64-bit top bit set.
    BadLength,
    /// A continuation without a message in progress, or a new message before the last one ended.
    Fragmentation,
    /// Text or a close reason that is not UTF-8.
    Utf8,
    /// A close payload of one byte or with an invalid code.
    BadClose,
}

impl ProtocolError {
    /// The close code to send the peer (RFC 6455 §7.4.1).
    pub fn close_code(&self) -> u16 {
        match self {
            ProtocolError::TooLarge(_) => 1009,
            ProtocolError::Utf8 => 1007,
            _ => 1002,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::TooLarge(n) => write!(
                f,
                "a WebSocket frame or message of {n} bytes (the limit is {MAX_MESSAGE})"
            ),
            ProtocolError::Reserved => f.write_str("a WebSocket frame with reserved bits set"),
            ProtocolError::BadOpcode(o) => {
                write!(f, "a WebSocket frame with unknown opcode {o:#x}")
            }
            ProtocolError::Masking => f.write_str("a WebSocket frame masked the wrong way"),
            ProtocolError::BadControl => {
                f.write_str("a fragmented or oversized WebSocket control frame")
            }
            ProtocolError::BadLength => {
                f.write_str("a WebSocket frame length in a non-minimal form")
            }
            ProtocolError::Fragmentation => f.write_str("WebSocket fragments out of order"),
            ProtocolError::Utf8 => f.write_str("WebSocket text that is not UTF-8"),
            ProtocolError::BadClose => f.write_str("an invalid WebSocket close frame"),
        }
    }
}

/// Decodes the first frame in `buf`. `Ok(None)`: more bytes are needed (nothing in `buf` is wrong yet).
/// `masked`: whether frames from this peer must be masked (true when we are the server). On success also
/// returns how many bytes of `buf` the frame took.
pub fn decode(
    buf: &[u8],
    masked: bool,
    limit: usize,
) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        return Err(ProtocolError::Reserved);
    }
    let fin = b0 & 0x80 != 0;
    let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(ProtocolError::BadOpcode(b0 & 0x0F))?;
    if (b1 & 0x80 != 0) != masked {
        return Err(ProtocolError::Masking);
    }
    let short = u64::from(b1 & 0x7F);
    let (len, mut pos) = match short {
        126 => {
            let Some(b) = buf.get(2..4) else {
                return Ok(None);
            };
            let n = u64::from(u16::from_be_bytes([b[0], b[1]]));
            if n < 126 {
                return Err(ProtocolError::BadLength);
            }
            (n, 4)
        }
        127 => {
            let Some(b) = buf.get(2..10) else {
                return Ok(None);
            };
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            let n = u64::from_be_bytes(a);
            if n >> 63 != 0 || n <= 0xFFFF {
                return Err(ProtocolError::BadLength);
            }
            (n, 10)
        }
        n => (n, 2),
    };
    if opcode.is_control() && (!fin || len > 125) {
        return Err(ProtocolError::BadControl);
    }
    if len > limit as u64 {
        return Err(ProtocolError::TooLarge(len));
    }
    // `len` ≤ limit, which fits in usize.
    let len = len as usize;
    let mask = if masked {
        let Some(m) = buf.get(pos..pos + 4) else {
            return Ok(None);
        };
        pos += 4;
        Some([m[0], m[1], m[2], m[3]])
    } else {
        None
    };
    let Some(data) = buf.get(pos..pos + len) else {
        return Ok(None);
    };
    let mut payload = data.to_vec();
    if let Some(m) = mask {
        apply_mask(&mut payload, m);
    }
    Ok(Some((
        Frame {
            fin,
            opcode,
            payload,
        },
        pos + len,
    )))
}

/// XORs `data` with the masking key (its own inverse).
pub fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
}

/// One whole frame on the wire: masked with `mask` when given (a client must, a server must not).
pub fn encode(opcode: Opcode, fin: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + MAX_HEADER);
    out.push(if fin { 0x80 } else { 0 } | opcode.bits());
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(m | n as u8),
        n if n <= 0xFFFF => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let start = out.len() + if mask.is_some() { 4 } else { 0 };
    if let Some(k) = mask {
        out.extend_from_slice(&k);
    }
    out.extend_from_slice(payload);
    if let Some(k) = mask {
        apply_mask(&mut out[start..], k);
    }
    out
}

/// The payload of a close frame.
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    // Control frames carry at most 125 bytes; a reason is cut at a character boundary.
    p.extend_from_slice(crate::text::clip(reason, 120).as_bytes());
    p
}

/// A whole message (or a control frame, which is one by itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A text message.
    Text(String),
    /// A binary message.
    Binary(Vec<u8>),
    /// A ping with its payload.
    Ping(Vec<u8>),
    /// A pong with its payload.
    Pong(Vec<u8>),
    /// A close frame: code (none when the payload was empty) and reason.
    Close(Option<u16>, String),
}

/// Joins fragments into messages, bounded by `MAX_MESSAGE` (1 MiB) in total.
#[derive(Debug, Default)]
pub struct Assembler {
    partial: Option<(Opcode, Vec<u8>)>,
}

impl Assembler {
    /// Takes the next frame; a message when it completes one.
    pub fn push(&mut self, frame: Frame) -> Result<Option<Message>, ProtocolError> {
        match frame.opcode {
            Opcode::Ping => Ok(Some(Message::Ping(frame.payload))),
            Opcode::Pong => Ok(Some(Message::Pong(frame.payload))),
            Opcode::Close => parse_close(&frame.payload).map(Some),
            Opcode::Continuation => {
                let Some((op, mut data)) = self.partial.take() else {
                    return Err(ProtocolError::Fragmentation);
                };
                let total = data.len() + frame.payload.len();
                if total > MAX_MESSAGE {
                    return Err(ProtocolError::TooLarge(total as u64));
                }
                data.extend_from_slice(&frame.payload);
                if frame.fin {
                    return finish(op, data).map(Some);
                }
                self.partial = Some((op, data));
                Ok(None)
            }
            op @ (Opcode::Text | Opcode::Binary) => {
                if self.partial.is_some() {
                    return Err(ProtocolError::Fragmentation);
                }
                if frame.fin {
                    return finish(op, frame.payload).map(Some);
                }
                self.partial = Some((op, frame.payload));
                Ok(None)
            }
        }
    }
}

fn finish(op: Opcode, data: Vec<u8>) -> Result<Message, ProtocolError> {
    if op == Opcode::Text {
        String::from_utf8(data)
            .map(Message::Text)
            .map_err(|_| ProtocolError::Utf8)
    } else {
        Ok(Message::Binary(data))
    }
}

fn parse_close(p: &[u8]) -> Result<Message, ProtocolError> {
    match p {
        [] => Ok(Message::Close(None, String::new())),
        [_] => Err(ProtocolError::BadClose),
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            let valid = matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999);
            if !valid {
                return Err(ProtocolError::BadClose);
            }
            let reason = std::str::from_utf8(reason).map_err(|_| ProtocolError::Utf8)?;
            Ok(Message::Close(Some(code), reason.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

    #[test]
    fn rfc_examples_decode() {
        // RFC 6455 §5.7: an unmasked "Hello", a masked "Hello", fragments "Hel" + "lo", ping "Hello".
        let plain = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        let (f, n) = decode(&plain, false, MAX_MESSAGE).unwrap().unwrap();
        assert_eq!((f.fin, f.opcode, n), (true, Opcode::Text, 7));
        assert_eq!(f.payload, b"Hello");
        let masked = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        assert_eq!(encode(Opcode::Text, true, b"Hello", Some(KEY)), masked);
        let (f, _) = decode(&masked, true, MAX_MESSAGE).unwrap().unwrap();
        assert_eq!(f.payload, b"Hello");
        let mut asm = Assembler::default();
        let a = [0x01, 0x03, 0x48, 0x65, 0x6c];
        let b = [0x80, 0x02, 0x6c, 0x6f];
        let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        let f = |bytes: &[u8]| decode(bytes, false, MAX_MESSAGE).unwrap().unwrap().0;
        assert_eq!(asm.push(f(&a)).unwrap(), None);
        // A control frame may come between fragments.
        assert_eq!(
            asm.push(f(&ping)).unwrap(),
            Some(Message::Ping(b"Hello".to_vec()))
        );
        assert_eq!(
            asm.push(f(&b)).unwrap(),
            Some(Message::Text("Hello".into()))
        );
    }

    #[test]
    fn lengths_round_trip_in_every_form() {
        for n in [0, 125, 126, 65535, 65536, 200_000] {
            let data = vec![b'x'; n];
            for mask in [None, Some(KEY)] {
                let wire = encode(Opcode::Binary, true, &data, mask);
                let (f, used) = decode(&wire, mask.is_some(), MAX_MESSAGE).unwrap().unwrap();
                assert_eq!((f.payload.len(), used), (n, wire.len()));
                // Every proper prefix asks for more bytes, never errs.
                for cut in [0, 1, 2, 3, wire.len() / 2, wire.len() - 1]
                    .into_iter()
                    .filter(|c| *c < wire.len())
                {
                    assert_eq!(decode(&wire[..cut], mask.is_some(), MAX_MESSAGE), Ok(None));
                }
            }
        }
    }

    #[test]
    fn hostile_headers_are_refused_before_their_payload() {
        let d = |b: &[u8]| decode(b, false, MAX_MESSAGE);
        // 2^63-1 declared: refused from the header alone, nothing allocated.
        let mut huge = vec![0x82, 127];
        huge.extend_from_slice(&(u64::MAX >> 1).to_be_bytes());
        assert_eq!(d(&huge), Err(ProtocolError::TooLarge(u64::MAX >> 1)));
        let mut top = vec![0x82, 127];
        top.extend_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(d(&top), Err(ProtocolError::BadLength));
        let mut over = vec![0x82, 127];
        over.extend_from_slice(&(MAX_MESSAGE as u64 + 1).to_be_bytes());
        assert_eq!(
            d(&over),
            Err(ProtocolError::TooLarge(MAX_MESSAGE as u64 + 1))
        );
        assert_eq!(d(&[0x82, 126, 0, 5]), Err(ProtocolError::BadLength));
        assert_eq!(d(&[0xC1, 0]), Err(ProtocolError::Reserved));
        assert_eq!(d(&[0x83, 0]), Err(ProtocolError::BadOpcode(3)));
        assert_eq!(d(&[0x8B, 0]), Err(ProtocolError::BadOpcode(0xB)));
        assert_eq!(d(&[0x81, 0x80, 0, 0, 0, 0]), Err(ProtocolError::Masking));
        assert_eq!(
            decode(&[0x81, 0x00], true, MAX_MESSAGE),
            Err(ProtocolError::Masking)
        );
        assert_eq!(d(&[0x09, 0]), Err(ProtocolError::BadControl));
        assert_eq!(d(&[0x89, 126, 0, 126]), Err(ProtocolError::BadControl));
    }

    #[test]
    fn fragmentation_rules_and_message_limit() {
        let frame = |opcode, fin, n: usize| Frame {
            fin,
            opcode,
            payload: vec![b'a'; n],
        };
        let mut asm = Assembler::default();
        assert_eq!(
            asm.push(frame(Opcode::Continuation, true, 1)),
            Err(ProtocolError::Fragmentation)
        );
        assert_eq!(asm.push(frame(Opcode::Text, false, 1)), Ok(None));
        assert_eq!(
            asm.push(frame(Opcode::Text, true, 1)),
            Err(ProtocolError::Fragmentation)
        );
        let mut asm = Assembler::default();
        assert_eq!(
            asm.push(frame(Opcode::Binary, false, MAX_MESSAGE)),
            Ok(None)
        );
        assert_eq!(
            asm.push(frame(Opcode::Continuation, true, 1)),
            Err(ProtocolError::TooLarge(MAX_MESSAGE as u64 + 1))
        );
        let mut asm = Assembler::default();
        let bad = Frame {
            fin: true,
            opcode: Opcode::Text,
            payload: vec![0xff, 0xfe],
        };
        assert_eq!(asm.push(bad), Err(ProtocolError::Utf8));
    }

    #[test]
    fn close_frames() {
        let mut asm = Assembler::default();
        let close = |p: Vec<u8>| Frame {
            fin: true,
            opcode: Opcode::Close,
            payload: p,
        };
        assert_eq!(
            asm.push(close(close_payload(1000, "bye"))),
            Ok(Some(Message::Close(Some(1000), "bye".into())))
        );
        assert_eq!(
            asm.push(close(Vec::new())),
            Ok(Some(Message::Close(None, String::new())))
        );
        assert_eq!(asm.push(close(vec![3])), Err(ProtocolError::BadClose));
        assert_eq!(
            asm.push(close(close_payload(1005, ""))),
            Err(ProtocolError::BadClose)
        );
        assert_eq!(
            asm.push(close(vec![0x03, 0xe8, 0xff])),
            Err(ProtocolError::Utf8)
        );
        assert!(close_payload(1000, &"é".repeat(100)).len() <= 125);
    }
}
