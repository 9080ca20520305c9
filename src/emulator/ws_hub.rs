//! `WsHub`: one device's WebSocket connections (the registry, counters, faults and the notification
//! broadcast). Held by the device (`device.rs`); what is sent and how a connection is served is `ws.rs`, above
//! it, so the device does not depend on the protocol front ends.

use std::io::Read as _;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_channel::{Sender, TrySendError};
use serde_json::{Map, Value, json};

use super::lock::lock;
use super::server::Response;
use super::threads::Threads;
use crate::driver::ws::frame::{self, Opcode};

/// A connection's frames waiting for its writer thread, and how many are queued and not written yet (counted
/// before they are queued): the reader writes an answer itself only when nothing is ahead of it.
#[derive(Clone)]
pub(super) struct Queue {
    tx: Sender<Vec<u8>>,
    unwritten: Arc<AtomicUsize>,
    /// Notifications made while the reader works out an answer: they go out after it.
    held: Arc<Mutex<Held>>,
    /// Starts the writer thread, at the first frame queued: a client that only asks (the reader writes
    /// answers itself) and leaves never costs one.
    writer: Arc<Mutex<Option<StartWriter>>>,
    started: Arc<AtomicBool>,
}

/// While the reader works out an answer (`answering`), the notifications made meanwhile. A device answers and
/// notifies from one loop, so an answer reflects every change notified before it; a change during the answer's
/// making is notified after it (the answer may already show it; a client takes the notification as newer).
#[derive(Default)]
struct Held {
    answering: bool,
    frames: Vec<Vec<u8>>,
}

/// Starts a connection's writer thread, which keeps the queue's count.
pub(super) type StartWriter = Box<dyn FnOnce(Tally) + Send>;

