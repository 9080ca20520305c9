//! Event routing: names the device and component of a valid webhook (or of a pushed `NotifyEvent`, which the
//! push thread turns into the same [`Hook`]) and hands what it implies to the device's worker, within the
//! sender's read budget. For a device with a push channel the same device event may come up to three times
//! (webhook, `NotifyEvent`, and derived from a pushed `NotifyStatus` by [`Pushed`]): [`Dedupe`] lets the first
//! one through and drops its twins.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
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
    /// Per device (configuration order): its push channel's view of its states, when it has one (then its
    /// events may come more than once).
    pub(crate) push: Vec<Option<Pushed>>,
    pub(crate) dedupe: Dedupe,
    /// With `AllowedSources: devices`: the addresses webhooks are accepted from (the listener's list, which
    /// grows with the address of a device that moved, once its MAC answered there).
    pub(crate) allowed: Option<super::AllowedSources>,
    /// What devices being updated say of their update (their push channel's `ota_*` events).
    pub(crate) ota: crate::actor::ota_board::OtaBoard,
}

/// The listener starts before the workers exist (its port goes into the hooks the workers install), so it
/// reaches them through this, filled in once they run. Events arriving earlier are queued unresolved.
#[derive(Default)]
pub(crate) struct LateSink(pub(crate) OnceLock<Arc<Shared>>);

impl HookSink for LateSink {
    fn resolve(&self, hook: &Hook, source: IpAddr) -> Option<Resolved<'_>> {
        match self.0.get() {
            Some(shared) => shared.resolve(hook, source, Origin::Webhook),
            None => Some(Resolved::unnamed()),
        }
    }
}

/// A resolved event's device and component names (empty when unknown). For a device whose events may come
/// more than one way it also holds the device's order lock, until it is dropped after the event was queued:
/// otherwise a twin dropped by [`Dedupe`] could be answered, and a later event of the device queued, before
/// the arrival that passed was queued (seen as `switch.off` before `switch.on`).
pub(crate) struct Resolved<'a> {
    /// (device name, component name).
    pub(crate) names: (String, String),
    /// The device's order lock, when it has one: drop it once the event is queued.
    pub(crate) order: Option<MutexGuard<'a, ()>>,
}

impl Resolved<'_> {
    fn unnamed() -> Self {
        Resolved {
            names: Default::default(),
            order: None,
        }
    }
}

impl Shared {
    /// Names the device and component of a webhook and posts the state it implies to the device's worker, which
    /// takes it at once and reads the device: at most one such read waits per device, and a sender's budget
    /// limits how many its events trigger (a flood of events must not become a flood of device requests).
    /// `None` when the event is the twin of one that already came another way (push/webhook). Queue the event
    /// before dropping what this returns.
    pub(crate) fn resolve(
        &self,
        hook: &Hook,
        source: IpAddr,
        origin: Origin,
    ) -> Option<Resolved<'_>> {
        let Some(di) = hook
            .device_id
            .and_then(|id| self.directory.device_by_id.get(&id).copied())
        else {
            return Some(Resolved::unnamed());
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
        let mut order = None;
        if let Some(Some(pushed)) = self.push.get(di) {
            // Taken before the twin check: a twin waits here until the arrival that passed is queued.
            order = Some(pushed.order.lock().unwrap_or_else(|e| e.into_inner()));
            let key = (di, place, hook.event.clone());
            if !self.dedupe.first_arrival(key, origin, Instant::now()) {
                return None;
            }
            if origin == Origin::Webhook
                && let Some((kind, ci)) = place
                && let Some(on) = implied(kind, &hook.event)
            {
                pushed.note_webhook(kind, ci, on);
            }
        }
        let Some((kind, ci)) = place else {
            let names = (snap.name.clone(), String::new());
            return Some(Resolved { names, order });
        };
        let component = match kind {
            ComponentKind::Input => snap.inputs[ci].name.clone(),
            ComponentKind::Output => snap.outputs[ci].name.clone(),
            ComponentKind::Meter => snap.meters[ci].name.clone(),
            ComponentKind::TempProbe => snap.temp_probes[ci].name.clone(),
            ComponentKind::Cover => snap.covers[ci].name.clone(),
            ComponentKind::Sensor => snap.sensors[ci].name.clone(),
        };
        let state = implied(kind, &hook.event);
        // A cover event implies no state we could apply without reading (position): it only asks for a read.
        // An event derived from a pushed status (or a CoIoT one) was posted with that status already.
        if !matches!(origin, Origin::PushStatus | Origin::Coiot)
            && matches!(
                kind,
                ComponentKind::Input | ComponentKind::Output | ComponentKind::Cover
            )
        {
            // The worker applies the state (it is the only writer of the device) and reads the device when
            // asked; a read already asked for needs no budget.
            let inbox = &self.hook_inboxes[di];
            let read = !inbox.read_asked() && self.read_budget.allow(source, Instant::now());
            self.post(di, Some((kind, ci)), state, read);
        }
        let names = (snap.name.clone(), component);
        Some(Resolved { names, order })
    }

