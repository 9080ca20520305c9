//! Sleeping devices (`DeviceSpec::sleep`): one thread `sd-emu-sleep` wakes each when its period passed on the
//! emulator clock (a manual clock: on `advance`, within a few milliseconds). Awake, a device answers HTTP,
//! connects to the outbound WebSocket server its `Ws.SetConfig` named, pushes `NotifyFullStatus` (its whole
//! status, with `ts`), closes, and sleeps again: its port refuses connections, like a radio switched off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use super::Fault;
use super::components;
use super::device::Device;
use super::server::Response;

/// How often the thread looks at the clock (a manual clock does not wake anyone).
const LOOK: Duration = Duration::from_millis(10);

/// The running thread; [`Sleeper::stop`] ends it.
pub(crate) struct Sleeper {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Sleeper {
    /// Puts the sleeping devices to sleep and starts the thread; `None` when no device sleeps.
    pub(crate) fn start(devices: Arc<Vec<Arc<Device>>>) -> std::io::Result<Option<Sleeper>> {
        if devices.iter().all(|d| d.ws_out.period.is_none()) {
            return Ok(None);
        }
        for d in devices.iter().filter(|d| d.ws_out.period.is_some()) {
            d.set_fault(Fault::Refuse);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sd-emu-sleep".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                while !flag.load(Ordering::SeqCst) {
                    for d in devices.iter() {
                        if d.ws_out.due(d.clock.instant()) {
                            wake(d);
                        }
                    }
                    std::thread::sleep(LOOK);
                }
            })?;
        Ok(Some(Sleeper { stop, thread }))
    }

    /// Ends the thread (a wake-up in progress finishes first: a few seconds at most).
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// One wake-up: awake, report, asleep again (unless held awake). True when the report went out.
pub(crate) fn wake(d: &Device) -> bool {
    if d.ws_out.period.is_none() {
        return false;
    }
    let held = d.ws_out.held();
    if !held {
        d.set_fault(Fault::None);
    }
    let sent = match d.ws_out.server() {
        Some(server) => {
            let mut status = components::status(d, &d.state());
            status.insert("ts".into(), json!((d.clock.unix() * 100.0).round() / 100.0));
            let frame = json!({"src": d.ident.id, "dst": "ws", "method": "NotifyFullStatus",
                               "params": Value::Object(status)});
            let text =
                String::from_utf8_lossy(&Response::json_whole(200, &frame).body).into_owned();
            match d.ws_out.report(&server, &[text]) {
                Ok(()) => true,
                Err(e) => {
                    log::debug!("emulator: device {} could not report: {e}", d.ident.id);
                    false
                }
            }
        }
        None => false,
    };
    if !d.ws_out.held() {
        d.set_fault(Fault::Refuse);
    }
    sent
}

/// Holds a sleeping device awake, or lets it sleep.
pub(crate) fn set_awake(d: &Device, awake: bool) {
    if d.ws_out.period.is_none() {
        return;
    }
    d.ws_out.set_held(awake);
    d.set_fault(if awake { Fault::None } else { Fault::Refuse });
}
