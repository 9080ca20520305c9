//! `WsHub`: one device's WebSocket connections (the registry, counters, faults and the notification
//! broadcast). Held by the device (`device.rs`); what is sent and how a connection is served is `ws.rs`, above
//! it, so the device does not depend on the protocol front ends.

use std::collections::VecDeque;
use std::io::Read as _;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::lock::lock;
use super::server::Response;
use crate::driver::ws::frame::{self, Opcode};

/// Wakes the poller (`ws_poller.rs`) for connections that have something to do (a notification queued, a stall
/// released, a flood begun) from any thread. One wake-up per turn of the poller however many ask: the first
/// asker since the poller last looked writes to its waker; the rest only add their connection to the list.
pub(super) struct Doorbell {
    waker: mio::Waker,
    kicked: Mutex<Vec<u64>>,
    rung: AtomicBool,
}

impl Doorbell {
    pub(super) fn new(waker: mio::Waker) -> Doorbell {
        Doorbell {
            waker,
            kicked: Mutex::default(),
            rung: AtomicBool::new(false),
        }
    }

    /// Asks the poller to serve connection `token`.
    pub(super) fn kick(&self, token: u64) {
        lock(&self.kicked).push(token);
        if !self.rung.swap(true, Ordering::AcqRel) {
            let _ = self.waker.wake();
        }
    }

    /// The poller: the connections asked for since it last looked (cleared before they are taken, so an ask
    /// after the take rings again).
    pub(super) fn take(&self, into: &mut Vec<u64>) {
        self.rung.store(false, Ordering::Release);
        into.append(&mut lock(&self.kicked));
    }
}

/// A connection's frames not written yet, in the order they leave: answers and pongs the poller made,
/// notifications any thread made. Notifications are bounded (a client that does not read loses them, never
/// blocks the device); the poller stops reading requests while the bound is reached.
pub(super) struct Outbox {
    state: Mutex<Pending>,
    /// Frames queued and not yet handed to the socket (the one being written counted).
    unwritten: AtomicUsize,
    token: u64,
    bell: Arc<Doorbell>,
}

/// While the poller works out an answer (`answering`), the notifications made meanwhile. A device answers and
/// notifies from one loop, so an answer reflects every change notified before it; a change during the answer's
/// making is notified after it (the answer may already show it; a client takes the notification as newer).
#[derive(Default)]
struct Pending {
    frames: VecDeque<Vec<u8>>,
    answering: bool,
    held: Vec<Vec<u8>>,
}

/// Frames waiting for a connection beyond which notifications are dropped.
pub(super) const QUEUE: usize = 64;

impl Outbox {
    pub(super) fn new(token: u64, bell: Arc<Doorbell>) -> Outbox {
        Outbox {
            state: Mutex::default(),
            unwritten: AtomicUsize::new(0),
            token,
            bell,
        }
    }

    /// Queues a notification, or holds it while an answer is being made; gives it back when there is no room.
    /// Never waits: it is called with the device's state lock held.
    pub(super) fn notify(&self, wire: Vec<u8>) -> Result<(), Vec<u8>> {
        let mut p = lock(&self.state);
        if p.answering {
            if p.held.len() >= QUEUE {
                return Err(wire);
            }
            p.held.push(wire);
            return Ok(());
        }
        if self.unwritten.load(Ordering::SeqCst) >= QUEUE {
            return Err(wire);
        }
        self.unwritten.fetch_add(1, Ordering::SeqCst);
        p.frames.push_back(wire);
        drop(p);
        self.bell.kick(self.token);
        Ok(())
    }

    /// The poller: it begins making an answer; notifications wait for [`Outbox::answered`].
    pub(super) fn answering(&self) {
        lock(&self.state).answering = true;
    }

    /// The poller: the answer is made (`Some`: queue it, then what was held behind it; `None`: nothing to
    /// send, the held ones go; the connection ends: call [`Outbox::abandon`]).
    pub(super) fn answered(&self, answer: Option<Vec<u8>>) {
        let mut p = lock(&self.state);
        p.answering = false;
        let held = std::mem::take(&mut p.held);
        for wire in answer.into_iter().chain(held) {
            self.unwritten.fetch_add(1, Ordering::SeqCst);
            p.frames.push_back(wire);
        }
    }

    /// The poller: the connection ends while an answer is made; what was held is dropped.
    pub(super) fn abandon(&self) {
        let mut p = lock(&self.state);
        p.answering = false;
        p.held.clear();
    }

    /// The poller's own frame (a pong, a close), behind what is queued.
    pub(super) fn push(&self, wire: Vec<u8>) {
        self.unwritten.fetch_add(1, Ordering::SeqCst);
        lock(&self.state).frames.push_back(wire);
    }

    /// The poller: the next frame to write (still counted until [`Outbox::written`]).
    pub(super) fn next(&self) -> Option<Vec<u8>> {
        lock(&self.state).frames.pop_front()
    }

    /// The poller: a frame taken with [`Outbox::next`] was handed to the socket.
    pub(super) fn written(&self) {
        self.unwritten.fetch_sub(1, Ordering::SeqCst);
    }

