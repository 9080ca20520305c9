//! The per-device worker: one thread (`sd-dev-<ID>`) owns the device's driver and state, takes commands from a
//! channel and publishes an immutable snapshot after each one, so readers never wait for device I/O.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, SendError, Sender, TryRecvError, TrySendError};

use super::bell::Bell;
use super::energy_op::EnergyAsk;
use super::firmware_op::FirmwareOp;
use super::hook_inbox::HookInbox;
use super::peers::Peers;
use super::restart::{Backoff, Gate, Now};
pub(crate) use super::slot::{Slot, snapshot};
use crate::driver::ws::tunnel::PreRead;
use crate::driver::{Driver, Liveness, OutputAction};
use crate::error::{Error, Result};
use crate::objects::{Cover, CoverAction, Device, Output, OutputChange};

/// Worker threads mostly wait on sockets and parse small JSON bodies; 256 KiB is ample and keeps 1,000 workers
/// cheap in address space.
pub(crate) const STACK_SIZE: usize = 256 * 1024;

/// A command for channel `index` of a `kind` the device has fewer of.
fn no_channel(kind: &'static str, index: usize, dev: &Device) -> Error {
    Error::NotFound {
        kind,
        identity: format!("channel {index} of device {}", dev.label()),
        hint: String::new(),
    }
}

/// Commands from callers and the supervisor. Each carries its own reply channel.
pub(crate) enum Command {
    /// Read the device's state; `reply` is `None` for background refreshes.
    Refresh {
        /// Where the result goes.
        reply: Option<Sender<Result<()>>>,
        /// The status request, already sent (`refresh_all` over the push channel); its answer woke the worker.
        pre: Option<PreRead>,
    },
    /// Webhook events wait in the device's [`HookInbox`]: take their states, and read the device if asked.
    Hook,
    /// Background check from the supervisor: refresh an online device; probe an offline one and refresh it
    /// when it is back.
    Tick,
    /// Apply an action to output `index`.
    Switch {
        /// Output channel (0-based).
        index: usize,
        /// What to do.
        action: OutputAction,
        /// Where the result goes.
        reply: Sender<Result<OutputChange>>,
    },
    /// Apply an action to cover `index`.
    Cover {
        /// Cover channel (0-based).
        index: usize,
        /// What to do.
        action: CoverAction,
        /// Where the result goes: the cover as the command left it (a later published read may be older).
        reply: Sender<Result<Cover>>,
    },
    /// Set light output `index` (brightness, colour, on/off).
    Light {
        /// Output channel (0-based).
        index: usize,
        /// What to change (ranges needing no device already checked).
        change: crate::light::LightChange,
        /// Where the result goes: the output as the command left it.
        reply: Sender<Result<Output>>,
    },
    /// A step of a firmware update (`actor/update.rs`).
    Firmware(FirmwareOp),
    /// Read a meter's own energy records (`controller/energy.rs`).
    Energy(EnergyAsk),
    /// Discovery found the device's MAC at another address (a hint: only a device configured with a `MAC`
    /// follows it, and only once the MAC answers there).
    Moved {
        /// The address discovery found it at.
        host: String,
        /// The port it answered on.
        port: u16,
    },
}

/// A worker's command channel as its senders hold it. The worker waits on its [`Bell`] rather than in a
/// blocking receive (which spins and yields before it sleeps: with 1,000 workers on 2 cores that was a large
/// share of their CPU), so every successful send rings it, and so does the drop of the last sender (it ends
/// the worker's loop). Other drops do not: every call clones a sender and drops it after its answer, and
/// `refresh_all` clones them all, so ringing at each drop woke every worker a second time for nothing.
pub(crate) struct WorkerTx {
    /// Always `Some` until dropped: the sender must be gone before the ring, or the worker would wake, still
    /// see a sender, and wait for good.
    tx: Option<Sender<Command>>,
    bell: Arc<Bell>,
    /// How many `WorkerTx` hold the channel.
    holders: Arc<AtomicUsize>,
}

impl WorkerTx {
    /// The first sender of a worker's channel.
    fn new(tx: Sender<Command>, bell: Arc<Bell>) -> WorkerTx {
        WorkerTx {
            tx: Some(tx),
            bell,
            holders: Arc::new(AtomicUsize::new(1)),
        }
    }

    /// Sends, waiting while the inbox is full (back-pressure).
    pub(crate) fn send(&self, cmd: Command) -> std::result::Result<(), SendError<Command>> {
        match &self.tx {
            Some(tx) => tx.send(cmd)?,
            None => return Err(SendError(cmd)),
        }
        self.bell.ring();
        Ok(())
    }

    /// Sends without waking the worker: something else will ([`PreRead`]'s answer).
    pub(crate) fn send_quiet(&self, cmd: Command) -> std::result::Result<(), SendError<Command>> {
        match &self.tx {
            Some(tx) => tx.send(cmd),
            None => Err(SendError(cmd)),
        }
    }

    /// What wakes the worker, for whoever will.
    pub(crate) fn ringer(&self) -> Box<dyn Fn() + Send + Sync> {
        let bell = Arc::clone(&self.bell);
        Box::new(move || bell.ring())
    }

    /// Sends unless the inbox is full.
    pub(crate) fn try_send(&self, cmd: Command) -> std::result::Result<(), TrySendError<Command>> {
        match &self.tx {
            Some(tx) => tx.try_send(cmd)?,
            None => return Err(TrySendError::Disconnected(cmd)),
        }
        self.bell.ring();
        Ok(())
    }
}

impl Clone for WorkerTx {
    fn clone(&self) -> Self {
        // Counted before the clone exists: the count never reaches 0 while a holder is left.
        self.holders.fetch_add(1, Ordering::AcqRel);
        WorkerTx {
            tx: self.tx.clone(),
            bell: Arc::clone(&self.bell),
            holders: Arc::clone(&self.holders),
        }
    }
}

impl Drop for WorkerTx {
    fn drop(&mut self) {
        drop(self.tx.take());
        // Every other holder dropped its sender before its own decrement, so the last one to count down rings a
        // channel with no sender left: the worker wakes to find it disconnected.
        if self.holders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.bell.ring();
        }
    }
}

/// The worker's next command, waited for on its bell; `None` once every [`WorkerTx`] is gone.
#[inline(never)]
fn next_command(rx: &Receiver<Command>, bell: &Bell) -> Option<Command> {
    loop {
        match rx.try_recv() {
            Ok(cmd) => return Some(cmd),
            // Rung by every send and every sender's drop; a ring already taken finds it still empty.
            Err(TryRecvError::Empty) => bell.wait(),
            Err(TryRecvError::Disconnected) => return None,
        }
    }
}

/// A running worker as the controller sees it.
pub(crate) struct Worker {
    /// Command inbox of the worker.
    pub tx: WorkerTx,
    /// Its published state.
    pub slot: Slot,
    /// Its thread, joined on close.
    pub thread: crate::ffi::thread::OsThread,
}

/// What a worker shares with the rest of the controller.
pub(crate) struct Links {
    /// How an offline device is probed.
    pub liveness: Liveness,
    /// Webhook events on their way to this worker.
    pub inbox: Arc<HookInbox>,
    /// The other devices' published outputs.
    pub peers: Arc<Peers>,
    /// Whether the supervisor refreshes devices in the background (then an offline device is retried).
    pub refreshes: bool,
    /// What the device's first contact may decide about its components (its configuration left the shape open).
    pub follow: Option<Arc<crate::plan::Follow>>,
    /// Where the worker queues the events it notices itself (`device.profile_changed`).
    pub events: Option<Events>,
    /// The configured `MAC:` (else the device's first reported MAC becomes its identity).
    pub mac: Option<crate::mac::Mac>,
    /// Set for a device that sleeps between reports (`sleep.rs`): its configured `ReportPeriod`, if any.
    pub sleep: Option<Option<Duration>>,
}

/// A device that sleeps between reports: never polled, commands refused at once, offline only once it missed
/// its period by the margin (`sleep::allowed_silence`).
struct Sleep {
    /// The configured `ReportPeriod` (else the device's `sys.wakeup_period`, else `sleep::DEFAULT_PERIOD`).
    period: Option<Duration>,
    /// When it last reported (the worker's start until it does).
    heard: Instant,
}

/// How long a read that saw the device's MAC vouches for the address: a switch or move later than this reads
/// first, unless a live push connection vouches for it (`Driver::pinned`). Two devices swapping addresses
/// (DHCP) without any of our requests failing in between would otherwise get each other's commands.
const IDENTITY_FRESH: Duration = Duration::from_secs(5);

