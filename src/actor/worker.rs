//! The per-device worker: one thread (`sd-dev-<ID>`) owns the device's driver and state, takes commands from a
//! channel and publishes an immutable snapshot after each one, so readers never wait for device I/O.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use crate::driver::{Driver, Liveness, OutputAction};
use crate::error::{Error, Result};
use crate::objects::{ComponentKind, Device, OutputChange};

/// Worker threads mostly wait on sockets and parse small JSON bodies; 256 KiB is ample and keeps 1,000 workers
/// cheap in address space.
const STACK_SIZE: usize = 256 * 1024;

/// Commands from callers and the supervisor. Each carries its own reply channel.
pub(crate) enum Command {
    /// Read the device's state; `reply` is `None` for background refreshes.
    Refresh {
        /// Where the result goes.
        reply: Option<Sender<Result<()>>>,
    },
    /// A webhook said a component changed: take the new state at once, then read the device.
    Hook {
        /// Input or output.
        kind: ComponentKind,
        /// Channel (0-based).
        index: usize,
        /// The state the event implies, if any.
        state: Option<bool>,
    },
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
}

/// The latest published snapshot of a device, shared with readers.
pub(crate) type Slot = Arc<RwLock<Arc<Device>>>;

/// Reads the snapshot in a slot.
pub(crate) fn snapshot(slot: &Slot) -> Arc<Device> {
    slot.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A running worker as the controller sees it.
pub(crate) struct Worker {
    /// Command inbox of the worker.
    pub tx: Sender<Command>,
    /// Its published state.
    pub slot: Slot,
    /// Its thread, joined on close.
    pub thread: JoinHandle<()>,
}

/// Starts the worker thread for `device`. The result of the driver's `start` is sent on `started`.
pub(crate) fn spawn(
    device: Device,
    driver: Box<dyn Driver>,
    liveness: Liveness,
    started: Sender<(i64, Result<()>)>,
) -> std::io::Result<Worker> {
    // Callers block on their replies, so a small inbox is enough (each slot costs memory in every one of
    // possibly thousands of workers); when it is full, senders wait (back-pressure) and background checks are
    // skipped by the supervisor's try_send.
    let (tx, rx) = crossbeam_channel::bounded(8);
    let device = Arc::new(device);
    let slot: Slot = Arc::new(RwLock::new(Arc::clone(&device)));
    let state = State {
        device,
        driver,
        liveness,
        failed: None,
        slot: slot.clone(),
    };
    let builder = std::thread::Builder::new()
        .name(format!("sd-dev-{}", state.device.id))
        .stack_size(STACK_SIZE);
    // The worker's records belong to the controller that starts it (see log_scope).
    let thread = crate::log_scope::spawn(builder, move || state.run(rx, started))?;
    Ok(Worker { tx, slot, thread })
}

struct State {
    /// Shared with the published snapshot until the next change (copy-on-write), so a quiet device costs
    /// one copy, not two.
    device: Arc<Device>,
    driver: Box<dyn Driver>,
    liveness: Liveness,
    failed: Option<String>,
    slot: Slot,
}

impl State {
    fn run(mut self, rx: Receiver<Command>, started: Sender<(i64, Result<()>)>) {
        let result = self.op(|dev, drv| drv.read(dev, Some(1)));
        if let Err(e) = &result
            && !self.device.online
        {
            // No transition happened (it starts offline), but an unreachable device at start deserves a word.
            let d = &self.device;
            if d.expect_offline {
                log::debug!("device {} is offline at start (expected): {e}", d.label());
            } else {
                log::warn!(
                    "device {} is offline at start: {e}; retrying in the background",
                    d.label()
                );
            }
        }
        let _ = started.send((self.device.id, result));
        drop(started);
        // The loop ends when every sender is gone: the controller is closing.
        for cmd in rx.iter() {
            match cmd {
                Command::Refresh { reply } => {
                    let r = self.op(|dev, drv| drv.read(dev, None));
                    if let Some(reply) = reply {
                        let _ = reply.send(r);
                    }
                }
                Command::Hook { kind, index, state } => {
                    let _ = self.op(|dev, drv| {
                        if dev.simulate {
                            // The simulation file is the truth for simulated devices.
                            return Ok(());
                        }
                        apply_hook_state(dev, kind, index, state);
                        drv.read(dev, None)
                    });
                }
                Command::Tick => {
                    let liveness = self.liveness.clone();
                    let _ = self.op(|dev, drv| {
                        if dev.simulate || dev.online || liveness.worth_refresh(dev, drv) {
                            drv.read(dev, None)
                        } else {
                            Err(Error::Offline {
                                device: dev.label(),
                            })
                        }
                    });
                }
                Command::Switch {
                    index,
                    action,
                    reply,
                } => {
                    let r = self.op(|dev, drv| {
                        if index >= dev.outputs.len() {
                            return Err(Error::NotFound {
                                kind: "output",
                                identity: format!("channel {index} of device {}", dev.label()),
                            });
                        }
                        drv.switch(dev, index, action)
                    });
                    // The caller may have given up; that is not an error here.
                    let _ = reply.send(r);
                }
            }
        }
    }

    /// Runs one driver operation, records its outcome on the device, logs Online transitions and publishes.
    fn op<T>(&mut self, f: impl FnOnce(&mut Device, &mut dyn Driver) -> Result<T>) -> Result<T> {
        if let Some(message) = &self.failed {
            return Err(Error::WorkerFailed {
                device: self.device.label(),
                message: message.clone(),
            });
        }
        let was_online = self.device.online;
        let driver = &mut *self.driver;
        let dev = Arc::make_mut(&mut self.device);
        let outcome = catch_unwind(AssertUnwindSafe(|| f(dev, driver)));
        let dev = Arc::make_mut(&mut self.device);
        let result = match outcome {
            Ok(r) => r,
            Err(payload) => {
                let message = panic_message(&*payload);
                log::error!("device {}: worker panicked: {message}", dev.label());
                self.failed = Some(message.clone());
                dev.online = false;
                Err(Error::WorkerFailed {
                    device: dev.label(),
                    message,
                })
            }
        };
        match &result {
            Ok(_) => dev.last_error = None,
            Err(e) => dev.last_error = Some(e.reason()),
        }
        self.log_transition(was_online);
        *self.slot.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&self.device);
        result
    }

    /// Logs each Online change once: a warning for an unexpected loss, nothing above debug for devices that
    /// are expected to go offline.
    fn log_transition(&self, was_online: bool) {
        let d = &self.device;
        if was_online == d.online {
            return;
        }
        let why = d.last_error.as_deref().unwrap_or("no answer");
        match (d.online, d.expect_offline) {
            (true, false) => log::info!("device {} is online", d.label()),
            (true, true) => log::debug!("device {} is online", d.label()),
            (false, false) => log::warn!("device {} went offline: {why}", d.label()),
            (false, true) => log::debug!("device {} is offline (expected): {why}", d.label()),
        }
    }
}