    /// Frames queued or being written.
    pub(super) fn unwritten(&self) -> usize {
        self.unwritten.load(Ordering::SeqCst)
    }

    /// The poller's token of this connection.
    pub(super) fn token(&self) -> u64 {
        self.token
    }

    /// Asks the poller to look at this connection (a flood began, a stall ended, the device stops).
    pub(super) fn kick(&self) {
        self.bell.kick(self.token);
    }
}

pub(super) struct Client {
    pub(super) id: u64,
    pub(super) outbox: Arc<Outbox>,
    /// For cutting the connection from outside.
    pub(super) stream: TcpStream,
    /// The `src` of its first request: notifications go to subscribed clients only, addressed to it.
    pub(super) src: Arc<Mutex<Option<String>>>,
}

/// The WebSocket side of one device.
#[derive(Default)]
pub(crate) struct WsHub {
    pub(super) clients: Mutex<Vec<Client>>,
    /// Connections the poller still serves (a connection leaves `clients` when cut, and the poller then
    /// drops it at its next turn): the device has stopped when none is left.
    pub(super) attached: AtomicUsize,
    /// The status last notified (for diffs); `None` while nobody is subscribed, or while `said` holds it.
    pub(super) last: Mutex<Option<Map<String, Value>>>,
    /// The status a subscription was measured with, as the text it was written in, while `last` is `None`:
    /// made values only at the first change (most clients at open see none, and a tree per device was a
    /// twelfth of the emulator's CPU then).
    pub(super) said: Mutex<Option<String>>,
    /// Set while somebody is subscribed: the cheap check on every state change.
    pub(super) subscribed: AtomicBool,
    /// Fault: connections read and write nothing until released.
    pub(super) stalled: AtomicBool,
    pub(super) stopping: AtomicBool,
    pub(super) next_id: AtomicU64,
    /// Request frames received (they are also in the port's counts, like HTTP calls).
    pub(super) requests: AtomicU64,
    /// Fault: the size of the `NotifyStatus` frames every subscribed connection sends as fast as it can
    /// (0: no flood).
    pub(super) flood: AtomicUsize,
    /// Flood frames written so far.
    pub(super) flooded: AtomicU64,
    /// Fault: a connection answers its subscribing request, then closes.
    pub(super) hang_up: AtomicBool,
    /// Fault: upgrade requests are held unanswered (the connections stay open), and those held so far.
    pub(super) hold_upgrades: AtomicBool,
    pub(super) held: Mutex<Vec<TcpStream>>,
    pub(super) abandoned: Mutex<usize>,
}