impl Queue {
    pub(super) fn new(tx: Sender<Vec<u8>>, writer: StartWriter) -> Queue {
        Queue {
            tx,
            unwritten: Arc::new(AtomicUsize::new(0)),
            held: Arc::default(),
            writer: Arc::new(Mutex::new(Some(writer))),
            started: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts the writer if it is not running yet.
    fn writer(&self) {
        if !self.started.load(Ordering::Acquire) {
            let start = lock(&self.writer).take();
            self.started.store(true, Ordering::Release);
            if let Some(start) = start {
                start(self.tally());
            }
        }
    }

    /// Queues a frame without waiting; gives it back when the queue is full or the writer is gone.
    pub(super) fn try_push(&self, wire: Vec<u8>) -> Result<(), TrySendError<Vec<u8>>> {
        self.writer();
        self.unwritten.fetch_add(1, Ordering::SeqCst);
        self.tx.try_send(wire).inspect_err(|_| {
            self.unwritten.fetch_sub(1, Ordering::SeqCst);
        })
    }

    /// Queues a notification, or holds it while an answer is being made; gives it back when there is no room.
    /// Never waits: it is called with the device's state lock held.
    pub(super) fn notify(&self, wire: Vec<u8>) -> Result<(), TrySendError<Vec<u8>>> {
        let mut held = lock(&self.held);
        if !held.answering {
            return self.try_push(wire);
        }
        if held.frames.len() >= self.tx.capacity().unwrap_or(usize::MAX) {
            return Err(TrySendError::Full(wire));
        }
        held.frames.push(wire);
        Ok(())
    }

    /// The reader: it begins making an answer; notifications wait for [`Queue::answered`].
    pub(super) fn answering(&self) {
        lock(&self.held).answering = true;
    }

    /// The reader: its answer went out (`sent`: queue what was held behind it) or the connection ends.
    pub(super) fn answered(&self, sent: bool) {
        let mut held = lock(&self.held);
        held.answering = false;
        for wire in std::mem::take(&mut held.frames) {
            if sent && self.try_push(wire).is_err() {
                log::debug!("emulator: a WebSocket client is not reading; notification dropped");
            }
        }
    }

    /// Queues a frame, waiting while the queue is full (the reader: its own connection only).
    pub(super) fn push(&self, wire: Vec<u8>) {
        self.writer();
        self.unwritten.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(wire).is_err() {
            self.unwritten.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Wakes a writer waiting for its queue (an empty frame, not counted: it is not written).
    pub(super) fn wake(&self) {
        self.writer();
        let _ = self.tx.try_send(Vec::new());
    }

    /// The writer's side of the count (without a sender: the writer's queue ends when the senders are gone).
    pub(super) fn tally(&self) -> Tally {
        Tally(Arc::clone(&self.unwritten))
    }

    /// Whether every queued frame has been written.
    pub(super) fn drained(&self) -> bool {
        self.unwritten.load(Ordering::SeqCst) == 0
    }
}

/// [`Queue`]'s count of unwritten frames, as the writer thread holds it.
pub(super) struct Tally(Arc<AtomicUsize>);

impl Tally {
    /// The writer wrote (or gave up) a queued frame.
    pub(super) fn written(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) struct Client {
    pub(super) id: u64,
    pub(super) queue: Queue,
    /// For cutting the connection from outside.
    pub(super) stream: TcpStream,
    /// The `src` of its first request: notifications go to subscribed clients only, addressed to it.
    pub(super) src: Arc<Mutex<Option<String>>>,
}

/// The WebSocket side of one device.
#[derive(Default)]
pub(crate) struct WsHub {
    pub(super) clients: Mutex<Vec<Client>>,
    /// The connections' threads (readers, writers), kept for the next connection.
    pub(super) threads: Threads,
    /// The status last notified (for diffs); `None` while nobody is subscribed, or while `said` holds it.
    pub(super) last: Mutex<Option<Map<String, Value>>>,
    /// The status a subscription was measured with, as the text it was written in, while `last` is `None`:
    /// made values only at the first change (most clients at open see none, and a tree per device was a
    /// twelfth of the emulator's CPU then).
    pub(super) said: Mutex<Option<String>>,
    /// Set while somebody is subscribed: the cheap check on every state change.
    pub(super) subscribed: AtomicBool,
    pub(super) stalled: Mutex<bool>,
    pub(super) unstalled: Condvar,
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

    /// Waits until every connection's writer wrote what was queued, for at most `bound` (a device restarting
    /// after `ota_success` has sent it: its TCP stack delivers what it sent before going down).
    pub(crate) fn flush(&self, bound: std::time::Duration) {
        let end = std::time::Instant::now() + bound;
        while std::time::Instant::now() < end
            && lock(&self.clients).iter().any(|c| !c.queue.drained())
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
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
        // An empty frame wakes a writer waiting for its queue.
        for c in lock(&self.clients).iter() {
            c.queue.wake();
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
        *lock(&self.stalled) = on;
        self.unstalled.notify_all();
    }

    pub(super) fn wait_unstalled(&self) {
        let mut g = lock(&self.stalled);
        while *g && !self.stopping.load(Ordering::SeqCst) {
            g = self.unstalled.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Ends every connection and joins its threads (the emulator stops).
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.set_stalled(false);
        self.set_hold_upgrades(false);
        self.drop_all();
        // Joins every thread once the connection it serves has ended.
        self.threads.stop();
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
            if let Err(TrySendError::Full(_)) = c.queue.notify(wire) {
                log::debug!("emulator: a WebSocket client is not reading; notification dropped");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(cap: usize) -> (Queue, crossbeam_channel::Receiver<Vec<u8>>) {
        let (tx, rx) = crossbeam_channel::bounded(cap);
        (Queue::new(tx, Box::new(|_| {})), rx)
    }

    #[test]
    fn notifications_made_during_an_answer_go_out_after_it() {
        let (q, rx) = queue(8);
        q.notify(b"before".to_vec()).unwrap();
        q.answering();
        q.notify(b"during".to_vec()).unwrap();
        assert_eq!(rx.try_recv().unwrap(), b"before");
        assert!(rx.try_recv().is_err(), "held while the answer is made");
        // The reader queues its answer behind what was already queued, then releases the held ones.
        q.push(b"answer".to_vec());
        q.answered(true);
        q.notify(b"after".to_vec()).unwrap();
        let order: Vec<Vec<u8>> = rx.try_iter().collect();
        assert_eq!(order, [&b"answer"[..], b"during", b"after"]);
    }

    #[test]
    fn held_notifications_are_bounded_and_dropped_when_the_connection_ends() {
        let (q, rx) = queue(2);
        q.answering();
        q.notify(b"1".to_vec()).unwrap();
        q.notify(b"2".to_vec()).unwrap();
        assert!(matches!(
            q.notify(b"3".to_vec()),
            Err(TrySendError::Full(_))
        ));
        q.answered(false);
        assert!(rx.try_recv().is_err());
    }
}
