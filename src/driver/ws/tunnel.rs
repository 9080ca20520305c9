//! A device's live push connection lent to its driver: requests from the worker go out as frames on the
//! socket the `sd-push` poller reads, and the poller hands each answer back by its id.
//!
//! The poller attaches a writable clone of the socket when the connection is subscribed and detaches it
//! when the connection ends; every write (the worker's requests, the poller's pings and pongs) goes through
//! the one lock here, so frames never interleave. A request that is not answered within its timeout ends
//! the connection (shut down: the poller sees it and reconnects after its back-off), so a silent socket
//! costs one timeout, not one per request. The tunnel keeps the connection's mirror of the device's status:
//! the answer to the subscribing `Shelly.GetStatus`, replaced by every status read over the socket, with each
//! `NotifyStatus` merged in. It is kept as JSON text (a status of 0.7 KiB takes 10 KiB as `serde_json` maps,
//! and 1,000 devices keep one each): a status read's answer as the device wrote it, compact after a merge.
//! The value the poller last built waits beside it for the worker's next read, so the worker parses nothing;
//! the worker's own status reads come as a `StatusDoc` the poller read from the answer, with no tree at all
//! (`Tunnel::take_status_answer`). The worker's read right after a (re)connect takes the
//! subscription's answer instead of asking again (unless a notification came after it or the driver began a
//! read of its own after it was asked for), and a read that a notification asks for is served from the mirror,
//! with no request; when an earlier read already took every change (notifications in a row each ask for one),
//! it needs nothing.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::frame::{self, Opcode};
use super::pre_read::Wake;
use super::rpc::FrameChallenge;
use crate::driver::rpc::status_doc::{DeviceInfo, StatusDoc, StatusRead};

/// How many bytes notifications may add to the mirror's text before it is dropped (a device that keeps sending
/// new fields must not grow our memory: the next read asks the device and starts a new mirror). A real device
/// adds nothing (its notifications change fields it has).
const MIRROR_GROWTH: usize = 64 * 1024;
/// How long the subscription's answer stands in for the read after a (re)connect.
const PREFETCH_FRESH: Duration = Duration::from_secs(2);
/// Our request ids start here, far from the connector's (answers to those are never taken for ours).
const FIRST_ID: u64 = 1 << 40;

/// One device's lendable connection (shared by its driver and the poller).
#[derive(Default)]
pub(crate) struct Tunnel {
    inner: Mutex<Inner>,
    /// The device moved: the poller is to drop its connection to the old address and connect to the new one.
    moved: std::sync::atomic::AtomicBool,
    /// Wakes the poller (set by it when it starts).
    wake: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Where the driver gives back the statuses it took, for the poller that parsed them to free.
    spent: std::sync::OnceLock<Arc<super::spent::Spent>>,
    /// The poller dials the device at open: where its first attempt is (the worker's first contact waits
    /// for it, then goes over the connection, or HTTP when there is none).
    first: Mutex<First>,
    first_moved: std::sync::Condvar,
}

/// The push channel's first attempt, as the driver's first contact sees it.
#[derive(Default)]
enum First {
    /// None expected, or already waited for.
    #[default]
    Idle,
    /// Resolving or connecting.
    Dialing,
    /// TCP connected at this instant; upgrading and subscribing.
    Connected(Instant),
    Ended(Opened),
}

/// How the push channel's first attempt at open ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Opened {
    /// Subscribed: requests go over the connection.
    Up,
    /// No TCP connection (refused, or none within its timeout): the device is not reachable at its address,
    /// and an HTTP request would only wait as long again.
    Unreachable(String),
    /// Connected, but no channel (no WebSocket, authentication, another device): HTTP is the way.
    Failed(String),
}

#[derive(Default)]
struct Inner {
    link: Option<Link>,
    next_id: u64,
    /// The request waiting for its answer.
    pending: Option<Pending>,
    /// While the mirror is still the subscribing `Shelly.GetStatus` result, not yet taken as a read: when
    /// that request was sent.
    subscribed: Option<Instant>,
    /// The mirror as the poller last built it (the subscription's answer, or notifications merged into it),
    /// until the driver's read takes it: a parse of the text on the worker's stack would make its resident
    /// stack a page deeper for good. At most one per device, dropped when taken or replaced.
    handoff: Option<Handoff>,
    /// `Shelly.GetDeviceInfo` read with the subscription at open and when, until the driver takes it.
    info: Option<(Box<DeviceInfo>, Instant)>,
    /// When the driver last began a status read of its own (a read begun after the subscription's is newer).
    last_read: Option<Instant>,
    /// When the poller handed over the last awaited answer: notifications read before it are older.
    answered: Option<Instant>,
    /// This connection's view of the device's status (a JSON object's text), and whether
    /// notifications changed it since the driver last took it.
    mirror: Option<Box<str>>,
    mirror_changed: bool,
    /// The driver holds the mirror as it was last changed (it took it, or it is the driver's own status
    /// read): a read asked for without a change since needs nothing.
    mirror_held: bool,
    /// The mirror's length when it was last replaced (notifications may add [`MIRROR_GROWTH`] to it).
    mirror_base: usize,
    /// Status notifications merged so far: one after a read sent ahead may be newer than its answer.
    merges: u64,
    /// The in-frame digest challenge in hand and the last `nc` used with it.
    challenge: Option<(FrameChallenge, u32)>,
}

/// A request waiting for its answer: its id, where the answer goes, and whether it reads the status. Dropped
/// unanswered (the connection ended, another request), it tells the waiting worker so.
struct Pending {
    id: u64,
    answer: Arc<Answer>,
    status: bool,
    /// The worker takes a status read as a [`StatusDoc`] (`Tunnel::request_status`): the poller reads the
    /// answer straight into one ([`Tunnel::take_status_answer`]).
    typed: bool,
    /// A switch of ours (`Switch.Set` and the lights' `Set` with `on`): the status key and the state it asks.
    output: Option<(String, bool)>,
    /// A read sent before its worker runs ([`PreRead`]): what wakes the worker when it is answered.
    wake: Option<Arc<Wake>>,
}

impl Pending {
    /// The answer, or `None` when the request ended without one; only the first counts.
    fn answered(&self, reply: Option<Reply>) {
        if self.answer.put(reply)
            && let Some(wake) = &self.wake
        {
            wake.fire();
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.answered(None);
    }
}

/// Where one answer goes.
type Answer = crate::answer::Answer<Reply>;

/// An answer as the poller hands it over.
enum Reply {
    Frame(Map<String, Value>),
    Status(Box<StatusDoc>),
    /// A request of the driver's went out while a read sent ahead of it waited ([`Tunnel::pre_read`]).
    Superseded,
}

struct Link {
    wire: Wire,
    src: String,
}

/// How a request reaches the device.
enum Wire {
    /// A frame on the device's WebSocket (masked, as a client must).
    Ws {
        stream: super::secure::Writer,
        masks: RandomState,
        sent: u64,
    },
    /// A message on the device's `<prefix>/rpc` topic (`Channel: mqtt`): the connection is the controller's,
    /// shared by every device, so a lost answer does not end it.
    Mqtt {
        link: Arc<crate::mqtt::link::Link>,
        topic: String,
    },
}

/// The mirror as a read an event asked for finds it.
#[derive(Debug, PartialEq)]
pub(crate) enum Mirror {
    /// Notifications changed it since the driver last took it: this is the device's status now.
    Changed(Value),
    /// Unchanged since the driver took it (or read the status itself over the socket): nothing to read.
    Held,
    /// No mirror (no connection, dropped for its growth) or one the driver never took: ask the device.
    Absent,
}

/// A request frame as it goes out: `{"id","src","method","params","auth"}`.
#[derive(serde::Serialize)]
struct RequestFrame<'a> {
    id: u64,
    src: &'a str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    auth: Option<&'a Value>,
}