impl WsHub {
    /// Connections open now.
    pub(crate) fn connections(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Connections subscribed now (their first request was let through).
    pub(crate) fn subscribed(&self) -> usize {
        lock(&self.clients)
            .iter()
            .filter(|c| lock(&c.src).is_some())
            .count()
    }

    /// Whether each open connection's socket has `TCP_NODELAY` set.
    pub(crate) fn nodelay(&self) -> Vec<bool> {
        lock(&self.clients)
            .iter()
            .map(|c| c.stream.nodelay().unwrap_or(false))
            .collect()
    }

    /// Request frames received over every connection so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Waits until every connection wrote what was queued, for at most `bound` (a device restarting after
    /// `ota_success` has sent it: its TCP stack delivers what it sent before going down).
    pub(crate) fn flush(&self, bound: Duration) {
        let end = Instant::now() + bound;
        while Instant::now() < end && lock(&self.clients).iter().any(|c| c.outbox.unwritten() > 0) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Cuts every connection (no close frame), as a device that reboots or loses Wi-Fi.
    pub(crate) fn drop_all(&self) {
        for c in lock(&self.clients).drain(..) {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        self.refresh_subscribed();
    }

    /// Connections accepted (upgraded) so far.
    pub(crate) fn upgrades(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Makes every subscribed connection send `NotifyStatus` frames of about `frame_bytes` as fast as it can
    /// (`None`: stop). Answers to requests still go out between them.
    pub(crate) fn set_flood(&self, frame_bytes: Option<usize>) {
        self.flood
            .store(frame_bytes.map_or(0, |b| b.max(1)), Ordering::SeqCst);
        for c in lock(&self.clients).iter() {
            c.outbox.kick();
        }
    }

    /// Flood frames written so far.
    pub(crate) fn flooded(&self) -> u64 {
        self.flooded.load(Ordering::Relaxed)
    }

    /// Makes connections close right after answering their subscribing request (a device that flaps).
    pub(crate) fn set_hang_up(&self, on: bool) {
        self.hang_up.store(on, Ordering::SeqCst);
    }

    /// Holds every upgrade request from now on unanswered (`true`), or ends the held ones (`false`).
    pub(crate) fn set_hold_upgrades(&self, on: bool) {
        self.hold_upgrades.store(on, Ordering::SeqCst);
        if !on {
            for s in lock(&self.held).drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// Held upgrades whose client still waits, and those it gave up (closed its side).
    pub(crate) fn held_upgrades(&self) -> (usize, usize) {
        let mut held = lock(&self.held);
        let mut chunk = [0u8; 1024];
        let mut gone = 0;
        held.retain(|s| {
            let open = loop {
                match s.peek(&mut chunk) {
                    Ok(0) => break false,
                    // Bytes after the request: read them away and look again.
                    Ok(n) => {
                        if (&*s).read(&mut chunk[..n]).is_err() {
                            break false;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                    Err(_) => break false,
                }
            };
            gone += usize::from(!open);
            open
        });
        *lock(&self.abandoned) += gone;
        (held.len(), *lock(&self.abandoned))
    }

    /// Stalls (or releases) every connection: nothing is read or written meanwhile.
    pub(crate) fn set_stalled(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
        if !on {
            // What came meanwhile is read now: the poller is told, since no new readiness event comes for it.
            for c in lock(&self.clients).iter() {
                c.outbox.kick();
            }
        }
    }

    pub(super) fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::SeqCst) && !self.stopping.load(Ordering::SeqCst)
    }

    /// Ends every connection (the emulator stops): each is kicked, and the poller ends it at its next turn
    /// (`stopping`); [`WsHub::await_stopped`] waits for that.
    pub(crate) fn begin_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.set_stalled(false);
        self.set_hold_upgrades(false);
        self.drop_all();
    }

    /// Waits, until `deadline` at most, for the poller to let go of every connection: after it no answer of
    /// this device is made.
    pub(crate) fn await_stopped(&self, deadline: Instant) {
        while self.attached.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub(super) fn refresh_subscribed(&self) {
        let any = lock(&self.clients).iter().any(|c| lock(&c.src).is_some());
        if !any {
            *lock(&self.said) = None;
            *lock(&self.last) = None;
        }
        self.subscribed.store(any, Ordering::SeqCst);
    }

    pub(super) fn remove(&self, id: u64) {
        lock(&self.clients).retain(|c| c.id != id);
        self.refresh_subscribed();
    }

    /// Sends a notification frame to every subscribed client (never blocks: a full queue drops it).
    pub(super) fn broadcast(&self, device_id: &str, method: &str, params: &Value) {
        for c in lock(&self.clients).iter() {
            let Some(src) = lock(&c.src).clone() else {
                continue;
            };
            let frame = json!({"src": device_id, "dst": src, "method": method, "params": params});
            let text = Response::json_whole(200, &frame).body;
            let wire = frame::encode(Opcode::Text, true, &text, None);
            if c.outbox.notify(wire).is_err() {
                log::debug!("emulator: a WebSocket client is not reading; notification dropped");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox() -> (Outbox, mio::Poll) {
        let poll = mio::Poll::new().unwrap();
        let waker = mio::Waker::new(poll.registry(), mio::Token(0)).unwrap();
        (Outbox::new(7, Arc::new(Doorbell::new(waker))), poll)
    }

    fn drain(o: &Outbox) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| o.next().inspect(|_| o.written())).collect()
    }

    #[test]
    fn notifications_made_during_an_answer_go_out_after_it() {
        let (o, _poll) = outbox();
        o.notify(b"before".to_vec()).unwrap();
        o.answering();
        o.notify(b"during".to_vec()).unwrap();
        assert_eq!(drain(&o), [b"before"], "held while the answer is made");
        o.answered(Some(b"answer".to_vec()));
        o.notify(b"after".to_vec()).unwrap();
        assert_eq!(drain(&o), [&b"answer"[..], b"during", b"after"]);
        assert_eq!(o.unwritten(), 0);
    }

    #[test]
    fn notifications_are_bounded_and_held_ones_dropped_when_the_connection_ends() {
        let (o, _poll) = outbox();
        for n in 0..QUEUE {
            o.notify(vec![n as u8]).unwrap();
        }
        assert!(o.notify(b"one too many".to_vec()).is_err());
        // Answers are never dropped: the poller stops reading requests instead.
        o.answering();
        o.answered(Some(b"answer".to_vec()));
        assert_eq!(o.unwritten(), QUEUE + 1);
        drain(&o);
        o.answering();
        for n in 0..QUEUE {
            o.notify(vec![n as u8]).unwrap();
        }
        assert!(o.notify(b"one too many".to_vec()).is_err());
        o.abandon();
        assert!(drain(&o).is_empty());
    }

    #[test]
    fn one_wake_up_serves_every_kick_until_the_poller_looks() {
        let (o, mut poll) = outbox();
        let bell = Arc::clone(&o.bell);
        bell.kick(1);
        bell.kick(2);
        let mut events = mio::Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(events.iter().count(), 1);
        let mut kicked = Vec::new();
        bell.take(&mut kicked);
        assert_eq!(kicked, [1, 2]);
        // After the poller looked, the next kick rings again.
        bell.kick(3);
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(events.iter().count(), 1);
        bell.take(&mut kicked);
        assert_eq!(kicked, [1, 2, 3]);
    }
}