/// Who the device is, and whether the device at its address has shown to be it since the last failure.
/// The safety rule: a device answering with another MAC is not this device. Nothing it reports is taken,
/// and no switch or move is sent to the address until a read has confirmed the MAC again (after any
/// failure, and when the last confirmation is older than [`IDENTITY_FRESH`]).
#[derive(Default)]
struct Identity {
    /// The configured MAC, or the first one the device reported in this process.
    expected: Option<crate::mac::Mac>,
    /// `expected` is the configured MAC.
    configured: bool,
    /// A read since the last failure saw the expected MAC (or there is none to expect yet), and when.
    confirmed: bool,
    confirmed_at: Option<Instant>,
    /// The last read found another device at the address.
    foreign: bool,
}

/// The event queue as a worker uses it.
#[derive(Clone)]
pub(crate) struct Events {
    /// The controller's queue.
    pub queue: Arc<crate::webhook::queue::EventQueue>,
    /// Set after each queued event.
    pub wake: Option<crate::wake::WakeFlag>,
    /// Whether the device has a push channel (then an event-asked read takes what it pushed).
    pub push: bool,
}

/// Builds a fresh driver for the device at an address (host, port): at open, after a panic, and for the new
/// address of a device that moved.
pub(crate) type Factory = Box<dyn FnMut(Option<&str>, u16) -> Result<Box<dyn Driver>> + Send>;

/// Starts the worker thread for `device` with the first `driver`; `factory` builds the replacement after a
/// panic, when `now` says the back-off has passed. The result of the first read is sent on `started`.
pub(crate) fn spawn(
    device: Device,
    driver: Box<dyn Driver>,
    factory: Factory,
    now: Now,
    links: Links,
    started: Sender<(i64, Result<()>)>,
) -> std::io::Result<Worker> {
    let Links {
        liveness,
        inbox,
        peers,
        refreshes,
        follow,
        events,
        mac,
        sleep,
    } = links;
    // Callers block on their replies, so a small inbox is enough (each slot costs memory in every one of
    // possibly thousands of workers); when it is full, senders wait (back-pressure) and background checks are
    // skipped by the supervisor's try_send.
    let (tx, rx) = crossbeam_channel::bounded(8);
    let remote_gated = Peers::matters_for(&device);
    let spare = Some(Arc::new(device.clone()));
    let device = Arc::new(device);
    let slot: Slot = Arc::new(RwLock::new(Arc::clone(&device)));
    let begun = now();
    let state = Box::new(State {
        device,
        // Made here rather than at the first contact's change, so that no worker's stack ever holds a whole
        // device being copied (its deepest page at open, resident for good).
        spare,
        driver,
        factory,
        liveness,
        backoff: Backoff::new(now.clone()),
        now,
        failing: false,
        hooks_synced: false,
        inbox,
        remote_gated,
        refreshes,
        peers,
        slot: slot.clone(),
        follow,
        events,
        noticed_by: crate::event::EventChannel::Read,
        contacted: false,
        identity: Identity {
            expected: mac,
            configured: mac.is_some(),
            ..Identity::default()
        },
        sleep: sleep.map(|period| Sleep {
            period,
            heard: begun,
        }),
        updating: false,
    });
    let bell = Arc::new(Bell::default());
    let rings = Arc::clone(&bell);
    let name = format!("sd-dev-{}", state.device.id);
    // The worker's records belong to the controller that starts it (see log_scope).
    let main = crate::log_scope::carry(move || state.run(rx, &rings, started));
    let thread = crate::ffi::thread::spawn(name, STACK_SIZE, main)?;
    let tx = WorkerTx::new(tx, bell);
    Ok(Worker { tx, slot, thread })
}

/// The device, to change (never the published snapshot itself, which readers keep as it is): the spare when
/// no reader holds it any more, brought up to date in place, else a fresh copy.
fn writable<'a>(device: &'a mut Arc<Device>, spare: &mut Option<Arc<Device>>) -> &'a mut Device {
    if Arc::get_mut(device).is_none()
        && let Some(mut s) = spare.take()
        && let Some(d) = Arc::get_mut(&mut s)
    {
        d.clone_from(device);
        *device = s;
    }
    Arc::make_mut(device)
}

struct State {
    /// Shared with the published snapshot until the next change (copy-on-write), so a quiet device costs
    /// one copy, not two.
    device: Arc<Device>,
    /// The snapshot published before the current one. Once no reader holds it, the next change is written
    /// into it (`clone_from` keeps its strings and lists) instead of into a fresh copy: a read of 1,000
    /// devices made and freed 1,000 copies, a sixth of the workers' CPU.
    spare: Option<Arc<Device>>,
    driver: Box<dyn Driver>,
    factory: Factory,
    liveness: Liveness,
    /// Between a panic and the restart of the driver.
    backoff: Backoff,
    /// The worker's clock (injected in tests).
    now: Now,
    /// Failed (panicked, or could not be rebuilt) since the last success.
    failing: bool,
    /// The driver's webhooks are in place for this online period.
    hooks_synced: bool,
    inbox: Arc<HookInbox>,
    /// The other devices' outputs, for `RequiresOutput` across devices.
    peers: Arc<Peers>,
    /// Whether a probe or sensor of this device waits on another device's output.
    remote_gated: bool,
    /// Whether the supervisor retries offline devices in the background.
    refreshes: bool,
    slot: Slot,
    /// Given to the driver for the first contact only.
    follow: Option<Arc<crate::plan::Follow>>,
    events: Option<Events>,
    /// The channel of the command being run: where a profile change it brings to light was noticed.
    noticed_by: crate::event::EventChannel,
    /// The first contact at open is over (what it found about the profile was planned, not a change).
    contacted: bool,
    /// The MAC rule's state.
    identity: Identity,
    /// Set for a device that sleeps between reports.
    sleep: Option<Sleep>,
    /// A firmware update was started and is not finished: the device going offline is its restart.
    updating: bool,
}

impl State {
    /// Publishes the device; the snapshot it replaces is kept as the spare (freed outside the lock otherwise).
    fn publish(&mut self) {
        let before = std::mem::replace(
            &mut *self.slot.write().unwrap_or_else(|e| e.into_inner()),
            Arc::clone(&self.device),
        );
        if !Arc::ptr_eq(&before, &self.device) {
            self.spare = Some(before);
        }
    }

    /// The worker's life: the first contact, then each command until the controller closes. Each runs in a
    /// function of its own, never inlined: a thread keeps every stack page it touched, so the deepest call
    /// decides its memory (with every command in one frame of 4.6 KiB a worker kept 16 KiB; now the first
    /// contact stays within the 8 KiB a bare thread keeps: ARCHITECTURE.md, BENCHMARKS.md step 31).
    fn run(
        mut self: Box<Self>,
        rx: Receiver<Command>,
        bell: &Bell,
        started: Sender<(i64, Result<()>)>,
    ) {
        self.first_contact(started);
        self.serve(&rx, bell);
    }

    /// Each command until the controller closes; a frame of its own, so that the first contact does not run
    /// on top of the commands' frame.
    #[inline(never)]
    fn serve(&mut self, rx: &Receiver<Command>, bell: &Bell) {
        // The loop ends when every sender is gone: the controller is closing.
        loop {
            // One slot for the command throughout (not a copy per step): this frame is under every read.
            let mut slot = next_command(rx, bell);
            if slot.is_none() {
                break;
            }
            self.prelude(&mut slot);
            match slot {
                None => {}
                // What every round brings, each in a small frame: `handle`'s holds every other command's.
                Some(Command::Refresh { reply, pre }) => self.refresh(reply, pre),
                Some(Command::Tick) => self.tick(),
                Some(Command::Hook) => {
                    self.take_hooks();
                }
                Some(Command::Switch {
                    index,
                    action,
                    reply,
                }) => self.switch(index, action, reply),
                Some(cmd) => self.handle(cmd),
            }
            if self.driver.went_deep() {
                release_stack();
            }
        }
    }

    /// Open's read of the device; its outcome goes to `started`.
    #[inline(never)]
    fn first_contact(&mut self, started: Sender<(i64, Result<()>)>) {
        // The first contact is quick (one attempt per request): open must not wait on dead devices. Where the
        // configuration left the shape open, the profile it finds decides the components, then never again.
        self.driver.set_quick(true);
        self.driver.follow(self.follow.take());
        let result = self.op(true, |dev, drv| drv.read(dev));
        self.driver.follow(None);
        self.driver.set_quick(false);
        // From now on a profile change is news.
        self.contacted = true;
        if let Err(e) = &result
            && !self.device.online
        {
            self.offline_at_start(e);
        }
        report(started, self.device.id, result);
    }

    /// No transition happened (it starts offline), but an unreachable device at start deserves a word. Out of
    /// line, as every rarely taken branch on the worker's first contact: its deepest frame decides how much of
    /// every worker's stack stays resident.
    #[cold]
    #[inline(never)]
    fn offline_at_start(&self, e: &Error) {
        let d = &self.device;
        let retry = if self.refreshes {
            "; retrying in the background"
        } else {
            ""
        };
        if d.expect_offline {
            log::debug!(
                "device {} is offline at start (expected): {}",
                d.label(),
                e.reason()
            );
        } else {
            log::warn!(
                "device {} is offline at start: {}{retry}",
                d.label(),
                e.reason()
            );
        }
    }

