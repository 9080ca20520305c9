//! The broker connection as the rest of the crate sees it: whether it is up (and why not), and an outbox the
//! `sd-mqtt` thread writes to the socket. Drivers publish through it from their worker threads without
//! touching the socket; each device's [`Port`] adds its availability and (Tasmota) the answer it awaits.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::packet::{self, Packet, Publish};
use super::topics::Topics;
use crate::answer::Answer;

/// What the outbox may hold before a publish is refused (the socket is not keeping up): a few hundred
/// requests' worth.
const OUTBOX_LIMIT: usize = 4 * 1024 * 1024;

/// The shared handle of one broker connection.
pub(crate) struct Link {
    state: Mutex<State>,
    settled: Condvar,
    /// Wakes the `sd-mqtt` poller (set when it starts).
    waker: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Our client id (and the first level of our answer topics).
    pub(crate) client_id: String,
    /// `host:port`, for messages.
    pub(crate) broker: String,
}

struct State {
    /// Connected and subscribed.
    up: bool,
    /// Why not, once an attempt failed.
    why_down: Option<String>,
    /// Encoded packets waiting for the socket.
    outbox: Vec<u8>,
}

impl Link {
    /// A link not connected yet.
    pub(crate) fn new(client_id: String, broker: String) -> Link {
        Link {
            state: Mutex::new(State {
                up: false,
                why_down: None,
                outbox: Vec::new(),
            }),
            settled: Condvar::new(),
            waker: OnceLock::new(),
            client_id,
            broker,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The poller: how to wake it.
    pub(crate) fn on_wake(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let _ = self.waker.set(wake);
    }

    /// Queues a QoS 0 PUBLISH (requests and commands: the device's answer, matched within the request
    /// timeout, is the acknowledgement that counts; see ARCHITECTURE.md "MQTT channel"). `Err`: why it was not
    /// sent (the connection is down, or not keeping up).
    pub(crate) fn publish(&self, topic: &str, payload: &[u8]) -> Result<(), String> {
        {
            let mut g = self.lock();
            if !g.up {
                return Err(self.down_text(&g));
            }
            if g.outbox.len() > OUTBOX_LIMIT {
                return Err(format!(
                    "the connection to the MQTT broker {} is not keeping up (over {} KiB waiting to be sent)",
                    self.broker,
                    OUTBOX_LIMIT / 1024
                ));
            }
            packet::encode(
                &Packet::Publish(Publish {
                    topic: topic.to_string(),
                    payload: payload.to_vec(),
                    qos: 0,
                    retain: false,
                    dup: false,
                    id: None,
                }),
                &mut g.outbox,
            );
        }
        self.wake();
        Ok(())
    }

    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            w();
        }
    }

    fn down_text(&self, g: &State) -> String {
        match &g.why_down {
            Some(why) => format!("the MQTT broker {} is not connected: {why}", self.broker),
            None => format!("the MQTT broker {} is not connected yet", self.broker),
        }
    }

    /// Why the connection is down, `None` while it is up.
    pub(crate) fn why_down(&self) -> Option<String> {
        let g = self.lock();
        (!g.up).then(|| self.down_text(&g))
    }

    /// Waits until the first attempt ended (up, or failed with a reason), at most `timeout`.
    pub(crate) fn wait_settled(&self, timeout: Duration) {
        let end = Instant::now() + timeout;
        let mut g = self.lock();
        while !g.up && g.why_down.is_none() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            g = self
                .settled
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The poller: connected and subscribed.
    pub(crate) fn set_up(&self) {
        let mut g = self.lock();
        g.up = true;
        g.why_down = None;
        self.settled.notify_all();
    }

    /// The poller: the connection is down (or an attempt failed), and why. What was waiting to be sent is
    /// dropped: its requests are answered "lost" by their timeouts, or at once through their ports.
    pub(crate) fn set_down(&self, why: String) {
        let mut g = self.lock();
        g.up = false;
        g.why_down = Some(why);
        g.outbox.clear();
        self.settled.notify_all();
    }

    /// The poller: takes what waits to be sent (appended to `into`).
    pub(crate) fn take_outbox(&self, into: &mut Vec<u8>) {
        let mut g = self.lock();
        if into.is_empty() {
            std::mem::swap(into, &mut g.outbox);
        } else {
            into.append(&mut g.outbox);
        }
    }
}

/// What a device last said about itself on its availability topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Nothing yet (Gen2+ availability is not retained).
    Unknown,
    /// `true` / `Online`.
    Online,
    /// `false` / `Offline`: its last will, or it said so.
    Offline,
}

