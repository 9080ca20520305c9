//! Event routing: names the device and component of a valid webhook (or of a pushed `NotifyEvent`, which the
//! push thread turns into the same [`Hook`]) and hands what it implies to the device's worker, within the
//! sender's read budget. For a device with a push channel the same device event may come twice (webhook and
//! socket): [`Dedupe`] lets the first one through and drops its twin.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use crate::actor::hook_inbox::{HookInbox, Post};
use crate::actor::worker::{self, Command, Slot, WorkerTx};
use crate::directory::Directory;
use crate::event::{EventChannel, WebhookEvent};
use crate::objects::ComponentKind;
use crate::webhook::HookSink;
use crate::webhook::read_budget::ReadBudget;
use crate::webhook::request::Hook;

/// What the controller shares with the webhook listener: lookups, snapshots and worker inboxes.
pub(crate) struct Shared {
    pub(crate) directory: Directory,
    pub(crate) slots: Vec<Slot>,
    pub(crate) senders: RwLock<Option<Vec<WorkerTx>>>,
    /// Per device: webhook events waiting for its worker.
    pub(crate) hook_inboxes: Vec<Arc<HookInbox>>,
    /// Per sender: how many device reads its events may trigger.
    pub(crate) read_budget: ReadBudget,
    /// Per device (configuration order): whether it has a push channel, so its events may come twice.
    pub(crate) push: Vec<bool>,
    pub(crate) dedupe: Dedupe,
}

/// The listener starts before the workers exist (its port goes into the hooks the workers install), so it
/// reaches them through this, filled in once they run. Events arriving earlier are queued unresolved.
#[derive(Default)]
pub(crate) struct LateSink(pub(crate) OnceLock<Arc<Shared>>);

impl HookSink for LateSink {
    fn resolve(&self, hook: &Hook, source: IpAddr) -> Option<(String, String)> {
        match self.0.get() {
            Some(shared) => shared.resolve(hook, source, EventChannel::Webhook),
            None => Some((String::new(), String::new())),
        }
    }
}

impl Shared {
    /// Names the device and component of a webhook and posts the state it implies to the device's worker, which
    /// takes it at once and reads the device: at most one such read waits per device, and a sender's budget
    /// limits how many its events trigger (a flood of events must not become a flood of device requests).
    /// `None` when the event is the twin of one that already came through the other channel (push/webhook).
    pub(crate) fn resolve(
        &self,
        hook: &Hook,
        source: IpAddr,
        channel: EventChannel,
    ) -> Option<(String, String)> {
        let Some(di) = hook
            .device_id
            .and_then(|id| self.directory.device_by_id.get(&id).copied())
        else {
            return Some((String::new(), String::new()));
        };
        let snap = worker::snapshot(&self.slots[di]);
        // Names only: the worker applies what the event implies.
        let kind = match hook.object_type.as_deref() {
            Some("input") => Some(ComponentKind::Input),
            Some("output" | "switch") => Some(ComponentKind::Output),
            Some("meter") => Some(ComponentKind::Meter),
            Some("temp_probe") => Some(ComponentKind::TempProbe),
            Some("cover") => Some(ComponentKind::Cover),
            Some("sensor") => Some(ComponentKind::Sensor),
            _ => None,
        };
        let place = kind.zip(hook.component_id).and_then(|(k, id)| {
            let (cdi, ci) = self.directory.by_id.get(&(k, id)).copied()?;
            (cdi == di).then_some((k, ci))
        });
        if self.push.get(di).copied().unwrap_or(false) {
            let key = (di, place, hook.event.clone());
            if !self.dedupe.first_arrival(key, channel, Instant::now()) {
                return None;
            }
        }
        let Some((kind, ci)) = place else {
            return Some((snap.name.clone(), String::new()));
        };
        let component = match kind {
            ComponentKind::Input => snap.inputs[ci].name.clone(),
            ComponentKind::Output => snap.outputs[ci].name.clone(),
            ComponentKind::Meter => snap.meters[ci].name.clone(),
            ComponentKind::TempProbe => snap.temp_probes[ci].name.clone(),
            ComponentKind::Cover => snap.covers[ci].name.clone(),
            ComponentKind::Sensor => snap.sensors[ci].name.clone(),
        };
        let state =
            match (kind, hook.event.as_str()) {
                (ComponentKind::Input, "input.toggle_on")
                | (ComponentKind::Output, "switch.on") => Some(true),
                (ComponentKind::Input, "input.toggle_off")
                | (ComponentKind::Output, "switch.off") => Some(false),
                _ => None,
            };
        // A cover event implies no state we could apply without reading (position): it only asks for a read.
        if matches!(
            kind,
            ComponentKind::Input | ComponentKind::Output | ComponentKind::Cover
        ) {
            // The worker applies the state (it is the only writer of the device) and reads the device when
            // asked; a read already asked for needs no budget.
            let inbox = &self.hook_inboxes[di];
            let read = !inbox.read_asked() && self.read_budget.allow(source, Instant::now());
            self.post(di, Some((kind, ci)), state, read);
        }
        Some((snap.name.clone(), component))
    }

