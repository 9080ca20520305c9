//! A device's live push connection lent to its driver: requests from the worker go out as frames on the
//! socket the `sd-push` poller reads, and the poller hands each answer back by its id.
//!
//! The poller attaches a writable clone of the socket when the connection is subscribed and detaches it
//! when the connection ends; every write (the worker's requests, the poller's pings and pongs) goes through
//! the one lock here, so frames never interleave. A request that is not answered within its timeout ends
//! the connection (shut down: the poller sees it and reconnects after its back-off), so a silent socket
//! costs one timeout, not one per request. The answer to the subscribing `Shelly.GetStatus` is kept as a
//! prefetched status: the worker's read right after a (re)connect uses it instead of asking again, unless a
//! notification came after it or the driver began a read of its own after it was asked for.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Write as _;
use std::net::{Shutdown, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use serde_json::{Map, Value};

use super::frame::{self, Opcode};
use super::rpc::FrameChallenge;

/// How long a prefetched status stands in for a read.
const PREFETCH_FRESH: Duration = Duration::from_secs(2);
/// Our request ids start here, far from the connector's (answers to those are never taken for ours).
const FIRST_ID: u64 = 1 << 40;

/// One device's lendable connection (shared by its driver and the poller).
#[derive(Default)]
pub(crate) struct Tunnel {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    link: Option<Link>,
    next_id: u64,
    /// The request waiting for its answer: id and where the answer goes.
    pending: Option<(u64, Sender<Map<String, Value>>)>,
    /// The subscribing `Shelly.GetStatus` result and when it was asked for.
    prefetched: Option<(Value, Instant)>,
    /// When the driver last began a status read of its own (a read begun after the subscription's is newer).
    last_read: Option<Instant>,
    /// The in-frame digest challenge in hand and the last `nc` used with it.
    challenge: Option<(FrameChallenge, u32)>,
}

struct Link {
    stream: TcpStream,
    src: String,
    masks: RandomState,
    sent: u64,
}

/// What became of a request sent through the tunnel.
pub(crate) enum Sent {
    /// No live connection: use HTTP.
    Down,
    /// Sent, but no answer came (timeout, or the connection ended): the request may or may not have run.
    Lost(String),
    /// The answer frame.
    Answer(Map<String, Value>),
}

impl Tunnel {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The poller: the connection is subscribed; `stream` writes to it, `src` names us, `challenge` is the
    /// one the connector answered (reused with a rising count), `status` the subscribing request's result and
    /// when that request was sent.
    pub(crate) fn attach(
        &self,
        stream: TcpStream,
        src: String,
        challenge: Option<(FrameChallenge, u32)>,
        status: Option<(Value, Instant)>,
    ) {
        let mut g = self.lock();
        if g.next_id < FIRST_ID {
            g.next_id = FIRST_ID;
        }
        g.link = Some(Link {
            stream,
            src,
            masks: RandomState::new(),
            sent: 0,
        });
        if challenge.is_some() {
            g.challenge = challenge;
        }
        g.prefetched = status;
    }

    /// The poller: the connection ended. A request waiting for its answer learns it at once.
    pub(crate) fn detach(&self) {
        let mut g = self.lock();
        g.link = None;
        g.pending = None;
        g.prefetched = None;
    }

    /// The poller: a notification came; a prefetched status is older than what it says.
    pub(crate) fn notified(&self) {
        self.lock().prefetched = None;
    }

    /// The worker: the status the subscription read, when no notification came after it, no read of the
    /// driver's began after it was asked for, and it is recent.
    pub(crate) fn take_prefetched(&self) -> Option<Value> {
        let mut g = self.lock();
        let (status, asked) = g.prefetched.take()?;
        let newer_read = g.last_read.is_some_and(|r| r >= asked);
        (!newer_read && asked.elapsed() < PREFETCH_FRESH).then_some(status)
    }

    /// The worker: it begins a status read of its own (over either channel).
    pub(crate) fn reading(&self) {
        self.lock().last_read = Some(Instant::now());
    }

    /// The poller: an answer frame; true when it was the awaited one.
    pub(crate) fn deliver(&self, id: u64, frame: Map<String, Value>) -> bool {
        let mut g = self.lock();
        match &g.pending {
            Some((want, _)) if *want == id => {
                if let Some((_, tx)) = g.pending.take() {
                    let _ = tx.send(frame);
                }
                true
            }
            _ => false,
        }
    }

    /// Writes one frame (masked, as a client must); a socket that cannot take it whole is shut down (the
    /// poller then reconnects). False when there is no connection or the write failed.
    pub(crate) fn write(&self, opcode: Opcode, payload: &[u8]) -> bool {
        let mut g = self.lock();
        write_locked(&mut g, opcode, payload)
    }

    /// The worker: sends `{"id","src","method","params","auth"}` and waits up to `timeout` for the answer.
    /// `auth` is computed from the challenge in hand (see [`Tunnel::challenge`]).
    pub(crate) fn request(
        &self,
        method: &str,
        params: Option<&Value>,
        auth: impl FnOnce(&mut Option<(FrameChallenge, u32)>) -> Option<Value>,
        timeout: Duration,
    ) -> Sent {
        let (rx, id): (Receiver<Map<String, Value>>, u64) = {
            let mut g = self.lock();
            let Some(link) = &g.link else {
                return Sent::Down;
            };
            let src = link.src.clone();
            let id = g.next_id;
            g.next_id += 1;
            let mut f = Map::new();
            f.insert("id".into(), id.into());
            f.insert("src".into(), src.into());
            f.insert("method".into(), method.into());
            if let Some(p) = params {
                f.insert("params".into(), p.clone());
            }
            if let Some(a) = auth(&mut g.challenge) {
                f.insert("auth".into(), a);
            }
            let (tx, rx) = crossbeam_channel::bounded(1);
            g.pending = Some((id, tx));
            let text = Value::Object(f).to_string();
            if !write_locked(&mut g, Opcode::Text, text.as_bytes()) {
                g.pending = None;
                return Sent::Lost("the WebSocket did not take the request".into());
            }
            (rx, id)
        };
        match rx.recv_timeout(timeout) {
            Ok(frame) => Sent::Answer(frame),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                Sent::Lost("the WebSocket connection ended before the answer".into())
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                let mut g = self.lock();
                if g.pending.as_ref().is_some_and(|(p, _)| *p == id) {
                    g.pending = None;
                }
                // Silent for a whole timeout: end it, the poller reconnects; HTTP meanwhile.
                if let Some(l) = g.link.take() {
                    let _ = l.stream.shutdown(Shutdown::Both);
                }
                Sent::Lost(format!(
                    "no answer over the WebSocket within {:.1} s",
                    timeout.as_secs_f64()
                ))
            }
        }
    }

    /// Forgets the in-frame challenge (a refused password).
    pub(crate) fn forget_challenge(&self) {
        self.lock().challenge = None;
    }

    /// Takes a new challenge (from a 401 answer), nonce count 0.
    pub(crate) fn set_challenge(&self, ch: FrameChallenge) {
        self.lock().challenge = Some((ch, 0));
    }
}

