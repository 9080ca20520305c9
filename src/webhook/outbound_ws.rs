//! The outbound WebSocket server: devices configured for it (`Ws.SetConfig`, `sleep::outbound`) connect to
//! `ws://<listener>/<WebsocketPath>` when they wake and push `NotifyFullStatus`, then `NotifyStatus` and
//! `NotifyEvent`. It runs on the webhook listener's poller (`listener.rs` upgrades the connection, this file
//! handles its frames), under the listener's limits (connections in all and per source, deadlines) and its
//! own: a frame over [`MAX_FRAME`] or fragmented, junk that is not a JSON object, or more than
//! [`MESSAGES_PER_SECOND`] messages or [`BYTES_PER_SECOND`] bytes a second end the connection. A connection
//! belongs to the one configured device its first frame names ([`WsSink::identify`]: `src` and MAC, never the
//! source address); a frame naming another device, or no configured one, ends it. Plain `ws://` only: TLS
//! (`wss://`) would wrap the accepted stream before the upgrade is read, with this file unchanged.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::WsSink;
use crate::driver::ws::frame::{self, Opcode};

/// Largest frame (and message: fragmented messages are refused) a device may send: 64 KiB. An H&T's full
/// status is about 3 KiB, a Pro device's about 20 KiB.
pub(crate) const MAX_FRAME: usize = 64 * 1024;
/// How long an upgraded connection may wait for its first frame, which names the device.
pub(crate) const FIRST_FRAME: Duration = Duration::from_secs(5);
/// How long a connection may stay silent after that (a sleeping device reports and sleeps within seconds; a
/// mains device pings in between).
pub(crate) const IDLE: Duration = Duration::from_secs(90);
/// Messages a connection may send in a second (a device sends a few).
pub(crate) const MESSAGES_PER_SECOND: u32 = 100;
/// Bytes of messages a connection may send in a second.
pub(crate) const BYTES_PER_SECOND: usize = 1024 * 1024;

/// The `101 Switching Protocols` answer to an upgrade with this `Sec-WebSocket-Key`.
pub(crate) fn handshake(key: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        crate::driver::ws::accept_key(key)
    )
    .into_bytes()
}

/// One upgraded connection.
#[derive(Debug)]
pub(crate) struct Session {
    /// The configured device its frames named (index given by the sink).
    device: Option<usize>,
    /// The current one-second window and what came in it.
    window: Instant,
    messages: u32,
    bytes: usize,
}

/// What the connection does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// No whole frame is buffered: read more (within `IDLE`, or `FIRST_FRAME` before the first frame).
    Wait,
    /// An answer (a pong) is queued: write it, then go on.
    Answer,
    /// A close frame is queued: write it and end the connection.
    Close,
}

impl Session {
    /// A connection just upgraded.
    pub(crate) fn new(now: Instant) -> Session {
        Session {
            device: None,
            window: now,
            messages: 0,
            bytes: 0,
        }
    }

    /// Whether a frame has named the device.
    pub(crate) fn identified(&self) -> bool {
        self.device.is_some()
    }

    /// Handles the whole frames at the front of `input`, queueing answers in `output`.
    pub(crate) fn serve(
        &mut self,
        input: &mut Vec<u8>,
        output: &mut Vec<u8>,
        sink: &dyn WsSink,
        peer: IpAddr,
        now: Instant,
    ) -> Flow {
        loop {
            let (f, used) = match frame::decode(input, true, MAX_FRAME) {
                Ok(Some(x)) => x,
                Ok(None) => return Flow::Wait,
                Err(p) => return close(output, p.close_code(), &format!("{p}"), peer),
            };
            input.drain(..used);
            if !f.fin || f.opcode == Opcode::Continuation {
                return close(output, 1009, "a fragmented message", peer);
            }
            if now.saturating_duration_since(self.window) >= Duration::from_secs(1) {
                (self.window, self.messages, self.bytes) = (now, 0, 0);
            }
            self.messages += 1;
            self.bytes += f.payload.len();
            if self.messages > MESSAGES_PER_SECOND || self.bytes > BYTES_PER_SECOND {
                return close(output, 1008, "more messages than a device sends", peer);
            }
            match f.opcode {
                Opcode::Text => {
                    if let Err(why) = self.text(&f.payload, sink, peer) {
                        return close(output, 1008, why, peer);
                    }
                }
                Opcode::Ping => {
                    output.extend(frame::encode(Opcode::Pong, true, &f.payload, None));
                    return Flow::Answer;
                }
                Opcode::Close => {
                    output.extend(frame::encode(
                        Opcode::Close,
                        true,
                        &frame::close_payload(1000, ""),
                        None,
                    ));
                    return Flow::Close;
                }
                Opcode::Binary | Opcode::Pong | Opcode::Continuation => {}
            }
        }
    }