    /// Posts a component's implied state (and whether to read the device) to device `di`'s inbox and wakes
    /// its worker when no wake-up is in flight; `place` `None` only asks for a read.
    pub(crate) fn post(
        &self,
        di: usize,
        place: Option<(ComponentKind, usize)>,
        state: Option<bool>,
        read: bool,
    ) {
        let inbox = &self.hook_inboxes[di];
        let (kind, ci) = place.unwrap_or((ComponentKind::Input, 0));
        let state = state.filter(|_| place.is_some());
        if inbox.post(kind, ci, state, read) == Post::Wake {
            let guard = self.senders.read().unwrap_or_else(|e| e.into_inner());
            let sent = guard
                .as_ref()
                .and_then(|s| s.get(di))
                .is_some_and(|tx| tx.try_send(Command::Hook).is_ok());
            if !sent {
                inbox.unqueue();
            }
        }
    }
}

/// The queued form of a resolved event (webhook or push).
pub(crate) fn event(
    hook: Hook,
    (device, component): (String, String),
    source: String,
    channel: EventChannel,
) -> WebhookEvent {
    WebhookEvent {
        event: hook.event,
        component,
        component_id: hook.component_id,
        object_type: hook.object_type,
        device,
        device_id: hook.device_id,
        received_at: crate::clock::rfc3339_now(),
        source,
        params: hook.params,
        channel,
    }
}

/// How long an event waits for its twin from the other channel.
pub(crate) const DEDUPE_WINDOW: Duration = Duration::from_secs(2);
/// Unmatched arrivals kept at most (the oldest go first).
const DEDUPE_MAX: usize = 4096;

/// (device index, resolved component, event name).
type EventKey = (usize, Option<(ComponentKind, usize)>, String);

/// Exactly once across webhook and push: an arrival is dropped when an unmatched arrival of the same key from
/// the other channel came within [`DEDUPE_WINDOW`] (that one is then matched); otherwise it passes and waits
/// for its twin. Two real presses in a row are two pairs, so they still arrive twice.
#[derive(Default)]
pub(crate) struct Dedupe {
    seen: Mutex<VecDeque<(Instant, EventKey, EventChannel)>>,
    dropped: AtomicU64,
}

impl Dedupe {
    pub(crate) fn first_arrival(&self, key: EventKey, channel: EventChannel, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        while seen
            .front()
            .is_some_and(|(at, _, _)| now.duration_since(*at) > DEDUPE_WINDOW)
        {
            seen.pop_front();
        }
        if let Some(i) = seen.iter().position(|(_, k, c)| *c != channel && *k == key) {
            seen.remove(i);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if seen.len() >= DEDUPE_MAX {
            seen.pop_front();
        }
        seen.push_back((now, key, channel));
        true
    }

    /// Twins dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_passes_once_whichever_channel_is_first() {
        let d = Dedupe::default();
        let t = Instant::now();
        let key = || {
            (
                0,
                Some((ComponentKind::Input, 0)),
                "input.button_push".to_string(),
            )
        };
        assert!(d.first_arrival(key(), EventChannel::Webhook, t));
        assert!(!d.first_arrival(key(), EventChannel::Push, t));
        // A second press: a new pair, push first this time.
        assert!(d.first_arrival(key(), EventChannel::Push, t));
        assert!(!d.first_arrival(key(), EventChannel::Webhook, t));
        // Same channel twice is two events.
        assert!(d.first_arrival(key(), EventChannel::Push, t));
        assert!(d.first_arrival(key(), EventChannel::Push, t));
        // Past the window a twin is a new event.
        let later = t + DEDUPE_WINDOW + Duration::from_millis(1);
        assert!(d.first_arrival(key(), EventChannel::Webhook, later));
        assert_eq!(d.dropped(), 2);
    }
}