    /// What comes before any command: events left in the inbox, which channel noticed what it brings, and a
    /// sleeping device's answer (the command is consumed: `slot` is left empty).
    #[inline(never)]
    fn prelude(&mut self, slot: &mut Option<Command>) {
        let Some(mut cmd) = slot.take() else {
            return;
        };
        if !matches!(cmd, Command::Hook) {
            // Events whose wake-up did not fit the inbox must not wait for the next event.
            let took = self.take_hooks();
            if took && let Command::Refresh { pre, .. } = &mut cmd {
                // States that came since the read was sent ahead may be newer than its answer: read anew.
                *pre = None;
            }
        }
        self.noticed_by = match cmd {
            Command::Hook if self.events.as_ref().is_some_and(|e| e.push) => {
                crate::event::EventChannel::Push
            }
            Command::Hook => crate::event::EventChannel::Webhook,
            _ => crate::event::EventChannel::Read,
        };
        if self.sleep.is_some()
            && matches!(cmd, Command::Tick | Command::Refresh { reply: None, .. })
        {
            // Never polled, asleep or overdue: only whether it missed its period.
            let _ = self.op(false, |_, _| Ok(()));
            return;
        }
        if let Some(refused) = self.asleep() {
            // A sleeping device answers nobody: refused at once, not after a timeout.
            match cmd {
                Command::Refresh {
                    reply: Some(reply), ..
                } => {
                    let _ = reply.send(Err(refused));
                    return;
                }
                Command::Switch { reply, .. } => {
                    let _ = reply.send(Err(refused));
                    return;
                }
                Command::Cover { reply, .. } => {
                    let _ = reply.send(Err(refused));
                    return;
                }
                Command::Light { reply, .. } => {
                    let _ = reply.send(Err(refused));
                    return;
                }
                // Updating a sleeping device is not supported: it would have to be awake throughout.
                Command::Firmware(op) => {
                    op.refuse(refused);
                    return;
                }
                Command::Energy(ask) => {
                    let _ = ask.reply.send(Err(refused));
                    return;
                }
                Command::Refresh { reply: None, .. }
                | Command::Tick
                | Command::Hook
                | Command::Moved { .. } => {}
            }
        }
        *slot = Some(cmd);
    }

    /// A read; its result goes to `reply` when a caller waits for it.
    #[inline(never)]
    fn refresh(&mut self, reply: Option<Sender<Result<()>>>, pre: Option<PreRead>) {
        let r = self.op(true, |dev, drv| match pre {
            Some(pre) => drv.read_sent(dev, pre),
            None => drv.read(dev),
        });
        if let Some(reply) = reply {
            answer(reply, r);
        }
    }

    /// The supervisor's periodic read: an offline device is read only when worth it (its back-off).
    #[inline(never)]
    fn tick(&mut self) {
        let liveness = self.liveness.clone();
        let _ = self.op(true, |dev, drv| {
            if dev.online || liveness.worth_refresh(dev, drv) {
                drv.read(dev)
            } else {
                Err(Error::Offline {
                    device: dev.label(),
                })
            }
        });
    }

    /// Switches output `index`.
    #[inline(never)]
    fn switch(&mut self, index: usize, action: OutputAction, reply: Sender<Result<OutputChange>>) {
        let began = Instant::now();
        let r = self.confirm_identity().and_then(|()| {
            self.op(false, |dev, drv| {
                if index >= dev.outputs.len() {
                    return Err(no_channel("output", index, dev));
                }
                drv.switch(dev, index, action)
            })
        });
        if r.is_ok() {
            self.forget_older(index, began);
        }
        // The caller may have given up; that is not an error here.
        let _ = reply.send(r);
    }

    /// Moves cover `index`.
    #[inline(never)]
    fn cover(&mut self, index: usize, action: CoverAction, reply: Sender<Result<Cover>>) {
        let r = self.confirm_identity().and_then(|()| {
            self.op(false, |dev, drv| {
                if index >= dev.covers.len() {
                    return Err(no_channel("cover", index, dev));
                }
                drv.cover(dev, index, action)?;
                Ok(dev.covers[index].clone())
            })
        });
        let _ = reply.send(r);
    }

    /// Changes light `index`.
    #[inline(never)]
    fn light(
        &mut self,
        index: usize,
        change: crate::light::LightChange,
        reply: Sender<Result<Output>>,
    ) {
        let began = Instant::now();
        // A refusal sends nothing: not even the identity check a failure would cost later.
        let checked = self.driver.check_light(&self.device, index, &change);
        let r = checked
            .and_then(|()| self.confirm_identity())
            .and_then(|()| {
                self.op(false, |dev, drv| {
                    if index >= dev.outputs.len() {
                        return Err(no_channel("output", index, dev));
                    }
                    drv.light(dev, index, &change)?;
                    Ok(dev.outputs[index].clone())
                })
            });
        if r.is_ok() {
            self.forget_older(index, began);
        }
        let _ = reply.send(r);
    }

    /// After a command set output `index` (begun at `began`): a pushed or hooked state of it that came before
    /// the device's answer is older than what the answer said, and must not overwrite it. (Over a push
    /// connection the notification of an earlier switch can arrive after the next command began.)
    fn forget_older(&self, index: usize, began: Instant) {
        let answered = self.driver.answered_at().map_or(began, |a| a.max(began));
        self.inbox
            .forget_older(crate::objects::ComponentKind::Output, index, answered);
    }