/// What became of a request sent through the tunnel.
/// A status the poller read for the driver and hands over with the mirror.
#[derive(Debug, PartialEq)]
pub(crate) enum Handoff {
    /// Notifications merged into the last status (or a full one pushed).
    Parsed(Value),
    /// The subscription's answer, read straight into what the driver takes from it.
    Read(Box<StatusDoc>),
}

impl Inner {
    /// The handoff as a value to merge into or to hand over as one; a status read into a `StatusDoc` is
    /// dropped (the caller reads the mirror's text instead).
    fn parsed_handoff(&mut self) -> Option<Value> {
        match self.handoff.take() {
            Some(Handoff::Parsed(v)) => Some(v),
            _ => None,
        }
    }
}

/// A sent status read, for the worker to take the answer of ([`Tunnel::await_pre_read`]).
pub(crate) struct PreRead {
    answer: Arc<Answer>,
    id: u64,
    sent: Instant,
    wake: Arc<Wake>,
    /// [`Inner::merges`] when it was sent.
    merges: u64,
}

impl PreRead {
    /// One never sent (tests of what takes it).
    #[cfg(test)]
    pub(crate) fn unsent() -> PreRead {
        PreRead {
            answer: Arc::default(),
            id: 0,
            sent: Instant::now(),
            wake: Wake::new(Box::new(|| {})),
            merges: 0,
        }
    }

    /// What wakes the worker.
    pub(crate) fn wake(&self) -> Arc<Wake> {
        Arc::clone(&self.wake)
    }
}

/// What a request over the connection came to.
pub(crate) enum Sent {
    /// No live connection: use HTTP.
    Down,
    /// Sent, but no answer came (timeout, or the connection ended): the request may or may not have run.
    Lost(String),
    /// The answer frame.
    Answer(Map<String, Value>),
    /// A status read's result, as the poller read it (`Tunnel::request_status`).
    Status(Box<StatusDoc>),
}

impl Tunnel {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn first(&self) -> MutexGuard<'_, First> {
        self.first.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The poller will dial the device at open: the driver's first contact is to wait for [`Tunnel::opened`].
    pub(crate) fn expect_dial(&self) {
        *self.first() = First::Dialing;
    }

    /// The poller: the first attempt has its TCP connection. The waiting driver is not woken for it (a wake-up
    /// per device at open): it looks again within one grace period.
    pub(crate) fn first_connected(&self) {
        let mut g = self.first();
        if let First::Dialing = *g {
            *g = First::Connected(Instant::now());
        }
    }

    /// The poller: how the first attempt ended (later calls change nothing).
    pub(crate) fn first_ended(&self, how: Opened) {
        let mut g = self.first();
        if let First::Dialing | First::Connected(_) = *g {
            *g = First::Ended(how);
            // Woken after the lock is released, so the waiter does not wake only to wait for it.
            drop(g);
            self.first_moved.notify_all();
        }
    }