    /// Device `di`'s push channel view, when it has a push channel.
    pub(crate) fn pushed(&self, di: usize) -> Option<&Pushed> {
        self.push.get(di).and_then(Option::as_ref)
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

/// The state an input or output event implies.
fn implied(kind: ComponentKind, event: &str) -> Option<bool> {
    match (kind, event) {
        (ComponentKind::Input, "input.toggle_on") | (ComponentKind::Output, "switch.on") => {
            Some(true)
        }
        (ComponentKind::Input, "input.toggle_off") | (ComponentKind::Output, "switch.off") => {
            Some(false)
        }
        _ => None,
    }
}

/// How an event reached us. The two push origins queue as `Channel: push`, but are told apart by [`Dedupe`]:
/// a firmware may send a `NotifyEvent` as well as the `NotifyStatus` an input flip is derived from. A Gen1
/// device's CoIoT status queues as `Channel: coiot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A request to our listener.
    Webhook,
    /// A `NotifyEvent` on the device's socket.
    PushEvent,
    /// Derived by [`Pushed`] from a pushed state change (`NotifyStatus`, or the status read at a reconnect).
    PushStatus,
    /// Derived by [`Pushed`] from a Gen1 CoIoT status (`coiot/listener.rs`).
    Coiot,
}

impl Origin {
    fn bit(self) -> u8 {
        match self {
            Origin::Webhook => 1,
            Origin::PushEvent => 2,
            Origin::PushStatus => 4,
            Origin::Coiot => 8,
        }
    }
}

/// What a device's push channel makes of pushed input and output states: the events their blocks ask for
/// (`input.toggle_on`/`off`, `switch.on`/`off`), one per change, so they come without a listener or hooks.
///
/// The comparison "state before vs state now" lives here, called by the poller, rather than in the worker: the
/// poller sees every `NotifyStatus` in the order sent, while the worker's inbox keeps only the latest state
/// per component (twenty flips taken at once would look like none). It is a short lock per state, so it never
/// blocks the poller, and it writes no device state: the worker stays the one writer. Unknown is no change:
/// a state the socket has not seen yet is measured against the device's last known one (the read at open),
/// so the first connect gives no event for the state open read, one for a flip since, and none when the
/// state was never known; a state pushed as `null` is unknown until the next one. The status read at a
/// reconnect is compared with what the socket saw before the drop: one event if it changed meanwhile, none
/// when a webhook already reported that change after the socket's last word on it (which may be long past
/// the dedupe window).
#[derive(Default)]
pub(crate) struct Pushed {
    /// (kind, `component_index`, event name) the device's inputs and outputs ask for.
    wanted: Vec<(ComponentKind, usize, String)>,
    /// Per (kind, `component_index`): a device has a few, so a list sized to them (a `HashMap` took room for
    /// four at its first entry, about 280 bytes per device with a push channel).
    seen: Mutex<Vec<((ComponentKind, usize), Seen)>>,
    /// Held from an event's twin check until it is queued (see [`Resolved`]).
    order: Mutex<()>,
}

#[derive(Default)]
struct Seen {
    /// The last state the socket brought (`None`: unknown), and when; `None` before the first.
    socket: Option<(Option<bool>, Instant)>,
    /// The state the last webhook implied, and when it came.
    webhook: Option<(bool, Instant)>,
}

impl Pushed {
    /// For the events in `wanted` (see `install::wanted_events`); covers' are not derived from states.
    pub(crate) fn new(wanted: Vec<crate::webhook::install::WantedEvent>) -> Pushed {
        let wanted = wanted
            .into_iter()
            .filter(|e| matches!(e.kind, ComponentKind::Input | ComponentKind::Output))
            .map(|e| (e.kind, e.index, e.event))
            .collect();
        Pushed {
            wanted,
            seen: Mutex::default(),
            order: Mutex::default(),
        }
    }