    /// Any other command.
    #[inline(never)]
    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Refresh { reply, pre } => self.refresh(reply, pre),
            Command::Hook => {
                self.take_hooks();
            }
            Command::Moved { host, port } => self.move_to(host, port),
            Command::Firmware(op) => self.firmware(op),
            Command::Energy(ask) => {
                let r = if self.driver.keeps_history(ask.meter) {
                    self.op(false, |dev, drv| {
                        drv.energy_history(dev, ask.meter, (ask.from, ask.to))
                    })
                } else {
                    // Not the device's failure: its LastError stays as it is.
                    Err(crate::driver::no_history(&self.device, ask.meter))
                };
                let _ = ask.reply.send(r);
            }
            Command::Tick => self.tick(),
            Command::Switch {
                index,
                action,
                reply,
            } => self.switch(index, action, reply),
            Command::Cover {
                index,
                action,
                reply,
            } => self.cover(index, action, reply),
            Command::Light {
                index,
                change,
                reply,
            } => self.light(index, change, reply),
        }
    }

    /// The error for a command, when the device sleeps between reports and is within its period.
    fn asleep(&self) -> Option<Error> {
        (self.sleep.is_some() && self.device.sleeping).then(|| Error::Sleeping {
            device: self.device.label(),
            last_seen: self.device.last_seen.clone(),
        })
    }

    /// A sleeping device after an operation: a read that succeeded is a report (`LastSeen`); it stays online
    /// and `Sleeping` while its silence is within the allowed one, else it is offline (logged as usual). A
    /// foreign device at its address (the MAC rule) is offline at once.
    fn settle_sleep(&mut self, heard: bool, foreign: bool) {
        let Some(s) = &mut self.sleep else {
            return;
        };
        let now = (self.now)();
        if heard {
            s.heard = now;
        }
        let d = &self.device;
        let period = s
            .period
            .or(d.wakeup_period.map(Duration::from_secs))
            .unwrap_or(crate::sleep::DEFAULT_PERIOD);
        let silent = now.saturating_duration_since(s.heard);
        let within = !foreign && silent <= crate::sleep::allowed_silence(period);
        let error = if foreign {
            d.last_error.clone()
        } else if within {
            // Not answering between reports is what it does.
            None
        } else {
            Some(format!(
                "no report for {} (it reports every {}; offline after {})",
                crate::clock::human_duration(silent),
                crate::clock::human_duration(period),
                crate::clock::human_duration(crate::sleep::allowed_silence(period))
            ))
        };
        if !heard && d.sleeping == within && d.online == within && d.last_error == error {
            return;
        }
        let dev = writable(&mut self.device, &mut self.spare);
        if heard {
            dev.last_seen = Some(crate::clock::rfc3339_now());
        }
        dev.sleeping = within;
        dev.online = within;
        dev.last_error = error;
    }

    /// Before a switch or a move: after any failure (and at the start), a read first shows that the device at
    /// the address is this device (its MAC); a foreign or silent device gets no command.
    #[inline(never)]
    fn confirm_identity(&mut self) -> Result<()> {
        let now = (self.now)();
        let fresh = self
            .identity
            .confirmed_at
            .is_some_and(|at| now.saturating_duration_since(at) < IDENTITY_FRESH);
        if self.identity.confirmed && (fresh || self.device.simulate || self.driver.pinned()) {
            return Ok(());
        }
        self.op(true, |dev, drv| drv.read(dev))
    }

    /// Follows a device configured with a `MAC` to where discovery found it. The address is only a hint: a
    /// driver built for it reads the device into a scratch copy first, and only the configured MAC answering
    /// there moves the device (nothing else that answers is taken). Then the new driver replaces the old one
    /// (its webhooks are synced again, with the callback address towards the new address), the move is
    /// logged once, and a normal read publishes the device at its new address.
    #[inline(never)]
    fn move_to(&mut self, host: String, port: u16) {
        let expected = match self.identity.expected {
            Some(m) if self.identity.configured && !self.device.simulate => m,
            _ => return,
        };
        if self.device.address.as_deref() == Some(host.as_str()) && self.device.port == port {
            return;
        }
        if self.device.online && self.identity.confirmed {
            // It answers where it is; a stale hint must not move it.
            return;
        }
        let label = self.device.label();
        let built = catch_unwind(AssertUnwindSafe(|| (self.factory)(Some(&host), port)));
        let mut driver = match built {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                log::debug!(
                    "device {label}: no driver for {host}:{port}: {}",
                    e.reason()
                );
                return;
            }
            Err(p) => {
                log::debug!(
                    "device {label}: no driver for {host}:{port}: {}",
                    panic_message(&*p)
                );
                return;
            }
        };
        // Not through a live push connection to the old address (another device may answer there now).
        driver.moved();
        let mut probe = (*self.device).clone();
        probe.mac_address = None;
        probe.address = Some(host.clone());
        probe.port = port;
        let seen = catch_unwind(AssertUnwindSafe(|| {
            driver.set_quick(true);
            let r = driver.read(&mut probe);
            driver.set_quick(false);
            r.ok()
                .and(probe.mac_address.as_deref())
                .and_then(|m| crate::mac::Mac::parse(m).ok())
        }))
        .ok()
        .flatten();
        let to = show_address(&host, port);
        if seen != Some(expected) {
            let what = seen.map_or("no MAC (no answer)".to_string(), |m| m.to_string());
            log::debug!(
                "device {label}: discovery saw {expected} at {to}, but it answers with {what} there: not moved"
            );
            return;
        }
        let from = self
            .device
            .address
            .as_deref()
            .map(|h| show_address(h, self.device.port));
        match from {
            Some(from) => log::info!("{} moved from {from} to {to}", self.device.name),
            None => log::info!("{} found at {to} (by its MAC {expected})", self.device.name),
        }
        self.driver = driver;
        self.hooks_synced = false;
        self.identity.confirmed = false;
        self.identity.foreign = false;
        let dev = writable(&mut self.device, &mut self.spare);
        dev.address = Some(host);
        dev.port = port;
        // Offline until this read: the read below forgets what was learnt at the old address.
        dev.online = false;
        // Published before the push channel is told, so it connects to the new address.
        self.publish();
        self.driver.moved();
        let _ = self.op(true, |dev, drv| drv.read(dev));
    }

    /// A firmware update's step (see `FirmwareOp`).
    #[inline(never)]
    fn firmware(&mut self, op: FirmwareOp) {
        match op {
            FirmwareOp::Check(reply) => {
                let r = self.op(false, |dev, drv| drv.check_firmware(dev));
                let _ = reply.send(r);
            }
            FirmwareOp::Start(channel, reply) => {
                let r = self
                    .confirm_identity()
                    .and_then(|()| self.op(false, |dev, drv| drv.start_update(dev, channel)));
                if r.is_ok() {
                    self.updating = true;
                }
                let _ = reply.send(r);
            }
            FirmwareOp::Poll(reply) => {
                // While it restarts every look fails: one attempt each, the caller polls again.
                self.driver.set_quick(true);
                let r = self.op(false, |dev, drv| drv.firmware_state(dev));
                self.driver.set_quick(false);
                let _ = reply.send(r);
            }
            FirmwareOp::Finish(reply) => {
                // New firmware: what the device said about itself (version, methods, add-ons) is learnt again.
                self.driver.forget();
                self.hooks_synced = false;
                self.identity.confirmed = false;
                let r = self.op(true, |dev, drv| drv.read(dev));
                self.updating = false;
                let _ = reply.send(r);
            }
        }
    }

    /// Applies the webhook events waiting in the inbox (and reads the device if one asked for it); whether
    /// there were any.
    #[inline(never)]
    fn take_hooks(&mut self) -> bool {
        let (mut states, mut read) = self.inbox.take();
        let mut measures = self.inbox.take_measures();
        let took = !states.is_empty() || read || !measures.is_empty();
        if self.identity.foreign && !(states.is_empty() && measures.is_empty()) {
            // States a foreign device sent are not this device's: only a read, which checks the MAC again.
            states.clear();
            measures.clear();
            read = true;
        }
        if !measures.is_empty() {
            // Values a CoIoT status brought (no read): the worker writes them like any state.
            let _ = self.op(false, |dev, _| {
                for &(what, channel, v) in &measures {
                    what.apply(dev, channel, v);
                }
                dev.update_totals();
                Ok(())
            });
        }
        if !states.is_empty() || read {
            self.noticed_by = match &self.events {
                Some(e) if e.push => crate::event::EventChannel::Push,
                _ => crate::event::EventChannel::Webhook,
            };
        }
        if !states.is_empty() && read && self.device.online {
            // Published before the read: a pushed or hooked switch is visible at once, not one round trip later.
            let _ = self.op(false, |dev, drv| drv.hook(dev, &states, false));
            let _ = self.op(true, |dev, drv| drv.hook(dev, &[], true));
        } else if !states.is_empty() || read {
            let _ = self.op(read, |dev, drv| drv.hook(dev, &states, read));
        }
        took
    }

    /// Runs one driver operation, records its outcome on the device, logs Online transitions and publishes.
    /// A panic marks the device offline; the driver is rebuilt on the first command after the back-off.
    /// `reads` marks operations that read the device: after a successful one the webhooks are synced.
    /// Never inlined: inlined into each arm of `run`, its copies made `run`'s frame 4.6 KiB, a page of every
    /// worker's stack resident for good.
    #[inline(never)]
    fn op<T>(
        &mut self,
        reads: bool,
        f: impl FnOnce(&mut Device, &mut dyn Driver) -> Result<T>,
    ) -> Result<T> {
        let was_online = self.device.online;
        let was_profile = self.device.profile.clone();
        let result = match self.backoff.gate() {
            Gate::Wait(message) => Err(self.waiting(message)),
            Gate::Restart => match self.rebuild_driver() {
                Ok(()) => self.run_driver(reads, f),
                Err(e) => Err(e),
            },
            Gate::Run => self.run_driver(reads, f),
        };
        self.after_op(reads, result.as_ref().err(), was_online, was_profile);
        result
    }

    /// What follows every operation: peers' reports, the last error, sleep, the Online transition, the new
    /// snapshot, a profile change. Out of line, as in [`After`].
    #[inline(never)]
    fn after_op(
        &mut self,
        reads: bool,
        error: Option<&Error>,
        was_online: bool,
        was_profile: Option<String>,
    ) {
        if self.remote_gated && reads {
            self.gate_by_peers();
        }
        let dev = writable(&mut self.device, &mut self.spare);
        dev.last_error = error.map(Error::reason);
        let foreign = matches!(error, Some(Error::WrongDevice { .. }));
        self.settle_sleep(reads && error.is_none(), foreign);
        self.log_transition(was_online);
        self.publish();
        if self.device.profile != was_profile && self.contacted {
            // Switching the profile deletes the device's webhooks: install them again at the next read.
            self.hooks_synced = false;
            self.profile_changed(was_profile);
        }
    }

    /// The error for an operation while the back-off after a failure lasts.
    #[cold]
    #[inline(never)]
    fn waiting(&self, message: String) -> Error {
        Error::WorkerFailed {
            device: self.device.label(),
            message,
        }
    }

    /// A new driver once the back-off after a failure has passed.
    #[cold]
    #[inline(never)]
    fn rebuild_driver(&mut self) -> Result<()> {
        match catch_unwind(AssertUnwindSafe(|| {
            (self.factory)(self.device.address.as_deref(), self.device.port)
        })) {
            Ok(Ok(driver)) => {
                self.driver = driver;
                log::debug!("device {}: driver rebuilt", self.device.label());
                Ok(())
            }
            Ok(Err(e)) => Err(self.failed(e.to_string())),
            Err(payload) => Err(self.failed(panic_message(&*payload))),
        }
    }

    /// Peers' reports about this device's address, against what it was before the read.
    #[inline(never)]
    fn gate_by_peers(&mut self) {
        let before = Arc::clone(&self.slot.read().unwrap_or_else(|e| e.into_inner()));
        self.peers
            .gate(writable(&mut self.device, &mut self.spare), &before);
    }

    /// The device reports another profile than before (switched in the vendor app while we run): the driver
    /// logged it and set `ConfigMismatch`; the application hears of it as an event too.
    fn profile_changed(&self, was: Option<String>) {
        let Some(events) = &self.events else {
            return;
        };
        let d = &self.device;
        let mut params = crate::objects::Attributes::new();
        params.insert("Profile".into(), d.profile.clone().into());
        params.insert("PreviousProfile".into(), was.into());
        params.insert("ConfigMismatch".into(), d.config_mismatch.clone().into());
        events.queue.push(crate::event::WebhookEvent {
            event: crate::event::PROFILE_CHANGED.into(),
            device: d.name.clone(),
            device_id: Some(d.id),
            object_type: Some("device".into()),
            received_at: crate::clock::rfc3339_now(),
            source: d.address.clone().unwrap_or_default(),
            params,
            channel: self.noticed_by,
            ..crate::event::WebhookEvent::default()
        });
        if let Some(w) = &events.wake {
            w.set();
        }
    }

    /// Calls the driver, turning a panic into a failure. The worker decides `Online` from what the driver saw
    /// (a device that answered at all is reachable); before talking to a device that was offline, the driver
    /// forgets what the device said about itself, and its webhooks are synced again.
    fn run_driver<T>(
        &mut self,
        reads: bool,
        f: impl FnOnce(&mut Device, &mut dyn Driver) -> Result<T>,
    ) -> Result<T> {
        // What the device was before this operation: a foreign device's answer is undone to this.
        let before = Arc::clone(&self.device);
        let dev = writable(&mut self.device, &mut self.spare);
        let driver = &mut *self.driver;
        // A sleeping device is set up (hooks, outbound WebSocket) only at its first contact, if it is awake
        // then: its reports come from the outbound socket, and it is asleep again by the time we would ask.
        let mut no_sync = self.sleep.is_some() && self.contacted;
        let synced = if no_sync {
            &mut no_sync
        } else {
            &mut self.hooks_synced
        };
        let identity = &mut self.identity;
        let now = &self.now;
        if !dev.online {
            driver.forget();
            *synced = false;
            identity.confirmed = false;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let r = f(dev, driver);
            let after = After {
                identity,
                before: &before,
                synced,
                now,
                reads,
            };
            after.settle(dev, driver, r)
        }));
        match outcome {
            Ok(r) => {
                if r.is_ok() {
                    self.backoff.succeeded();
                    if std::mem::take(&mut self.failing) {
                        self.works_again();
                    }
                }
                r
            }
            Err(payload) => {
                self.identity.confirmed = false;
                Err(self.failed(panic_message(&*payload)))
            }
        }
    }

    /// A driver rebuilt after a failure answered: said once.
    #[cold]
    #[inline(never)]
    fn works_again(&self) {
        log::info!(
            "device {}: the rebuilt driver works again",
            self.device.label()
        );
    }

    /// Takes the device offline until the back-off passes. Only the first failure in a row is logged above
    /// debug, so a driver that panics on every answer cannot flood the log.
    #[cold]
    #[inline(never)]
    fn failed(&mut self, message: String) -> Error {
        let message = crate::text::clip(&message, 200);
        let first_in_a_row = !std::mem::replace(&mut self.failing, true);
        let delay = self.backoff.panicked(message.clone());
        let dev = writable(&mut self.device, &mut self.spare);
        let text = format!(
            "device {}: worker failed: {message}; the device is offline and its driver restarts in {:.0} s (please report this)",
            dev.label(),
            delay.as_secs_f64()
        );
        if first_in_a_row {
            log::error!("{text}");
        } else {
            log::debug!("{text}");
        }
        dev.online = false;
        Error::WorkerFailed {
            device: dev.label(),
            message,
        }
    }

    /// Logs each Online change once: a warning for an unexpected loss, nothing above debug for devices that
    /// are expected to go offline.
    fn log_transition(&self, was_online: bool) {
        let d = &self.device;
        if was_online == d.online {
            return;
        }
        let why = d.last_error.as_deref().unwrap_or("no answer");
        if self.updating {
            // Expected: the device restarts into its new firmware.
            if d.online {
                log::info!("device {} is online", d.label());
            } else {
                log::info!(
                    "device {} is restarting for its firmware update: {why}",
                    d.label()
                );
            }
            return;
        }
        match (d.online, d.expect_offline) {
            (true, false) => log::info!("device {} is online", d.label()),
            (true, true) => log::debug!("device {} is online", d.label()),
            (false, false) => log::warn!("device {} went offline: {why}", d.label()),
            (false, true) => log::debug!("device {} is offline (expected): {why}", d.label()),
        }
    }
}