    /// The driver's first contact: how the poller's first attempt ended. It waits at most `bound` in all, and
    /// at most `grace` once the TCP connection is made (a device that connects but is slow to upgrade or
    /// to answer is read over HTTP, as before the channel existed; its channel comes up later). `None` when
    /// no attempt was expected, it was already waited for, or it did not end in time.
    pub(crate) fn opened(&self, bound: Duration, grace: Duration) -> Option<Opened> {
        let end = Instant::now() + bound;
        let mut g = self.first();
        loop {
            let now = Instant::now();
            let until = match *g {
                First::Idle => return None,
                First::Ended(_) => break,
                First::Dialing => end.min(now + grace),
                First::Connected(at) => end.min(at + grace),
            };
            if now >= until {
                break;
            }
            g = self
                .first_moved
                .wait_timeout(g, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        match std::mem::take(&mut *g) {
            First::Ended(how) => Some(how),
            _ => None,
        }
    }

    /// The driver: `Shelly.GetDeviceInfo` as read with the subscription at open (taken once, and only while
    /// as fresh as the subscription's status: a driver that read the device over HTTP meanwhile and forgets
    /// it later must not take an old firmware version).
    pub(crate) fn take_info(&self) -> Option<Box<DeviceInfo>> {
        let (info, at) = self.lock().info.take()?;
        (at.elapsed() < PREFETCH_FRESH).then_some(info)
    }

    /// The poller: the connection is subscribed; `stream` writes to it, `src` names us, `challenge` is the
    /// one the connector answered (reused with a rising count), `status` the subscribing request's result and
    /// when that request was sent, `info` the device information read with it.
    pub(crate) fn attach(
        &self,
        stream: super::secure::Writer,
        src: String,
        challenge: Option<(FrameChallenge, u32)>,
        status: Option<(StatusRead, Instant)>,
        info: Option<Box<DeviceInfo>>,
    ) {
        let mut g = self.lock();
        g.info = info.map(|i| (i, Instant::now()));
        if g.next_id < FIRST_ID {
            g.next_id = FIRST_ID;
        }
        g.link = Some(Link {
            wire: Wire::Ws {
                stream,
                masks: RandomState::new(),
                sent: 0,
            },
            src,
        });
        if challenge.is_some() {
            g.challenge = challenge;
        }
        (g.mirror, g.subscribed, g.handoff) = match status {
            Some((read, asked)) => (
                Some(read.text),
                Some(asked),
                Some(Handoff::Read(Box::new(read.doc))),
            ),
            None => (None, None, None),
        };
        g.mirror_base = g.mirror.as_ref().map_or(0, |m| m.len());
        g.mirror_changed = false;
        g.mirror_held = false;
    }

    /// The `sd-mqtt` poller: the broker connection is up (and subscribed to `<src>/rpc`); requests go to
    /// `topic` (`<prefix>/rpc`) through `link`. No status comes with it: the first read asks the device.
    pub(crate) fn attach_mqtt(
        &self,
        link: Arc<crate::mqtt::link::Link>,
        topic: String,
        src: String,
    ) {
        let mut g = self.lock();
        if g.next_id < FIRST_ID {
            g.next_id = FIRST_ID;
        }
        g.link = Some(Link {
            wire: Wire::Mqtt { link, topic },
            src,
        });
        g.mirror = None;
        g.subscribed = None;
        g.handoff = None;
        g.mirror_changed = false;
        g.mirror_held = false;
    }

    /// The `sd-mqtt` poller: notifications of this device were dropped (it sent more than its share): the
    /// mirror no longer holds its status, so the next read asks the device.
    pub(crate) fn forget_mirror(&self) {
        let mut g = self.lock();
        g.mirror = None;
        g.handoff = None;
        g.mirror_changed = false;
        g.mirror_held = false;
    }

    /// The poller: how to wake it when the device moves.
    pub(crate) fn on_move(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let _ = self.wake.set(wake);
    }

    /// The poller: where statuses it parsed come back to be freed.
    pub(crate) fn on_spent(&self, spent: Arc<super::spent::Spent>) {
        let _ = self.spent.set(spent);
    }

    /// The worker: done with a value the poller parsed; the poller frees it (here when no poller took the
    /// tunnel: MQTT's, or none yet).
    pub(crate) fn give_back(&self, value: Value) {
        match self.spent.get() {
            Some(spent) => spent.give(value),
            None => drop(value),
        }
    }

    /// The worker: the device is at another address. The connection to the old one stops serving the driver
    /// at once (a request goes over HTTP to the new address), and the poller is woken to reconnect there.
    pub(crate) fn retarget(&self) {
        self.detach();
        self.moved.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(wake) = self.wake.get() {
            wake();
        }
    }

    /// The poller: whether the device moved since the last call.
    pub(crate) fn take_moved(&self) -> bool {
        self.moved.swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// The poller: the connection ended. A request waiting for its answer learns it at once.
    pub(crate) fn detach(&self) {
        let mut g = self.lock();
        g.link = None;
        g.pending = None;
        g.subscribed = None;
        g.handoff = None;
        g.info = None;
        g.mirror = None;
        g.mirror_changed = false;
        g.mirror_held = false;
    }

    /// Whether a subscribed connection is attached.
    pub(crate) fn live(&self) -> bool {
        self.lock().link.is_some()
    }

    /// The poller: a notification came; the subscription's answer is older than what it says.
    pub(crate) fn notified(&self) {
        let mut g = self.lock();
        g.subscribed = None;
        g.handoff = None;
    }

    /// The worker: the status the subscription read, when no notification came after it, no read or command
    /// of the driver's began after it was asked for (a switch sent meanwhile makes it stale), and it is recent.
    pub(crate) fn take_prefetched(&self) -> Option<Handoff> {
        let text = {
            let mut g = self.lock();
            let asked = g.subscribed.take()?;
            // While the subscription's answer stands, the value beside the mirror is that answer.
            let handoff = g.handoff.take();
            let newer_read = g.last_read.is_some_and(|r| r >= asked);
            if newer_read || asked.elapsed() >= PREFETCH_FRESH {
                return None;
            }
            g.mirror_held = g.mirror.is_some();
            if handoff.is_some() {
                return handoff;
            }
            g.mirror.clone()?
        };
        // Parsed outside the lock: the poller merges notifications under it.
        parsed(&text).map(Handoff::Parsed)
    }

    /// The poller: a `NotifyStatus` (changed fields, merged into the mirror) or a `NotifyFullStatus` (`full`:
    /// replaces it).
    pub(crate) fn merge_status(&self, components: &Map<String, Value>, full: bool) {
        let mut g = self.lock();
        g.merges += 1;
        if full {
            let text = text_of_map(components);
            g.mirror_base = text.len();
            g.mirror = Some(text);
            g.handoff = Some(Handoff::Parsed(Value::Object(components.clone())));
        } else if let Some(Value::Object(mut m)) = g
            .parsed_handoff()
            .or_else(|| g.mirror.as_deref().and_then(parsed))
        {
            merge(&mut m, components);
            let text = text_of_map(&m);
            if text.len() > g.mirror_base.saturating_add(MIRROR_GROWTH) {
                g.mirror = None;
                g.mirror_held = false;
                return;
            }
            g.mirror = Some(text);
            g.handoff = Some(Handoff::Parsed(Value::Object(m)));
        } else {
            return;
        }
        g.mirror_changed = true;
    }

    /// The worker: what notifications told since the driver last took the mirror (a read they asked for needs
    /// no request).
    pub(crate) fn take_mirror(&self) -> Mirror {
        let text = {
            let mut g = self.lock();
            let changed = std::mem::take(&mut g.mirror_changed);
            match &g.mirror {
                Some(_) if changed => {
                    g.mirror_held = true;
                    if let Some(merged) = g.parsed_handoff() {
                        return Mirror::Changed(merged);
                    }
                    match &g.mirror {
                        Some(m) => m.clone(),
                        None => return Mirror::Absent,
                    }
                }
                // Several notifications in a row each ask for a read; the first one took them all.
                Some(_) if g.mirror_held => return Mirror::Held,
                // Unchanged since a (re)connect: the read that follows takes the subscription's answer, which
                // waits beside the text (dropped here, the worker parsed the text instead: a stack page deeper
                // for good on 1,000 workers after a reconnect storm).
                _ => return Mirror::Absent,
            }
        };
        parsed(&text).map_or(Mirror::Absent, Mirror::Changed)
    }

    /// The poller: the mirror's text (what the connection says the device's status is now).
    pub(crate) fn mirror_text(&self) -> Option<Box<str>> {
        self.lock().mirror.clone()
    }

    /// The mirror as a value (tests).
    #[cfg(test)]
    pub(crate) fn mirror(&self) -> Option<Value> {
        parsed(&self.mirror_text()?)
    }

    /// The poller: whether a read asked now can be served from the mirror (else it is a request).
    pub(crate) fn has_mirror(&self) -> bool {
        self.lock().mirror.is_some()
    }

    /// When the last answer to the driver was read (the poller reads frames in order: every notification read
    /// before it is older than what the answer says).
    pub(crate) fn answered_at(&self) -> Option<Instant> {
        self.lock().answered
    }

    /// The worker: it begins a status read or a command of its own (over either channel).
    pub(crate) fn reading(&self) {
        self.lock().last_read = Some(Instant::now());
    }

    /// The poller: an answer frame; true when it was the awaited one.
    pub(crate) fn deliver(&self, id: u64, frame: Map<String, Value>) -> bool {
        let mut g = self.lock();
        if g.pending.as_ref().map(|p| p.id) != Some(id) {
            return false;
        }
        let Some(p) = g.pending.take() else {
            return false;
        };
        g.answered = Some(Instant::now());
        // Frames come in order: this answer is newer than every notification before it.
        if let Some((key, on)) = p.output.as_ref().filter(|_| frame.contains_key("result")) {
            // The device did our switch: a notification before it (an earlier switch) must not bring the older
            // state back through the mirror. No news for a read: the driver has the answer.
            set_output_in_mirror(&mut g, key, *on);
        }
        if let Some(Value::Object(r)) = frame.get("result").filter(|_| p.status) {
            mirror_a_read(&mut g, text_of_map(r));
        }
        drop(g);
        p.answered(Some(Reply::Frame(frame)));
        true
    }

    /// The poller, for a text frame while a status read waits (`Tunnel::request_status`): when the frame is
    /// that read's answer with a result, reads the result straight into a [`StatusDoc`], keeps the result's own
    /// text as the mirror, and hands the status over. False when it is not (an error, a notification, another
    /// id, a frame of any other shape): the frame then goes the usual way.
    pub(crate) fn take_status_answer(&self, text: &str) -> bool {
        let Some(id) = self
            .lock()
            .pending
            .as_ref()
            .filter(|p| p.typed)
            .map(|p| p.id)
        else {
            return false;
        };
        let Some(read) = StatusRead::from_answer(text, id) else {
            return false;
        };
        let mut g = self.lock();
        let Some(p) = g.pending.take_if(|p| p.id == id && p.typed) else {
            return false;
        };
        g.answered = Some(Instant::now());
        mirror_a_read(&mut g, read.text);
        // The waiter is woken with the lock free (it takes the tunnel's lock to go on).
        drop(g);
        p.answered(Some(Reply::Status(Box::new(read.doc))));
        true
    }

    /// Writes one frame (masked, as a client must); a socket that cannot take it whole is shut down (the
    /// poller then reconnects). False when there is no connection or the write failed.
    pub(crate) fn write(&self, opcode: Opcode, payload: &[u8]) -> bool {
        let mut g = self.lock();
        write_locked(&mut g, opcode, payload)
    }

    /// The worker: sends `{"id","src","method","params","auth"}` and waits up to `timeout` for the answer.
    /// `auth` computes the frame's `auth` object from the challenge in hand (and counts its use).
    pub(crate) fn request(
        &self,
        method: &str,
        params: Option<&Value>,
        auth: impl FnOnce(&mut Option<(FrameChallenge, u32)>) -> Option<Value>,
        timeout: Duration,
    ) -> Sent {
        self.send(method, params, auth, timeout, false)
    }

    /// The worker: `Shelly.GetStatus`, as [`Tunnel::request`]; a result comes as [`Sent::Status`] (an error,
    /// or an answer another way than the push poller, as [`Sent::Answer`]).
    pub(crate) fn request_status(
        &self,
        auth: impl FnOnce(&mut Option<(FrameChallenge, u32)>) -> Option<Value>,
        timeout: Duration,
    ) -> Sent {
        self.send("Shelly.GetStatus", None, auth, timeout, true)
    }

    fn send(
        &self,
        method: &str,
        params: Option<&Value>,
        auth: impl FnOnce(&mut Option<(FrameChallenge, u32)>) -> Option<Value>,
        timeout: Duration,
        typed: bool,
    ) -> Sent {
        let (answer, id) = {
            let mut g = self.lock();
            if g.link.is_none() {
                return Sent::Down;
            }
            let id = g.next_id;
            g.next_id += 1;
            let auth = auth(&mut g.challenge);
            // Written straight from its parts: no map of copies (and no hash table grown on the worker's stack).
            let text = serde_json::to_string(&RequestFrame {
                id,
                src: g.link.as_ref().map_or("", |l| l.src.as_str()),
                method,
                params,
                auth: auth.as_ref(),
            })
            .unwrap_or_default();
            let answer = Arc::new(Answer::default());
            // Only a read sent ahead of the worker can be waiting here (the driver's own are one at a time).
            if let Some(ahead) = g.pending.take() {
                ahead.answered(Some(Reply::Superseded));
            }
            g.pending = Some(Pending {
                id,
                answer: answer.clone(),
                status: method == "Shelly.GetStatus",
                typed,
                output: output_set(method, params),
                wake: None,
            });
            if !write_locked(&mut g, Opcode::Text, text.as_bytes()) {
                g.pending = None;
                // Nothing left over MQTT (the link refused it): as good as no connection.
                if matches!(g.link.as_ref().map(|l| &l.wire), Some(Wire::Mqtt { .. })) {
                    return Sent::Down;
                }
                return Sent::Lost("the WebSocket did not take the request".into());
            }
            (answer, id)
        };
        // Only a read sent ahead is superseded (this request took its place).
        self.finish(&answer, id, timeout, timeout)
            .unwrap_or_else(|| Sent::Lost("another request went out before its answer".into()))
    }

    /// The caller of `refresh_all`: writes `Shelly.GetStatus` for the worker, whose command waits in its inbox
    /// unwoken; the answer's arrival calls `ring` (once, and not before [`Wake::arm`]). `None` (nothing sent:
    /// the worker reads as usual) over MQTT, with no connection, while a request of the driver's waits, or
    /// when requests need a challenge answered (the password is the driver's).
    pub(crate) fn pre_read(&self, ring: Box<dyn Fn() + Send + Sync>) -> Option<PreRead> {
        let mut g = self.lock();
        let ws = matches!(g.link.as_ref().map(|l| &l.wire), Some(Wire::Ws { .. }));
        if !ws || g.pending.is_some() || g.challenge.is_some() {
            return None;
        }
        let id = g.next_id;
        g.next_id += 1;
        let text = serde_json::to_string(&RequestFrame {
            id,
            src: g.link.as_ref().map_or("", |l| l.src.as_str()),
            method: "Shelly.GetStatus",
            params: None,
            auth: None,
        })
        .unwrap_or_default();
        let answer = Arc::new(Answer::default());
        let wake = Wake::new(ring);
        g.pending = Some(Pending {
            id,
            answer: answer.clone(),
            status: true,
            typed: true,
            output: None,
            wake: Some(wake.clone()),
        });
        if !write_locked(&mut g, Opcode::Text, text.as_bytes()) {
            // Dropped unanswered: nobody waits on it yet, and the wake is not armed.
            g.pending = None;
            return None;
        }
        let sent = Instant::now();
        // The driver's read, begun now: a subscription's answer older than it is not taken as it.
        g.last_read = Some(sent);
        Some(PreRead {
            answer,
            id,
            sent,
            wake,
            merges: g.merges,
        })
    }

    /// The worker: the answer to a [`Tunnel::pre_read`], as [`Tunnel::request_status`] gives one, waiting
    /// what is left of `timeout` since it was sent. `None` when a request of the driver's went out in its
    /// place before it was answered (a command queued ahead of the read): the read is to be sent again.
    pub(crate) fn await_pre_read(&self, pre: PreRead, timeout: Duration) -> Option<Sent> {
        let left = timeout.saturating_sub(pre.sent.elapsed());
        match self.finish(&pre.answer, pre.id, left, timeout)? {
            // Something newer than the answer may have been taken already: a command the worker sent since
            // (queued ahead of the read), or a notification (whose states the worker takes before any
            // command). The answer could bring back what they changed: the read is sent again.
            Sent::Status(_) | Sent::Answer(_) if self.newer_than(&pre) => None,
            sent => Some(sent),
        }
    }

    /// Whether a request or a status notification went over the connection after `pre` was sent.
    fn newer_than(&self, pre: &PreRead) -> bool {
        let g = self.lock();
        g.next_id != pre.id + 1 || g.merges != pre.merges
    }

    /// Waits up to `wait` for request `id`'s answer; silence to the end of its `timeout` ends the connection.
    /// `None`: superseded (a request of the driver's went out in its place).
    fn finish(&self, answer: &Answer, id: u64, wait: Duration, timeout: Duration) -> Option<Sent> {
        Some(match answer.wait(wait) {
            Ok(Some(Reply::Frame(frame))) => Sent::Answer(frame),
            Ok(Some(Reply::Status(doc))) => Sent::Status(doc),
            Ok(Some(Reply::Superseded)) => return None,
            Ok(None) => Sent::Lost("the WebSocket connection ended before the answer".into()),
            Err(()) => {
                let mut g = self.lock();
                if g.pending.as_ref().is_some_and(|p| p.id == id) {
                    g.pending = None;
                }
                // Silent for a whole timeout: end it, the poller reconnects; HTTP meanwhile. (The MQTT
                // connection is every device's: one silent device does not end it.)
                let over = match g.link.as_ref().map(|l| &l.wire) {
                    Some(Wire::Mqtt { .. }) => "MQTT",
                    _ => {
                        if let Some(Link {
                            wire: Wire::Ws { stream, .. },
                            ..
                        }) = g.link.take()
                        {
                            stream.shutdown();
                        }
                        "the WebSocket"
                    }
                };
                Sent::Lost(format!(
                    "no answer over {over} within {:.1} s",
                    timeout.as_secs_f64()
                ))
            }
        })
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

/// Merges a `NotifyStatus`'s changed fields into a status: objects field by field (nested ones too), anything
/// else replaced. A field that changes its kind (a switch's `output` as `"yes"`, a component as a number) is
/// not taken: firmware keeps each field's type, so it is a broken or hostile sender, and the last status read
/// stands (`null` is taken either way: firmware reports a value it lost, a sensor unplugged, as `null`).
fn merge(into: &mut Map<String, Value>, changed: &Map<String, Value>) {
    for (k, v) in changed {
        match (into.get_mut(k), v) {
            (Some(Value::Object(old)), Value::Object(new)) => merge(old, new),
            (Some(old), _) if !same_kind(old, v) => {}
            (Some(old), _) => *old = v.clone(),
            (None, _) => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Whether a notified value may replace a known one: the same JSON kind, or `null` on either side.
fn same_kind(old: &Value, new: &Value) -> bool {
    std::mem::discriminant(old) == std::mem::discriminant(new) || old.is_null() || new.is_null()
}

/// The driver's own status read (`text`, its result) becomes the mirror: the driver holds it as it is.
fn mirror_a_read(g: &mut Inner, text: Box<str>) {
    g.mirror_base = text.len();
    g.mirror = Some(text);
    g.mirror_changed = false;
    g.mirror_held = true;
    g.subscribed = None;
    g.handoff = None;
}

/// The status key and state a request switches, for `<Switch|Light|CCT|RGB|RGBW>.Set` with an `id` and a
/// boolean `on` (`switch:0`, true).
fn output_set(method: &str, params: Option<&Value>) -> Option<(String, bool)> {
    let kind = method.strip_suffix(".Set")?;
    if !matches!(kind, "Switch" | "Light" | "CCT" | "RGB" | "RGBW") {
        return None;
    }
    let p = params?;
    let on = p.get("on")?.as_bool()?;
    let id = p.get("id")?.as_u64()?;
    Some((format!("{}:{id}", kind.to_ascii_lowercase()), on))
}

/// Sets `key`'s `output` in the mirror (where the mirror has it) without marking the mirror changed. The
/// parsed value waiting beside the text is kept in step; without one, the parse is dropped (freed here).
fn set_output_in_mirror(g: &mut Inner, key: &str, on: bool) {
    // A status read into a `StatusDoc` is dropped: it no longer says what the mirror will.
    let waiting = matches!(g.handoff, Some(Handoff::Parsed(_)));
    let Some(Value::Object(mut m)) = g
        .parsed_handoff()
        .or_else(|| g.mirror.as_deref().and_then(parsed))
    else {
        return;
    };
    if let Some(Value::Object(c)) = m.get_mut(key)
        && c.get("output").is_some_and(Value::is_boolean)
    {
        c.insert("output".into(), Value::Bool(on));
        g.mirror = Some(text_of_map(&m));
    }
    if waiting {
        g.handoff = Some(Handoff::Parsed(Value::Object(m)));
    }
}

fn text_of_map(m: &Map<String, Value>) -> Box<str> {
    // Writing a map of strings and numbers to a `Vec` cannot fail.
    serde_json::to_string(m)
        .unwrap_or_default()
        .into_boxed_str()
}

/// The mirror's text as a value (it is our own writing; `None` only if that broke).
fn parsed(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

fn write_locked(g: &mut Inner, opcode: Opcode, payload: &[u8]) -> bool {
    let Some(link) = &mut g.link else {
        return false;
    };
    let ok = match &mut link.wire {
        Wire::Ws {
            stream,
            masks,
            sent,
        } => {
            *sent += 1;
            let mut h = masks.build_hasher();
            h.write_u64(*sent);
            let m = h.finish().to_le_bytes();
            let wire = frame::encode(opcode, true, payload, Some([m[0], m[1], m[2], m[3]]));
            // The socket is non-blocking (the poller's); a request of a few hundred bytes fits its send buffer,
            // and one that does not fit whole breaks the framing, so the connection is given up.
            let ok = stream.write_now(&wire);
            if !ok {
                stream.shutdown();
            }
            ok
        }
        // Only requests go this way (pings are the broker connection's own).
        Wire::Mqtt { link, topic } => {
            return opcode == Opcode::Text && link.publish(topic, payload).is_ok();
        }
    };
    if !ok {
        g.link = None;
        g.pending = None;
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::super::secure::Writer;
    use super::*;
    use crate::driver::rpc::status_doc::Kind;
    use serde_json::json;
    use std::io::Read as _;
    use std::net::{TcpListener, TcpStream};

    /// A tunnel attached to one end of a loopback connection; the other end is returned.
    fn attached(status: Option<Value>) -> (Tunnel, TcpStream) {
        let status = status.map(|s| (read(&s), Instant::now()));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (theirs, _) = l.accept().unwrap();
        let t = Tunnel::default();
        t.attach(Writer::plain(ours), "me".into(), None, status, None);
        (t, theirs)
    }

    /// A subscription's answer, as the dial reads it.
    fn read(status: &Value) -> StatusRead {
        StatusRead::from_value(status).expect("an object")
    }

    /// Switch 0's `output` in a status handed over as read.
    fn switch_0(h: Option<Handoff>) -> Option<bool> {
        let Some(Handoff::Read(doc)) = h else {
            panic!("{h:?}")
        };
        doc.channel(Kind::Switch, 0)?.output.0
    }

    #[test]
    fn the_subscription_status_is_taken_once_and_a_notification_makes_it_stale() {
        let (t, _peer) = attached(Some(json!({"switch:0": {"output": true}})));
        assert_eq!(switch_0(t.take_prefetched()), Some(true));
        assert!(t.take_prefetched().is_none(), "taken once");
        let (t, _peer) = attached(Some(json!({})));
        t.notified();
        assert!(t.take_prefetched().is_none(), "older than the notification");
        // The worker read over HTTP while the connector's request was on its way: that read is newer.
        let (t, _peer) = attached(None);
        let asked = Instant::now();
        t.reading();
        t.attach(
            Writer::plain(_peer.try_clone().unwrap()),
            "me".into(),
            None,
            Some((read(&json!({})), asked)),
            None,
        );
        assert!(
            t.take_prefetched().is_none(),
            "older than a read begun after it"
        );
        let (t, _peer) = attached(None);
        t.reading();
        let asked = Instant::now();
        t.attach(
            Writer::plain(_peer.try_clone().unwrap()),
            "me".into(),
            None,
            Some((read(&json!({"a": 1})), asked)),
            None,
        );
        assert!(
            t.take_prefetched().is_some(),
            "newer than a read begun before it"
        );
    }

    #[test]
    fn notifications_merge_into_the_mirror_and_a_status_answer_replaces_it() {
        let status = json!({"switch:0": {"output": false, "apower": 0.0, "aenergy": {"total": 5.0, "minute_ts": 1}}, "sys": {"uptime": 3}});
        let (t, mut peer) = attached(Some(status));
        assert_eq!(
            t.take_mirror(),
            Mirror::Absent,
            "nothing new since the subscription, which the driver has not taken"
        );
        let changed = json!({"switch:0": {"apower": 40.5, "aenergy": {"total": 5.5}}});
        t.merge_status(changed.as_object().unwrap(), false);
        let Mirror::Changed(m) = t.take_mirror() else {
            panic!("changed")
        };
        assert_eq!(m["switch:0"]["apower"], 40.5);
        assert_eq!(m["switch:0"]["output"], false, "kept");
        assert_eq!(
            m["switch:0"]["aenergy"],
            json!({"total": 5.5, "minute_ts": 1})
        );
        assert_eq!(m["sys"]["uptime"], 3);
        // A second read asked by notifications the first one took already: the driver holds them.
        assert_eq!(t.take_mirror(), Mirror::Held, "taken once");
        t.merge_status(
            json!({"switch:0": {"output": true}}).as_object().unwrap(),
            true,
        );
        assert_eq!(
            t.take_mirror(),
            Mirror::Changed(json!({"switch:0": {"output": true}}))
        );
        // A status read over the socket is newer than the notifications before it.
        t.merge_status(json!({"sys": {"uptime": 9}}).as_object().unwrap(), false);
        let t = std::sync::Arc::new(t);
        let reader = {
            let t = t.clone();
            std::thread::spawn(move || {
                t.request("Shelly.GetStatus", None, |_| None, Duration::from_secs(5))
            })
        };
        let mut buf = [0u8; 512];
        let n = peer.read(&mut buf).unwrap();
        let (f, _) = frame::decode(&buf[..n], true, 1 << 20).unwrap().unwrap();
        let req: Value = serde_json::from_slice(&f.payload).unwrap();
        let id = req["id"].as_u64().unwrap();
        let answer = json!({"id": id, "result": {"switch:0": {"output": false}}});
        assert!(t.deliver(id, answer.as_object().unwrap().clone()));
        assert!(matches!(reader.join().unwrap(), Sent::Answer(_)));
        assert_eq!(
            t.take_mirror(),
            Mirror::Held,
            "the answer is the driver's read"
        );
        t.merge_status(json!({"sys": {"uptime": 10}}).as_object().unwrap(), false);
        assert_eq!(
            t.take_mirror(),
            Mirror::Changed(json!({"switch:0": {"output": false}, "sys": {"uptime": 10}}))
        );
        t.detach();
        t.merge_status(json!({"sys": {"uptime": 11}}).as_object().unwrap(), false);
        assert_eq!(t.take_mirror(), Mirror::Absent, "no connection, no mirror");
    }

    /// A notification whose field changes its kind (a hostile or broken sender) leaves the known value; `null`
    /// (a value the device lost) and a value after a `null` are taken.
    #[test]
    fn a_notified_field_of_another_kind_changes_nothing() {
        let (t, _peer) = attached(Some(
            json!({"switch:0": {"output": false, "apower": 1.5, "temperature": {"tC": 40.0}}}),
        ));
        t.merge_status(
            json!({"switch:0": {"output": "yes", "apower": [1], "temperature": 7}})
                .as_object()
                .unwrap(),
            false,
        );
        t.merge_status(
            json!({"switch:0": {"apower": null}}).as_object().unwrap(),
            false,
        );
        let Some(m) = t.mirror() else {
            panic!("a mirror")
        };
        assert_eq!(
            m,
            json!({"switch:0": {"output": false, "apower": null, "temperature": {"tC": 40.0}}})
        );
        t.merge_status(
            json!({"switch:0": {"apower": 2.5, "output": true}})
                .as_object()
                .unwrap(),
            false,
        );
        assert_eq!(
            t.mirror().unwrap(),
            json!({"switch:0": {"output": true, "apower": 2.5, "temperature": {"tC": 40.0}}})
        );
    }

    /// A device that keeps announcing fields it never had cannot grow the mirror without bound: past
    /// `MIRROR_GROWTH` it is dropped (the next read asks the device); changed fields of known keys cost nothing.
    #[test]
    fn notifications_with_ever_new_fields_cannot_grow_the_mirror() {
        let (t, _peer) = attached(Some(json!({"switch:0": {"output": false, "apower": 1.0}})));
        for i in 0..100_000 {
            let n = json!({"switch:0": {"apower": i as f64, "output": i % 2 == 0}});
            t.merge_status(n.as_object().unwrap(), false);
        }
        let Mirror::Changed(m) = t.take_mirror() else {
            panic!("changing known fields keeps it")
        };
        assert_eq!(m["switch:0"]["apower"], 99_999.0);
        let mut dropped = None;
        for i in 0..100_000 {
            let n = json!({format!("junk:{i}"): {"x": "y".repeat(100)}});
            t.merge_status(n.as_object().unwrap(), false);
            if t.take_mirror() == Mirror::Absent {
                dropped = Some(i);
                break;
            }
        }
        let at = dropped.expect("dropped");
        assert!(at > 100 && at < 1_000, "dropped after {at} new components");
        assert_eq!(
            t.take_mirror(),
            Mirror::Absent,
            "and not rebuilt from notifications"
        );
    }

    /// The driver's first contact at open waits for the poller's first attempt: its outcome when it ends, or
    /// nothing (HTTP then) when none was expected or the device connected but did not finish within the grace.
    #[test]
    fn the_first_contact_waits_for_the_first_dial_and_no_longer() {
        let long = Duration::from_secs(600);
        let t = Tunnel::default();
        assert_eq!(t.opened(long, long), None, "no dial expected");
        t.expect_dial();
        t.first_ended(Opened::Unreachable("no TCP connection".into()));
        t.first_ended(Opened::Up);
        assert_eq!(
            t.opened(long, long),
            Some(Opened::Unreachable("no TCP connection".into())),
            "the first outcome counts"
        );
        assert_eq!(t.opened(long, long), None, "waited for once");
        // Ended by the poller while the driver waits.
        let t = Arc::new(Tunnel::default());
        t.expect_dial();
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.opened(long, long))
        };
        t.first_connected();
        t.first_ended(Opened::Up);
        assert_eq!(waiter.join().unwrap(), Some(Opened::Up));
        // Connected, then silent: the grace ends the wait (the bound is far away).
        let t = Tunnel::default();
        t.expect_dial();
        t.first_connected();
        assert_eq!(t.opened(long, Duration::from_millis(20)), None);
        t.first_ended(Opened::Up);
        assert_eq!(t.opened(long, long), None, "too late: HTTP was used");
    }

    /// The value the poller built waits for the driver's next read beside the mirror's text: a notification's
    /// merge is taken by the read it asks for, even when the driver looked for the subscription's answer first.
    #[test]
    fn a_merged_status_waits_for_the_next_read_beside_its_text() {
        let (t, _peer) = attached(Some(json!({"switch:0": {"output": false, "apower": 1.5}})));
        t.notified();
        t.merge_status(
            json!({"switch:0": {"output": true}}).as_object().unwrap(),
            false,
        );
        assert!(t.lock().handoff.is_some(), "the merged value waits");
        assert_eq!(t.take_prefetched(), None, "a notification came after it");
        assert!(
            t.lock().handoff.is_some(),
            "still there for the read the notification asks for"
        );
        let Mirror::Changed(m) = t.take_mirror() else {
            panic!("changed")
        };
        assert_eq!(m, json!({"switch:0": {"output": true, "apower": 1.5}}));
        assert!(t.lock().handoff.is_none(), "taken once");
        assert_eq!(
            t.lock().mirror.as_deref(),
            Some(m.to_string().as_str()),
            "the text says the same"
        );
    }

    /// After a (re)connect the poller asks the worker for a read, which first looks at the mirror: unchanged,
    /// it must leave the subscription's parsed answer for the read (which then parses nothing on the worker).
    #[test]
    fn an_unchanged_mirror_leaves_the_subscription_answer_for_the_read() {
        let status = json!({"switch:0": {"output": true}});
        let (t, _peer) = attached(Some(status.clone()));
        assert!(matches!(t.take_mirror(), Mirror::Absent), "nothing new");
        assert!(
            t.lock().handoff.is_some(),
            "the subscription's answer still waits"
        );
        assert_eq!(
            t.take_prefetched(),
            Some(Handoff::Read(Box::new(StatusDoc::from_value(&status))))
        );
        assert!(t.lock().handoff.is_none(), "taken once");
    }

    /// The mirror is kept as the status's compact text (a tenth of its size as maps), and a read gets its
    /// own status: a notification merged later leaves the driver's as it was.
    #[test]
    fn the_mirror_is_compact_text_and_a_read_gets_its_own_status() {
        let status = json!({"switch:0": {"id": 0, "output": false, "apower": 12.5, "aenergy": {"total": 1.25}}});
        let (t, _peer) = attached(Some(status.clone()));
        assert_eq!(
            t.lock().mirror.as_deref(),
            Some(status.to_string().as_str()),
            "its compact text"
        );
        let taken = t.take_prefetched();
        assert_eq!(
            taken,
            Some(Handoff::Read(Box::new(StatusDoc::from_value(&status))))
        );
        t.merge_status(
            json!({"switch:0": {"output": true}}).as_object().unwrap(),
            false,
        );
        assert_eq!(switch_0(taken), Some(false), "the driver's status stays");
        let now = t.mirror().unwrap();
        assert_eq!(now["switch:0"]["output"], true);
        assert_eq!(now["switch:0"]["apower"], 12.5, "the rest kept");
    }

    /// A read sent before its worker runs (`refresh_all`): written as the worker's own would be, its answer
    /// read typed into the mirror, the worker woken once (and only once armed); refused while anything makes
    /// it the driver's business (a request of its own waiting, a challenge to answer, no connection); an
    /// ended connection wakes the worker too, and a whole timeout of silence ends the connection.
    #[test]
    fn a_read_sent_ahead_wakes_its_worker_once_with_the_answer() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let rings = Arc::new(AtomicUsize::new(0));
        let ring = || -> Box<dyn Fn() + Send + Sync> {
            let r = Arc::clone(&rings);
            Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
        };
        let (t, mut peer) = attached(Some(json!({"switch:0": {"output": false}})));
        let pre = t.pre_read(ring()).expect("sent");
        let asked = next_request(&mut peer);
        assert_eq!(asked["method"], "Shelly.GetStatus");
        assert!(asked.get("auth").is_none());
        assert!(t.pre_read(ring()).is_none(), "one request at a time");
        let id = asked["id"].as_u64().unwrap();
        let answer =
            format!(r#"{{"id":{id},"src":"dev","result":{{"switch:0":{{"output":true}}}}}}"#);
        assert!(t.take_status_answer(&answer));
        assert_eq!(
            rings.load(Ordering::SeqCst),
            0,
            "not before the command is queued"
        );
        pre.wake().arm();
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        assert_eq!(
            t.lock().mirror.as_deref(),
            Some(r#"{"switch:0":{"output":true}}"#)
        );
        let Some(Sent::Status(doc)) = t.await_pre_read(pre, Duration::from_secs(30)) else {
            panic!("a status")
        };
        assert_eq!(doc.channel(Kind::Switch, 0).unwrap().output.0, Some(true));
        assert_eq!(rings.load(Ordering::SeqCst), 1, "woken once");

        // The connection ends first: the worker is woken, and learns it.
        rings.store(0, Ordering::SeqCst);
        let pre = t.pre_read(ring()).expect("sent");
        pre.wake().arm();
        t.detach();
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        assert!(matches!(
            t.await_pre_read(pre, Duration::from_secs(30)),
            Some(Sent::Lost(_))
        ));
        assert!(t.pre_read(ring()).is_none(), "no connection");

        // A command of the driver's goes out first: the worker is woken, and sends the read again.
        let (t, mut peer) = attached(None);
        let t = Arc::new(t);
        rings.store(0, Ordering::SeqCst);
        let pre = t.pre_read(ring()).expect("sent");
        pre.wake().arm();
        let _ = next_request(&mut peer);
        let switch = switch_elsewhere(&t, true);
        let id = next_request(&mut peer)["id"].as_u64().unwrap();
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        assert!(t.await_pre_read(pre, Duration::from_secs(30)).is_none());
        let answer = json!({"id": id, "result": {"was_on": false}});
        assert!(t.deliver(id, answer.as_object().unwrap().clone()));
        assert!(matches!(switch.join().unwrap(), Sent::Answer(_)));

        // Answered, then a command of the driver's went out before the worker took the answer: the answer is
        // older than the command, so the read is sent again rather than undo what the command did.
        let pre = t.pre_read(ring()).expect("sent");
        let id = next_request(&mut peer)["id"].as_u64().unwrap();
        let status = format!(r#"{{"id":{id},"result":{{"switch:0":{{"output":false}}}}}}"#);
        assert!(t.take_status_answer(&status));
        let switch = switch_elsewhere(&t, true);
        let id = next_request(&mut peer)["id"].as_u64().unwrap();
        let answer = json!({"id": id, "result": {"was_on": false}});
        assert!(t.deliver(id, answer.as_object().unwrap().clone()));
        assert!(matches!(switch.join().unwrap(), Sent::Answer(_)));
        assert!(t.await_pre_read(pre, Duration::from_secs(30)).is_none());

        // Answered, then a notification: the worker takes its states before the read, so the read is sent
        // again rather than put an older state over them.
        let pre = t.pre_read(ring()).expect("sent");
        let id = next_request(&mut peer)["id"].as_u64().unwrap();
        let status = format!(r#"{{"id":{id},"result":{{"switch:0":{{"output":false}}}}}}"#);
        assert!(t.take_status_answer(&status));
        let on = json!({"switch:0": {"output": true}});
        t.merge_status(on.as_object().unwrap(), false);
        assert!(t.await_pre_read(pre, Duration::from_secs(30)).is_none());

        // Silent for the whole timeout (already past): the connection is given up, as for a read of its own.
        let (t, _peer) = attached(None);
        let pre = t.pre_read(ring()).expect("sent");
        assert!(matches!(
            t.await_pre_read(pre, Duration::ZERO),
            Some(Sent::Lost(_))
        ));
        assert!(!t.live());

        // A challenge to answer needs the driver's password.
        let (t, _peer) = attached(None);
        let ch = super::super::rpc::parse_challenge(
            r#"{"auth_type":"digest","nonce":1,"realm":"r","algorithm":"SHA-256"}"#,
        )
        .unwrap();
        t.set_challenge(ch);
        assert!(t.pre_read(ring()).is_none());
    }

    /// A status read's answer is read by the poller straight into a `StatusDoc`, and its result's own text
    /// becomes the mirror. Anything else (another id, an error, a repeated member, no status read waiting)
    /// is left for the usual way.
    #[test]
    fn a_status_read_is_answered_typed_and_its_text_is_the_mirror() {
        let (t, mut peer) = attached(Some(json!({"switch:0": {"output": true}})));
        let _ = t.take_prefetched();
        let t = std::sync::Arc::new(t);
        let read = |t: &std::sync::Arc<Tunnel>| {
            let t = t.clone();
            std::thread::spawn(move || t.request_status(|_| None, Duration::from_secs(30)))
        };
        // Not a typed read: the poller leaves the frame alone.
        let plain = switch_elsewhere(&t, true);
        let id = next_request(&mut peer)["id"].as_u64().unwrap();
        assert!(!t.take_status_answer(&format!(r#"{{"id":{id},"result":{{}}}}"#)));
        assert!(
            t.deliver(
                id,
                json!({"id": id, "result": {"was_on": false}})
                    .as_object()
                    .unwrap()
                    .clone()
            )
        );
        assert!(matches!(plain.join().unwrap(), Sent::Answer(_)));

        let reader = read(&t);
        let sent = next_request(&mut peer);
        assert_eq!(sent["method"], "Shelly.GetStatus");
        let id = sent["id"].as_u64().unwrap();
        let result = r#"{"switch:0": {"output": false, "apower": 7.5}, "sys": {"uptime": 3}}"#;
        for other in [
            format!(r#"{{"id":{},"result":{result}}}"#, id + 1),
            format!(r#"{{"id":{id},"error":{{"code":401,"message":"x"}}}}"#),
            format!(r#"{{"id":{id},"id":{id},"result":{result}}}"#),
            format!(r#"{{"id":{id},"result":[1]}}"#),
            format!(
                r#"{{"id":{id},"result":{{"a":{}1{}}}}}"#,
                "[".repeat(40),
                "]".repeat(40)
            ),
            r#"{"method":"NotifyStatus","params":{}}"#.to_string(),
            "not json".to_string(),
        ] {
            assert!(!t.take_status_answer(&other), "{other}");
        }
        let answer = format!(r#"{{"id":{id},"src":"dev","dst":"me","result":{result}}}"#);
        assert!(t.take_status_answer(&answer));
        let Sent::Status(doc) = reader.join().unwrap() else {
            panic!("a typed status")
        };
        let c = doc
            .channel(crate::driver::rpc::status_doc::Kind::Switch, 0)
            .unwrap();
        assert_eq!((c.output.0, c.apower.0), (Some(false), Some(7.5)));
        assert_eq!(
            t.lock().mirror.as_deref(),
            Some(result),
            "the device's own text"
        );
        assert_eq!(
            t.take_mirror(),
            Mirror::Held,
            "the answer is the driver's read"
        );
        t.merge_status(json!({"sys": {"uptime": 4}}).as_object().unwrap(), false);
        assert_eq!(
            t.take_mirror(),
            Mirror::Changed(
                json!({"switch:0": {"output": false, "apower": 7.5}, "sys": {"uptime": 4}})
            )
        );
        // Answered once: a repeat finds no read waiting.
        assert!(!t.take_status_answer(&answer));

        // An error answer to a typed read goes the usual way, as a frame.
        let reader = read(&t);
        let id = next_request(&mut peer)["id"].as_u64().unwrap();
        let error = json!({"id": id, "error": {"code": -103, "message": "busy"}});
        assert!(!t.take_status_answer(&error.to_string()));
        assert!(t.deliver(id, error.as_object().unwrap().clone()));
        assert!(matches!(reader.join().unwrap(), Sent::Answer(f) if f.contains_key("error")));
    }

    /// `Switch.Set` of switch 0 to `on` through `t`, on a thread of its own (it waits for its answer).
    fn switch_elsewhere(t: &std::sync::Arc<Tunnel>, on: bool) -> std::thread::JoinHandle<Sent> {
        let t = t.clone();
        std::thread::spawn(move || {
            t.request(
                "Switch.Set",
                Some(&json!({"id": 0, "on": on})),
                |_| None,
                Duration::from_secs(30),
            )
        })
    }

    /// The next request frame, read as a device would (masked, as from a client).
    fn next_request(peer: &mut TcpStream) -> Value {
        let mut buf = Vec::new();
        let (f, _) = loop {
            let mut chunk = [0u8; 512];
            let n = peer.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            if let Some(done) = frame::decode(&buf, true, 1 << 20).unwrap() {
                break done;
            }
        };
        serde_json::from_slice(&f.payload).unwrap()
    }

    #[test]
    fn a_request_is_a_masked_frame_answered_by_its_id() {
        let (t, mut peer) = attached(None);
        let t = std::sync::Arc::new(t);
        let caller = switch_elsewhere(&t, true);
        let sent = next_request(&mut peer);
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

    /// A switch's notification read before our next switch's answer is older than it: the mirror a read then
    /// takes says what the answer said, not what the notification did.
    #[test]
    fn a_switch_answer_sets_the_output_in_the_mirror_over_an_older_notification() {
        let (t, mut peer) = attached(Some(
            json!({"switch:0": {"id": 0, "output": false, "apower": 0.0}}),
        ));
        let t = std::sync::Arc::new(t);
        assert!(t.take_prefetched().is_some());
        for (on, waiting) in [(false, true), (true, false)] {
            // An earlier switch's notification: the output and its power (a read is asked for).
            let earlier = json!({"switch:0": {"id": 0, "output": !on, "apower": 5.0}});
            t.merge_status(earlier.as_object().unwrap(), false);
            if !waiting {
                // Taken already by a read: no parsed value waits beside the text.
                assert!(matches!(t.take_mirror(), Mirror::Changed(_)));
            }
            let caller = switch_elsewhere(&t, on);
            let id = next_request(&mut peer)["id"].as_u64().unwrap();
            let answer = json!({"id": id, "result": {"was_on": !on}});
            assert!(t.deliver(id, answer.as_object().unwrap().clone()));
            assert!(matches!(caller.join().unwrap(), Sent::Answer(_)));
            let mirror = t.mirror().unwrap();
            assert_eq!(mirror["switch:0"]["output"], json!(on), "{mirror}");
            assert_eq!(mirror["switch:0"]["apower"], json!(5.0), "the rest stays");
            if waiting {
                match t.take_mirror() {
                    Mirror::Changed(m) => assert_eq!(m["switch:0"]["output"], json!(on)),
                    other => panic!("{other:?}"),
                }
            } else {
                assert_eq!(t.take_mirror(), Mirror::Held, "no news for a read");
            }
        }
        assert_eq!(
            output_set("Light.Set", Some(&json!({"id": 2, "on": false}))),
            Some(("light:2".into(), false))
        );
        assert_eq!(
            output_set("Cover.Set", Some(&json!({"id": 0, "on": true}))),
            None
        );
        assert_eq!(
            output_set("Switch.Set", Some(&json!({"id": 0, "on": "yes"}))),
            None
        );
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