    /// What was seen of component `key`, fresh at its first mention.
    fn seen<R>(&self, key: (ComponentKind, usize), f: impl FnOnce(&mut Seen) -> R) -> R {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let at = match seen.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                seen.reserve_exact(1);
                seen.push((key, Seen::default()));
                seen.len() - 1
            }
        };
        f(&mut seen[at].1)
    }

    /// Takes a pushed state (`None`: reported unknown) of input or output `index`; returns its event when it
    /// changed from a known one and that event is wanted. `known` is the device's last known state, taken
    /// when the socket has not brought this one yet; `resync`: the status read at a (re)connect, not a
    /// notification. `on_off` names the events: (`input.toggle_on`, `input.toggle_off`) or (`switch.on`,
    /// `switch.off`).
    pub(crate) fn observe<'a>(
        &self,
        kind: ComponentKind,
        index: usize,
        state: Option<bool>,
        known: Option<bool>,
        resync: bool,
        on_off: (&'a str, &'a str),
    ) -> Option<&'a str> {
        let now = Instant::now();
        let (before, reported) = self.seen((kind, index), |s| {
            let before = s.socket.replace((state, now));
            // A webhook with this state since the socket's last word on it reported the change already.
            let reported = s.webhook.is_some_and(|(on, at)| {
                Some(on) == state && before.is_none_or(|(_, seen_at)| at > seen_at)
            });
            (before.map_or(known, |(b, _)| b), reported)
        });
        let (before, on) = (before?, state?);
        let event = if on { on_off.0 } else { on_off.1 };
        (before != on && !(resync && reported) && self.wants(kind, index, event)).then_some(event)
    }

    fn wants(&self, kind: ComponentKind, index: usize, event: &str) -> bool {
        self.wanted
            .iter()
            .any(|(k, i, e)| *k == kind && *i == index && e == event)
    }

    /// A webhook's implied state, for the status read at the next reconnect (see [`Pushed::observe`]). It
    /// never changes what notifications are compared with: a webhook late for a flip must not reorder them.
    fn note_webhook(&self, kind: ComponentKind, index: usize, on: bool) {
        self.seen((kind, index), |s| s.webhook = Some((on, Instant::now())));
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

/// Every [`Origin::bit`] (a group no other origin can join any more leaves with the window).
const ALL_ORIGINS: u8 = 15;

/// (device index, resolved component, event name).
type EventKey = (usize, Option<(ComponentKind, usize)>, String);

/// Exactly once across webhook, `NotifyEvent` and pushed status: an arrival is dropped when an earlier arrival
/// of the same key that came within [`DEDUPE_WINDOW`] has not been matched with this origin yet (the oldest
/// such is then matched); otherwise it passes and waits for its twins. Two real presses in a row are two
/// groups, so they still arrive twice; twenty flips pushed in a row are twenty.
#[derive(Default)]
pub(crate) struct Dedupe {
    /// Arrivals that passed, with the origins matched to them so far (bits of [`Origin::bit`]).
    seen: Mutex<VecDeque<(Instant, EventKey, u8)>>,
    dropped: AtomicU64,
}

impl Dedupe {
    pub(crate) fn first_arrival(&self, key: EventKey, origin: Origin, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        while seen
            .front()
            .is_some_and(|(at, _, _)| now.duration_since(*at) > DEDUPE_WINDOW)
        {
            seen.pop_front();
        }
        let bit = origin.bit();
        if let Some(i) = seen
            .iter()
            .position(|(_, k, origins)| origins & bit == 0 && *k == key)
        {
            seen[i].2 |= bit;
            if seen[i].2 == ALL_ORIGINS {
                // Every origin came: nothing more to match.
                seen.remove(i);
            }
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if seen.len() >= DEDUPE_MAX {
            seen.pop_front();
        }
        seen.push_back((now, key, bit));
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

    /// The push channel's `switch.on` passed the twin check and is being queued when its webhook twin and the
    /// device's next event (`switch.off`) reach the listener: the twin must wait, so that `switch.off` is
    /// not queued first (it was, in 1–2 of 100 runs of `sdctl events` on a loaded machine).
    #[test]
    fn an_event_that_passed_is_queued_before_a_later_one_overtakes_it() {
        use crate::objects::{Device, Output};
        let dev = Device {
            id: 1,
            name: "Pump".into(),
            outputs: vec![Output {
                id: 1,
                name: "Pump Out".into(),
                ..Output::default()
            }],
            ..Device::default()
        };
        let shared = Arc::new(Shared {
            directory: Directory::new(std::slice::from_ref(&dev)),
            slots: vec![Arc::new(RwLock::new(Arc::new(dev)))],
            senders: RwLock::new(None),
            hook_inboxes: vec![Arc::default()],
            read_budget: ReadBudget::default(),
            push: vec![Some(Pushed::default())],
            dedupe: Dedupe::default(),
            allowed: None,
            ota: Default::default(),
        });
        let hook = |event: &str| Hook {
            event: event.into(),
            device_id: Some(1),
            object_type: Some("output".into()),
            component_id: Some(1),
            params: Default::default(),
        };
        let source = IpAddr::from([127, 0, 0, 1]);
        let queued = Arc::new(Mutex::new(Vec::new()));
        let first = shared
            .resolve(&hook("switch.on"), source, Origin::PushEvent)
            .unwrap();
        assert_eq!(first.names, ("Pump".into(), "Pump Out".into()));
        let listener = std::thread::spawn({
            let (shared, queued) = (shared.clone(), queued.clone());
            move || {
                let twin = shared.resolve(&hook("switch.on"), source, Origin::Webhook);
                assert!(twin.is_none(), "a twin passed");
                let next = shared.resolve(&hook("switch.off"), source, Origin::Webhook);
                queued.lock().unwrap().push("switch.off");
                drop(next);
            }
        });
        // Time for the listener to overtake, were it not held (the result does not depend on it).
        std::thread::sleep(Duration::from_millis(50));
        queued.lock().unwrap().push("switch.on");
        drop(first);
        listener.join().unwrap();
        assert_eq!(*queued.lock().unwrap(), ["switch.on", "switch.off"]);
    }

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
        assert!(d.first_arrival(key(), Origin::Webhook, t));
        assert!(!d.first_arrival(key(), Origin::PushEvent, t));
        // A second press: a new pair, push first this time.
        assert!(d.first_arrival(key(), Origin::PushEvent, t));
        assert!(!d.first_arrival(key(), Origin::Webhook, t));
        // Same origin twice is two events.
        assert!(d.first_arrival(key(), Origin::PushEvent, t));
        assert!(d.first_arrival(key(), Origin::PushEvent, t));
        // Past the window a twin is a new event.
        let later = t + DEDUPE_WINDOW + Duration::from_millis(1);
        assert!(d.first_arrival(key(), Origin::Webhook, later));
        assert_eq!(d.dropped(), 2);
    }

    #[test]
    fn a_flip_reported_three_ways_passes_once_and_flips_in_a_row_all_pass() {
        let d = Dedupe::default();
        let t = Instant::now();
        let key = |on: bool| {
            let name = if on {
                "input.toggle_on"
            } else {
                "input.toggle_off"
            };
            (0, Some((ComponentKind::Input, 0)), name.to_string())
        };
        // Twenty flips pushed in a row, then their webhooks and `NotifyEvent`s late and in any order.
        for n in 0..20 {
            assert!(
                d.first_arrival(key(n % 2 == 0), Origin::PushStatus, t),
                "{n}"
            );
        }
        for n in 0..20 {
            assert!(!d.first_arrival(key(n % 2 == 0), Origin::Webhook, t), "{n}");
        }
        for n in (0..20).rev() {
            assert!(
                !d.first_arrival(key(n % 2 == 0), Origin::PushEvent, t),
                "{n}"
            );
        }
        assert_eq!(d.dropped(), 40);
        // Matched groups are gone: the next flip is new whichever way it comes first.
        assert!(d.first_arrival(key(true), Origin::Webhook, t));
        assert!(!d.first_arrival(key(true), Origin::PushStatus, t));
    }

    #[test]
    fn a_state_change_is_an_event_once_known_and_wanted() {
        use crate::webhook::install::WantedEvent;
        let wanted = |event: &str| WantedEvent {
            kind: ComponentKind::Input,
            index: 0,
            id: 5,
            event: event.into(),
        };
        let p = Pushed::new(vec![wanted("input.toggle_on"), wanted("input.toggle_off")]);
        let names = ("input.toggle_on", "input.toggle_off");
        let input = ComponentKind::Input;
        // Not seen and not known before: the first state is no change.
        assert_eq!(p.observe(input, 0, Some(true), None, true, names), None);
        assert_eq!(p.observe(input, 0, Some(true), None, false, names), None);
        let flip = |on, resync| p.observe(input, 0, Some(on), None, resync, names);
        assert_eq!(flip(false, false), Some("input.toggle_off"));
        assert_eq!(flip(true, false), Some("input.toggle_on"));
        // Pushed unknown (a button has no state): the next state is no change either, whatever was known.
        assert_eq!(p.observe(input, 0, None, Some(false), false, names), None);
        assert_eq!(
            p.observe(input, 0, Some(true), Some(false), false, names),
            None
        );
        // Not seen yet: measured against the known state (open's read).
        assert_eq!(
            p.observe(input, 1, Some(true), Some(true), true, names),
            None
        );
        let p2 = Pushed::new(vec![wanted("input.toggle_on")]);
        assert_eq!(
            p2.observe(input, 0, Some(true), Some(false), true, names),
            Some("input.toggle_on")
        );
        // Not asked for: another input, an event not listed, outputs.
        assert_eq!(p.observe(input, 1, Some(false), None, false, names), None);
        assert_eq!(p2.observe(input, 0, Some(false), None, false, names), None);
        let out = ("switch.on", "switch.off");
        let output = ComponentKind::Output;
        assert_eq!(p.observe(output, 0, Some(true), None, false, out), None);
        assert_eq!(p.observe(output, 0, Some(false), None, false, out), None);
        // A webhook reported a flip the socket did not see: the reconnect's status finds no new event.
        p.note_webhook(input, 0, false);
        assert_eq!(flip(false, true), None);
        // A webhook older than the socket's last word, or of another state, does not count.
        p.note_webhook(input, 0, true);
        assert_eq!(flip(true, false), Some("input.toggle_on"));
        assert_eq!(flip(false, true), Some("input.toggle_off"));
        // Nor for a notification: Dedupe pairs those within its window.
        p.note_webhook(input, 0, true);
        assert_eq!(flip(true, false), Some("input.toggle_on"));
    }
}