/// The MAC rule after a driver operation. The drivers store the MAC a device reports (every status read
/// carries it); when it is not the expected one, the device at the address is another device: `dev` goes back
/// to what it was before the operation (nothing of the foreign device is kept), offline, and the operation
/// fails with [`Error::WrongDevice`]. A successful read with the expected MAC (or the first MAC of a device
/// with none configured, which becomes its identity) confirms the device, and switches may be sent again.
/// What [`State::run_driver`] settles once the driver is done: reach, identity, webhooks. Out of line, so none
/// of it is in the frame under the driver's call (the deepest frame decides how much of every worker's stack
/// stays resident).
struct After<'a> {
    identity: &'a mut Identity,
    before: &'a Device,
    synced: &'a mut bool,
    now: &'a Now,
    reads: bool,
}

impl After<'_> {
    #[inline(never)]
    fn settle<T>(self, dev: &mut Device, driver: &mut dyn Driver, r: Result<T>) -> Result<T> {
        let identity = self.identity;
        if let Some(reached) = driver.reach() {
            dev.online = reached;
            if !reached {
                identity.confirmed = false;
            }
        }
        let r = check_identity(identity, self.before, dev, driver, self.reads, r);
        if self.reads && identity.confirmed {
            identity.confirmed_at = Some((self.now)());
        }
        if self.reads && r.is_ok() && dev.online && !*self.synced {
            sync_hooks(driver, dev, self.synced);
        }
        r
    }
}

/// Gives back the worker's stack pages below the serving loop after a command that went deep (the generic
/// RPC call): a worker keeps two pages through its reads, and one command or its first read's webhook list
/// would otherwise keep it a page larger for good (4 KiB per device).
#[cold]
#[inline(never)]
fn release_stack() {
    if let Some(bottom) = crate::ffi::thread::stack_bottom() {
        // What this call and the system call need stays: 1 KiB under this frame.
        crate::ffi::thread::release_stack_below(bottom, 1024);
    }
}

/// A read's outcome to its caller, out of line like [`report`].
#[inline(never)]
fn answer(reply: Sender<Result<()>>, r: Result<()>) {
    let _ = reply.send(r);
}

/// The first contact's outcome to `open`. Out of line, so the channel's sending code adds nothing to the frame
/// the first contact holds while it reads.
#[inline(never)]
fn report(started: Sender<(i64, Result<()>)>, id: i64, result: Result<()>) {
    let _ = started.send((id, result));
}

/// Installs the driver's webhooks once per online period. Installation problems never fail the refresh; they
/// are logged and retried next time.
#[inline(never)]
fn sync_hooks(driver: &mut dyn Driver, dev: &mut Device, synced: &mut bool) {
    match driver.sync_hooks(dev) {
        Ok(()) => *synced = true,
        Err(e) => log::warn!(
            "device {}: webhooks not installed yet: {}",
            dev.label(),
            e.reason()
        ),
    }
    if let Some(reached) = driver.reach() {
        dev.online = reached;
    }
}

#[inline(never)]
fn check_identity<T>(
    identity: &mut Identity,
    before: &Device,
    dev: &mut Device,
    driver: &mut dyn Driver,
    reads: bool,
    r: Result<T>,
) -> Result<T> {
    if before.simulate {
        // A simulation file has no address another device could take: its MacAddress is what it says.
        identity.confirmed = true;
        return r;
    }
    let seen = dev
        .mac_address
        .as_deref()
        .and_then(|m| crate::mac::Mac::parse(m).ok());
    match (seen, identity.expected) {
        (Some(seen), Some(expected)) if seen != expected => {
            let address = match (&before.address, before.port) {
                (Some(h), 80) => h.clone(),
                (Some(h), port) => format!("{h}:{port}"),
                (None, _) => "its address".into(),
            };
            if !identity.foreign {
                log::warn!(
                    "device {}: {address} answers as {seen}, not {expected}: refused (nothing is switched or read from it until {expected} answers there again)",
                    before.label()
                );
            }
            *dev = before.clone();
            dev.online = false;
            identity.confirmed = false;
            identity.foreign = true;
            // Whatever the driver learned there (firmware, profile, hooks) was the other device's.
            driver.forget();
            return Err(Error::WrongDevice {
                device: before.label(),
                address,
                expected: expected.to_string(),
                found: seen.to_string(),
                configured: identity.configured,
            });
        }
        _ => {}
    }
    if reads && r.is_ok() && dev.online {
        if let Some(seen) = seen {
            identity.expected.get_or_insert(seen);
            if std::mem::take(&mut identity.foreign) {
                log::info!(
                    "device {}: {seen} answers at its address again",
                    dev.label()
                );
            }
        }
        identity.confirmed = true;
    } else if r.is_err() {
        identity.confirmed = false;
    }
    r
}

