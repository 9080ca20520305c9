//! Webhook routing: names the device and component of a valid webhook and hands what it implies to the
//! device's worker, within the sender's read budget.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock, RwLock};

use crossbeam_channel::Sender;

use crate::actor::hook_inbox::{HookInbox, Post};
use crate::actor::worker::{self, Command, Slot};
use crate::directory::Directory;
use crate::objects::ComponentKind;
use crate::webhook::HookSink;
use crate::webhook::read_budget::ReadBudget;
use crate::webhook::request::Hook;

/// What the controller shares with the webhook listener: lookups, snapshots and worker inboxes.
pub(crate) struct Shared {
    pub(crate) directory: Directory,
    pub(crate) slots: Vec<Slot>,
    pub(crate) senders: RwLock<Option<Vec<Sender<Command>>>>,
    /// Per device: webhook events waiting for its worker.
    pub(crate) hook_inboxes: Vec<Arc<HookInbox>>,
    /// Per sender: how many device reads its events may trigger.
    pub(crate) read_budget: ReadBudget,
}

/// The listener starts before the workers exist (its port goes into the hooks the workers install), so it
/// reaches them through this, filled in once they run. Events arriving earlier are queued unresolved.
#[derive(Default)]
pub(crate) struct LateSink(pub(crate) OnceLock<Arc<Shared>>);

impl HookSink for LateSink {
    fn resolve(&self, hook: &Hook, source: IpAddr) -> (String, String) {
        match self.0.get() {
            Some(shared) => shared.resolve(hook, source),
            None => (String::new(), String::new()),
        }
    }
}

impl Shared {
    /// Names the device and component of a webhook and posts the state it implies to the device's worker, which
    /// takes it at once and reads the device: at most one such read waits per device, and a sender's budget
    /// limits how many its events trigger (a flood of events must not become a flood of device requests).
    fn resolve(&self, hook: &Hook, source: IpAddr) -> (String, String) {
        let Some(di) = hook
            .device_id
            .and_then(|id| self.directory.device_by_id.get(&id).copied())
        else {
            return (String::new(), String::new());
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
        let Some((kind, ci)) = place else {
            return (snap.name.clone(), String::new());
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
            let read =
                !inbox.read_asked() && self.read_budget.allow(source, std::time::Instant::now());
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
        (snap.name.clone(), component)
    }
}