/// One device's side of the connection: its topics, its availability, and (Tasmota) the answer a command
/// waits for and the telemetry not yet taken.
pub(crate) struct Port {
    pub(crate) link: Arc<Link>,
    pub(crate) topics: Topics,
    presence: AtomicU8,
    pending: Mutex<Option<Waiting>>,
    telemetry: Mutex<Telemetry>,
}

/// A Tasmota command waiting for its answer: the `stat` levels that answer it.
struct Waiting {
    levels: Vec<String>,
    answer: Arc<Answer<Value>>,
}

/// Tasmota telemetry not yet taken by the driver: the latest `STATE` and `SENSOR`.
#[derive(Default)]
struct Telemetry {
    state: Option<Value>,
    sensor: Option<Value>,
}

impl Port {
    /// A device's port on `link`.
    pub(crate) fn new(link: Arc<Link>, topics: Topics) -> Port {
        Port {
            link,
            topics,
            presence: AtomicU8::new(0),
            pending: Mutex::new(None),
            telemetry: Mutex::new(Telemetry::default()),
        }
    }

    /// What the device last said on its availability topic.
    pub(crate) fn presence(&self) -> Presence {
        match self.presence.load(Ordering::Relaxed) {
            1 => Presence::Online,
            2 => Presence::Offline,
            _ => Presence::Unknown,
        }
    }

    /// The poller: what the device said (or `Unknown` on a new connection). Returns whether that changed.
    pub(crate) fn set_presence(&self, p: Presence) -> bool {
        let v = match p {
            Presence::Unknown => 0,
            Presence::Online => 1,
            Presence::Offline => 2,
        };
        self.presence.swap(v, Ordering::Relaxed) != v
    }

    /// Why the device cannot be asked now (connection down, or it announced itself offline), else `None`.
    pub(crate) fn unavailable(&self) -> Option<String> {
        if let Some(why) = self.link.why_down() {
            return Some(why);
        }
        (self.presence() == Presence::Offline).then(|| {
            format!(
                "the device announced itself offline on the MQTT broker {} (its last will): it is not connected to the broker",
                self.link.broker
            )
        })
    }

    /// Tasmota: publishes `payload` to `cmnd/…/<command>` and waits up to `timeout` for the first message on
    /// one of the `stat` levels in `levels` (`RESULT`, `STATUS0`…). `Ok(None)`: no answer in time.
    pub(crate) fn command(
        &self,
        command: &str,
        payload: &str,
        levels: Vec<String>,
        timeout: Duration,
    ) -> Result<Option<Value>, String> {
        let answer = Arc::new(Answer::default());
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(Waiting {
            levels,
            answer: answer.clone(),
        });
        if let Err(why) = self
            .link
            .publish(&self.topics.command(command), payload.as_bytes())
        {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            return Err(why);
        }
        let got = answer.wait(timeout);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match got {
            Ok(Some(v)) => Ok(Some(v)),
            Ok(None) => Err(self
                .link
                .why_down()
                .unwrap_or_else(|| "the MQTT connection ended before the answer".into())),
            Err(()) => Ok(None),
        }
    }

    /// The poller: a Tasmota `stat/…/<level>` message; true when a waiting command took it.
    pub(crate) fn deliver(&self, level: &str, body: Value) -> bool {
        let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let taken = g
            .as_ref()
            .is_some_and(|w| w.levels.iter().any(|l| l.eq_ignore_ascii_case(level)));
        if taken && let Some(w) = g.take() {
            w.answer.put(Some(body));
        }
        taken
    }

    /// The poller: the connection ended; a waiting command learns it at once.
    pub(crate) fn cancel(&self) {
        if let Some(w) = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            w.answer.put(None);
        }
    }

    /// The poller: Tasmota telemetry (`STATE` when `state`, else `SENSOR`), kept until the driver takes it.
    pub(crate) fn telemetry(&self, state: bool, body: Value) {
        let mut g = self.telemetry.lock().unwrap_or_else(|e| e.into_inner());
        if state {
            g.state = Some(body);
        } else {
            g.sensor = Some(body);
        }
    }

    /// The driver: the telemetry not yet taken (`STATE`, `SENSOR`).
    pub(crate) fn take_telemetry(&self) -> (Option<Value>, Option<Value>) {
        let mut g = self.telemetry.lock().unwrap_or_else(|e| e.into_inner());
        (g.state.take(), g.sensor.take())
    }
}