    /// One text message: a notification of the connection's device, or the end of the connection.
    fn text(
        &mut self,
        payload: &[u8],
        sink: &dyn WsSink,
        peer: IpAddr,
    ) -> Result<(), &'static str> {
        let Ok(Value::Object(msg)) = crate::untrusted_json::parse(payload) else {
            return Err("a message that is not a JSON object");
        };
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            // An answer (we send no requests) or anything else without a method: nothing to do.
            return Ok(());
        };
        let notification = method.starts_with("Notify");
        let Some(device) = sink.identify(&msg, peer) else {
            return Err("a device that is not configured (or not with this MAC)");
        };
        if self.device.is_some_and(|d| d != device) {
            return Err("frames naming another device than the first");
        }
        self.device = Some(device);
        if notification {
            sink.deliver(device, msg, peer);
        }
        Ok(())
    }
}

/// Queues a close frame with `code`; the connection ends once it is out.
fn close(output: &mut Vec<u8>, code: u16, why: &str, peer: IpAddr) -> Flow {
    log::debug!("outbound WebSocket from {peer}: closed: {why}");
    output.extend(frame::encode(
        Opcode::Close,
        true,
        &frame::close_payload(code, ""),
        None,
    ));
    Flow::Close
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;
    use std::sync::Mutex;

    /// Knows one device, `shellyhtg3-aabbccddeeff`.
    #[derive(Default)]
    struct Sink(Mutex<Vec<String>>);

    impl WsSink for Sink {
        fn identify(&self, frame: &Map<String, Value>, _: IpAddr) -> Option<usize> {
            (frame.get("src")?.as_str()? == "shellyhtg3-aabbccddeeff").then_some(0)
        }
        fn deliver(&self, _: usize, frame: Map<String, Value>, _: IpAddr) {
            let m = frame["method"].as_str().unwrap_or_default().to_string();
            self.0.lock().unwrap().push(m);
        }
    }

    fn masked(op: Opcode, payload: &[u8]) -> Vec<u8> {
        frame::encode(op, true, payload, Some([1, 2, 3, 4]))
    }

    fn run(input: &[u8], sink: &Sink) -> (Flow, Vec<u8>) {
        let (mut i, mut o) = (input.to_vec(), Vec::new());
        let peer = IpAddr::from([127, 0, 0, 1]);
        let f = Session::new(Instant::now()).serve(&mut i, &mut o, sink, peer, Instant::now());
        (f, o)
    }

    #[test]
    fn a_known_device_is_delivered_and_an_unknown_one_closed() {
        let sink = Sink::default();
        let full = br#"{"src":"shellyhtg3-aabbccddeeff","method":"NotifyFullStatus","params":{}}"#;
        assert_eq!(run(&masked(Opcode::Text, full), &sink).0, Flow::Wait);
        assert_eq!(*sink.0.lock().unwrap(), ["NotifyFullStatus"]);
        let other = br#"{"src":"shellyhtg3-001122334455","method":"NotifyFullStatus","params":{}}"#;
        assert_eq!(run(&masked(Opcode::Text, other), &sink).0, Flow::Close);
        assert_eq!(sink.0.lock().unwrap().len(), 1);
    }

    #[test]
    fn junk_unmasked_oversized_and_fragmented_frames_close() {
        let sink = Sink::default();
        assert_eq!(
            run(&masked(Opcode::Text, b"not json"), &sink).0,
            Flow::Close
        );
        let plain = frame::encode(Opcode::Text, true, b"{}", None);
        assert_eq!(run(&plain, &sink).0, Flow::Close);
        let big = vec![b' '; MAX_FRAME + 1];
        assert_eq!(run(&masked(Opcode::Text, &big), &sink).0, Flow::Close);
        let part = frame::encode(Opcode::Text, false, b"{", Some([1, 2, 3, 4]));
        assert_eq!(run(&part, &sink).0, Flow::Close);
        assert!(sink.0.lock().unwrap().is_empty());
    }

    #[test]
    fn a_ping_is_answered_and_a_flood_closes() {
        let sink = Sink::default();
        let (flow, out) = run(&masked(Opcode::Ping, b"x"), &sink);
        assert_eq!(flow, Flow::Answer);
        assert_eq!(out, frame::encode(Opcode::Pong, true, b"x", None));
        let flood: Vec<u8> = (0..=MESSAGES_PER_SECOND)
            .flat_map(|_| masked(Opcode::Binary, b"x"))
            .collect();
        assert_eq!(run(&flood, &sink).0, Flow::Close);
    }
}