/// `host` with `:port` unless the port is 80 (IPv6 literals in brackets), as log lines show an address.
pub(crate) fn show_address(host: &str, port: u16) -> String {
    match port {
        80 => host.to_string(),
        p => format!("{}:{p}", crate::hostname::url_host(host)),
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Output;

    /// Every command is taken, and the loop ends only when the last of several senders is dropped, however the
    /// drops and the worker's wake-ups interleave (the sender must be gone before its ring).
    #[test]
    fn a_waiting_inbox_takes_every_command_and_ends_with_its_last_sender() {
        for round in 0..300 {
            let (tx, rx) = crossbeam_channel::bounded(8);
            let bell = Arc::new(Bell::default());
            let rings = Arc::clone(&bell);
            let worker = std::thread::spawn(move || {
                let mut n = 0;
                while next_command(&rx, &rings).is_some() {
                    n += 1;
                }
                n
            });
            let a = WorkerTx::new(tx, bell);
            let b = a.clone();
            let c = b.clone();
            for _ in 0..round % 5 {
                a.send(Command::Tick).unwrap();
                let _ = c.try_send(Command::Hook);
            }
            let sent = if round % 2 == 0 {
                drop(a);
                b.send(Command::Tick).unwrap();
                drop(b);
                1
            } else {
                drop(b);
                drop(a);
                0
            };
            drop(c);
            let taken = worker.join().unwrap();
            assert!(taken >= sent + round % 5, "round {round}: {taken} taken");
        }
    }

    /// A sender dropped while others hold the channel (every call's clone, `refresh_all`'s) leaves the worker
    /// asleep; the last one's drop wakes it to find the channel closed.
    #[test]
    fn only_the_last_sender_dropped_rings_the_bell() {
        let (tx, rx) = crossbeam_channel::bounded(8);
        let bell = Arc::new(Bell::default());
        let a = WorkerTx::new(tx, Arc::clone(&bell));
        drop(a.clone());
        assert!(!bell.is_rung(), "a clone's drop woke the worker");
        a.send(Command::Tick).unwrap();
        assert!(bell.is_rung());
        bell.wait();
        assert!(matches!(rx.try_recv(), Ok(Command::Tick)));
        let b = a.clone();
        drop(a);
        assert!(!bell.is_rung(), "the first holder's drop woke the worker");
        drop(b);
        assert!(bell.is_rung());
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
    }

    /// A driver that panics when asked to switch, to prove a panic stays inside its worker.
    struct Exploding;

    impl Driver for Exploding {
        fn read(&mut self, dev: &mut Device) -> Result<()> {
            dev.online = true;
            Ok(())
        }
        fn switch(
            &mut self,
            _dev: &mut Device,
            _index: usize,
            _action: OutputAction,
        ) -> Result<OutputChange> {
            panic!("driver bug")
        }
    }

    fn device() -> Device {
        Device {
            id: 7,
            name: "Boom".into(),
            outputs: vec![Output::default()],
            ..Device::default()
        }
    }

    /// A worker's links with nothing attached, and `mac` as its configured MAC.
    fn links(mac: Option<&str>) -> Links {
        Links {
            liveness: liveness(),
            inbox: Arc::default(),
            peers: Arc::default(),
            refreshes: false,
            follow: None,
            events: None,
            mac: mac.map(|m| crate::mac::Mac::parse(m).unwrap()),
            sleep: None,
        }
    }

    /// A worker of `device()` with `driver`, events coming through `inbox`, once its first contact is done.
    fn started_with_inbox(driver: Box<dyn Driver>, inbox: &Arc<HookInbox>) -> Worker {
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let w = spawn(
            device(),
            driver,
            Box::new(|_, _| unreachable!("no panic here")),
            crate::actor::restart::tests::manual().0,
            Links {
                inbox: Arc::clone(inbox),
                ..links(None)
            },
            started_tx,
        )
        .unwrap();
        started_rx.recv().unwrap().1.unwrap();
        w
    }

    fn liveness() -> Liveness {
        Liveness {
            ping_allowed: false,
            timeout: std::time::Duration::from_secs(1),
            closing: Arc::default(),
        }
    }

    fn send_switch(w: &Worker) -> Result<OutputChange> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        w.tx.send(Command::Switch {
            index: 0,
            action: OutputAction::On,
            reply,
        })
        .unwrap();
        rx.recv().unwrap()
    }

    fn send_refresh(w: &Worker) -> Result<()> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        w.tx.send(Command::Refresh {
            reply: Some(reply),
            pre: None,
        })
        .unwrap();
        rx.recv().unwrap()
    }

    /// A device at an address that another device may take: the MAC it reports and its relay, shared with the
    /// test; `switches` counts the switches that reached it.
    #[derive(Clone, Default)]
    struct Swappable {
        mac: Arc<std::sync::Mutex<String>>,
        relay: Arc<std::sync::atomic::AtomicBool>,
        switches: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Driver for Swappable {
        fn read(&mut self, dev: &mut Device) -> Result<()> {
            dev.mac_address = crate::mac::normalise(&self.mac.lock().unwrap());
            dev.outputs[0].state = Some(self.relay.load(std::sync::atomic::Ordering::SeqCst));
            dev.firmware = Some(format!("fw of {}", self.mac.lock().unwrap()));
            Ok(())
        }
        fn switch(
            &mut self,
            dev: &mut Device,
            _index: usize,
            action: OutputAction,
        ) -> Result<OutputChange> {
            self.switches
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(flip(&self.relay, dev, action))
        }
        fn reach(&mut self) -> Option<bool> {
            Some(true)
        }
    }

    /// A test driver's relay switched as `action` says; the device's first output set to it.
    fn flip(
        relay: &std::sync::atomic::AtomicBool,
        dev: &mut Device,
        action: OutputAction,
    ) -> OutputChange {
        let before = relay.load(std::sync::atomic::Ordering::SeqCst);
        let after = action.apply(before);
        relay.store(after, std::sync::atomic::Ordering::SeqCst);
        dev.outputs[0].state = Some(after);
        OutputChange {
            state: after,
            did_change: before != after,
        }
    }

    fn start_swappable(mac: Option<&str>, drv: &Swappable) -> Worker {
        start_swappable_with(mac, drv, crate::actor::restart::tests::manual().0)
    }

    fn start_swappable_with(mac: Option<&str>, drv: &Swappable, now: Now) -> Worker {
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let w = spawn(
            Device {
                hostname: Some("10.0.0.5".into()),
                address: Some("10.0.0.5".into()),
                port: 80,
                ..device()
            },
            Box::new(drv.clone()),
            Box::new(|_, _| unreachable!("no panic here")),
            now,
            links(mac),
            started_tx,
        )
        .unwrap();
        let _ = started_rx.recv().unwrap();
        w
    }

    /// A change goes into the spare when no reader holds it (brought up to date first), else into a fresh
    /// copy; the published snapshot is never written.
    #[test]
    fn a_change_goes_into_the_spare_only_when_no_reader_holds_it() {
        let mut slot = Arc::new(device());
        let mut device = Arc::clone(&slot);
        let mut spare = None;
        writable(&mut device, &mut spare).name = "one".into();
        assert!(
            !Arc::ptr_eq(&device, &slot),
            "a copy: the published one is shared"
        );
        // Published; the one before becomes the spare.
        spare = Some(std::mem::replace(&mut slot, Arc::clone(&device)));
        let before = Arc::as_ptr(spare.as_ref().unwrap());
        writable(&mut device, &mut spare).outputs[0].state = Some(true);
        assert_eq!(Arc::as_ptr(&device), before, "written into the spare");
        assert!(spare.is_none());
        assert_eq!(device.name, "one", "brought up to date first");
        assert_eq!((slot.name.as_str(), slot.outputs[0].state), ("one", None));
        // Unshared (already written since it was published): written in place.
        writable(&mut device, &mut spare).name = "two".into();
        assert_eq!(Arc::as_ptr(&device), before);
        // A reader holds the spare: it stays as it was, and a fresh copy takes the change.
        spare = Some(std::mem::replace(&mut slot, Arc::clone(&device)));
        let reader = Arc::clone(spare.as_ref().unwrap());
        writable(&mut device, &mut spare).name = "three".into();
        assert!(!Arc::ptr_eq(&device, &reader) && !Arc::ptr_eq(&device, &slot));
        assert_eq!((reader.name.as_str(), slot.name.as_str()), ("one", "two"));
    }

    /// Snapshots that readers hold never change, whichever snapshot a read writes into.
    #[test]
    fn held_snapshots_never_change() {
        use std::sync::atomic::Ordering::SeqCst;
        let drv = Swappable::default();
        *drv.mac.lock().unwrap() = "A8032AB12345".into();
        let w = start_swappable(None, &drv);
        send_refresh(&w).unwrap();
        // A reader holds the current snapshot and the spare: neither is written.
        let held = [snapshot(&w.slot), {
            send_refresh(&w).unwrap();
            snapshot(&w.slot)
        }];
        let before: Vec<Device> = held.iter().map(|d| (**d).clone()).collect();
        drv.relay.store(true, SeqCst);
        send_refresh(&w).unwrap();
        send_refresh(&w).unwrap();
        for (h, b) in held.iter().zip(&before) {
            assert_eq!(**h, *b, "a held snapshot stays as it was");
        }
        let now = snapshot(&w.slot);
        assert!(held.iter().all(|h| !Arc::ptr_eq(h, &now)));
        assert_eq!(now.outputs[0].state, Some(true));
        assert!(held.iter().all(|h| h.outputs[0].state == Some(false)));
        drop(w.tx);
        w.thread.join().unwrap();
    }

    /// Two devices swap addresses (DHCP) and none of our requests failed in between: a switch within the
    /// window of the last read goes out as before; a later one reads first, sees the other MAC, and is refused.
    #[test]
    fn a_switch_after_the_identity_window_reads_first_so_a_silent_swap_switches_nothing() {
        use std::sync::atomic::Ordering::SeqCst;
        let drv = Swappable::default();
        *drv.mac.lock().unwrap() = "A8032AB12345".into();
        let (now, clock) = crate::actor::restart::tests::manual();
        let w = start_swappable_with(Some("A8:03:2A:B1:23:45"), &drv, now);
        assert!(snapshot(&w.slot).online);
        send_switch(&w).unwrap();
        assert_eq!(drv.switches.load(SeqCst), 1, "confirmed by open's read");
        *clock.lock().unwrap() += IDENTITY_FRESH;
        // Another device now answers at the address; nothing failed since the last read.
        *drv.mac.lock().unwrap() = "112233445566".into();
        let err = send_switch(&w).unwrap_err();
        assert!(matches!(err, Error::WrongDevice { .. }), "{err}");
        assert_eq!(
            drv.switches.load(SeqCst),
            1,
            "nothing reached the other device"
        );
        assert!(!snapshot(&w.slot).online);
        // The right device back: its read confirms it, and the switch goes out.
        *drv.mac.lock().unwrap() = "A8032AB12345".into();
        send_switch(&w).unwrap();
        assert_eq!(drv.switches.load(SeqCst), 2);
        drop(w.tx);
        w.thread.join().unwrap();
    }

    #[test]
    fn a_foreign_mac_undoes_its_read_refuses_switches_and_the_right_one_brings_the_device_back() {
        let drv = Swappable::default();
        *drv.mac.lock().unwrap() = "112233445566".into();
        drv.relay.store(true, std::sync::atomic::Ordering::SeqCst);
        let w = start_swappable(Some("A8:03:2A:B1:23:45"), &drv);
        let snap = snapshot(&w.slot);
        assert!(!snap.online);
        assert_eq!(snap.outputs[0].state, None, "nothing of the foreign device");
        assert_eq!(snap.firmware, None);
        assert_eq!(snap.mac_address, None);
        let why = snap.last_error.clone().unwrap();
        assert!(
            why.contains(
                "10.0.0.5 answers as 11:22:33:44:55:66, not the configured A8:03:2A:B1:23:45"
            ),
            "{why}"
        );
        let err = send_switch(&w).unwrap_err();
        assert!(matches!(err, Error::WrongDevice { .. }), "{err}");
        assert_eq!(drv.switches.load(std::sync::atomic::Ordering::SeqCst), 0);

        // The right device answers again: the next read brings it back, and switches go through.
        *drv.mac.lock().unwrap() = "a8-03-2a-b1-23-45".into();
        send_refresh(&w).unwrap();
        let snap = snapshot(&w.slot);
        assert!(snap.online);
        assert_eq!(snap.last_error, None);
        assert_eq!(snap.mac_address.as_deref(), Some("A8:03:2A:B1:23:45"));
        send_switch(&w).unwrap();
        assert_eq!(drv.switches.load(std::sync::atomic::Ordering::SeqCst), 1);
        drop(w.tx);
        w.thread.join().unwrap();
    }

    /// A push connection: the notification of an earlier switch (on) is read after the next command began and
    /// before that command's answer (off). It is older than the answer and must not overwrite it; a state read
    /// after the answer is newer and is taken.
    #[test]
    fn a_state_pushed_before_a_switch_answer_does_not_overwrite_it_and_one_after_does() {
        #[derive(Clone)]
        struct Pushy {
            inbox: Arc<HookInbox>,
            relay: Arc<std::sync::atomic::AtomicBool>,
            answered: Arc<std::sync::Mutex<Option<Instant>>>,
        }
        impl Driver for Pushy {
            fn read(&mut self, dev: &mut Device) -> Result<()> {
                dev.outputs[0].state = Some(self.relay.load(std::sync::atomic::Ordering::SeqCst));
                Ok(())
            }
            fn switch(
                &mut self,
                dev: &mut Device,
                _index: usize,
                action: OutputAction,
            ) -> Result<OutputChange> {
                // The poller reads the earlier switch's notification, then this command's answer.
                self.inbox
                    .post(crate::objects::ComponentKind::Output, 0, Some(true), false);
                *self.answered.lock().unwrap() = Some(Instant::now());
                Ok(flip(&self.relay, dev, action))
            }
            fn answered_at(&self) -> Option<Instant> {
                *self.answered.lock().unwrap()
            }
            fn reach(&mut self) -> Option<bool> {
                Some(true)
            }
        }
        let inbox = Arc::new(HookInbox::default());
        let drv = Pushy {
            inbox: inbox.clone(),
            relay: Arc::new(true.into()),
            answered: Arc::default(),
        };
        let w = started_with_inbox(Box::new(drv.clone()), &inbox);
        let (reply, rx) = crossbeam_channel::bounded(1);
        w.tx.send(Command::Switch {
            index: 0,
            action: OutputAction::Off,
            reply,
        })
        .unwrap();
        assert!(!rx.recv().unwrap().unwrap().state);
        // Dropped before the answer went back: the wake-up it queued finds nothing to apply.
        let (states, _) = inbox.take();
        assert_eq!(states, [], "the older state is gone");
        assert_eq!(snapshot(&w.slot).outputs[0].state, Some(false));
        // Someone presses the button afterwards: that one is taken.
        inbox.post(crate::objects::ComponentKind::Output, 0, Some(true), false);
        w.tx.send(Command::Hook).unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while snapshot(&w.slot).outputs[0].state != Some(true) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(snapshot(&w.slot).outputs[0].state, Some(true));
        drop(w.tx);
        w.thread.join().unwrap();
    }

    /// A read sent ahead (`refresh_all`) is taken as the read, unless states came into the inbox meanwhile:
    /// the worker takes those first, and they may be newer than the read's answer, so it reads anew.
    #[test]
    fn a_read_sent_ahead_is_read_anew_when_states_came_meanwhile() {
        #[derive(Clone, Default)]
        struct Ahead {
            sent: Arc<AtomicUsize>,
            fresh: Arc<AtomicUsize>,
        }
        impl Driver for Ahead {
            fn read(&mut self, _dev: &mut Device) -> Result<()> {
                self.fresh.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            fn read_sent(&mut self, _dev: &mut Device, _pre: PreRead) -> Result<()> {
                self.sent.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            fn switch(
                &mut self,
                _dev: &mut Device,
                _index: usize,
                _action: OutputAction,
            ) -> Result<OutputChange> {
                unreachable!("no switch here")
            }
            fn reach(&mut self) -> Option<bool> {
                Some(true)
            }
        }
        let inbox = Arc::new(HookInbox::default());
        let drv = Ahead::default();
        let w = started_with_inbox(Box::new(drv.clone()), &inbox);
        let fresh = drv.fresh.load(Ordering::SeqCst);
        let refresh = |w: &Worker| {
            let (reply, rx) = crossbeam_channel::bounded(1);
            w.tx.send(Command::Refresh {
                reply: Some(reply),
                pre: Some(PreRead::unsent()),
            })
            .unwrap();
            rx.recv().unwrap().unwrap();
        };
        refresh(&w);
        assert_eq!(drv.sent.load(Ordering::SeqCst), 1, "taken as the read");
        assert_eq!(drv.fresh.load(Ordering::SeqCst), fresh);
        inbox.post(crate::objects::ComponentKind::Output, 0, Some(true), false);
        refresh(&w);
        assert_eq!(drv.sent.load(Ordering::SeqCst), 1);
        assert_eq!(drv.fresh.load(Ordering::SeqCst), fresh + 1, "read anew");
        drop(w.tx);
        w.thread.join().unwrap();
    }

    #[test]
    fn without_a_configured_mac_the_first_one_is_the_identity_and_hook_states_of_a_foreign_device_are_dropped()
     {
        let drv = Swappable::default();
        *drv.mac.lock().unwrap() = "A8032AB12345".into();
        let inbox = Arc::new(HookInbox::default());
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let w = spawn(
            Device {
                hostname: Some("10.0.0.5".into()),
                address: Some("10.0.0.5".into()),
                port: 8080,
                ..device()
            },
            Box::new(drv.clone()),
            Box::new(|_, _| unreachable!("no panic here")),
            crate::actor::restart::tests::manual().0,
            Links {
                liveness: liveness(),
                inbox: inbox.clone(),
                peers: Arc::default(),
                refreshes: false,
                follow: None,
                events: None,
                mac: None,
                sleep: None,
            },
            started_tx,
        )
        .unwrap();
        started_rx.recv().unwrap().1.unwrap();
        assert_eq!(snapshot(&w.slot).outputs[0].state, Some(false));

        *drv.mac.lock().unwrap() = "11:22:33:44:55:66".into();
        let err = send_refresh(&w).unwrap_err();
        assert!(
            err.to_string().contains(
                "10.0.0.5:8080 answers as 11:22:33:44:55:66, not A8:03:2A:B1:23:45 as it did before"
            ),
            "{err}"
        );
        // A webhook from the foreign device says the relay is on: not taken.
        inbox.post(crate::objects::ComponentKind::Output, 0, Some(true), false);
        w.tx.send(Command::Hook).unwrap();
        let _ = send_refresh(&w);
        let snap = snapshot(&w.slot);
        assert!(!snap.online);
        assert_eq!(
            snap.outputs[0].state,
            Some(false),
            "the last known state stays"
        );
        assert!(send_switch(&w).is_err());
        assert_eq!(drv.switches.load(std::sync::atomic::Ordering::SeqCst), 0);
        drop(w.tx);
        w.thread.join().unwrap();
    }

    /// Two devices at two addresses; the factory builds a driver for whichever address it is given.
    fn start_movable(mac: Option<&str>, at: &[(&str, &Swappable)]) -> Worker {
        let drivers: Vec<(String, Swappable)> = at
            .iter()
            .map(|(h, d)| (h.to_string(), (*d).clone()))
            .collect();
        let first = drivers[0].1.clone();
        let factory: Factory = Box::new(move |host, _| {
            let d = drivers
                .iter()
                .find(|(h, _)| Some(h.as_str()) == host)
                .map(|(_, d)| d.clone())
                .expect("a known address");
            Ok(Box::new(d) as Box<dyn Driver>)
        });
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let w = spawn(
            Device {
                hostname: Some(at[0].0.into()),
                address: Some(at[0].0.into()),
                port: 80,
                ..device()
            },
            Box::new(first),
            factory,
            crate::actor::restart::tests::manual().0,
            links(mac),
            started_tx,
        )
        .unwrap();
        let _ = started_rx.recv().unwrap();
        w
    }

    fn moved(w: &Worker, host: &str) {
        w.tx.send(Command::Moved {
            host: host.into(),
            port: 80,
        })
        .unwrap();
        // Commands run in order: the refresh's answer comes after the move was handled.
        let _ = send_refresh(w);
    }

    #[test]
    fn a_move_hint_is_followed_only_where_the_configured_mac_answers() {
        let (old, other, new) = (
            Swappable::default(),
            Swappable::default(),
            Swappable::default(),
        );
        *old.mac.lock().unwrap() = "112233445566".into();
        *other.mac.lock().unwrap() = "665544332211".into();
        *new.mac.lock().unwrap() = "A8032AB12345".into();
        let w = start_movable(
            Some("A8:03:2A:B1:23:45"),
            &[("10.0.0.5", &old), ("10.0.0.6", &other), ("10.0.0.9", &new)],
        );
        assert!(!snapshot(&w.slot).online, "another MAC at its address");

        // A hint to where another MAC answers: not moved, nothing switched there.
        moved(&w, "10.0.0.6");
        assert_eq!(snapshot(&w.slot).address.as_deref(), Some("10.0.0.5"));
        assert!(send_switch(&w).is_err());
        assert_eq!(other.switches.load(std::sync::atomic::Ordering::SeqCst), 0);

        // Where its MAC answers: moved, online, and switches go there.
        moved(&w, "10.0.0.9");
        let snap = snapshot(&w.slot);
        assert_eq!(snap.address.as_deref(), Some("10.0.0.9"));
        assert_eq!(snap.hostname.as_deref(), Some("10.0.0.5"), "as configured");
        assert!(snap.online, "{:?}", snap.last_error);
        send_switch(&w).unwrap();
        assert_eq!(new.switches.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(old.switches.load(std::sync::atomic::Ordering::SeqCst), 0);

        // A stale hint while it answers where it is: ignored.
        moved(&w, "10.0.0.5");
        assert_eq!(snapshot(&w.slot).address.as_deref(), Some("10.0.0.9"));
        drop(w.tx);
        w.thread.join().unwrap();
    }

    #[test]
    fn a_device_without_a_configured_mac_never_moves() {
        let (old, new) = (Swappable::default(), Swappable::default());
        *old.mac.lock().unwrap() = "A8032AB12345".into();
        *new.mac.lock().unwrap() = "A8032AB12345".into();
        let w = start_movable(None, &[("10.0.0.5", &old), ("10.0.0.9", &new)]);
        // Its address is the identity the user gave, even when the MAC it reported answers elsewhere.
        *old.mac.lock().unwrap() = "112233445566".into();
        let _ = send_refresh(&w);
        moved(&w, "10.0.0.9");
        let snap = snapshot(&w.slot);
        assert_eq!(snap.address.as_deref(), Some("10.0.0.5"));
        assert!(!snap.online);
        drop(w.tx);
        w.thread.join().unwrap();
    }

    #[test]
    fn a_panic_takes_the_device_offline_until_a_fresh_driver_takes_over_after_the_back_off() {
        let built = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = built.clone();
        let factory: Factory = Box::new(move |_, _| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Box::new(Exploding) as Box<dyn Driver>)
        });
        let (now, clock) = crate::actor::restart::tests::manual();
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let w = spawn(
            device(),
            Box::new(Exploding),
            factory,
            now,
            Links {
                liveness: liveness(),
                inbox: Arc::default(),
                peers: Arc::default(),
                refreshes: false,
                follow: None,
                events: None,
                mac: None,
                sleep: None,
            },
            started_tx,
        )
        .unwrap();
        assert!(started_rx.recv().unwrap().1.is_ok());
        assert!(snapshot(&w.slot).online);

        let err = send_switch(&w).unwrap_err();
        assert!(
            matches!(&err, Error::WorkerFailed { message, .. } if message == "driver bug"),
            "{err}"
        );
        // During the back-off commands answer at once with the reason and the wait; the device is offline.
        let err = send_refresh(&w).unwrap_err();
        assert!(err.to_string().contains("restarts in 1.0 s"), "{err}");
        let snap = snapshot(&w.slot);
        assert!(!snap.online);
        assert!(snap.last_error.as_deref().unwrap().contains("driver bug"));
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 0);

        // After the back-off the next command gets a fresh driver and the device reads normally.
        *clock.lock().unwrap() += std::time::Duration::from_secs(1);
        send_refresh(&w).unwrap();
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 1);
        let snap = snapshot(&w.slot);
        assert!(snap.online);
        assert_eq!(snap.last_error, None);

        // It panics again: a successful read in between started the back-off over.
        assert!(send_switch(&w).is_err());
        let err = send_refresh(&w).unwrap_err();
        assert!(err.to_string().contains("restarts in 1.0 s"), "{err}");
        drop(w.tx);
        w.thread.join().unwrap();
    }

    #[test]
    fn a_driver_that_cannot_be_rebuilt_stays_failed_with_a_growing_wait() {
        let factory: Factory = Box::new(|_, _| {
            Err(Error::Unsupported {
                device: "Boom (ID: 7)".into(),
                message: "gone".into(),
            })
        });
        let (now, clock) = crate::actor::restart::tests::manual();
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let w = spawn(
            device(),
            Box::new(Exploding),
            factory,
            now,
            Links {
                liveness: liveness(),
                inbox: Arc::default(),
                peers: Arc::default(),
                refreshes: false,
                follow: None,
                events: None,
                mac: None,
                sleep: None,
            },
            started_tx,
        )
        .unwrap();
        assert!(started_rx.recv().unwrap().1.is_ok());
        assert!(send_switch(&w).is_err());
        *clock.lock().unwrap() += std::time::Duration::from_secs(1);
        let err = send_refresh(&w).unwrap_err();
        assert!(err.to_string().contains("gone"), "{err}");
        assert!(!snapshot(&w.slot).online);
        let err = send_refresh(&w).unwrap_err();
        assert!(err.to_string().contains("restarts in 2.0 s"), "{err}");
        drop(w.tx);
        w.thread.join().unwrap();
    }
}