/// Sets the state a webhook implies on an input or output (no-op for other kinds or unknown channels).
pub(crate) fn apply_hook_state(
    dev: &mut Device,
    kind: ComponentKind,
    index: usize,
    state: Option<bool>,
) {
    let Some(on) = state else { return };
    match kind {
        ComponentKind::Input => {
            if let Some(i) = dev.inputs.get_mut(index) {
                i.state = on;
            }
        }
        ComponentKind::Output => {
            if let Some(o) = dev.outputs.get_mut(index) {
                o.state = on;
            }
        }
        _ => {}
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

    /// A driver that panics when asked to switch, to prove a panic stays inside its worker.
    struct Exploding;

    impl Driver for Exploding {
        fn read(&mut self, dev: &mut Device, _attempts: Option<u32>) -> Result<()> {
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

    #[test]
    fn a_panic_marks_the_device_failed_and_the_worker_keeps_answering() {
        let dev = Device {
            id: 7,
            name: "Boom".into(),
            outputs: vec![Output::default()],
            ..Device::default()
        };
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let liveness = Liveness {
            ping_allowed: false,
            timeout: std::time::Duration::from_secs(1),
            closing: Arc::default(),
        };
        let w = spawn(dev, Box::new(Exploding), liveness, started_tx).unwrap();
        assert!(started_rx.recv().unwrap().1.is_ok());
        let (reply, rx) = crossbeam_channel::bounded(1);
        w.tx.send(Command::Switch {
            index: 0,
            action: OutputAction::On,
            reply,
        })
        .unwrap();
        let err = rx.recv().unwrap().unwrap_err();
        assert!(
            matches!(&err, Error::WorkerFailed { message, .. } if message == "driver bug"),
            "{err}"
        );
        // Later commands get the same error instead of hanging, and the snapshot says what happened.
        let (reply, rx) = crossbeam_channel::bounded(1);
        w.tx.send(Command::Refresh { reply: Some(reply) }).unwrap();
        assert!(matches!(
            rx.recv().unwrap(),
            Err(Error::WorkerFailed { .. })
        ));
        let snap = snapshot(&w.slot);
        assert!(!snap.online);
        assert!(snap.last_error.as_deref().unwrap().contains("driver bug"));
        drop(w.tx);
        w.thread.join().unwrap();
    }
}