fn write_locked(g: &mut Inner, opcode: Opcode, payload: &[u8]) -> bool {
    let Some(link) = &mut g.link else {
        return false;
    };
    link.sent += 1;
    let mut h = link.masks.build_hasher();
    h.write_u64(link.sent);
    let m = h.finish().to_le_bytes();
    let wire = frame::encode(opcode, true, payload, Some([m[0], m[1], m[2], m[3]]));
    // The socket is non-blocking (the poller's); a request of a few hundred bytes fits its send buffer, and
    // one that does not fit whole breaks the framing, so the connection is given up.
    let ok = matches!((&link.stream).write(&wire), Ok(n) if n == wire.len());
    if !ok {
        let _ = link.stream.shutdown(Shutdown::Both);
        g.link = None;
        g.pending = None;
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Read as _;
    use std::net::TcpListener;

    /// A tunnel attached to one end of a loopback connection; the other end is returned.
    fn attached(status: Option<Value>) -> (Tunnel, TcpStream) {
        let status = status.map(|s| (s, Instant::now()));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (theirs, _) = l.accept().unwrap();
        let t = Tunnel::default();
        t.attach(ours, "me".into(), None, status);
        (t, theirs)
    }

    #[test]
    fn the_subscription_status_is_taken_once_and_a_notification_makes_it_stale() {
        let (t, _peer) = attached(Some(json!({"switch:0": {"output": true}})));
        assert_eq!(t.take_prefetched().unwrap()["switch:0"]["output"], true);
        assert!(t.take_prefetched().is_none(), "taken once");
        let (t, _peer) = attached(Some(json!({})));
        t.notified();
        assert!(t.take_prefetched().is_none(), "older than the notification");
        // The worker read over HTTP while the connector's request was on its way: that read is newer.
        let (t, _peer) = attached(None);
        let asked = Instant::now();
        t.reading();
        t.attach(
            _peer.try_clone().unwrap(),
            "me".into(),
            None,
            Some((json!({}), asked)),
        );
        assert!(
            t.take_prefetched().is_none(),
            "older than a read begun after it"
        );
        let (t, _peer) = attached(None);
        t.reading();
        let asked = Instant::now();
        t.attach(
            _peer.try_clone().unwrap(),
            "me".into(),
            None,
            Some((json!({"a": 1}), asked)),
        );
        assert!(
            t.take_prefetched().is_some(),
            "newer than a read begun before it"
        );
    }

    #[test]
    fn a_request_is_a_masked_frame_answered_by_its_id() {
        let (t, mut peer) = attached(None);
        let t = std::sync::Arc::new(t);
        let caller = {
            let t = t.clone();
            std::thread::spawn(move || {
                t.request(
                    "Switch.Set",
                    Some(&json!({"id": 0, "on": true})),
                    |_| None,
                    Duration::from_secs(30),
                )
            })
        };
        // Read the frame as a device would (masked, as from a client).
        let mut buf = Vec::new();
        let (f, _) = loop {
            let mut chunk = [0u8; 512];
            let n = peer.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            if let Some(done) = frame::decode(&buf, true, 1 << 20).unwrap() {
                break done;
            }
        };
        let sent: Value = serde_json::from_slice(&f.payload).unwrap();
        assert_eq!(
            (sent["src"].as_str(), sent["method"].as_str()),
            (Some("me"), Some("Switch.Set"))
        );
        let id = sent["id"].as_u64().unwrap();
        assert!(id >= FIRST_ID);
        // Another id is not the answer; the right one is.
        let answer = |id: u64| {
            json!({"id": id, "result": {"was_on": false}})
                .as_object()
                .unwrap()
                .clone()
        };
        assert!(!t.deliver(id + 1, answer(id + 1)));
        assert!(t.deliver(id, answer(id)));
        match caller.join().unwrap() {
            Sent::Answer(a) => assert_eq!(a["result"]["was_on"], false),
            _ => panic!("no answer"),
        }
    }

    #[test]
    fn a_detached_tunnel_sends_nothing_and_a_waiting_request_learns_it() {
        let t = Tunnel::default();
        assert!(matches!(
            t.request("X.Get", None, |_| None, Duration::from_secs(1)),
            Sent::Down
        ));
        let (t, _peer) = attached(None);
        let t = std::sync::Arc::new(t);
        let caller = {
            let t = t.clone();
            std::thread::spawn(move || t.request("X.Get", None, |_| None, Duration::from_secs(30)))
        };
        // Detach once the request is pending (it then waits on its answer channel).
        while t.lock().pending.is_none() {
            std::thread::yield_now();
        }
        t.detach();
        assert!(matches!(caller.join().unwrap(), Sent::Lost(_)));
        assert!(!t.write(Opcode::Ping, b"x"));
    }
}
